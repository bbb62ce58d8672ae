"""Training on a caller's gymnasium vector env across calls, and how a run on several envs counts its steps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import zoo

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 4, "buffer_size": 1000}
RUN = {"eval_every": 0, "progress": False}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_vector_env_stepped_between_two_calls_starts_new_episodes(mode, counter_env):
    """CounterEnv's observation is [episode, t], with neither a random state nor a TimeLimit. Before, a call went
    on from the observations the last one stopped at ([0, 6]) though the caller had stepped the env on to t=8 (an
    AsyncVectorEnv always: its sub-envs live in other processes), storing transitions from [0, 6] to [0, 9]; the
    env's own observations show the steps, and the episodes start again as after a caller's reset."""
    vec = (gym.vector.AsyncVectorEnv if mode == "async" else gym.vector.SyncVectorEnv)([counter_env] * 2)
    try:
        agent = zoo.build("td3", env=counter_env(), **TINY)
        agent.learn(10, env=vec, **RUN)  # 5 steps of 2 envs
        np.testing.assert_array_equal(agent.buffer.next_obs[8:10].numpy(), [[0, 5], [0, 5]])
        agent.learn(2, env=vec, reset_num_timesteps=False, **RUN)  # nothing between: continued
        np.testing.assert_array_equal(agent.buffer.obs[10:12].numpy(), [[0, 5], [0, 5]])
        for _ in range(2):
            vec.step(np.zeros((2, 1), np.float32))
        agent.learn(2, env=vec, reset_num_timesteps=False, **RUN)
        np.testing.assert_array_equal(agent.buffer.obs[12:14].numpy(), [[1, 0], [1, 0]])  # a reset, no stale [0, 6]
        vec.reset()
        agent.learn(2, env=vec, reset_num_timesteps=False, **RUN)
        np.testing.assert_array_equal(agent.buffer.obs[14:16].numpy(), [[3, 0], [3, 0]])
    finally:
        vec.close()


class _InPlace(gym.Env):
    """A caller's env that keeps its state in one array and hands out that array, rewritten in place each step."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state = np.zeros(2, np.float32)
        return self.state, {}

    def step(self, action):
        self.state += 1.0
        return self.state, 1.0, False, False, {}


@pytest.mark.parametrize("make", [
    lambda counter_env: _InPlace(),
    lambda counter_env: gym.vector.SyncVectorEnv([counter_env] * 2, copy=False),
    lambda counter_env: gym.vector.AsyncVectorEnv([counter_env] * 2, copy=False),
], ids=["an env handing out one array", "SyncVectorEnv(copy=False)", "AsyncVectorEnv(copy=False)"])
def test_an_env_that_rewrites_its_observation_in_place_stores_true_transitions(make, counter_env):
    """Such an env (or a vector env made with copy=False) hands the same array back from every step: the loop kept
    it as the next step's observation, so every transition was stored with obs == next_obs (t -> t, never t -> t+1)."""
    env = make(counter_env)
    try:
        agent = zoo.build("td3", env=_InPlace(), **TINY)
        zoo.train(agent, env, total_steps=10, **RUN)
        t, t_next = agent.buffer.obs[:10, 1].numpy(), agent.buffer.next_obs[:10, 1].numpy()
        np.testing.assert_array_equal(t_next, t + 1)
    finally:
        env.close()


def test_a_run_on_several_envs_ends_at_whole_steps_and_counts_them_everywhere(tmp_path, capsys):
    """total_steps=30 on 4 envs collects 32 transitions (8 steps), as SB3's learn does. Before, the progress bar's
    total stayed 30 (it ran past it, to "32step" with no total), and the linear lr schedule's remaining fraction,
    1 - 32/30, set a negative lr: the last update climbed the loss."""
    agent = zoo.build("td3", env="Pendulum-v1", lr_schedule="linear", **TINY)
    res = zoo.train(agent, "Pendulum-v1", num_envs=4, total_steps=30, eval_every=10, eval_episodes=1,
                    log_dir=tmp_path, progress=True)
    assert agent.num_timesteps == len(agent.buffer) == 32
    assert [h["step"] for h in res.history] == [12, 20, 32]  # metrics.csv and the curves: the same count
    assert [opt.param_groups[0]["lr"] for opt in (agent.actor_opt, agent.critic_opt)] == [0.0, 0.0]  # the run's end
    assert "32/32" in capsys.readouterr().err
    agent.learn(10, env=gym.make_vec("Pendulum-v1", num_envs=4), **RUN)  # SB3's learn(10): 3 steps of 4 envs
    assert agent.num_timesteps == 44


def test_a_replay_buffer_of_other_spaces_is_refused_by_name(tmp_path):
    """A buffer of obs_dim 3, act_dim 1 has rows of 3 + 1 + 1 + 3 + 1 = 9 values, as one of obs_dim 2, act_dim 3
    does: the row width alone let it load, every transition split at the wrong columns."""
    from zoo.rl.buffer import ReplayBuffer

    saved = ReplayBuffer(10, obs_dim=3, act_dim=1)
    saved.add(np.ones((4, 3)), np.zeros((4, 1)), np.ones(4), np.ones((4, 3)), np.zeros(4))
    saved.save(tmp_path / "buf.pt")
    other = ReplayBuffer(10, obs_dim=2, act_dim=3)
    with pytest.raises(ValueError, match=r"holds transitions of obs_dim 3, act_dim 1; this buffer's are obs_dim 2, "
                                         r"act_dim 3"):
        other.load(tmp_path / "buf.pt")
    assert len(other) == 0
