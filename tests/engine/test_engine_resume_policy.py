"""One resume policy: a changed lr / epochs / patience is applied and reported; any other changed setting
(batch size, schedule, seed, ...) is refused with the keys listed, before anything is loaded."""

from __future__ import annotations

import logging
import os

import pytest
import torch
from torch import nn

from zoo.engine import ResumeError, fit
from zoo.engine.checkpoint import CheckpointError, read_checkpoint


def _data(n: int = 64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=g)
    return x, (x[:, 0] > 0).long()


def _net(out: int = 2) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, out))


def _first_run(folder, **options):
    return fit(_net(), _data(), epochs=2, batch_size=16, lr=1e-2, checkpoint_dir=folder, progress=False, **options)


def test_a_changed_lr_and_epochs_are_applied_and_reported(tmp_path, caplog):
    _first_run(tmp_path / "run")
    with caplog.at_level(logging.INFO, logger="zoo"):
        result = fit(_net(), _data(), epochs=4, batch_size=16, lr=5e-2, checkpoint_dir=tmp_path / "run",
                     resume=True, progress=False)
    assert result.resumed["changed"] == {"lr": (1e-2, 5e-2), "epochs": (2, 4)}
    assert [row["lr"] for row in result.history] == pytest.approx([1e-2, 1e-2, 5e-2, 5e-2])
    assert len(result.history) == 4
    said = caplog.text
    assert "resume: lr 0.01 -> 0.05 (applied)" in said and "resume: epochs 2 -> 4 (applied)" in said


def test_a_changed_num_workers_is_applied_and_warns_the_run_will_not_repeat(tmp_path):
    _first_run(tmp_path / "run")
    with pytest.warns(UserWarning, match=r"resume: epoch-0002\.pt was trained with num_workers=0, this run has "
                                         r"num_workers=1: .* will not repeat the uninterrupted one bit for bit"):
        result = fit(_net(), _data(), epochs=3, batch_size=16, lr=1e-2, num_workers=1,
                     checkpoint_dir=tmp_path / "run", resume=True, progress=False)
    assert result.resumed["changed"] == {"num_workers": (0, 1), "epochs": (2, 3)}


