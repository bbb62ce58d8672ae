"""Which env a TD3 run trains on: its identity (id, make kwargs, episode limit, wrappers), and evaluation on
an env made again from the training env's spec, checked before the first step."""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import RescaleAction

import zoo
from zoo.rl.envspec import env_identity

TINY = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


class _Unrecorded(gym.ActionWrapper):
    """Actions in [0, 1] for Pendulum's [-2, 2], a wrapper that records no constructor arguments: gymnasium
    cannot make it again from the spec."""

    def __init__(self, env):
        super().__init__(env)
        self.action_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)

    def action(self, action):
        return np.asarray(action, np.float32) * 4.0 - 2.0


def test_identity_names_kwargs_limit_and_wrappers_not_rendering(counter_env):
    assert env_identity(gym.make("Pendulum-v1")) == "Pendulum-v1"
    assert env_identity(gym.make("Pendulum-v1", render_mode="rgb_array")) == "Pendulum-v1"
    assert env_identity(gym.make("Pendulum-v1", g=2.0, max_episode_steps=7)) == \
        "Pendulum-v1(g=2.0, max_episode_steps=7)"
    rescaled = RescaleAction(gym.make("Pendulum-v1"), min_action=np.float32(0.0), max_action=np.float32(1.0))
    assert env_identity(rescaled) == "Pendulum-v1 + RescaleAction(max_action=1.0, min_action=0.0)"
    assert env_identity(gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")) == "Pendulum-v1"
    assert env_identity(counter_env(horizon=3)).endswith("CounterEnv (no registered id) + TimeLimit")


def test_a_wrapped_registered_env_is_evaluated_on_the_same_wrapped_env():
    rescaled = RescaleAction(gym.make("Pendulum-v1", max_episode_steps=7), min_action=np.float32(0.0),
                             max_action=np.float32(1.0))
    agent = zoo.build("td3", env=rescaled, **TINY)
    # was: "Pendulum-v1 action bounds [-2.0]..[2.0] differ from the agent's [0.0]..[1.0]" after training
    result = zoo.train(agent, rescaled, total_steps=30, eval_every=15, eval_episodes=1, progress=False)
    assert [h["eval_length_mean"] for h in result.history] == [7, 7]  # the 7-step limit too, not Pendulum's 200
    same = RescaleAction(gym.make("Pendulum-v1", max_episode_steps=7), min_action=np.float32(0.0),
                         max_action=np.float32(1.0))
    assert result.history[-1]["eval_return_mean"] == zoo.evaluate(agent, same, episodes=1)["return_mean"]

    heavy = gym.make("Pendulum-v1", g=2.0, max_episode_steps=5)  # make kwargs: the id alone has g=10
    agent = zoo.build("td3", env=heavy, **TINY)
    result = zoo.train(agent, heavy, total_steps=25, eval_episodes=1, progress=False)
    assert result.history[-1]["eval_return_mean"] == zoo.evaluate(
        agent, gym.make("Pendulum-v1", g=2.0, max_episode_steps=5), episodes=1)["return_mean"]


def test_an_env_its_spec_cannot_make_again_is_refused_before_training_or_evaluated_on_itself():
    env = _Unrecorded(gym.make("Pendulum-v1", max_episode_steps=5))
    agent = zoo.build("td3", env=env, **TINY)
    with pytest.raises(ValueError, match=r"cannot be made again from its spec.*pass eval_env="):
        zoo.train(agent, env, total_steps=30, eval_every=15, progress=False)
    assert agent.num_timesteps == 0  # refused before the first step
    result = zoo.train(agent, env, total_steps=30, eval_episodes=1, progress=False)  # at the end: on itself
    assert [h["step"] for h in result.history] == [30] and result.history[0]["eval_length_mean"] == 5


class _Shown(gym.Env):
    """A registered env that records the render_mode of every instance made."""

    metadata: ClassVar[dict] = {"render_modes": ["human"]}
    made: ClassVar[list] = []

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        _Shown.made.append(render_mode)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}

    def render(self):
        return None


