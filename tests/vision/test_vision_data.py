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


def _sideways_photo(path, value: int):
    """A 12x20 photo stored as 20x12 with EXIF orientation 6 (turn 90 degrees clockwise), as phones write them:
    its left half is ``value``, its right half black once turned upright."""
    upright = np.zeros((12, 20, 3), np.uint8)
    upright[:, :10] = value
    stored = Image.fromarray(upright).transpose(Image.Transpose.ROTATE_90)  # 20x12, upright after a 270 turn
    exif = Image.Exif()
    exif[0x0112] = 6
    stored.save(path, exif=exif)


def test_a_dataset_of_photos_is_read_upright_as_the_folder_reader_and_predict_read_it(tmp_path):
    """Before: a Dataset of PIL photos (torchvision's ImageFolder(root)) was scored and trained as stored, while
    the folder reader and zoo.predict turned the same photos upright."""
    import torchvision

    from zoo.vision.data import TransformedImages

    (tmp_path / "a").mkdir()
    _sideways_photo(tmp_path / "a" / "0.jpg", 255)
    via_folder = ImageFolderDataset(tmp_path)[0][0]
    via_dataset = TransformedImages(torchvision.datasets.ImageFolder(tmp_path), lambda im: im)[0][0]
    assert via_dataset.size == via_folder.size == (20, 12)
    np.testing.assert_array_equal(np.asarray(via_dataset), np.asarray(via_folder))
    as_stored = TransformedImages(torchvision.datasets.ImageFolder(tmp_path), lambda im: im, exif_transpose=False)
    assert as_stored[0][0].size == (12, 20)


def test_a_float_image_holding_nan_is_skipped_by_the_scan_not_the_end_of_training(tmp_path):
    """Before: the scan only decoded it (NaN decodes), and training stopped mid-epoch on "holds NaN"."""
    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        Image.fromarray(np.full((8, 8, 3), 90 * (c == "b"), np.uint8)).save(tmp_path / c / "0.png")
    Image.fromarray(np.full((8, 8), np.nan, np.float32), mode="F").save(tmp_path / "a" / "scan.tif")
    with pytest.warns(UserWarning, match=r"skipped 1 corrupt image\(s\): \[.*scan\.tif"):
        ds = ImageFolderDataset(tmp_path)
    assert len(ds) == 2 and ds.skipped["corrupt"] == [str(tmp_path / "a" / "scan.tif")]
    with pytest.raises(ValueError, match=r"corrupt image .*scan\.tif"):
        ImageFolderDataset(tmp_path, strict=True)


