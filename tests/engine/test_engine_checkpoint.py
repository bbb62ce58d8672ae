"""Checkpoints: exact resume, atomic writes that survive a crash, weights_only loading, pruning."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, fit, latest_checkpoint, load_checkpoint, save_checkpoint


def data(n: int = 96, seed: int = 0) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long() + (x[:, 0] > 1).long())


def net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    # Dropout makes the run depend on the global RNG, which the checkpoint must restore.
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))


def stop_after(epoch: int) -> LambdaCallback:
    def hook(state, row):
        if row["epoch"] == epoch:
            state.request_stop("simulated interruption")

    return LambdaCallback(on_epoch_end=hook)


def strip(history):
    return [{k: v for k, v in row.items() if k != "epoch_time_s"} for row in history]


@pytest.mark.parametrize("extra", [
    {"schedule": "cosine", "warmup_steps": 3},
    {"schedule": "step", "schedule_options": {"step_size": 1, "gamma": 0.5}, "grad_accum_steps": 2,
     "optimizer": "sgd", "optimizer_options": {"momentum": 0.9}},
    {"schedule": "onecycle", "amp": "bf16", "clip_grad_norm": 1.0},
    {"schedule": "cosine", "ema_decay": 0.9},
], ids=["cosine", "step-accum-sgd", "onecycle-bf16", "cosine-ema"])
def test_resume_is_bit_identical(tmp_path, extra):
    kw = dict(epochs=4, batch_size=16, lr=5e-3, progress=False, seed=7, **extra)
    full = fit(net(), data(), data(32, 1), checkpoint_dir=tmp_path / "full", **kw)

    part = tmp_path / "part"
    first = fit(net(), data(), data(32, 1), checkpoint_dir=part, callbacks=[stop_after(2)], **kw)
    assert len(first.history) == 2
    resumed = fit(net(seed=123), data(), data(32, 1), checkpoint_dir=part, resume=True, **kw)

    assert strip(resumed.history) == strip(full.history)
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert resumed.best_metric == full.best_metric and resumed.best_epoch == full.best_epoch


def test_an_epoch_stopped_after_some_batches_is_marked_and_its_resume_finishes_it(tmp_path):
    kw = {"epochs": 3, "batch_size": 16, "lr": 5e-3, "progress": False, "seed": 7}  # 96 samples: 6 batches each

    def stop_mid_epoch_2(state, logs):
        if state.epoch == 1 and state.batch == 1:
            state.request_stop("time budget")

    full = fit(net(), data(), **kw)
    first = fit(net(), data(), checkpoint_dir=tmp_path, callbacks=[LambdaCallback(on_batch_end=stop_mid_epoch_2)],
                **kw)
    assert [row.get("batches_trained") for row in first.history] == [None, 2]
    resumed = fit(net(), data(), checkpoint_dir=tmp_path, resume=True, **kw)
    assert strip(resumed.history) == strip(full.history)
    for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)


class NoisyData(torch.utils.data.Dataset):
    """Random augmentation inside __getitem__: in workers it draws from the worker's seeded RNG."""

    def __init__(self) -> None:
        self.base = data(48)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i):
        x, y = self.base[i]
        return x + 0.1 * torch.randn(x.shape), y


def test_resume_is_bit_identical_with_worker_augmentation(tmp_path):
    kw = {"epochs": 3, "batch_size": 16, "progress": False, "seed": 1, "num_workers": 2, "metrics": ()}
    full = fit(net(), NoisyData(), **kw)
    fit(net(), NoisyData(), checkpoint_dir=tmp_path, callbacks=[stop_after(1)], **kw)
    resumed = fit(net(), NoisyData(), checkpoint_dir=tmp_path, resume=True, **kw)
    assert strip(resumed.history) == strip(full.history)
    for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)


def test_checkpoint_contents_and_pruning(tmp_path):
    result = fit(net(), data(), data(32, 1), epochs=4, batch_size=32, progress=False, checkpoint_dir=tmp_path,
                 keep_last=2, schedule="cosine", monitor="val_accuracy")
    names = sorted(p.name for p in tmp_path.glob("*.pt"))
    assert names == ["best.pt", "epoch-0003.pt", "epoch-0004.pt"]
    assert result.checkpoint_path == tmp_path / "best.pt"
    raw = torch.load(tmp_path / "epoch-0004.pt", weights_only=True)  # plain data only
    assert raw["epoch"] == 4 and raw["step"] == 12 and len(raw["history"]) == 4
    assert set(raw["rng"][0]) >= {"python", "numpy", "torch"}
    assert raw["config"]["lr"] == 1e-3 and raw["config"]["schedule"] == "cosine"
    assert raw["scheduler"]["last_epoch"] == 12
    best = load_checkpoint(tmp_path / "best.pt")
    assert best["epoch"] == result.best_epoch
    assert latest_checkpoint(tmp_path) == tmp_path / "epoch-0004.pt"
    # resuming a finished run trains nothing more and returns the same history
    again = fit(net(), data(), data(32, 1), epochs=4, batch_size=32, progress=False, checkpoint_dir=tmp_path,
                resume=True, schedule="cosine", monitor="val_accuracy")
    assert strip(again.history) == strip(result.history)


