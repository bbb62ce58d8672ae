"""A TD3 weights file carries the spaces its agent acts in: ``zoo.build("td3", weights=path)`` gives back an
agent that acts as the saved one did (a wrapped env's bounds, an env without an id), and an env given
with other bounds is refused naming both."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers import RescaleAction

import zoo

TINY = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


def _rescaled_pendulum():
    return RescaleAction(gym.make("Pendulum-v1"), min_action=np.float32(0.0), max_action=np.float32(1.0))


def _saved(env, path):
    agent = zoo.build("td3", env=env, **TINY)
    with torch.no_grad():
        agent.actor.out.bias.add_(0.3)  # not the seed's initialisation: the file's weights are what act
    zoo.save(agent, path)
    return agent


def test_a_wrapped_envs_bounds_come_back_with_its_weights(tmp_path, capsys):
    path = tmp_path / "pend01.safetensors"
    agent = _saved(_rescaled_pendulum(), path)
    obs = np.random.default_rng(0).normal(size=(32, 3)).astype(np.float32) * 5
    loaded = zoo.build("td3", weights=path)
    assert (loaded.env_id, loaded._low_np.tolist(), loaded._high_np.tolist()) == ("Pendulum-v1", [0.0], [1.0])
    np.testing.assert_array_equal(loaded.act(obs), agent.act(obs))  # was: actions in Pendulum's [-2, 2]
    from zoo import cli

    assert cli.main(["predict", "td3", "--weights", str(path), "[1, 0, 0]"]) == 0
    assert capsys.readouterr().out.strip() == str(agent.act([1.0, 0.0, 0.0]).tolist())
    # the shell's form, as --net-arch 400,300 (it was "must be JSON arrays ... Extra data"), alone and in a batch
    assert cli.main(["predict", "td3", "--weights", str(path), "1,0,0", "0, 1, 0.5"]) == 0
    assert capsys.readouterr().out.splitlines() == [str(a) for a in agent.act([[1.0, 0.0, 0.0], [0.0, 1.0, 0.5]]).tolist()]
    assert cli.main(["predict", "td3", "--weights", str(path), "1,x,0"]) == 2
    assert "an observation is a JSON array like '[1.0, 0.0, 0.0]' or numbers apart by commas" in \
        capsys.readouterr().err
    # the env it was trained on loads it; the bare id (other bounds) is refused, naming both
    assert zoo.build("td3", weights=path, env=_rescaled_pendulum())._high_np.tolist() == [1.0]
    with pytest.raises(ValueError, match=r"actions in \[0\.0\]\.\.\[1\.0\].*\('Pendulum-v1'\).*actions in "
                                         r"\[-2\.0\]\.\.\[2\.0\]"):
        zoo.build("td3", weights=path, env="Pendulum-v1")


def test_a_file_of_an_env_without_an_id_builds_without_that_env(tmp_path, counter_env):
    path = tmp_path / "asym.safetensors"
    agent = _saved(counter_env(low=(-2.0, 0.0), high=(2.0, 1.0), obs_dim=3), path)
    loaded = zoo.build("td3", weights=path)  # was: "trained on None with act_dim=2; this agent has act_dim=1"
    obs = np.random.default_rng(1).normal(size=(16, 3)).astype(np.float32) * 100
    np.testing.assert_array_equal(loaded.act(obs), agent.act(obs))
    assert loaded.env_id is None and (loaded._low_np.tolist(), loaded._high_np.tolist()) == ([-2, 0], [2, 1])
    again = zoo.build("td3", weights=zoo.save(loaded, tmp_path / "again.safetensors"))  # saves, and loads back
    np.testing.assert_array_equal(again.act(obs), agent.act(obs))
    policy = zoo.export(loaded, tmp_path / "asym.onnx")
    assert policy.max_abs_diff <= 1e-5
    for call in (lambda: zoo.evaluate(loaded, episodes=1), lambda: zoo.train(loaded, total_steps=10, progress=False)):
        with pytest.raises(ValueError, match=r"no environment: .*without a registered id.*pass env="):
            call()
    assert zoo.evaluate(loaded, counter_env(horizon=3, low=(-2.0, 0.0), high=(2.0, 1.0), obs_dim=3),
                        episodes=1)["length_mean"] == 3


def test_the_published_files_name_what_they_were_trained_for():
    """The shipped files predate the zoo.td3 description: their env is the manifest entry's, their dims and
    net_arch their tensors' (it was a tensor-by-tensor shape dump)."""
    with pytest.raises(ValueError, match=r"td3.pendulum-v1 were trained on 'Pendulum-v1' with obs_dim 3, act_dim 1; "
                                         r"the env given \('MountainCarContinuous-v0'\) has obs_dim 2, act_dim 1: "
                                         "pass the env the agent was trained on .*or leave env out"):
        zoo.build("td3", weights="pendulum-v1", env="MountainCarContinuous-v0")
    with pytest.raises(ValueError, match=r"td3.pendulum-v1 hold a TD3 agent with net_arch \(400, 300\), but net_arch "
                                         r"\(32, 32\) was asked for: leave net_arch out"):
        zoo.build("td3", weights="pendulum-v1", net_arch=[32, 32])
    # another preset's hyperparameters, the file's net_arch (fujimoto's is (256, 256)), as a described file
    assert zoo.build("td3", weights="pendulum-v1", preset="fujimoto").config.net_arch == (400, 300)