@pytest.mark.parametrize("names", [("Train", "Test"), ("TRAIN", "VAL"), ("train", "dev")])
def test_split_folders_are_found_in_any_case_not_trained_as_classes(tmp_path, pil_folder, names):
    """Before: Kaggle's DIR/Train + DIR/Test trained a 'Test' vs 'Train' classifier, and DIR/train + DIR/dev
    trained with no validation, without a word."""
    train_name, val_name = names
    pil_folder(tmp_path / train_name)
    pil_folder(tmp_path / val_name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train, val = load_image_folders(tmp_path)
    assert train.classes == ["ant", "bee"] and val is not None and val.root == tmp_path / val_name


def test_a_folder_beside_the_splits_that_no_split_reads_is_warned_about(tmp_path, pil_folder):
    pil_folder(tmp_path / "train")
    pil_folder(tmp_path / "holdout")
    with pytest.warns(UserWarning, match=r"folder\(s\) \['holdout'\] beside the split folders are not read"):
        _, val = load_image_folders(tmp_path)
    assert val is None
    for split in ("val", "test"):  # train/ + val/ + test/: the test split kept for the end is no question
        pil_folder(tmp_path / split)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, val = load_image_folders(tmp_path)
    said = [str(w.message) for w in caught if "beside the split folders" in str(w.message)]
    assert val.root == tmp_path / "val" and len(said) == 1 and "['holdout']" in said[0]


def test_scoring_a_folder_with_a_training_split_alone_says_there_is_no_split_to_score(tmp_path, pil_folder):
    """Before: DIR/train was scored as a folder of one class 'train' ("has 1 classes ... build it with
    num_classes=1")."""
    import zoo

    pil_folder(tmp_path / "train")
    with pytest.raises(ValueError, match=r"has a training split \(train/\) but no split to score on .*pass "
                                         rf"{re.escape(str(tmp_path / 'train'))} to score the training images"):
        zoo.evaluate(zoo.build("resnet18", num_classes=2, stem="cifar"), tmp_path)


def test_images_in_a_linked_folder_inside_a_class_are_samples_as_torchvision_reads_them(tmp_path, pil_folder):
    """Before: Path.rglob does not enter linked folders: their images were left out without a word."""
    import torchvision

    root = pil_folder(tmp_path / "data")
    pil_folder(tmp_path / "elsewhere", classes=("more",))
    (root / "ant" / "linked").symlink_to(tmp_path / "elsewhere" / "more", target_is_directory=True)
    (root / "bee" / "loop").symlink_to(root / "bee", target_is_directory=True)  # a link to a folder above
    theirs = sorted(p for p, _ in torchvision.datasets.ImageFolder(root).samples if "loop" not in p)
    ours = ImageFolderDataset(root)
    assert sorted(p for p, _ in ours.samples) == theirs and len(ours) == 12


def test_the_tensor_cache_follows_the_classes_asked_for_and_the_folders_files(tmp_path):
    """Before: the cache's key was the folder and size alone: another class list got the cached targets of the
    first, and an image added to the folder was not seen."""
    from zoo.vision.tensor_data import load_or_decode

    root = _messy(tmp_path) / "val"
    cache = tmp_path / "cache.npz"
    _, targets, classes = load_or_decode(root, cache, size=8, progress=False)
    assert classes == ["ants", "bees"] and targets.tolist() == [0, 1]
    _, targets, classes = load_or_decode(root, cache, size=8, classes=["bees", "ants"], progress=False)
    assert classes == ["bees", "ants"] and sorted(targets.tolist()) == [0, 1]
    assert [t for (p, _), t in zip(ImageFolderDataset(root, classes=["bees", "ants"]).samples, targets.tolist())
            if "/ants/" in p] == [1]
    _img("RGB", (9, 9, 9)).save(root / "ants" / "new.png")
    images, _, _ = load_or_decode(root, cache, size=8, progress=False)
    assert images.shape[0] == 3


def test_a_tensor_cache_that_cannot_be_written_still_returns_the_decoded_images(tmp_path):
    """Before: the decode was thrown away on the cache's write error (its docstring: a cache is never a reason
    to fail)."""
    from zoo.vision.tensor_data import load_or_decode

    root = _messy(tmp_path) / "val"
    (tmp_path / "file").write_text("a file, not a folder")
    with pytest.warns(UserWarning, match=r"image cache .* could not be written"):
        images, targets, _ = load_or_decode(root, tmp_path / "file" / "cache.npz", size=8, progress=False)
    assert images.shape == (2, 3, 8, 8) and targets.tolist() == [0, 1]


def test_a_corrupt_image_is_skipped_by_the_tensor_cache_with_a_warning_naming_it(tmp_path):
    """Before: one truncated JPEG among the folder's images ended load_or_decode with PIL's "image file is
    truncated (13 bytes not processed)", naming no file, where ImageFolderDataset skips it with a warning."""
    from zoo.vision.tensor_data import decode_images, load_or_decode

    root = _messy(tmp_path) / "val"
    bad = root / "bees" / "torn.jpg"
    full = tmp_path / "full.jpg"
    _img("RGB", (200, 10, 10), size=(64, 64)).save(full)
    bad.write_bytes(full.read_bytes()[:300])
    with pytest.warns(UserWarning, match=f"skipped 1 corrupt image.*{re.escape(str(bad))}"):
        images, targets, _ = load_or_decode(root, tmp_path / "cache.npz", size=8, progress=False)
    assert images.shape == (2, 3, 8, 8) and targets.tolist() == [0, 1]
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        decode_images([bad], size=8, progress=False)


@pytest.mark.parametrize("train", [False, True])
def test_a_crop_larger_than_the_images_is_refused_naming_both(train):
    """Before: evaluation sliced 28x28 images to 2x2 with crop=32 (a negative centre offset), silently, and
    training failed inside torch.randint."""
    from zoo.vision.tensor_data import TensorImageDataset

    images, targets = torch.zeros(4, 3, 28, 28, dtype=torch.uint8), torch.zeros(4, dtype=torch.int64)
    aug = {"mean": (0.5,) * 3, "std": (0.5,) * 3, "train": train}
    with pytest.raises(ValueError, match=r"crop=40 is larger than the .*images \(28x28.*expected crop <= "):
        TensorImageDataset(images, targets, crop=40, pad=2, **aug)
    if not train:
        with pytest.raises(ValueError, match="expected crop <= 28"):
            TensorImageDataset(images, targets, crop=32, pad=2, **aug)
    fits = TensorImageDataset(images, targets, crop=32 if train else 28, pad=2, **aug)
    assert fits[([0, 1], 0)][0].shape == (2, 3, fits.crop, fits.crop)
