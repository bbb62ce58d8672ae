"""A clip data set asked for an item as NumPy and torch hand it out, and given labels that index its classes."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Subset

from zoo.video.synthetic import render_clip, write_video
from zoo.video.ucf101 import VideoClipDataset


@pytest.fixture(scope="module")
def two_videos(tmp_path_factory) -> list[tuple[str, int]]:
    root = tmp_path_factory.mktemp("two")
    rng = np.random.default_rng(0)
    paths = [write_video(root / f"{label}.avi", render_clip(label, rng, 16, 12)) for label in (0, 1)]
    return [(str(p), label) for label, p in enumerate(paths)]


@pytest.mark.parametrize("sampling", ["random", "segments"])
def test_seeded_sampling_takes_numpy_and_tensor_item_indices(two_videos, sampling):
    """Before: ``Subset(ds, np.arange(n))`` (or ``SubsetRandomSampler`` of an array) failed with "Python int too
    large to convert to C long", and ``Subset(ds, torch.randperm(n))`` with "manual_seed expected a long, but got
    Tensor", in the seed drawn from (seed, epoch, item)."""
    kw = {"num_segments": 3} if sampling == "segments" else {"frames_per_clip": 4}
    ds = VideoClipDataset(two_videos, ["a", "b"], sampling=sampling, seed=3, progress=False, **kw)
    for item in (np.int64(1), np.int32(1), torch.tensor(1)):
        assert torch.equal(ds.frame_indices(item)[1], ds.frame_indices(1)[1])
        assert torch.equal(ds[item][0], ds[1][0])
    batches = list(DataLoader(Subset(ds, np.arange(len(ds))), batch_size=2))
    assert torch.equal(batches[0][0], torch.stack([ds[0][0], ds[1][0]]))
    with pytest.raises(TypeError, match=r"an item index must be an int, got 1.0"):
        ds[1.0]


@pytest.mark.parametrize("label", [-1, 2, True, 1.0])
def test_a_label_that_is_no_class_index_is_refused_naming_the_video(two_videos, label):
    """Before: -1 was taken (and failed in the first batch's loss, "Target -1 is out of bounds"), True taken as
    class 1, and 2 failed in the constructor with a bare "list index out of range"."""
    (first, _), (second, _) = two_videos
    with pytest.raises(ValueError, match=rf"{re.escape(second)}: label {label!r} is not a class index: expected an int from 0 "
                                         r"to 1"):
        VideoClipDataset([(first, 0), (second, label)], ["a", "b"], progress=False)
    ds = VideoClipDataset([(first, torch.tensor(0)), (second, np.int64(1))], ["a", "b"], progress=False)
    assert ds.labels == [0, 1] and all(type(label) is int for label in ds.labels)
