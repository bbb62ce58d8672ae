"""``zoo.build("td3", weights="run/td3_last.pt")``: a run's checkpoint holds the agent's networks and the config
that built it, so it builds that agent (as SB3's ``TD3.load`` takes a CheckpointCallback's file)."""

from __future__ import annotations

import warnings

import torch

import zoo
from zoo.engine.checkpoint import load_plain

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


def _run(env_id, ckpt_dir, **config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zoo.train("td3", env_id, total_steps=40, eval_every=0, progress=False, checkpoint_dir=ckpt_dir,
                  model_config={**TINY, **config})
    return ckpt_dir / "td3_last.pt"


def test_a_runs_checkpoint_builds_its_agent_with_its_last_networks(tmp_path):
    path = _run("MountainCarContinuous-v0", tmp_path, seed=3)
    # was: "expected a state dict (str -> tensor); entries 'format', 'describe', 'networks', ... are not tensors"
    agent = zoo.build("td3", weights=path)
    assert agent.env_id == "MountainCarContinuous-v0" and (agent.obs_dim, agent.act_dim) == (2, 1)
    assert agent.config.net_arch == (8, 8) and agent.config.learning_starts == 20 and agent.seed == 3
    saved = load_plain(path)["networks"]
    assert saved.keys() == agent.network_state_dict().keys()
    assert all(torch.equal(v, saved[k]) for k, v in agent.network_state_dict().items())
    assert zoo.evaluate(agent, episodes=1, max_steps=5)["length_mean"] == 5


def test_the_callers_config_goes_over_the_checkpoints(tmp_path):
    path = _run("Pendulum-v1", tmp_path)
    agent = zoo.build("td3", weights=path, exploration_noise=0.3)
    assert agent.config.exploration_noise == 0.3 and agent.config.batch_size == 8


def test_a_plain_state_dict_in_a_pt_file_still_loads(tmp_path):
    agent = zoo.build("td3", **TINY)
    torch.save(agent.export_state_dict(), tmp_path / "plain.pt")
    loaded = zoo.build("td3", weights=tmp_path / "plain.pt", **TINY)
    assert all(torch.equal(v, agent.export_state_dict()[k]) for k, v in loaded.export_state_dict().items())
