"""Training against the filesystem (issues #20 and #16): a full disk at checkpoint time and on resume, two
runs in one folder, a corrupt latest checkpoint, a resume into another head, a checkpoint_dir that is a
file, empty checkpoints, the modes of every file a run writes, and a learning-curve PNG that cannot be written.

A full disk is simulated at the OS boundary by the ``disk_quota`` fixture (tests/conftest.py): ``os.write``
to files under the folder fails with ENOSPC past a byte budget, and ``shutil.disk_usage`` reports it."""

from __future__ import annotations

import os
import stat
import threading

import pytest
import torch
from torch import nn

from zoo import fs
from zoo.engine import LambdaCallback, fit, latest_checkpoint, load_checkpoint
from zoo.engine.checkpoint import CheckpointError

KW = {"batch_size": 32, "progress": False}


def data(n: int = 64) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())


def net(out: int = 2) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, out))


class Untouchable(torch.utils.data.Dataset):
    """Data that fails the test if a single sample is read: the run must stop before training."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i):
        raise AssertionError("training started although the run should have been refused first")


def test_checkpoint_dir_that_is_a_file_fails_before_training(tmp_path):
    (tmp_path / "ckpt").write_text("not a folder")
    with pytest.raises(fs.FsError, match="checkpoint_dir .*ckpt exists and is not a folder"):
        fit(net(), Untouchable(), epochs=1, checkpoint_dir=tmp_path / "ckpt", **KW)


def test_full_disk_at_checkpoint_time_is_named_and_early(tmp_path, disk_quota):
    fit(net(), data(), epochs=1, checkpoint_dir=tmp_path, **KW)
    first = (tmp_path / "epoch-0001.pt").read_bytes()
    disk = disk_quota(tmp_path, 0)
    disk.quota = disk.used() + 1000  # room for the CSV, not for a checkpoint
    with pytest.raises(fs.NoSpaceError) as err:
        fit(net(), data(), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW)
    msg = str(err.value)
    # the resume on the still-full disk: a named, early failure, never `RuntimeError: [enforce fail ...]`
    assert str(tmp_path) in msg and "needs" in msg and "free" in msg and "\n" not in msg
    assert (tmp_path / "epoch-0001.pt").read_bytes() == first and not (tmp_path / "epoch-0002.pt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(fs.TEMP_PREFIX)]


def test_disk_filling_during_the_checkpoint_write_removes_the_temp(tmp_path, disk_quota, monkeypatch):
    fit(net(), data(), epochs=1, checkpoint_dir=tmp_path, **KW)
    disk = disk_quota(tmp_path, 0)
    disk.quota = disk.used() + 1000
    monkeypatch.setattr(fs, "check_free", lambda *a, **k: None)  # the disk fills after the check
    with pytest.raises(fs.NoSpaceError) as err:
        fit(net(), data(), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW)
    assert str(tmp_path / "epoch-0002.pt") in str(err.value) and "removed" in str(err.value)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(fs.TEMP_PREFIX)]
    assert load_checkpoint(latest_checkpoint(tmp_path))["epoch"] == 1


def test_a_second_run_in_the_same_folder_fails_fast_naming_the_first(tmp_path):
    started, release = threading.Event(), threading.Event()

    def hold(state, row):
        started.set()
        release.wait(60)

    errors: list[BaseException] = []

    def first_run():
        try:
            fit(net(), data(), epochs=2, checkpoint_dir=tmp_path, callbacks=[LambdaCallback(on_epoch_end=hold)],
                **KW)
        except BaseException as err:  # noqa: BLE001  (reported to the main thread)
            errors.append(err)

    thread = threading.Thread(target=first_run)
    thread.start()
    try:
        assert started.wait(60)
        with pytest.raises(fs.FolderLockedError) as err:
            fit(net(), Untouchable(), epochs=2, checkpoint_dir=tmp_path, **KW)
        msg = str(err.value)
        assert f"pid {os.getpid()}" in msg and "started 20" in msg and str(tmp_path) in msg
        with pytest.raises(fs.FolderLockedError):  # resuming a run that is still alive is no exception
            fit(net(), Untouchable(), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW)
    finally:
        release.set()
        thread.join(60)
    assert errors == []
    # the first run finished: resuming it by design works, and its files are its own
    again = fit(net(), data(), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW)
    assert [r["epoch"] for r in again.history] == [1, 2]


def test_a_corrupt_latest_checkpoint_falls_back_and_says_so(tmp_path):
    full = fit(net(), data(), epochs=3, checkpoint_dir=tmp_path, **KW)
    latest = tmp_path / "epoch-0003.pt"
    latest.write_bytes(latest.read_bytes()[: latest.stat().st_size // 2])  # torn
    with pytest.warns(UserWarning, match=r"skipped .*epoch-0003\.pt is not a loadable checkpoint"):
        resumed = fit(net(), data(), epochs=3, checkpoint_dir=tmp_path, resume=True, **KW)
    assert [r["epoch"] for r in resumed.history] == [1, 2, 3]  # epoch 3 trained again from epoch 2's state
    for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)  # the resumed run is exact


def test_resume_into_another_head_names_keys_and_shapes(tmp_path):
    fit(net(out=2), data(), epochs=1, checkpoint_dir=tmp_path, **KW)
    with pytest.raises(CheckpointError) as err:
        fit(net(out=3), data(), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW)
    msg = str(err.value)
    assert "2.weight: checkpoint [2, 8] vs model [3, 8]" in msg and "2.bias: checkpoint [2] vs model [3]" in msg


def test_a_scalar_key_of_another_networks_checkpoint_is_not_called_absent(tmp_path):
    """BatchNorm's num_batches_tracked (shape ()) read "checkpoint absent vs model absent"."""
    fit(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)), data(), epochs=1,
        checkpoint_dir=tmp_path, **KW)
    with pytest.raises(CheckpointError) as err:
        fit(net(out=2), data(), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW)
    assert "1.num_batches_tracked: checkpoint [] vs model absent" in str(err.value)


