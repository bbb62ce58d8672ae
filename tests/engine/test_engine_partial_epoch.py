"""An epoch that ``request_stop`` ends before its last batch, on data without ``len()`` (a streaming data set):
marked in its row, and finished by its resume, as one of a sized data set is."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, fit


class Stream(torch.utils.data.IterableDataset):
    """96 samples, the same every pass but for their noise (drawn from the global generator, in the main process):
    6 batches of 16, which the loader cannot count beforehand."""

    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        for _ in range(96):
            x = torch.randn(4, generator=g)
            yield x + 0.1 * torch.randn(4), int(x.sum() > 0)


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))


def stop_at(epoch: int, batch: int) -> LambdaCallback:
    def hook(state, logs):
        if state.epoch == epoch and state.batch == batch:
            state.request_stop("time budget")

    return LambdaCallback(on_batch_end=hook)


KW = {"epochs": 3, "batch_size": 16, "progress": False, "seed": 1}


def strip(history):
    return [{k: v for k, v in row.items() if k != "epoch_time_s"} for row in history]


@pytest.mark.parametrize("accum", [1, 4])
def test_a_stop_inside_an_epoch_of_a_streaming_data_set_is_marked_and_its_resume_finishes_it(tmp_path, accum):
    """Before: the row of epoch 2, stopped after 2 of its 6 batches, had no ``batches_trained`` (the check needed
    len()), and the resume went on with epoch 3 without a word, its 4 other batches never trained; then it went on
    with epoch 3 and said so. With ``grad_accum_steps=4`` the next batch was fetched (its noise drawn) before the
    stopped batch trained: the resume fetches it from the states it was fetched with."""
    full = fit(net(), Stream(), grad_accum_steps=accum, **KW)
    first = fit(net(), Stream(), checkpoint_dir=tmp_path, callbacks=[stop_at(1, 1)], grad_accum_steps=accum, **KW)
    assert [row.get("batches_trained") for row in first.history] == [None, 2]
    assert [row["step"] for row in first.history] == ([6, 8] if accum == 1 else [2, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = fit(net(), Stream(), checkpoint_dir=tmp_path, resume=True, grad_accum_steps=accum, **KW)
    assert strip(resumed.history) == strip(full.history)
    for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)

    # a stop at a streaming epoch's last batch ends a whole epoch: nothing marked
    whole = fit(net(), Stream(), callbacks=[stop_at(1, 5)], **KW)
    assert [(row["step"], row.get("batches_trained")) for row in whole.history] == [(6, None), (12, None)]