def test_the_workers_compared_on_resume_are_the_loaders_not_the_option(tmp_path):
    """The warning compared the num_workers option: silent when a passed DataLoader's workers changed, and a
    warning when the same DataLoader ran both halves with the option given to one of them only."""
    import warnings

    from torch.utils.data import DataLoader

    def loader(workers):
        return DataLoader(torch.utils.data.TensorDataset(*_data()), batch_size=16, shuffle=True, num_workers=workers)

    opts = {"lr": 1e-2, "progress": False, "checkpoint_dir": tmp_path / "run"}
    fit(_net(), loader(1), epochs=1, num_workers=1, **opts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same loader: nothing to say, whatever the option says
        fit(_net(), loader(1), epochs=2, resume=True, **opts)
    with pytest.warns(UserWarning, match=r"trained with num_workers=1, this run has num_workers=0"):
        fit(_net(), loader(0), epochs=3, resume=True, **opts)


def test_a_changed_lr_scales_the_schedule_too(tmp_path):
    _first_run(tmp_path / "run", schedule="cosine", warmup_steps=2)
    result = fit(_net(), _data(), epochs=4, batch_size=16, lr=2e-2, checkpoint_dir=tmp_path / "run", resume=True,
                 progress=False, schedule="cosine", warmup_steps=2)
    straight = fit(_net(), _data(), epochs=4, batch_size=16, lr=1e-2, schedule="cosine", warmup_steps=2,
                   progress=False)
    # the resumed epochs run at twice the lr the original schedule had at the same point
    assert result.history[2]["lr"] == pytest.approx(2 * straight.history[2]["lr"])


@pytest.mark.parametrize("change", [{"batch_size": 8}, {"seed": 3}, {"weight_decay": 0.1},
                                    {"schedule": "cosine"}, {"label_smoothing": 0.1}])
def test_a_setting_that_cannot_change_mid_run_is_refused_with_the_key(tmp_path, change):
    _first_run(tmp_path / "run")
    options = {"epochs": 3, "batch_size": 16, "lr": 1e-2, "progress": False, **change}
    key = next(iter(change))
    with pytest.raises(ResumeError, match=rf"{key}: .* in epoch-0002\.pt, .* now"):
        fit(_net(), _data(), checkpoint_dir=tmp_path / "run", resume=True, **options)


def test_another_architecture_is_refused_naming_keys_and_shapes(tmp_path):
    _first_run(tmp_path / "run")
    with pytest.raises(CheckpointError, match=r"2\.weight: checkpoint \[2, 16\] vs model \[3, 16\]"):
        fit(_net(out=3), _data(), epochs=3, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "run", resume=True,
            progress=False)


def test_a_longer_patience_lets_an_early_stopped_run_continue(tmp_path):
    flat = (torch.zeros(32, 6), torch.zeros(32, dtype=torch.long))  # nothing to learn: the loss stalls
    fit(_net(), flat, epochs=6, batch_size=16, lr=0.0, early_stopping_patience=1, monitor="train_loss",
        checkpoint_dir=tmp_path / "run", progress=False)
    again = fit(_net(), flat, epochs=6, batch_size=16, lr=0.0, early_stopping_patience=3, monitor="train_loss",
                checkpoint_dir=tmp_path / "run", resume=True, progress=False)
    assert again.resumed["changed"] == {"early_stopping_patience": (1, 3)}
    assert len(again.history) > 2  # it trained on where the first run had stopped


def test_a_folder_whose_checkpoints_all_fail_to_load_is_not_trained_over(tmp_path):
    """Every epoch-*.pt torn (0 bytes): resume=True warned, trained from scratch and replaced the good best.pt
    (with no best.pt to lose, nothing loadable is still a fresh start: test_engine_filesystem)."""
    folder = tmp_path / "run"
    _first_run(folder, val_data=_data(16))
    best = (folder / "best.pt").read_bytes()
    for path in folder.glob("epoch-*.pt"):
        path.write_bytes(b"")
    with pytest.warns(UserWarning, match="resume: skipped"), \
            pytest.raises(CheckpointError, match=r"none of its 2 epoch checkpoint\(s\) loads.*best\.pt \(epoch \d\) "
                                                 r"loads: resume=.* continues from it. The run is not started over"):
        fit(_net(), _data(), epochs=4, batch_size=16, lr=1e-2, checkpoint_dir=folder, resume=True, progress=False,
            val_data=_data(16))
    assert (folder / "best.pt").read_bytes() == best
    for path in folder.glob("epoch-*.pt"):  # gone rather than torn: the same
        path.unlink()
    with pytest.raises(CheckpointError, match="it holds no epoch-\\*.pt, but best.pt"):
        fit(_net(), _data(), epochs=4, batch_size=16, lr=1e-2, checkpoint_dir=folder, resume=True, progress=False,
            val_data=_data(16))
    resumed = fit(_net(), _data(), epochs=4, batch_size=16, lr=1e-2, checkpoint_dir=folder,
                  resume=folder / "best.pt", progress=False, val_data=_data(16))
    assert resumed.resumed is not None and len(resumed.history) == 4


def test_ctrl_c_mid_epoch_names_the_checkpoint_that_continues_the_run(tmp_path):
    """A real SIGINT in epoch 3: the KeyboardInterrupt names epoch 2's checkpoint, which resumes the run."""
    import signal

    from zoo.engine import Callback

    class CtrlCInEpoch3(Callback):
        def on_batch_end(self, state, logs) -> None:
            if state.epoch == 2:  # counted from 0
                signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a user's process has Python's handler
    try:
        with pytest.raises(KeyboardInterrupt, match=r"stopped by Ctrl-C; .*epoch-0002\.pt continues it"):
            fit(_net(), _data(), epochs=4, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "run", progress=False,
                callbacks=[CtrlCInEpoch3()])
        # no checkpoint_dir: nothing to name, and said so (it said only "interrupted", 12 epochs lost)
        with pytest.raises(KeyboardInterrupt, match=r"^training stopped by Ctrl-C; nothing was saved \(no "
                                                    r"checkpoint_dir\): give checkpoint_dir= \(on the command line "
                                                    r"--checkpoint-dir DIR"):
            fit(_net(), _data(), epochs=4, batch_size=16, lr=1e-2, progress=False, callbacks=[CtrlCInEpoch3()])
    finally:
        signal.signal(signal.SIGINT, previous)
    result = fit(_net(), _data(), epochs=4, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "run", resume=True,
                 progress=False)
    assert result.resumed["checkpoint"].name == "epoch-0002.pt" and len(result.history) == 4


@pytest.mark.parametrize("sigint", ["default_int_handler", "SIG_IGN"], ids=["foreground", "background-job"])
def test_the_zoo_commands_sigterm_names_the_checkpoint_and_itself(tmp_path, sigint):
    """SIGTERM under the `zoo` command said "stopped by Ctrl-C" (SIGINT at Python's handler) or, in a job
    started with & (SIGINT ignored), only "stopped by SIGTERM", naming no checkpoint."""
    import signal

    from zoo._interrupts import sigterm_as_ctrl_c
    from zoo.engine import Callback

    class SigtermInEpoch3(Callback):
        def on_batch_end(self, state, logs) -> None:
            if state.epoch == 2:
                signal.raise_signal(signal.SIGTERM)

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGINT, getattr(signal, sigint))
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sigterm_as_ctrl_c()  # what the `zoo` command installs
        with pytest.raises(KeyboardInterrupt, match=r"^training stopped by SIGTERM; .*epoch-0002\.pt continues it"):
            fit(_net(), _data(), epochs=4, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "run", progress=False,
                callbacks=[SigtermInEpoch3()])
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def test_a_resume_on_other_arrays_is_refused_naming_them(tmp_path):
    """(X, y) in memory: a resume on X[:32] or X * 2 went on as if it were the run's data set (an image folder
    of other files is refused, by its fingerprint)."""
    from zoo.engine.resume import tensors_fingerprint

    _first_run(tmp_path / "run")
    x, y = _data()
    for other in ((x[:32], y[:32]), (x * 2, y), (x.numpy(), (1 - y).numpy())):
        with pytest.raises(ResumeError, match=r"train_tensors: '64 rows; \(64, 6\) float32, \(64,\) int64; [0-9a-f]{16}'"):
            fit(_net(), other, epochs=3, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "run", resume=True,
                progress=False)
    again = fit(_net(), (x.numpy(), y.numpy()), epochs=3, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "run",
                resume=True, progress=False)  # the same arrays, as NumPy: the same data set
    assert again.resumed["changed"] == {"epochs": (2, 3)}
    big = torch.arange(5_000_000, dtype=torch.float32).view(-1, 5)  # 20 MB: sampled rows, not all bytes
    changed = big.clone()
    changed[round(5 * 999_999 / 63)] += 1  # one of the 64 evenly spaced rows
    assert tensors_fingerprint([big]) != tensors_fingerprint([changed])
    assert tensors_fingerprint([big]).startswith("1000000 rows; (1000000, 5) float32; ")


