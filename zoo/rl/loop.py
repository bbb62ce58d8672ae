"""The environment loop: collect, update, evaluate, log, checkpoint and resume.

:func:`train` reads top to bottom: set up the run (:class:`_Run`), resume, then per environment step
collect a transition, update, end episodes, evaluate and log, checkpoint. The log is the engine's
(:class:`zoo.engine.logs.RunLogger`): ``metrics.csv`` with one row per evaluation keyed by ``step``
(environment steps), TensorBoard scalars when it is installed, ``learning_curves.png`` at the end, and
``episodes.csv`` (every training episode's return).

Exact resume (single env, CPU): periodic checkpoints are taken at episode boundaries, where the whole
state of the run is the agent (networks, optimizers, buffer, its torch generator, counters) plus the env's
``np_random`` state and the running statistics of its ``NormalizeObservation`` / ``NormalizeReward``
wrappers, so a resumed run replays the uninterrupted one bit for bit. A run that stops
mid-episode (its last checkpoint) cannot save the env's physics; it records how that episode started (the
reset's seed or the env's random state before it), and a resume resets the env the same way and steps it
with the episode's actions from the replay buffer, checking every observation and reward against the
buffer's. An env that does not reproduce them (its dynamics depend on more than its seed) gets a warning
and a fresh episode. With a vector env the episodes in progress at a checkpoint restart on resume (a
warning says so).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import io
import json
import logging
import math
import numbers
import os
import signal
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.engine.logs import RunLogger, restore_csv, write_csv
from zoo.engine.threads import check_threads, torch_threads
from zoo.rl import normalization
from zoo.rl.envspec import (
    default_env,
    env_identity,
    had_unmade_wrappers,
    unmade_wrappers,
    without_pass_through,
)
from zoo.rl.normalization import RUNNING_STATS, normalizers

__all__ = ["BEST_NAME", "CHECKPOINT_NAME", "evaluate", "make_env", "train"]

CHECKPOINT_NAME = "td3_last.pt"
"""The run's checkpoint (agent, optimizers, replay buffer, episodes): what ``resume`` continues from."""
BEST_NAME = "td3_best.safetensors"
"""The best evaluated policy's networks (``zoo.build("td3", weights=...)`` loads it): ``TrainResult.checkpoint_path``."""

CHECKPOINT_FORMAT = "zoo.td3.checkpoint/1"
"""The ``format`` of what ``TD3Agent.checkpoint_state`` writes (``zoo.build("td3", weights=)`` reads its networks)."""
_FORMAT = CHECKPOINT_FORMAT
CHECKPOINT_EVERY = 10_000
"""Environment steps between periodic checkpoints when ``checkpoint_dir`` is given with neither
``checkpoint_every`` nor ``eval_every`` (a checkpoint only at the end would lose a whole run to a kill)."""

log = logging.getLogger(__name__)
# the history columns learning_curves.png draws, against "step"
_PLOTTED = ("step", "eval_return_mean", "train_return_recent", "critic_loss", "actor_loss", "steps_per_s")


def make_env(env: Any, *, num_envs: int = 1):
    """An env id or ``EnvSpec`` -> ``gymnasium.make`` (or a same-step-autoreset vector env when
    ``num_envs > 1``); an env object is returned as it is."""
    import gymnasium as gym
    from gymnasium.envs.registration import EnvSpec

    if isinstance(env, (str, os.PathLike, EnvSpec)):
        # a spec (zoo.rl.envspec) makes the id with its kwargs and recorded wrappers again
        env_id = env if isinstance(env, EnvSpec) else str(env)
        unmade = unmade_wrappers(env)
        if unmade:
            raise ValueError(
                f"cannot make {env.id} with its wrapper(s) {', '.join(unmade)} again: they record no constructor "
                "arguments (gymnasium.utils.RecordConstructorArgs), so gymnasium.make cannot rebuild them; pass "
                "the wrapped env object (env=...), or give the wrapper RecordConstructorArgs")
        if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral) or num_envs < 1:
            raise ValueError(f"num_envs must be a whole number >= 1, got {num_envs!r}")
        try:
            if num_envs > 1:
                return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                                    vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
            return gym.make(env_id)
        except gym.error.Error as err:
            name = env_id.id if isinstance(env_id, EnvSpec) else env_id
            raise ValueError(f"cannot make gymnasium env {name!r}: {err}") from None
    if isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        if num_envs != 1 and num_envs != getattr(env, "num_envs", 1):  # it trained on the env as it was, unsaid
            raise ValueError(f"num_envs={num_envs!r} makes copies of an env id; {_env_name(env)} is an env object "
                             "trained on as it is: give its id with num_envs, or a VectorEnv of the copies")
        return env
    raise TypeError(f"env must be a gymnasium env id, EnvSpec, gymnasium.Env or VectorEnv; got {type(env).__name__}")


