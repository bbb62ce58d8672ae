"""A training env that normalises with running statistics (gymnasium's NormalizeObservation / NormalizeReward):
the run's evaluations see the training env's statistics, frozen, as SB3's EvalCallback syncs VecNormalize;
a fresh env made from the spec would normalise with statistics of its own few episodes."""

from __future__ import annotations

import copy
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import NormalizeObservation, NormalizeReward, RecordEpisodeStatistics

import zoo
from zoo.rl import loop

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}
RUN = {"eval_episodes": 1, "progress": False}


def _stack(env):
    """The running-statistics wrappers of ``env``'s stack, outermost first (none for an id or spec)."""
    found = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, (NormalizeObservation, NormalizeReward)):
            found.append(env)
        env = env.env
    return found


def _spy(monkeypatch):
    """Each evaluation's env, its normalisers' statistics and update flags at the time, and the training env's."""
    seen = []
    real = loop.evaluate

    def evaluate(agent, data=None, *, env=None, **kw):
        ours = _stack(env)
        seen.append({"env": env, "stats": [copy.deepcopy(getattr(w, "obs_rms", getattr(w, "return_rms", None)))
                                          for w in ours], "updating": [w.update_running_mean for w in ours]})
        return real(agent, data, env=env, **kw)

    monkeypatch.setattr(loop, "evaluate", evaluate)
    return seen


def test_evaluations_use_the_training_envs_statistics_frozen(monkeypatch):
    seen = _spy(monkeypatch)
    env = NormalizeReward(NormalizeObservation(gym.make("Pendulum-v1")))
    agent = zoo.build("td3", env=env, **TINY)
    zoo.train(agent, env, total_steps=60, eval_every=30, **RUN)
    assert len(seen) == 2 and all(s["env"] is not env for s in seen)
    # was: evaluated on gym.make(spec) with fresh statistics (count 1e-4, mean 0) that its episodes updated
    last = seen[-1]
    assert last["updating"] == [False, False]
    assert np.array_equal(last["stats"][1].mean, env.env.obs_rms.mean) and last["stats"][1].count == env.env.obs_rms.count
    assert last["stats"][0].var == env.return_rms.var
    assert env.update_running_mean and env.env.update_running_mean  # the training env's are left updating
    # the end-of-run evaluation is that of a copy of the training env with its statistics frozen
    fresh = gym.make(env.spec)
    fresh.env.obs_rms, fresh.return_rms = copy.deepcopy(env.env.obs_rms), copy.deepcopy(env.return_rms)
    fresh.update_running_mean = fresh.env.update_running_mean = False
    expected = zoo.evaluate(agent, fresh, episodes=1)["return_mean"]
    assert agent.history[-1]["eval_return_mean"] == pytest.approx(expected, rel=1e-6)


def test_the_training_env_evaluated_on_itself_keeps_its_statistics(monkeypatch, counter_env):
    seen = _spy(monkeypatch)
    env = NormalizeObservation(counter_env(horizon=10))  # no registered id: evaluated on itself at the end
    zoo.train(zoo.build("td3", env=env, **TINY), env, total_steps=40, **RUN)
    (only,) = seen
    assert only["env"] is env and only["updating"] == [False] and env.update_running_mean
    assert env.obs_rms.count == only["stats"][0].count  # was: the evaluation's observations counted in


def test_an_evaluation_env_without_the_normalisation_says_so(monkeypatch):
    env = NormalizeObservation(gym.make("Pendulum-v1"))
    with pytest.warns(UserWarning, match=r"running statistics \(obs_rms\) in 1 wrapper\(s\), the evaluation env in 0"):
        zoo.train(zoo.build("td3", env=env, **TINY), env, total_steps=30, eval_env="Pendulum-v1", **RUN)


def test_evaluation_returns_are_the_envs_own_behind_normalize_reward():
    """Evaluations behind NormalizeReward returned rewards divided by the statistics of the moment (-8 where
    the env's return was -1646), on another scale at each evaluation of the run."""
    env = NormalizeReward(gym.make("Pendulum-v1", max_episode_steps=20))
    agent = zoo.build("td3", env=env, **TINY)
    zoo.train(agent, env, total_steps=60, eval_every=30, **RUN)
    bare = gym.make("Pendulum-v1", max_episode_steps=20)  # the same observations and actions: no obs scaling
    assert env.return_rms.var > 4  # the run's scaling would have changed the returns
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "rewards scaled otherwise than in training": they are the env's own
        raw = zoo.evaluate(agent, bare, episodes=1)["return_mean"]
    assert zoo.evaluate(agent, episodes=1)["return_mean"] == pytest.approx(raw)  # its own env (the spec)
    assert zoo.evaluate(agent, env, episodes=1)["return_mean"] == pytest.approx(raw)  # the training env itself
    assert agent.history[-1]["eval_return_mean"] == pytest.approx(raw)
    assert type(env).step is NormalizeReward.step and "step" not in vars(env)  # left as it was


def _vector_wrapped(records):
    def wrap(e):  # each sub-env: its raw returns recorded beneath its own NormalizeReward
        records.append(RecordEpisodeStatistics(e))
        return NormalizeReward(records[-1])
    return gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=20, wrappers=[wrap])


