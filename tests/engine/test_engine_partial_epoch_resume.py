"""A resume from an epoch that ``request_stop`` ended before its last batch finishes that epoch from the next batch
and repeats the uninterrupted run bit for bit: weights, optimizer, schedule and weight average, history rows, best
epoch and ``metrics.csv``, with dropout and random augmentation drawn in the main process or in workers."""

from __future__ import annotations

import csv
import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from zoo.engine import LambdaCallback, fit
from zoo.engine.checkpoint import tensors_digest


class Noisy(Dataset):
    """48 points (3 batches of 16) with fresh noise at every read: augmentation from the reading process's RNG."""

    def __init__(self, n: int = 48, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x.sum(1) > 0).long()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i] + 0.1 * torch.randn(4), self.y[i]


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))


def plateau(optimizer, total_steps, steps_per_epoch):
    return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, factor=0.5)


def stop_at(*points) -> LambdaCallback:
    def hook(state, logs):
        if (state.epoch, state.batch) in points:
            state.request_stop("time budget")

    return LambdaCallback(on_batch_end=hook)


def strip(history):
    return [{k: v for k, v in row.items() if k != "epoch_time_s"} for row in history]


def csv_rows(folder):
    with open(folder / "metrics.csv", newline="") as fh:
        return [(row["epoch"], row["train_loss"]) for row in csv.DictReader(fh)]


CASES = {
    "0-workers": ({}, [(1, 0)]),
    "2-workers": ({"num_workers": 2}, [(1, 1)]),
    # the stop falls inside an accumulation window: its gradients go on in the resumed run; a per-batch schedule
    "accum-onecycle": ({"grad_accum_steps": 2, "schedule": "onecycle"}, [(1, 0)]),
    # a per-epoch schedule steps once for the epoch; the average goes on from the stop
    "ema-step": ({"ema_decay": 0.9, "schedule": "step", "schedule_options": {"step_size": 1, "gamma": 0.5}},
                 [(1, 1)]),
    # validation, ReduceLROnPlateau and the monitor judge the finished epoch once; stopped twice inside it
    "val-plateau-twice": ({"val": True, "schedule": plateau, "lr": 0.5}, [(1, 0), (1, 1)]),
    "first-epoch": ({"val": True}, [(0, 1)]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_resume_finishes_the_stopped_epoch_as_the_uninterrupted_run(tmp_path, case):
    """Before: the resume went on with the next epoch (warning that the rest of the stopped one is not trained),
    so every later row, step count and weight was another run's."""
    options, stops = CASES[case]
    options = dict(options)
    val = options.pop("val", False)

    def run(folder, **extra):
        kw = {"epochs": 3, "lr": 1e-2, **options}
        return fit(net(), Noisy(), Noisy(16, 1) if val else None, checkpoint_dir=tmp_path / folder, batch_size=16,
                   seed=1, progress=False, **kw, **extra)

    full = run("full")
    for point in stops:
        first = run("part", callbacks=[stop_at(point)], resume=True)
        assert first.history[-1]["batches_trained"] == point[1] + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing said: nothing is left untrained
        resumed = run("part", resume=True)
    assert strip(resumed.history) == strip(full.history)
    assert (resumed.best_epoch, resumed.best_metric) == (full.best_epoch, full.best_metric)
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    want = torch.load(tmp_path / "full" / "epoch-0003.pt", weights_only=True)
    got = torch.load(tmp_path / "part" / "epoch-0003.pt", weights_only=True)
    assert want["step"] == got["step"] and want["scheduler"] == got["scheduler"]
    for key, state in want["optimizer"]["state"].items():
        for name, value in state.items():
            assert torch.equal(value, got["optimizer"]["state"][key][name]), (key, name)
    for name, value in (want["extra"].get("ema") or {}).items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, got["extra"]["ema"][name]), name
    assert csv_rows(tmp_path / "part") == csv_rows(tmp_path / "full")
    assert torch.equal(torch.load(tmp_path / "full" / "best.pt", weights_only=True)["model"]["4.weight"],
                       torch.load(tmp_path / "part" / "best.pt", weights_only=True)["model"]["4.weight"])


def test_a_users_shuffling_loader_resumes_its_epoch_too(tmp_path):
    """A DataLoader(shuffle=True) whose RandomSampler draws its order from the global generator as the epoch's
    iterator starts: the resume draws it from the states of then, not from those of the stop."""
    def run(folder, **extra):
        loader = DataLoader(Noisy(), batch_size=16, shuffle=True)
        return fit(net(), loader, checkpoint_dir=tmp_path / folder, epochs=2, seed=3, progress=False, **extra)

    full = run("full")
    run("part", callbacks=[stop_at((0, 0))])
    resumed = run("part", resume=True)
    assert strip(resumed.history) == strip(full.history)
    for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)


def test_a_partial_epoch_moves_no_epoch_state(tmp_path):
    """Its row is logged and marked, but the monitor, best.pt and a per-epoch schedule wait for the epoch's end:
    before, the stopped run's partial epoch could become best.pt, and its resume stepped the schedule again."""
    stopped = fit(net(), Noisy(), Noisy(16, 1), checkpoint_dir=tmp_path, epochs=3, batch_size=16, seed=1,
                  progress=False, schedule="step", schedule_options={"step_size": 1, "gamma": 0.5},
                  callbacks=[stop_at((1, 0))])
    assert [row.get("batches_trained") for row in stopped.history] == [None, 1]
    assert stopped.best_epoch == 1
    saved = torch.load(tmp_path / "epoch-0002.pt", weights_only=True)
    assert saved["scheduler"]["last_epoch"] == 1 and saved["best_epoch"] == 1
    assert torch.load(tmp_path / "best.pt", weights_only=True)["epoch"] == 1


def test_a_checkpoint_without_the_epochs_record_goes_on_with_the_next_epoch_and_says_why(tmp_path):
    """Where the rest of the epoch cannot be repeated (a checkpoint written before the record, or one of another
    number of processes) the old way is kept, and said."""
    step = {"schedule": "step", "schedule_options": {"step_size": 1, "gamma": 0.5}, "lr": 0.1}
    fit(net(), Noisy(), checkpoint_dir=tmp_path, epochs=3, batch_size=16, seed=1, progress=False,
        callbacks=[stop_at((1, 0))], **step)
    path = tmp_path / "epoch-0002.pt"
    record = torch.load(path, weights_only=True)["extra"]["partial_epoch"]
    for records, why in (([], "written before checkpoints recorded"), (record * 2, "written by 2 process")):
        state = torch.load(path, weights_only=True)
        state["extra"]["partial_epoch"] = records
        state["digest"] = tensors_digest(state)
        torch.save(state, path)
        with pytest.warns(UserWarning, match=rf"ends epoch 2 after 1 batches .*\(it was {why}.*other 2 of 3 batches are "
                                             r"not trained.*epochs=4"):
            resumed = fit(net(), Noisy(), checkpoint_dir=tmp_path / why, epochs=3, batch_size=16, seed=1,
                          progress=False, resume=path, **step)
        assert [(row["epoch"], row.get("batches_trained")) for row in resumed.history] == [(1, None), (2, 1), (3, None)]
    # the per-epoch schedule stepped for the partial epoch its checkpoint left unstepped: epoch 3 runs at its lr
    assert resumed.history[2]["lr"] == pytest.approx(0.1 * 0.5 ** 2)
