"""An epoch that ``request_stop`` ends before its last batch, on data without ``len()`` (a streaming data set):
marked in its row and said on resume, as one of a sized data set is."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, fit


class Stream(torch.utils.data.IterableDataset):
    """96 samples, the same every pass: 6 batches of 16, which the loader cannot count beforehand."""

    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        for _ in range(96):
            x = torch.randn(4, generator=g)
            yield x, int(x.sum() > 0)


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def stop_at(epoch: int, batch: int) -> LambdaCallback:
    def hook(state, logs):
        if state.epoch == epoch and state.batch == batch:
            state.request_stop("time budget")

    return LambdaCallback(on_batch_end=hook)


KW = {"epochs": 3, "batch_size": 16, "progress": False, "seed": 1}


def test_a_stop_inside_an_epoch_of_a_streaming_data_set_is_marked_and_its_resume_says_what_it_skips(tmp_path):
    """Before: the row of epoch 2, stopped after 2 of its 6 batches, had no ``batches_trained`` (the check needed
    len()), and the resume went on with epoch 3 without a word, its 4 other batches never trained."""
    first = fit(net(), Stream(), checkpoint_dir=tmp_path, callbacks=[stop_at(1, 1)], **KW)
    assert [row.get("batches_trained") for row in first.history] == [None, 2]
    assert [row["step"] for row in first.history] == [6, 8]
    with pytest.warns(UserWarning, match=r"ends epoch 2 after 2 batches .*its other batches are not trained.*"
                                         r"epochs=4"):
        resumed = fit(net(), Stream(), checkpoint_dir=tmp_path, resume=True, **KW)
    assert [row["epoch"] for row in resumed.history] == [1, 2, 3]

    # a stop at a streaming epoch's last batch ends a whole epoch: nothing marked, nothing said
    whole = fit(net(), Stream(), callbacks=[stop_at(1, 5)], **KW)
    assert [(row["step"], row.get("batches_trained")) for row in whole.history] == [(6, None), (12, None)]
