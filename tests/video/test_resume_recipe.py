"""A video run resumes only on the clip recipe and videos it was trained with: another frame size or
segment count is refused, not trained on and saved as the network's ``video_cfg``; ``strict`` may change."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import av
import numpy as np
import pytest
import torch

import zoo
from zoo.engine import ResumeError


def _video(path: Path, level: int, frames: int = 8) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w") as out:
        s = out.add_stream("mpeg4", rate=25)
        s.width, s.height, s.pix_fmt = 16, 16, "yuv420p"
        for i in range(frames):
            frame = np.full((16, 16, 3), (level + 3 * i) % 256, np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)


def _train(data, folder, epochs, **options):
    torch.manual_seed(0)
    model = zoo.build("video-tsn", num_classes=2, stem="cifar")
    options = {"size": 8, "num_segments": 2, "batch_size": 4, "amp": None, "seed": 0, "progress": False, **options}
    return zoo.train(model, str(data), epochs=epochs, checkpoint_dir=folder, **options)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("video_resume")
    for split, n in (("train", 2), ("val", 1)):
        for c, level in (("dark", 20), ("light", 200)):
            for i in range(n):
                _video(base / "a" / split / c / f"{i}.avi", level + 5 * i)
                _video(base / "b" / split / c / f"{i}.avi", level + 5 * i, frames=10)
    _train(base / "a", base / "run", 1)
    return base


@pytest.mark.parametrize(("change", "said"), [
    ({"num_segments": 3}, "data.clip: 'num_segments=2' in epoch-0001.pt, 'num_segments=3' now"),
    ({"num_segments": None, "frames_per_clip": 2}, "data.clip: 'num_segments=2' in epoch-0001.pt, 'frames_per_clip=2' now"),
    ({"size": 12}, "data.size: 8 in epoch-0001.pt, 12 now"),
    ({"data": "b"}, "data.train_videos: '4 files, "),
])
def test_a_changed_clip_recipe_or_video_set_is_refused(first_run, tmp_path, change, said):
    change = dict(change)
    data = first_run / change.pop("data", "a")
    run = shutil.copytree(first_run / "run", tmp_path / "run")
    with pytest.raises(ResumeError) as err:
        _train(data, run, 2, resume=True, **change)
    assert said in str(err.value)


def test_the_same_recipe_resumes_and_strict_may_change(first_run, tmp_path):
    run = shutil.copytree(first_run / "run", tmp_path / "run")
    result = _train(first_run / "a", run, 1, resume=True, strict=True)  # nothing left to train: a cheap check
    assert result.resumed["changed"] == {"data.strict": (False, True)}
    assert result.model.video_cfg["num_segments"] == 2 and result.model.video_cfg["size"] == 8


def test_a_bad_recipe_value_is_refused_naming_it_and_a_failed_call_leaves_video_cfg(first_run, tmp_path):
    """size=0 reached torch's interpolate ('Input and output sizes should be greater than 0') and num_segments=0 a
    later check; both stayed in video_cfg, so the next calls and zoo.predict failed on them."""
    model = zoo.build("video-tsn", num_classes=2, stem="cifar")
    before = dict(model.video_cfg)
    for bad, said in (({"size": 0}, "size must be an int >= 1 (pixels), got 0"),
                      ({"size": 32.5}, "size must be an int >= 1 (pixels), got 32.5"),
                      ({"num_segments": 0}, "num_segments must be an int >= 1 (frames), got 0"),
                      ({"frames_per_clip": True}, "frames_per_clip must be an int >= 1 (frames), got True")):
        with pytest.raises(ValueError, match=re.escape(said)):
            zoo.train(model, str(first_run / "a"), epochs=1, progress=False, **bad)
        assert model.video_cfg == before
    with pytest.raises(FileNotFoundError):  # valid values, then a failure: the call leaves video_cfg as it was
        zoo.train(model, str(tmp_path / "missing"), epochs=1, size=12, num_segments=3, progress=False)
    assert model.video_cfg == before
    # counts from an array (refused before) are kept as plain ints: video_cfg is saved as JSON
    model.zoo_data(str(first_run / "a"), train=True, size=np.int64(12), num_segments=np.int32(3))
    assert [(model.video_cfg[k], type(model.video_cfg[k])) for k in ("size", "num_segments")] == [(12, int), (3, int)]


def test_a_network_built_from_a_checkpoint_takes_its_clip_recipe_and_class_names(first_run):
    """zoo.build('video-tsn', weights='DIR/best.pt') took the defaults (112 px, 8 segments for a run of 8 px and
    2 segments) and named its outputs '0', '1': the checkpoint's data.* recipe was not read."""
    built = zoo.build("video-tsn", weights=str(first_run / "run" / "best.pt"))
    assert built.video_cfg["size"] == 8 and built.video_cfg["num_segments"] == 2
    assert "frames_per_clip" not in built.video_cfg and built.video_cfg["classes"] == ["dark", "light"]
    rows = zoo.predict(built, str(first_run / "a" / "val" / "light" / "0.avi"), amp=None)
    assert rows[0]["label"] in ("dark", "light")
