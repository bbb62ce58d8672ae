"""RestoreBest across a resume, and with a non-finite monitored value."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, RestoreBest, fit


def _data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    return x, (x[:, 0] * x[:, 1] > 0).long()


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))


KW = {"epochs": 6, "lr": 0.3, "optimizer": "sgd", "progress": False, "batch_size": 32}
SCORES = [0.1, 0.9, 0.3, 0.2, 0.4, 0.5]  # the best epoch (2) lies before the interruption (3)


def _score() -> LambdaCallback:  # a monitored value by epoch, the same in every run
    return LambdaCallback(on_epoch_end=lambda s, row: row.__setitem__("score", SCORES[s.epoch]))


def _stop_after(epoch: int) -> LambdaCallback:
    return LambdaCallback(on_epoch_end=lambda s, row: s.request_stop("interrupted") if s.epoch + 1 == epoch else None)


def test_a_resumed_run_restores_a_best_epoch_from_before_the_resume(tmp_path):
    whole = fit(_net(), _data(128, 0), _data(64, 1), checkpoint_dir=tmp_path / "a",
                callbacks=[_score(), keep_a := RestoreBest("score", mode="max")], **KW)
    fit(_net(), _data(128, 0), _data(64, 1), checkpoint_dir=tmp_path / "b", callbacks=[_score(), _stop_after(3)], **KW)
    resumed = fit(_net(), _data(128, 0), _data(64, 1), checkpoint_dir=tmp_path / "b", resume=True,
                  callbacks=[_score(), keep_b := RestoreBest("score", mode="max")], **KW)
    assert [r["val_loss"] for r in resumed.history] == [r["val_loss"] for r in whole.history]  # an exact resume
    assert (keep_b.best_epoch, keep_b.best_value) == (keep_a.best_epoch, keep_a.best_value) == (2, 0.9)
    for k, v in whole.model.state_dict().items():
        assert torch.equal(v, resumed.model.state_dict()[k]), k


def test_a_resume_without_the_best_epochs_checkpoint_says_so(tmp_path):
    fit(_net(), _data(128, 0), _data(64, 1), checkpoint_dir=tmp_path, keep_last=1,
        callbacks=[_score(), _stop_after(3)], **KW)  # best.pt follows val_loss, epoch-0002.pt is pruned
    (tmp_path / "best.pt").unlink()
    with pytest.warns(UserWarning, match="epoch 2, before the resume"):
        fit(_net(), _data(128, 0), _data(64, 1), checkpoint_dir=tmp_path, resume=True, keep_last=1,
            callbacks=[_score(), keep := RestoreBest("score", mode="max")], **KW)
    assert (keep.best_epoch, keep.best_value) == (6, 0.5)


def test_a_nan_epoch_is_never_kept_as_the_best():
    keep = RestoreBest("score", mode="max")
    values = iter([float("nan"), 0.5, 0.7, 0.6])
    add = LambdaCallback(on_epoch_end=lambda s, row: row.__setitem__("score", next(values)))
    fit(_net(), _data(64, 0), epochs=4, progress=False, callbacks=[add, keep], monitor="train_loss")
    assert keep.best_epoch == 3 and keep.best_value == 0.7 and not math.isnan(keep.best_value)


def test_with_the_runs_min_delta_the_epoch_kept_is_the_one_fit_reports_and_a_bad_one_is_refused(tmp_path):
    """An epoch better by less than min_delta is no improvement to fit (best_epoch, best.pt); RestoreBest kept it,
    so the run ended with weights best.pt does not hold, which a resume cannot read back once pruned."""
    scores = iter([0.5, 0.52, 0.51, 0.4])
    add = LambdaCallback(on_epoch_end=lambda s, row: row.__setitem__("score", next(scores)))
    keep = RestoreBest("score", mode="max", min_delta=0.05)
    result = fit(_net(), _data(64, 0), epochs=4, progress=False, monitor="score", monitor_mode="max",
                 early_stopping_min_delta=0.05, checkpoint_dir=tmp_path, callbacks=[add, keep])
    assert keep.best_epoch == result.best_epoch == torch.load(tmp_path / "best.pt", weights_only=True)["epoch"] == 1
    for bad in (-0.1, math.inf, "0.1", True):
        with pytest.raises(ValueError, match=r"min_delta \(as fit's early_stopping_min_delta\) must be a finite number "
                                             rf">= 0.*got {bad!r}"):
            RestoreBest("val_loss", min_delta=bad)
