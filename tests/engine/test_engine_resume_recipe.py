"""What a checkpoint records beyond fit's options, and what a resume does with it: ``best.pt`` repaired after
a kill between the epoch file and its copy, the real batch size of a DataLoader, a family's recipe
(``with_recipe``) compared like fit's options, and checkpoints written before any of that still resuming."""

from __future__ import annotations

import logging
import shutil

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from zoo.engine import ResumeError, fit
from zoo.engine.checkpoint import checkpoint_epoch
from zoo.engine.resume import files_fingerprint, with_recipe


def _data(n: int = 48):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=g)
    return x, (x[:, 0] > 0).long()


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))


def _fit(folder, epochs=3, data=None, **options):
    options = {"batch_size": 16, "lr": 1e-2, "amp": None, "progress": False, **options}
    return fit(_net(), data if data is not None else _data(), epochs=epochs, checkpoint_dir=folder, **options)


def _config(path):
    return torch.load(path, weights_only=True)["config"]


def _rewrite_config(path, edit):
    ckpt = torch.load(path, weights_only=True)
    edit(ckpt["config"])
    torch.save(ckpt, path)


@pytest.mark.parametrize("left", ["the previous best", "no best.pt"])
def test_best_pt_is_repaired_on_resume_after_a_kill_between_the_epoch_file_and_its_copy(tmp_path, left):
    run = tmp_path / "run"
    first = _fit(run, keep_last=3)  # train_loss falls every epoch: each one is the new best
    assert first.best_epoch == 3 and checkpoint_epoch(run / "best.pt") == 3
    # what a SIGKILL right after epoch-0003.pt was renamed into place leaves on disk
    if left == "no best.pt":
        (run / "best.pt").unlink()
        for name in ("epoch-0002.pt", "epoch-0003.pt"):
            (run / name).unlink()  # killed after the first epoch's file, before its copy
        expected = 1
    else:
        shutil.copyfile(run / "epoch-0002.pt", run / "best.pt")
        expected = 3
    resumed = _fit(run, epochs=expected, keep_last=3, resume=True)
    assert resumed.best_epoch == expected and resumed.checkpoint_path == run / "best.pt"
    assert checkpoint_epoch(run / "best.pt") == expected
    best = torch.load(run / "best.pt", weights_only=True)
    source = torch.load(run / f"epoch-{expected:04d}.pt", weights_only=True)
    assert all(torch.equal(best["model"][k], source["model"][k]) for k in source["model"])


def test_checkpoint_epoch_reads_the_epoch_or_none(tmp_path):
    _fit(tmp_path / "run", epochs=1)
    assert checkpoint_epoch(tmp_path / "run" / "epoch-0001.pt") == 1
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    assert checkpoint_epoch(tmp_path / "junk.pt") is None and checkpoint_epoch(tmp_path / "absent.pt") is None


def _loader(batch_size: int) -> DataLoader:
    return DataLoader(TensorDataset(*_data()), batch_size=batch_size)


def test_a_dataloader_records_its_real_batch_size_and_another_one_is_refused(tmp_path):
    _fit(tmp_path / "run", epochs=1, data=_loader(8))  # fit's batch_size=16 does not reach a DataLoader
    recorded = _config(tmp_path / "run" / "epoch-0001.pt")
    assert recorded["batch_size"] == 8 and recorded["batch_size_from"] == "loader"
    with pytest.raises(ResumeError, match=r"batch_size: 8 in epoch-0001\.pt, 4 now"):
        _fit(tmp_path / "run", epochs=2, data=_loader(4), resume=True)
    assert _fit(tmp_path / "run", epochs=2, data=_loader(8), resume=True).resumed["changed"] == {"epochs": (1, 2)}


def test_a_checkpoint_written_before_batch_sizes_and_recipes_were_recorded_still_resumes(tmp_path):
    _fit(tmp_path / "run", epochs=1, data=_loader(8), config={"data.size": 16})
    path = tmp_path / "run" / "epoch-0001.pt"

    def as_before(config):  # fit's own option, never the loader's, and no recipe
        config.update(batch_size=16)
        for key in ("batch_size_from", "data.size"):
            del config[key]

    _rewrite_config(path, as_before)
    result = _fit(tmp_path / "run", epochs=2, data=_loader(8), resume=True,
                  **with_recipe({}, data={"size": 24}, model={"dropout": 0.5}))
    assert result.resumed["changed"] == {"epochs": (1, 2)}  # keys it did not record are not compared


def test_a_changed_recipe_is_refused_with_old_and_new_and_a_harmless_one_is_applied(tmp_path, caplog):
    recipe = {"size": 16, "source": "12 files, 100 bytes, abc", "strict": False}
    _fit(tmp_path / "run", epochs=1, **with_recipe({}, data=recipe, model={"dropout": 0.3}, may_change=["strict"]))
    recorded = _config(tmp_path / "run" / "epoch-0001.pt")
    assert recorded["data.size"] == 16 and recorded["model.dropout"] == 0.3
    changed = {**recipe, "size": 24, "source": "12 files, 101 bytes, abd"}
    with pytest.raises(ResumeError) as err:
        _fit(tmp_path / "run", epochs=2, resume=True,
             **with_recipe({}, data=changed, model={"dropout": 0.0}, may_change=["strict"]))
    said = str(err.value)
    for line in ("data.size: 16 in epoch-0001.pt, 24 now", "model.dropout: 0.3 in epoch-0001.pt, 0.0 now",
                 "data.source: '12 files, 100 bytes, abc' in epoch-0001.pt, '12 files, 101 bytes, abd' now"):
        assert line in said
    assert "data.strict" not in said.split("Settings that may change")[0]
    with caplog.at_level(logging.INFO, logger="zoo"):
        result = _fit(tmp_path / "run", epochs=2, resume=True,
                      **with_recipe({}, data={**recipe, "strict": True}, model={"dropout": 0.3}, may_change=["strict"]))
    assert result.resumed["changed"] == {"epochs": (1, 2), "data.strict": (False, True)}
    assert "resume: data.strict False -> True (applied)" in caplog.text


def test_files_fingerprint_sees_names_sizes_and_contents_not_where_the_folder_is(tmp_path):
    for root in (tmp_path / "a", tmp_path / "moved"):
        (root / "x").mkdir(parents=True)
        (root / "x" / "1.txt").write_text("abc")
        (root / "2.txt").write_text("de")
    same = [files_fingerprint([r / "x" / "1.txt", r / "2.txt"], root=r) for r in (tmp_path / "a", tmp_path / "moved")]
    assert same[0] == same[1] and same[0].startswith("2 files, 5 bytes, ")
    (tmp_path / "moved" / "2.txt").write_text("dx")  # same names and sizes, other contents
    assert files_fingerprint([tmp_path / "moved" / "x" / "1.txt", tmp_path / "moved" / "2.txt"],
                             root=tmp_path / "moved") != same[0]


def test_files_fingerprint_takes_a_relative_root_beside_absolute_paths(tmp_path, monkeypatch):
    (tmp_path / "data" / "x").mkdir(parents=True)
    (tmp_path / "data" / "x" / "1.txt").write_text("abc")
    absolute = files_fingerprint([tmp_path / "data" / "x" / "1.txt"], root=tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    assert files_fingerprint([tmp_path / "data" / "x" / "1.txt"], root="data") == absolute
    assert files_fingerprint(["data/x/1.txt"], root=tmp_path / "data") == absolute
