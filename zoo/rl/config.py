"""TD3 hyperparameters: one documented dataclass and the two published presets.

* ``rl-zoo``: rl-baselines3-zoo's ``hyperparams/td3.yml`` (per environment where the file tunes one,
  its MuJoCo defaults otherwise), on top of Stable-Baselines3's TD3 defaults (tau 0.005, policy delay
  2, target noise 0.2 clipped at 0.5). https://github.com/DLR-RM/rl-baselines3-zoo
* ``fujimoto``: the authors' reference implementation (https://github.com/sfujim/TD3, ``main.py``).

All noises are in the actor's normalised action space [-1, 1] (as SB3 does); for a symmetric Box this
is the same as Fujimoto's ``max_action * noise``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from zoo.engine.precision import normalize_amp

__all__ = ["PRESETS", "TD3Config", "preset_config"]


@dataclass(frozen=True)
class TD3Config:
    """Everything that defines a TD3 agent and its update (Fujimoto et al. 2018,
    https://arxiv.org/abs/1802.09477)."""

    net_arch: tuple[int, ...] = (400, 300)
    """Hidden layer widths, shared by the actor and each of the twin critics."""
    actor_lr: float = 1e-3
    critic_lr: float = 1e-3
    buffer_size: int = 1_000_000
    """Replay capacity (transitions); the oldest are overwritten once full."""
    learning_starts: int = 10_000
    """Uniform random actions, and no updates, for this many environment steps."""
    batch_size: int = 256
    gamma: float = 0.99
    tau: float = 0.005
    """Polyak coefficient: ``target <- (1 - tau) target + tau online`` after each actor update."""
    policy_delay: int = 2
    """The actor and the targets are updated once every ``policy_delay`` critic updates."""
    target_policy_noise: float = 0.2
    """Std of the Gaussian smoothing noise added to the target action (normalised units)."""
    target_noise_clip: float = 0.5
    exploration_noise: float = 0.1
    """Std of the Gaussian noise added to the actor's action while collecting (normalised units)."""
    train_freq: int = 1
    """Environment steps (per env) between update phases."""
    gradient_steps: int = 1
    """Gradient steps per update phase; -1 means as many as environment transitions collected."""
    amp: str | None = "auto"
    """Precision of the update's GEMMs: ``"auto"`` (bf16 where this CPU/GPU has native bf16 GEMMs that
    were measured faster, fp32 otherwise; see :mod:`zoo.engine.precision`), ``"bf16"`` or ``None``
    (fp32). Master weights, Adam and the soft update stay fp32 either way."""

    def __post_init__(self) -> None:
        problems = []
        if not self.net_arch or any(int(w) <= 0 for w in self.net_arch):
            problems.append(f"net_arch must be positive widths, got {self.net_arch!r}")
        for name in ("buffer_size", "batch_size", "policy_delay", "train_freq"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.learning_starts < 0:
            problems.append(f"learning_starts must be >= 0, got {self.learning_starts!r}")
        if not (self.gradient_steps >= 1 or self.gradient_steps == -1):
            problems.append(f"gradient_steps must be >= 1 or -1, got {self.gradient_steps!r}")
        if not 0.0 <= self.tau <= 1.0:
            problems.append(f"tau must be in [0, 1], got {self.tau!r}")
        if not 0.0 <= self.gamma <= 1.0:
            problems.append(f"gamma must be in [0, 1], got {self.gamma!r}")
        try:  # spellings: "none"/"fp32" -> None, "bfloat16" -> "bf16"
            object.__setattr__(self, "amp", normalize_amp(self.amp, allow_fp16=False))
        except ValueError as err:
            problems.append(str(err))
        for name in ("actor_lr", "critic_lr"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("target_policy_noise", "target_noise_clip", "exploration_noise"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if problems:
            raise ValueError("invalid TD3 config: " + "; ".join(problems))
        object.__setattr__(self, "net_arch", tuple(int(w) for w in self.net_arch))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["net_arch"] = list(self.net_arch)
        return d

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


# rl-baselines3-zoo td3.yml: "&mujoco-defaults" applies to every MuJoCo env it lists; we use it for any
# env the file does not tune (SB3 defaults fill the rest).
_RL_ZOO_DEFAULT: dict[str, Any] = {
    "net_arch": (400, 300), "actor_lr": 1e-3, "critic_lr": 1e-3, "buffer_size": 1_000_000, "learning_starts": 10_000,
    "batch_size": 256, "gamma": 0.99, "exploration_noise": 0.1, "train_freq": 1, "gradient_steps": 1,
}
_RL_ZOO_ENVS: dict[str, dict[str, Any]] = {
    "Pendulum-v1": {"gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "exploration_noise": 0.1},
}
_FUJIMOTO: dict[str, Any] = {
    "net_arch": (256, 256), "actor_lr": 3e-4, "critic_lr": 3e-4, "buffer_size": 1_000_000, "learning_starts": 25_000,
    "batch_size": 256, "gamma": 0.99, "tau": 0.005, "exploration_noise": 0.1, "target_policy_noise": 0.2,
    "target_noise_clip": 0.5, "policy_delay": 2, "train_freq": 1, "gradient_steps": 1,
}
PRESETS: tuple[str, ...] = ("rl-zoo", "fujimoto")


def preset_config(preset: str, env_id: str, **overrides: Any) -> TD3Config:
    """The preset's hyperparameters for ``env_id``, with ``overrides`` (TD3Config fields) on top."""
    if preset == "rl-zoo":
        base = {**_RL_ZOO_DEFAULT, **_RL_ZOO_ENVS.get(env_id, {})}
    elif preset == "fujimoto":
        base = dict(_FUJIMOTO)
    else:
        raise ValueError(f"unknown TD3 preset {preset!r}; presets: {', '.join(PRESETS)}")
    unknown = [k for k in overrides if k not in TD3Config.field_names()]
    if unknown:
        raise TypeError(f"unknown TD3 config key(s) {unknown}; valid keys: {', '.join(TD3Config.field_names())}")
    return TD3Config(**{**base, **overrides})