def _lrs_of_a_resumed_run(tmp_path, groups_of, lrs: tuple[float, float]) -> list[list[float]]:
    """Each group's lr at every epoch start: a 1-epoch run at ``lrs[0]``, its resume to 2 epochs at ``lrs[1]``, and
    a fresh 1-epoch run at ``lrs[1]`` (``groups_of(net)``: the param_groups of each run's network)."""
    from zoo.engine.callbacks import Callback

    seen = []

    class LRs(Callback):
        def on_epoch_start(self, state):
            seen.append([g["lr"] for g in state.optimizer.param_groups])

    x, y = _data()

    def run(epochs, lr, **options):
        net = _net()
        fit(net, (x, y), epochs=epochs, batch_size=16, lr=lr, param_groups=groups_of(net), progress=False, amp=None,
            weight_decay=0.0, callbacks=[LRs()], **options)

    run(1, lrs[0], checkpoint_dir=tmp_path / "run")
    run(2, lrs[1], checkpoint_dir=tmp_path / "run", resume=True)
    run(1, lrs[1])  # a fresh run with the resumed settings
    return seen


def test_a_new_lr_on_resume_leaves_a_groups_own_lr(tmp_path):
    """fit's docstring: param_groups keep their own lr. A resume with another lr scaled it too (the head at
    0.001 where a fresh run with the same settings trains it at 0.01)."""
    seen = _lrs_of_a_resumed_run(
        tmp_path, lambda net: [{"params": net[0].parameters()}, {"params": net[2].parameters(), "lr": 0.01}],
        (1e-3, 1e-4))
    assert seen == [[1e-3, 0.01], [1e-4, 0.01], [1e-4, 0.01]]


