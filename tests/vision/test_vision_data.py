"""Messy image folders: non-images, spaces, grayscale/CMYK/RGBA/palette, corrupt files, empty classes."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from zoo.vision.data import ImageFolderDataset, load_image_folders, to_rgb
from zoo.vision.predict import predict


def _img(mode: str, color, size=(12, 10)) -> Image.Image:
    return Image.new(mode, size, color)


def _messy(root):
    ants, bees = root / "train" / "ants", root / "train" / "bees"
    ants.mkdir(parents=True)
    bees.mkdir(parents=True)
    _img("RGB", (200, 10, 10)).save(ants / "ant photos.jpg")  # a space, as in hymenoptera
    _img("L", 128).save(ants / "grey.png")
    _img("CMYK", (0, 255, 255, 0)).save(ants / "cmyk.jpg")
    _img("RGBA", (0, 0, 0, 0)).save(bees / "transparent.png")  # fully transparent: must become white
    _img("P", 3).save(bees / "placeholder.gif")  # not an ImageFolder extension: ignored, like imageNotFound.gif
    (bees / "notes.txt").write_text("not an image")
    (bees / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    _img("RGB", (10, 10, 200)).save(bees / "Bee Ünïcode 1.JPG")
    val = root / "val"
    for cls in ("ants", "bees"):
        (val / cls).mkdir(parents=True)
        _img("RGB", (100, 100, 100)).save(val / cls / "v.png")
    return root


def test_messy_folder_is_loaded_as_rgb_with_skips_counted(tmp_path):
    root = _messy(tmp_path)
    with pytest.warns(UserWarning, match=r"skipped 1 corrupt image.*broken\.jpg"):
        train, val = load_image_folders(root)
    assert train.classes == ["ants", "bees"] and val.classes == train.classes
    names = sorted(p.split("/")[-1] for p, _ in train.samples)
    assert names == ["Bee Ünïcode 1.JPG", "ant photos.jpg", "cmyk.jpg", "grey.png", "transparent.png"]
    assert len(train.skipped["non_image"]) == 2 and len(train.skipped["corrupt"]) == 1
    for i in range(len(train)):
        img, _ = train[i]
        assert img.mode == "RGB"
    by_name = {p.split("/")[-1]: i for i, (p, _) in enumerate(train.samples)}
    assert train[by_name["transparent.png"]][0].getpixel((0, 0)) == (255, 255, 255)
    assert train[by_name["grey.png"]][0].getpixel((0, 0)) == (128, 128, 128)
    c, m, y = np.asarray(train[by_name["cmyk.jpg"]][0])[0, 0]
    assert c > 200 and m < 60 and y < 60  # CMYK (0, 255, 255, 0) is red
    assert train.targets == [t for _, t in train.samples] and len(val) == 2


def test_strict_mode_raises_on_the_corrupt_file(tmp_path):
    root = _messy(tmp_path)
    with pytest.raises(ValueError, match=r"corrupt image .*broken\.jpg"):
        load_image_folders(root, strict=True)


def test_empty_class_folder_is_a_clear_error_before_training(tmp_path):
    root = _messy(tmp_path)
    (root / "train" / "wasps").mkdir()
    (root / "train" / "wasps" / "readme.txt").write_text("todo")
    with pytest.raises(ValueError, match=r"no usable images: \['wasps'\]"):
        ImageFolderDataset(root / "train")


def test_missing_folder_and_val_without_a_class(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        ImageFolderDataset(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no class sub-folders"):
        ImageFolderDataset(tmp_path / "empty")
    root = _messy(tmp_path / "d")
    with pytest.warns(UserWarning, match=r"1 of the 3 classes have no folder here \(\['wasps'\]\): the images of the "
                                         r"other 2 are scored"):
        some = ImageFolderDataset(root / "val", classes=["wasps", "ants", "bees"])
    assert some.classes == ["wasps", "ants", "bees"] and some.absent_classes == ["wasps"]
    assert sorted(set(some.targets)) == [1, 2]  # the indices of the classes given, not of the folders found
    with pytest.raises(ValueError, match=r"none of the 2 classes has a folder here .*found: \['ants', 'bees'\]"):
        ImageFolderDataset(root / "val", classes=["cat", "dog"], unknown_classes="skip")


def test_a_four_class_model_scores_a_folder_of_two_of_its_classes(tmp_path):
    import zoo

    root = _messy(tmp_path)
    model = zoo.build("resnet18", stem="cifar", num_classes=4)
    model.pretrained_cfg["classes"] = ["ants", "bees", "cats", "dogs"]
    with pytest.warns(UserWarning, match="2 of the 4 classes have no folder here"):
        scores = zoo.evaluate(model, root / "train")  # was: "class folder(s) missing: ['cats', 'dogs']"
    assert 0.0 <= scores["accuracy"] <= 1.0


def test_to_rgb_palette_with_transparency():
    img = Image.new("P", (4, 4), 0)
    img.putpalette([10, 20, 30] + [0] * 765)
    img.info["transparency"] = 0
    assert to_rgb(img).getpixel((0, 0)) == (255, 255, 255)
    assert to_rgb(_img("LA", (50, 255))).getpixel((0, 0)) == (50, 50, 50)


def test_predict_on_a_messy_folder_reports_the_bad_file(tmp_path):
    import zoo

    root = _messy(tmp_path)
    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    model.pretrained_cfg["classes"] = ["ants", "bees"]
    with pytest.warns(UserWarning, match="cannot decode"):
        out = predict(model, root / "train", topk=2)
    assert len(out) == 6  # 5 images + the corrupt one, reported, non-images ignored
    bad = [r for r in out if "error" in r]
    assert len(bad) == 1 and bad[0]["input"].endswith("broken.jpg")
    good = [r for r in out if "error" not in r]
    assert all(r["label"] in ("ants", "bees") and len(r["topk"]) == 2 for r in good)
    assert all(abs(sum(p for _, p in r["topk"]) - 1) < 1e-4 for r in good)
    with pytest.raises(FileNotFoundError):
        predict(model, tmp_path / "nothing.jpg")


def test_real_hymenoptera_counts(shared_data):
    root = shared_data / "hymenoptera_data"
    if not root.is_dir():
        pytest.skip(f"{root} not found")
    # verify=False: decoding all 397 photos (up to 2592 px) would take seconds; counts need no decoding
    train, val = ImageFolderDataset(root / "train", verify=False), ImageFolderDataset(root / "val", verify=False)
    assert (len(train), len(val)) == (244, 153)
    assert [p.split("/")[-1] for p in train.skipped["non_image"]] == ["imageNotFound.gif"]
    assert any(p.endswith("ant photos.jpg") for p, _ in train.samples)


def test_tensor_pipeline_is_reproducible_and_centre_crops(tmp_path):
    from zoo.vision.tensor_data import load_or_decode, tensor_loader

    root = _messy(tmp_path)
    pass_root = root / "val"
    images, targets, classes = load_or_decode(pass_root, tmp_path / "cache.npz", size=8, progress=False)
    assert images.shape == (2, 3, 8, 8) and images.dtype == torch.uint8 and classes == ["ants", "bees"]
    again = load_or_decode(pass_root, tmp_path / "cache.npz", size=8, progress=False)
    assert torch.equal(again[0], images)
    a = [x for x, _ in tensor_loader(images, targets, batch_size=2, train=True, pad=2, mean=(0, 0, 0), std=(1, 1, 1))]
    b = [x for x, _ in tensor_loader(images, targets, batch_size=2, train=True, pad=2, mean=(0, 0, 0), std=(1, 1, 1))]
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("damage", ["truncated", "empty", "not_npz", "no_key"])
def test_an_unreadable_tensor_cache_is_rebuilt_with_a_warning(tmp_path, damage):
    from zoo.vision.tensor_data import load_or_decode

    root = _messy(tmp_path) / "val"
    cache = tmp_path / "cache.npz"
    images, _, _ = load_or_decode(root, cache, size=8, progress=False)
    good = cache.read_bytes()
    if damage == "no_key":  # a readable .npz written by something else
        np.savez(cache, images=np.zeros(1))
    else:
        cache.write_bytes({"truncated": good[: len(good) // 2], "empty": b"", "not_npz": b"hello" * 20}[damage])
    with pytest.warns(UserWarning, match=f"image cache {re.escape(str(cache))} cannot be read"):
        again, _, classes = load_or_decode(root, cache, size=8, progress=False)
    assert torch.equal(again, images) and classes == ["ants", "bees"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rewritten whole: read back without a word
        assert torch.equal(load_or_decode(root, cache, size=8, progress=False)[0], images)


def test_a_torchvision_data_set_of_pil_images_trains_with_the_networks_transforms(tmp_path, pil_folder):
    """torchvision.datasets.ImageFolder(root) (or CIFAR10(root)) made without a transform yields PIL images:
    zoo.train failed inside default_collate ("found <class 'PIL.Image.Image'>"). It now gets the network's
    transforms, and the data set's classes name the outputs."""
    import torchvision

    import zoo

    folder = pil_folder(tmp_path / "train")
    data = torchvision.datasets.ImageFolder(folder)
    model = zoo.build("resnet18", num_classes=2, stem="cifar")
    result = zoo.train(model, data, epochs=1, batch_size=4, val_data=data, progress=False)
    assert result.history[-1]["val_accuracy"] >= 0.0
    assert model.pretrained_cfg["classes"] == ["ant", "bee"]
    assert set(zoo.evaluate(model, data)) >= {"loss", "accuracy"}
    assert zoo.predict(model, folder / "bee" / "1.png")[0]["label"] in ("ant", "bee")
    with pytest.raises(ValueError, match=r"ImageFolder has 2 classes but the network has 5 outputs"):
        zoo.train(zoo.build("resnet18", num_classes=5, stem="cifar"), data, epochs=1)


