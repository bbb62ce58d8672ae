"""TD3 hyperparameters: one documented dataclass and the two published presets.

* ``rl-zoo``: rl-baselines3-zoo's ``hyperparams/td3.yml``, per environment it lists (the action noise type
  included: Ornstein-Uhlenbeck for MountainCarContinuous-v0; its MuJoCo v4 entries also serve v5), on top
  of Stable-Baselines3's TD3 defaults (learning_starts 100, tau 0.005, policy delay 2, target noise 0.2
  clipped at 0.5), which with td3.yml's ``default`` entry (normal noise 0.1) is also what an env it does
  not list gets. https://github.com/DLR-RM/rl-baselines3-zoo
* ``fujimoto``: the authors' reference implementation (https://github.com/sfujim/TD3, ``main.py``).

All noises are in the actor's normalised action space [-1, 1] (as SB3 does); for a symmetric Box this
is the same as Fujimoto's ``max_action * noise``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from zoo.config import check_value, config_types
from zoo.engine.precision import normalize_amp

__all__ = ["NOISE_TYPES", "PRESETS", "TD3Config", "preset_config", "suggested_total_steps"]

NOISE_TYPES: tuple[str, ...] = ("normal", "ornstein-uhlenbeck")


@dataclass(frozen=True)
class TD3Config:
    """Everything that defines a TD3 agent and its update (Fujimoto et al. 2018,
    https://arxiv.org/abs/1802.09477)."""

    net_arch: tuple[int, ...] = (400, 300)
    """Hidden layer widths, shared by the actor and each of the twin critics."""
    actor_lr: float = 1e-3
    critic_lr: float = 1e-3
    lr_schedule: str = "constant"
    """``"constant"``, or ``"linear"``: SB3's ``lin_<lr>``, the lr times the fraction of ``total_steps``
    still to go (from the lr at step 0 to 0 at the end)."""
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
    """Scale of the exploration noise added to the actor's action while collecting (normalised units): the
    std of the Gaussian noise, or the sigma of the Ornstein-Uhlenbeck process."""
    noise_type: str = "normal"
    """Exploration noise: ``"normal"`` (independent Gaussian per step) or ``"ornstein-uhlenbeck"``
    (temporally correlated, :class:`zoo.rl.noise.OrnsteinUhlenbeckNoise`; theta 0.15, dt 0.01 as SB3's)."""
    train_freq: int = 1
    """Environment steps (per env) between update phases."""
    gradient_steps: int = 1
    """Gradient steps per update phase; -1 means as many as environment transitions collected."""
    amp: str | None = "auto"
    """Precision of the update's GEMMs: ``"auto"`` (bf16 where this CPU/GPU has native bf16 GEMMs that
    were measured faster, fp32 otherwise; see :mod:`zoo.engine.precision`), ``"bf16"`` or ``None``
    (fp32). Master weights, Adam and the soft update stay fp32 either way."""
    skip_silent_units: bool = False
    """In fp32 on the CPU, the backward multiplies only the hidden units that some transition of the batch
    activates, once at most 65 % of a layer's do (:func:`zoo.rl.networks.live_units`): the same gradients up to
    the order of the sums, so a run's parameters differ from the default's in their last bits. Measured on
    an AMD EPYC Zen 3 only: the update 1.11-1.18x the default's speed at 1 thread and 0.95-1.13x at 2
    (``benchmarks/td3_update.py``; half of the trained critics' second layer is silent), learning Pendulum
    0.94-1.58x per seed, inside that VM's drift (``benchmarks/td3_vs_sb3.py``); hence off by default."""

    def __post_init__(self) -> None:
        # every value as the Python number (or tuple) its type names, whichever way it came (a builder's keyword,
        # zoo.train's lr=np.float32(1e-3), dataclasses.replace): the config is saved as JSON with the weights
        for name, tp in config_types(type(self)).items():
            object.__setattr__(self, name, check_value("td3", name, getattr(self, name), tp))
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
        # written so that NaN fails them (NaN <= 0 is False): a NaN rate or noise made NaN actions, which
        # the run then blamed on the env's observations
        for name in ("actor_lr", "critic_lr"):
            if not 0 < getattr(self, name) < math.inf:
                problems.append(f"{name} must be a finite number > 0, got {getattr(self, name)!r}")
        for name in ("target_policy_noise", "target_noise_clip", "exploration_noise"):
            if not 0 <= getattr(self, name) < math.inf:
                problems.append(f"{name} must be a finite number >= 0, got {getattr(self, name)!r}")
        if self.noise_type not in NOISE_TYPES:
            problems.append(f"noise_type must be one of {', '.join(NOISE_TYPES)}, got {self.noise_type!r}")
        if self.lr_schedule not in ("constant", "linear"):
            problems.append(f"lr_schedule must be 'constant' or 'linear', got {self.lr_schedule!r}")
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


# Stable-Baselines3's TD3 defaults (stable_baselines3/td3/td3.py and td3/policies.py: net_arch [400, 300]) with
# rl-baselines3-zoo's `default:` entry of td3.yml on top (normal noise of std 0.1): what rl-zoo trains an env
# it does not list with.
_SB3_TD3: dict[str, Any] = {
    "net_arch": (400, 300), "actor_lr": 1e-3, "critic_lr": 1e-3, "lr_schedule": "constant", "buffer_size": 1_000_000,
    "learning_starts": 100, "batch_size": 256, "gamma": 0.99, "tau": 0.005, "policy_delay": 2,
    "target_policy_noise": 0.2, "target_noise_clip": 0.5, "noise_type": "normal", "exploration_noise": 0.1,
    "train_freq": 1, "gradient_steps": 1,
}


def _lr(lr: float, schedule: str = "constant") -> dict[str, Any]:
    """rl-zoo's one ``learning_rate`` (SB3's TD3 has one optimizer lr) -> actor_lr and critic_lr."""
    return {"actor_lr": lr, "critic_lr": lr, "lr_schedule": schedule}


# rl-baselines3-zoo hyperparams/td3.yml (commit 22e3ff2450fd92033f7f032915e1f64894a09584), entry by entry, as
# TD3Config fields; what an entry does not set is _SB3_TD3's. noise_std -> exploration_noise, learning_rate ->
# actor_lr = critic_lr, "lin_7e-4" -> lr 7e-4 with lr_schedule "linear", policy_kwargs net_arch -> net_arch.
_PENDULUM_LIKE = {"gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, **_lr(1e-3)}
_PYBULLET = {"gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "batch_size": 256, **_lr(7e-4)}
_MUJOCO = {"learning_starts": 10_000, "batch_size": 256, **_lr(1e-3)}
_RL_ZOO_ENVS: dict[str, dict[str, Any]] = {
    "MountainCarContinuous-v0": {"noise_type": "ornstein-uhlenbeck", "exploration_noise": 0.5, "batch_size": 256,
                                 **_lr(1e-3)},
    "Pendulum-v1": _PENDULUM_LIKE,
    "LunarLanderContinuous-v3": _PENDULUM_LIKE,
    "BipedalWalker-v3": _PENDULUM_LIKE,
    "BipedalWalkerHardcore-v3": {"gamma": 0.99, "buffer_size": 1_000_000, "learning_starts": 10_000,
                                 "batch_size": 256, **_lr(7e-4, "linear")},
    "HalfCheetahBulletEnv-v0": _PYBULLET,
    "AntBulletEnv-v0": _PYBULLET,
    "HopperBulletEnv-v0": _PYBULLET,
    "Walker2DBulletEnv-v0": _PYBULLET,
    "HumanoidBulletEnv-v0": {"gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, **_lr(1e-3)},
    "ReacherBulletEnv-v0": _PYBULLET,
    "InvertedDoublePendulumBulletEnv-v0": _PYBULLET,
    "InvertedPendulumSwingupBulletEnv-v0": _PYBULLET,
    "MinitaurBulletEnv-v0": {"gamma": 0.99, "buffer_size": 1_000_000, "learning_starts": 10_000, "batch_size": 256,
                             **_lr(1e-3)},
    "HalfCheetah-v4": _MUJOCO,
    "Ant-v4": _MUJOCO,
    "Hopper-v4": _MUJOCO,
    "Walker2d-v4": _MUJOCO,
    "Humanoid-v4": _MUJOCO,
    "Swimmer-v4": {**_MUJOCO, "gamma": 0.9999},
}
# td3.yml's n_timesteps: the training length rl-zoo runs (and reports its scores at) per env
_RL_ZOO_STEPS: dict[str, int] = {
    "MountainCarContinuous-v0": 300_000, "Pendulum-v1": 20_000, "LunarLanderContinuous-v3": 300_000,
    "BipedalWalker-v3": 1_000_000, "BipedalWalkerHardcore-v3": 10_000_000, "HalfCheetahBulletEnv-v0": 1_000_000,
    "AntBulletEnv-v0": 1_000_000, "HopperBulletEnv-v0": 1_000_000, "Walker2DBulletEnv-v0": 1_000_000,
    "HumanoidBulletEnv-v0": 2_000_000, "ReacherBulletEnv-v0": 300_000, "InvertedDoublePendulumBulletEnv-v0": 1_000_000,
    "InvertedPendulumSwingupBulletEnv-v0": 300_000, "MinitaurBulletEnv-v0": 1_000_000, "HalfCheetah-v4": 1_000_000,
    "Ant-v4": 1_000_000, "Hopper-v4": 1_000_000, "Walker2d-v4": 1_000_000, "Humanoid-v4": 2_000_000,
    "Swimmer-v4": 1_000_000,
}
_RL_ZOO_DEFAULT_STEPS = 1_000_000  # td3.yml's default: n_timesteps 1e6
# td3.yml lists the MuJoCo envs as v4; gymnasium's v5 of them has the same observation and action spaces and
# dynamics up to bug fixes, so rl-zoo's v4 hyperparameters are used for v5 too (rl-zoo has no v5 entries).
_RL_ZOO_ENVS.update({k.replace("-v4", "-v5"): v for k, v in _RL_ZOO_ENVS.items() if k.endswith("-v4")})
_RL_ZOO_STEPS.update({k.replace("-v4", "-v5"): v for k, v in _RL_ZOO_STEPS.items() if k.endswith("-v4")})

_FUJIMOTO: dict[str, Any] = {
    "net_arch": (256, 256), "actor_lr": 3e-4, "critic_lr": 3e-4, "buffer_size": 1_000_000, "learning_starts": 25_000,
    "batch_size": 256, "gamma": 0.99, "tau": 0.005, "exploration_noise": 0.1, "target_policy_noise": 0.2,
    "target_noise_clip": 0.5, "policy_delay": 2, "train_freq": 1, "gradient_steps": 1,
}
_FUJIMOTO_STEPS = 1_000_000  # main.py --max_timesteps
PRESETS: tuple[str, ...] = ("rl-zoo", "fujimoto")


def preset_config(preset: str, env_id: str, **overrides: Any) -> TD3Config:
    """The preset's hyperparameters for ``env_id``, with ``overrides`` (TD3Config fields) on top."""
    if preset == "rl-zoo":
        base = {**_SB3_TD3, **_RL_ZOO_ENVS.get(env_id, {})}
    elif preset == "fujimoto":
        base = dict(_FUJIMOTO)
    else:
        raise ValueError(f"unknown TD3 preset {preset!r}; presets: {', '.join(PRESETS)}")
    unknown = [k for k in overrides if k not in TD3Config.field_names()]
    if unknown:
        raise TypeError(f"unknown TD3 config key(s) {unknown}; valid keys: {', '.join(TD3Config.field_names())}")
    return TD3Config(**{**base, **overrides})


def suggested_total_steps(preset: str, env_id: str) -> int:
    """The training length the preset's source runs ``env_id`` for: rl-zoo's ``n_timesteps`` (1e6 for an env
    td3.yml does not list), Fujimoto's ``max_timesteps`` (1e6). A suggestion for ``total_steps``; nothing
    uses it by default."""
    if preset == "rl-zoo":
        return _RL_ZOO_STEPS.get(env_id, _RL_ZOO_DEFAULT_STEPS)
    if preset == "fujimoto":
        return _FUJIMOTO_STEPS
    raise ValueError(f"unknown TD3 preset {preset!r}; presets: {', '.join(PRESETS)}")
