"""A TD3 agent trained behind NormalizeObservation / NormalizeReward keeps their running statistics: its weights
files and checkpoint carry them, a loaded agent evaluates with them (as its run's evaluations did), a resume
continues them exactly, and a file without them loads as before."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers import NormalizeObservation, NormalizeReward
from safetensors import safe_open

import zoo
from zoo.rl import evaluation, loop

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


def _normalized(steps: int = 50) -> gym.Env:
    return NormalizeReward(NormalizeObservation(gym.make("Pendulum-v1", max_episode_steps=steps)))


def _stats(env) -> dict[str, np.ndarray]:
    """The running statistics (and NormalizeReward's discounted return) of a NormalizeReward(NormalizeObservation)."""
    return {"obs_mean": env.env.obs_rms.mean, "obs_var": env.env.obs_rms.var, "obs_count": env.env.obs_rms.count,
            "ret_mean": env.return_rms.mean, "ret_var": env.return_rms.var, "ret_count": env.return_rms.count,
            "discounted": env.discounted_reward}


def _same_stats(a, b, *, discounted: bool = False) -> bool:
    keys = [k for k in _stats(a) if discounted or k != "discounted"]
    return all(np.array_equal(_stats(a)[k], _stats(b)[k]) for k in keys)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An agent trained 120 steps behind both wrappers, its env, and its files: zoo.save's, agent.save's and
    the run's td3_last.pt and td3_best.safetensors (the one evaluation, at the end, is the best)."""
    d = tmp_path_factory.mktemp("run")
    env = _normalized()
    agent = zoo.build("td3", env=env, **TINY)
    zoo.train(agent, env, total_steps=120, eval_episodes=2, checkpoint_dir=d, progress=False)
    files = {"zoo.save": zoo.save(agent, d / "zoo_save.safetensors"), "td3_last.pt": d / loop.CHECKPOINT_NAME,
             "td3_best.safetensors": d / loop.BEST_NAME}
    agent.save(d / "agent_save.safetensors")
    files["agent.save"] = d / "agent_save.safetensors"
    return agent, env, files


@pytest.mark.parametrize("which", ["zoo.save", "agent.save", "td3_last.pt", "td3_best.safetensors"])
def test_a_loaded_agent_evaluates_with_the_training_statistics(trained, monkeypatch, which):
    agent, env, files = trained
    made = []
    real = evaluation.make_env
    monkeypatch.setattr(evaluation, "make_env", lambda e, **kw: made.append(real(e, **kw)) or made[-1])
    loaded = zoo.build("td3", weights=files[which])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the env it makes pairs with the file: nothing to warn about
        score = zoo.evaluate(loaded, episodes=2)["return_mean"]
    # was: evaluated on the bare id (no wrappers, or fresh statistics updated by the evaluation): -1300-ish
    assert score == pytest.approx(agent.history[-1]["eval_return_mean"], rel=1e-9)
    (rebuilt,) = made
    assert isinstance(rebuilt, NormalizeReward) and _same_stats(rebuilt, env)  # taken in, and frozen
    assert rebuilt.update_running_mean and rebuilt.env.update_running_mean  # its own setting back after
    if which.endswith((".safetensors", "save")):
        with safe_open(str(files[which]), "pt") as f:
            assert torch.equal(f.get_tensor("normalization.obs_rms.0.mean"), torch.from_numpy(env.env.obs_rms.mean))
            assert float(f.get_tensor("normalization.return_rms.0.count")) == env.return_rms.count


def test_an_env_given_to_build_takes_the_statistics_and_one_without_the_wrappers_warns(trained):
    _, env, files = trained
    given = _normalized()
    loaded = zoo.build("td3", weights=files["zoo.save"], env=given)
    assert _same_stats(given, env)  # was: fresh (mean 0, var 1, count 1e-4)
    with pytest.warns(UserWarning, match=r"holds the running statistics of 1 NormalizeObservation \(obs_rms\) and "
                                         r"1 NormalizeReward \(return_rms\); the env given \(Pendulum-v1\) "
                                         r"normalises with none: .*another input scale"):
        zoo.build("td3", weights=files["zoo.save"], env=gym.make("Pendulum-v1"))
    with pytest.warns(UserWarning, match=r"this agent holds .* the env \(Pendulum-v1\) normalises with none"):
        zoo.evaluate(loaded, "Pendulum-v1", episodes=1)
    # fine-tuning on a fresh env of the same stack goes on from the statistics it trained with
    fresh = _normalized()
    zoo.train(loaded, fresh, total_steps=30, eval_every=0, progress=False)
    assert fresh.env.obs_rms.count == pytest.approx(env.env.obs_rms.count + 31)  # 30 steps and a reset
    assert torch.equal(loaded.normalization["obs_rms.0.count"], torch.tensor(fresh.env.obs_rms.count,
                                                                               dtype=torch.float64))


@pytest.mark.parametrize("stop", [57, 80])  # mid-episode (replayed on resume), and at an episode's end
def test_a_resume_continues_the_statistics_exactly(tmp_path, stop):
    run = {"eval_every": 0, "progress": False}
    ref_env = _normalized(40)
    ref = zoo.build("td3", env=ref_env, **TINY)
    zoo.train(ref, ref_env, total_steps=150, **run)

    first = zoo.build("td3", env=_normalized(40), **TINY)
    zoo.train(first, _normalized(40), total_steps=stop, checkpoint_dir=tmp_path, **run)
    env = _normalized(40)
    resumed = zoo.build("td3", env=env, **TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was: the replayed episode did not match (fresh statistics), restarted
        zoo.train(resumed, env, total_steps=150, checkpoint_dir=tmp_path, resume=True, **run)
    assert _same_stats(env, ref_env, discounted=True)
    theirs = ref.network_state_dict()
    assert all(torch.equal(v, theirs[k]) for k, v in resumed.network_state_dict().items())


def test_files_without_statistics_load_as_before(tmp_path):
    shipped = zoo.build("td3", weights="pendulum-v1")  # written before statistics were saved
    assert shipped.normalization == {} and shipped.env_spec is None
    env = NormalizeObservation(gym.make("Pendulum-v1"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zoo.evaluate(shipped, env, episodes=1)
    assert env.obs_rms.count > 1  # its own statistics, updated as the caller left it
    plain = zoo.build("td3", **TINY)  # trained without the wrappers: its file holds the networks only
    zoo.train(plain, total_steps=30, eval_every=0, progress=False)
    with safe_open(str(zoo.save(plain, tmp_path / "plain.safetensors")), "pt") as f:
        assert all(k.startswith(("actor.", "critic.")) for k in f.keys())  # noqa: SIM118
    assert zoo.build("td3", weights=tmp_path / "plain.safetensors").normalization == {}


def test_the_export_says_its_policy_takes_normalised_observations(trained, tmp_path):
    from zoo.exporting import read_metadata

    agent, env, _ = trained
    res = zoo.export(agent, tmp_path / "policy", "torch.export")
    meta = read_metadata(res.path)
    assert "NormalizeObservation" in meta["observation_normalization"]
    np.testing.assert_allclose(meta["observation_mean"], [env.env.obs_rms.mean.tolist()])
    np.testing.assert_allclose(meta["observation_var"], [env.env.obs_rms.var.tolist()])


def test_a_file_whose_env_spec_json_cannot_write_refuses_the_bare_id(tmp_path):
    """Before: the spec of an env with a function among its wrapper's arguments (TransformReward(lambda)) was left
    out of the weights file without a note, and the loaded agent evaluated on bare Pendulum-v1 (1000x apart)."""
    env = gym.wrappers.TransformReward(gym.make("Pendulum-v1"), lambda r: 1000.0 * r)
    agent = zoo.build("td3", env=env, **TINY)
    path = zoo.save(agent, tmp_path / "lambda.safetensors")
    loaded = zoo.build("td3", weights=path)
    with pytest.raises(ValueError, match="TransformReward.*could not record"):
        zoo.evaluate(loaded, episodes=1)
    assert zoo.evaluate(loaded, env, episodes=1, max_steps=2)["length_mean"] == 2  # the env passed is used
    again = zoo.build("td3", weights=zoo.save(loaded, tmp_path / "again.safetensors"))
    with pytest.raises(ValueError, match="could not record"):  # saved again, the note stays
        zoo.evaluate(again, episodes=1)