class _HuggingFaceImages:
    """What `datasets.load_dataset("cifar10")["train"]` gives, duck-typed: no torch Dataset; samples are dicts
    of a PIL image and a label; `features["label"]` is a ClassLabel with `names`."""

    class _ClassLabel:
        names = ("ant", "bee")

    def __init__(self, folder) -> None:
        self.files = sorted(folder.rglob("*.png"))
        self.features = {"img": None, "label": self._ClassLabel()}

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> dict:
        return {"img": Image.open(self.files[i]), "label": int(self.files[i].parent.name == "bee")}


def test_a_hugging_face_image_data_set_trains_evaluates_and_fine_tunes(tmp_path, pil_folder):
    """Its dict samples of PIL images failed in default_collate ("found <class 'PIL.Image.Image'>"), and a
    DatasetDict's "validation" split was not read."""
    import zoo

    data = _HuggingFaceImages(pil_folder(tmp_path / "train"))
    model = zoo.build("resnet18", num_classes=2, stem="cifar")
    result = zoo.train(model, {"train": data, "validation": data, "test": data}, epochs=1, batch_size=4,
                       progress=False)
    assert "val_accuracy" in result.history[-1] and result.history[-1]["step"] == 2
    assert model.pretrained_cfg["classes"] == ["ant", "bee"]  # the ClassLabel's names
    assert set(zoo.evaluate(model, data)) >= {"loss", "accuracy"}
    tuned = zoo.finetune(model, (data, data), strategy="head", epochs=1, batch_size=4, progress=False)
    assert "val_accuracy" in tuned.history[-1]


