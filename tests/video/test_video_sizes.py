"""Frame sizes and frame counts of the video family are whole numbers: a float, a bool, 0 or a negative is refused
naming the option, what it takes and what came (NumPy integers are taken), where it was truncated (``(16.7, 20)``
read as 16 rows), read as 1 (``True``) or taken as an empty crop before."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo
from zoo.exporting.exporters import spec_for
from zoo.inputs import NotAnIntError
from zoo.video import transforms as VT
from zoo.video.decoding import read_frames
from zoo.video.predict import clip_indices, load_clip
from zoo.video.synthetic import render_clip, write_video
from zoo.video.ucf101 import VideoClipDataset

BAD_SIZES = [(16.7, 20), (16.0, 20), (True, 20), 16.7, True, (20,), (20, 20, 3), "16"]
NON_POSITIVE = [0, -3, (0, 20), (20, -1)]


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> list[tuple[str, int]]:
    root = tmp_path_factory.mktemp("sizes")
    return [(str(write_video(root / f"c{k}" / "0.avi", render_clip(k, np.random.default_rng(k), 32, 8))), k)
            for k in range(2)]


@pytest.mark.parametrize("make", [VT.Resize, VT.CenterCrop, VT.RandomCrop])
@pytest.mark.parametrize("size", BAD_SIZES)
def test_a_transform_refuses_a_size_that_is_no_whole_number(make, size):
    with pytest.raises(NotAnIntError, match=rf"^{make.__name__} size must be an int >= 1 \(.*\) or a \(height, "
                                            rf"width\) pair of ints >= 1 \(pixels\), got {re.escape(repr(size))}$"):
        make(size)


@pytest.mark.parametrize("make", [VT.Resize, VT.CenterCrop, VT.RandomCrop])
@pytest.mark.parametrize("size", NON_POSITIVE)
def test_a_transform_refuses_a_size_below_one(make, size):
    """CenterCrop(0) and RandomCrop(-3) gave empty clips, Resize(0) torch's "Input and output sizes should be
    greater than 0"."""
    with pytest.raises(ValueError, match=rf"^{make.__name__} size must be .*, got {re.escape(repr(size))}$"):
        make(size)


def test_transforms_and_clip_datasets_take_numpy_integers_as_the_ints_they_hold(clips):
    ds = VideoClipDataset(clips, ["a", "b"], frames_per_clip=2, size=np.array([16, 20]), progress=False)
    assert ds.size == (16, 20) and ds[0][0].shape == (3, 2, 16, 20)
    clip = torch.zeros(3, 2, 40, 48, dtype=torch.uint8)
    assert VT.Resize(np.int64(16))(clip).shape == (3, 2, 16, 19)  # "object of type 'numpy.int64' has no len()"
    assert VT.CenterCrop(np.int32(8))(clip).shape == (3, 2, 8, 8)
    assert VT.RandomCrop((np.int64(8), 12))(clip).shape == (3, 2, 8, 12)
    assert VT.Resize(np.array([10, 12]))(clip).shape == (3, 2, 10, 12)
    assert VT.CenterCrop((np.int64(8), 12)).size == (8, 12) and type(VT.CenterCrop((np.int64(8), 12)).size[0]) is int


def test_kinetics_transforms_name_their_own_options():
    with pytest.raises(NotAnIntError, match=r"^kinetics_eval resize must be .*got \(128\.5, 171\)$"):
        VT.kinetics_eval(resize=(128.5, 171))
    with pytest.raises(NotAnIntError, match=r"^kinetics_train crop must be .*got True$"):
        VT.kinetics_train(crop=True)
    with pytest.raises(NotAnIntError, match=r"^TemporalJitter max_shift must be an int >= 0 \(frames\), got 1\.5$"):
        VT.TemporalJitter(1.5)


@pytest.mark.parametrize("size", [(16.7, 20), (16.0, 20), (True, 20), 16, (0, 20), (20, -1)])
def test_a_clip_dataset_and_read_frames_refuse_a_size_that_is_no_pair_of_whole_numbers(clips, size):
    """(16.7, 20) scaled the frames to 16 rows and (True, 20) to one, without a word; 16 failed with "object of
    type 'int' has no len()"."""
    said = rf"size must be a \(height, width\) pair of ints >= 1 \(pixels\) or None, got {re.escape(repr(size))}$"
    with pytest.raises(ValueError, match="^" + said):
        VideoClipDataset(clips, ["a", "b"], frames_per_clip=2, size=size, progress=False)
    with pytest.raises(ValueError, match="^read_frames " + said):
        read_frames(clips[0][0], [0], size=size)


@pytest.mark.parametrize(("option", "value", "error", "said"), [
    ("size", 16.7, NotAnIntError, r"size must be an int >= 16 \(frame height and width in pixels\), got 16\.7"),
    ("size", True, NotAnIntError, r"size must be an int >= 16 \(frame height and width in pixels\), got True"),
    ("size", 0, ValueError, r"size must be an int >= 16 \(frame height and width in pixels\), got 0"),
    ("num_frames", 2.5, NotAnIntError, r"num_frames must be an int >= 1, got 2\.5"),
    ("label", 1.0, NotAnIntError, r"label must be an int >= 0 \(a class index below 5\), got 1\.0"),
])
def test_a_synthetic_clip_refuses_sizes_and_counts_that_are_no_whole_numbers(option, value, error, said):
    """size=16.7 failed in NumPy ("'float' object cannot be interpreted as an integer"), True and 0 in the shape's
    random start ("high - low < 0")."""
    args = {"label": 0, "size": 32, "num_frames": 4, option: value}
    with pytest.raises(error, match=f"^{said}$"):
        render_clip(args.pop("label"), np.random.default_rng(0), **args)


