"""A tiny configurable gymnasium env for the TD3 tests (no physics, everything known by hand)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces


class CounterEnv(gym.Env):
    """obs = [episode, t] (+ zeros); reward = t; terminates at ``terminate_at``, NaN obs at global ``nan_at``."""

    def __init__(self, low=(-1.0,), high=(1.0,), obs_dim: int = 2, terminate_at: int | None = None,
                 nan_at: int | None = None):
        self.observation_space = spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = spaces.Box(np.array(low, np.float32), np.array(high, np.float32))
        self.obs_dim, self.terminate_at, self.nan_at = obs_dim, terminate_at, nan_at
        self.episode, self.t, self.total = -1, 0, 0

    def _obs(self) -> np.ndarray:
        o = np.zeros(self.obs_dim, np.float32)
        o[0], o[1] = self.episode, self.t
        return o

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.float32)), action
        self.t += 1
        self.total += 1
        obs = self._obs()
        if self.nan_at is not None and self.total == self.nan_at:
            obs[1] = np.nan
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return obs, float(self.t), terminated, False, {}


@pytest.fixture
def counter_env():
    """``counter_env(horizon=None, **kw)``: a CounterEnv, wrapped in a TimeLimit when ``horizon`` is given."""

    def make(horizon: int | None = None, **kw):
        env = CounterEnv(**kw)
        return gym.wrappers.TimeLimit(env, max_episode_steps=horizon) if horizon else env

    return make
