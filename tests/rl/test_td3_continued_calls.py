"""A second training call on the env the first one stopped in continues its episodes, as Stable-Baselines3's
``learn(n, reset_num_timesteps=False)`` does: two calls of N steps collect what one call of 2N does. Before, every
call reset the env, cutting the episode in progress short (never logged) and beginning another."""

from __future__ import annotations

import copy
import csv
import pickle
import signal
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import zoo

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}
RUN = {"eval_every": 0, "progress": False}


def _interactions(agent) -> dict[str, torch.Tensor]:
    """Every transition the agent collected, in order, and its networks: equal only for equal runs."""
    n = len(agent.buffer)
    fields = {k: getattr(agent.buffer, k)[:n].clone() for k in ("obs", "act", "reward", "next_obs")}
    return {**fields, **agent.network_state_dict()}


def _same(a, b) -> bool:
    mine, theirs = _interactions(a), _interactions(b)
    return mine.keys() == theirs.keys() and all(torch.equal(v, theirs[k]) for k, v in mine.items())


def _pendulum() -> gym.Env:
    return gym.make("Pendulum-v1", max_episode_steps=40)


def _learn_on_its_env(agent, n: int, env: gym.Env) -> None:  # made by zoo from the agent's spec
    agent.learn(n, reset_num_timesteps=False)


def _learn_on_the_callers_env(agent, n: int, env: gym.Env) -> None:
    agent.learn(n, env=env, reset_num_timesteps=False)


def _train_on_a_vector_env(agent, n: int, env: gym.Env) -> None:  # two envs made by zoo: n transitions, n / 2 steps
    zoo.train(agent, num_envs=2, total_steps=agent.num_timesteps + n, **RUN)


@pytest.mark.parametrize("train", [_learn_on_its_env, _learn_on_the_callers_env, _train_on_a_vector_env])
def test_two_calls_collect_what_one_call_does(train):
    """40-step episodes: the boundary at transition 70 falls mid-episode (35 steps in, on the vector env), and
    inside a 3-step rollout of train_freq=3; the correlated noise goes on too."""
    build = {"env": _pendulum(), **TINY, "train_freq": 3, "gradient_steps": -1, "noise_type": "ornstein-uhlenbeck"}
    one, two = zoo.build("td3", **build), zoo.build("td3", **build)
    train(one, 140, _pendulum())
    env = _pendulum()
    train(two, 70, env)
    train(two, 70, env)
    assert two.num_timesteps == 140 and two.num_episodes == one.num_episodes > 0
    assert two.episode_log == one.episode_log
    assert _same(one, two)


def test_a_next_step_vector_env_continues_into_its_reset_step():
    """gymnasium's default autoreset: the step after an episode's end only resets that env, and stores nothing.
    The boundary falls right after the episodes' end (40 steps), so the second call begins with those resets."""
    def vec() -> gym.vector.VectorEnv:
        return gym.make_vec("Pendulum-v1", num_envs=2, max_episode_steps=40)  # NEXT_STEP autoreset

    one, two = zoo.build("td3", env=_pendulum(), **TINY), zoo.build("td3", env=_pendulum(), **TINY)
    zoo.train(one, vec(), total_steps=160, **RUN)
    env = vec()
    zoo.train(two, env, total_steps=80, **RUN)  # 40 steps of 2 envs
    zoo.train(two, env, total_steps=160, **RUN)
    assert two.num_timesteps == 160 and two.num_episodes == one.num_episodes == 2
    assert _same(one, two)