def _env_name(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__


def _check_env_fits(agent, env) -> None:
    from zoo.rl.envspec import acting_spaces
    from zoo.rl.td3 import check_spaces

    obs_space, act_space = acting_spaces(env)  # a ClipAction's Box(-inf, inf): the bounds it clips into

    obs_dim, act_dim = check_spaces(obs_space, act_space, _env_name(env))
    if (obs_dim, act_dim) != (agent.obs_dim, agent.act_dim) or tuple(obs_space.shape) != agent.obs_shape:
        shapes = "" if len(agent.obs_shape) == 1 and len(obs_space.shape) == 1 else \
            f" (observations {tuple(obs_space.shape)}, the agent's {agent.obs_shape})"
        raise ValueError(f"{_env_name(env)} has obs_dim {obs_dim}, act_dim {act_dim}; the agent was built for "
                         f"obs_dim {agent.obs_dim}, act_dim {agent.act_dim} (env {agent.env_id!r}){shapes}")
    low, high = np.asarray(act_space.low, np.float32), np.asarray(act_space.high, np.float32)
    if not (np.array_equal(low, agent._low_np) and np.array_equal(high, agent._high_np)):
        raise ValueError(f"{_env_name(env)} action bounds {low.tolist()}..{high.tolist()} differ from the agent's "
                         f"{agent._low_np.tolist()}..{agent._high_np.tolist()}: pass the env the agent acts in (a "
                         "wrapped env with its wrappers, e.g. gymnasium.wrappers.RescaleAction)")


def _pick_env(agent, data: Any, env: Any) -> Any:
    if data is not None and env is not None:
        raise TypeError("give the environment once: as data or as env=..., not both")
    chosen = env if env is not None else data
    if chosen is None:
        if agent.env_id is None:
            raise ValueError(f"no environment: this agent (obs_dim {agent.obs_dim}, act_dim {agent.act_dim}) was built "
                             "for an env without a registered id (or loaded from the weights of one), so there is "
                             "none to make: pass env=<gymnasium id or env>")
        # an agent built or trained on a wrapped env acts in that env: its spec makes the wrappers again (or,
        # where it cannot, the env object itself)
        chosen = default_env(agent)
    return chosen


@torch.inference_mode()
def evaluate(agent, data: Any = None, *, env: Any = None, episodes: int = 10, seed: int | None = None,
             max_steps: int | None = None, progress: bool = False) -> dict[str, float]:
    """Mean and std of the return of ``episodes`` deterministic episodes (no exploration noise).

    Episode ``i`` is reset with ``seed + i`` (default seed: the agent's seed + 10_000), so an evaluation
    is repeatable and independent of the training env's state. A ``VectorEnv`` (what ``zoo.train`` also
    takes) shares the episodes out among its envs, as Stable-Baselines3's ``evaluate_policy`` does: env
    ``j`` is reset with ``seed + j`` and runs its share one after another.

    An agent that trained behind ``NormalizeObservation`` / ``NormalizeReward`` (``agent.normalization``,
    which its weights file carries) puts its statistics into an env whose normalisers have not been
    updated yet (one made here, its own by default) and evaluates with them frozen, as its training run's
    evaluations did; an env whose normalisers have statistics of their own keeps them, and one without
    the agent's wrappers gets a warning. The returns are the env's own: ``NormalizeReward``'s scaling is taken
    off while evaluating (:func:`zoo.rl.normalization.raw_rewards`), as rl-baselines3-zoo evaluates with
    ``norm_reward=False``; they were in the scale of the statistics of the moment, which moved between a
    run's evaluations. ``progress=True`` shows a bar over the episodes.
    """
    from zoo._progress import ProgressBar

    episodes = whole_count("episodes", episodes, 1, "episodes")
    chosen = _pick_env(agent, data, env)
    e = make_env(chosen)
    import gymnasium as gym

    _check_env_fits(agent, e)
    base = agent.seed + 10_000 if seed is None else int(seed)
    episodes_of = _vector_episodes if isinstance(e, gym.vector.VectorEnv) else _episodes
    try:
        with _agent_statistics(agent, e), normalization.raw_rewards(e), \
                ProgressBar(total=episodes, desc="evaluate", unit="episode", disable=not progress) as bar:
            returns, lengths = episodes_of(agent, e, episodes, base, max_steps, bar.update)
    finally:
        if e is not chosen:
            e.close()
    return {"return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)),
            "length_mean": float(np.mean(lengths)), "episodes": float(episodes)}


def _agent_statistics(agent, e: Any):
    """The agent's normalisation statistics put into ``e``'s fresh normalisers and frozen there (a context
    manager); nothing for an env the training loop synced from its training env."""
    stats = getattr(agent, "normalization", None)
    if not stats or e is _SYNCED.get():
        return contextlib.nullcontext()
    # an evaluation's rewards are the env's own (raw_rewards): only the observations' scale is at stake there
    return normalization.frozen(_adopt(agent, e, "this agent", kinds=("obs_rms",)))


def _adopt(agent, env: Any, source: str, kinds: tuple[str, ...] = normalization.RUNNING_STATS) -> list[Any]:
    """Put ``agent.normalization`` into ``env``'s normalisers when none of them has been updated yet (a
    mismatch of ``kinds`` warns, :func:`zoo.rl.normalization.put`); returns the wrappers that took it."""
    theirs = normalizers(env)
    if not agent.normalization or (theirs and not normalization.is_fresh(theirs)):
        return []
    return normalization.put(theirs, agent.normalization, source=source, env_name=f"the env ({env_identity(env)})",
                             warn=kinds)


def _episodes(agent, e, episodes: int, base: int, max_steps: int | None,
              ended: Callable[[], object] = lambda: None) -> tuple[list[float], list[int]]:
    """Returns and lengths of ``episodes`` episodes of the env ``e``, episode ``i`` reset with ``base + i``;
    ``ended()`` after each."""
    returns, lengths = [], []
    for i in range(episodes):
        obs, _ = e.reset(seed=base + i)
        total, n, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = e.step(agent.act(obs))
            total += float(reward)
            n += 1
            done = terminated or truncated or (max_steps is not None and n >= max_steps)
        returns.append(total)
        lengths.append(n)
        ended()
    return returns, lengths


def _vector_episodes(agent, e, episodes: int, base: int, max_steps: int | None,
                     ended_one: Callable[[], object] = lambda: None) -> tuple[list[float], list[int]]:
    """Returns and lengths of ``episodes`` episodes of the vector env ``e``, in the order they end; env ``j``
    runs ``(episodes + j) // n`` of them (the first ones the env ends, so the share does not favour short
    episodes); ``ended_one()`` after each."""
    import gymnasium as gym

    mode = e.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode not in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
        raise ValueError(f"evaluate runs vector envs that reset their episodes themselves (NEXT_STEP or SAME_STEP "
                         f"autoreset); this one has {mode}")
    n = e.num_envs
    todo = np.array([(episodes + j) // n for j in range(n)])
    total, length = np.zeros(n), np.zeros(n, np.int64)
    resetting = np.zeros(n, bool)  # NEXT_STEP: this step only resets the env that ended
    counting = np.ones(n, bool)  # False while an episode cut at max_steps runs on to its end, uncounted
    returns: list[float] = []
    lengths: list[int] = []
    obs, _ = e.reset(seed=[base + j for j in range(n)])
    while todo.any():
        obs, reward, terminated, truncated, _ = e.step(agent.act(obs))
        ended = np.asarray(terminated) | np.asarray(truncated)
        live = ~resetting
        total[live] += np.asarray(reward, np.float64)[live]
        length[live] += 1
        cut = live & counting & ~ended & (max_steps is not None) & (length >= (max_steps or 0))
        for j in np.flatnonzero(live & ((ended & counting) | cut)):
            if todo[j]:
                returns.append(float(total[j]))
                lengths.append(int(length[j]))
                todo[j] -= 1
                ended_one()
        counting = np.where(ended & live, True, counting & ~cut)
        total[ended & live], length[ended & live] = 0.0, 0
        resetting = ended & live if mode == gym.vector.AutoresetMode.NEXT_STEP else np.zeros(n, bool)
    return returns, lengths


# --- checkpoints --------------------------------------------------------------------------------------


def _atomic_torch_save(obj: dict[str, Any], path: Path) -> None:
    from zoo.engine.checkpoint import tensors_digest

    buf = io.BytesIO()
    torch.save({**obj, "digest": tensors_digest(obj)}, buf)  # checked on read, as the engine's checkpoints
    fs.write_bytes(path, buf.getbuffer())  # atomic, free space checked first, the user's umask


def _read_checkpoint(path: Path) -> dict[str, Any]:
    """The TD3 checkpoint at ``path``, read onto the CPU (loading copies each tensor to the agent's device;
    the generator state must stay a CPU byte tensor). An empty, truncated, corrupt or foreign file is a
    ``zoo.engine.CheckpointError`` naming it and how to go on."""
    from zoo.engine.checkpoint import CheckpointError, check_digest, load_plain

    state = load_plain(path, "cpu", what="TD3 checkpoint", how=(
        f"resume from an older copy of {CHECKPOINT_NAME}, or start a fresh run (without resume, or in another "
        "checkpoint_dir)"))
    fmt = state.get("format") if isinstance(state, dict) else type(state).__name__
    if fmt != _FORMAT:
        what = " (a network's training checkpoint: resume it with zoo.train on that network)" \
            if fmt == "zoo.checkpoint/1" else ""
        raise CheckpointError(f"{path} is not a TD3 checkpoint: expected format {_FORMAT!r}, got {fmt!r}{what}; "
                              f"a TD3 resume needs the {CHECKPOINT_NAME} that zoo.train(agent, ..., "
                              "checkpoint_dir=...) writes")
    check_digest(state, path, "TD3 checkpoint")
    return state


def _env_rng_state(env) -> str | None:
    rng = getattr(env.unwrapped, "_np_random", None)
    return None if rng is None else json.dumps(rng.bit_generator.state)


def _set_env_rng_state(env, state: str | None) -> None:
    if state is None:
        return
    st = json.loads(state)
    bitgen = getattr(np.random, st["bit_generator"])()
    bitgen.state = st
    env.unwrapped.np_random = np.random.Generator(bitgen)


# --- the run -----------------------------------------------------------------------------------------


@dataclass
class _Clock:
    """Speeds for the log: environment steps per second since the last row, and over the learning phase
    (from the first step at ``learning_starts`` on); evaluation time is left out of both."""

    mark_steps: int = 0  # environment steps at the last row
    mark_t: float = field(default_factory=time.perf_counter)  # when the last row's evaluation ended
    t0: float | None = None  # the first step of the learning phase
    eval_s: float = 0.0  # evaluation time since t0
    steps: int = 0  # environment steps since t0

    def learn_time(self, now: float) -> float:
        return now - self.t0 - self.eval_s if self.t0 is not None else 0.0

    def learn_rate(self, now: float) -> float:
        t = self.learn_time(now)
        return self.steps / t if self.steps and t > 0 else float("nan")

    def row_rate(self, steps: int, now: float) -> float:
        return (steps - self.mark_steps) / (now - self.mark_t) if now > self.mark_t else float("nan")

    def evaluated(self, started: float, steps: int) -> None:
        end = time.perf_counter()
        if self.t0 is not None:
            self.eval_s += end - started
        self.mark_steps, self.mark_t = steps, end


@dataclass
class _Run:
    """One call of :func:`train` besides the agent: its env and settings, the episodes in progress, the log."""

    env: Any
    chosen: Any  # what the caller gave (an env id is made again for each evaluation)
    owns_env: bool
    name: str
    vec: bool
    n_envs: int
    next_step_mode: bool  # a NEXT_STEP-autoreset vector env: the step after an episode's end is a reset
    total_steps: int
    eval_every: int | None
    eval_episodes: int
    eval_env: Any  # what evaluations run on: eval_env=, the env id or spec, or the training env itself (at the end)
    ckpt_dir: Path | None
    ckpt_every: int | None
    log_dir: Path | None
    logger: RunLogger | None = None
    bar: Any = None
    obs: Any = None  # (obs_dim,) or (n_envs, obs_dim)
    ep_ret: np.ndarray = field(init=False)  # (n_envs,) return of the episodes in progress
    ep_len: np.ndarray = field(init=False)  # (n_envs,)
    prev_autoreset: np.ndarray = field(init=False)  # (n_envs,) NEXT_STEP mode: this step's transition is skipped
    resetting: np.ndarray = field(init=False)  # (n_envs,) this step only reset the env (NEXT_STEP): not counted
    episodes: list[dict[str, Any]] = field(default_factory=list)  # every finished training episode
    recent: deque = field(default_factory=lambda: deque(maxlen=10))  # the last 10 training returns
    # a single env is reset at the top of the next step, so that a checkpoint taken at an episode's end
    # holds the env's random state from before that reset
    need_reset: bool = False
    since_train: int = 0  # steps (per env) since the last update phase
    # how the single env's episode in progress began: {"seed": the reset's seed} or {"rng": the env's
    # random state before the reset}; what a resume replays that episode from
    episode_start: dict[str, Any] = field(default_factory=dict)
    next_eval: float = math.inf
    next_ckpt: float = math.inf
    clock: _Clock = field(default_factory=_Clock)
    resumed: dict[str, Any] | None = None
    identity: str = ""  # the training env as zoo.rl.envspec.env_identity writes it: a resume compares it
    env_given: bool = True  # False: the call named no env, so the run trains on the agent's own env id
    normalizers: list = field(default_factory=list)  # the training env's running-statistics wrappers
    normalization_warned: bool = False
    interrupted: bool = False  # Ctrl-C arrived: the loop stops after this step, checkpointing first
    stopped_by: str = "Ctrl-C"  # or SIGTERM, which the zoo command passes on as a Ctrl-C

    def __post_init__(self) -> None:
        self.ep_ret = np.zeros(self.n_envs)
        self.ep_len = np.zeros(self.n_envs, dtype=np.int64)
        self.prev_autoreset = np.zeros(self.n_envs, dtype=bool)
        self.resetting = np.zeros(self.n_envs, dtype=bool)

    @property
    def ckpt_path(self) -> Path | None:
        return self.ckpt_dir / CHECKPOINT_NAME if self.ckpt_dir is not None else None


def train(
    agent,
    data: Any = None,
    *,
    env: Any = None,
    total_steps: int | None = None,
    eval_every: int | None = None,
    eval_episodes: int = 10,
    eval_env: Any = None,
    seed: int | None = None,
    num_envs: int = 1,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool | str | os.PathLike = False,
    log_dir: str | os.PathLike | None = None,
    progress: bool = True,
    threads: int | str | None = None,
):
    """Train ``agent`` until it has collected ``total_steps`` environment transitions (in all).

    Args:
        env / data: a gymnasium id (default: the agent's), a ``gymnasium.Env`` or a ``VectorEnv``.
        total_steps: environment transitions in total (a resumed run continues up to it).
        eval_every: deterministic evaluation of ``eval_episodes`` episodes on a separate env every this
            many steps (and at the end); ``None`` evaluates only at the end, 0 never.
        eval_env: what evaluations run on (default: a new env made from the training env's id, or from its
            spec: make kwargs and wrappers too; an env with no id, or one its spec cannot make again, is
            evaluated on itself at the end, and every N steps only with ``eval_env``).
        seed: seeds this call's first env reset (default: the agent's seed on a first call; later, a
            caller's env continues its stream). Ignored, with a warning, when resuming.
        num_envs: with an env id, ``> 1`` collects from a synchronous vector env.
        checkpoint_dir: ``td3_last.pt`` is written there at the first episode end after every
            ``checkpoint_every`` steps (default: ``eval_every``, else :data:`CHECKPOINT_EVERY`; 0: only at
            the end), at the end, and when Ctrl-C stops the run (mid-episode too: a resume replays that
            episode's steps, see the module's notes on exact resume); the best evaluated
            policy goes to ``td3_best.safetensors`` (and stays in memory as ``agent.best_state``); the result's
            ``checkpoint_path`` is that file (``td3_last.pt`` when no evaluation scored a trained policy).
        resume: ``True`` continues from ``checkpoint_dir/td3_last.pt`` (from scratch while the folder holds
            no run); a path, from that file (and its folder's best policy); other runs are refused a used folder.
            ``actor_lr``, ``critic_lr``, ``exploration_noise`` and ``total_steps`` may differ (applied, logged);
            any other change (the config, ``num_envs``, the env: id, make kwargs, wrappers) raises
            ``zoo.engine.ResumeError``: an env that is not the checkpoint's (the agent's own, when the call
            names none) is refused so, naming the checkpoint's env and the call that continues it.
        log_dir: ``metrics.csv`` (one row per evaluation: returns, mean critic and actor loss since the
            previous row, steps/s), TensorBoard events when installed, ``learning_curves.png`` and
            ``episodes.csv`` (default: ``checkpoint_dir``).
        threads: torch threads for the run (an int, ``"all"`` cores, or None: leave torch's setting);
            restored afterwards. At batch 256 and 400x300 layers a second core makes an update 1.65x
            faster (fp32, benchmarks/td3_update.py); on a machine whose other core is busy, 2 threads
            can be many times *slower* (each parallel region waits for the preempted thread).

    Returns a ``zoo.engine.TrainResult``: a history row per evaluation, the best mean eval return, its file.
    """
    total_steps, eval_every, checkpoint_every, eval_episodes = _check_run_options(
        total_steps, eval_every, checkpoint_every, eval_episodes)
    check_threads(threads)  # a bad value fails before an env is made
    _refuse_several_processes()
    ckpt_dir = Path(checkpoint_dir).expanduser() if checkpoint_dir is not None else None  # "~/runs", as fit reads it
    logs = Path(log_dir).expanduser() if log_dir is not None else ckpt_dir
    with _own_folders(ckpt_dir, logs, resume):  # before any work: a folder that cannot be ours fails at once
        run = _open_run(agent, data, env, num_envs, total_steps=total_steps, eval_every=eval_every,
                        eval_episodes=eval_episodes, eval_env=eval_env, ckpt_dir=ckpt_dir,
                        ckpt_every=_checkpoint_every(checkpoint_every, eval_every),
                        log_dir=logs)
        try:
            # no torch.set_flush_denormal here: FlatAdam zeroes the moments before they turn denormal
            # (zoo.engine.denormals), and with that, flushing every denormal on this thread as well changed
            # neither the speed nor a single parameter (benchmarks/README, "Denormal Adam moments")
            with torch_threads(threads):
                _start(agent, run, resume, seed, progress)
                with _deferred_interrupt(run):
                    _loop(agent, run)
                _finish(agent, run)
        finally:
            _close(run)
    return _result(agent, run)


def whole_count(name: str, value: Any, minimum: int, unit: str) -> int:
    """``value`` as an int when it is a whole number >= ``minimum``: an integer, or a float without a
    fraction (``learn(1e4)``, as Stable-Baselines3 takes it); else a ValueError naming ``name`` and what came
    (``100.9`` steps were run as 100 without a word)."""
    whole = isinstance(value, numbers.Integral) or (
        isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer())
    if isinstance(value, bool) or not whole or value < minimum:
        raise ValueError(f"{name} must be a whole number of {unit} >= {minimum}, got {value!r}")
    return int(value)


def _check_run_options(total_steps: Any, eval_every: Any, checkpoint_every: Any,
                       eval_episodes: Any) -> tuple[int, int | None, int | None, int]:
    """The run's counts as ints, refused before any step with what came (a bad eval_episodes was said at the
    first evaluation: after eval_every steps, or after the whole run)."""
    if total_steps is None:
        raise ValueError("TD3 trains for a number of environment steps: give total_steps=N (zoo train td3 --steps N)")
    total_steps = whole_count("total_steps", total_steps, 1, "environment steps")
    eval_every, checkpoint_every = (None if v is None else whole_count(k, v, 0, "environment steps (or None)")
                                    for k, v in (("eval_every", eval_every), ("checkpoint_every", checkpoint_every)))
    return total_steps, eval_every, checkpoint_every, whole_count("eval_episodes", eval_episodes, 1, "episodes")


def _refuse_several_processes() -> None:
    """TD3 learns in one process: under torchrun every process ran the same agent, and the second found the
    first's lock on the checkpoint folder ("in use by another training run"), which named no cause."""
    from zoo.engine.distributed import dist_info

    world = dist_info().world_size
    if world > 1:
        raise ValueError(f"TD3 learns in one process, and WORLD_SIZE={world} (torchrun started {world}): run it "
                         "without torchrun; threads= (--threads) has one run use several cores, and separate seeds "
                         "run as separate commands")


@contextlib.contextmanager
def _own_folders(checkpoint_dir: Path | None, log_dir: Path | None, resume: bool | str | os.PathLike):
    """The run's folders, as the engine's fit owns its own: created (a file in the way, or a read-only
    place, fails before the first step instead of at the first checkpoint), locked for the run's whole life
    (a second run there fails at once, naming this one: two writers would interleave one td3_last.pt),
    swept of the temp files that killed writers left there (one folder under two names, relative and absolute
    or a symlinked alias, once: :func:`zoo.fs.own_folders`), and refused when the run would overwrite
    another run's checkpoints (read under the lock: a run that just ended there has written its last)."""
    with fs.own_folders((("checkpoint_dir", checkpoint_dir), ("log_dir", log_dir)), "training run"):
        if checkpoint_dir is not None:
            _refuse_a_used_folder(checkpoint_dir, resume)
        yield


def _refuse_a_used_folder(folder: Path, resume: bool | str | os.PathLike) -> None:
    """The engine's rules (zoo.engine.trainer): a run that does not continue the folder's ``td3_last.pt``
    (a new one, or a resume from a file elsewhere) would replace it and ``td3_best.safetensors`` (a re-run
    of the command that Ctrl-C stopped, without ``--resume``, lost the run); and ``resume=True`` on a folder
    that has a best policy but no ``td3_last.pt`` would start over on top of that policy."""
    from zoo.engine.checkpoint import CheckpointError

    last, best = folder / CHECKPOINT_NAME, folder / BEST_NAME
    held = [p.name for p in (last, best) if p.is_file()]
    if not held or (resume is True and last.is_file()):
        return
    if resume is True:
        raise CheckpointError(
            f"resume: {folder} cannot be continued where it stopped: it holds no {CHECKPOINT_NAME}, but {BEST_NAME} "
            f"(the best evaluated policy, weights only). The run is not started over on top of it; to start over, "
            f"use another checkpoint_dir or remove the folder's files; to train on from that policy: "
            f"zoo.build('td3', weights={str(best)!r}) with another checkpoint_dir")
    new = "a new run"
    if resume:  # a file of this folder is checked as the resume reads it; one from elsewhere starts a fork here
        path = Path(resume).expanduser()
        if not path.is_file() or path.resolve().parent == folder.resolve():
            return
        new = f"a run continued from {path} (resume={str(resume)!r})"
    raise ValueError(f"checkpoint_dir {folder} holds another run's checkpoints ({', '.join(held)}): resume=True "
                     f"(`zoo train td3 ... --resume`) continues that run; {new} needs another folder, or those "
                     "files deleted (none is overwritten)")


def _checkpoint_every(checkpoint_every: int | None, eval_every: int | None) -> int | None:
    if checkpoint_every is not None:
        return int(checkpoint_every) or None  # 0: only at the end
    return int(eval_every or CHECKPOINT_EVERY)


@contextlib.contextmanager
def _deferred_interrupt(run: _Run):
    """Ctrl-C during the loop stops it after the step in progress, so that ``td3_last.pt`` is written
    from a whole step (a KeyboardInterrupt inside an update could leave the critic stepped and its target
    not), then raises KeyboardInterrupt as Python would have. A second Ctrl-C stops at once. Only Python's
    own handler in the main thread is replaced: a caller's handler, or a run in a thread, is left alone. Where
    SIGINT is ignored (a job started with ``&``), the `zoo` command's SIGTERM is taken so instead."""
    from zoo._interrupts import sigterm_is_ctrl_c

    on_ctrl_c = signal.getsignal(signal.SIGINT)
    hook = (signal.SIGINT if on_ctrl_c is signal.default_int_handler else
            signal.SIGTERM if on_ctrl_c == signal.SIG_IGN and sigterm_is_ctrl_c() else None)
    if threading.current_thread() is not threading.main_thread() or hook is None:
        yield
        return

    def stop_after_this_step(signum, frame) -> None:
        if run.interrupted:
            raise KeyboardInterrupt
        run.interrupted = True
        run.stopped_by = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
        saving = f"writing {run.ckpt_path} first; " if run.ckpt_path is not None else ""
        _say(run, f"{run.stopped_by}: TD3 stops after this step ({saving}a second {run.stopped_by} stops it at once)")

    previous = signal.signal(hook, stop_after_this_step)
    try:
        yield
    finally:
        signal.signal(hook, previous)


def _say(run: _Run, message: str) -> None:
    """A line for the user, above the progress bar."""
    from zoo._progress import ProgressBar

    if run.bar is not None and not run.bar.disable:
        ProgressBar.write(message, file=sys.stderr)
    else:
        log.warning(message)


def _loop(agent, run: _Run) -> None:
    """Per environment step: collect, update, end episodes, evaluate, checkpoint, up to ``total_steps``."""
    while agent.num_timesteps < run.total_steps:
        done, reward = _collect(agent, run)
        _update(agent, run)
        ended = _end_episodes(agent, run, done, reward)
        if agent.num_timesteps >= run.next_eval:
            _evaluate(agent, run)
        # checkpoints only where an episode just ended: then the run's state is fully saveable
        if agent.num_timesteps >= run.next_ckpt and (ended or run.vec):
            _checkpoint(agent, run)
        run.need_reset = not run.vec and bool(done[0])
        if run.interrupted:
            _stop(agent, run)


def _stop(agent, run: _Run) -> None:
    """Ctrl-C: the checkpoint the end of the run would write (mid-episode too), the logs so far, then
    KeyboardInterrupt. No final evaluation: the user asked to stop."""
    if run.ckpt_path is not None:
        _checkpoint(agent, run)
    _write_logs(agent, run)
    where = (f"; {run.ckpt_path} continues it (resume=True, or `zoo train td3 ... --resume`)"
             if run.ckpt_path is not None else "; nothing was saved (no checkpoint_dir)")
    raise KeyboardInterrupt(f"TD3 stopped by {run.stopped_by} at step {agent.num_timesteps} of {run.total_steps}"
                            f"{where}")


def _open_run(agent, data: Any, env: Any, num_envs: int, **settings: Any) -> _Run:
    """The training env (made from an id, or the caller's), checked against the agent's spaces."""
    import gymnasium as gym

    chosen = _pick_env(agent, data, env)
    train_env = make_env(chosen, num_envs=num_envs)
    try:
        _check_env_fits(agent, train_env)
    except ValueError:
        if train_env is not chosen:
            train_env.close()
        raise
    vec = isinstance(train_env, gym.vector.VectorEnv)
    mode = train_env.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP) if vec else None
    if vec and mode not in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
        if train_env is not chosen:
            train_env.close()
        raise ValueError(f"TD3 trains on vector envs that reset their episodes themselves (autoreset_mode NEXT_STEP "
                         f"or SAME_STEP); this one has {mode}: make it with vector_kwargs={{'autoreset_mode': "
                         "gymnasium.vector.AutoresetMode.SAME_STEP}} (it failed at the first episode's end)")
    next_step = vec and mode == gym.vector.AutoresetMode.NEXT_STEP
    try:
        settings["eval_env"] = _eval_target(agent, chosen, train_env, vec, settings["eval_env"],
                                            settings["eval_every"])
    except ValueError:
        if train_env is not chosen:
            train_env.close()
        raise
    return _Run(env=train_env, chosen=chosen, owns_env=train_env is not chosen, name=_env_name(train_env),
                vec=vec, n_envs=train_env.num_envs if vec else 1, next_step_mode=next_step,
                identity=env_identity(train_env), env_given=data is not None or env is not None,
                normalizers=normalizers(train_env), **settings)


def _eval_target(agent, chosen: Any, train_env: Any, vec: bool, eval_env: Any, eval_every: int | None) -> Any:
    """What the run evaluates on, decided (and checked against the agent) before it trains: ``eval_env``,
    else the caller's id, else a fresh env made from the training env's spec (id, make kwargs and wrappers:
    a wrapped env keeps its id, so the id alone would evaluate another env). An env object that cannot be
    made again can only be evaluated on itself, which mid-run would cut the training episode in progress:
    that is done for the one evaluation at the end (``eval_every=None``); periodic evaluations need
    ``eval_env``."""
    if eval_every == 0:
        return eval_env
    if eval_env is not None:
        _check_eval_env(agent, eval_env)
        return eval_env
    if isinstance(chosen, (str, os.PathLike)):
        return str(chosen)
    spec, missing = _equivalent_spec(agent, train_env)
    if spec is not None:
        return spec
    if not vec and eval_every is None:
        return train_env
    name = _env_name(train_env)
    why = ("a vector env cannot be evaluated episode by episode" if vec else
           f"evaluating every {eval_every} steps on the training env would cut its episodes")
    raise ValueError(f"TD3 on {name}: no separate env to evaluate on ({missing}, and {why}): "
                     f"pass eval_env=<another {name} instance> (or eval_every=0 to skip evaluation)")


def _check_eval_env(agent, eval_env: Any) -> None:
    """``eval_env`` made (an id or spec) and checked against the agent before the first step: a wrong one
    failed at the first evaluation, after ``eval_every`` steps of training, with nothing saved."""
    try:
        e = make_env(eval_env)
    except (TypeError, ValueError) as err:
        raise type(err)(f"eval_env={_shown(eval_env)}: {err}") from None
    try:
        _check_env_fits(agent, e)
    except ValueError as err:
        raise ValueError(f"eval_env={_shown(eval_env)}: {err}") from None
    finally:
        if e is not eval_env:
            e.close()


def _shown(env: Any) -> str:
    if isinstance(env, (str, os.PathLike)):
        return repr(str(env))
    return getattr(env, "id", None) or _env_name(env)  # an EnvSpec by its id


def _equivalent_spec(agent, train_env: Any) -> tuple[Any, str]:
    """``(spec, "")`` when ``gymnasium.make(spec)`` of the training env's spec gives an env that fits the
    agent; else ``(None, why not)``."""
    import gymnasium as gym

    from zoo.rl.envspec import single_spec

    name, spec = _env_name(train_env), without_pass_through(single_spec(train_env))  # remade without a Monitor
    if spec is None:
        return None, f"{name} has no registered id"
    if spec.kwargs.get("render_mode") == "human":  # nobody watches an evaluation: no window for its episodes
        spec = replace(spec, kwargs={k: v for k, v in spec.kwargs.items() if k != "render_mode"})
    try:
        remade = gym.make(spec)
    except Exception as err:  # noqa: BLE001  any failure of the env's own code means: no equivalent env
        why = f"{name} cannot be made again from its spec ({type(err).__name__}: {err})"
    else:
        try:
            _check_env_fits(agent, remade)
            return spec, ""
        except ValueError as err:
            why = f"{name} made again from its spec does not fit the agent ({err})"
        finally:
            remade.close()
    log.info("TD3 on %s: %s", name, why)
    return None, why


def _start(agent, run: _Run, resume: bool | str | os.PathLike, seed: int | None, progress: bool) -> None:
    """Resume (when asked), then the env's first reset: seeded for a new run or by an explicit ``seed``,
    the checkpoint's episode restored for a resumed one; the schedule of evaluations and checkpoints; the
    log and the progress bar."""
    from zoo._progress import ProgressBar

    agent.ensure_buffer()
    path = _resume_path(run, resume) if resume else None
    if path is None:  # a loaded agent fine-tuned on a fresh env goes on with the input scale it learnt
        _adopt(agent, run.env, "this agent")
    if path is not None:
        if seed is not None:
            warnings.warn(f"TD3 on {run.name}: seed={seed} is ignored when resuming (the checkpoint's random "
                          "state continues, so that the resumed run replays the uninterrupted one)",
                          stacklevel=user_stacklevel())
        _restore_env(agent, run, *_resume(agent, run, path))
    elif agent.num_timesteps == 0 or seed is not None:
        _reset(run, seed=agent.seed if seed is None else int(seed))
    elif run.owns_env:
        # trained before, on an env made here: a fresh env has no stream to continue; seeding it from the
        # agent's progress keeps a repeated sequence of calls repeatable
        _reset(run, seed=agent.seed + agent.num_timesteps)
    else:  # trained before, on the caller's env: continue its random stream instead of reseeding
        _reset(run)
    _warn_short_run(agent, run, resumed=path is not None)
    if path is None:
        agent.reset_noise(training=True)  # new episodes: the correlated noise starts again (a resumed run keeps its own)
    run.recent.extend(e["return"] for e in run.episodes[-10:])
    run.next_eval = _next_multiple(agent.num_timesteps, run.eval_every)
    run.next_ckpt = _next_multiple(agent.num_timesteps, run.ckpt_every) if run.ckpt_dir else math.inf
    run.clock = _Clock(mark_steps=agent.num_timesteps)
    run.logger = RunLogger(run.log_dir, step_key="step") if run.log_dir is not None else None
    if path is not None:
        _restore_logs(agent, run)
    run.bar = ProgressBar(total=run.total_steps, initial=agent.num_timesteps, desc=f"td3 {run.name}", unit="step",
                   disable=not progress, dynamic_ncols=True)


def _warn_short_run(agent, run: _Run, resumed: bool) -> None:
    """A run that collects nothing, or nothing past ``learning_starts``, says so before its first step; only
    once a resume has loaded the checkpoint, whose step count and config are the run's."""
    cfg = agent.config
    if run.total_steps <= agent.num_timesteps:
        if not resumed:  # a resumed run that has reached its total only finishes (evaluation, checkpoint)
            warnings.warn(
                f"TD3 on {run.name}: total_steps={run.total_steps} counts every transition this agent collected, "
                f"and it has collected {agent.num_timesteps}: this call collects none. To train further, give a "
                f"larger total (total_steps={agent.num_timesteps} + the steps to add)", stacklevel=user_stacklevel())
    elif run.total_steps <= cfg.learning_starts:
        warnings.warn(
            f"TD3 on {run.name}: total_steps={run.total_steps} does not pass learning_starts={cfg.learning_starts} "
            f"(and {agent.num_timesteps} steps are done): this run collects random transitions and makes no "
            "gradient update; raise total_steps or lower learning_starts (zoo.build('td3', learning_starts=...))",
            stacklevel=user_stacklevel())


def _resume_path(run: _Run, resume: bool | str | os.PathLike) -> Path | None:
    """The checkpoint ``resume`` names; None for ``resume=True`` on a folder that has none yet (the engine's
    rule: one command line serves the first run and every restart after a kill)."""
    if not isinstance(resume, bool):
        path = Path(resume).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no TD3 checkpoint at {path} to resume from")
        return path
    if run.ckpt_path is None:
        raise ValueError("resume=True needs checkpoint_dir (or pass the checkpoint path as resume=...)")
    if not run.ckpt_path.exists():  # a file there that does not load is an error (_read_checkpoint), not this
        log.info("resume: no TD3 checkpoint in %s yet (%s), starting from scratch", run.ckpt_dir, CHECKPOINT_NAME)
        return None
    return run.ckpt_path


def _carry_best_file(agent, run: _Run, path: Path) -> None:
    """A resume from another folder's checkpoint into ``checkpoint_dir`` copies that run's
    ``td3_best.safetensors`` (the policy of the agent's ``best_step``) there, atomically: the result's best
    step and ``checkpoint_path`` name the files of one folder (its best policy stayed behind, and the result
    named ``td3_last.pt``). A best file of another step, or none, is not copied."""
    if run.ckpt_dir is None or agent.best_step is None or path.parent.resolve() == run.ckpt_dir.resolve():
        return
    source = path.parent / BEST_NAME
    if not source.is_file():
        return
    from zoo import hub

    if hub.read_metadata(source).get("step") != str(agent.best_step):
        return
    import shutil

    with open(source, "rb") as src, fs.atomic_write(run.ckpt_dir / BEST_NAME, size=source.stat().st_size) as dst:
        shutil.copyfileobj(src, dst)


def _run_settings(run: _Run) -> dict[str, Any]:
    """The loop's own settings a checkpoint records and a resume compares (only ``total_steps`` may change):
    how many envs collect, and which env (its id, make kwargs and wrappers: another env with the same
    spaces is another experiment)."""
    return {"total_steps": run.total_steps, "num_envs": run.n_envs, "env": run.identity}


def _resume(agent, run: _Run, path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """Load the checkpoint into the agent (its settings reconciled first: zoo.engine.resume's policy) and
    the run's episode log; returns the env's saved random state and the run's state at the checkpoint
    (None in a checkpoint from before it was saved: those were taken at episode boundaries)."""
    if path.suffix == ".safetensors":
        raise ValueError(f"{path} holds a policy's weights only (TrainResult.checkpoint_path is the best evaluated "
                         f"policy); a resume needs the run's checkpoint, {path.with_name(CHECKPOINT_NAME)} (optimizers, "
                         f"replay buffer, episodes): pass resume=True with checkpoint_dir, or that file's path. "
                         f"To start a new run from these weights: zoo.build('td3', weights={str(path)!r})")
    state = _read_checkpoint(path)
    _refuse_other_env(agent, run, state, path)
    changed = agent.load_checkpoint_state(state, run=_run_settings(run), what=str(path))
    run.episodes = [dict(e) for e in state.get("episodes", [])]
    run.resumed = {"checkpoint": path, "changed": changed}
    _carry_best_file(agent, run, path)
    log.info("resumed TD3 on %s from %s at step %d", run.name, path, agent.num_timesteps)
    return state.get("env_rng"), state.get("run_state")


def _refuse_other_env(agent, run: _Run, state: dict[str, Any], path: Path) -> None:
    """A resume trains on the checkpointed run's env: another one (the agent's own default when the call
    named none, say) is a ``ResumeError`` before anything loads, naming the checkpoint's env and the call
    that continues it. An agent built for another env is not rebuilt for the checkpoint's behind the
    caller's back (Stable-Baselines3's ``load`` + ``learn`` also need the env passed again)."""
    from zoo.engine.resume import ResumeError
    from zoo.rl.td3 import checkpoint_build_config

    saved = json.loads(state["describe"])
    recorded = json.loads(state["settings"]).get("env") if "settings" in state else None  # older: not recorded
    if (recorded is None or recorded == run.identity) and (saved["obs_dim"], saved["act_dim"]) == (
            agent.obs_dim, agent.act_dim):
        return
    theirs = recorded or saved.get("env_id") or "an env without a registered id"
    build = checkpoint_build_config(state)
    env_id = build.pop("env", None)
    args = "".join(f", {k}={v!r}" for k, v in build.items())
    if env_id is not None and recorded in (None, env_id):  # a plain id: the name makes it again
        by_name = f", model_config={build!r}" if build else ""
        how = (f"zoo.train('td3', {env_id!r}{by_name}, resume=True, ...), or with an agent: "
               f"zoo.train(zoo.build('td3', env={env_id!r}{args}), {env_id!r}, resume=True, ...)")
    else:  # make kwargs, wrappers or no id: only the caller can make that env again
        how = (f"ENV, made as that run's was ({theirs}), with an agent built for it: "
               f"zoo.train(zoo.build('td3', env=ENV{args}), ENV, resume=True, ...)")
    given = "" if run.env_given else ", the agent's own (the call named no env)"
    raise ResumeError(
        f"cannot resume {path} on {run.identity!r}{given}, obs_dim {agent.obs_dim}, act_dim {agent.act_dim}: it "
        f"continues a TD3 run on {theirs!r}, obs_dim {saved['obs_dim']}, act_dim {saved['act_dim']}, and a resume "
        f"trains on the same env (env: {theirs!r} in {path}, {run.identity!r} now). To continue it, pass that "
        f"env: {how}")


def _reset(run: _Run, seed: int | None = None) -> None:
    """Start the single env's next episode (all of a vector env's), remembering how, for a resume."""
    if not run.vec:
        run.episode_start = {"seed": seed} if seed is not None else {"rng": _env_rng_state(run.env)}
        if run.normalizers:  # a resume mid-episode replays it from the statistics it began with
            run.episode_start["normalization"] = normalization.statistics(run.normalizers, accumulators=True)
    run.obs, _ = run.env.reset(seed=seed)


def _restore_env(agent, run: _Run, env_rng: str | None, saved: dict[str, Any] | None) -> None:
    """Put the env where the checkpointed run was: at an episode boundary, its random state restored and
    the next episode begun; mid-episode, that episode begun again and replayed (:func:`_replay_episode`)."""
    if saved is not None:
        run.since_train = int(saved["since_train"])
    now = (saved or {}).get("normalization")  # None in a checkpoint of a run without them, or an older one
    if run.vec:
        _put_statistics(run, now)
        if saved is not None and any(n > 0 for n in saved["ep_len"]):
            warnings.warn(f"TD3 on {run.name}: resuming a vector env mid-episode: the episodes in progress at the "
                          "checkpoint restart (a vector env's state is not saved), so the resumed run does not "
                          "replay the uninterrupted one exactly", stacklevel=user_stacklevel())
        # a seed of the run's own (its seed and step), not the OS's: two resumes of one checkpoint were two runs
        _reset(run, seed=(agent.seed * 1_000_003 + agent.num_timesteps) % 2**31)
        return
    ep_len = int(saved["ep_len"][0]) if saved is not None else 0
    if ep_len > 0:
        _put_statistics(run, saved["episode_start"].get("normalization"))  # as the episode began
        if _replay_episode(agent, run, saved["episode_start"], ep_len):
            run.ep_ret[0], run.ep_len[0] = float(saved["ep_ret"][0]), ep_len
            run.episode_start = dict(saved["episode_start"])
            return
        warnings.warn(
            f"TD3 on {run.name}: the checkpoint was taken {ep_len} steps into an episode, and replaying that "
            "episode's actions did not reproduce its observations and rewards (the env's dynamics depend on more "
            "than its seed, or its transitions left the replay buffer): the episode restarts, so the resumed run "
            "does not replay the uninterrupted one exactly", stacklevel=user_stacklevel())
    _put_statistics(run, now)
    _set_env_rng_state(run.env, env_rng)
    _reset(run)


def _put_statistics(run: _Run, stats: dict[str, torch.Tensor] | None) -> None:
    """The checkpoint's normalisation statistics (and NormalizeReward's discounted return) back into the
    training env's wrappers; nothing for a checkpoint without them."""
    if stats is not None:
        normalization.put(run.normalizers, stats, source="the checkpoint", env_name=f"the training env ({run.identity})")


def _replay_episode(agent, run: _Run, start: dict[str, Any], n: int) -> bool:
    """Begin the checkpoint's episode in progress as it began, and step it with its ``n`` actions (the
    buffer's last ``n`` transitions); True when every observation and reward matches the buffer's."""
    buf = agent.buffer
    if n > len(buf) or not (start.get("seed") is not None or start.get("rng")):
        return False
    if start.get("seed") is not None:
        obs, _ = run.env.reset(seed=int(start["seed"]))
    else:
        _set_env_rng_state(run.env, start["rng"])
        obs, _ = run.env.reset()
    same = lambda x, stored: np.array_equal(np.asarray(x, np.float32), stored.cpu().numpy())
    for i in range(n):
        row = (buf.pos - n + i) % buf.capacity
        if not same(obs, buf.obs[row]):
            return False
        # the action exactly as the env got it: the buffer keeps the normalised float32 action
        obs, reward, terminated, truncated, _ = run.env.step(agent.scale_action(buf.act[row]).cpu().numpy())
        if terminated or truncated or not (same(obs, buf.next_obs[row]) and same(reward, buf.reward[row])):
            return False
    run.obs = obs
    return True


def _collect(agent, run: _Run) -> tuple[np.ndarray, np.ndarray]:
    """One environment step (all envs): uniform random actions before ``learning_starts``, the actor's
    with exploration noise after; the transitions go to the buffer. Returns ``(done, reward)``, (n_envs,)."""
    if run.need_reset:
        _reset(run)
        run.need_reset = False
    learning = agent.num_timesteps >= agent.config.learning_starts
    if learning and run.clock.t0 is None:
        run.clock.t0 = time.perf_counter()
    if learning:
        a = agent.act_normalised(run.obs, explore=True)  # (act_dim,) or (n_envs, act_dim) in [-1, 1]
    else:
        a = agent.random_action_normalised(run.n_envs if run.vec else None)
    next_obs, reward, terminated, truncated, info = run.env.step(agent.scale_action(a).cpu().numpy())
    step = agent.num_timesteps + run.n_envs
    if not (np.isfinite(next_obs).all() and np.isfinite(reward).all()):
        what = "observation" if not np.isfinite(next_obs).all() else "reward"
        raise ValueError(f"{run.name} returned a non-finite {what} at env step {step} "
                         f"(episode {agent.num_episodes + 1}): obs={np.asarray(next_obs).tolist()}, "
                         f"reward={np.asarray(reward).tolist()}; training stopped")
    done, reward = _store(agent.buffer, run, a.cpu().numpy(), next_obs, reward, terminated, truncated, info)
    agent.num_timesteps = step
    run.obs = next_obs
    run.bar.update(run.n_envs)
    run.since_train += 1
    if learning:
        run.clock.steps += run.n_envs
    return done, reward


def _store(buf, run: _Run, a: np.ndarray, next_obs, reward, terminated, truncated,
           info: dict) -> tuple[np.ndarray, np.ndarray]:
    """Add this step's transitions; returns ``(done, reward)`` per env (a skipped transition's reward 0)."""
    if not run.vec:
        buf.add_one(run.obs, a, reward, next_obs, terminated)
        run.resetting = np.zeros(1, bool)
        return np.array([terminated or truncated]), np.array([reward])
    done = np.logical_or(terminated, truncated)
    store = next_obs
    if not run.next_step_mode and done.any():  # SAME_STEP: next_obs is the reset obs; store the true final one
        final = info.get("final_obs")
        store = np.array(next_obs, copy=True)
        for i in np.flatnonzero(done):
            store[i] = final[i]
    keep = ~run.prev_autoreset
    run.resetting = ~keep
    if keep.all():
        buf.add(run.obs, a, reward, store, terminated)
    elif keep.any():
        buf.add(run.obs[keep], a[keep], reward[keep], store[keep], terminated[keep])
    if run.next_step_mode:
        run.prev_autoreset = done
        return done, np.where(keep, reward, 0.0)
    return done, np.asarray(reward)


def _update(agent, run: _Run) -> None:
    """Every ``train_freq`` steps after ``learning_starts``: ``gradient_steps`` updates (-1: as many as
    transitions were collected since the last ones)."""
    cfg = agent.config
    if run.since_train < cfg.train_freq:
        return
    # a rollout of train_freq steps ends, trained on or not (SB3's collect_rollouts): gradient_steps=-1 trains as
    # many steps as it collected, not every warm-up step too (learning_starts + 1 updates in the first phase)
    collected, run.since_train = run.since_train * run.n_envs, 0
    if agent.num_timesteps > cfg.learning_starts:
        if cfg.lr_schedule == "linear":  # SB3: lr * the fraction of the run still to go, before each phase
            agent.apply_lr(1.0 - agent.num_timesteps / run.total_steps)
        agent.update(cfg.gradient_steps if cfg.gradient_steps > 0 else collected)


def _end_episodes(agent, run: _Run, done: np.ndarray, reward: np.ndarray) -> bool:
    """Count this step's reward; log the episodes that ended (and restart their noise). True if any did."""
    run.ep_ret += reward
    run.ep_len += ~run.resetting  # NEXT_STEP: an env's reset step is no step of its episode (its reward is 0)
    ended = np.flatnonzero(done)
    for i in ended:
        agent.num_episodes += 1
        run.recent.append(float(run.ep_ret[i]))
        run.episodes.append({"step": agent.num_timesteps, "return": float(run.ep_ret[i]),
                             "length": int(run.ep_len[i])})
        run.ep_ret[i], run.ep_len[i] = 0.0, 0
    if len(ended):
        agent.reset_noise(ended.tolist() if run.vec else None, training=True)
        run.bar.set_postfix(ret=f"{np.mean(run.recent):.1f}", refresh=False)
    return len(ended) > 0


def _evaluate(agent, run: _Run) -> None:
    """A deterministic evaluation -> one history row (and metrics.csv row); keeps the best policy."""
    started = time.perf_counter()
    if run.eval_env is run.env:  # the end of a run on an env without an id (_eval_target)
        log.info("TD3 on %s: evaluating on the training env itself (pass eval_env= for a separate one)", run.name)
        saved = _env_rng_state(run.env)  # the checkpoint after this holds the training stream, not the eval's
        stats = normalization.statistics(run.normalizers, accumulators=True)  # NormalizeReward's return too
        with _normalization_synced(run, run.env):  # frozen: evaluation steps are no training data
            res = evaluate(agent, env=run.env, episodes=run.eval_episodes)
        _set_env_rng_state(run.env, saved)
        normalization.put(run.normalizers, stats, source="the training env", env_name="itself")
    else:
        e = make_env(run.eval_env)  # an id or spec made here (for its statistics); an env object as it is
        try:
            with _normalization_synced(run, e):
                res = evaluate(agent, env=e, episodes=run.eval_episodes)
        finally:
            if e is not run.eval_env:
                e.close()
    row = {"epoch": len(agent.history) + 1, "step": agent.num_timesteps, "eval_return_mean": res["return_mean"],
           "eval_return_std": res["return_std"], "eval_length_mean": res["length_mean"],
           "train_return_recent": float(np.mean(run.recent)) if run.recent else float("nan"),
           "episodes": agent.num_episodes, "updates": agent.num_updates, **agent.pop_losses(),
           "steps_per_s": run.clock.row_rate(agent.num_timesteps, started),
           "learn_steps_per_s": run.clock.learn_rate(started)}
    if not agent.history or res["return_mean"] > max(h["eval_return_mean"] for h in agent.history):
        # the best evaluated policy so far (what rl-zoo's EvalCallback keeps as best_model)
        agent.best_state = {k: v.clone() for k, v in agent.export_state_dict().items()}
        agent.best_step = agent.num_timesteps
        if run.ckpt_dir is not None:
            _keep_statistics(agent, run)  # those this evaluation normalised with
            agent.save(run.ckpt_dir / BEST_NAME, {"step": str(agent.num_timesteps)})
    agent.history.append(row)
    recent = f"{row['train_return_recent']:.1f}" if run.recent else "-"  # no episode finished yet
    run.bar.set_postfix(ret=recent, eval=f"{res['return_mean']:.1f}")
    _write_logs(agent, run)
    run.clock.evaluated(started, agent.num_timesteps)
    run.next_eval = _next_multiple(agent.num_timesteps, run.eval_every)


@contextlib.contextmanager
def _normalization_synced(run: _Run, eval_env: Any):
    """Evaluate with the training env's statistics: the evaluation env's normalisation wrappers take copies
    of the training env's running mean and variance and stop updating them for the evaluation (their own
    setting restored after), as SB3's EvalCallback syncs VecNormalize. A fresh env made from the spec would
    otherwise normalise with statistics of its own few episodes: another input scale than the policy's.
    Stacks that do not pair up (another number of either kind) are left as they are, with a warning."""
    theirs = normalizers(eval_env)
    pairs = []
    for kind in RUNNING_STATS if run.normalizers or theirs else ():
        ours_k = [w for w in run.normalizers if hasattr(w, kind)]
        theirs_k = [w for w in theirs if hasattr(w, kind)]
        if len(ours_k) == len(theirs_k):
            pairs += [(kind, a, b) for a, b in zip(ours_k, theirs_k)]
        elif not run.normalization_warned:
            run.normalization_warned = True
            warnings.warn(
                f"TD3 on {run.name}: the training env normalises with running statistics ({kind}) in "
                f"{len(ours_k)} wrapper(s), the evaluation env in {len(theirs_k)}: they cannot be synced, so "
                "evaluations see another input scale than training; pass eval_env= with the same wrappers",
                stacklevel=user_stacklevel())
    for kind, a, b in pairs:
        if a is not b:
            setattr(b, kind, copy.deepcopy(getattr(a, kind)))
    token = _SYNCED.set(eval_env)  # evaluate puts no agent statistics in: this env has the run's (stale ones)
    try:
        with normalization.frozen([b for _, _, b in pairs]):
            yield
    finally:
        _SYNCED.reset(token)


_SYNCED: contextvars.ContextVar[Any] = contextvars.ContextVar("zoo_td3_synced_eval_env", default=None)


def _keep_statistics(agent, run: _Run) -> None:
    """The training env's normalisation statistics become the agent's (what its weights files and checkpoint
    carry), and the spec that makes that env again its env (what it evaluates on by default)."""
    from zoo.rl.envspec import own_spec

    agent.normalization = normalization.statistics(run.normalizers)
    agent.env_spec = own_spec(run.env)
    agent.env_object = run.env if had_unmade_wrappers(run.env) and not run.owns_env else None


def _write_logs(agent, run: _Run) -> None:
    if run.logger is not None and agent.history:
        run.logger.log_epoch(agent.history)
    if run.log_dir is not None and run.episodes:
        write_csv(run.episodes, run.log_dir / "episodes.csv")


def _restore_logs(agent, run: _Run) -> None:
    """A resumed run's CSVs rewritten from its checkpoint's rows before it goes on: ``td3_last.pt`` is written at
    episode ends between evaluations, the CSVs at evaluations, so a kill after a checkpoint left
    ``episodes.csv`` (or ``metrics.csv``) short of the run it continues until the resumed run's next evaluation,
    and for good when that run stopped again first (the engine's resume does the same with ``metrics.csv``)."""
    if run.logger is not None:
        run.logger.restore(agent.history)
    if run.log_dir is not None and run.episodes:
        restore_csv(run.episodes, run.log_dir / "episodes.csv")


def _checkpoint(agent, run: _Run) -> None:
    """``td3_last.pt``, atomically: the agent's state, the run's settings and episodes, the env's rng, and
    where the run stands in its episodes (what a resume needs when the checkpoint is mid-episode)."""
    _keep_statistics(agent, run)
    state = agent.checkpoint_state(run=_run_settings(run))
    state["env_rng"] = _env_rng_state(run.env) if not run.vec else None
    state["episodes"] = run.episodes
    state["run_state"] = {"since_train": run.since_train, "ep_ret": run.ep_ret.tolist(),
                          "ep_len": run.ep_len.tolist(), "episode_start": dict(run.episode_start)}
    if run.normalizers:  # the env's statistics as they stand (and NormalizeReward's discounted return)
        state["run_state"]["normalization"] = normalization.statistics(run.normalizers, accumulators=True)
    _atomic_torch_save(state, run.ckpt_path)
    run.next_ckpt = _next_multiple(agent.num_timesteps, run.ckpt_every)


def _finish(agent, run: _Run) -> None:
    """The speed of the learning phase, a last evaluation and checkpoint at the end (mid-episode too: a
    resume replays that episode), the learning curves."""
    _keep_statistics(agent, run)
    now = time.perf_counter()
    learn_time = run.clock.learn_time(now)
    agent.last_run_stats = {"learn_steps": run.clock.steps, "learn_time_s": learn_time,
                            "learn_steps_per_s": run.clock.steps / learn_time if learn_time > 0 else float("nan")}
    if run.eval_every != 0 and (not agent.history or agent.history[-1]["step"] != agent.num_timesteps):
        _evaluate(agent, run)
    if run.ckpt_path is not None:
        _checkpoint(agent, run)
    _write_logs(agent, run)
    if run.logger is not None:  # the picture shows the curves worth a look; metrics.csv has every column
        shown = [{k: h[k] for k in _PLOTTED if k in h} for h in agent.history]
        run.logger.close(shown, title=f"TD3 on {run.name}")


def _close(run: _Run) -> None:
    if run.bar is not None:
        run.bar.close()
    if run.owns_env:
        run.env.close()
    if run.logger is not None:
        with contextlib.suppress(Exception):  # an error on the way out must not hide the run's own error
            run.logger.close([])


def _result(agent, run: _Run):
    from zoo.engine.result import TrainResult

    evals = [h["eval_return_mean"] for h in agent.history]
    # no gradient update, no trained policy: its evaluations score the random initialisation
    best_i = int(np.argmax(evals)) if evals and agent.num_updates > 0 else None
    return TrainResult(
        history=list(agent.history),
        best_metric=evals[best_i] if best_i is not None else None,
        best_epoch=best_i + 1 if best_i is not None else None,
        checkpoint_path=_best_file(agent, run, best_i) or run.ckpt_path,
        model=agent,
        monitor="eval_return_mean",
        resumed=run.resumed,
    )


def _best_file(agent, run: _Run, best_i: int | None) -> Path | None:
    """``td3_best.safetensors`` when it holds the policy of the best history row (the step it records is that
    row's), as TrainResult documents; None when no checkpoints were written or the file is from another run."""
    if run.ckpt_dir is None or best_i is None or not (run.ckpt_dir / BEST_NAME).is_file():
        return None
    from zoo import hub

    path = run.ckpt_dir / BEST_NAME
    return path if hub.read_metadata(path).get("step") == str(agent.history[best_i]["step"]) else None


def _next_multiple(current: int, every: int | None) -> float:
    return (current // every + 1) * every if every else math.inf
