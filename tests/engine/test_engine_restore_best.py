"""RestoreBest: the model ends at the weights of its best epoch by the monitored key."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, RestoreBest, fit


def _data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    return x, (x[:, 0] * x[:, 1] > 0).long()


def test_restore_best_loads_the_best_epoch_back():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    seen = {}
    record = LambdaCallback(on_epoch_end=lambda s, row: seen.__setitem__(
        s.epoch + 1, {k: v.clone() for k, v in s.model.state_dict().items()}))
    keep = RestoreBest("val_loss")
    # a large lr makes the validation loss move around, so the best epoch is rarely the last one
    result = fit(model, _data(128, 0), _data(64, 1), epochs=6, lr=0.3, optimizer="sgd", progress=False,
                 callbacks=[record, keep])
    losses = [r["val_loss"] for r in result.history]
    assert keep.best_epoch == losses.index(min(losses)) + 1 and keep.best_value == min(losses)
    for k, v in model.state_dict().items():
        assert torch.equal(v, seen[keep.best_epoch][k])


def test_restore_best_names_a_missing_key():
    model = nn.Linear(2, 2)
    with pytest.raises(KeyError, match="val_accuracy"):
        fit(model, _data(32, 0), epochs=1, progress=False, callbacks=[RestoreBest("val_accuracy")])
    with pytest.raises(ValueError, match="mode"):
        RestoreBest("val_loss", mode="up")
