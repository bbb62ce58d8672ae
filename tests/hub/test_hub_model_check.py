"""A weights file made for one model is refused by another with a message naming the model it holds, whether
it is given as a copy of a published file (``zoo.name`` metadata) or as its path in the cache."""

from __future__ import annotations

import shutil

import pytest
import torch

import zoo
from zoo import hub


def _publish(tiny_model: str):
    torch.manual_seed(0)
    return hub.add_weights(zoo.build(tiny_model), name=f"{tiny_model}.v1", config={"num_classes": 3},
                           meta={"dataset": "synthetic"})


def test_a_copy_of_a_published_file_names_the_model_it_holds(tiny_model, weights_home, tmp_path):
    entry = _publish(tiny_model)
    copy = shutil.copy(weights_home / entry.url, tmp_path / "renamed.safetensors")
    # a copy is its entry, found by its bytes (hub.store._by_content): refused as the entry itself is
    with pytest.raises(ValueError, match=rf"weights '{entry.name}' are for model '{tiny_model}', not 'resnet18': "
                                         rf"build it with zoo.build\('{tiny_model}'"):
        zoo.build("resnet18", weights=copy)
    assert zoo.build(tiny_model, weights=copy).head.out_features == 3


def test_a_cached_file_given_by_path_is_checked_against_its_entry(tiny_model, weights_home):
    entry = _publish(tiny_model)
    path = zoo.pull(entry.name, progress=False)
    with pytest.raises(ValueError, match=rf"'{entry.name}' are for model '{tiny_model}', not 'resnet18'"):
        zoo.build("resnet18", weights=str(path))
    assert hub.resolve(str(path), model=tiny_model) == (path, entry)
    with open(path, "r+b") as fh:  # matched to its entry, so it is verified like a pull
        fh.seek(entry.size - 3)
        last = fh.read(1)
        fh.seek(entry.size - 3)
        fh.write(bytes([last[0] ^ 0xFF]))
    with pytest.raises(hub.CorruptCacheError):
        zoo.build(tiny_model, weights=str(path))


def test_publishing_under_a_model_that_is_not_registered_names_the_one_the_file_holds(weights_home, tmp_path):
    """`zoo weights add FILE --name nomodel.x` said to build the file with zoo.build: the fix is the name."""
    saved = zoo.save(zoo.build("td3", net_arch=(8, 8)), tmp_path / "agent.safetensors")
    with pytest.raises(hub.ManifestError, match=r"no registered model 'nomodel' to publish weights of \(see `zoo "
                                                r"list`\); this file holds a 'td3' model: name its weights td3\.TAG"):
        hub.add_weights(saved, name="nomodel.x")
    assert not list(weights_home.glob("nomodel*"))