@pytest.mark.parametrize("stack", ["env", "vector env", "vector env's sub-envs"])
def test_training_returns_are_the_envs_own_behind_normalize_reward(stack):
    """Training episodes' returns (history's train_return_recent, episodes.csv) were NormalizeReward's scaled
    rewards summed (-8 beside an evaluation's -1646 in one learning_curves.png); they are the env's own now, as
    SB3's Monitor records them beneath VecNormalize, while the agent learns from the scaled rewards."""
    from gymnasium.wrappers import vector as vector_wrappers

    records: list = []
    if stack == "env":
        records.append(RecordEpisodeStatistics(gym.make("Pendulum-v1", max_episode_steps=20)))
        env, steps = NormalizeReward(records[0]), 60
    elif stack == "vector env":
        records.append(vector_wrappers.RecordEpisodeStatistics(
            gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=20)))
        env, steps = vector_wrappers.NormalizeReward(records[0]), 100
    else:
        env, steps = _vector_wrapped(records), 100
    agent = zoo.build("td3", env=env, **TINY)
    zoo.train(agent, env, total_steps=steps, eval_every=steps, eval_env=gym.make("Pendulum-v1", max_episode_steps=20),
              **RUN)
    raw = [float(r) for rec in records for r in rec.return_queue]  # every episode, as the env returned it
    assert 3 <= len(raw) <= 10 and np.mean(raw) < -50  # within train_return_recent's window; unscaled scale
    assert agent.history[-1]["train_return_recent"] == pytest.approx(np.mean(raw), rel=1e-6)


def _sub_env_stats(vec) -> list[NormalizeObservation]:
    """The NormalizeObservation of each sub-env of a SyncVectorEnv."""
    return [_stack(sub)[0] for sub in vec.envs]


def _vec_normalized():
    return gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync", wrappers=[NormalizeObservation],
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})


def test_evaluating_on_the_training_env_leaves_its_statistics_alone():
    """Before: zoo.evaluate(agent, training_env) kept updating the env's NormalizeObservation: its count grew with
    each evaluation, and the same seeds gave another return each time."""
    env = NormalizeObservation(gym.make("Pendulum-v1", max_episode_steps=20))
    agent = zoo.build("td3", env=env, **TINY)
    zoo.train(agent, env, total_steps=60, eval_every=0, progress=False)
    before = (env.obs_rms.count, env.obs_rms.mean.copy())
    first = zoo.evaluate(agent, env, episodes=2)["return_mean"]
    assert (env.obs_rms.count, env.obs_rms.mean.tolist()) == (before[0], before[1].tolist())
    assert zoo.evaluate(agent, env, episodes=2)["return_mean"] == first
    assert env.update_running_mean  # the caller's setting, back after the evaluation


def test_a_vector_env_evaluates_with_the_agents_statistics_in_every_sub_env():
    """Before: the agent's statistics went into sub-env 0's NormalizeObservation only; sub-env 1 normalised with
    statistics of its own evaluation episodes, updated as it went."""
    env = NormalizeObservation(gym.make("Pendulum-v1", max_episode_steps=20))
    agent = zoo.build("td3", env=env, **TINY)
    zoo.train(agent, env, total_steps=60, eval_every=0, progress=False)
    vec = _vec_normalized()
    zoo.evaluate(agent, vec, episodes=2, max_steps=5)
    for wrapper in _sub_env_stats(vec):
        assert wrapper.obs_rms.count == env.obs_rms.count and wrapper.update_running_mean
        np.testing.assert_array_equal(wrapper.obs_rms.mean, env.obs_rms.mean)


def test_a_resumed_vector_env_gets_each_sub_envs_statistics_back(tmp_path):
    """Before: a checkpoint held sub-env 0's statistics only; on resume sub-env 1's NormalizeObservation started
    again from mean 0, var 1, without a word."""
    vec = _vec_normalized()
    zoo.train(zoo.build("td3", env=vec, **TINY), vec, total_steps=40, eval_every=0, checkpoint_dir=tmp_path,
              progress=False)
    saved = [(w.obs_rms.count, w.obs_rms.var.copy()) for w in _sub_env_stats(vec)]
    assert not np.allclose(saved[0][1], saved[1][1])  # two sub-envs, two sets of statistics
    again, seen = _vec_normalized(), []
    monkey = pytest.MonkeyPatch()
    monkey.setattr(loop, "_loop", lambda agent, run: seen.extend(
        (w.obs_rms.count, w.obs_rms.var.copy()) for w in _sub_env_stats(run.env)))
    with monkey.context(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the episodes in progress restart
        zoo.train(zoo.build("td3", env=again, **TINY), again, total_steps=80, eval_every=0, checkpoint_dir=tmp_path,
                  resume=True, progress=False)
    monkey.undo()
    for (count, var), (count_now, var_now) in zip(saved, seen):
        assert count_now == count + 1  # the resumed run's first reset is one more observation
        np.testing.assert_allclose(var_now, var, rtol=0.2)
