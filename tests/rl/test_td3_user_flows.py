"""Faults an audit of TD3's user flows found: normalising wrappers an AsyncVectorEnv hides in its worker
processes, zoo.predict on an agent trained behind NormalizeObservation, and the CLI's observation arguments."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers import NormalizeObservation, NormalizeReward

import zoo

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


@pytest.mark.parametrize("wrappers", [[NormalizeReward], [NormalizeObservation]])
def test_async_vector_env_with_hidden_normalizers_is_refused(wrappers):
    """Before: evaluation returned scaled returns that changed between identical calls (NormalizeReward in the
    workers), and training dropped NormalizeObservation's statistics silently (the saved file could not be
    evaluated)."""
    agent = zoo.build("td3", env="Pendulum-v1", **TINY)
    vec = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="async", wrappers=wrappers)
    try:
        with pytest.raises(ValueError, match='vectorization_mode="sync"'):
            zoo.evaluate(agent, vec, episodes=1, max_steps=3)
        with pytest.raises(ValueError, match='vectorization_mode="sync"'):
            zoo.train(agent, vec, total_steps=30, eval_every=0, progress=False)
        assert agent.num_timesteps == 0
    finally:
        vec.close()


def test_async_vector_env_without_normalizers_still_evaluates():
    agent = zoo.build("td3", env="Pendulum-v1", **TINY)
    vec = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="async")
    try:
        assert zoo.evaluate(agent, vec, episodes=2, max_steps=3)["length_mean"] == 3.0
    finally:
        vec.close()


def test_zoo_predict_normalises_with_the_agents_observation_statistics():
    """Before: zoo.predict fed the env's raw observation to a policy trained behind NormalizeObservation (the
    evaluation's action was +2.0, zoo.predict's -2.0); agent.predict / agent.act keep taking normalised ones."""
    agent = zoo.build("td3", env="Pendulum-v1", **TINY)
    mean, var = np.array([0.2, -0.1, 3.0]), np.array([0.25, 4.0, 9.0])
    agent.normalization = {"obs_rms.0.mean": torch.tensor(mean), "obs_rms.0.var": torch.tensor(var),
                           "obs_rms.0.count": torch.tensor(500.0)}
    raw = np.array([[0.5, 0.866, -5.0], [1.0, 0.0, 7.0]], np.float32)
    scaled = ((raw - mean) / np.sqrt(var + 1e-8)).astype(np.float32)
    assert np.allclose(zoo.predict(agent, raw), agent.act(scaled), atol=1e-6)
    assert np.allclose(zoo.predict(agent, raw[0]), agent.act(scaled[0]), atol=1e-6)
    assert np.allclose(agent.predict(raw)[0], agent.act(raw), atol=1e-6)
    assert agent.normalization["obs_rms.0.count"].item() == 500.0  # frozen: predicting updates nothing


def test_cli_observations_mix_batches_and_single_ones_and_refuse_booleans():
    """Before: '[[1,0,0],[0,1,0]]' 1,0,0 failed with numpy's "inhomogeneous shape" error, and '[true,0,0]' was
    read as [1, 0, 0]."""
    from zoo.cli import UsageError
    from zoo.rl.cli import _observations

    assert _observations(["[[1,0,0],[0,1,0]]", "1,0,0"]) == [[1.0, 0, 0], [0, 1.0, 0], [1.0, 0, 0]]
    assert _observations(["1,0,0"]) == [1.0, 0, 0] and _observations(["[[1,0,0]]"]) == [[1.0, 0, 0]]
    for bad in (["[true,0,0]"], ["[1,0,0]", "[0,1]"], ["[[1,0],[1,[0]]]"], ['["1",0,0]']):
        with pytest.raises(UsageError, match="observation"):
            _observations(bad)