def test_empty_and_truncated_checkpoints_are_named(tmp_path):
    (tmp_path / "epoch-0001.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="is empty"):
        load_checkpoint(tmp_path / "epoch-0001.pt")
    # nothing loadable was a fresh start, which wrote over the files: refused now, as a new run there is
    with pytest.warns(UserWarning, match="skipped"), \
            pytest.raises(CheckpointError, match=r"none of its 1 epoch checkpoint\(s\) loads \(.*is empty"):
        fit(net(), data(), epochs=1, checkpoint_dir=tmp_path, resume=True, **KW)
    assert (tmp_path / "epoch-0001.pt").read_bytes() == b""


def test_a_corrupt_checkpoint_gives_the_unpicklers_reason_not_torchs_advice(tmp_path, flip_pickle_opcode):
    """Flipped bytes: one line with the unpickler's reason; never torch's advice to load with
    weights_only=False, which would run whatever code a tampered file names."""
    fit(net(), data(), epochs=1, checkpoint_dir=tmp_path / "run", **KW)
    bad = flip_pickle_opcode(tmp_path / "run" / "epoch-0001.pt", tmp_path / "flipped.pt")
    with pytest.raises(CheckpointError, match="Unsupported operand 43") as err:
        load_checkpoint(bad)
    assert "weights_only" not in str(err.value)


def test_every_file_a_run_writes_gets_the_users_umask(tmp_path):
    old = os.umask(0o022)
    try:
        fit(net(), data(), data(32), epochs=1, checkpoint_dir=tmp_path, **KW)
    finally:
        os.umask(old)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["best.pt", "epoch-0001.pt", "learning_curves.png", "metrics.csv"]
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()} == dict.fromkeys(written, 0o644)