def test_images_in_lists_train_evaluate_and_fine_tune_alike(tmp_path, pil_folder):
    """finetune refused a list of (PIL image, label) samples, or of dicts, that train and evaluate took ("data
    as a sequence must be (X, y) tensors or (train, val), got 8 items"); ([images], [labels]) failed in all
    three inside default_collate."""
    import zoo

    files = sorted(pil_folder(tmp_path / "train").rglob("*.png"))
    samples = [(Image.open(f), int(f.parent.name == "bee")) for f in files]
    forms = {"samples": samples, "dicts": [{"img": im, "label": y} for im, y in samples],
             "columns": ([im for im, _ in samples], [y for _, y in samples])}
    model = zoo.build("resnet18", num_classes=2, stem="cifar")
    kw = {"epochs": 1, "batch_size": 4, "progress": False, "amp": None}
    scores = {name: zoo.evaluate(model, data, amp=None) for name, data in forms.items()}
    assert scores["samples"] == scores["dicts"] == scores["columns"]
    for name, data in forms.items():
        assert "train_loss" in zoo.train(model, data, **kw).history[-1], name
        assert "train_loss" in zoo.finetune(model, data, strategy="head", **kw).history[-1], name
    assert zoo.evaluate(model, samples[:2], amp=None)["accuracy"] >= 0  # two samples stay samples


