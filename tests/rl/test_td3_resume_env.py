"""A TD3 resume trains on the checkpointed run's env: a call that names none (or another) is refused with a
ResumeError that names the checkpoint's env and the call that continues it, and the warnings about the run's
length come once the checkpoint's step count is known."""

from __future__ import annotations

import warnings

import pytest

import zoo
from zoo.engine import ResumeError

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 50, "buffer_size": 1000}
RUN = {"eval_every": 0, "progress": False}


def _first_run(ckpt_dir):
    with warnings.catch_warnings():  # 30 steps do not pass learning_starts: the run says so, as it should
        warnings.simplefilter("ignore")
        zoo.train("td3", "MountainCarContinuous-v0", total_steps=30, checkpoint_dir=ckpt_dir, model_config=TINY,
                  **RUN)


def test_a_resume_without_the_env_names_the_checkpoints_env_and_warns_nothing(tmp_path):
    _first_run(tmp_path)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(ResumeError) as err:
        warnings.simplefilter("always")
        # was: "total_steps=500 does not pass learning_starts=10000 (and 0 steps are done)", then
        # "ValueError: checkpoint is for obs_dim=2, this agent has obs_dim=3"
        zoo.train("td3", total_steps=500, checkpoint_dir=tmp_path, resume=True, **RUN)
    assert not [w for w in caught if "learning_starts" in str(w.message)]
    msg = str(err.value)
    assert "'Pendulum-v1', the agent's own (the call named no env)" in msg
    assert "continues a TD3 run on 'MountainCarContinuous-v0', obs_dim 2, act_dim 1" in msg
    said = {"net_arch": [8, 8], "buffer_size": 1000, "learning_starts": 50, "batch_size": 8}  # TD3Config's order
    assert f"zoo.train('td3', 'MountainCarContinuous-v0', model_config={said!r}, resume=True, ...)" in msg
    assert ("zoo.build('td3', env='MountainCarContinuous-v0', net_arch=[8, 8], buffer_size=1000, learning_starts=50, "
            "batch_size=8), 'MountainCarContinuous-v0', resume=True, ...)") in msg
    # what it says to pass continues the run
    again = zoo.train("td3", "MountainCarContinuous-v0", model_config=said, total_steps=60, checkpoint_dir=tmp_path,
                      resume=True, **RUN)
    assert again.resumed["changed"] == {"total_steps": (30, 60)} and again.model.num_timesteps == 60


def test_an_agent_for_another_env_given_explicitly_is_refused_the_same_way(tmp_path):
    _first_run(tmp_path)
    agent = zoo.build("td3", env="Pendulum-v1", **TINY)
    with pytest.raises(ResumeError, match=r"env: 'MountainCarContinuous-v0' in .*, 'Pendulum-v1' now") as err:
        zoo.train(agent, "Pendulum-v1", total_steps=60, checkpoint_dir=tmp_path, resume=True, **RUN)
    assert "the call named no env" not in str(err.value) and agent.num_timesteps == 0


def test_the_learning_starts_warning_counts_the_checkpoints_steps(tmp_path):
    _first_run(tmp_path)
    with pytest.warns(UserWarning, match=r"total_steps=45 does not pass learning_starts=50 \(and 30 steps are done\)"):
        zoo.train("td3", "MountainCarContinuous-v0", model_config=TINY, total_steps=45, checkpoint_dir=tmp_path,
                  resume=True, **RUN)


def test_two_resumes_of_one_vector_env_checkpoint_are_one_run(tmp_path):
    """A vector env's sub-envs' random state is not saved: the resume reset them from OS entropy, so two
    resumes of the same checkpoint collected different transitions and ended with different weights."""
    import shutil

    import torch

    first = tmp_path / "a"
    zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", num_envs=2, total_steps=200, eval_every=0,
              checkpoint_dir=first, progress=False)
    shutil.copytree(first, tmp_path / "b")
    runs = []
    for folder in (first, tmp_path / "b"):
        agent = zoo.build("td3", **TINY)
        zoo.train(agent, "Pendulum-v1", num_envs=2, total_steps=260, eval_every=0, checkpoint_dir=folder,
                  resume=True, progress=False)
        runs.append(agent)
    assert torch.equal(runs[0].buffer.obs[200:260], runs[1].buffer.obs[200:260])
    assert all(torch.equal(p, q) for p, q in zip(runs[0].actor.parameters(), runs[1].actor.parameters()))
