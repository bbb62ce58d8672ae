"""Seeded clip sampling: a function of (seed, epoch, item), whatever the workers, and exact on resume."""

from __future__ import annotations

import warnings
from pathlib import Path

import av
import numpy as np
import pytest
import torch

import zoo
from zoo.engine.data import prepare_loader, set_loader_epoch
from zoo.video.decoding import read_all_frames
from zoo.video.ucf101 import VideoClipDataset

FRAMES = 60


def _ramp(path: Path) -> Path:
    """Frame i is a flat grey of value 4*i, so a decoded clip says which frame it starts at."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w") as out:
        s = out.add_stream("mpeg4", rate=25)
        s.width, s.height, s.pix_fmt = 16, 16, "yuv420p"
        s.codec_context.options = {"qscale": "1"}
        for i in range(FRAMES):
            for p in s.encode(av.VideoFrame.from_ndarray(np.full((16, 16, 3), 4 * i, np.uint8), format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path


@pytest.fixture(scope="module")
def ramp_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ramp")
    for cls in ("A", "B"):
        _ramp(root / cls / "v.avi")
    return root


def test_seeded_random_clips_change_per_epoch_and_not_with_workers(ramp_root):
    path = str(ramp_root / "A" / "v.avi")
    ds = VideoClipDataset([(path, 0)] * 4, ["A"], sampling="random", frames_per_clip=4, seed=0, progress=False)
    full = read_all_frames(path).permute(3, 0, 1, 2)  # (C, N, H, W)
    seen = {}
    for workers in (0, 2):
        loader = prepare_loader(ds, batch_size=4, shuffle=False, seed=0, num_workers=workers)
        for epoch in range(3):
            set_loader_epoch(loader, epoch, 0)
            (seen[workers, epoch], _), = list(loader)  # one batch (4, C, T, H, W)
    starts = []
    for epoch in range(3):
        assert torch.equal(seen[0, epoch], seen[2, epoch]), f"epoch {epoch}: other clips with workers"
        ds.set_epoch(epoch)  # the main process draws the clips the workers did
        idx = [ds.frame_indices(i)[1] for i in range(4)]
        assert all(torch.equal(seen[2, epoch][i], full[:, j]) for i, j in enumerate(idx))
        starts.append(tuple(int(j[0]) for j in idx))
    assert len(set(starts)) == 3, starts  # new clips every epoch
    assert len(set(starts[0])) > 1, starts  # and each item its own

    other = VideoClipDataset([(path, 0)] * 4, ["A"], sampling="random", frames_per_clip=4, seed=1, progress=False)
    assert tuple(int(other.frame_indices(i)[1][0]) for i in range(4)) != starts[0]


def test_seeded_training_crops_and_flips_are_the_same_for_any_number_of_workers(ramp_root):
    """The clips' frames were the same, but RandomCrop and RandomHorizontalFlip drew from torch's global generator:
    the main process's with num_workers=0, each worker's otherwise, so the batches differed."""
    from torchvision.transforms import v2

    path = str(ramp_root / "A" / "v.avi")
    grad = v2.Lambda(lambda clip: clip + torch.arange(16, dtype=torch.uint8).view(1, 1, 1, 16))  # left != right
    transform = v2.Compose([grad, v2.RandomCrop(12), v2.RandomHorizontalFlip()])
    ds = VideoClipDataset([(path, 0)] * 6, ["A"], sampling="random", frames_per_clip=4, seed=0, progress=False,
                          transform=transform)
    seen = {}
    for workers in (0, 2):
        torch.manual_seed(123)
        loader = prepare_loader(ds, batch_size=6, shuffle=False, seed=0, num_workers=workers)
        set_loader_epoch(loader, 0, 0)
        (seen[workers], _), = list(loader)
    assert torch.equal(seen[0], seen[2])
    assert len({(clip[0, 0, 0, 0].item(), clip[0, 0, 0, -1].item()) for clip in seen[0]}) > 1  # the draws vary


def test_an_undecodable_video_with_uniform_clips_is_skipped_not_the_end_of_the_pass(ramp_root, tmp_path, monkeypatch):
    """The retry took item + 1, with uniform clips the next clip of the same video: five of them ended the pass,
    strict=False or not."""
    import zoo.video.ucf101 as U
    from zoo.video.decoding import CorruptVideoError

    bad, good = str(ramp_root / "A" / "v.avi"), str(ramp_root / "B" / "v.avi")
    real = U.read_frames

    def broken(path, *args, **kwargs):  # headers fine, data broken: found only when decoding
        if path == bad:
            raise CorruptVideoError(f"{path}: invalid data")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(U, "read_frames", broken)
    ds = VideoClipDataset([(bad, 0), (good, 1)], ["A", "B"], sampling="uniform", frames_per_clip=4,
                          step_between_clips=4, train=False, progress=False)
    with pytest.warns(UserWarning, match="skipping an undecodable clip"):
        labels = [ds[i][1] for i in range(len(ds))]
    assert labels == [1] * len(ds) and ds.failed_reads == FRAMES // 4


def test_seeded_segments_are_a_function_of_seed_epoch_and_item(ramp_root):
    def draw(epoch: int) -> list[list[int]]:
        ds = VideoClipDataset([(str(ramp_root / "A" / "v.avi"), 0)] * 3, ["A"], sampling="segments",
                              num_segments=4, seed=5, progress=False)
        ds.set_epoch(epoch)
        return [ds.frame_indices(i)[1].tolist() for i in (2, 0, 1, 2)]  # any order, repeated reads

    first = draw(1)
    assert first == draw(1) and first[0] == first[3]
    assert first != draw(2)


def test_resumed_seeded_video_run_equals_the_straight_run(ramp_root, tmp_path):
    kw = {"size": 16, "num_segments": 3, "batch_size": 2, "progress": False, "amp": None, "seed": 0}

    def run(tag: str, epochs: list[int]):
        torch.manual_seed(0)
        model = zoo.build("video-tsn", num_classes=2, stem="cifar", dropout=0.0)
        for i, n in enumerate(epochs):
            result = zoo.train(model, ramp_root, epochs=n, checkpoint_dir=tmp_path / tag, resume=i > 0, **kw)
        return result

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        straight, resumed = run("straight", [3]), run("resumed", [1, 3])
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in straight.history]
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
