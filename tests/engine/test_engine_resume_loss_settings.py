"""A resume with a loss of other settings (label smoothing, class weights, reduction) is refused, naming them, as
any other changed setting is: a ``loss_fn`` module was recorded by its class's name alone."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.engine import fit
from zoo.engine.resume import ResumeError

KW = {"batch_size": 16, "progress": False, "seed": 0}


def data(n: int = 64) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


@pytest.mark.parametrize(("changed", "named"), [
    (nn.CrossEntropyLoss(label_smoothing=0.3), r"label_smoothing=0\.3"),
    (nn.CrossEntropyLoss(weight=torch.tensor([1.0, 9.0])), r"weight=\[1\.0, 9\.0\]"),
    (nn.CrossEntropyLoss(reduction="sum"), r"reduction='sum'"),
], ids=["label_smoothing", "class-weights", "reduction"])
def test_a_resume_with_a_loss_of_other_settings_is_refused_naming_them(tmp_path, changed, named):
    """Before: each of these resumed without a word (all recorded as '<CrossEntropyLoss>'), the rest of the run
    trained on another loss (reduction='sum' took train_loss from 0.69 to 11.0)."""
    fit(net(), data(), checkpoint_dir=tmp_path, epochs=1, loss_fn=nn.CrossEntropyLoss(), **KW)
    with pytest.raises(ResumeError, match=rf"loss_fn: .*CrossEntropyLoss\(.*in epoch-0001\.pt.*{named}.* now"):
        fit(net(), data(), checkpoint_dir=tmp_path, epochs=2, resume=True, loss_fn=changed, **KW)
    # the same settings in a new object resume, as before
    resumed = fit(net(), data(), checkpoint_dir=tmp_path, epochs=2, resume=True, loss_fn=nn.CrossEntropyLoss(), **KW)
    assert [row["epoch"] for row in resumed.history] == [1, 2]


def test_a_checkpoint_that_recorded_the_loss_by_name_alone_still_resumes_and_compares_the_class(tmp_path):
    """A checkpoint written before losses were recorded with their settings ('<CrossEntropyLoss>') resumes with a
    loss of that class; a loss of another class is refused, as it was."""
    fit(net(), data(), checkpoint_dir=tmp_path, epochs=1, loss_fn=nn.CrossEntropyLoss(), **KW)
    path = tmp_path / "epoch-0001.pt"
    ckpt = torch.load(path, weights_only=True)
    ckpt["config"]["loss_fn"] = "<CrossEntropyLoss>"  # the config holds no tensor: the digest still holds
    torch.save(ckpt, path)
    with pytest.raises(ResumeError, match=r"loss_fn: '<CrossEntropyLoss>' in epoch-0001\.pt, \"<NLLLoss\("):
        fit(net(), data(), checkpoint_dir=tmp_path, epochs=2, resume=True, loss_fn=nn.NLLLoss(), **KW)
    resumed = fit(net(), data(), checkpoint_dir=tmp_path, epochs=2, resume=True,
                  loss_fn=nn.CrossEntropyLoss(label_smoothing=0.1), **KW)
    assert [row["epoch"] for row in resumed.history] == [1, 2]
