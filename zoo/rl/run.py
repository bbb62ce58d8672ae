"""One call of :func:`zoo.rl.loop.train` besides the agent (:class:`Run`): its env and settings, the
episodes in progress, its schedule of evaluations and checkpoints, its clock, and the names of the files it
writes in ``checkpoint_dir``. The loop (:mod:`zoo.rl.loop`) and its checkpoints (:mod:`zoo.rl.resume`) both
work on it.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zoo.engine.logs import RunLogger
from zoo.rl import normalization
from zoo.rl.envspec import had_unmade_wrappers

log = logging.getLogger(__name__)

__all__ = ["BEST_NAME", "CHECKPOINT_NAME", "Clock", "LiveEpisodes", "Run", "WrittenCheckpoint", "end_of_run", "env_marks",
           "keep_statistics", "next_multiple"]

CHECKPOINT_NAME = "td3_last.pt"
"""The run's checkpoint (agent, optimizers, replay buffer, episodes): what ``resume`` continues from."""
BEST_NAME = "td3_best.safetensors"
"""The best evaluated policy's networks (``zoo.build("td3", weights=...)`` loads it): ``TrainResult.checkpoint_path``."""


@dataclass
class Clock:
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
class Run:
    """One call of :func:`zoo.rl.loop.train` besides the agent: its env and settings, the episodes in progress,
    the log."""

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
    # a vector env's sub-envs' random states from before the resets that began their episodes in
    # progress (None until one ended): what a resume at a checkpoint where no episode is in progress resets them from
    sub_env_starts: list[str | None] = field(init=False)
    # the resume reset the sub-envs whose episodes ended at its checkpoint: the next step is their autoreset step,
    # which the env (reset since) does not take again
    reset_taken: bool = False
    # the transition count the run stops at: total_steps, rounded up to whole steps of all n_envs (end_of_run)
    end_steps: int = 0
    next_eval: float = math.inf
    next_ckpt: float = math.inf
    clock: Clock = field(default_factory=Clock)
    resumed: dict[str, Any] | None = None
    identity: str = ""  # the training env as zoo.rl.envspec.env_identity writes it: a resume compares it
    env_given: bool = True  # False: the call named no env, so the run trains on the agent's own env id
    normalizers: list = field(default_factory=list)  # the training env's running-statistics wrappers
    reward_scalers: list = field(default_factory=list)  # its NormalizeReward wrappers, with the rows they scale
    normalization_warned: bool = False
    episodes_cut: bool = False  # an evaluation on the training env itself ended the episodes in progress
    interrupted: bool = False  # Ctrl-C arrived: the loop stops after this step, checkpointing first
    stopped_by: str = "Ctrl-C"  # or SIGTERM, which the zoo command passes on as a Ctrl-C

    def __post_init__(self) -> None:
        self.ep_ret = np.zeros(self.n_envs)
        self.ep_len = np.zeros(self.n_envs, dtype=np.int64)
        self.prev_autoreset = np.zeros(self.n_envs, dtype=bool)
        self.resetting = np.zeros(self.n_envs, dtype=bool)
        self.sub_env_starts = [None] * self.n_envs

    @property
    def ckpt_path(self) -> Path | None:
        return self.ckpt_dir / CHECKPOINT_NAME if self.ckpt_dir is not None else None


@dataclass
class LiveEpisodes:
    """The episodes a :func:`zoo.rl.loop.train` call leaves in progress when it stops after a whole step (at its
    end, or on Ctrl-C): the env it stepped, still open, and where each of its episodes stands. The agent keeps
    them (``agent.live_episodes``), as Stable-Baselines3's model keeps ``env`` and ``_last_obs``; the next call
    on that env continues them (``learn(n, reset_num_timesteps=False)``: the same transitions as one longer
    call), where a restart would cut each episode in progress short, unlogged, and begin another. Any other
    call drops them, closing the env where the run had made it. A copy of the agent (``copy.deepcopy``, pickle)
    starts new episodes: the env stays the original's (an ``AsyncVectorEnv``'s pipes cannot be copied at all)."""

    env: Any
    owns_env: bool  # made by the run from an id or spec: no one else holds it
    identity: str
    n_envs: int
    num_timesteps: int  # the agent's count when the call stopped: only a call from there continues
    marks: list  # env_marks of a caller's env when the call stopped: an env used since then starts over
    obs: Any
    ep_ret: np.ndarray
    ep_len: np.ndarray
    prev_autoreset: np.ndarray
    need_reset: bool
    since_train: int
    episode_start: dict[str, Any]
    sub_env_starts: list[str | None]
    reset_taken: bool

    @classmethod
    def of(cls, agent, run: Run) -> LiveEpisodes:
        return cls(env=run.env, owns_env=run.owns_env, identity=run.identity, n_envs=run.n_envs,
                   num_timesteps=agent.num_timesteps, marks=[] if run.owns_env else env_marks(run.env),
                   obs=np.array(run.obs, copy=True), ep_ret=run.ep_ret.copy(), ep_len=run.ep_len.copy(),
                   prev_autoreset=run.prev_autoreset.copy(), need_reset=run.need_reset,
                   since_train=run.since_train, episode_start=dict(run.episode_start),
                   sub_env_starts=list(run.sub_env_starts), reset_taken=run.reset_taken)

    def made_again(self, env: Any, n_envs: int) -> bool:
        """Whether ``env``, just made from an id or spec, is another copy of this run's own env: the same
        identity (id, make kwargs, wrappers), number of envs and render mode (a call asking to watch gets its
        window)."""
        from zoo.rl.envspec import env_identity

        return (self.owns_env and n_envs == self.n_envs and env_identity(env) == self.identity
                and getattr(env, "render_mode", None) == getattr(self.env, "render_mode", None))

    def continue_in(self, agent, run: Run) -> bool:
        """Put these episodes into ``run`` when it steps their env from where they stopped (True); False when it
        does not: another env, an agent whose count moved (a resume loaded into it), or a caller's env that was
        stepped or reset since (:func:`env_marks` moved: zoo.evaluate on it, say)."""
        if run.env is not self.env or run.n_envs != self.n_envs or agent.num_timesteps != self.num_timesteps:
            return False
        if not self.owns_env and env_marks(run.env) != self.marks:
            log.info("TD3 on %s: the env was stepped or reset since the last call; its episodes start again",
                     run.name)
            return False
        run.obs = self.obs
        run.ep_ret, run.ep_len, run.prev_autoreset = self.ep_ret.copy(), self.ep_len.copy(), self.prev_autoreset.copy()
        run.need_reset, run.since_train, run.episode_start = self.need_reset, self.since_train, dict(self.episode_start)
        run.sub_env_starts, run.reset_taken = list(self.sub_env_starts), self.reset_taken
        return True

    def __reduce__(self) -> tuple[Any, tuple]:
        return _none_in_a_copy, ()

    def close_unless(self, env: Any) -> None:
        """Dropped: the env closed where the run had made it (and no run steps it now)."""
        if self.owns_env and self.env is not env:
            self.env.close()