def test_a_copy_of_the_agent_starts_new_episodes_and_the_original_goes_on():
    """The episodes in progress hold their env, which a copy cannot share: an AsyncVectorEnv's pipes cannot be
    copied or pickled at all, so the copy (copy.deepcopy, pickle) leaves them to the original."""
    vec = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="async", max_episode_steps=40)
    try:
        agent = zoo.build("td3", env=_pendulum(), **{**TINY, "learning_starts": 10})
        zoo.train(agent, vec, total_steps=20, **RUN)
        copies = [copy.deepcopy(agent), pickle.loads(pickle.dumps(agent))]
        zoo.train(agent, vec, total_steps=40, **RUN)
        # continued: each env's first observation of the second call is where its first call left it
        assert torch.equal(agent.buffer.obs[20:22], agent.buffer.next_obs[18:20])
        for clone in copies:
            zoo.train(clone, "Pendulum-v1", total_steps=30, **RUN)
            assert clone.num_timesteps == 30 and torch.equal(clone.buffer.obs[:20], agent.buffer.obs[:20])
    finally:
        vec.close()


def _counter_agent(counter_env, **kw):
    env = counter_env(horizon=10)
    return zoo.build("td3", env=env, **{**TINY, "learning_starts": 5, **kw}), env


def test_a_continued_learn_call_continues_the_episode_and_logs_it_whole(counter_env):
    """CounterEnv's observation is [episode, t]: a reset shows as a new episode number at t=0."""
    agent, env = _counter_agent(counter_env)
    agent.learn(15, env=env)
    agent.learn(15, env=env, reset_num_timesteps=False)
    assert env.unwrapped.episode == 2  # three resets, as one call of 30 steps makes: none at the boundary
    assert [(e["length"], e["return"]) for e in agent.episode_log] == [(10, 55.0)] * 3
    obs = agent.buffer.obs[:30].numpy()
    np.testing.assert_array_equal(obs[:, 1], np.tile(np.arange(10), 3))  # t runs on through step 15

    agent.learn(5, env=env)  # SB3's default, reset_num_timesteps=True, resets its env first (its _setup_learn)
    assert env.unwrapped.episode == 3
    np.testing.assert_array_equal(agent.buffer.obs[30].numpy()[:2], [3, 0])


def test_a_callers_env_used_between_the_calls_starts_a_new_episode(counter_env):
    """zoo.evaluate on the training env, the caller's own reset, and zoo.train's evaluation at its end on the
    training env itself (an env without an id) each leave the env elsewhere: continuing would have stored a
    transition from the last call's observation to one of another episode."""
    agent, env = _counter_agent(counter_env)
    agent.learn(15, env=env)
    agent.learn(3, env=env, reset_num_timesteps=False)
    np.testing.assert_array_equal(agent.buffer.obs[15].numpy()[:2], [1, 5])  # continued: episode 1, t=5
    zoo.evaluate(agent, env, episodes=2)
    agent.learn(5, env=env, reset_num_timesteps=False)
    episode = env.unwrapped.episode
    np.testing.assert_array_equal(agent.buffer.obs[18].numpy()[:2], [episode, 0])  # a reset, not step 18 of a stale one
    assert [e["length"] for e in agent.episode_log] == [10]  # the cut episode is not logged
    env.reset()  # the caller's own reset draws nothing from the env's random state: its TimeLimit count shows it
    agent.learn(2, env=env, reset_num_timesteps=False)
    np.testing.assert_array_equal(agent.buffer.obs[23].numpy()[:2], [env.unwrapped.episode, 0])
    # zoo.train's evaluation at the end runs on the training env itself where it has no id (CounterEnv)
    zoo.train(agent, env, total_steps=27, eval_episodes=1, progress=False)
    agent.learn(2, env=env, reset_num_timesteps=False)
    np.testing.assert_array_equal(agent.buffer.obs[27].numpy()[:2], [env.unwrapped.episode, 0])


