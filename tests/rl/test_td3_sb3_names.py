"""Stable-Baselines3's names on the TD3 agent: ``learn`` collects N more transitions, ``predict`` returns
``(actions, state)``, and SB3's own ``evaluate_policy`` runs the agent when SB3 is installed."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import zoo
from zoo.engine.options import UnknownOptionError

SMALL = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


def _agent(**config):
    return zoo.build("td3", env="Pendulum-v1", seed=0, **{**SMALL, **config})


def test_learn_collects_that_many_more_transitions_and_returns_the_agent(tmp_path):
    agent = _agent()
    before = {k: v.clone() for k, v in agent.actor.state_dict().items()}
    assert agent.learn(30) is agent and agent.num_timesteps == 30 and agent.num_updates > 0
    assert any(not torch.equal(before[k], v) for k, v in agent.actor.state_dict().items())
    agent.learn(25, checkpoint_dir=tmp_path)  # zoo.train's options pass through
    assert agent.num_timesteps == 55 and (tmp_path / "td3_last.pt").is_file()
    assert not agent.history  # no evaluation unless asked for, as in SB3


def test_learn_takes_an_env_and_refuses_a_bad_count():
    agent = _agent()
    agent.learn(21, env=gym.make("Pendulum-v1"))
    assert agent.num_timesteps == 21
    for bad in (0, -5, 2.5, float("nan"), True, "10"):
        with pytest.raises(ValueError, match=rf"total_timesteps must be a whole number of environment steps >= 1, "
                                             rf"got {bad!r}"):
            agent.learn(bad)
    agent.learn(1e1)  # SB3's learn(1e4): a float without a fraction is a count (it was refused)
    assert agent.num_timesteps == 31


def test_predict_with_noise_leaves_the_training_run_as_it_was():
    """predict(deterministic=False) drew from the run's generator (and replaced its OU state with one of the
    batch's shape), so a later learn() trained other weights than without the prediction."""
    for noise in ({}, {"noise_type": "ornstein-uhlenbeck"}):
        ref, agent = _agent(**noise), _agent(**noise)
        ref.learn(30)
        agent.learn(30)
        acts = [agent.predict(np.zeros((4, 3)), deterministic=False)[0] for _ in range(2)]
        assert acts[0].shape == (4, 1) and not np.array_equal(acts[0], acts[1])  # noise, and it moves on
        assert not np.array_equal(acts[0], agent.predict(np.zeros((4, 3)))[0])
        ref.learn(30)
        agent.learn(30)
        assert all(torch.equal(v, agent.actor.state_dict()[k]) for k, v in ref.actor.state_dict().items())
        again = _agent(**noise)  # the predictions' noise repeats by seed
        assert np.array_equal(again.predict(np.zeros((4, 3)), deterministic=False)[0],
                              _agent(**noise).predict(np.zeros((4, 3)), deterministic=False)[0])


def test_predict_restarts_the_ou_noise_of_the_rows_episode_start_marks():
    agent = _agent(noise_type="ornstein-uhlenbeck", exploration_noise=0.5)
    for _ in range(20):
        agent.predict(np.zeros((3, 3)), deterministic=False)
    x = agent.prediction_noise.x.clone()
    agent.predict(np.zeros((3, 3)), episode_start=np.array([False, True, False]), deterministic=False)
    moved = agent.prediction_noise.x
    # row 1 restarted from 0: one OU step from 0 is far smaller than the state the others carry on from
    assert moved[1].abs().max() < 0.1 < x[[0, 2]].abs().max()
    assert agent.action_noise is None  # the run's own process was never touched