class _ScalarObs(gym.Env):
    """A Box observation of shape () (one value), as some envs give."""

    observation_space = gym.spaces.Box(-1.0, 1.0, shape=(), dtype=np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = np.float32(self.np_random.uniform(-1, 1)), 0
        return np.array(self.x, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        self.x = np.float32(np.clip(self.x + 0.1 * float(action[0]), -1, 1))
        return np.array(self.x, dtype=np.float32), -abs(float(self.x)), False, self.t >= 20, {}


def test_a_scalar_observation_space_trains_and_predicts():
    """A Box of shape () built (obs_dim 1) and then failed to train: "observation of shape (); this agent
    expects (..., 1) (or (), read flat)", offering the shape it refused."""
    env = _ScalarObs()
    agent = zoo.build("td3", env=env, net_arch=(8,), learning_starts=20, batch_size=8)
    zoo.train(agent, env, total_steps=60, eval_every=0, progress=False)
    assert agent.num_timesteps == 60
    one, two = zoo.predict(agent, np.float32(0.5)), zoo.predict(agent, np.array([0.5, -0.5], np.float32))
    assert one.shape == (1,) and two.shape == (2, 1) and np.allclose(two[0], one)
    assert zoo.evaluate(agent, env, episodes=1)["length_mean"] == 20.0


class _Float64Push(gym.Env):
    """float64 actions in [-0.1, 0.1], whose bounds no float32 holds (0.1 is 0.10000000149 there), refused
    outside them as an env that checks ``action_space.contains`` refuses them."""

    action_space = gym.spaces.Box(-0.1, 0.1, (1,), np.float64)
    observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float64)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = self.np_random.uniform(-1, 1), 0
        return np.array([self.x, 0.0]), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} outside {self.action_space}")
        self.x, self.t = self.x + float(action[0]), self.t + 1
        return np.array([self.x, self.t / 10]), -abs(self.x), False, self.t >= 5, {}


def test_a_float64_action_space_comes_back_with_its_weights(tmp_path):
    """A file of an env without an id rebuilt its action space as float32: the loaded agent's saturated action
    was float32 0.1 (0.10000000149), which the env's float64 Box(-0.1, 0.1) refused, where the saved agent's
    float64 0.1 was taken; the evaluation of the saved agent and the loaded one must agree."""
    agent = zoo.build("td3", env=_Float64Push(), **TINY)
    with torch.no_grad():
        agent.actor.out.weight.zero_()
        agent.actor.out.bias.fill_(20.0)  # tanh -> 1: the upper bound, every step
    loaded = zoo.build("td3", weights=zoo.save(agent, tmp_path / "push.safetensors"))
    assert loaded.action_space == agent.action_space  # was Box(-0.1, 0.1, (1,), float32)
    action = loaded.predict(np.zeros(2))[0]
    assert action.dtype == np.float64 and action.tolist() == [0.1]
    assert zoo.evaluate(loaded, _Float64Push(), episodes=2, seed=0) == \
        zoo.evaluate(agent, _Float64Push(), episodes=2, seed=0)


def test_weights_that_name_integers_for_the_networks_floats_are_refused(tmp_path):
    """An agent's loader cast every tensor to float32 without a word: a file whose header says int32 for float32
    bytes (an edited or corrupt header) built an agent of weights around 1e9. It is refused as zoo.hub's loader
    refuses it for the other families, and a float16 copy still loads."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    agent = zoo.build("td3", env="Pendulum-v1", net_arch=(8, 8))
    path = tmp_path / "td3.safetensors"
    agent.save(path)
    state = load_file(path)
    key = next(k for k in state if k.endswith("weight"))
    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata()
    save_file({**state, key: state[key].view(torch.int32)}, tmp_path / "edited.safetensors", metadata=meta)
    with pytest.raises(ValueError, match=rf"integers where the agent holds floating-point values .*: {key}: file int32 "
                                         r"vs model float32"):
        zoo.build("td3", weights=tmp_path / "edited.safetensors")
    save_file({k: v.half() if v.is_floating_point() else v for k, v in state.items()}, tmp_path / "half.safetensors",
              metadata=meta)
    half = zoo.build("td3", weights=tmp_path / "half.safetensors")
    assert torch.equal(half.network_state_dict()[key], state[key].half().float())
