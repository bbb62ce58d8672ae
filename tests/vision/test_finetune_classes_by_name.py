"""zoo.finetune maps labels and outputs to the classes by name, not by position: a validation data set naming its
classes in its own numbering, and a kept head whose outputs name the data's classes in another order."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import zoo
from zoo.engine import Callback

FIT = {"epochs": 1, "batch_size": 6, "lr": 0.05, "progress": False, "optimizer": "sgd", "amp": None}
# the networks here are built without weights: their frozen backbones are random, as these tests mean
pytestmark = pytest.mark.filterwarnings("ignore:finetune. the resnet18 holds no pretrained weights")


class _Named(Dataset):
    """Tensor images labelled ``labels``, naming ``classes`` as torchvision's data sets do (``ImageFolder`` of a split
    lacking a class numbers the others from 0)."""

    def __init__(self, classes, labels, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.classes, self.labels = list(classes), list(labels)
        self.x = torch.randn(len(labels), 3, 8, 8, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.x[i], self.labels[i]


class _NamedDicts(_Named):
    """The same samples as dicts (Hugging Face's form): ``{"image": x, "label": y}``."""

    def __getitem__(self, i):
        return {"image": self.x[i], "label": self.labels[i]}


def _model(num_classes, classes=None):
    torch.manual_seed(0)
    model = zoo.build("resnet18", stem="cifar", num_classes=num_classes)
    if classes is not None:
        model.pretrained_cfg = {**model.pretrained_cfg, "classes": list(classes)}
    return model


@pytest.mark.parametrize("cache_features", [False, True])
def test_a_validation_data_set_numbering_its_classes_otherwise_is_scored_by_name(cache_features):
    """Before: an ImageFolder of a val split without 'ant' labels bee 0 and cat 1, and finetune scored them as the
    network's outputs 0 and 1, 'ant' and 'bee' (val_loss and val_accuracy of other labels, without a word)."""
    model = _model(3)
    train = _Named(["ant", "bee", "cat"], [0, 1, 2] * 2)
    val = _Named(["bee", "cat"], [0, 1, 0, 1], seed=1)
    result = zoo.finetune(model, train, val_data=val, strategy="head", cache_features=cache_features, **FIT)
    assert model.classes == ["ant", "bee", "cat"]
    with torch.no_grad():
        logits = model.eval()(val.x)
    by_name = torch.nn.functional.cross_entropy(logits, torch.tensor([1, 2, 1, 2])).item()
    by_position = torch.nn.functional.cross_entropy(logits, torch.tensor(val.labels)).item()
    assert abs(by_name - by_position) > 1e-3  # the test tells the two apart
    assert result.history[-1]["val_loss"] == pytest.approx(by_name, rel=1e-4)


@pytest.mark.parametrize("kind", [_Named, _NamedDicts])
def test_validation_data_in_a_pair_is_scored_by_name_too(kind):
    model = _model(3)
    val = kind(["cat", "ant", "bee"], [0, 1, 2, 0], seed=1)  # every class, in another order
    result = zoo.finetune(model, (_Named(["ant", "bee", "cat"], [0, 1, 2] * 2), val), strategy="full", **FIT)
    with torch.no_grad():
        logits = model.eval()(val.x)
    by_name = torch.nn.functional.cross_entropy(logits, torch.tensor([2, 0, 1, 2])).item()
    assert result.history[-1]["val_loss"] == pytest.approx(by_name, rel=1e-4)


@pytest.mark.parametrize("val", [_Named(["bee", "moth"], [0, 1]),
                                 DataLoader(_Named(["cat", "bee"], [0, 1]), batch_size=6)], ids=["unknown", "loader"])
def test_validation_data_that_cannot_be_scored_by_name_is_refused_and_the_model_kept(val):
    """A class the network lacks cannot be scored; a DataLoader's batches cannot be renumbered. Either is refused
    before the first epoch, with the kept head's by-name reordering undone."""
    model = _model(3, ["cat", "ant", "bee"])
    head, weight = model.fc, model.fc.weight.detach().clone()
    with pytest.raises((ValueError, TypeError), match="moth|DataLoader"):
        zoo.finetune(model, _Named(["ant", "bee", "cat"], [0, 1, 2] * 2), val_data=val, strategy="full", **FIT)
    assert model.fc is head and torch.equal(model.fc.weight, weight) and model.classes == ["cat", "ant", "bee"]


class _HeadAtStart(Callback):
    def on_train_start(self, state):
        self.weight = state.model.fc.weight.detach().clone()
        self.bias = state.model.fc.bias.detach().clone()


@pytest.mark.parametrize("old", [["bee", "ant", "cat"], ["cat", "moth", "ant"]])
def test_a_kept_head_is_put_in_the_datas_class_order_by_name(old):
    """Before: a 3-class head naming ['bee', 'ant', 'cat'] tuned on data naming ['ant', 'bee', 'cat'] was kept and
    renamed by position: its 'bee' output was called 'ant', so every bee started out (and a short run ended)
    predicted as an ant. A name the head lacks ('moth' -> 'bee') takes an output no data class names."""
    model = _model(3, old)
    weight, bias = model.fc.weight.detach().clone(), model.fc.bias.detach().clone()
    start = _HeadAtStart()
    zoo.finetune(model, _Named(["ant", "bee", "cat"], [0, 1, 2] * 2), strategy="head", cache_features=False,
                 callbacks=[start], **FIT)
    order = {"bee": [1, 0, 2], "cat": [2, 1, 0]}[old[0]]
    assert torch.equal(start.weight, weight[order]) and torch.equal(start.bias, bias[order])
    assert model.classes == ["ant", "bee", "cat"]


def test_zoo_train_on_a_folder_puts_a_kept_heads_outputs_in_its_class_order_by_name(tmp_path, pil_folder):
    """zoo.train had finetune's fault: a head naming ['bee', 'ant'] trained on ant/ and bee/ was renamed by position,
    so a model that told them apart called every bee an ant from the first step (accuracy 1.0 -> 0.0 at lr=1e-6)."""
    pil_folder(tmp_path / "data" / "train")
    model = _model(2, ["bee", "ant"])
    weight, bias = model.fc.weight.detach().clone(), model.fc.bias.detach().clone()
    start = _HeadAtStart()
    zoo.train(model, tmp_path / "data", callbacks=[start], **FIT)
    assert torch.equal(start.weight, weight[[1, 0]]) and torch.equal(start.bias, bias[[1, 0]])
    assert model.classes == ["ant", "bee"]


def test_zoo_train_on_a_data_set_naming_its_classes_puts_a_kept_heads_outputs_in_that_order():
    model = _model(3, ["bee", "ant", "cat"])
    weight = model.fc.weight.detach().clone()
    start = _HeadAtStart()
    zoo.train(model, _Named(["ant", "bee", "cat"], [0, 1, 2] * 2), callbacks=[start], **FIT)
    assert torch.equal(start.weight, weight[[1, 0, 2]]) and model.classes == ["ant", "bee", "cat"]