def test_learn_takes_sb3s_arguments_in_sb3s_order():
    agent = _agent()
    # was: UnknownOptionError "zoo.train on td3: unknown option(s) 'callback'" (rl-baselines3-zoo passes it)
    agent.learn(21, callback=None, log_interval=4, tb_log_name="TD3", reset_num_timesteps=True, progress_bar=False)
    agent.learn(5, None, 10, "run", False, False, env=gym.make("Pendulum-v1"))  # SB3's positional order
    agent.learn(5, callback=[])  # an empty CallbackList: nothing to run
    assert agent.num_timesteps == 31  # the step count goes on, reset_num_timesteps or not
    with pytest.raises(UnknownOptionError, match=r"TD3Agent\.learn: unknown option\(s\) 'callbak' \(did you mean 'callback'"):
        agent.learn(5, callbak=None)
    with pytest.raises(TypeError, match=r"second argument is SB3's callback, not the env: .*env='Pendulum-v1'"):
        agent.learn(5, "Pendulum-v1")
    assert agent.num_timesteps == 31


class _Callback:  # stands in for an SB3 BaseCallback (stable-baselines3 need not be installed)
    def on_step(self) -> bool:
        return True


@pytest.mark.parametrize("callback", [_Callback(), [_Callback()]])
def test_learn_refuses_an_sb3_callback_naming_what_does_its_job(callback):
    agent = _agent()
    with pytest.raises(TypeError, match=r"TD3Agent\.learn\(callback=\[?_Callback\]?\): zoo's TD3 loop runs no") as err:
        agent.learn(30, callback=callback)
    assert "eval_every=N" in str(err.value) and "checkpoint_dir=" in str(err.value) and agent.num_timesteps == 0


def test_predict_is_sb3s_signature_over_zoo_predict():
    agent = _agent()
    obs = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]], dtype=np.float32)
    actions, state = agent.predict(obs)
    assert state is None and actions.shape == (2, 1)
    np.testing.assert_array_equal(actions, zoo.predict(agent, obs))
    kept = object()
    assert agent.predict(obs[0], state=kept, episode_start=np.array([True]))[1] is kept
    noisy, _ = agent.predict(np.repeat(obs[:1], 64, axis=0), deterministic=False)
    assert not np.allclose(noisy, actions[0]) and np.all(np.abs(noisy) <= 2.0)  # Pendulum's bounds


def test_sb3_evaluate_policy_runs_the_agent():
    evaluation = pytest.importorskip("stable_baselines3.common.evaluation", reason="stable-baselines3 not installed")
    from stable_baselines3.common.env_util import make_vec_env

    agent = _agent()
    venv = make_vec_env("Pendulum-v1", n_envs=2, seed=3)
    mean, std = evaluation.evaluate_policy(agent, venv, n_eval_episodes=2, deterministic=True, warn=False)
    assert np.isfinite(mean) and -2000 < mean < 0 and std >= 0  # Pendulum: 200 steps of cost in [-16.3, 0]


def test_learn_takes_the_step_counts_sb3_callers_write_and_num_envs_needs_an_id():
    """learn(np.int64(20)) was "must be an int" (a count from numpy); num_envs=4 beside an env object trained on
    the one env without a word."""
    import gymnasium as gym
    import numpy as np

    import zoo

    agent = zoo.build("td3", net_arch=(8,), learning_starts=10, batch_size=8)
    assert agent.learn(np.int64(20)).num_timesteps == 20
    assert agent.learn(np.int32(10)).num_timesteps == 30
    with pytest.raises(ValueError, match=r"num_envs=4 makes copies of an env id; Pendulum-v1 is an env object"):
        zoo.train(agent, gym.make("Pendulum-v1"), num_envs=4, total_steps=10, progress=False)
    with pytest.raises(ValueError, match="num_envs must be an int >= 1, got 0"):
        zoo.train(agent, "Pendulum-v1", num_envs=0, total_steps=10, progress=False)


def test_reset_noise_restarts_the_noise_act_explores_with():
    """act(explore=True) drew from its own OU state since predictions stopped touching the run's, and
    reset_noise() at an episode's end left that state running."""
    agent = _agent(noise_type="ornstein-uhlenbeck", exploration_noise=0.5)
    for _ in range(20):
        agent.act(np.zeros(3), explore=True)
    assert agent.prediction_noise.x.abs().max() > 0
    agent.reset_noise()
    assert agent.prediction_noise.x.abs().max() == 0
