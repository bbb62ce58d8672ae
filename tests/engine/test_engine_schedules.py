"""Schedules: values (warmup, step, cosine, one-cycle per group) and cadence inside fit."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, build_schedule, fit


def lrs(schedule, steps, *, lr=1.0, warmup=0, steps_per_epoch=10, options=None, epochs_mode=False):
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    spec = build_schedule(opt, schedule, total_steps=steps, steps_per_epoch=steps_per_epoch,
                          warmup_steps=warmup, options=options)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        spec.scheduler.step()
    return spec.interval, out


def test_linear_warmup_values():
    interval, seq = lrs(None, 6, lr=0.4, warmup=4)
    assert interval == "batch"
    assert seq == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4, 0.4])


def test_cosine_with_warmup_values():
    _, seq = lrs("cosine", 12, warmup=2, options={"min_lr_ratio": 0.1})
    assert seq[:3] == pytest.approx([0.5, 1.0, 1.0])
    t = (7 - 2) / 10
    assert seq[7] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))
    assert all(a >= b for a, b in itertools.pairwise(seq[2:]))


def test_step_is_per_epoch_unless_warmed_up():
    interval, seq = lrs("step", 4, options={"step_size": 2, "gamma": 0.5})
    assert interval == "epoch" and seq == pytest.approx([1, 1, 0.5, 0.5])  # here each .step() is one epoch
    interval, seq = lrs("step", 8, warmup=2, steps_per_epoch=2, options={"step_size": 2, "gamma": 0.5})
    assert interval == "batch" and seq == pytest.approx([0.5, 1, 1, 1, 0.5, 0.5, 0.5, 0.5])


def test_onecycle_and_inverse_sqrt_shapes():
    _, seq = lrs("onecycle", 20, lr=0.1, warmup=5)
    peak = max(range(20), key=seq.__getitem__)
    # torch's OneCycleLR peaks at step pct_start * total - 1
    assert peak == 4 and seq[4] == pytest.approx(0.1) and seq[0] == pytest.approx(0.1 / 25)
    _, seq = lrs("inverse_sqrt", 16, warmup=4)
    assert seq[3] == pytest.approx(1.0) and seq[15] == pytest.approx(math.sqrt(4 / 16))


def test_bad_schedule_options():
    with pytest.raises(ValueError, match="not used by schedule 'cosine'"):
        lrs("cosine", 4, options={"gamma": 0.1})


def _counts(schedule, **kw):
    seen = {}

    def end(state):
        seen["sched"] = state.scheduler.last_epoch
        seen["step"] = state.step

    torch.manual_seed(0)
    x = torch.randn(40, 3)
    fit(nn.Linear(3, 2), (x, (x[:, 0] > 0).long()), epochs=3, batch_size=8, schedule=schedule, progress=False,
        callbacks=[LambdaCallback(on_train_end=end)], **kw)
    return seen


def test_cadence_inside_fit():
    # 40 samples / batch 8 = 5 batches per epoch; with accumulation 2: 3 optimizer steps per epoch.
    assert _counts("cosine") == {"sched": 15, "step": 15}
    assert _counts("cosine", grad_accum_steps=2) == {"sched": 9, "step": 9}
    assert _counts("step", schedule_options={"step_size": 1}) == {"sched": 3, "step": 15}
    assert _counts("onecycle") == {"sched": 15, "step": 15}


class _GrowingBatches(torch.utils.data.Sampler):
    """Batches of 4 over the first ``8 + 8 * epoch`` samples: 2, then 4 batches, with len() the set-up
    epoch's 2 throughout (a token budget's sampler gave the epoch before's count)."""

    def __init__(self) -> None:
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        return iter([list(range(i, i + 4)) for i in range(0, 8 + 8 * self.epoch, 4)])

    def __len__(self) -> int:
        return 2


def test_onecycle_holds_its_last_lr_when_the_run_outgrows_its_steps():
    """Before: onecycle was sized from the set-up batch count (2 steps an epoch, 4 in all) and a run whose later
    epoch has more batches died in it ("Tried to step 5 times. The specified number of total steps is 4")."""
    x = torch.randn(16, 3)
    data = torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())
    for anneal in ("cos", "linear"):
        lrs = []
        loader = torch.utils.data.DataLoader(data, batch_sampler=_GrowingBatches())
        seen = LambdaCallback(on_batch_end=lambda state, logs, lrs=lrs: lrs.append(logs["lr"]))
        result = fit(nn.Linear(3, 2), loader, epochs=2, lr=0.1, schedule="onecycle", progress=False,
                     schedule_options={"anneal_strategy": anneal}, callbacks=[seen])
        assert [row["step"] for row in result.history] == [2, 6]
        end = 0.1 / 25 / 1e4  # OneCycleLR's last lr: max_lr / div_factor / final_div_factor
        assert lrs[3:] == pytest.approx([end] * 3)  # held there, never below 0


