"""What a TD3 resume compares besides the agent's config: the number of envs and which env (id, make
kwargs, wrappers); and ``resume=True`` on a folder without a checkpoint starts the run from scratch."""

from __future__ import annotations

import logging

import gymnasium as gym
import pytest
import torch

import zoo
from zoo.engine import ResumeError

TINY = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}
RUN = {"eval_every": 0, "progress": False}


def _first_run(ckpt_dir):
    zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=30, checkpoint_dir=ckpt_dir, **RUN)


@pytest.mark.parametrize(("change", "refused", "fix"), [
    ({"data": "Pendulum-v1", "num_envs": 2}, r"num_envs: 1 in .*, 2 now",
     "To continue this TD3 run, train it as the checkpointed run did ("),
    ({"data": gym.make("Pendulum-v1", g=2.0)}, r"env: 'Pendulum-v1' in .*, 'Pendulum-v1\(g=2\.0\)' now",
     "To continue it, pass that env: zoo.train('td3', 'Pendulum-v1', model_config="),
])
def test_another_env_or_number_of_envs_is_refused_on_resume(tmp_path, change, refused, fix):
    _first_run(tmp_path)
    agent = zoo.build("td3", **TINY)
    with pytest.raises(ResumeError, match=refused) as err:  # were: accepted, changed={'total_steps': ...}
        zoo.train(agent, total_steps=60, checkpoint_dir=tmp_path, resume=True, **change, **RUN)
    assert fix in str(err.value)
    assert agent.num_timesteps == 0  # refused before anything loaded
    # the same env as an object (and a changed total_steps) resumes
    same = zoo.train(agent, gym.make("Pendulum-v1"), total_steps=60, checkpoint_dir=tmp_path, resume=True, **RUN)
    assert same.resumed["changed"] == {"total_steps": (30, 60)} and agent.num_timesteps == 60


def test_resume_on_a_folder_without_a_checkpoint_starts_from_scratch(tmp_path, caplog):
    agent = zoo.build("td3", **TINY)
    with caplog.at_level(logging.INFO, logger="zoo.rl.resume"):  # was: FileNotFoundError
        first = zoo.train(agent, total_steps=30, checkpoint_dir=tmp_path, resume=True, **RUN)
    assert "no TD3 checkpoint in" in caplog.text and "starting from scratch" in caplog.text
    assert first.resumed is None and agent.num_timesteps == 30
    fresh = zoo.build("td3", **TINY)  # the same as a run without resume
    zoo.train(fresh, total_steps=30, **RUN)
    assert all(torch.equal(v, fresh.network_state_dict()[k]) for k, v in agent.network_state_dict().items())
    again = zoo.train(zoo.build("td3", **TINY), total_steps=40, checkpoint_dir=tmp_path, resume=True, **RUN)
    assert again.resumed["checkpoint"] == tmp_path / "td3_last.pt"  # the same command line, after a kill
    with pytest.raises(FileNotFoundError, match="no TD3 checkpoint at"):  # a file named: it must be there
        zoo.train(zoo.build("td3", **TINY), total_steps=40, resume=tmp_path / "nope.pt", **RUN)
    (tmp_path / "td3_last.pt").write_bytes(b"not a checkpoint")  # one that is there must load
    with pytest.raises(ValueError, match="td3_last.pt"):
        zoo.train(zoo.build("td3", **TINY), total_steps=40, checkpoint_dir=tmp_path, resume=True, **RUN)


def test_cli_train_resume_serves_the_first_run(tmp_path):
    from zoo import cli

    model = ["--model", "net_arch=[16,16]", "learning_starts=20", "batch_size=8", "buffer_size=500"]
    line = ["train", "td3", "--env", "Pendulum-v1", "--steps", "30", *model, "--checkpoint-dir", str(tmp_path),
            "--resume", "--set", "eval_every=0"]
    assert cli.main(line) == 0  # was: exit 2, "no TD3 checkpoint at .../td3_last.pt to resume from"
    assert (tmp_path / "td3_last.pt").is_file()
