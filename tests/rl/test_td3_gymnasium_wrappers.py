"""TD3 on envs as other gymnasium code wraps them: ClipAction (Box(-inf, inf) since gymnasium 1.0), vector
wrappers around a SyncVectorEnv (CleanRL's RecordEpisodeStatistics)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import ClipAction

import zoo
from zoo.rl.envspec import env_identity

TINY = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


def _pendulum():
    return gym.make("Pendulum-v1", max_episode_steps=5)


class _Unbounded(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)


def test_a_clip_action_env_is_acted_in_with_the_bounds_it_clips_into():
    clipped = ClipAction(_pendulum())
    agent = zoo.build("td3", env=clipped, **TINY)  # was: "TD3 needs finite action bounds ..., got low=[-inf]"
    assert (agent.action_space.low.tolist(), agent.action_space.high.tolist()) == ([-2.0], [2.0])
    assert zoo.evaluate(agent, clipped, episodes=1) == zoo.evaluate(agent, _pendulum(), episodes=1)
    agent.learn(30, env=ClipAction(_pendulum()))
    assert agent.num_timesteps == 30
    vector = gym.wrappers.vector.ClipAction(gym.vector.SyncVectorEnv([lambda: ClipAction(_pendulum())] * 2))
    assert zoo.build("td3", env=vector, **TINY).action_space.high.tolist() == [2.0]
    # the advice names the wrapper that gives finite bounds, not ClipAction (which makes them infinite)
    with pytest.raises(ValueError, match=r"finite action bounds.*RescaleAction\(env, min_action, max_action\)") as err:
        zoo.build("td3", env=_Unbounded())
    assert "ClipAction" not in str(err.value)


def test_a_sync_vector_env_under_record_episode_statistics_is_evaluated_on_its_sub_envs_spec():
    plain = gym.vector.SyncVectorEnv([_pendulum, _pendulum])
    wrapped = gym.wrappers.vector.RecordEpisodeStatistics(gym.vector.SyncVectorEnv([_pendulum, _pendulum]))
    assert env_identity(wrapped) == env_identity(plain) == "Pendulum-v1(max_episode_steps=5)"  # one run, resumable
    agent = zoo.build("td3", env=wrapped, **TINY)
    # was: "TD3 on SyncVectorEnv: no separate env to evaluate on (SyncVectorEnv has no registered id, ...)"
    result = zoo.train(agent, wrapped, total_steps=30, eval_episodes=1, progress=False)
    assert result.history[-1]["eval_length_mean"] == 5  # a fresh env of the sub-envs' spec, its 5-step limit



class _Thousandfold(gym.RewardWrapper):
    """A user's wrapper that records no constructor arguments (no RecordConstructorArgs)."""

    def reward(self, reward):
        return 1000.0 * reward


def test_an_agent_on_a_wrapper_gymnasium_cannot_make_again_never_falls_back_to_the_bare_id(tmp_path):
    """zoo.evaluate(agent), agent.learn(N) and a loaded file's evaluation ran on bare Pendulum-v1 (returns
    1000x apart from the wrapped env's) without a word: the spec was dropped and the id taken. In memory the
    agent acts on the env object itself (SB3's model.env); a loaded file, which has no object, refuses."""
    env = _Thousandfold(_pendulum())
    agent = zoo.build("td3", env=env, **TINY)
    zoo.train(agent, env, total_steps=25, eval_every=0, progress=False)
    assert agent.env_object is env
    wrapped, bare = (zoo.evaluate(agent, e, episodes=1)["return_mean"] for e in (env, _pendulum()))
    assert wrapped == pytest.approx(1000 * bare)
    assert zoo.evaluate(agent, episodes=1)["return_mean"] == pytest.approx(wrapped)  # on env, not the bare id
    agent.learn(5)  # SB3's learn() on the env the agent was built on
    assert agent.num_timesteps == 30
    zoo.save(agent, tmp_path / "a.safetensors")
    loaded = zoo.build("td3", weights=tmp_path / "a.safetensors")
    with pytest.raises(ValueError, match=r"cannot make Pendulum-v1 with its wrapper\(s\) _Thousandfold again.*"
                                         r"pass the wrapped env object"):
        zoo.evaluate(loaded, episodes=1)
    assert zoo.evaluate(loaded, _Thousandfold(_pendulum()), episodes=1)["return_mean"] == pytest.approx(
        zoo.evaluate(agent, episodes=1)["return_mean"])


def test_an_agent_on_sb3s_monitor_learns_on_it_and_evaluates_resumes_as_on_its_env(tmp_path):
    """SB3's Monitor records no constructor arguments and changes nothing. Keeping it in the spec refused
    TD3(Monitor(env)).learn(N), the usual set-up; dropping it trained on a new env, so the Monitor logged nothing;
    and evaluation every N steps and a resume on the agent's own env were refused for a spec with a Monitor."""
    monitor = pytest.importorskip("stable_baselines3.common.monitor")
    env = monitor.Monitor(_pendulum(), str(tmp_path / "mon"))
    agent = zoo.build("td3", env=env, **TINY)
    assert agent.env_spec.additional_wrappers == () and agent.env_object is env  # the 5-step limit kept
    agent.learn(10)
    assert agent.num_timesteps == 10 and len(env.get_episode_rewards()) == 2  # SB3 logs what learn() collects
    assert zoo.evaluate(agent, _pendulum(), episodes=1)["length_mean"] == 5
    zoo.train(agent, env, total_steps=20, eval_every=10, eval_episodes=1, checkpoint_dir=tmp_path / "run",
              progress=False)
    assert [h["step"] for h in agent.history] == [20]
    zoo.train(agent, total_steps=30, checkpoint_dir=tmp_path / "run", resume=True, eval_every=0, progress=False)
    assert agent.num_timesteps == 30