def test_a_checkpoint_mid_episode_of_a_continued_call_resumes_exactly(tmp_path):
    """The episode in progress at the checkpoint began in the first call: the resume replays it from that
    call's seeded reset."""
    ref = zoo.build("td3", env=_pendulum(), **TINY)
    zoo.train(ref, _pendulum(), total_steps=100, **RUN)

    agent = zoo.build("td3", env=_pendulum(), **TINY)
    env = _pendulum()
    zoo.train(agent, env, total_steps=50, **RUN)
    zoo.train(agent, env, total_steps=70, checkpoint_dir=tmp_path, **RUN)  # ends 30 steps into an episode
    resumed = zoo.build("td3", env=_pendulum(), **TINY)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*replaying")  # a failed replay restarts the episode
        zoo.train(resumed, _pendulum(), total_steps=100, checkpoint_dir=tmp_path, resume=True, **RUN)
    assert _same(resumed, ref)


class _CtrlCAt(gym.Wrapper):
    """Sends this process SIGINT from inside its ``at``-th step, as a user's Ctrl-C mid-run."""

    def __init__(self, env, at: int) -> None:
        super().__init__(env)
        self.at, self.n = at, 0

    def step(self, action):
        self.n += 1
        if self.n == self.at:
            signal.raise_signal(signal.SIGINT)
        return self.env.step(action)


def test_a_call_after_ctrl_c_continues_where_the_run_stopped():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ref = zoo.build("td3", env=_pendulum(), **TINY)
        zoo.train(ref, _pendulum(), total_steps=100, **RUN)
        agent = zoo.build("td3", env=_pendulum(), **TINY)
        env = _CtrlCAt(_pendulum(), at=57)
        with pytest.raises(KeyboardInterrupt, match="at step 57 of 100"):
            zoo.train(agent, env, total_steps=100, **RUN)
        zoo.train(agent, env, total_steps=100, **RUN)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert _same(agent, ref)


def test_every_calls_episodes_stay_in_episodes_csv(tmp_path):
    """Before: the second call's episodes.csv listed only its own episodes, while metrics.csv beside it kept
    every call's evaluations."""
    agent = zoo.build("td3", env=_pendulum(), **TINY)
    for _ in range(2):
        agent.learn(100, env=_pendulum(), log_dir=tmp_path, eval_every=50, eval_episodes=1)
    with open(tmp_path / "episodes.csv") as fh:
        episodes = list(csv.DictReader(fh))
    with open(tmp_path / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(e["step"]) for e in episodes] == [40, 80, 140, 180]  # each call made its own env: new episodes
    assert len(episodes) == agent.num_episodes and [int(r["step"]) for r in rows] == [50, 100, 150, 200]


def test_a_later_call_of_the_same_agent_goes_on_in_its_checkpoint_dir(tmp_path):
    """learn(n, checkpoint_dir=d) then learn(n, checkpoint_dir=d, reset_num_timesteps=False) was refused as "d holds
    another run's checkpoints", though they were this agent's own: it goes on there, its checkpoint at the
    run's step count. Another agent (a copy of it too) and a file changed since are still refused."""
    build = {"env": "Pendulum-v1", **TINY}
    agent = zoo.build("td3", **build)
    agent.learn(40, checkpoint_dir=tmp_path, checkpoint_every=20, **RUN)
    twin = copy.deepcopy(agent)
    agent.learn(40, checkpoint_dir=tmp_path, checkpoint_every=20, reset_num_timesteps=False, **RUN)
    assert agent.num_timesteps == 80
    assert torch.load(tmp_path / "td3_last.pt", weights_only=True)["counters"]["num_timesteps"] == 80
    with pytest.raises(ValueError, match="holds another run's checkpoints"):
        twin.learn(40, checkpoint_dir=tmp_path, reset_num_timesteps=False, **RUN)
    with pytest.raises(ValueError, match="holds another run's checkpoints"):
        zoo.build("td3", **build).learn(40, checkpoint_dir=tmp_path, **RUN)
    (tmp_path / "td3_last.pt").touch()  # rewritten since this agent wrote it: not known to be its own any more
    with pytest.raises(ValueError, match="holds another run's checkpoints"):
        agent.learn(40, checkpoint_dir=tmp_path, reset_num_timesteps=False, **RUN)
