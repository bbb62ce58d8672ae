"""resnet18 on an image folder resumes only on the recipe it was trained with: the preprocessing,
augmentation, the folder itself and the architecture config; ``strict`` may change."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from PIL import Image

import zoo
from zoo.engine import ResumeError


def _folder(root, seed):
    rng = np.random.default_rng(seed)
    for split, n in (("train", 3), ("val", 2)):
        for c in ("a", "b"):
            (root / split / c).mkdir(parents=True)
            for i in range(n):
                Image.fromarray((rng.random((12, 12, 3)) * 255).astype(np.uint8)).save(root / split / c / f"{i}.png")
    return root


def _train(data, folder, epochs, arch=None, **options):
    torch.manual_seed(0)
    model = zoo.build("resnet18", **{"stem": "cifar", "num_classes": 2, **(arch or {})})
    options = {"image_size": 8, "batch_size": 4, "amp": None, "progress": False, **options}
    return zoo.train(model, str(data), epochs=epochs, checkpoint_dir=folder, **options)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("resnet_resume")
    _folder(base / "a", 0)
    _folder(base / "b", 7)  # as many images of the same size, other pixels
    _train(base / "a", base / "run", 1)
    return base


@pytest.mark.parametrize(("change", "said"), [
    ({"image_size": 12}, "data.input_size: [3, 8, 8] in epoch-0001.pt, [3, 12, 12] now"),
    ({"augment": False}, "data.augment: True in epoch-0001.pt, False now"),
    ({"data": "b"}, "data.train_images: '6 files, "),
    ({"arch": {"zero_init_residual": True}}, "model.zero_init_residual: False in epoch-0001.pt, True now"),
])
def test_a_changed_recipe_is_refused(first_run, tmp_path, change, said):
    change = dict(change)
    data = first_run / change.pop("data", "a")
    run = shutil.copytree(first_run / "run", tmp_path / "run")
    with pytest.raises(ResumeError) as err:
        _train(data, run, 2, resume=True, **change)
    assert said in str(err.value)


def test_the_same_recipe_resumes_and_strict_may_change(first_run, tmp_path):
    run = shutil.copytree(first_run / "run", tmp_path / "run")
    result = _train(first_run / "a", run, 2, resume=True, strict=True)
    assert result.resumed["changed"] == {"epochs": (1, 2), "data.strict": (False, True)}


def _finetune(data, folder, epochs, **options):
    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    options = {"strategy": "full", "image_size": 8, "batch_size": 4, "amp": None, "progress": False, "seed": 0,
               **options}
    return zoo.finetune(model, str(data), epochs=epochs, checkpoint_dir=folder, **options)



def test_a_finetune_resumes_only_on_its_recipe(first_run, tmp_path):
    _finetune(first_run / "a", tmp_path / "run", 1)
    for change, said in [({"strategy": "gradual"}, "data.strategy: 'full' in epoch-0001.pt, 'gradual' now"),
                         ({"backbone_lr_mult": 0.5}, "data.backbone_lr_mult: 0.1 in epoch-0001.pt, 0.5 now"),
                         ({"data": "b"}, "data.train_images: '6 files, ")]:
        with pytest.raises(ResumeError) as err:  # refused before anything is loaded or trained
            _finetune(first_run / change.pop("data", "a"), tmp_path / "run", 2, resume=True, **change)
        assert said in str(err.value)
    assert _finetune(first_run / "a", tmp_path / "run", 2, resume=True).resumed["changed"] == {"epochs": (1, 2)}


def test_a_folder_with_validation_data_of_the_users_own_is_recorded_by_its_kind(first_run, tmp_path):
    val = torch.utils.data.TensorDataset(torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 0, 1]))
    result = _finetune(first_run / "a", tmp_path / "run", 1, val_data=val)
    recorded = torch.load(tmp_path / "run" / "epoch-0001.pt", weights_only=True)["config"]
    assert recorded["data.val_images"] == "TensorDataset of 4 items" and "val_loss" in result.history[-1]


def test_a_training_checkpoint_builds_the_network_it_holds(tmp_path):
    """zoo.build('resnet18', weights='run/best.pt') failed with a shape mismatch (conv1 of the cifar stem)
    and, given stem=, dropped the trained head and normalised with ImageNet's statistics: the config and
    preprocessing the checkpoint records were not read."""
    data = _folder(tmp_path / "data", 0)
    result = _train(data, tmp_path / "run", 1, arch={"num_classes": 2})
    built = zoo.build("resnet18", weights=str(tmp_path / "run" / "best.pt"))
    assert built.fc.out_features == 2 and built.conv1.kernel_size == (3, 3)  # the cifar stem
    assert built.pretrained_cfg["input_size"] == [3, 8, 8]
    assert built.pretrained_cfg["mean"] == result.model.pretrained_cfg["mean"]
    images = str(data / "val")
    assert [r["prob"] for r in zoo.predict(built, images, amp=None)] == pytest.approx(
        [r["prob"] for r in zoo.predict(result.model, images, amp=None)])
