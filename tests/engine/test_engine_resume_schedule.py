"""A resume with more epochs continues every schedule on the curve of the new length."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.engine import fit


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 3, generator=g)
    return x, (x[:, 0] > 0).long()


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(3, 2)


@pytest.mark.parametrize("schedule", ["onecycle", "cosine", "step"])
def test_more_epochs_on_resume_follow_the_longer_schedule(tmp_path, schedule):
    kw = {"batch_size": 8, "lr": 0.01, "schedule": schedule, "progress": False}
    if schedule == "step":
        kw["schedule_options"] = {"step_size": 1, "gamma": 0.5}
    longer = fit(_net(), _data(), epochs=4, **kw)
    fit(_net(), _data(), epochs=2, checkpoint_dir=tmp_path, **kw)
    # OneCycleLR's restored state kept the old total_steps and refused the ninth step (a raw ValueError)
    resumed = fit(_net(), _data(), epochs=4, checkpoint_dir=tmp_path, resume=True, **kw)
    assert [r["step"] for r in resumed.history] == [4, 8, 12, 16]
    assert [r["lr"] for r in resumed.history[2:]] == pytest.approx([r["lr"] for r in longer.history[2:]], rel=1e-6)


@pytest.mark.parametrize("schedule", ["onecycle", "cosine"])
def test_a_new_lr_on_resume_moves_the_schedule_to_it(tmp_path, schedule):
    kw = {"batch_size": 8, "schedule": schedule, "progress": False}
    target = fit(_net(), _data(), epochs=4, lr=0.1, **kw)
    fit(_net(), _data(), epochs=2, lr=0.01, checkpoint_dir=tmp_path, **kw)
    # OneCycleLR reads each group's max_lr / min_lr: scaling only lr and initial_lr left it at the old peak
    resumed = fit(_net(), _data(), epochs=4, lr=0.1, checkpoint_dir=tmp_path, resume=True, **kw)
    assert [r["lr"] for r in resumed.history[2:]] == pytest.approx([r["lr"] for r in target.history[2:]], rel=1e-6)


def test_a_new_lr_on_resume_of_a_multiplicative_schedule_takes_no_extra_factor(tmp_path):
    """Before: realign_schedule called MultiplicativeLR's get_lr(), which multiplies the lr it holds by one more
    step's factor: the resumed run went on at new_lr * 0.9 ** (steps + 1) where the new curve has steps."""
    def schedule(optimizer, total_steps, steps_per_epoch):
        return torch.optim.lr_scheduler.MultiplicativeLR(optimizer, lambda step: 0.9)

    kw = {"batch_size": 8, "schedule": schedule, "progress": False}
    fit(_net(), _data(), epochs=2, lr=0.01, checkpoint_dir=tmp_path, **kw)
    resumed = fit(_net(), _data(), epochs=3, lr=0.1, checkpoint_dir=tmp_path, resume=True, **kw)
    assert resumed.history[2]["lr"] == pytest.approx(0.1 * 0.9 ** 8, rel=1e-6)


@pytest.mark.parametrize("composite", ["SequentialLR", "ChainedScheduler"])
def test_a_new_lr_or_length_on_resume_of_a_composite_schedule_is_refused_naming_it(tmp_path, composite):
    """Before: a SequentialLR or ChainedScheduler resumed with another lr or epochs failed with torch's bare
    NotImplementedError('') from its get_lr(), after the checkpoint was loaded into the model."""
    from torch.optim import lr_scheduler as sched

    from zoo.engine import ResumeError

    def schedule(optimizer, total_steps, steps_per_epoch):
        warm, decay = sched.LinearLR(optimizer, 0.1, 1.0, total_iters=2), sched.ExponentialLR(optimizer, 0.9)
        return sched.SequentialLR(optimizer, [warm, decay], milestones=[2]) if composite == "SequentialLR" \
            else sched.ChainedScheduler([warm, decay])

    kw = {"batch_size": 8, "schedule": schedule, "progress": False}
    fit(_net(), _data(), epochs=2, lr=0.01, checkpoint_dir=tmp_path, **kw)
    for change in ({"lr": 0.1, "epochs": 2}, {"lr": 0.01, "epochs": 3}):
        with pytest.raises(ResumeError, match=rf"resume: the schedule is a {composite} \(of LinearLR, ExponentialLR\)"
                                              rf", which cannot take (lr|epochs) .* mid-run"):
            fit(_net(), _data(), checkpoint_dir=tmp_path, resume=True, **kw, **change)
    with pytest.warns(UserWarning, match="nothing is trained"):  # the lr and length it ran with: resumed
        assert fit(_net(), _data(), epochs=2, lr=0.01, checkpoint_dir=tmp_path, resume=True, **kw).resumed
