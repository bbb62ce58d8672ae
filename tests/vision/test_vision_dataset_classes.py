"""A torchvision data set with a transform of its own yields tensors and still names its classes: zoo.finetune and
zoo.train size and name the head from them, as they do for the same data set without a transform."""

from __future__ import annotations

import warnings

import pytest
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision.transforms import v2 as T

import zoo

# the user's own preprocessing: the data set yields (3, 32, 32) float tensors, not PIL images
_TENSORS = T.Compose([T.ToImage(), T.ToDtype(torch.float32, scale=True), T.Resize(32), T.CenterCrop(32)])


@pytest.mark.parametrize("loader", [False, True], ids=["dataset", "dataloader"])
def test_finetune_names_the_head_after_an_image_folder_with_a_transform(tmp_path, pil_folder, loader):
    """The head kept the weights' 10 outputs and names, with a warning that the data names no classes, and
    predict labelled ants 'airplane'; with num_classes=2 the outputs were named '0' and '1'."""
    data = torchvision.datasets.ImageFolder(pil_folder(tmp_path / "train"), transform=_TENSORS)
    given = DataLoader(data, batch_size=4) if loader else data
    model = zoo.build("resnet18", weights="cifar10")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "the data names no classes"
        result = zoo.finetune(model, given, strategy="head", epochs=1, batch_size=4, progress=False)
    assert result.model.fc.out_features == 2
    assert result.model.pretrained_cfg["classes"] == ["ant", "bee"]
    rows = zoo.predict(result.model, tmp_path / "train" / "bee", amp=None)
    assert {r["label"] for r in rows} <= {"ant", "bee"}
    model = zoo.build("resnet18", weights="cifar10")
    zoo.finetune(model, data, num_classes=2, strategy="head", epochs=1, batch_size=4, progress=False)
    assert model.pretrained_cfg["classes"] == ["ant", "bee"]
    with pytest.raises(ValueError, match="the data set has 2 classes but num_classes=3"):
        zoo.finetune(zoo.build("resnet18", weights="cifar10"), data, num_classes=3, epochs=1, progress=False)


def test_train_names_the_outputs_after_an_image_folder_with_a_transform(tmp_path, pil_folder):
    data = torchvision.datasets.ImageFolder(pil_folder(tmp_path / "train"), transform=_TENSORS)
    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    zoo.train(model, DataLoader(data, batch_size=4), epochs=1, progress=False)
    assert model.pretrained_cfg["classes"] == ["ant", "bee"]
    path = zoo.save(model, tmp_path / "m.safetensors")
    assert zoo.build("resnet18", weights=path).pretrained_cfg["classes"] == ["ant", "bee"]
    # a head of another size than the data set's classes: said as a folder of them is, not trained unnamed
    with pytest.raises(ValueError, match="ImageFolder has 2 classes but the network has 10 outputs"):
        zoo.train(zoo.build("resnet18", stem="cifar", num_classes=10), data, epochs=1, progress=False)


@pytest.mark.parametrize("form", ["uint8 NHWC", "float NHWC", "val uint8 NCHW"])
def test_finetune_refuses_image_arrays_as_train_does_naming_the_layout(form):
    """(X, y) images of NumPy's layout failed inside the first conv ("expected input[8, 32, 32, 3] to have 3
    channels, but got 32 channels instead"); zoo.train said what came and how to fix it, and so does finetune."""
    x = torch.randint(0, 256, (8, 32, 32, 3), dtype=torch.uint8)
    y = torch.arange(8) % 2
    good = (torch.randn(8, 3, 32, 32), y)
    data = {"uint8 NHWC": (x, y), "float NHWC": (x.float() / 255, y),
            "val uint8 NCHW": (good, (x.permute(0, 3, 1, 2), y))}[form]
    model = zoo.build("resnet18", weights="cifar10")
    with pytest.raises(ValueError, match=r"must be a preprocessed float batch \(N, C, H, W\), got torch"):
        zoo.finetune(model, data, num_classes=2, epochs=1, progress=False)
    assert model.fc.out_features == 10  # refused before the surgery: the network is as it was


def test_evaluate_warns_that_a_data_set_of_other_classes_is_scored_by_index(tmp_path, pil_folder):
    """An ImageFolder of the bees alone, with a transform of its own, labels them 0: each was scored as 'ant', at
    accuracy 0, without a word (the same data set without a transform is refused, a folder matched by name)."""
    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    model.pretrained_cfg = {**model.pretrained_cfg, "classes": ["ant", "bee"]}
    bees = pil_folder(tmp_path / "bees", classes=("bee",))
    data = torchvision.datasets.ImageFolder(bees, transform=_TENSORS)
    with pytest.warns(UserWarning, match=r"classes \['bee'\] are not the network's \['ant', 'bee'\]: its labels are "
                                         r"scored by index \(label i as output i, 'bee' as 'ant'\)"):
        zoo.evaluate(model, data, amp=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the network's own classes: nothing to say
        zoo.evaluate(model, torchvision.datasets.ImageFolder(pil_folder(tmp_path / "both"), transform=_TENSORS))