def test_a_groups_lr_scale_follows_a_new_lr_on_resume(tmp_path):
    """A group at a fraction of fit's lr (timm's lr_scale) runs at that fraction of the new lr after a resume, as a
    fresh run gives it; lr and lr_scale together are refused."""
    seen = _lrs_of_a_resumed_run(
        tmp_path, lambda net: [{"params": net[0].parameters(), "lr_scale": 0.1}, {"params": net[2].parameters()}],
        (1e-2, 1e-3))
    assert seen == [pytest.approx([1e-3, 1e-2]), pytest.approx([1e-4, 1e-3]), pytest.approx([1e-4, 1e-3])]
    x, y = _data()
    net = _net()
    with pytest.raises(ValueError, match=r"param_groups\[0\] gives both lr=0.5 and lr_scale=0.1"):
        fit(net, (x, y), epochs=1, batch_size=16, param_groups=[{"params": net.parameters(), "lr": 0.5,
                                                                "lr_scale": 0.1}], progress=False)


def test_a_refused_param_groups_change_names_the_entries_that_differ(tmp_path):
    """The error printed both param_groups whole, every parameter as '<Parameter>'."""
    x, y = _data()

    def run(head_lr, **options):
        net = _net()
        groups = [{"params": net[0].parameters()}, {"params": net[2].parameters(), "lr": head_lr}]
        return fit(net, (x, y), epochs=2, batch_size=16, param_groups=groups, progress=False,
                   checkpoint_dir=tmp_path / "run", **options)

    run(0.01)
    with pytest.raises(ResumeError) as err:
        run(0.02, resume=True)
    said = str(err.value)
    assert "param_groups[1].lr: 0.01 in epoch-0002.pt, 0.02 now" in said and "<Parameter>" not in said


def test_a_resume_from_another_folders_checkpoint_refuses_a_folder_that_holds_another_run(tmp_path):
    """Before: only a new run checked checkpoint_dir, so resume= naming another folder's file trained into a folder
    of another run: its best.pt overwritten, the new epochs pruned by keep_last against the old run's files."""
    _first_run(tmp_path / "a")
    fit(_net(), _data(), epochs=3, batch_size=16, lr=5e-2, checkpoint_dir=tmp_path / "b", progress=False)
    before = {p.name: p.read_bytes() for p in (tmp_path / "b").glob("*.pt")}
    with pytest.raises(ValueError, match=r"holds another run's checkpoints \(epoch-0003\.pt, best\.pt\): resume=True "
                                         r"continues that run; a run continued from another folder's checkpoint"):
        fit(_net(), _data(), epochs=3, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "b",
            resume=tmp_path / "a" / "epoch-0001.pt", progress=False)
    assert {p.name: p.read_bytes() for p in (tmp_path / "b").glob("*.pt")} == before
    forked = fit(_net(), _data(), epochs=3, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "c",
                 resume=tmp_path / "a" / "epoch-0001.pt", progress=False)  # an empty folder: a fork is fine
    assert forked.resumed is not None and (tmp_path / "c" / "epoch-0003.pt").is_file()


