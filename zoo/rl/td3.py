"""The TD3 agent: twin delayed deep deterministic policy gradient.

Fujimoto, van Hoof, Meger, "Addressing Function Approximation Error in Actor-Critic Methods", ICML 2018,
https://arxiv.org/abs/1802.09477. Three changes over DDPG: the clipped double-Q target (the minimum of
two critics), target policy smoothing (clipped Gaussian noise on the target action), and delayed actor
and target updates.

Speed notes (measured in benchmarks/td3_vs_sb3.py, which also reports the update time as a fraction
of the GEMM roofline): at these sizes an update is its GEMMs plus per-op overhead, so the update
(1) samples all fields with one row gather from a single buffer table, (2) runs its forward and
backward as explicit GEMMs (:mod:`zoo.rl.networks`; no autograd graph), with the actor's gradient
through the first critic's input only, (3) keeps each network's parameters, gradients and Adam moments
as views of flat buffers (:mod:`zoo.rl.flat`), so an optimizer step, a soft update or a bf16 refresh is
one vectorised kernel, and (4) runs in bf16 only where ``amp="auto"`` finds native bf16 GEMMs
(:mod:`zoo.engine.precision`; an AVX2-only CPU computes bf16 10-60x slower than fp32).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import os
from typing import Any, ClassVar

import numpy as np
import torch

from zoo.api import ModelState, check_seed
from zoo.engine.devices import same_device, usable_device
from zoo.engine.precision import resolve_amp
from zoo.rl import networks as nets
from zoo.rl import normalization, resume
from zoo.rl.buffer import Batch, ReplayBuffer
from zoo.rl.config import TD3Config
from zoo.rl.flat import FlatAdam, FlatParams
from zoo.rl.networks import Actor, TwinCritic
from zoo.rl.noise import OrnsteinUhlenbeckNoise
from zoo.rl.resume import CHECKPOINT_FORMAT, RESUME_APPLIED
from zoo.rl.run import LiveEpisodes, WrittenCheckpoint
from zoo.rl.weights import checkpoint_build_config, load_weights

__all__ = ["CHECKPOINT_FORMAT", "RESUME_APPLIED", "TD3Agent", "check_spaces", "checkpoint_build_config"]


def check_spaces(observation_space: Any, action_space: Any, env_id: str = "env") -> tuple[int, int]:
    """Validate that TD3 can act in these spaces; returns ``(obs_dim, act_dim)`` or raises ValueError.
    ``obs_dim`` counts the values of one observation: an array of state variables of any shape is read flat."""
    from gymnasium import spaces

    # ValueError (not TypeError): an unsupported env is a bad value of the `env` config, reported as such
    if not isinstance(action_space, spaces.Box):
        raise ValueError(  # noqa: TRY004
            f"{env_id}: TD3 needs a continuous Box action space, got {action_space!r} "
            "(for discrete actions use a DQN-style agent)"
        )
    low, high = np.asarray(action_space.low, np.float64), np.asarray(action_space.high, np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError(
            f"{env_id}: TD3 needs finite action bounds to rescale its tanh output, got low={low.tolist()} "
            f"high={high.tolist()}; wrap the env in gymnasium.wrappers.RescaleAction(env, min_action, max_action) "
            "with finite bounds"
        )
    if np.any(high <= low):
        raise ValueError(f"{env_id}: action bounds must satisfy high > low, got low={low} high={high}")
    if action_space.shape is None or len(action_space.shape) != 1:
        raise ValueError(f"{env_id}: TD3 needs a 1-D action vector, got action shape {action_space.shape}")
    if not isinstance(observation_space, spaces.Box):
        raise ValueError(  # noqa: TRY004
            f"{env_id}: TD3's MLP needs a flat Box observation space, got {observation_space!r} "
            "(flatten Dict/Tuple observations with gymnasium.wrappers.FlattenObservation)"
        )
    shape = observation_space.shape
    if _is_image(shape, observation_space.dtype):
        raise ValueError(
            f"{env_id}: pixel observations of shape {shape} need an encoder (a CNN); TD3 here takes flat vector "
            "observations (shape (n,)): use the env's state observations"
        )
    if 0 in shape:
        raise ValueError(f"{env_id}: the observation space has no values (shape {shape})")
    # an array of state variables, (2, 3) say, is read flat, as SB3's MlpPolicy reads it (TD3Agent._obs_tensor)
    return int(np.prod(shape)), int(action_space.shape[0])


def _is_image(shape: tuple[int, ...], dtype: Any) -> bool:
    """SB3's ``is_image_space``: uint8 ``(H, W, C)`` or ``(C, H, W)`` with 1, 3 or 4 channels. Any other Box is
    state variables, read flat (a float (2, 2, 2) grid of sensor values was refused as pixels)."""
    return len(shape) == 3 and np.dtype(dtype) == np.uint8 and (shape[0] in (1, 3, 4) or shape[-1] in (1, 3, 4))


def _finite_number(x: Any) -> bool:
    """Whether ``x`` is a finite number (in float64): one that float32 turned into inf was out of its range."""
    try:
        return bool(np.isfinite(float(x)))
    except (TypeError, ValueError):
        return False


class TD3Agent:
    """A TD3 agent for one observation/action space; implements ``zoo.api.Trainable``.

    Build it with ``zoo.build("td3", env="Pendulum-v1", preset="rl-zoo")``; train with
    ``zoo.train(agent, env=..., total_steps=...)``; act with ``agent.act(obs)``. Stable-Baselines3's
    ``learn`` and ``predict`` work too (:meth:`learn`, :meth:`predict`).

    Built or trained on an env that its bare id does not make again (wrappers such as ``RescaleAction``,
    ``gym.make`` kwargs), the agent keeps that env's spec (``env_spec``: its env from then on,
    :func:`zoo.rl.envspec.own_spec`); behind gymnasium's ``NormalizeObservation`` / ``NormalizeReward`` it
    keeps those wrappers' running statistics too (``normalization``, :mod:`zoo.rl.normalization`): its
    weights files and checkpoints carry both, and the env a loaded agent evaluates on gets the statistics it
    trained with. ``act`` and ``predict`` take
    observations as the env hands them, normalised.
    """

    # where zoo_train's and zoo_evaluate's **config go (zoo.registry.call_options reads it)
    zoo_options_of: ClassVar[dict[str, str]] = {"zoo_train": "zoo.rl.loop.train", "zoo_evaluate": "zoo.rl.evaluation.evaluate"}

    registry_name = "td3"  # the name zoo.build knows it by, as every zoo model has

    def __init__(
        self,
        observation_space: Any,
        action_space: Any,
        config: TD3Config,
        *,
        env_id: str | None = None,
        preset: str | None = None,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        self.obs_dim, self.act_dim = check_spaces(observation_space, action_space, env_id or "env")
        self.obs_shape = tuple(int(n) for n in observation_space.shape)  # (obs_dim,) unless read flat
        self.observation_space, self.action_space = observation_space, action_space
        # checked as zoo.train's seed= is: -1 was taken, then refused by gymnasium's first reset ("Seed must be
        # greater or equal to zero"), and 2**64 was torch's "Overflow when unpacking long long"
        self.config, self.env_id, self.preset, self.seed = config, env_id, preset, check_seed(seed)
        self.device = usable_device(device)
        low = torch.as_tensor(np.asarray(action_space.low, np.float32), device=self.device)
        high = torch.as_tensor(np.asarray(action_space.high, np.float32), device=self.device)
        # tanh output a in [-1, 1] -> low + (a + 1) / 2 * (high - low) = center + a * half
        self._act_center, self._act_half = (high + low) / 2, (high - low) / 2
        self._act_low, self._act_high = low, high
        self._low_np, self._high_np = low.cpu().numpy(), high.cpu().numpy()
        # the space's own bounds: float32 cannot hold every float64 bound (0.1 rounds up to 0.10000000149)
        dtype = np.dtype(action_space.dtype)
        self._space_dtype = dtype if np.issubdtype(dtype, np.floating) else np.dtype(np.float32)
        self._space_low = np.asarray(action_space.low, self._space_dtype)
        self._space_high = np.asarray(action_space.high, self._space_dtype)

        # initialise from the seed without disturbing the caller's global torch RNG: the networks are drawn on
        # the CPU, so only its generator is seeded (torch.manual_seed would reseed every GPU's too, for good)
        with torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(self.seed)
            self.actor = Actor(self.obs_dim, self.act_dim, config.net_arch).to(self.device)
            self.critic = TwinCritic(self.obs_dim, self.act_dim, config.net_arch).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        # the optimizers come with the first use that needs them (see _optimizers): an agent built to act
        self._opts: tuple[torch.optim.Adam, torch.optim.Adam] | None = None
        self._adams: tuple[FlatAdam, FlatAdam] | None = None
        self._build_compute_copies()

        # one generator for every random draw the agent makes (exploration, sampling, smoothing noise):
        # its state is all a checkpoint needs to replay them
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed)
        self.buffer: ReplayBuffer | None = None  # allocated on the first zoo_train (its capacity is large)
        self.num_timesteps = 0  # environment transitions collected (over all envs)
        self.num_updates = 0  # critic updates
        self.num_actor_updates = 0
        self.num_episodes = 0
        self.history: list[dict[str, float]] = []
        self.best_state: dict[str, torch.Tensor] | None = None  # actor + critic at the best evaluation
        self.best_step: int | None = None
        self.action_noise: OrnsteinUhlenbeckNoise | None = None  # noise_type "ornstein-uhlenbeck": its state
        # the exploration noise of predict(deterministic=False) / act(explore=True), apart from the run's
        self.prediction_noise: OrnsteinUhlenbeckNoise | None = None
        self._predict_generator: torch.Generator | None = None
        # the running statistics its observations (and rewards) were normalised with, keyed
        # "<kind>.<i>.<field>" (zoo.rl.normalization), empty without them; the spec of the env it trained on
        # where the bare id makes another one (zoo.rl.envspec.own_spec), else None
        self.normalization: dict[str, torch.Tensor] = {}
        self.env_spec: Any = None
        # the env object itself where its spec holds a wrapper gymnasium cannot make again (envspec.default_env)
        self.env_object: Any = None
        # the identity of its env where the weights file it was loaded from could not record that env's spec
        # (envspec.default_env refuses to make the bare id for it)
        self.env_spec_lost: str | None = None
        # every training episode so far ({"step", "return", "length"}: episodes.csv), and the episodes the last
        # zoo.train / learn call left in progress, with its env, which the next call on that env continues
        self.episode_log: list[dict[str, Any]] = []
        self.live_episodes: LiveEpisodes | None = None
        # the td3_last.pt this agent's training last wrote: a later call into that folder goes on with the run
        self.checkpoint_written: WrittenCheckpoint | None = None
        # sums of the critic and actor losses since the last pop_losses(), and how many of each
        self._loss_sum = torch.zeros(2, device=self.device)
        self._loss_n = [0, 0]

    # --- acting -----------------------------------------------------------------------------------

    def scale_action(self, a: torch.Tensor) -> torch.Tensor:
        """Normalised ``[-1, 1]`` -> the env's Box. Clamped into it: in float32 ``center + 1 * half`` can round
        one step past ``high`` (low 2.39814, high 6.6942153 give 6.694216), which an env that checks
        ``action_space.contains`` refuses."""
        return torch.clamp(self._act_center + a * self._act_half, self._act_low, self._act_high)

    def env_action(self, a: torch.Tensor) -> np.ndarray:
        """Normalised ``[-1, 1]`` -> the action handed to the env: :meth:`scale_action` in the action space's
        dtype, clipped to the space's own bounds (as SB3 clips), which a float64 space's may lie inside the
        float32 ones (``Box(-0.1, 0.1, float64)`` refused 0.1 in float32, 0.10000000149)."""
        action = self.scale_action(a).cpu().numpy().astype(self._space_dtype, copy=False)
        return np.clip(action, self._space_low, self._space_high)

    def unscale_action(self, action: torch.Tensor) -> torch.Tensor:
        """The env's Box -> normalised ``[-1, 1]``."""
        return (action - self._act_center) / self._act_half

    def _obs_tensor(self, obs: Any) -> torch.Tensor:
        """``obs`` as ``(obs_dim,)`` or ``(N, obs_dim)``: an observation of the space's own shape (``(2, 3)``)
        is read flat, as are batches of them (``(N, 2, 3)``)."""
        t = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=self.device)
        k = len(self.obs_shape)
        if k == 0 and t.dim() <= 1:  # a scalar Box's observation (), or a batch of them (N,): one value each
            return t.reshape(*t.shape, 1)
        if k > 1 and tuple(t.shape[t.dim() - k:]) == self.obs_shape:
            return t.reshape(*t.shape[:t.dim() - k], self.obs_dim)
        if t.shape[-1:] != (self.obs_dim,):
            shape = "" if k == 1 else f" (or {self.obs_shape}, read flat)"
            raise ValueError(f"observation of shape {tuple(t.shape)}; this agent expects (..., {self.obs_dim}){shape}")
        return t

    @torch.inference_mode()
    def act_normalised(self, obs: Any, explore: bool = False, *, training: bool = True) -> torch.Tensor:
        """The action in ``[-1, 1]`` for ``obs`` of shape ``(obs_dim,)`` or ``(N, obs_dim)``; ``explore`` adds
        the run's exploration noise, or with ``training=False`` noise of the same kind from a source of its
        own (:meth:`_exploration_noise`)."""
        a = self.actor(self._obs_tensor(obs))  # the fp32 master weights (cheap at these batch sizes)
        if explore and self.config.exploration_noise > 0:
            a = (a + self._exploration_noise(a.shape, training)).clamp_(-1.0, 1.0)
        return a

    def _exploration_noise(self, shape: torch.Size, training: bool = True) -> torch.Tensor:
        """This step's noise for actions of ``shape``: Gaussian, or the Ornstein-Uhlenbeck process's next
        value (one state per row; a new process when the batch shape changes). A training run's comes from the
        agent's generator and OU state (what a checkpoint holds); a prediction's (``training=False``) from a
        generator and OU state of its own, so that ``predict(obs, deterministic=False)`` between two
        ``learn`` calls leaves the run's random stream as it was (SB3's TD3 predict draws nothing)."""
        cfg = self.config
        generator, attr = (self.generator, "action_noise") if training else (self._prediction_generator(),
                                                                            "prediction_noise")
        if cfg.noise_type == "normal":
            return torch.randn(shape, generator=generator, device=self.device) * cfg.exploration_noise
        noise = getattr(self, attr)
        if noise is None or noise.x.shape != shape:
            noise = OrnsteinUhlenbeckNoise(cfg.exploration_noise, tuple(shape), device=self.device)
            setattr(self, attr, noise)
        noise.sigma = cfg.exploration_noise  # a resumed run may have changed it
        return noise.sample(generator)

    def _prediction_generator(self) -> torch.Generator:
        """The generator of the predictions' exploration noise: seeded from the agent's seed on first use (a
        stream of its own, not the run's), so the noisy actions of one seed repeat."""
        if self._predict_generator is None:
            self._predict_generator = torch.Generator(device=self.device)
            self._predict_generator.manual_seed((self.seed + 0x9E3779B97F4A7C15) % 2**63)
        return self._predict_generator

    def reset_noise(self, envs: list[int] | None = None, *, training: bool = False) -> None:
        """An episode ended: the correlated exploration noise of those envs (all by default) starts again: that of
        ``act(explore=True)`` / ``predict`` and the training run's, or with ``training=True`` (the loop's own
        episode ends) the run's alone."""
        if self.action_noise is not None:
            self.action_noise.reset(envs)  # an index past the run's envs stays an IndexError
        if not training:
            self._restart_prediction_noise(envs)

    def _restart_prediction_noise(self, envs: list[int] | None) -> None:
        """The predictions' OU state starts again in rows ``envs`` (all by default); its rows are the caller's
        latest batch, so indices outside it are not its envs and are left alone."""
        noise = self.prediction_noise
        if noise is not None and (envs is None or noise.x.dim() == 1 or all(0 <= i < len(noise.x) for i in envs)):
            noise.reset(envs)

    def act(self, obs: Any, explore: bool = False) -> np.ndarray:
        """The action for ``obs`` in the env's units (a numpy array shaped like the action space, batched
        when ``obs`` is); ``obs`` as the policy takes it: behind ``NormalizeObservation``, normalised
        (:meth:`zoo_predict` takes the env's own). ``explore=True`` adds exploration noise of the kind and scale the agent trains with
        (``config.noise_type``, ``config.exploration_noise``), drawn apart from its training run's."""
        return self.env_action(self.act_normalised(obs, explore, training=False))

    def random_action_normalised(self, n: int | None = None) -> torch.Tensor:
        """Uniform actions in ``[-1, 1]`` from the agent's generator (the warm-up phase)."""
        shape = (self.act_dim,) if n is None else (n, self.act_dim)
        return torch.rand(shape, generator=self.generator, device=self.device) * 2.0 - 1.0

    # --- learning ---------------------------------------------------------------------------------

    def ensure_buffer(self) -> ReplayBuffer:
        if self.buffer is None:
            self.buffer = ReplayBuffer(self.config.buffer_size, self.obs_dim, self.act_dim, self.device)
        return self.buffer

    def _build_compute_copies(self, precision: str | None = None) -> None:
        """Seat the four networks in flat buffers (:mod:`zoo.rl.flat`) with the compute precision that
        ``config.amp`` resolves to here (``precision``, ``"bf16"`` or ``"fp32"``, overrides it: a resume keeps
        the checkpoint's). In bf16 the hidden layers run on bf16 copies of the fp32 masters (which Adam and
        the soft update keep: a tau=0.005 lerp would round away in bf16), refreshed by one copy per step.
        Only the wide hidden-to-hidden layers run in bf16 (:func:`zoo.rl.networks.lowp_layers`): the
        observation layer and the one-unit output layers stay fp32 (faster there, and the heads keep Q values
        and actions at fp32 resolution: bf16 would round a Q of -500 to a step of 2)."""
        self.precision = precision or resolve_amp(self.config.amp, self.device, op="matmul", allow_fp16=False,
                                                  training=True) or "fp32"
        self._dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        arch = tuple(self.config.net_arch)
        lowp_a = nets.lowp_layers((self.obs_dim, *arch, self.act_dim))
        lowp_c = nets.lowp_layers((self.obs_dim + self.act_dim, *arch, 1))
        names_a = [f"hidden.{i}" for i in range(len(arch))] + ["out"]
        keep_a = {f"{names_a[i]}.{t}" for i, low in enumerate(lowp_a) if not low for t in ("weight", "bias")}
        keep_c = {f"{t}{i}" for i, low in enumerate(lowp_c) if not low for t in ("weight", "bias")}
        self._flat = {name: FlatParams(getattr(self, name), self._dtype, keep)
                      for name, keep in (("actor", keep_a), ("critic", keep_c), ("actor_target", keep_a),
                                         ("critic_target", keep_c))}
        self._adams = None
        if self._opts is not None:  # their state moves into the new flat buffers now, as the weights did
            self._optimizers()

    def _optimizers(self) -> tuple[torch.optim.Adam, torch.optim.Adam]:
        """The actor's and the critic's Adam (with their :class:`FlatAdam`), made on first use: an agent that
        only acts never needs them, and making a torch optimizer imports torch._dynamo (2.2 s of a 6.5 s
        ``zoo predict td3`` on a 2 GHz Zen 1). Fused: the same kernel FlatAdam runs; they own lr/betas and the
        per-parameter state_dict."""
        if self._opts is None:
            self._opts = (torch.optim.Adam(self.actor.parameters(), lr=self.config.actor_lr, fused=True),
                          torch.optim.Adam(self.critic.parameters(), lr=self.config.critic_lr, fused=True))
        if self._adams is None:
            self._adams = (FlatAdam(self._opts[0], self._flat["actor"]), FlatAdam(self._opts[1], self._flat["critic"]))
        return self._opts

    @property
    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)``: the bounds of the actions it takes (its action space's, as float32), as copies."""
        return self._low_np.copy(), self._high_np.copy()

    @property
    def actor_opt(self) -> torch.optim.Adam:
        return self._optimizers()[0]

    @property
    def critic_opt(self) -> torch.optim.Adam:
        return self._optimizers()[1]

    def _flat_adams(self) -> tuple[FlatAdam, FlatAdam]:
        """The actor's and the critic's :class:`FlatAdam` over the current flat buffers."""
        self._optimizers()
        return self._adams

    def refresh_compute_copies(self) -> None:
        """Re-read the fp32 weights into the bf16 compute copies (after editing parameters in place)."""
        for flat in self._flat.values():
            flat.refresh()

    def critic_target_value(self, batch: Batch, noise: torch.Tensor) -> torch.Tensor:
        """``r + gamma * not_done * min_i Q'_i(s', clip(pi'(s') + clip(noise, -c, c), -1, 1))`` -> (B,)."""
        cfg, f = self.config, self._flat
        with torch.no_grad():
            noise = noise.clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
            a, _ = nets.actor_forward(f["actor_target"].weights, batch.next_obs, len(cfg.net_arch))
            next_a = (a.float() + noise).clamp_(-1.0, 1.0)
            x = torch.cat([batch.next_obs, next_a], dim=1)
            q, _ = nets.critic_forward(f["critic_target"].weights, x, self.critic.num_layers)
            return batch.reward + cfg.gamma * batch.not_done * q.float().amin(dim=0)

    @torch.no_grad()  # the backward is explicit (zoo.rl.networks): no autograd graph to build
    def _update(self, batch: Batch, noise: torch.Tensor, update_actor: bool) -> torch.Tensor:
        """One TD3 update: critic step on the clipped double-Q target, then (every ``policy_delay``
        updates) the actor step on ``-Q1(s, pi(s))`` and the soft update of the targets."""
        cfg, f = self.config, self._flat
        layers, hidden = self.critic.num_layers, len(cfg.net_arch)
        live = nets.MAX_LIVE_FRACTION if cfg.skip_silent_units else 0.0
        target = self.critic_target_value(batch, noise)  # (B,)
        q, saved = nets.critic_forward(f["critic"].weights, torch.cat([batch.obs, batch.act], dim=1), layers)
        err = q.float() - target  # (2, B)
        critic_loss = err.pow(2).mean(dim=1).sum()  # sum of the two critics' MSE
        self._loss_sum[0].add_(critic_loss)
        self._loss_n[0] += 1
        nets.critic_backward(f["critic"].weights, f["critic"].grads, saved, err.mul_(2.0 / err.shape[1]), layers, live)
        self._step(self._flat_adams()[1])
        if update_actor:
            a, saved_a = nets.actor_forward(f["actor"].weights, batch.obs, hidden)
            q1, outs_q = nets.q1_forward(f["critic"].weights, torch.cat([batch.obs, a.float()], dim=1), layers)
            dq1 = torch.full_like(q1, -1.0 / q1.shape[0], dtype=torch.float32)  # d(-mean q1)/dq1
            self._loss_sum[1].sub_(q1.float().mean())  # the actor's loss: -mean Q1(s, pi(s))
            self._loss_n[1] += 1
            dx = nets.q1_input_grad(f["critic"].weights, outs_q, dq1, layers, live)
            nets.actor_backward(f["actor"].weights, f["actor"].grads, saved_a, a, dx[:, self.obs_dim:], hidden, live)
            self._step(self._flat_adams()[0])
            self.soft_update(cfg.tau)
        return critic_loss.detach()

    def _step(self, adam: FlatAdam) -> None:
        adam.flat.gather_grads()
        adam.step()
        adam.flat.refresh()

    def update(self, gradient_steps: int = 1) -> float | None:
        """Run ``gradient_steps`` TD3 updates from the replay buffer; returns the last critic loss."""
        cfg, buf = self.config, self.buffer
        if buf is None or len(buf) == 0:
            raise RuntimeError("TD3.update: the replay buffer is empty; collect transitions first")
        loss = None
        for _ in range(gradient_steps):
            batch = buf.sample(cfg.batch_size, self.generator)
            noise = torch.randn((cfg.batch_size, self.act_dim), generator=self.generator, device=self.device)
            noise.mul_(cfg.target_policy_noise)
            self.num_updates += 1
            update_actor = self.num_updates % cfg.policy_delay == 0
            loss = self._update(batch, noise, update_actor)
            self.num_actor_updates += int(update_actor)
        return None if loss is None else float(loss)

    def pop_losses(self) -> dict[str, float]:
        """Mean critic and actor loss of the updates since the last call (NaN where none), then reset."""
        sums = self._loss_sum.tolist()
        out = {name: sums[i] / n if n else float("nan")
               for i, (name, n) in enumerate(zip(("critic_loss", "actor_loss"), self._loss_n))}
        self._loss_sum.zero_()
        self._loss_n = [0, 0]
        return out

    def apply_lr(self, progress_remaining: float = 1.0) -> None:
        """Set the optimizers' lr from the config: constant, or (``lr_schedule="linear"``) scaled by the
        fraction of the run still to go, as SB3's ``lin_<lr>`` schedules do."""
        scale = progress_remaining if self.config.lr_schedule == "linear" else 1.0
        for opt, lr in ((self.actor_opt, self.config.actor_lr), (self.critic_opt, self.config.critic_lr)):
            for group in opt.param_groups:
                group["lr"] = lr * scale

    def soft_update(self, tau: float) -> None:
        """``target <- (1 - tau) * target + tau * online`` for every parameter (one lerp per network)."""
        with torch.no_grad():
            for online, target in (("actor", "actor_target"), ("critic", "critic_target")):
                self._flat[target].master.lerp_(self._flat[online].master, float(tau))
                self._flat[target].refresh()

    # --- state ------------------------------------------------------------------------------------

    def network_state_dict(self) -> dict[str, torch.Tensor]:
        """The four networks' tensors, prefixed ``actor.``, ``critic.``, ``actor_target.``, ``critic_target.``."""
        out: dict[str, torch.Tensor] = {}
        for prefix in ("actor", "critic", "actor_target", "critic_target"):
            for k, v in getattr(self, prefix).state_dict().items():
                out[f"{prefix}.{k}"] = v.detach().cpu().clone()  # own storage: the parameters are flat views
        return out

    def export_state_dict(self) -> dict[str, torch.Tensor]:
        """The actor and critic tensors (``actor.*``, ``critic.*``): what a weights file holds
        (``zoo train td3 --out``, the published agents); loading copies them into the targets too."""
        return {k: v for k, v in self.network_state_dict().items()
                if not k.startswith(("actor_target.", "critic_target."))}

    def load_network_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load :meth:`network_state_dict` tensors; a file with only ``actor.``/``critic.`` keys copies them
        into the targets too. Mismatched keys or shapes are an error that names them."""
        from zoo.hub.state import dtype_mismatches, integer_weights

        parts: dict[str, dict[str, torch.Tensor]] = {p: {} for p in ("actor", "critic", "actor_target", "critic_target")}
        unknown = []
        for key, value in state.items():
            prefix, _, rest = key.partition(".")
            if prefix in parts:
                parts[prefix][rest] = value
            else:
                unknown.append(key)
        if unknown:
            raise ValueError(f"TD3 weights hold unexpected keys {unknown[:5]} (expected actor./critic. prefixes)")
        for src, dst in (("actor", "actor_target"), ("critic", "critic_target")):
            if not parts[dst]:
                parts[dst] = parts[src]
        for prefix, sd in parts.items():
            module = getattr(self, prefix)
            own = module.state_dict()
            bad = [f"{prefix}.{k}: file {tuple(sd[k].shape)} vs agent {tuple(v.shape)}"
                   for k, v in own.items() if k in sd and sd[k].shape != v.shape]
            missing = [f"{prefix}.{k}" for k in own if k not in sd]
            extra = [f"{prefix}.{k}" for k in sd if k not in own]
            kinds = [f"{prefix}.{row}" for row in dtype_mismatches(own, sd)]  # .to(float32) below would cast them
            if bad or missing or extra or kinds:
                raise ValueError(
                    "TD3 weights do not fit this agent (obs_dim "
                    f"{self.obs_dim}, act_dim {self.act_dim}, net_arch {self.config.net_arch}): "
                    + "; ".join(filter(None, [
                        "shape mismatch " + ", ".join(bad) if bad else "",
                        "missing " + ", ".join(missing) if missing else "",
                        "unexpected " + ", ".join(extra) if extra else "",
                        integer_weights(kinds, "the agent") if kinds else "",
                    ]))
                )
            module.load_state_dict({k: v.to(self.device, torch.float32) for k, v in sd.items()})  # in place
        self.refresh_compute_copies()

    def describe(self) -> dict[str, Any]:
        """Plain, JSON-able facts that make a weights file self-describing."""
        return {
            "env_id": self.env_id, "preset": self.preset, "obs_dim": self.obs_dim, "obs_shape": list(self.obs_shape),
            "act_dim": self.act_dim,
            "action_low": self._low_np.tolist(), "action_high": self._high_np.tolist(),
            # the space's own dtype and bounds: a loaded agent without its env hands actions of that dtype, clipped
            # to those bounds (a float32 Box(-0.1, 0.1) gave 0.1f, which the saved float64 space refused)
            "action_dtype": self._space_dtype.name, "action_space_low": self._space_low.tolist(),
            "action_space_high": self._space_high.tolist(),
            "config": self.config.to_dict(), **self._env_facts(),
        }

    def _env_facts(self) -> dict[str, Any]:
        """What ``describe`` adds for an agent behind normalisation wrappers: the wrappers its statistics
        are of (``{"obs_rms": 1}``), and its env's spec as gymnasium writes it (where it can: kwargs that
        are not JSON leave it out, and the env is then passed again)."""
        out: dict[str, Any] = {}
        if self.normalization:
            out["normalization"] = normalization.counts(self.normalization)
        if self.env_spec is not None:
            from zoo.rl.envspec import spec_identity, spec_to_json

            spec = spec_to_json(self.env_spec)
            if spec is not None:
                out["env_spec"] = spec
            else:  # a loaded agent refuses to evaluate on the bare id, which is another env
                out["env_spec_unwritable"] = spec_identity(self.env_spec)
        elif self.env_spec_lost:
            out["env_spec_unwritable"] = self.env_spec_lost
        return out

    def save(self, path, metadata: dict[str, str] | None = None) -> None:
        """The four networks as safetensors (and the normalisation statistics, when it has them), with this
        agent's description as JSON in the metadata and the config that rebuilds it (as :func:`zoo.save`
        writes it): ``zoo.build("td3", weights=path)`` loads it."""
        from zoo import hub

        meta = {"zoo.model": "td3", "zoo.config": json.dumps(self._build_config()),
                "zoo.td3": json.dumps(self.describe())}
        meta.update(metadata or {})
        hub.save_weights({**self.network_state_dict(), **self._normalization_tensors()}, path, metadata=meta)

    def _normalization_tensors(self) -> dict[str, torch.Tensor]:
        """``normalization`` as a weights file holds it: ``normalization.obs_rms.0.mean`` and so on."""
        return {f"normalization.{k}": v for k, v in self.normalization.items()}

    def resume_settings(self) -> dict[str, Any]:
        """The settings a checkpoint records and a resume compares (zoo.engine.resume): config and seed."""
        return {**self.config.to_dict(), "seed": self.seed}

    def training_state(self) -> dict[str, Any]:
        """The agent's own state, as a run's checkpoint holds it (weights_only-loadable: tensors, numbers,
        strings, dicts, lists): the networks, normalisation statistics, optimizers, replay buffer, random
        stream, counters, evaluations, best policy, exploration noise and loss sums. The checkpoint around
        it (its format, settings, precision, and the run's own state) is :mod:`zoo.rl.resume`'s."""
        return {
            "networks": self.network_state_dict(),
            "normalization": dict(self.normalization),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "buffer": self.ensure_buffer().state_dict(),
            "generator": self.generator.get_state(),
            "counters": {"num_timesteps": self.num_timesteps, "num_updates": self.num_updates,
                         "num_actor_updates": self.num_actor_updates, "num_episodes": self.num_episodes},
            "history": [dict(h) for h in self.history],
            "best_state": dict(self.best_state or {}),
            "best_step": -1 if self.best_step is None else self.best_step,
            "action_noise": self.action_noise.state() if self.action_noise is not None else torch.zeros(0),
            "losses": {"sum": self._loss_sum.cpu().clone(), "n": list(self._loss_n)},
        }

    def load_training_state(self, state: dict[str, Any], *, fresh_stream: bool = False) -> None:
        """Continue from :meth:`training_state` (of a checkpoint :mod:`zoo.rl.resume` has checked fits this
        agent). ``fresh_stream``: the saved random stream cannot continue on this device, so a fresh one is
        drawn from the seed and how far the run got."""
        self.drop_live_episodes()  # the run they belong to is no longer this agent's
        self.load_network_state_dict(state["networks"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        for adam in self._flat_adams():  # load_state_dict put fresh tensors in the state: back to flat views
            adam.adopt_state()
        self.ensure_buffer().load_state_dict(state["buffer"])
        for key, value in state["counters"].items():
            setattr(self, key, int(value))
        if fresh_stream:
            self.generator.manual_seed((self.seed * 1_000_003 + self.num_timesteps) % 2**63)
        else:
            self.generator.set_state(state["generator"].cpu())
        self.history = [dict(h) for h in state["history"]]
        self.best_state = dict(state["best_state"]) or None
        self.best_step = None if state["best_step"] < 0 else int(state["best_step"])
        noise = state.get("action_noise")
        self.action_noise = None
        if noise is not None and noise.numel() > 0:
            self.action_noise = OrnsteinUhlenbeckNoise(self.config.exploration_noise, tuple(noise.shape),
                                                       device=self.device)
            self.action_noise.load_state(noise)
        if "losses" in state:
            self._loss_sum.copy_(state["losses"]["sum"])
            self._loss_n = [int(n) for n in state["losses"]["n"]]
        self.normalization = dict(state.get("normalization") or {})  # older checkpoints: none
        self.apply_lr()  # the optimizers' state_dicts brought the saved lr; this agent's config decides

    def drop_live_episodes(self) -> None:
        """The next training call starts new episodes (the env the last call left open closed, where that call
        made it), as Stable-Baselines3's ``learn(reset_num_timesteps=True)`` resets its env."""
        live, self.live_episodes = self.live_episodes, None
        if live is not None:
            live.close_unless(None)

    def use_precision(self, precision: str) -> None:
        """Compute in ``precision`` (``"bf16"`` or ``"fp32"``) whatever ``config.amp`` resolves to here: a
        resume keeps the precision its checkpoint was trained in."""
        if precision != self.precision:
            self._build_compute_copies(precision)

    def checkpoint_state(self, run: dict[str, Any] | None = None) -> dict[str, Any]:
        """Everything a resumed run needs (:func:`zoo.rl.resume.checkpoint_state`); ``run``: the training loop's
        own settings to record (``total_steps``)."""
        return resume.checkpoint_state(self, run)

    def load_checkpoint_state(self, state: dict[str, Any], run: dict[str, Any] | None = None,
                              what: str = "the checkpoint") -> dict[str, tuple[Any, Any]]:
        """Continue from :meth:`checkpoint_state` (:func:`zoo.rl.resume.load_checkpoint_state`): its settings
        compared with this agent's (and ``run``'s) first, the changes a resume may make applied and returned as
        ``{key: (saved, now)}``, any other a :class:`zoo.engine.ResumeError` before anything is loaded."""
        return resume.load_checkpoint_state(self, state, run, what)

    # --- zoo.api.Trainable ------------------------------------------------------------------------

    def zoo_train(self, data: Any = None, **config: Any):
        """Train in place: ``zoo.train(agent, env="Pendulum-v1", total_steps=20_000, ...)``; see
        :func:`zoo.rl.loop.train` for the options. Returns a ``zoo.engine.TrainResult``. ``batch_size``, ``amp``
        and ``lr`` (both optimizers') change the agent's config for this run and after it; a run that fails before
        its first environment step leaves the config as it was (as the video family leaves its clip recipe)."""
        from zoo.engine.options import refuse_unknown_options
        from zoo.rl.loop import train

        if config.pop("epochs", None) is not None:
            raise ValueError("TD3 trains for a number of environment steps (total_steps / --steps), not epochs")
        self._check_device(config.pop("device", None))
        refuse_unknown_options(config, "zoo.train on td3", train, skip=2, also=["device", "batch_size", "amp", "lr"])
        changes = {k: config.pop(k) for k in ("batch_size", "amp") if k in config}
        lr = config.pop("lr", None)
        if lr is not None:
            changes.update(actor_lr=lr, critic_lr=lr)
        before, precision, steps = self.config, self.precision, self.num_timesteps
        if changes:
            self.reconfigure(**changes)
        try:
            return train(self, data, **config)
        except BaseException:
            # refused before a step (no env, a bad total_steps, a used folder): the settings fed no update, and
            # kept, a later zoo.save would record them as the ones this agent trained with
            if self.num_timesteps == steps and self.config is not before:
                self.config = before
                self.apply_lr()
                self._build_compute_copies(precision)
            raise

    def reconfigure(self, **changes: Any) -> None:
        """Change hyperparameters that do not change the networks' shapes (lr, batch_size, noises, ...)."""
        for key in ("net_arch", "buffer_size"):
            if key in changes and changes[key] != getattr(self.config, key):
                raise ValueError(f"{key} fixes tensor shapes; build a new agent to change it")
        changes = {k: (None if k == "amp" and v in ("none", "fp32", None) else v) for k, v in changes.items()}
        self.config = dataclasses.replace(self.config, **changes)
        self.apply_lr()
        self._build_compute_copies()

    def zoo_evaluate(self, data: Any = None, **config: Any) -> dict[str, float]:
        """Deterministic evaluation: ``{"return_mean", "return_std", "length_mean", "episodes"}``."""
        from zoo.engine.options import refuse_unknown_options
        from zoo.rl.evaluation import evaluate

        self._check_device(config.pop("device", None))
        refuse_unknown_options(config, "zoo.evaluate on td3", evaluate, skip=2, also=["device"])
        return evaluate(self, data, **config)

    def zoo_predict(self, inputs: Any, *, explore: bool = False) -> np.ndarray:
        """Observations ``(obs_dim,)`` or ``(N, obs_dim)`` as the env gives them -> actions in the env's units:
        an agent trained behind ``NormalizeObservation`` (``normalization``) scales them with its statistics,
        frozen, as its evaluations do, then acts (:meth:`act`, which takes what the policy takes)."""
        return self._checked_act(inputs, explore, env_observations=True)

    def _checked_act(self, inputs: Any, explore: bool, *, env_observations: bool) -> np.ndarray:
        """:meth:`act` on ``inputs``, normalised first where ``env_observations`` says they are the env's own;
        an observation that is not finite as the policy reads it, in float32, is refused (the policy would
        answer it with a NaN action, without a word): NaN, inf, None (JSON null), or a value beyond float32's
        range."""
        if not isinstance(explore, (bool, np.bool_)):  # "no", "false" or 5 added exploration noise without a word
            raise TypeError(f"explore must be True or False, got {explore!r} ({type(explore).__name__})")
        arr = inputs.detach().cpu().numpy() if isinstance(inputs, torch.Tensor) else self._observation_array(inputs)
        if np.iscomplexobj(arr):  # the cast below would drop the imaginary parts, with a warning at most
            raise TypeError(f"an observation is {self.obs_dim} real numbers, got complex values ({arr.dtype})")
        # checked after the cast the policy applies: None becomes NaN there and 1e39 becomes inf
        with np.errstate(over="ignore", invalid="ignore"):
            try:
                obs = arr.astype(np.float32)
            except (TypeError, ValueError):  # numpy's "could not convert string to float: np.str_('1,0,0')"
                raise self._not_numbers(arr) from None
        if not np.isfinite(obs).all():
            at = np.argwhere(~np.isfinite(obs))[0].tolist()
            got = arr[tuple(at)]
            why = " (beyond float32's range, +-3.4e38)" if _finite_number(got) else ""
            raise ValueError(f"observations must be finite; got {got} at index {at}{why}; "
                             "give real numbers within float32's range")
        if env_observations and self.normalization:
            self._obs_tensor(obs)  # its shape checked with the agent's message before the statistics meet it
            obs = normalization.observations(self.normalization, obs, self.obs_shape)
        return self.act(obs, explore=explore)

    def _observation_array(self, inputs: Any) -> np.ndarray:
        """``inputs`` as an array; a ragged batch of observations is a ValueError saying so (numpy's was "setting
        an array element with a sequence. The requested array has an inhomogeneous shape")."""
        try:
            return np.asarray(inputs)
        except ValueError:
            raise ValueError(f"a batch of observations is N observations of {self.obs_dim} numbers each, shape "
                             f"(N, {self.obs_dim}); got rows of unequal lengths or depths: {inputs!r:.100}") from None

    def _not_numbers(self, arr: np.ndarray) -> TypeError:
        """The error for an observation that holds what is not a number: text (the zoo command's 1,0,0), a Dict
        space's dict, or another object (numpy said "float() argument must be a string or a real number, not
        'dict'")."""
        numbers = (int, float, bool, np.number, type(None))
        bad = next((v for v in arr.ravel().tolist() if not isinstance(v, numbers)), arr)
        expected = f"an observation is {self.obs_dim} numbers (a list, array or tensor)"
        if isinstance(bad, str):
            return TypeError(f"{expected}, got the text {bad!r}: parse it first, e.g. [float(v) for v in "
                             f"{bad!r}.split(',')] (the zoo command reads 1,0,0 from its command line)")
        if isinstance(bad, dict):
            return TypeError(f"{expected}, got a dict with keys {list(bad)}: this agent acts on flat Box observations; "
                             "flatten a Dict observation as its env did, with gymnasium.wrappers.FlattenObservation "
                             "(or gymnasium.spaces.flatten(space, obs))")
        return TypeError(f"{expected}, got a {type(bad).__name__}: {bad!r:.80}")

    # --- Stable-Baselines3's names ---------------------------------------------------------------------

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray, Any]:
        """SB3's ``predict``: ``(actions, state)`` for observations ``(obs_dim,)`` or ``(n_envs, obs_dim)`` as
        the policy takes them (normalised, as SB3's behind ``VecNormalize``; :meth:`zoo_predict` takes the
        env's own), actions in the env's units, so SB3's ``evaluate_policy`` and rl-baselines3-zoo's tools run this agent.
        ``deterministic=False`` adds exploration noise (:meth:`act`), whose Ornstein-Uhlenbeck state starts
        again in the rows ``episode_start`` marks; ``state`` comes back unchanged (no recurrence)."""
        starts = np.flatnonzero(np.asarray(episode_start, dtype=bool).reshape(-1)) if episode_start is not None else []
        if len(starts):
            self._restart_prediction_noise(starts.tolist())
        return self._checked_act(observation, not deterministic, env_observations=False), state

    def learn(self, total_timesteps: int, callback: Any = None, log_interval: int = 4, tb_log_name: str = "TD3",
              reset_num_timesteps: bool = True, progress_bar: bool = False, *, env: Any = None,
              **options: Any) -> TD3Agent:
        """SB3's ``learn``, with its arguments in its order: collect ``total_timesteps`` *more* transitions (on
        ``env``, default the agent's env id) and return the agent. ``options`` are :func:`zoo.rl.loop.train`'s
        (``eval_every``, ``checkpoint_dir``, ``log_dir``, ...); ``zoo.train(agent, env, total_steps=N)`` counts
        the run's transitions in all. A vector env of n envs collects n transitions a step, so a call collects
        whole steps: ``total_timesteps`` rounded up to a multiple of n, as SB3's ``learn`` does.

        Of SB3's own: ``progress_bar`` is zoo's ``progress``. ``callback`` may be None (or an empty list):
        zoo's loop runs no SB3 callbacks, and one is refused, naming the options that do their jobs
        (:meth:`_refuse_callback`). Accepted and not used, as they mean nothing here: ``log_interval`` (zoo
        prints no episode log to space out: every episode goes to ``episodes.csv`` and every evaluation to
        ``metrics.csv`` under ``log_dir``), ``tb_log_name`` (TensorBoard events go to ``log_dir`` itself, as
        SB3 ignores the name without a ``tensorboard_log``). ``reset_num_timesteps`` decides, as in SB3, whether
        the env's episodes restart: ``False`` continues the episodes the last call left in progress on the
        same env (two calls of N steps collect what one of 2N does; :class:`zoo.rl.run.LiveEpisodes`), ``True``
        resets the env first. The agent's step count goes on either way (SB3's ``False``), as it places the
        run's evaluations, checkpoints and resume, so a second call neither repeats the ``learning_starts``
        warm-up nor restarts a linear lr schedule; each call collects ``total_timesteps`` transitions."""
        from zoo.engine.options import check_options
        from zoo.rl.envspec import default_env
        from zoo.rl.evaluation import whole_count
        from zoo.rl.loop import train

        total_timesteps = whole_count("total_timesteps", total_timesteps, 1, "environment steps")  # 1e4 too, as SB3
        self._refuse_callback(callback)
        del log_interval, tb_log_name  # accepted for SB3's callers; see above
        ours = ["callback", "log_interval", "tb_log_name", "reset_num_timesteps", "progress_bar", "env"]
        loop = [k for k in inspect.signature(train).parameters if k not in ("agent", "data", "env", "total_steps")]
        check_options([k for k in options if k not in loop and k not in ("device", "batch_size", "amp", "lr")],
                      "TD3Agent.learn", [*ours, *loop, "device", "batch_size", "amp", "lr"])
        if env is None and self.env_id is None:
            raise ValueError("this agent has no env id to make its env from: pass env=, a gymnasium env")
        options.setdefault("eval_every", 0)  # SB3's learn evaluates nothing unless asked
        options.setdefault("progress", progress_bar)  # zoo's own name, when given, wins
        if reset_num_timesteps:  # SB3's _setup_learn resets the env then; False continues from _last_obs
            self.drop_live_episodes()
        self.zoo_train(default_env(self) if env is None else env,
                       total_steps=self.num_timesteps + total_timesteps,
                       **options)
        return self

    @staticmethod
    def _refuse_callback(callback: Any) -> None:
        """SB3's callbacks hook into SB3's own loop (``BaseCallback._on_step`` with ``self.locals``); zoo's
        loop has none of those hooks, and its options do what SB3's stock callbacks do."""
        import gymnasium as gym

        if callback is None or (isinstance(callback, (list, tuple)) and not callback):
            return
        if isinstance(callback, (str, os.PathLike, gym.Env, gym.vector.VectorEnv)):
            raise TypeError(f"TD3Agent.learn's second argument is SB3's callback, not the env: pass the env "
                            f"by name, learn(total_timesteps, env={callback!r})")
        given = (f"[{', '.join(type(c).__name__ for c in callback)}]" if isinstance(callback, (list, tuple))
                 else type(callback).__name__)
        raise TypeError(
            f"TD3Agent.learn(callback={given}): zoo's TD3 loop runs no Stable-Baselines3 "
            "callbacks. Its options do their jobs: evaluation every N steps with eval_every=N, eval_episodes=, "
            "eval_env= (EvalCallback; the best policy is kept in checkpoint_dir/td3_best.safetensors), "
            "checkpoints with checkpoint_dir= and checkpoint_every= (CheckpointCallback), logs with log_dir= "
            "(metrics.csv, episodes.csv, TensorBoard); Ctrl-C stops the run after a checkpoint. Pass callback=None")

    def zoo_state(self) -> ModelState:
        """The actor and critics (and the normalisation statistics, when it has them), and the config that
        rebuilds this agent (env, preset, every hyperparameter)."""
        return ModelState("td3", self._build_config(), {**self.export_state_dict(), **self._normalization_tensors()},
                          {"zoo.td3": json.dumps(self.describe())})

    def _build_config(self) -> dict[str, Any]:
        # an env without a registered id cannot be rebuilt from a name: the caller passes env= again
        env = {"env": self.env_id} if self.env_id is not None else {}
        return {**env, "preset": self.preset, "seed": self.seed, **self.config.to_dict()}

    def _check_device(self, device: Any) -> None:
        if device is not None and not same_device(usable_device(device), self.device):
            raise ValueError(f"this agent lives on {self.device}; build it on {device} to run there: "
                             f"zoo.build('td3', device={str(device)!r}, ...)")

    def __repr__(self) -> str:
        n = sum(p.numel() for m in (self.actor, self.critic) for p in m.parameters())
        return (f"TD3Agent(env={self.env_id!r}, preset={self.preset!r}, obs_dim={self.obs_dim}, "
                f"act_dim={self.act_dim}, net_arch={self.config.net_arch}, params={n}, "
                f"timesteps={self.num_timesteps}, device={self.device})")


