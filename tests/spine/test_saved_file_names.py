"""A file zoo.save wrote is safetensors by its bytes, whatever its name (a copy named ``.ckpt``, a URL's
``/download``): every family reads what it recorded there under any name, as ``zoo.build`` reads its config."""

from __future__ import annotations

import shutil

import zoo
from zoo import hub


def test_a_saved_resnet18_keeps_its_class_names_under_another_name(tmp_path):
    """Before: read only from a name ending in ``.safetensors``; ``r.ckpt`` built with no class names."""
    net = zoo.build("resnet18", num_classes=3, stem="cifar")
    net.pretrained_cfg["classes"] = ["ant", "bee", "cat"]
    renamed = shutil.copy(zoo.save(net, tmp_path / "r.safetensors"), tmp_path / "r.ckpt")
    assert zoo.build("resnet18", weights=str(renamed)).pretrained_cfg["classes"] == ["ant", "bee", "cat"]


def test_a_saved_hybridsn_keeps_its_split_under_another_name(tmp_path):
    """Before: the split the network trained on (which ``zoo.evaluate`` scores apart from) was lost as ``h.pt``."""
    net = zoo.build("hybridsn", num_classes=4, n_bands=16, window=9)
    net.split_ = {"kind": "random", "seed": 3}
    renamed = shutil.copy(zoo.save(net, tmp_path / "h.safetensors"), tmp_path / "h.pt")
    assert zoo.build("hybridsn", weights=str(renamed)).split_ == {"kind": "random", "seed": 3}


def test_a_saved_agent_keeps_its_env_under_another_name(tmp_path):
    agent = zoo.build("td3", env="MountainCarContinuous-v0")
    renamed = shutil.copy(zoo.save(agent, tmp_path / "a.safetensors"), tmp_path / "a.bin")
    built = zoo.build("td3", weights=str(renamed))
    assert (built.obs_dim, built.env_id) == (2, "MountainCarContinuous-v0")


def test_zoo_translate_takes_the_model_a_renamed_file_records(tmp_path):
    """Before: ``--weights g.weights`` of a GRU was built as the default Transformer (and failed to load)."""
    from zoo.seq2seq.cli import _model_of

    path = hub.save_weights(zoo.build("seq2seq-gru"), tmp_path / "g.safetensors",
                            metadata={"zoo.model": "seq2seq-gru"})
    assert _model_of(str(shutil.copy(path, tmp_path / "g.weights"))) == "seq2seq-gru"
