"""One call of :func:`zoo.rl.loop.train` besides the agent (:class:`Run`): its env and settings, the
episodes in progress, its schedule of evaluations and checkpoints, its clock, and the names of the files it
writes in ``checkpoint_dir``. The loop (:mod:`zoo.rl.loop`) and its checkpoints (:mod:`zoo.rl.resume`) both
work on it.
"""

from __future__ import annotations

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

__all__ = ["BEST_NAME", "CHECKPOINT_NAME", "Clock", "Run", "keep_statistics", "next_multiple"]

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
    next_eval: float = math.inf
    next_ckpt: float = math.inf
    clock: Clock = field(default_factory=Clock)
    resumed: dict[str, Any] | None = None
    identity: str = ""  # the training env as zoo.rl.envspec.env_identity writes it: a resume compares it
    env_given: bool = True  # False: the call named no env, so the run trains on the agent's own env id
    normalizers: list = field(default_factory=list)  # the training env's running-statistics wrappers
    reward_scalers: list = field(default_factory=list)  # its NormalizeReward wrappers, with the rows they scale
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


def keep_statistics(agent, run: Run) -> None:
    """The training env's normalisation statistics become the agent's (what its weights files and checkpoint
    carry), and the spec that makes that env again its env (what it evaluates on by default)."""
    from zoo.rl.envspec import own_spec

    agent.normalization = normalization.statistics(run.normalizers)
    agent.env_spec = own_spec(run.env)
    agent.env_spec_lost = None  # it trained on that env: its spec (or bare id) is known again
    agent.env_object = run.env if had_unmade_wrappers(run.env) and not run.owns_env else None


def next_multiple(current: int, every: int | None) -> float:
    return (current // every + 1) * every if every else math.inf