def test_a_folder_under_the_home_folder_is_not_a_folder_named_tilde(tmp_path, monkeypatch):
    """checkpoint_dir="~/ck" made ./~/ck (a `rm -rf ~` away from the home folder), while zoo.save and weights=
    read "~" as home."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    fit(net(), data(), epochs=1, checkpoint_dir="~/ck", log_dir="~/logs", **KW)
    assert (tmp_path / "home" / "ck" / "epoch-0001.pt").is_file() and (tmp_path / "home" / "logs").is_dir()
    assert not (tmp_path / "work" / "~").exists()
    result = fit(net(), data(), epochs=2, resume="~/ck/epoch-0001.pt", **KW)
    assert result.history[-1]["epoch"] == 2


def test_a_learning_curve_png_that_cannot_be_written_warns_and_keeps_the_run(tmp_path):
    """A full disk (any OSError) at the end-of-run plot raised after every epoch was trained and checkpointed:
    zoo.train returned no result and `zoo train --out` saved nothing. A folder where the PNG goes is a real
    write failure (its os.replace fails) with no mount."""
    (tmp_path / "learning_curves.png").mkdir()
    with pytest.warns(RuntimeWarning, match=r"learning curves were not written to .*learning_curves\.png: ") as seen:
        result = fit(net(), data(), epochs=2, checkpoint_dir=tmp_path, **KW)
    msg = str(seen[0].message)
    assert "plot_learning_curves(result.history" in msg and seen[0].filename == __file__
    assert [r["epoch"] for r in result.history] == [1, 2] and result.checkpoint_path.is_file()
    assert (tmp_path / "metrics.csv").read_text().count("\n") == 3 and (tmp_path / "epoch-0002.pt").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(fs.TEMP_PREFIX)]


def test_metrics_csv_that_cannot_be_written_still_stops_the_run(tmp_path):
    """metrics.csv is the run's record, not a view of it: failing to write it is an error, as before."""
    (tmp_path / "metrics.csv").mkdir()
    with pytest.raises(fs.FsError, match=r"cannot write .*metrics\.csv"):
        fit(net(), data(), epochs=1, checkpoint_dir=tmp_path, **KW)


@pytest.mark.parametrize("alias", ["relative", "symlink"])
def test_one_folder_named_two_ways_is_locked_once(tmp_path, monkeypatch, alias):
    """checkpoint_dir and log_dir naming one folder two ways (relative and absolute, or through a symlink)
    took two locks on it, and the second failed: "in use by another training run: pid <this run's pid>"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    if alias == "symlink":
        (tmp_path / "alias").symlink_to(tmp_path / "run")
    log_dir = "run" if alias == "relative" else tmp_path / "alias"
    result = fit(net(), data(), epochs=1, checkpoint_dir=tmp_path / "run", log_dir=log_dir, **KW)
    assert result.history[-1]["epoch"] == 1
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "best.pt", "epoch-0001.pt", "learning_curves.png", "metrics.csv"]  # the lock file is gone too


def test_a_resume_rewrites_metrics_csv_to_match_its_checkpoint(tmp_path):
    """A kill between writing epoch-0002.pt and metrics.csv left the CSV without epoch 2; the resume (with
    nothing left to train) drew epoch 2 in the PNG, while metrics.csv stayed a row short for good."""
    fit(net(), data(), epochs=1, checkpoint_dir=tmp_path, **KW)
    one_row = (tmp_path / "metrics.csv").read_text()
    fit(net(), data(), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW)
    both_rows = (tmp_path / "metrics.csv").read_text()
    (tmp_path / "metrics.csv").write_text(one_row)  # what the kill left: epoch-0002.pt, and the CSV of epoch 1
    with pytest.warns(UserWarning, match="nothing is trained"):
        result = fit(net(), data(), epochs=2, checkpoint_dir=tmp_path, resume=True, **KW)
    assert [r["epoch"] for r in result.history] == [1, 2]
    assert (tmp_path / "metrics.csv").read_text() == both_rows
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(fs.TEMP_PREFIX)]
    # a resume from an older checkpoint that trains nothing leaves the folder's longer record as it is
    with pytest.warns(UserWarning, match="nothing is trained"):
        fit(net(), data(), epochs=1, checkpoint_dir=tmp_path, resume=tmp_path / "epoch-0001.pt", **KW)
    assert (tmp_path / "metrics.csv").read_text() == both_rows
