"""The Hugging Face Hub (issue #14): `zoo weights export-hf` writes a Hub-ready folder, and
``zoo.build(name, weights="hf-hub:org/repo")`` downloads it back with huggingface_hub from a loopback Hub
(tests/hub/conftest.py ``hf_server``, reached through HF_ENDPOINT), verifies it and loads it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

import zoo
from zoo import hub
from zoo.cli import main
from zoo.hub.hf import export_hf


def _upload(folder, hf_server, repo: str) -> None:
    shutil.copytree(folder, hf_server.state.root / repo)


def _card(path):
    from huggingface_hub import ModelCard

    return ModelCard.load(path)


def test_export_hf_round_trips_through_the_loopback_hub(tiny_model, weights_home, hf_server, tmp_path, capsys):
    torch.manual_seed(0)
    module = zoo.build(tiny_model, num_classes=4)
    entry = hub.add_weights(module, name=f"{tiny_model}.toy", config={"num_classes": 4},
                            meta={"dataset": "Toy shapes (generated), 3x32x32", "license": "MIT",
                                  "metrics": {"accuracy": 0.75, "loss": 0.5}, "command": "pytest"})
    out = tmp_path / "export"
    assert main(["weights", "export-hf", entry.name, str(out), "--repo", "org/toy"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    assert hub.sha256_file(out / "model.safetensors") == entry.sha256
    cfg = json.loads((out / "config.json").read_text())["zoo"]
    assert cfg["model"] == tiny_model and cfg["config"] == {"num_classes": 4} and cfg["sha256"] == entry.sha256
    card = _card(out / "README.md")
    assert card.data.license == "mit" and card.data.library_name == "zoo"
    assert card.data.datasets == ["toy-shapes"]
    assert {r.metric_type: r.metric_value for r in card.data.eval_results} == {"accuracy": 0.75, "loss": 0.5}
    assert 'weights="hf-hub:org/toy"' in card.text
    _upload(out, hf_server, "org/toy")

    loaded = zoo.build(tiny_model, weights="hf-hub:org/toy")
    for a, b in zip(module.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a, b)
    got = {p for m, p in hf_server.state.requests if m == "GET"}
    assert got == {"org/toy/resolve/main/config.json", "org/toy/resolve/main/model.safetensors"}
    # offline: straight from the Hub cache under $ZOO_HOME/hf, no request at all
    before = len(hf_server.state.requests)
    again = zoo.build(tiny_model, weights="hf-hub:org/toy", local_files_only=True)
    assert torch.equal(again.head.weight, module.head.weight) and len(hf_server.state.requests) == before


def test_hf_weights_are_verified_before_loading(tiny_model, weights_home, hf_server, tmp_path):
    torch.manual_seed(0)
    entry = hub.add_weights(zoo.build(tiny_model), name=f"{tiny_model}.toy", config={})
    out = tmp_path / "export"
    export_hf(entry.name, out)
    torch.manual_seed(1)
    hub.save_weights(zoo.build(tiny_model), out / "model.safetensors")  # the repo's file was replaced
    _upload(out, hf_server, "org/swapped")
    with pytest.raises(hub.HashMismatchError, match="refusing to load"):
        zoo.build(tiny_model, weights="hf-hub:org/swapped")
    with pytest.raises(FileNotFoundError, match="RepositoryNotFoundError"):
        zoo.build(tiny_model, weights="hf-hub:org/absent")
    with pytest.raises(ValueError, match="expected 'hf-hub:ORG/REPO'"):
        zoo.build(tiny_model, weights="hf-hub:no-slash")
    export_hf(entry.name, tmp_path / "good")
    _upload(tmp_path / "good", hf_server, "org/good")
    with pytest.raises(ValueError, match=f"are for model {tiny_model!r}, not 'resnet18'"):
        zoo.build("resnet18", weights="hf-hub:org/good")


def test_a_shipped_agent_round_trips_with_its_model_card(hf_server, tmp_path, monkeypatch):
    """The real td3.pendulum-v1: exported, served by the loopback Hub, loaded back, acting identically."""
    monkeypatch.setenv("ZOO_OFFLINE", "1")  # the shipped file comes from the checkout; the Hub is local
    out = tmp_path / "td3"
    export_hf("td3.pendulum-v1", out, repo_hint="org/td3-pendulum")
    card = _card(out / "README.md")
    assert card.data.license == "mit"
    result = card.data.eval_results[0]
    assert result.task_type == "reinforcement-learning" and result.metric_type == "eval_return_mean_10ep"
    _upload(out, hf_server, "org/td3-pendulum")
    monkeypatch.setenv("ZOO_OFFLINE", "0")
    from_hub = zoo.build("td3", weights="hf-hub:org/td3-pendulum")
    shipped = zoo.build("td3", weights="pendulum-v1")
    obs = np.array([0.3, -0.9, 0.5], dtype=np.float32)
    assert np.array_equal(from_hub.act(obs), shipped.act(obs))


def test_an_uncached_repo_under_hf_hub_offline_says_the_variable_not_could_not_reach(monkeypatch, tmp_path):
    """Before: "could not reach me/td3 on https://huggingface.co", though HF_HUB_OFFLINE had stopped any try."""
    from huggingface_hub import constants

    from zoo import hub

    monkeypatch.setenv("ZOO_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(hub.OfflineError, match=r"not in the Hub cache .* HF_HUB_OFFLINE is set"):
        hub.resolve("hf-hub:someone/nothing-here")