@pytest.mark.parametrize("fps", [0, -25, 2.5, True])
def test_write_video_refuses_a_rate_it_cannot_write(tmp_path, fps):
    """fps=0 wrote a 24 fps video without a word; 2.5 failed in PyAV ("'float' object has no attribute
    'numerator'")."""
    with pytest.raises(ValueError, match=rf"^fps must be a whole number or a Fraction .*, got {fps!r}$"):
        write_video(tmp_path / "v.avi", render_clip(0, np.random.default_rng(0), 16, 4), fps=fps)
    assert not (tmp_path / "v.avi").exists()


def test_write_video_refuses_a_clip_without_frames(tmp_path):
    """It failed after opening the writer: "the writer of .../v.avi did not produce a file"."""
    with pytest.raises(ValueError, match=r"frames must be \(T, H, W, 3\) uint8 with T, H, W >= 1, got \(0, 16, 16, 3\)"):
        write_video(tmp_path / "v.avi", np.zeros((0, 16, 16, 3), np.uint8))


def test_read_frames_refuses_frame_indices_that_are_no_ints(clips):
    """read_frames(path, [1.7]) returned frame 1."""
    with pytest.raises(TypeError, match=r"frame indices must be ints \(display indices 0, 1, \.\.\.\), got 1\.7"):
        read_frames(clips[0][0], [0, 1.7])
    assert read_frames(clips[0][0], torch.tensor([1, 2])).shape[0] == 2  # an index tensor's values are ints


@pytest.mark.parametrize(("option", "value", "error"), [
    ("frames_per_clip", 2.5, NotAnIntError), ("frames_per_clip", True, NotAnIntError), ("frames_per_clip", 0, ValueError),
    ("frames_per_clip", -2, ValueError), ("num_segments", 2.5, NotAnIntError), ("num_segments", True, NotAnIntError),
])
def test_the_clip_predict_reads_refuses_counts_that_are_no_whole_numbers(clips, option, value, error):
    """frames_per_clip=2.5 read 3 frames and True one, 0 failed in the decoder ("indices is empty") and -2 in
    torch.arange."""
    said = rf"^{option} must be an int >= 1 or None \(.*\), got {re.escape(repr(value))}$"
    with pytest.raises(error, match=said):
        clip_indices(10, **{option: value})
    with pytest.raises(error, match=said):
        load_clip(clips[0][0], **{option: value})
    assert clip_indices(10, **{option: np.int64(3)}).shape == (3,)


@pytest.mark.parametrize("rate", [0, -5, float("nan"), float("inf"), True, "25"])
def test_a_clip_dataset_refuses_a_frame_rate_that_is_no_positive_number(clips, rate):
    """NaN failed as "cannot convert float NaN to integer", inf as an OverflowError, "25" in a comparison, and True
    resampled every video to 1 fps."""
    with pytest.raises(ValueError, match=rf"^frame_rate must be None \(each video's own rate\) or a number of frames "
                                         rf"per second > 0 .*, got {re.escape(repr(rate))}$"):
        VideoClipDataset(clips, ["a", "b"], frames_per_clip=2, frame_rate=rate, progress=False)


def _tsn(**cfg):
    torch.manual_seed(0)
    model = zoo.build("video-tsn", num_classes=2, stem="cifar")
    model.video_cfg.update({"size": 8, "resize": 8, "num_segments": 2, **cfg})
    return model


@pytest.mark.parametrize(("cfg", "said"), [
    ({"size": 16.7}, r"video_cfg\['size'\] must be an int >= 1 \(the centre crop, pixels\), got 16\.7"),
    ({"size": True}, r"video_cfg\['size'\] must be an int >= 1 \(the centre crop, pixels\), got True"),
    ({"resize": 20.9}, r"video_cfg\['resize'\] must be an int >= 1 \(the shorter side, aspect kept\) .*got 20\.9"),
    ({"resize": [20.5, 30]}, r"video_cfg\['resize'\] must be .*got \[20\.5, 30\]"),
    ({"num_segments": 2.5}, r"video_cfg\['num_segments'\] must be an int >= 1 \(frames\), got 2\.5"),
])
def test_a_video_cfg_that_is_no_whole_number_is_refused_not_truncated(clips, cfg, said):
    """A hand-edited video_cfg (or a file of another tool) of size 16.7 fed zoo.predict 16-pixel crops, and
    num_segments 2.5 two segments, without a word."""
    with pytest.raises(ValueError, match=said):
        zoo.predict(_tsn(**cfg), clips[0][0], amp=None)
    with pytest.raises(ValueError, match=said):  # the export's stored recipe claimed the truncated size
        spec_for(_tsn(**cfg), {})


def test_training_takes_a_resize_pair_as_video_cfg_holds_it(clips):
    """resize=[20, 24] was refused ("resize must be an int") though video_cfg holds a pair for the Kinetics
    recipe; a pair of floats is refused naming the forms."""
    model = _tsn()
    folder = Path(clips[0][0]).parent.parent
    zoo.train(model, folder, size=8, resize=[10, 12], num_segments=2, epochs=1, batch_size=2, amp=None, progress=False)
    assert model.video_cfg["resize"] == [10, 12]
    assert zoo.predict(model, clips[0][0], amp=None)[0]["label"] in ("c0", "c1")
    with pytest.raises(NotAnIntError, match=r"^resize must be an int >= 1 \(the shorter side, aspect kept\) or a "
                                            r"\(height, width\) pair of ints >= 1 \(pixels\), got \[10\.5, 12\]$"):
        zoo.train(model, folder, resize=[10.5, 12], epochs=1, progress=False)
    assert model.video_cfg["resize"] == [10, 12]
