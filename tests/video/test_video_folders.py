"""Video folders as training and validation data: a validation folder is read as the training folder is,
with its classes, before training starts."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

import zoo
from zoo.video.synthetic import render_clip, write_video
from zoo.video.ucf101 import VideoClipDataset


def _videos(root: Path, classes: dict[str, int], seed: int = 0) -> Path:
    """``root/<class>/<i>.avi``: ``classes[name]`` 8-frame clips of class ``name`` (rendered as ``"abc"``'s)."""
    rng = np.random.default_rng(seed)
    for name, count in classes.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            write_video(root / name / f"{i}.avi", render_clip("abc".index(name), rng, 16, 8))
    return root


@pytest.fixture(scope="module")
def tv(tmp_path_factory) -> Path:
    """``train/{a,b,c}`` with two clips each, ``val/{b,c}`` with one: a validation set of some of the classes."""
    root = tmp_path_factory.mktemp("tv")
    _videos(root / "train", {"a": 2, "b": 2, "c": 2})
    _videos(root / "val", {"b": 1, "c": 1}, seed=1)
    return root


def _tsn():
    return zoo.build("video-tsn", num_classes=3, stem="cifar")


def test_a_val_data_folder_is_read_with_the_training_classes(tv):
    _, options = _tsn().zoo_data(str(tv / "train"), train=True, val_data=str(tv / "val"), size=16,
                                 num_segments=2, progress=False)
    val = options["val_data"]
    assert isinstance(val, VideoClipDataset)  # was the path itself, which fit batched as strings
    assert val.classes == ["a", "b", "c"] and sorted(val.labels) == [1, 2]  # b and c as training labels them
    assert options["config"]["data.val_videos"] is not None  # a resume reading another val set is refused


@pytest.mark.parametrize("form", ["val_data", "dict"])
def test_training_validates_on_a_val_folder_given_apart_or_in_a_dict(tv, form):
    train, val = str(tv / "train"), str(tv / "val")
    data, extra = (train, {"val_data": val}) if form == "val_data" else ({"train": train, "val": val}, {})
    result = zoo.train(_tsn(), data, **extra, size=16, num_segments=2, epochs=1, batch_size=6, progress=False,
                       amp=None)
    assert "val_accuracy" in result.history[-1]


def test_a_bad_val_folder_fails_before_training(tv, tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.import_module("zoo.engine.fit"), "fit", lambda *a, **k: pytest.fail("trained with a bad validation set"))
    train = str(tv / "train")
    other = _videos(tmp_path / "other", {"b": 1})
    (other / "d").mkdir()
    write_video(other / "d" / "0.avi", render_clip(0, np.random.default_rng(2), 16, 8))
    with pytest.raises(ValueError, match=r"class folder\(s\) \['d'\] are not among the model's classes"):
        zoo.train(_tsn(), train, val_data=str(other), size=16, num_segments=2, epochs=1, progress=False)
    with pytest.raises(FileNotFoundError, match=r"val_data not found: .*nowhere"):
        zoo.train(_tsn(), {"train": train, "val": str(tmp_path / "nowhere")}, size=16, num_segments=2, epochs=1,
                  progress=False)


def test_a_pair_of_folders_is_train_and_val_and_a_list_of_paths_names_the_forms_that_work(tv):
    train, val = str(tv / "train"), str(tv / "val")
    result = zoo.train(_tsn(), (train, val), size=16, num_segments=2, epochs=1, progress=False)
    assert "val_accuracy" in result.history[-1]  # (train_dir, val_dir), as every family takes (train, val)
    with pytest.raises(TypeError, match=r"val_data: .*got a list of 2 paths"):
        zoo.train(_tsn(), train, val_data=[val + "/b/0.avi", val + "/c/0.avi"], size=16, num_segments=2,
                  epochs=1, progress=False)


def test_an_empty_class_folder_is_an_error_naming_it_and_the_extensions(tmp_path):
    root = _videos(tmp_path / "set", {"a": 1, "b": 1})
    (root / "Empty").mkdir()
    (root / "Empty" / "notes.txt").write_text("not a video")
    (root / ".ipynb_checkpoints").mkdir()  # hidden folders are no classes
    empty = r"class folder\(s\) with no video file: \['Empty'\]; every class needs at least one \(\.avi, \.mp4"
    with pytest.raises(ValueError, match=empty):  # was a third class, ['Empty', 'a', 'b'], without a word
        zoo.train("video-tsn", root, model_config={"stem": "cifar"}, size=16, num_segments=2, epochs=1,
                  progress=False)
    model = _tsn()
    model.video_cfg["classes"] = ["Empty", "a", "b"]
    with pytest.raises(ValueError, match=empty):  # evaluating: as the vision family's image folders
        model.zoo_data(root, train=False)


def test_evaluating_a_folder_of_some_classes_names_the_others(tv):
    model = _tsn()
    model.video_cfg["classes"] = ["a", "b", "c"]
    with pytest.warns(UserWarning, match=r"1 of the 3 classes have no folder here \(\['a'\]\): the videos of the "
                                         r"other 2 are scored"):
        ds, _ = model.zoo_data(tv / "val", train=False)
    assert sorted(ds.labels) == [1, 2]


def test_a_class_whose_every_video_is_unreadable_is_an_error_for_training(tmp_path):
    """Its files passed the empty-folder check (it reads extensions), were skipped with a warning, and the class
    trained on nothing; evaluation still scores the readable ones."""
    root = _videos(tmp_path / "set", {"a": 1, "b": 1})
    (root / "c").mkdir()
    (root / "c" / "0.avi").write_bytes(b"not a video")
    videos = [(str(root / c / "0.avi"), i) for i, c in enumerate("abc")]
    with pytest.warns(UserWarning, match="skipped 1 unreadable"), \
            pytest.raises(ValueError, match=r"every video of class\(es\) \['c'\] is unreadable"):
        VideoClipDataset(videos, ["a", "b", "c"], progress=False)
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        assert len(VideoClipDataset(videos, ["a", "b", "c"], train=False, progress=False).videos) == 2


def test_hidden_files_and_folders_are_no_videos_of_a_class(tmp_path):
    """macOS "._v.avi" forks and .ipynb_checkpoints/ copies were read as videos: evaluation warned of
    unreadable videos (strict=True failed) and scored more videos than zoo.predict, which skips them."""
    from zoo.inputs import collect_files
    from zoo.video.classifier import VIDEO_EXTENSIONS, scan_video_folder

    root = _videos(tmp_path / "set", {"a": 1, "b": 1})
    for c in "ab":
        (root / c / "._0.avi").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ")  # AppleDouble
        (root / c / ".ipynb_checkpoints").mkdir()
        (root / c / ".ipynb_checkpoints" / "0-checkpoint.avi").write_bytes((root / c / "0.avi").read_bytes())
    videos, _ = scan_video_folder(root)
    assert videos == [(str(root / "a" / "0.avi"), 0), (str(root / "b" / "0.avi"), 1)]
    assert [p for p, _ in videos] == [str(f) for f in collect_files(root, VIDEO_EXTENSIONS)]  # as predict reads
    model = zoo.build("video-tsn", num_classes=2, stem="cifar")
    model.video_cfg.update(classes=["a", "b"], size=16, resize=16, num_segments=2)
    ds, _ = model.zoo_data(root, train=False, strict=True, progress=False)  # strict: an unreadable video raises
    assert len(ds.videos) == 2


def test_a_class_folder_differing_in_case_from_the_models_class_is_named(tmp_path):
    """Before: evaluating on ``root/a`` and ``root/b`` a model of classes ``A`` and ``b`` said only "class
    folder(s) ['a'] are not among the model's classes ['A', 'b']"."""
    from zoo.video.classifier import scan_video_folder

    root = _videos(tmp_path / "root_case", {"a": 1, "b": 1})
    with pytest.raises(ValueError, match=r"class folder\(s\) \['a'\] are not among the model's classes \['A', 'b'\] "
                                         r"\('a' for 'A' differ only in case: rename the folder"):
        scan_video_folder(root, ["A", "b"])
    with pytest.raises(ValueError, match=r"classes \['A', 'b'\]$"):  # no class alike: nothing more to say
        scan_video_folder(_videos(tmp_path / "other", {"c": 1}), ["A", "b"])