def test_best_pt_is_repaired_from_the_resumed_runs_own_folder_only(tmp_path):
    """Before: checkpoint_dir/epoch-N.pt was copied to best.pt first, even when that file was another run's
    epoch N and the resumed run's own lay beside the checkpoint it resumed from."""
    from zoo.engine.resume import _repair_best

    _first_run(tmp_path / "a")
    fit(_net(), _data(), epochs=2, batch_size=16, lr=5e-2, checkpoint_dir=tmp_path / "b", progress=False,
        monitor="train_accuracy")  # best.pt: epoch 2 of another run, beside its own epoch-0001.pt
    (tmp_path / "b" / "best.pt").write_bytes((tmp_path / "b" / "epoch-0002.pt").read_bytes())
    _repair_best(tmp_path / "b", 1, tmp_path / "a" / "epoch-0002.pt")
    assert (tmp_path / "b" / "best.pt").read_bytes() == (tmp_path / "a" / "epoch-0001.pt").read_bytes()


def test_a_resume_of_an_early_stopped_run_says_why_nothing_trains(tmp_path):
    """Before: resuming an early-stopped run with more epochs trained nothing and said nothing (the warning about
    nothing left to train was skipped for a stopped run)."""
    flat = (torch.zeros(32, 6), torch.zeros(32, dtype=torch.long))  # nothing to learn: the loss stalls
    kw = {"batch_size": 16, "lr": 0.0, "early_stopping_patience": 1, "monitor": "train_loss", "progress": False}
    fit(_net(), flat, epochs=6, checkpoint_dir=tmp_path / "run", **kw)
    with pytest.warns(UserWarning, match=r"resume: epoch-0002\.pt is of a run that stopped early at epoch 2 \(early "
                                         r"stopping: .*\): nothing is trained. To train on, resume with a larger "
                                         r"early_stopping_patience than 1 \(or None\)"):
        again = fit(_net(), flat, epochs=12, checkpoint_dir=tmp_path / "run", resume=True, **kw)
    assert len(again.history) == 2 and again.stopped_early


def test_a_resume_without_checkpoint_dir_goes_on_checkpointing_in_the_resumed_folder(tmp_path):
    """Before: resume= a folder without checkpoint_dir wrote no checkpoint nor metrics row for the epochs it
    trained, and its result's checkpoint_path was the resumed epoch 2's file while its best_epoch said 3."""
    _first_run(tmp_path / "run", monitor="train_accuracy")
    result = fit(_net(), _data(), epochs=3, batch_size=16, lr=1e-2, resume=tmp_path / "run", progress=False,
                 monitor="train_accuracy")
    assert (tmp_path / "run" / "epoch-0003.pt").is_file()
    assert read_checkpoint(result.checkpoint_path)["epoch"] == result.best_epoch


@pytest.mark.parametrize("first, now", [({}, {"monitor_mode": "min"}), ({"monitor_mode": "min"}, {}),
                                        ({}, {"optimizer": "AdamW"})], ids=["mode-given", "mode-left", "AdamW"])
def test_another_spelling_of_the_same_setting_resumes(tmp_path, first, now):
    """Before: monitor_mode='min' against the None that defaults to it for train_loss, and optimizer='AdamW'
    against 'adamw', were refused as changed settings, though they build the same run."""
    _first_run(tmp_path / "run", **first)
    result = fit(_net(), _data(), epochs=3, batch_size=16, lr=1e-2, checkpoint_dir=tmp_path / "run", resume=True,
                 progress=False, **now)
    assert result.resumed["changed"] == {"epochs": (2, 3)}


def test_a_folder_where_no_checkpoint_loads_is_refused_even_without_a_loadable_best_pt(tmp_path):
    """Every checkpoint torn, best.pt too: resume=True trained from scratch on top of them (it refused only when
    best.pt loaded), overwriting and pruning what a repair might have saved; a new run there is refused."""
    folder = tmp_path / "run"
    _first_run(folder)
    for path in folder.glob("*.pt"):
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.warns(UserWarning, match="resume: skipped"), \
            pytest.raises(CheckpointError, match=r"none of its 2 epoch checkpoint\(s\) loads \(.*\), nor does best\.pt\. "
                                                 r"The run is not started over"):
        fit(_net(), _data(), epochs=3, batch_size=16, lr=1e-2, checkpoint_dir=folder, resume=True, progress=False)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


