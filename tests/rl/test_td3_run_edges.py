"""Run edges of the TD3 loop: a run that stops mid-episode resumes exactly, an env without an id is
evaluated (or refused before training), ``seed=`` counts on every call, and the run's own weights files
load back with their architecture."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import zoo
from zoo.engine import ResumeError

PENDULUM_TINY = {"net_arch": (16, 16), "batch_size": 16, "learning_starts": 100, "buffer_size": 2000}
SMALL = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


class Point(gym.Env):
    """A 1-D point pushed toward 0, with no registered id; episodes of at most 25 steps."""

    observation_space = spaces.Box(-10, 10, (2,), np.float32)
    action_space = spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.n = float(self.np_random.uniform(-2, 2)), 0
        return np.array([self.x, 0], np.float32), {}

    def step(self, action):
        self.x += 0.1 * float(action[0])
        self.n += 1
        return np.array([self.x, self.n / 25], np.float32), -abs(self.x), abs(self.x) < 0.05, self.n >= 25, {}


def _same_agent(a, b) -> bool:
    sa, sb = a.network_state_dict(), b.network_state_dict()
    return (all(torch.equal(sa[k], sb[k]) for k in sa) and torch.equal(a.buffer.data, b.buffer.data)
            and torch.equal(a.generator.get_state(), b.generator.get_state()))


# --- resuming a run that stopped mid-episode ---------------------------------------------------------


def _episodes(ckpt_dir):
    return torch.load(ckpt_dir / "td3_last.pt", weights_only=True)["episodes"]


@pytest.mark.slow
def test_a_run_stopped_mid_episode_resumes_exactly(tmp_path):
    """Pendulum's episodes are 200 steps: 250 and 330 stop inside the second episode, and eval_every=0 makes
    the end-of-run checkpoint the only one (the resume point used to restart that episode)."""
    full = zoo.build("td3", **PENDULUM_TINY)
    zoo.train(full, "Pendulum-v1", total_steps=450, eval_every=0, checkpoint_dir=tmp_path / "full", progress=False)
    run = tmp_path / "run"
    part = zoo.build("td3", **PENDULUM_TINY)
    zoo.train(part, "Pendulum-v1", total_steps=250, eval_every=0, checkpoint_dir=run, progress=False)
    again = zoo.build("td3", **PENDULUM_TINY)  # stops again, inside the same episode
    zoo.train(again, "Pendulum-v1", total_steps=330, eval_every=0, checkpoint_dir=run, resume=True, progress=False)
    resumed = zoo.build("td3", **PENDULUM_TINY)
    res = zoo.train(resumed, "Pendulum-v1", total_steps=450, eval_every=0, checkpoint_dir=run, resume=True,
                    progress=False)
    assert res.resumed["changed"] == {"total_steps": (330, 450)}
    assert (resumed.num_timesteps, resumed.num_episodes) == (full.num_timesteps, full.num_episodes) == (450, 2)
    assert _same_agent(resumed, full)
    assert _episodes(run) == _episodes(tmp_path / "full")  # the episode cut at 250 logged whole, its return too


def test_a_mid_episode_checkpoint_of_an_env_that_does_not_replay_warns(tmp_path, counter_env):
    """CounterEnv's observation counts its episodes, state a fresh env does not have: the replayed episode
    cannot match, so the resume says it restarts the episode (and still runs)."""
    first = zoo.build("td3", env=counter_env(horizon=10), **SMALL)
    zoo.train(first, counter_env(horizon=10), total_steps=35, eval_every=0, checkpoint_dir=tmp_path, progress=False)
    resumed = zoo.build("td3", env=counter_env(horizon=10), **SMALL)
    with pytest.warns(UserWarning, match="5 steps into an episode.*the episode restarts"):
        zoo.train(resumed, counter_env(horizon=10), total_steps=50, eval_every=0, checkpoint_dir=tmp_path,
                  resume=True, progress=False)
    assert resumed.num_timesteps == 50


def test_a_mid_episode_checkpoint_of_a_custom_env_resumes_exactly(tmp_path):
    full = zoo.build("td3", env=Point(), **SMALL)
    zoo.train(full, Point(), total_steps=90, eval_every=0, progress=False)
    part = zoo.build("td3", env=Point(), **SMALL)
    zoo.train(part, Point(), total_steps=60, eval_every=0, checkpoint_dir=tmp_path, progress=False)
    assert torch.load(tmp_path / "td3_last.pt", weights_only=True)["run_state"]["ep_len"] != [0]  # mid-episode
    resumed = zoo.build("td3", env=Point(), **SMALL)
    zoo.train(resumed, Point(), total_steps=90, eval_every=0, checkpoint_dir=tmp_path, resume=True, progress=False)
    assert _same_agent(resumed, full)


# --- evaluating a run on an env without an id ----------------------------------------------------------


def test_a_run_on_an_env_without_an_id_is_evaluated_at_the_end_on_that_env():
    env = Point()
    agent = zoo.build("td3", env=env, **SMALL)
    assert agent.env_id is None
    result = zoo.train(agent, env, total_steps=60, eval_episodes=2, progress=False)  # was: "no environment"
    assert [h["step"] for h in result.history] == [60] and result.best_metric is not None
    # the same evaluation a separate copy of the env gives: the training env was reset with the eval seeds
    assert result.history[0]["eval_return_mean"] == zoo.evaluate(agent, Point(), episodes=2)["return_mean"]


def test_periodic_evaluation_on_an_env_without_an_id_asks_for_eval_env_before_training():
    env = Point()
    agent = zoo.build("td3", env=env, **SMALL)
    with pytest.raises(ValueError, match=r"Point has no registered id.*pass eval_env=<another Point instance>"):
        zoo.train(agent, env, total_steps=60, eval_every=30, progress=False)
    assert agent.num_timesteps == 0  # refused before any step
    result = zoo.train(agent, env, total_steps=60, eval_every=30, eval_env=Point(), eval_episodes=1, progress=False)
    assert [h["step"] for h in result.history] == [30, 60]


def test_evaluating_on_the_training_env_leaves_its_random_stream_for_a_resume(tmp_path):
    full = zoo.build("td3", env=Point(), **SMALL)
    zoo.train(full, Point(), total_steps=100, eval_every=0, progress=False)
    part = zoo.build("td3", env=Point(), **SMALL)  # evaluated at its end (50, an episode boundary) on itself
    zoo.train(part, Point(), total_steps=50, eval_episodes=3, checkpoint_dir=tmp_path, progress=False)
    assert part.history and torch.load(tmp_path / "td3_last.pt", weights_only=True)["run_state"]["ep_len"] == [0]
    resumed = zoo.build("td3", env=Point(), **SMALL)
    zoo.train(resumed, Point(), total_steps=100, eval_every=0, checkpoint_dir=tmp_path, resume=True, progress=False)
    assert _same_agent(resumed, full)


# --- seed= on a later call ------------------------------------------------------------------------------


def _two_calls(second_seed):
    agent = zoo.build("td3", **PENDULUM_TINY)
    zoo.train(agent, "Pendulum-v1", total_steps=150, eval_every=0, progress=False)
    zoo.train(agent, "Pendulum-v1", total_steps=250, eval_every=0, progress=False, seed=second_seed)
    return agent


def test_seed_on_a_second_train_call_is_honoured():
    a, b, other = _two_calls(123), _two_calls(123), _two_calls(7)
    assert _same_agent(a, b)  # the second env was reset from OS entropy: never equal
    # the seed reaches the env: its first observation after the second call's reset is the seeded one
    first = lambda agent: agent.buffer.obs[150].clone()
    expected, _ = gym.make("Pendulum-v1").reset(seed=123)
    np.testing.assert_array_equal(first(a).numpy(), expected.astype(np.float32))
    assert not torch.equal(first(a), first(other))


def test_a_second_train_call_without_a_seed_is_repeatable():
    assert _same_agent(_two_calls(None), _two_calls(None))


def test_a_later_call_whose_total_is_already_collected_says_so(recwarn):
    """total_steps counts every transition of the agent: a second call with a total it has passed collects
    nothing, and the warning named learning_starts instead of the total."""
    agent = zoo.build("td3", **PENDULUM_TINY)
    zoo.train(agent, "Pendulum-v1", total_steps=150, eval_every=0, progress=False)
    with pytest.warns(UserWarning, match=r"total_steps=100 counts every transition .* has collected 150"):
        zoo.train(agent, "Pendulum-v1", total_steps=100, eval_every=0, progress=False)
    assert agent.num_timesteps == 150


def test_on_resume_the_checkpoints_seed_passes_quietly_and_another_is_refused(tmp_path, counter_env, recwarn):
    """Before: either seed was warned 'ignored when resuming', and an agent built by name with another seed was
    then refused as well (seed: 4 in td3_last.pt, 5 now): one call said both."""
    agent = zoo.build("td3", env=counter_env(horizon=10), seed=4, **SMALL)
    zoo.train(agent, counter_env(horizon=10), total_steps=30, eval_every=0, checkpoint_dir=tmp_path, progress=False)
    for seed in (5, 0):  # 0: zoo.build's default, not this checkpoint's either
        # "or leave seed out" was wrong by name: left out, the build takes seed 0, which is refused too
        with pytest.raises(ResumeError, match=rf"seed: 4 in .*td3_last\.pt, {seed} now\)\. To continue this TD3 run, "
                                              r"pass seed=4 \(the checkpoint's"):
            zoo.train(zoo.build("td3", env=counter_env(horizon=10), seed=4, **SMALL), counter_env(horizon=10),
                      total_steps=40, eval_every=0, checkpoint_dir=tmp_path, resume=True, seed=seed, progress=False)
    assert not [w for w in recwarn if "seed" in str(w.message)]
    resumed = zoo.build("td3", env=counter_env(horizon=10), seed=4, **SMALL)
    zoo.train(resumed, counter_env(horizon=10), total_steps=40, eval_every=0, checkpoint_dir=tmp_path, resume=True,
              seed=4, progress=False)
    assert resumed.num_timesteps == 40 and not [w for w in recwarn if "seed" in str(w.message)]


# --- the run's weights files load back --------------------------------------------------------------------


def test_the_runs_best_weights_load_with_their_net_arch(tmp_path):
    agent = zoo.build("td3", **PENDULUM_TINY)
    zoo.train(agent, "Pendulum-v1", total_steps=150, eval_episodes=1, checkpoint_dir=tmp_path, progress=False)
    best = tmp_path / "td3_best.safetensors"
    loaded = zoo.build("td3", weights=str(best))  # the default net_arch is (400, 300): used to be refused
    assert loaded.config.net_arch == (16, 16)
    assert (loaded.config.batch_size, loaded.config.learning_starts) == (16, 100)  # the whole config
    obs = np.random.default_rng(0).standard_normal((5, 3))
    np.testing.assert_array_equal(loaded.act(obs), agent.act(obs))
    with pytest.raises(ValueError, match=r"net_arch \(16, 16\), but net_arch \(32, 32\) was asked for"):
        zoo.build("td3", weights=str(best), net_arch=(32, 32))


def test_a_weights_file_that_records_its_net_arch_only_in_its_description_loads(tmp_path):
    """A TD3Agent.save file from before it wrote zoo.config: its architecture is in the zoo.td3 metadata."""
    import json

    from zoo import hub

    agent = zoo.build("td3", net_arch=(8, 8))
    path = tmp_path / "old.safetensors"
    hub.save_weights(agent.network_state_dict(), path, metadata={"zoo.td3": json.dumps(agent.describe())})
    loaded = zoo.build("td3", weights=str(path))
    assert loaded.config.net_arch == (8, 8)
    obs = np.zeros((2, 3))
    np.testing.assert_array_equal(loaded.act(obs), agent.act(obs))
    with pytest.raises(ValueError, match=r"net_arch \(8, 8\), but net_arch \(16, 16\) was asked for"):
        zoo.build("td3", weights=str(path), net_arch=(16, 16))
    assert zoo.build("td3", weights=str(path), net_arch=(8, 8)).config.net_arch == (8, 8)


def test_demo_step_is_selected_by_family_and_fails_when_its_file_cannot_be_had(tmp_path, monkeypatch, capsys):
    """`zoo demo --only rl` picks the TD3 step like `--only vision` picks vision's; a published file that
    cannot be had (offline, empty cache, no source) fails the step as in every other family."""
    import shutil

    from zoo.cli import main
    from zoo.hub.manifest import PACKAGE_MANIFEST

    release = tmp_path / "release"
    release.mkdir()
    shutil.copy(PACKAGE_MANIFEST, release / "manifest.json")  # td3.pendulum-v1 is published, its file is not here
    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(release))
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    monkeypatch.delenv("ZOO_WEIGHTS_URL", raising=False)
    assert main(["demo", "--only", "rl"]) == 1
    captured = capsys.readouterr()
    assert "rl: TD3 on Pendulum-v1" in captured.out and "demo step failed: OfflineError" in captured.err


def test_checkpoint_path_is_the_best_policy_and_a_resume_from_it_names_the_run_checkpoint(tmp_path, counter_env):
    """TrainResult.checkpoint_path is "the best checkpoint when checkpoints were written"; it was td3_last.pt."""
    from pathlib import Path

    from zoo import hub

    def run(folder, **kw):
        agent = zoo.build("td3", env=counter_env(horizon=10), **SMALL)
        return zoo.train(agent, counter_env(horizon=10), eval_env=counter_env(horizon=10), eval_episodes=1,
                         checkpoint_dir=folder, progress=False, **kw)

    r = run(tmp_path / "a", total_steps=60, eval_every=30)
    assert isinstance(r.checkpoint_path, Path) and r.checkpoint_path == tmp_path / "a" / "td3_best.safetensors"
    assert hub.read_metadata(r.checkpoint_path)["step"] == str(r.best_step)  # the best row's policy
    assert zoo.build("td3", weights=r.checkpoint_path, env=counter_env(horizon=10)).config.net_arch == (16, 16)
    with pytest.raises(ValueError, match=r"holds a policy's weights only .* a resume needs the run's checkpoint, "
                                         r".*td3_last.pt"):
        run(tmp_path / "a", total_steps=90, eval_every=30, resume=r.checkpoint_path)
    assert run(tmp_path / "b", total_steps=30, eval_every=0).checkpoint_path == tmp_path / "b" / "td3_last.pt"


def test_a_run_by_name_gives_the_agent_its_seed(tmp_path):
    """zoo.train("td3", env, seed=S) left agent.seed 0 (saved as 0): its networks started from seed 0 whatever S
    was, and its evaluations' episode seeds did not follow the run's."""
    def run(seed):
        return zoo.train("td3", "Pendulum-v1", seed=seed, total_steps=120, eval_every=0, progress=False,
                         model_config=PENDULUM_TINY).model

    one, other = run(1), run(2)
    assert one.seed == 1 and other.seed == 2
    assert zoo.build("td3", weights=zoo.save(one, tmp_path / "a.safetensors")).seed == 1
    assert not torch.equal(next(one.actor.parameters()), next(other.actor.parameters()))


def test_an_agent_trains_inside_a_callers_gradient_free_block():
    """TD3's updates compute their gradients explicitly (zoo.rl.networks), so a caller's gradient-free mode
    must not stop them; a change to autograd would need zoo.engine.modes.training_autograd around the loop."""
    agent = zoo.build("td3", net_arch=(16, 16), learning_starts=40, batch_size=16, seed=0)
    before = [p.detach().clone() for p in agent.actor.parameters()]
    with torch.inference_mode():
        zoo.train(agent, "Pendulum-v1", total_steps=80, eval_every=0, progress=False)
        assert torch.is_inference_mode_enabled()
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.actor.parameters()))


def test_gradient_steps_minus_one_trains_the_last_rollouts_steps_not_the_warm_up():
    """SB3: TD3(..., learning_starts=50, gradient_steps=-1).learn(60) makes 10 updates; the warm-up steps were
    counted too, so the first update phase ran learning_starts + 1 of them (10,001 with rl-zoo's 10,000)."""
    for gradient_steps, updates in ((1, 10), (-1, 10)):
        agent = zoo.build("td3", **{**SMALL, "learning_starts": 50}, gradient_steps=gradient_steps)
        zoo.train(agent, "Pendulum-v1", total_steps=60, eval_every=0, progress=False)
        assert agent.num_updates == updates
    vector = zoo.build("td3", **{**SMALL, "learning_starts": 4}, gradient_steps=-1)
    zoo.train(vector, "Pendulum-v1", num_envs=2, total_steps=20, eval_every=0, progress=False)
    assert vector.num_updates == 16  # steps 6..20 in rollouts of 2 transitions, after the 4 of the warm-up


def test_a_vector_env_that_does_not_reset_itself_is_refused_before_training():
    """autoreset_mode DISABLED failed at the first episode end inside the loop ('NoneType' is not subscriptable)."""
    env = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED})
    agent = zoo.build("td3", env=env, **SMALL)
    with pytest.raises(ValueError, match=r"TD3 trains on vector envs that reset their episodes themselves .*this one "
                                         r"has AutoresetMode.DISABLED: make it with vector_kwargs="):
        zoo.train(agent, env, total_steps=10, eval_every=0, progress=False)
    assert agent.num_timesteps == 0


def test_a_next_step_vector_envs_episodes_are_logged_at_their_length(tmp_path):
    """The reset step a NEXT_STEP vector env takes after an episode's end (its transition skipped, its reward 0)
    was counted in the next episode's length: 5, 5, 6, 6 for episodes of 5 steps."""
    import csv

    env = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=5)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    agent = zoo.build("td3", env=env, **SMALL)
    zoo.train(agent, env, total_steps=24, eval_every=0, log_dir=tmp_path, progress=False)
    with open(tmp_path / "episodes.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["length"]) for r in rows] == [5, 5, 5, 5]