def test_load_checkpoint_rejects_foreign_files(tmp_path):
    torch.save({"weights": torch.zeros(2)}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="not a zoo training checkpoint"):
        load_checkpoint(tmp_path / "x.pt")
    (tmp_path / "torn.pt").write_bytes(b"PK\x03\x04 half a file")
    with pytest.raises(ValueError, match="not a loadable checkpoint"):
        load_checkpoint(tmp_path / "torn.pt")
    with pytest.raises(FileNotFoundError):
        fit(net(), data(), epochs=1, progress=False, resume=tmp_path / "missing.pt")


def test_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    model = net()
    path = save_checkpoint(tmp_path / "epoch-0001.pt", model=model, epoch=1)
    good = path.read_bytes()
    real_save = torch.save

    def torn_save(obj, f, *a, **k):
        f.write(b"PK\x03\x04 first bytes of a checkpoint")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(OSError, match="simulated"):
        save_checkpoint(path, model=model, epoch=2)
    monkeypatch.setattr(torch, "save", real_save)
    assert path.read_bytes() == good and load_checkpoint(path)["epoch"] == 1
    assert list(tmp_path.iterdir()) == [path]  # the temp file is cleaned up


def test_process_killed_while_writing_leaves_a_loadable_checkpoint(tmp_path):
    """A child process trains epoch 1, then dies (os._exit, no cleanup) half-way through writing epoch 2's
    bytes to disk (in os.write, the OS boundary). Its orphaned temp file is swept by the next run there."""
    script = textwrap.dedent(f"""
        import os, torch
        from torch import nn
        from zoo.engine import fit
        torch.manual_seed(0)
        x = torch.randn(64, 4); y = (x.sum(1) > 0).long()
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        fit(model, (x, y), epochs=1, batch_size=16, progress=False, checkpoint_dir={str(tmp_path)!r})
        real_write = os.write
        def dying_write(fd, data):
            if "epoch-0002" in os.readlink(f"/proc/self/fd/{{fd}}"):
                real_write(fd, bytes(data[:100]))
                os._exit(9)
            return real_write(fd, data)
        os.write = dying_write
        fit(model, (x, y), epochs=2, batch_size=16, progress=False, checkpoint_dir={str(tmp_path)!r}, resume=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 9, proc.stderr
    assert not (tmp_path / "epoch-0002.pt").exists()
    torn = [p for p in tmp_path.iterdir() if p.name.startswith(".zoo-tmp-") and p.name.endswith("epoch-0002.pt")]
    assert len(torn) == 1 and torn[0].stat().st_size == 100  # the orphan, under the recognisable prefix
    assert load_checkpoint(latest_checkpoint(tmp_path))["epoch"] == 1
    # training resumes from it (the dead run's folder lock is gone with it) and sweeps the orphan
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    result = fit(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (x, (x.sum(1) > 0).long()),
                 epochs=2, batch_size=16, progress=False, checkpoint_dir=tmp_path, resume=True)
    assert [r["epoch"] for r in result.history] == [1, 2]
    assert Path(result.checkpoint_path).exists()
    assert not torn[0].exists()


def test_bytes_flipped_inside_tensor_data_are_caught_and_the_resume_skips_that_checkpoint(tmp_path):
    """Flipped bytes inside a tensor unpickle without complaint: a resume went on from corrupt weights (and a
    later non-finite loss named that file as the last good checkpoint)."""
    from zoo.engine.checkpoint import CheckpointError, read_checkpoint

    fit(net(), data(), epochs=2, batch_size=32, checkpoint_dir=tmp_path, progress=False)
    last = tmp_path / "epoch-0002.pt"
    weight = read_checkpoint(last)["model"]["0.weight"]
    raw = bytearray(last.read_bytes())
    at = raw.find(weight.numpy().tobytes())
    assert at > 0
    raw[at + 5] ^= 0x40  # one bit of one float of the first layer
    last.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="is corrupt: its tensors no longer match the sha256"):
        load_checkpoint(last)
    # zoo.build(name, weights=<checkpoint>) reads it through the hub's loader, which did not check the sha256
    from zoo.hub import load_state_dict
    from zoo.hub.state import CorruptWeightsError

    with pytest.raises(CorruptWeightsError, match="epoch-0002.pt is corrupt: its tensors no longer match the sha256"):
        load_state_dict(last)
    assert torch.equal(load_state_dict(tmp_path / "epoch-0001.pt")["0.weight"],
                       read_checkpoint(tmp_path / "epoch-0001.pt")["model"]["0.weight"])
    with pytest.warns(UserWarning, match="skipped .*epoch-0002.pt is corrupt"):
        resumed = fit(net(), data(), epochs=3, batch_size=32, checkpoint_dir=tmp_path, resume=True, progress=False)
    assert Path(resumed.resumed["checkpoint"]).name == "epoch-0001.pt"


@pytest.mark.parametrize("how", ["folder", "file"])
def test_a_resume_reads_and_hashes_the_checkpoint_it_picks_once(tmp_path, monkeypatch, how):
    """Picking the newest loadable checkpoint reads it whole and checks its sha256; the resume then used to
    read and hash the same file again."""
    from zoo.engine import checkpoint as ckpt_mod

    fit(net(), data(), epochs=2, batch_size=32, checkpoint_dir=tmp_path, progress=False)
    reads: list[str] = []
    real = ckpt_mod.read_checkpoint
    monkeypatch.setattr(ckpt_mod, "read_checkpoint", lambda path, *a, **kw: reads.append(Path(path).name) or
                        real(path, *a, **kw))
    resume = True if how == "folder" else tmp_path / "epoch-0002.pt"
    resumed = fit(net(), data(), epochs=3, batch_size=32, checkpoint_dir=tmp_path, resume=resume, progress=False)
    assert Path(resumed.resumed["checkpoint"]).name == "epoch-0002.pt"
    assert reads.count("epoch-0002.pt") == 1, reads


def test_a_resumed_optimizer_keeps_the_implementation_built_for_this_machine():
    """Before: torch's load_state_dict took the saved fused/foreach flags, so a run written on a GPU (foreach)
    resumed on a CPU on the per-tensor loop instead of the fused step fit builds there."""
    from zoo.engine.checkpoint import restore

    torch.manual_seed(0)
    net, x = nn.Linear(4, 3), torch.randn(8, 4)
    written = torch.optim.AdamW(net.parameters(), lr=1e-2, foreach=True)  # what a GPU run saves
    for _ in range(2):
        written.zero_grad()
        net(x).square().sum().backward()
        written.step()
    here = torch.optim.AdamW(net.parameters(), lr=1e-2, fused=True)
    restore({"optimizer": copy.deepcopy(written.state_dict())}, optimizer=here)
    group = here.param_groups[0]
    assert group["fused"] is True and not group["foreach"]  # this machine's choice survives the resume
    assert group["lr"] == 1e-2 and all(float(s["step"]) == 2 for s in here.state.values())  # the run's survive
    start = [p.detach().clone() for p in net.parameters()]
    after = []
    for opt in (written, here):  # the next step computes the same in either implementation
        with torch.no_grad():
            for p, s in zip(net.parameters(), start):
                p.copy_(s)
        opt.zero_grad()
        net(x).square().sum().backward()
        opt.step()
        after.append([p.detach().clone() for p in net.parameters()])
    for a, b in zip(*after):
        torch.testing.assert_close(a, b)


def test_a_compiled_models_checkpoint_holds_the_networks_own_keys(tmp_path):
    """A torch.compile'd model's checkpoint held '_orig_mod.'-prefixed keys: the plain network refused them
    (zoo.wrappers.unwrap looked through torch.compile for saving weights, the checkpoint through DDP only)."""
    from zoo.engine.checkpoint import restore

    plain = net(0)
    path = save_checkpoint(tmp_path / "c.pt", model=torch.compile(plain), epoch=1)
    ckpt = load_checkpoint(path)
    assert set(ckpt["model"]) == set(plain.state_dict())
    other = net(1)
    restore(ckpt, model=other)
    assert all(torch.equal(a, b) for a, b in zip(other.state_dict().values(), plain.state_dict().values()))
    # a checkpoint an earlier version wrote from a compiled model still resumes a plain one, and back
    ckpt["model"] = {f"_orig_mod.{k}": v for k, v in plain.state_dict().items()}
    restore(ckpt, model=net(2))
    restore(ckpt, model=torch.compile(net(3)))


@pytest.mark.parametrize("make_sampler", [
    lambda ds, g: torch.utils.data.RandomSampler(ds, generator=g),
    lambda ds, g: torch.utils.data.WeightedRandomSampler(torch.linspace(1, 3, len(ds)), len(ds), generator=g),
], ids=["random", "weighted"])
def test_a_sampler_with_a_generator_of_its_own_resumes_exactly(tmp_path, make_sampler):
    """Before: only the DataLoader's generator was reseeded per epoch, so a sampler seeded with its own generator
    replayed its first epoch's draws after a resume, which then trained on other batches than the whole run."""
    def loader():
        ds = data()
        sampler = make_sampler(ds, torch.Generator().manual_seed(1))
        return torch.utils.data.DataLoader(ds, batch_size=16, sampler=sampler)

    kw = {"epochs": 2, "lr": 5e-3, "progress": False, "seed": 7}
    full = fit(net(), loader(), checkpoint_dir=tmp_path / "full", **kw)
    fit(net(), loader(), checkpoint_dir=tmp_path / "part", callbacks=[stop_after(1)], **kw)
    resumed = fit(net(), loader(), checkpoint_dir=tmp_path / "part", resume=True, **kw)
    assert strip(resumed.history) == strip(full.history)