def test_evaluation_made_from_the_spec_opens_no_window():
    if "ZooTestShown-v0" not in gym.registry:
        gym.register("ZooTestShown-v0", entry_point=_Shown, max_episode_steps=3)
    env = gym.make("ZooTestShown-v0", render_mode="human")
    _Shown.made.clear()
    zoo.train(zoo.build("td3", env=env, **TINY), env, total_steps=25, eval_episodes=1, progress=False)
    assert _Shown.made and set(_Shown.made) == {None}  # the fit check's env and the evaluation's: not rendered


def test_an_agent_of_a_wrapped_env_evaluates_and_learns_there_without_env(tmp_path):
    """Built or trained on an env its bare id does not make (RescaleAction, make kwargs), the agent keeps that
    env's spec: evaluate, learn and a loaded file's evaluation ran on the bare id and failed with 'Pendulum-v1
    action bounds [-2.0]..[2.0] differ from the agent's [0.0]..[1.0]' where no env was given."""
    def rescaled():
        return RescaleAction(gym.make("Pendulum-v1", max_episode_steps=6), min_action=np.float32(0.0),
                             max_action=np.float32(1.0))

    agent = zoo.build("td3", env=rescaled(), **TINY)
    assert env_identity(gym.make(agent.env_spec)) == env_identity(rescaled())
    expected = zoo.evaluate(agent, rescaled(), episodes=1)
    assert zoo.evaluate(agent, episodes=1) == expected
    agent.learn(30)  # on the agent's env: its 6-step limit ends five episodes
    assert agent.num_timesteps == 30 and agent.num_episodes == 5
    loaded = zoo.build("td3", weights=zoo.save(agent, tmp_path / "rescaled.safetensors"))
    assert type(loaded.env_spec.additional_wrappers[0].kwargs["min_action"]) is np.float32
    assert zoo.evaluate(loaded, episodes=1) == zoo.evaluate(agent, rescaled(), episodes=1)

    # bounds as arrays (gymnasium's own to_json refuses numpy values: the file kept no spec)
    arrays = RescaleAction(gym.make("Pendulum-v1", max_episode_steps=6), min_action=np.array([-1.0], np.float32),
                           max_action=np.array([0.5], np.float32))
    saved = zoo.save(zoo.build("td3", env=arrays, **TINY), tmp_path / "arrays.safetensors")
    loaded = zoo.build("td3", weights=saved)
    assert loaded.env_spec.additional_wrappers[0].kwargs["max_action"].dtype == np.float32
    assert zoo.evaluate(loaded, episodes=1)["length_mean"] == 6

    heavy = zoo.build("td3", env=gym.make("Pendulum-v1", g=2.0), **TINY)  # make kwargs: the id alone has g=10
    assert heavy.env_spec.kwargs["g"] == 2.0
    # the bare id and one that only renders keep no spec of their own
    for env in (gym.make("Pendulum-v1"), gym.make("Pendulum-v1", render_mode="rgb_array")):
        assert zoo.build("td3", env=env, **TINY).env_spec is None
    # a wrapper gymnasium cannot make again is kept: the agent acts on the env object, its file refuses
    env = _Unrecorded(gym.make("Pendulum-v1", max_episode_steps=3))
    unrecorded = zoo.build("td3", env=env, **TINY)
    assert [w.name for w in unrecorded.env_spec.additional_wrappers] == ["_Unrecorded"]
    assert zoo.evaluate(unrecorded, episodes=1)["length_mean"] == 3  # env itself (the bare id's bounds differ)
    zoo.save(unrecorded, tmp_path / "u.safetensors")
    with pytest.raises(ValueError, match=r"wrapper\(s\) _Unrecorded again: they record no constructor arguments"):
        zoo.evaluate(zoo.build("td3", weights=tmp_path / "u.safetensors"), episodes=1)
    plain = zoo.build("td3", env="Pendulum-v1", **TINY)
    zoo.train(plain, gym.make("Pendulum-v1", max_episode_steps=4), total_steps=24, eval_episodes=1, progress=False)
    assert plain.env_spec.max_episode_steps == 4  # trained on a 4-step env: evaluated there by default
    assert zoo.evaluate(plain, episodes=1)["length_mean"] == 4


