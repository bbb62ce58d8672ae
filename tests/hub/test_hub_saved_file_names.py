"""A file zoo.save wrote is safetensors by its bytes, whatever its name: its recorded config is read under any name
(a copy named ``.ckpt``, a URL's ``/download``), by ``zoo.build`` and by ``zoo weights add``; and an error of
``zoo weights add`` names the file the publisher gave, not the staged copy that is gone once it returns."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from torch import nn

import zoo
from zoo import hub, registry


@pytest.fixture
def saved_file(tiny_model, tmp_path):
    """What zoo.save writes for a zoo model built with ``num_classes=5``: the tensors, its name and its config."""
    torch.manual_seed(0)
    net = zoo.build(tiny_model, num_classes=5)
    return hub.save_weights(net, tmp_path / "net.safetensors",
                            metadata={"zoo.model": tiny_model, "zoo.config": json.dumps({"num_classes": 5})})


def test_a_saved_file_keeps_its_config_under_another_name(tiny_model, saved_file, weights_home, server, tmp_path):
    """Read only when the name ended in ``.safetensors``: the same bytes as ``net.ckpt`` or served as
    ``/download`` were built with the defaults (a fresh 3-way head, the trained one dropped)."""
    renamed = shutil.copy(saved_file, tmp_path / "net.ckpt")
    assert registry.file_config(renamed, tiny_model) == {"num_classes": 5}
    assert zoo.build(tiny_model, weights=str(renamed)).head.out_features == 5
    shutil.copy(saved_file, server.state.root / "download")
    assert zoo.build(tiny_model, weights=f"{server.url}/download").head.out_features == 5
    entry = hub.add_weights(renamed, name=f"{tiny_model}.renamed")
    assert entry.config == {"num_classes": 5}


@pytest.fixture
def picky_model():
    """A model whose loader refuses a file naming it and how to build it, as a family's loader does (TD3's env)."""
    name = "hubtest-picky"

    def refuse(model: nn.Module, path, entry) -> nn.Module:
        raise ValueError(f"weights {path} were trained on another env: build it with "
                         f"zoo.build({name!r}, weights={str(path)!r}, env=...)")

    @registry.register(name, family="hubtest", summary="a model whose loader refuses every file", load_weights=refuse)
    def _build(width: int = 4) -> nn.Module:
        return nn.Linear(width, 2)

    yield name
    registry._REGISTRY.pop(name, None)


def test_weights_add_names_the_file_given_not_its_staged_copy(picky_model, weights_home, tmp_path):
    """The error named ``.../weights/.zoo-tmp-.../<name>.safetensors``, a copy deleted before it was printed."""
    given = hub.save_weights(nn.Linear(4, 2), tmp_path / "agent.weights")
    with pytest.raises(ValueError) as err:
        hub.add_weights(given, name=f"{picky_model}.v1")
    assert f"weights {given} were trained on another env" in str(err.value)
    assert f"weights={str(given)!r}" in str(err.value) and ".zoo-tmp-" not in str(err.value)
