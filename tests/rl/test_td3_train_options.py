"""zoo.train's batch_size= / lr= / amp= on an agent: kept as plain numbers, and left as they were by a call that
fails before its first step."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zoo

SMALL = {"net_arch": (8, 8), "batch_size": 4, "learning_starts": 10, "buffer_size": 500}


def test_numpy_numbers_given_to_train_are_saved(counter_env, tmp_path):
    """lr=np.float32(1e-3) trained, then zoo.save and agent.save failed: 'Object of type float32 is not JSON
    serializable'."""
    agent = zoo.build("td3", env=counter_env(horizon=5), **SMALL)
    zoo.train(agent, counter_env(horizon=5), total_steps=12, eval_every=0, lr=np.float32(1e-3),
              batch_size=np.int64(3), progress=False)
    assert type(agent.config.actor_lr) is float and type(agent.config.batch_size) is int
    zoo.save(agent, tmp_path / "a.safetensors")
    agent.save(tmp_path / "b.safetensors")
    saved = json.loads(zoo.hub.read_metadata(tmp_path / "b.safetensors")["zoo.config"])
    assert saved["actor_lr"] == saved["critic_lr"] == pytest.approx(1e-3) and saved["batch_size"] == 3


def test_a_train_call_refused_before_its_first_step_leaves_the_config(counter_env):
    """batch_size/lr/amp of a refused call stayed on the agent (and a later zoo.save recorded them as the
    settings it trained with); a run that steps keeps them."""
    agent = zoo.build("td3", env=counter_env(horizon=5), **SMALL)
    before = agent.config
    for bad in ({}, {"total_steps": -5}, {"total_steps": 20, "eval_every": "x"}):
        with pytest.raises(ValueError):
            zoo.train(agent, counter_env(horizon=5), lr=0.5, batch_size=99, amp=None, progress=False, **bad)
        assert agent.config == before and agent.num_timesteps == 0
        assert [g["lr"] for opt in (agent.actor_opt, agent.critic_opt) for g in opt.param_groups] == [1e-3, 1e-3]
    zoo.train(agent, counter_env(horizon=5), total_steps=12, eval_every=0, lr=0.5, batch_size=6, progress=False)
    assert (agent.config.actor_lr, agent.config.batch_size) == (0.5, 6)
