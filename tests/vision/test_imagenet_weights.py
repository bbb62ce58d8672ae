"""The ImageNet weights path (``resnet18.imagenet1k-v1``) on a stand-in file.

The upstream torchvision file cannot be downloaded here, so a randomly initialised torchvision resnet18
saved the same way (``torch.save`` of its state dict, a ``.pth`` named like upstream's) is served from a
``file://`` mirror, offline, under the shipped entry's config and transforms (only its hash is the
stand-in's: the published sha256 prefix identifies the real file). This is what a user with a mirror of
the torchvision file gets, and what benchmarks/finetune_resnet18.py runs its ImageNet rows on.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import TensorDataset

import zoo

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def imagenet_standin(tmp_path, monkeypatch):
    torchvision = pytest.importorskip("torchvision")
    from zoo.hub.fetch import sha256_file
    from zoo.hub.manifest import PACKAGE_MANIFEST, read_manifest, write_manifest

    shipped = read_manifest(PACKAGE_MANIFEST)["resnet18.imagenet1k-v1"]
    assert shipped.upstream and shipped.sha256 is None and shipped.sha256_prefix
    torch.manual_seed(0)
    reference = torchvision.models.resnet18()
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    standin = mirror / shipped.filename
    torch.save(reference.state_dict(), standin)
    entry = dataclasses.replace(shipped, sha256=sha256_file(standin), sha256_prefix=None, size=standin.stat().st_size)
    workspace = tmp_path / "weights"
    workspace.mkdir()
    write_manifest({entry.name: entry}, workspace / "manifest.json")
    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(workspace))
    monkeypatch.setenv("ZOO_WEIGHTS_URL", standin.parent.as_uri())
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    return reference, shipped


def test_imagenet_weights_load_from_a_mirror_with_the_upstream_transforms(imagenet_standin):
    reference, shipped = imagenet_standin
    with pytest.warns(UserWarning, match="fc.weight"):  # the 1000-class head does not fit 2 classes: re-initialised
        model = zoo.build("resnet18", weights="imagenet1k-v1", num_classes=2)
    ref = reference.state_dict()
    for k, v in model.state_dict().items():  # every backbone tensor is the file's; the head is new
        if not k.startswith("fc."):
            assert torch.equal(v, ref[k]), k
    assert model.fc.out_features == 2 and model.config.stem == "imagenet"
    cfg = model.pretrained_cfg
    assert cfg["input_size"] == [3, 224, 224] and cfg["resize"] == 256
    assert cfg["mean"] == shipped.meta["transforms"]["mean"]
    # a new 2-way head: the backbone is the file's, the network no longer those weights (as reset_classifier says)
    assert cfg["backbone_from"] == "resnet18.imagenet1k-v1" and "weights" not in cfg
    # and it fine-tunes like any other backbone (tiny inputs: the path, not the accuracy)
    data = TensorDataset(torch.randn(8, 3, 32, 32), torch.arange(8) % 2)
    result = zoo.finetune(model, (data, data), strategy="top", epochs=1, batch_size=4, lr=1e-3, progress=False)
    assert "val_accuracy" in result.history[-1]


def test_finetune_benchmark_runs_its_imagenet_rows_when_the_file_is_there(imagenet_standin, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    sys.modules.pop("finetune_resnet18", None)
    bench = importlib.import_module("finetune_resnet18")
    ok, where = bench.imagenet_available()
    path, _ = zoo.hub.resolve("imagenet1k-v1", model="resnet18", local_files_only=True)
    assert ok and where == f"resnet18.imagenet1k-v1 from {path}" and path.parent.parent == zoo.hub.cache_root()
    model = bench.build("imagenet1k-v1", None, seed=0)
    assert model.fc.out_features == 2 and model.pretrained_cfg["input_size"] == [3, 224, 224]


def test_finetune_benchmark_says_why_the_imagenet_rows_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ZOO_WEIGHTS_URL", raising=False)
    monkeypatch.delenv("ZOO_WEIGHTS_DIR", raising=False)
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    sys.modules.pop("finetune_resnet18", None)
    bench = importlib.import_module("finetune_resnet18")
    ok, why = bench.imagenet_available()
    assert not ok and "zoo pull resnet18.imagenet1k-v1" in why and "ZOO_WEIGHTS_URL" in why


def test_torchvisions_own_weights_name_their_outputs_with_its_categories(imagenet_standin):
    """resnet18.imagenet1k-v1 predicted '480' where torchvision's users read weights.meta['categories']: the
    manifest entry names its torchvision source, whose categories name the 1000 outputs."""
    from torchvision.models import ResNet18_Weights

    model = zoo.build("resnet18", weights="imagenet1k-v1")
    assert model.pretrained_cfg["classes"] == ResNet18_Weights.IMAGENET1K_V1.meta["categories"]
    top = zoo.predict(model, torch.rand(1, 3, 224, 224))[0]["label"]
    assert top in ResNet18_Weights.IMAGENET1K_V1.meta["categories"]


def test_manifest_entries_take_classes_from_meta_or_their_torchvision_source():
    from torchvision.models.video import R2Plus1D_18_Weights

    from zoo.hub.manifest import PACKAGE_MANIFEST, read_manifest

    entries = read_manifest(PACKAGE_MANIFEST)
    assert entries["r2plus1d_18.kinetics400-v1"].classes == R2Plus1D_18_Weights.KINETICS400_V1.meta["categories"]
    assert entries["resnet18.cifar10"].classes == entries["resnet18.cifar10"].meta["classes"]
    assert entries["td3.pendulum-v1"].classes is None