@pytest.mark.parametrize("code", ["EACCES", "EIO"])
def test_a_checkpoint_the_system_will_not_read_raises_that_error_naming_it(tmp_path, monkeypatch, code):
    """A checkpoint this process may not read (chmod 000, another account's) or whose disk fails was "truncated
    or corrupt", skipped, and with none left resume=True started over on top of them. The system's own error is
    raised, naming the file (simulated where torch opens it: root reads any file)."""
    import errno

    import torch.serialization

    folder = tmp_path / "run"
    _first_run(folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    real_open = open

    def refused(name, *args, **kwargs):
        if str(name).startswith(str(folder)):
            number = getattr(errno, code)  # a failed open names the file; a failed read does not
            raise OSError(number, os.strerror(number), *([str(name)] if code == "EACCES" else []))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(torch.serialization, "open", refused, raising=False)
    with pytest.raises(OSError) as err:
        fit(_net(), _data(), epochs=3, batch_size=16, lr=1e-2, checkpoint_dir=folder, resume=True, progress=False)
    assert err.value.errno == getattr(errno, code) and not isinstance(err.value, CheckpointError)
    assert str(folder / "epoch-0002.pt") in str(err.value) and "corrupt" not in str(err.value)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_resume_from_an_older_checkpoint_sets_the_runs_later_epochs_aside(tmp_path):
    """Resumed from epoch-0002.pt beside epoch-0004.pt, a run branches off at epoch 2. The abandoned run's files
    stayed: resume=True then went on from its epoch 4 (the highest), keep_last pruned the new run's epochs before
    it, best.pt could be an epoch of it and metrics.csv held its rows."""
    import csv

    from zoo.engine.checkpoint import checkpoint_epoch

    folder = tmp_path / "run"
    kw = {"batch_size": 16, "checkpoint_dir": folder, "keep_last": 3, "progress": False, "val_data": _data(16)}
    fit(_net(), _data(), epochs=4, lr=1e-2, **kw)  # epochs 1..4; 2, 3 and 4 kept
    left = {p.name: p.read_bytes() for p in folder.glob("*.pt")
            if p.name in ("epoch-0003.pt", "epoch-0004.pt") or checkpoint_epoch(p) > 2}
    with pytest.warns(UserWarning, match=r"resume: epoch-0002\.pt is epoch 2; .* held files of later epochs, of a run "
                                         r"this one does not continue: moved them \(.*epoch-0004\.pt, epoch-0003\.pt, "
                                         r"a copy of metrics\.csv\) to .*abandoned-after-epoch-0002, nothing deleted"):
        fit(_net(), _data(), epochs=3, lr=1e-3, resume=folder / "epoch-0002.pt", **kw)
    aside = folder / "abandoned-after-epoch-0002"
    assert {p.name: p.read_bytes() for p in aside.glob("*.pt")} == left  # moved, byte for byte
    with open(aside / "metrics.csv") as fh:
        assert [float(r["lr"]) for r in csv.DictReader(fh)] == [1e-2] * 4
    with open(folder / "metrics.csv") as fh:  # the live log: this run's rows only
        assert [float(r["lr"]) for r in csv.DictReader(fh)] == [1e-2, 1e-2, 1e-3]
    assert checkpoint_epoch(folder / "best.pt") <= 3
    again = fit(_net(), _data(), epochs=4, lr=1e-3, resume=True, **kw)
    assert again.resumed["checkpoint"].name == "epoch-0003.pt" and again.resumed["changed"] == {"epochs": (3, 4)}
    assert [round(r["lr"], 6) for r in again.history] == [1e-2, 1e-2, 1e-3, 1e-3]
