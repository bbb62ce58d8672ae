"""Training options of the video networks: the left-right flip, recipes refused before the loop would fail on
them, what a failed run leaves in ``video_cfg``, a clip data set's own sampling, and the fold a checkpoint keeps."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import av
import numpy as np
import pytest
import torch

import zoo
from zoo import hub
from zoo.engine import ResumeError
from zoo.engine.options import UnknownOptionError
from zoo.video.ucf101 import VideoClipDataset

CLASSES = ("dark", "light")


def _video(path: Path, level: int, frames: int = 8) -> None:
    """A 16x16 clip whose frames brighten left to right: mirrored, it is another clip."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w") as out:
        s = out.add_stream("mpeg4", rate=25)
        s.width, s.height, s.pix_fmt = 16, 16, "yuv420p"
        ramp = np.repeat(np.arange(0, 160, 10, dtype=np.uint8)[None, :, None], 16, axis=0)
        for i in range(frames):
            frame = np.broadcast_to(ramp + np.uint8((level + 3 * i) % 90), (16, 16, 3)).copy()
            for p in s.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)


@pytest.fixture(scope="module")
def ucf(tmp_path_factory) -> tuple[Path, Path]:
    """``(videos, splits)``: two classes of three clips, and UCF101-style split files whose folds differ (fold 1
    tests four videos, fold 2 two)."""
    base = tmp_path_factory.mktemp("video_options")
    videos, splits = base / "videos", base / "splits"
    for label, name in enumerate(CLASSES):
        for i in range(3):
            _video(videos / name / f"{i}.avi", 10 + 40 * label + 5 * i)
    splits.mkdir()
    (splits / "classInd.txt").write_text("1 dark\n2 light\n")
    for fold, train in ((1, (0,)), (2, (1, 2))):
        listed = [(f"{c}/{i}.avi", k + 1) for k, c in enumerate(CLASSES) for i in range(3)]
        (splits / f"trainlist0{fold}.txt").write_text("".join(f"{p} {k}\n" for p, k in listed if int(p[-5]) in train))
        (splits / f"testlist0{fold}.txt").write_text("".join(f"{p}\n" for p, _ in listed if int(p[-5]) not in train))
    return videos, splits


def _tsn(**config):
    torch.manual_seed(0)
    return zoo.build("video-tsn", num_classes=2, stem="cifar", **config)


def _train(model, data, **options):
    options = {"epochs": 1, "batch_size": 6, "amp": None, "progress": False, **options}
    return zoo.train(model, data, **options)


def test_hflip_false_trains_on_clips_as_they_are_and_the_checkpoints_record_it(ucf, tmp_path, capsys):
    """Before: training mirrored clips left-right at random with no way to turn it off, though on the project's
    synthetic actions a mirrored MoveRight clip is a MoveLeft one; zoo.train refused hflip as an unknown option."""
    videos, _ = ucf
    drawn = {}
    for hflip in (True, False):
        ds, _ = _tsn().zoo_data(str(videos), train=True, size=16, num_segments=2, hflip=hflip, progress=False)
        clip = ds.read_clip(0)[0]
        torch.manual_seed(0)  # 16 px frames cropped to 16: the crop keeps them whole, only a flip changes them
        drawn[hflip] = [ds.transform(clip) for _ in range(12)]
    assert any(not torch.equal(x, drawn[True][0]) for x in drawn[True])  # the default still mirrors some
    assert all(torch.equal(x, drawn[False][0]) for x in drawn[False])

    _train(_tsn(), str(videos), size=16, num_segments=2, hflip=False, checkpoint_dir=str(tmp_path / "run"))
    assert hub.training_config(tmp_path / "run" / "best.pt")["data.hflip"] is False
    with pytest.raises(ResumeError, match=re.escape("data.hflip: False in epoch-0001.pt, True now")):
        _train(_tsn(), str(videos), epochs=2, size=16, num_segments=2, checkpoint_dir=str(tmp_path / "run"),
               resume=True)
    with pytest.raises(TypeError, match=r"hflip must be True .* or False \(never\), got 'no' \(str\)"):
        _tsn().zoo_data(str(videos), train=True, hflip="no")
    own = VideoClipDataset([(str(videos / c / "0.avi"), k) for k, c in enumerate(CLASSES)], list(CLASSES),
                           sampling="segments", num_segments=2, transform=lambda clip: clip.float(), progress=False)
    with pytest.raises(ValueError, match=r"hflip=False leaves the flip out of zoo's training transform, but this "
                                         r"VideoClipDataset is fed as it is"):  # taken, it would do nothing
        _tsn().zoo_data(own, train=True, hflip=False)

    from zoo.cli import main

    assert main(["video-synthetic", str(tmp_path / "syn"), "--train-per-class", "1", "--test-per-class", "1",
                 "--size", "16", "--frames", "4"]) == 0
    assert "--set hflip=false" in capsys.readouterr().out  # the printed recipe for MoveRight / MoveLeft