def test_a_vector_envs_episode_limit_is_the_limit_of_the_env_made_from_its_spec():
    """make_vec keeps gymnasium.make's max_episode_steps among the env kwargs of its spec: under a vector wrapper
    that changes the env (NormalizeReward), evaluating on one env made from that spec failed with
    'PendulumEnv.__init__() got an unexpected keyword argument max_episode_steps'."""
    from gymnasium.wrappers import vector as vector_wrappers

    from zoo.rl.envspec import single_spec

    vec = vector_wrappers.NormalizeReward(
        gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=20))
    spec = single_spec(vec)
    assert spec.max_episode_steps == 20 and "max_episode_steps" not in spec.kwargs
    assert gym.make(spec).spec.max_episode_steps == 20
    agent = zoo.build("td3", env=vec, net_arch=(8, 8), batch_size=8, learning_starts=10, buffer_size=100)
    zoo.train(agent, vec, total_steps=30, eval_every=30, eval_episodes=1, progress=False)
    assert agent.history[-1]["eval_length_mean"] == 20  # evaluated on a 20-step Pendulum made from the spec


def test_an_agents_env_spec_builds_an_agent():
    """Before: zoo.build('td3', env=agent.env_spec) raised TypeError ('env must be a gymnasium id or env, got
    EnvSpec'), though zoo.train and zoo.evaluate take the spec."""
    wrapped = RescaleAction(gym.make("Pendulum-v1", g=3.0), np.float32(0.0), np.float32(1.0))
    spec = zoo.build("td3", env=wrapped, **TINY).env_spec
    agent = zoo.build("td3", env=spec, **TINY)
    assert env_identity(agent.env_spec) == env_identity(spec) or agent.env_spec == spec
    assert agent.action_bounds[1].tolist() == [1.0] and agent.env_id == "Pendulum-v1"


def _scaled_reward(env):
    return gym.wrappers.TransformReward(env, lambda r: 0.001 * r)


def test_async_make_vec_wrappers_are_part_of_its_env():
    """Before: an AsyncVectorEnv's make_vec wrappers= were left out of its spec and identity: the run evaluated on
    bare Pendulum-v1 (1000x the training returns), and a resume on the env without the wrapper was accepted."""
    vec = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="async", wrappers=[_scaled_reward],
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    bare = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="async")
    try:
        assert env_identity(vec) != env_identity(bare) and "_scaled_reward" in env_identity(vec)
        agent = zoo.build("td3", env=vec, **TINY)
        with pytest.raises(ValueError, match="no separate env to evaluate on"):
            zoo.train(agent, vec, total_steps=40, eval_every=20, progress=False)
        with pytest.raises(ValueError, match="record no constructor arguments"):
            zoo.evaluate(agent, env=agent.env_spec, episodes=1)
    finally:
        vec.close()
        bare.close()


def test_a_vector_wrapper_is_part_of_the_env():
    """Before: gymnasium.wrappers.vector.NormalizeObservation around a sync vector env was left out of its spec:
    the run's evaluations and zoo.evaluate(agent) ran on bare Pendulum-v1, with another input scale."""
    from gymnasium.wrappers import vector as vector_wrappers

    vec = vector_wrappers.NormalizeObservation(gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync"))
    assert env_identity(vec) != "Pendulum-v1" and "NormalizeObservation" in env_identity(vec)
    agent = zoo.build("td3", env=vec, **TINY)
    with pytest.raises(ValueError, match="no separate env to evaluate on"):
        zoo.train(agent, vec, total_steps=40, eval_every=20, progress=False)
