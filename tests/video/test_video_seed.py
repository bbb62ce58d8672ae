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



def _first_frames(batches: list[torch.Tensor]) -> list[int]:
    """Each clip's first frame in ``batches``, from the ramp's grey value (4 * frame, give or take the codec's 1)."""
    return [round(int(clip[0, 0, 0, 0]) / 4) for batch in batches for clip in batch]


def test_a_random_split_of_a_seeded_dataset_draws_new_clips_every_epoch(ramp_root):
    """set_loader_epoch called set_epoch on loader.dataset alone: a Subset of the clip dataset never heard of the
    epoch, and every epoch of zoo.train drew epoch 0's clips (and crops and flips)."""
    from torch.utils.data import DataLoader, random_split

    path = str(ramp_root / "A" / "v.avi")
    ds = VideoClipDataset([(path, 0)] * 4, ["A"], sampling="random", frames_per_clip=2, seed=0, progress=False)
    train, _ = random_split(ds, [3, 1], generator=torch.Generator().manual_seed(0))
    loader = DataLoader(train, batch_size=3)
    seen = []
    for epoch in range(3):
        set_loader_epoch(loader, epoch, 0)
        (batch, _), = list(loader)
        seen.append(tuple(_first_frames([batch])))
    assert ds.epoch == 2
    assert len(set(seen)) == 3, seen


def test_persistent_workers_see_each_epoch(ramp_root):
    """set_epoch set an attribute in the main process; persistent workers kept their copy at epoch 0."""
    from torch.utils.data import DataLoader

    path = str(ramp_root / "A" / "v.avi")
    ds = VideoClipDataset([(path, 0)] * 3, ["A"], sampling="random", frames_per_clip=2, seed=0, progress=False)
    loader = DataLoader(ds, batch_size=3, num_workers=1, persistent_workers=True)
    seen = []
    for epoch in range(2):
        ds.set_epoch(epoch)
        (batch, _), = list(loader)
        assert torch.equal(batch, torch.stack([ds[k][0] for k in range(3)])), f"epoch {epoch}: another epoch's clips"
        seen.append(batch)
    assert not torch.equal(*seen)


def test_the_epoch_survives_pickling_and_each_copy_keeps_its_own(ramp_root):
    import copy
    import pickle

    ds = VideoClipDataset([(str(ramp_root / "A" / "v.avi"), 0)], ["A"], sampling="random", frames_per_clip=2,
                          seed=0, progress=False)
    ds.set_epoch(np.int64(4))
    assert ds.epoch == 4 and type(ds.epoch) is int
    for other in (pickle.loads(pickle.dumps(ds)), copy.copy(ds), copy.deepcopy(ds)):
        assert other.epoch == 4
        other.set_epoch(7)
        assert ds.epoch == 4 and other.epoch == 7  # as with the int it was: a copy moves on alone
        assert other._epoch.is_shared()  # so DataLoader workers made from the copy see its set_epoch


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open file descriptors in /proc/self/fd")
def test_datasets_that_no_loader_iterates_hold_no_file_descriptor(ramp_root):
    """Each dataset's epoch in shared memory held a file descriptor while it lived: a sweep's thousand datasets
    ran out of them (the 1,019th: "Too many open files", reported as an unreadable video). Shared from the
    first set_epoch only, which a loader of it needs."""
    import os

    path = str(ramp_root / "A" / "v.avi")
    before = len(os.listdir("/proc/self/fd"))
    kept = [VideoClipDataset([(path, 0)], ["A"], sampling="random", frames_per_clip=2, seed=0, progress=False)
            for _ in range(40)]
    assert len(os.listdir("/proc/self/fd")) < before + 5, "a descriptor per dataset"
    kept[0].set_epoch(1)
    assert kept[0]._epoch.is_shared() and not kept[1]._epoch.is_shared()


def test_a_numpy_seed_is_taken_as_the_int_it_holds(ramp_root):
    """np.int64(7), a sweep's seed, overflowed in _item_seed ('Python int too large to convert to C long')."""
    path = str(ramp_root / "A" / "v.avi")

    def draws(seed):
        ds = VideoClipDataset([(path, 0)] * 3, ["A"], sampling="random", frames_per_clip=2, seed=seed, progress=False)
        return ds, [ds.frame_indices(i)[1].tolist() for i in range(3)]

    ds, got = draws(np.int64(7))
    assert type(ds.seed) is int and got == draws(7)[1]
    for bad in (True, 1.5, "7"):
        with pytest.raises(TypeError, match=f"seed must be an int or None, got {bad!r}"):
            draws(bad)