def test_a_recipe_no_clip_fits_is_refused_and_a_run_failing_before_its_first_step_leaves_video_cfg(ucf):
    """Before: resize below size failed in the first batch ('RandomCrop(16, 16) is larger than the frames') and
    an rgbdiff network's num_segments=1 in its forward, both after video_cfg took them: predict then zero-padded
    every clip, or failed on every call. Any run failing before its first step (an option the loop refuses, a
    loss that raises) left its recipe in video_cfg too."""
    videos, _ = ucf
    model = _tsn()
    before = copy.deepcopy(model.video_cfg)
    with pytest.raises(ValueError, match=r"resize=8 is smaller than size=16: .* pass a resize of at least 16, or "
                                         r"size=8 or less"):
        _train(model, str(videos), size=16, resize=8, num_segments=2)
    assert model.video_cfg == before
    diff = _tsn(modality="rgbdiff")
    diff_before = copy.deepcopy(diff.video_cfg)
    with pytest.raises(ValueError, match=r"num_segments=1 gives clips of 1 frame\(s\), but this video-tsn needs at "
                                         r"least 2 \(modality='rgbdiff' .*\): pass num_segments=2 or more"):
        _train(diff, str(videos), size=16, num_segments=1)
    assert diff.video_cfg == diff_before

    def failing(outputs, targets):
        raise RuntimeError("a loss that fails")

    with pytest.raises(RuntimeError, match="a loss that fails"):
        _train(model, str(videos), size=12, num_segments=3, loss_fn=failing)
    assert model.video_cfg == before
    with pytest.raises(UnknownOptionError):
        _train(model, str(videos), size=12, num_segments=3, epohcs=2)
    assert model.video_cfg == before

    calls = []

    def fails_after_a_step(outputs, targets):
        if calls:
            raise RuntimeError("the second batch fails")
        calls.append(1)
        return torch.nn.functional.cross_entropy(outputs, targets)

    with pytest.raises(RuntimeError, match="the second batch fails"):  # the weights learned on the new recipe
        _train(model, str(videos), size=12, num_segments=3, batch_size=2, loss_fn=fails_after_a_step)
    assert (model.video_cfg["size"], model.video_cfg["num_segments"]) == (12, 3)


def test_training_on_a_clip_dataset_records_its_sampling_and_refuses_a_call_that_contradicts_it(ucf):
    """Before: the clip key came from the call or the network, never from the data set: a data set of 4
    consecutive frames left num_segments 8 in video_cfg, and num_segments=16 given was recorded while the network
    trained on 4-frame clips."""
    videos, _ = ucf
    listed = [(str(videos / c / f"{i}.avi"), k) for k, c in enumerate(CLASSES) for i in range(3)]
    consecutive = VideoClipDataset(listed, list(CLASSES), sampling="random", frames_per_clip=4, progress=False)
    model = _tsn()
    _train(model, consecutive, size=8)
    assert model.video_cfg["frames_per_clip"] == 4 and "num_segments" not in model.video_cfg
    segments = VideoClipDataset(listed, list(CLASSES), sampling="segments", num_segments=3, progress=False)
    model = _tsn()
    _train(model, torch.utils.data.Subset(segments, [0, 1, 3, 4]), size=8)
    assert model.video_cfg["num_segments"] == 3
    before = copy.deepcopy(model.video_cfg)
    with pytest.raises(ValueError, match=r"the data set \(VideoClipDataset\) samples clips of frames_per_clip=4 "
                                         r"\(sampling='random'\), but the call asks for num_segments=16: .* leave "
                                         r"num_segments out"):
        _train(model, consecutive, num_segments=16, size=8)
    assert model.video_cfg == before


