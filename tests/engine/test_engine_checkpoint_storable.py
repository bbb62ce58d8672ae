"""What an optimizer's or scheduler's state holds beyond plain data never makes a checkpoint unloadable."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from zoo.engine import LambdaCallback, fit


def data(n: int = 64) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))


@dataclasses.dataclass
class WarmupConfig:
    steps: int = 3


class Warmup:
    """A callable-object lr_lambda (torch saves its ``__dict__`` in the LambdaLR's state) holding a config object."""

    def __init__(self, config: WarmupConfig, total: int) -> None:
        self.config, self.total = config, total

    def __call__(self, step: int) -> float:
        return min(1.0, (step + 1) / self.config.steps) * (1 - step / self.total)


def schedule(optimizer, total_steps, steps_per_epoch):
    return LambdaLR(optimizer, Warmup(WarmupConfig(), total_steps))


def test_a_schedule_whose_lambda_holds_an_object_checkpoints_and_resumes_exactly(tmp_path):
    """Before: the LambdaLR's state held the WarmupConfig, torch.save pickled it, and every checkpoint of the run
    failed to load with weights_only=True: the resume skipped them all as 'truncated or corrupt' and refused."""
    kw = {"epochs": 3, "batch_size": 16, "progress": False, "seed": 2, "schedule": schedule}
    with pytest.warns(RuntimeWarning, match=r"lr_lambdas\[0\]\.config \(WarmupConfig\)"):
        full = fit(net(), data(), checkpoint_dir=tmp_path / "full", **kw)
    stop = LambdaCallback(on_epoch_end=lambda state, row: state.request_stop("interrupted") if row["epoch"] == 2
                          else None)
    with pytest.warns(RuntimeWarning, match="Saved without them"):
        fit(net(), data(), checkpoint_dir=tmp_path / "part", callbacks=[stop], **kw)
    ckpt = torch.load(tmp_path / "part" / "epoch-0002.pt", weights_only=True)
    assert ckpt["scheduler"]["lr_lambdas"] == [{"total": 12}]
    with pytest.warns(RuntimeWarning):
        resumed = fit(net(), data(), checkpoint_dir=tmp_path / "part", resume=True, **kw)
    strip = lambda h: [{k: v for k, v in r.items() if k != "epoch_time_s"} for r in h]
    assert strip(resumed.history) == strip(full.history)
    for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)


@dataclasses.dataclass
class Labels:
    names: tuple = ("cat", "dog")


class Labelled(nn.Module):
    """A network whose extra state is an object of its own class (torch.save pickles it as such)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = net()
        self.labels = Labels()

    def forward(self, x):
        return self.body(x)

    def get_extra_state(self):
        return self.labels

    def set_extra_state(self, state) -> None:
        self.labels = state


def test_a_model_state_a_checkpoint_cannot_keep_is_refused_before_training(tmp_path):
    """Before: the run trained and wrote checkpoints that torch.load(weights_only=True) refused, so the resume
    skipped every one of them as 'truncated or corrupt' and would not start."""
    from zoo.engine import save_checkpoint
    from zoo.engine.checkpoint import CheckpointError

    trained = LambdaCallback(on_batch_end=lambda state, logs: pytest.fail("trained before refusing"))
    with pytest.raises(CheckpointError, match=r"Labelled's state dict holds .*_extra_state \(Labels\).*get_extra_state"):
        fit(Labelled(), data(), checkpoint_dir=tmp_path / "run", epochs=1, batch_size=16, progress=False,
            callbacks=[trained])
    assert not list((tmp_path / "run").glob("*.pt"))
    with pytest.raises(CheckpointError, match=r"_extra_state \(Labels\)"):
        save_checkpoint(tmp_path / "direct.pt", model=Labelled())
    assert not (tmp_path / "direct.pt").exists()
    # without checkpoints the model trains as before
    assert len(fit(Labelled(), data(), epochs=1, batch_size=16, progress=False).history) == 1