# --- registration -------------------------------------------------------------------------------------

from zoo.registry import register


def _preset_defaults(preset: str, env_id: str) -> dict[str, Any]:
    """The TD3Config fields ``preset`` gives ``env_id`` (what ``td3()`` with no arguments builds)."""
    from zoo.rl.config import preset_config

    config = preset_config(preset, env_id)
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}


def _env_in(data: Any, *, seed: int | None = None) -> dict[str, Any]:
    """An env id (or env) as data implies the agent's env; a run's ``seed`` is the agent's (as SB3's
    ``TD3(..., seed=)``): its networks start from it and its evaluations' episode seeds follow it."""
    return {**({"env": data} if data is not None else {}), **({"seed": seed} if seed is not None else {})}


@register(
    "td3",
    config=TD3Config,
    references=(("Fujimoto et al. 2018, Addressing Function Approximation Error in Actor-Critic Methods, "
                "https://arxiv.org/abs/1802.09477"),
                "rl-baselines3-zoo hyperparams/td3.yml, https://github.com/DLR-RM/rl-baselines3-zoo"),
    load_weights=load_weights,
    infer_config=_env_in,
    built_defaults=lambda: _preset_defaults("rl-zoo", "Pendulum-v1"),
)
def td3(env: Any = "Pendulum-v1", preset: str = "rl-zoo", device: str = "cpu", seed: int = 0,
        **overrides: Any) -> TD3Agent:
    """A TD3 agent for ``env`` (a gymnasium id, or an env whose spaces are read) with ``preset``'s
    hyperparameters (``"rl-zoo"`` or ``"fujimoto"``); ``overrides`` (:class:`zoo.rl.config.TD3Config`
    fields) replace the preset's values."""
    import gymnasium as gym
    from gymnasium.envs.registration import EnvSpec

    from zoo.rl.config import preset_config
    from zoo.rl.envspec import acting_spaces

    if isinstance(env, EnvSpec):  # agent.env_spec, which zoo.train and zoo.evaluate take as well
        from zoo.rl.evaluation import make_env

        made = make_env(env)
        try:
            return td3(made, preset, device, seed, **overrides)
        finally:
            made.close()
    if isinstance(env, str):
        env_id = env
        try:
            e = gym.make(env_id)
        except gym.error.Error as err:
            raise ValueError(f"td3: cannot make gymnasium env {env_id!r}: {err}") from None
        obs_space, act_space = acting_spaces(e)
        e.close()
    elif isinstance(env, gym.vector.VectorEnv):
        obs_space, act_space = acting_spaces(env)
        env_id = getattr(env.spec, "id", None) if env.spec is not None else None
    elif isinstance(env, gym.Env):
        obs_space, act_space = acting_spaces(env)
        env_id = env.spec.id if env.spec is not None else None
    else:
        raise TypeError(f"td3: env must be a gymnasium id, EnvSpec or env, got {type(env).__name__}")
    config = preset_config(preset, env_id or "", **overrides)
    agent = TD3Agent(obs_space, act_space, config, env_id=env_id, preset=preset, device=device, seed=seed)
    if not isinstance(env, str):  # a wrapped env (RescaleAction, normalisers, make kwargs) is its env, not the id
        from zoo.rl.envspec import had_unmade_wrappers, own_spec

        agent.env_spec = own_spec(env)
        agent.env_object = env if had_unmade_wrappers(env) else None
    return agent