def test_a_network_built_from_a_checkpoint_evaluates_the_fold_it_trained_on(ucf, tmp_path):
    """Before: the checkpoints did not record the fold: a fold-2 network built from best.pt scored testlist01,
    which holds its training videos, without the warning the trained network gives."""
    videos, splits = ucf
    _train(_tsn(), str(videos), splits=str(splits), fold=2, size=8, num_segments=2,
           checkpoint_dir=str(tmp_path / "run"))
    built = zoo.build("video-tsn", weights=str(tmp_path / "run" / "best.pt"))
    assert built.video_cfg["fold"] == 2
    scored, _ = built.zoo_data(str(videos), train=False, splits=str(splits))
    assert sorted(Path(m.path).name for m in scored.videos) == ["0.avi", "0.avi"]  # testlist02, not testlist01
    with pytest.warns(UserWarning, match=r"trained on UCF101's fold 2 .* testlist01\.txt holds videos of that list"):
        built.zoo_data(str(videos), train=False, splits=str(splits), fold=1)


def test_a_concat_of_clip_datasets_trains_and_evaluates_as_one_and_records_its_sampling_and_classes(ucf):
    """A ConcatDataset was looked through nowhere: without transforms it failed in the first convolution ("expected
    scalar type Byte but found Float"), with them the network trained on 4 consecutive frames while video_cfg kept
    8 segments for zoo.predict, and named its outputs '0', '1'."""
    from torch.utils.data import ConcatDataset, DataLoader, Subset

    videos, _ = ucf
    listed = [(str(videos / c / f"{i}.avi"), k) for k, c in enumerate(CLASSES) for i in range(3)]
    clips = [VideoClipDataset(part, list(CLASSES), sampling="random", frames_per_clip=4, progress=False)
             for part in (listed[:3], listed[3:])]
    model = _tsn()
    _train(model, ConcatDataset(clips), size=8)
    assert model.video_cfg["frames_per_clip"] == 4 and "num_segments" not in model.video_cfg
    assert model.video_cfg["classes"] == list(CLASSES) and all(ds.transform is None for ds in clips)
    scored = zoo.evaluate(model, ConcatDataset([VideoClipDataset(listed[:3], list(CLASSES), frames_per_clip=4,
                                                                 step_between_clips=4, train=False, progress=False),
                                                VideoClipDataset(listed[3:], list(CLASSES), frames_per_clip=4,
                                                                 step_between_clips=4, train=False, progress=False)]),
                          amp=None)
    assert 0 <= scored["accuracy"] <= 1 and scored["clip_accuracy"] >= 0
    # a random_split piece names the outputs as its data set does
    model = _tsn()
    _train(model, Subset(clips[0], [0, 1]), size=8)
    assert model.video_cfg["classes"] == list(CLASSES)
    # data sets that sample clips otherwise than each other: video_cfg records one way, so the call is refused
    segments = VideoClipDataset(listed, list(CLASSES), sampling="segments", num_segments=3, progress=False)
    before = copy.deepcopy(model.video_cfg)
    with pytest.raises(ValueError, match=r"the data sets trained on sample clips in different ways \(frames_per_clip=4 "
                                         r"and num_segments=3\), and video_cfg records one way"):
        _train(model, ConcatDataset([clips[0], segments]), size=8)
    assert model.video_cfg == before
    with pytest.raises(ValueError, match=r"the DataLoader's VideoClipDataset has no transform"):
        _train(model, DataLoader(ConcatDataset(clips), batch_size=2), batch_size=2)
