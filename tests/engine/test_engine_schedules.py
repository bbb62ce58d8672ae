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