def _none_in_a_copy() -> None:
    """What a copied or unpickled :class:`LiveEpisodes` or :class:`WrittenCheckpoint` becomes: none (they belong to
    the agent that ran, not to a copy of it)."""


@dataclass(frozen=True)
class WrittenCheckpoint:
    """The ``td3_last.pt`` an agent's training call last wrote, by what the file system says of it (path, inode,
    size, modification time): a later call of that agent into the same ``checkpoint_dir`` goes on with its own run
    there, where a folder holding any other run's checkpoints is refused. A copied or unpickled agent is another
    agent: it holds none (a copy writing there would replace the original's checkpoint)."""

    path: str
    stat: tuple[int, int, int]

    @classmethod
    def of(cls, path: Path) -> WrittenCheckpoint | None:
        try:
            return cls(str(path.resolve()), _stat_key(path))
        except OSError:
            return None

    def is_file(self, path: Path) -> bool:
        """Whether ``path`` is that file, unchanged since it was written."""
        try:
            return str(path.resolve()) == self.path and _stat_key(path) == self.stat
        except OSError:
            return False

    def __reduce__(self) -> tuple[Any, tuple]:
        return _none_in_a_copy, ()


def _stat_key(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def env_marks(env: Any) -> list:
    """What stepping or resetting ``env`` changes that can be read from outside it: each (sub-)env's random state
    and its ``TimeLimit``'s step count, and for a vector env the observations it last returned (its own copy, which
    every step and reset rewrites): an ``AsyncVectorEnv``'s sub-envs live in other processes, so those are all that
    shows a step or reset there (without them a stepped AsyncVectorEnv was continued from observations it had left
    behind), and they show it too in sub-envs that have neither a random state nor a ``TimeLimit``."""
    import gymnasium as gym

    from zoo.rl.resume import env_rng_state

    if isinstance(env, gym.vector.VectorEnv):
        while isinstance(env, gym.vector.VectorWrapper):
            env = env.env
        # AsyncVectorEnv's `observations`, SyncVectorEnv's `_observations` (the array its step and reset return,
        # or copy); bytes, so that the marks compare with ==
        last = getattr(env, "observations", getattr(env, "_observations", None))
        seen = np.ascontiguousarray(last).tobytes() if isinstance(last, np.ndarray) else None
        return [seen, *(env_marks(sub) for sub in getattr(env, "envs", ()))]
    marks: list = [env_rng_state(env)]
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            marks.append(env._elapsed_steps)  # gymnasium keeps the count only there
        env = env.env
    return marks


def keep_statistics(agent, run: Run) -> None:
    """The training env's normalisation statistics become the agent's (what its weights files and checkpoint
    carry), and the spec that makes that env again its env (what it evaluates on by default)."""
    from zoo.rl.envspec import own_spec

    agent.normalization = normalization.statistics(run.normalizers)
    agent.env_spec = own_spec(run.env)
    agent.env_spec_lost = None  # it trained on that env: its spec (or bare id) is known again
    agent.env_object = run.env if had_unmade_wrappers(run.env) and not run.owns_env else None


def end_of_run(num_timesteps: int, total_steps: int, n_envs: int) -> int:
    """The transition count a run from ``num_timesteps`` (a resumed run's: its checkpoint's) to ``total_steps`` (the
    agent's transitions in all) stops at: each step of a vector env collects ``n_envs`` transitions, so the count
    goes up in whole steps and ends at the first at or past the total, as Stable-Baselines3 counts
    ``total_timesteps`` (30 on 4 envs: 8 steps, 32 transitions). A run already there collects none. The progress
    bar's total, the ``step`` of ``metrics.csv``, ``episodes.csv`` and the learning curves, ``agent.num_timesteps``
    and the linear lr schedule (which reaches 0 there, never below) all count those transitions."""
    if total_steps <= num_timesteps:
        return num_timesteps
    return num_timesteps + -(-(total_steps - num_timesteps) // n_envs) * n_envs


def next_multiple(current: int, every: int | None) -> float:
    return (current // every + 1) * every if every else math.inf