def test_warmup_steps_is_refused_where_it_would_not_be_applied():
    """Before: warmup_steps beside a schedule callable (ExponentialLR, ReduceLROnPlateau) was dropped without a
    word, and beside onecycle's pct_start it went unused too (pct_start set the rising phase)."""
    from torch.optim.lr_scheduler import ExponentialLR, LinearLR, ReduceLROnPlateau, SequentialLR

    trained = []
    x = torch.randn(16, 3)
    data = (x, (x[:, 0] > 0).long())
    kw = {"batch_size": 4, "lr": 0.1, "progress": False, "forward_fn": lambda m, b: trained.append(1) or (m(b[0]), b[1])}
    with pytest.raises(ValueError, match=r"warmup_steps=4 is not applied with a schedule callable \(this one returned "
                                         r"ExponentialLR\).*expected warmup_steps=0 .*SequentialLR\(optimizer, "
                                         r"\[LinearLR\(optimizer, start_factor=1 / 4, total_iters=3\)"):
        fit(nn.Linear(3, 2), data, schedule=lambda o, total, spe: ExponentialLR(o, 0.9), warmup_steps=4, **kw)
    with pytest.raises(ValueError, match=r"returned ReduceLROnPlateau.*cannot follow a warmup.*warmup_steps=0"):
        fit(nn.Linear(3, 2), data, schedule=lambda o, total, spe: ReduceLROnPlateau(o), warmup_steps=4, **kw)
    with pytest.raises(ValueError, match=r"schedule='onecycle' with warmup_steps=2 and schedule_options pct_start=0.5: "
                                         r"both set .*warmup_steps=2 is pct_start=0.5 of this run's 4 steps.*give one"):
        fit(nn.Linear(3, 2), data, schedule="onecycle", warmup_steps=2, schedule_options={"pct_start": 0.5}, **kw)
    assert not trained

    def warmed(o, total, spe):  # what the refusal says to write
        return SequentialLR(o, [LinearLR(o, start_factor=1 / 4, total_iters=3), ExponentialLR(o, 0.5)], milestones=[4])

    lrs = []  # the lr of each next step: fit's warmup of 4 (0.025, 0.05, 0.075, 0.1), then the callable's
    fit(nn.Linear(3, 2), data, epochs=2, schedule=warmed, callbacks=[LambdaCallback(on_batch_end=lambda s, logs: lrs.append(
        logs["lr"]))], **kw)
    assert lrs == pytest.approx([0.05, 0.075, 0.1, 0.1, 0.05, 0.025, 0.0125, 0.00625])


@pytest.mark.parametrize(("options", "match"), [
    ({"schedule": "step", "schedule_options": {"step_size": 0}}, r"step_size must be an int >= 1 .*got 0"),
    ({"schedule": "step", "schedule_options": {"gamma": -1.0}}, r"gamma must be a finite number > 0 .*got -1.0"),
    ({"schedule": "cosine", "schedule_options": {"min_lr_ratio": -1.0}}, r"min_lr_ratio must be in \[0, 1\].*got -1.0"),
    ({"schedule": "linear", "schedule_options": {"min_lr_ratio": 2}}, r"min_lr_ratio must be in \[0, 1\].*got 2"),
    ({"schedule": "onecycle", "schedule_options": {"div_factor": 0}}, r"div_factor must be a finite number > 0 .*got 0"),
    ({"lr": math.inf}, r"lr must be a finite number, got inf"),
])
def test_schedule_settings_that_drive_the_lr_negative_or_fail_late_are_refused_up_front(options, match):
    """Before: gamma=-1 and a negative min_lr_ratio trained at a negative lr, step_size=0 raised a
    ZeroDivisionError after a whole epoch, and lr=inf was taken."""
    trained = []
    x = torch.randn(16, 3)
    with pytest.raises(ValueError, match=match):
        fit(nn.Linear(3, 2), (x, (x[:, 0] > 0).long()), epochs=2, batch_size=4, progress=False,
            forward_fn=lambda m, b: trained.append(1) or (m(b[0]), b[1]), **options)
    assert not trained