def test_a_validation_folder_given_apart_is_read_as_a_folder(tmp_path, pil_folder):
    """zoo.train(net, "d/train", val_data="d/val"), (train_dir, val_dir) and {"train": dir, "val": dir} failed
    at the first validation ("a batch must be (inputs, targets) ...", conv2d got str): the folder went to fit
    as a str. finetune the same."""
    import zoo

    train, val = pil_folder(tmp_path / "train"), pil_folder(tmp_path / "val")
    net = zoo.build("resnet18", num_classes=2, stem="cifar")
    kw = {"epochs": 1, "batch_size": 4, "image_size": 8, "progress": False, "amp": None}
    for data, extra in ((train, {"val_data": val}), ((train, val), {}), ({"train": str(train), "val": str(val)}, {})):
        assert "val_accuracy" in zoo.train(net, data, **kw, **extra).history[-1]
        assert "val_accuracy" in zoo.finetune(net, data, **kw, **extra).history[-1]
    for call in (zoo.train, zoo.finetune):
        with pytest.raises(FileNotFoundError, match="val_data folder not found"):
            call(net, train, val_data=tmp_path / "missing", **kw)
    with pytest.raises(ValueError, match="validation data given twice"):
        zoo.finetune(net, (train, val), val_data=val, **kw)


def test_training_on_one_class_folder_says_a_classifier_needs_two(tmp_path, pil_folder):
    """It trained a one-output network, whose cross-entropy is always 0, and said so in terms of regression."""
    import zoo

    pil_folder(tmp_path / "data" / "train", classes=("ant",))
    with pytest.raises(ValueError, match=r"one class folder \('ant'\); a classifier learns to tell classes apart"):
        zoo.train("resnet18", tmp_path / "data", model_config={"stem": "cifar"}, epochs=1, progress=False)


def test_images_in_hidden_folders_are_no_samples_as_predict_skips_them(tmp_path):
    """Only hidden files were left out: .ipynb_checkpoints/ copies inside a class folder were trained on and
    scored (8 samples here), while zoo.predict on the same folder left them out (6 rows)."""
    for cls in ("cat", "dog"):
        (tmp_path / cls / ".ipynb_checkpoints").mkdir(parents=True)
        for i in range(3):
            _img("RGB", (10 * i, 0, 0)).save(tmp_path / cls / f"{i}.png")
        _img("RGB", (0, 0, 0)).save(tmp_path / cls / ".ipynb_checkpoints" / "0-checkpoint.png")
        (tmp_path / cls / "._0.png").write_bytes(b"\x00\x05\x16\x07 macOS AppleDouble")
    ds = ImageFolderDataset(tmp_path)
    assert len(ds) == 6 and not ds.skipped["corrupt"]
    assert not any(".ipynb_checkpoints" in path for path, _ in ds.samples)


def test_class_folders_match_across_unicode_normalisations(tmp_path):
    """train/ unzipped on Linux names a class in NFC, val/ unzipped on macOS in NFD: the same names compared
    unequal, and finetune failed with "none of the 2 classes has a folder here" over two lists that read alike."""
    import unicodedata

    names = ("chat_été", "chien_ü")
    for split, form in (("train", "NFC"), ("val", "NFD")):
        for k, name in enumerate(names):
            folder = tmp_path / split / unicodedata.normalize(form, name)
            folder.mkdir(parents=True)
            _img("RGB", (100 * k, 0, 0)).save(folder / "a.png")
    train, val = load_image_folders(tmp_path)
    assert val is not None and val.classes == train.classes == [unicodedata.normalize("NFC", n) for n in names]
    assert len(val) == 2 and [t for _, t in val.samples] == [0, 1] and not val.absent_classes


def test_predict_reports_many_unreadable_files_in_one_warning(tmp_path):
    """One warning per broken file, even under Python's default filter (1000 files: 1000 warnings), where
    training on the folder says it in one line."""
    import zoo
    from zoo.inputs import UnreadableInputWarning

    for i in range(7):
        (tmp_path / f"b{i}.jpg").write_bytes(b"junk")
    _img("RGB", (1, 2, 3)).save(tmp_path / "ok.png")
    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = predict(model, tmp_path)
    assert len(out) == 8 and sum("error" in r for r in out) == 7
    mine = [str(w.message) for w in seen if issubclass(w.category, UnreadableInputWarning)]
    assert len(mine) == 1 and "cannot decode 7 of the 8 images" in mine[0], mine
    assert "b0.jpg" in mine[0] and "b4.jpg" in mine[0] and "b5.jpg" not in mine[0]
