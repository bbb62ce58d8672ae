"""Folder layouts and batch shapes read as torchvision reads them: a class named as a split, nested class folders,
a repeated class name, a DataLoader of (path, str label) samples, one score column for two classes."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

from zoo.vision.data import ImageFolderDataset, find_split, load_image_folders, scored_folder


def _png(path: Path, value: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(path)
    return path


def test_a_class_named_train_in_a_flat_folder_is_a_class_as_torchvision_reads_it(tmp_path):
    """Before: CIFAR-100's class 'train' was taken for a training split: zoo.evaluate refused the folder ("has a
    training split but no split to score on") and zoo.train read DIR/train as a folder of classes."""
    for k, name in enumerate(("bus", "car", "train")):
        _png(tmp_path / name / "0.png", 80 * k)
    train, val = load_image_folders(tmp_path)
    assert train.classes == torchvision.datasets.ImageFolder(tmp_path).classes == ["bus", "car", "train"]
    assert val is None and len(train) == 3
    assert scored_folder(tmp_path, None, ["bus", "car", "train"]).classes == ["bus", "car", "train"]
    assert find_split(tmp_path, "val") is None and find_split(tmp_path, "train") is None
    # a train/ holding class folders is a split, whatever is beside it (Kaggle's unlabelled test/*.png too)
    split = tmp_path / "splits"
    _png(split / "train" / "ant" / "0.png")
    _png(split / "val" / "ant" / "0.png")
    assert find_split(split, "train") == split / "train" and find_split(split, "val") == split / "val"
    kaggle = tmp_path / "kaggle"
    _png(kaggle / "train" / "ant" / "0.png")
    _png(kaggle / "test" / "0.png")
    assert find_split(kaggle, "train") == kaggle / "train"


def test_nested_class_folders_give_torchvisions_sample_order(tmp_path):
    """Before: whole paths were sorted, so a/sub/a.jpg came before a/sub.x.jpg and a/z.jpg: ds[i] was another
    file than torchvision's ImageFolder(root)[i]."""
    for rel in ("a/B.png", "a/z.png", "a/sub.x.png", "a/sub/a.png", "a/Zed/x.png", "a-b/0.png", "b/1.png"):
        _png(tmp_path / rel)
    theirs = torchvision.datasets.ImageFolder(tmp_path).samples
    assert ImageFolderDataset(tmp_path).samples == theirs


def test_a_class_named_twice_is_refused_naming_it(tmp_path):
    """Before: classes=["bus", "bus", "car"] read bus/ twice (its images twice, under index 1) and left index 0
    with no image."""
    for name in ("bus", "car"):
        _png(tmp_path / name / "0.png")
    with pytest.raises(ValueError, match=r"class name\(s\) \['bus'\] come more than once in classes"):
        ImageFolderDataset(tmp_path, classes=["bus", "bus", "car"])
    nfc, nfd = unicodedata.normalize("NFC", "été"), unicodedata.normalize("NFD", "été")
    _png(tmp_path / nfc / "0.png")
    with pytest.raises(ValueError, match="more than once"):
        ImageFolderDataset(tmp_path, classes=[nfc, nfd, "bus", "car"])
    _png(tmp_path / nfd / "0.png")  # both spellings on disk: two classes, as before
    assert len(ImageFolderDataset(tmp_path, classes=[nfc, nfd, "bus", "car"])) == 4


def test_predict_reads_a_default_collated_batch_of_paths_and_str_labels_as_inputs_and_labels(tmp_path):
    """Before: default_collate's [(p0, p1), (l0, l1)] was read as two samples: rows for p0 and the label l0
    (taken for a file), and p1 left out; 4 rows for 3 images."""
    from torch.utils.data import DataLoader

    import zoo

    samples = [(str(_png(tmp_path / f"{i}.png", 60 * i)), name) for i, name in enumerate(("bus", "car", "train"))]
    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    by_path = [r["prob"] for r in zoo.predict(model, [p for p, _ in samples], amp=None)]
    rows = zoo.predict(model, DataLoader(samples, batch_size=2), amp=None)
    assert [r["input"] for r in rows] == ["batch[0][0]", "batch[0][1]", "batch[1][0]"]
    assert [r["prob"] for r in rows] == pytest.approx(by_path)
    kept = zoo.predict(model, DataLoader(samples, batch_size=2, collate_fn=lambda b: b), amp=None)  # samples
    assert [r["prob"] for r in kept] == pytest.approx(by_path)
    pairs = [(p, p) for p, _ in samples]  # (image, mask file) pairs: [inputs, labels] or two samples, either
    with pytest.raises(ValueError, match="cannot tell whether this DataLoader batch"):
        zoo.predict(model, DataLoader(pairs, batch_size=2, collate_fn=lambda b: [list(c) for c in zip(*b)]))


def test_classifier_report_refuses_one_score_column_for_two_classes():
    """Before: (N, 1) scores with num_classes=2 took the argmax of one column: class 0 for every sample."""
    from zoo.vision.evaluate import classifier_report

    y = torch.tensor([1, 0, 1])
    with pytest.raises(ValueError, match=r"shape \(3, 1\) for a 2-class model: expected \(N, 2\) .*\(p > 0\.5\)"):
        classifier_report(torch.tensor([[0.9], [0.2], [0.7]]), y, 2)
    assert classifier_report(torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), y, 2)["accuracy"] == 1.0
