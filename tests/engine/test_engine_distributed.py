"""DDP under torchrun (2 processes, gloo): same result as one process with the same global batch;
only rank 0 writes files; resume works there too."""

from __future__ import annotations

import textwrap

import pytest
import torch

from zoo.engine import fit

COMMON = textwrap.dedent("""
    import torch
    from torch import nn

    def data(n, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 4, generator=g)
        return x, (x.sum(1) > 0).long()

    def data_ignored(n, seed):  # every third target ignored: micro-batches score unequal numbers of targets
        x, y = data(n, seed)
        return x, torch.where(torch.arange(n) % 3 == 0, torch.full_like(y, -100), y)

    def net():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))

    # amp=None: equality with one process holds in fp32 (bf16 rounds differently for batch 4 + 4 vs 8)
    KW = dict(epochs=2, optimizer="sgd", lr=0.1, optimizer_options={"momentum": 0.9}, schedule="cosine", amp=None,
              progress=False, seed=5, metrics=("accuracy", "kappa"))
""")

WORKER = COMMON + textwrap.dedent("""
    import sys
    from pathlib import Path
    import torch.distributed as dist
    from zoo.engine import LambdaCallback, fit
    from zoo.engine import checkpoint as ckpt_mod
    from zoo.engine import logs

    out = Path(sys.argv[1])
    rank = int(__import__("os").environ["RANK"])
    if rank != 0:  # only rank 0 may write checkpoints and logs
        def refuse(*a, **k):
            raise AssertionError(f"rank {rank} tried to write a file")
        ckpt_mod.save_checkpoint = refuse
        logs.RunLogger.log_epoch = refuse

    def stop_after_1(state, row):
        if row["epoch"] == 1:
            state.request_stop("simulated interruption")

    a = fit(net(), data(64, 0), data(20, 1), batch_size=4, checkpoint_dir=out / "A", **KW)
    assert dist.is_initialized() and dist.get_backend() == "gloo"  # kept for the next fit in this job
    fit(net(), data(64, 0), data(20, 1), batch_size=4, checkpoint_dir=out / "B",
        callbacks=[LambdaCallback(on_epoch_end=stop_after_1)], **KW)
    c = fit(net(), data(64, 0), data(20, 1), batch_size=4, checkpoint_dir=out / "B", resume=True, **KW)
    # 2 ranks x batch 2 x 2 micro-batches: one global batch of 8, weighted by the targets each rank scored
    d = fit(net(), data_ignored(64, 0), batch_size=2, grad_accum_steps=2, **{**KW, "metrics": ()})
    torch.save({"d_hist": d.history}, out / f"accum{rank}.pt")  # every rank's own train_loss
    if rank == 0:
        torch.save({"a": a.model.state_dict(), "a_hist": a.history, "c": c.model.state_dict(),
                    "c_hist": c.history, "d": d.model.state_dict()}, out / "ddp.pt")
""")


@pytest.mark.slow
def test_two_process_gloo_matches_one_process(tmp_path, torchrun):
    (tmp_path / "worker.py").write_text(WORKER)
    proc = torchrun([tmp_path / "worker.py", tmp_path], tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    got = torch.load(tmp_path / "ddp.pt", weights_only=True)

    ns: dict = {}
    exec(COMMON, ns)  # noqa: S102 - the same data, model and settings in this process
    single = fit(ns["net"](), ns["data"](64, 0), ns["data"](20, 1), batch_size=8, **ns["KW"])

    for name, ref in single.model.state_dict().items():
        assert torch.allclose(got["a"][name], ref, atol=1e-5), name
    for mine, theirs in zip(single.history, got["a_hist"]):
        for key in ("train_loss", "val_loss", "val_accuracy", "val_kappa", "lr"):
            assert theirs[key] == pytest.approx(mine[key], abs=1e-5), key
    # accumulation over ranks whose micro-batches score unequal numbers of targets == one batch of 8
    big = fit(ns["net"](), ns["data_ignored"](64, 0), batch_size=8, **{**ns["KW"], "metrics": ()})
    for name, ref in big.model.state_dict().items():
        assert torch.allclose(got["d"][name], ref, atol=1e-5), name
    per_rank = [torch.load(tmp_path / f"accum{r}.pt", weights_only=True)["d_hist"] for r in (0, 1)]
    for mine, rank0, rank1 in zip(big.history, *per_rank):
        assert rank0["train_loss"] == rank1["train_loss"] == pytest.approx(mine["train_loss"], abs=1e-5)
    # resumed DDP run == uninterrupted DDP run, exactly
    for name, ref in got["a"].items():
        assert torch.equal(got["c"][name], ref), name
    strip = lambda h: [{k: v for k, v in r.items() if k != "epoch_time_s"} for r in h]
    assert strip(got["c_hist"]) == strip(got["a_hist"])
    assert sorted(p.name for p in (tmp_path / "A").iterdir()) == [
        "best.pt", "epoch-0001.pt", "epoch-0002.pt", "learning_curves.png", "metrics.csv"]
    # in one process, the 2 x 4 run resumes with its global batch (batch_size 8), not with 4 (halved silently)
    from zoo.engine import ResumeError

    first = tmp_path / "A" / "epoch-0001.pt"
    with pytest.raises(ResumeError, match=r"trained by 2 process\(es\) of batch_size 4 \(a global batch of 8\); this "
                                          r"run has 1 of 4 .* resume with batch_size=8"):
        fit(ns["net"](), ns["data"](64, 0), ns["data"](20, 1), batch_size=4, checkpoint_dir=tmp_path / "C",
            resume=first, **ns["KW"])
    with pytest.warns(UserWarning, match="RNG states of 2 ranks"):
        alone = fit(ns["net"](), ns["data"](64, 0), ns["data"](20, 1), batch_size=8, checkpoint_dir=tmp_path / "D",
                    resume=first, **ns["KW"])
    for name, ref in got["a"].items():
        assert torch.allclose(alone.model.state_dict()[name], ref, atol=1e-5), name


def test_evaluate_under_torchrun_without_a_process_group_scores_every_sample(monkeypatch):
    """Each process scored its shard by torchrun's RANK / WORLD_SIZE and, with no group to gather the shards
    with, reported its own half as the result."""
    from zoo.engine import evaluate

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 4)
    data = (torch.randn(10, 3), torch.arange(10) % 4)
    alone = evaluate(model, data, metrics=["accuracy", "top2"], batch_size=4)
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("LOCAL_RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert evaluate(model, data, metrics=["accuracy", "top2"], batch_size=4) == alone


RANKS_WORKER = textwrap.dedent("""
    import os
    import sys
    from pathlib import Path
    import torch
    from torch import nn
    from zoo.engine import LambdaCallback, fit

    out, mode, rank = Path(sys.argv[1]), sys.argv[2], int(os.environ["RANK"])
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    xy = (x, (x.sum(1) > 0).long())
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
    kw = dict(batch_size=4, progress=False, amp=None)

    def stop_on_rank_0(state, logs):  # a time budget that ran out on one rank only
        if state.batch == 1 and state.rank == 0:
            state.request_stop("time budget reached")

    if mode == "bn":  # epoch 1's checkpoint, its rank's buffers and the val_loss logged for it
        r = fit(net, xy, (x[:21], xy[1][:21]), epochs=1, checkpoint_dir=out / "ck", **kw)
        torch.save({"val_loss": r.history[0]["val_loss"], "buffers": dict(net.named_buffers())}, out / f"rank{rank}.pt")
    elif mode == "loader":  # DataLoaders as the user made them, and zoo.vision's own batch sampler
        from torch.utils.data import DataLoader, TensorDataset
        from zoo.engine import Callback
        from zoo.vision.tensor_data import EpochBatchSampler

        seen, scored = [], []

        class Record(Callback):
            def on_batch_end(self, state, logs):
                seen.append(state.batch)

            def on_epoch_end(self, state, row):
                scored.append(len(state.val_predictions.targets))

        train = DataLoader(TensorDataset(*xy), batch_size=4, shuffle=True)
        val = DataLoader(TensorDataset(x[:21], xy[1][:21]), batch_size=4)
        fit(net, train, val, epochs=1, callbacks=[Record()], **kw)
        torch.save({"batches": len(seen), "scored": scored, "tensor_loader": list(EpochBatchSampler(10, 2, shuffle=True))},
                   out / f"rank{rank}.pt")
    elif mode == "stop":
        r = fit(net, xy, epochs=2, callbacks=[LambdaCallback(on_batch_end=stop_on_rank_0)], **kw)
        torch.save({"rows": r.history}, out / f"rank{rank}.pt")
    elif mode == "partial":  # stopped inside epoch 1's second accumulation window, resumed; and uninterrupted
        def noisy():  # augmentation drawn from each rank's own generator, as dropout is
            class Noisy(torch.utils.data.Dataset):
                def __len__(self):
                    return 64

                def __getitem__(self, i):
                    return x[i] + 0.1 * torch.randn(4), xy[1][i]
            return Noisy()

        def fresh():
            torch.manual_seed(0)
            return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))

        opts = dict(kw, epochs=2, grad_accum_steps=2, schedule="cosine", seed=3)
        full = fit(fresh(), noisy(), checkpoint_dir=out / "full", **opts)
        stop = LambdaCallback(on_batch_end=lambda s, logs: s.request_stop("budget") if (s.epoch, s.batch) == (0, 2)
                              else None)
        fit(fresh(), noisy(), checkpoint_dir=out / "part", callbacks=[stop], **opts)
        resumed = fit(fresh(), noisy(), checkpoint_dir=out / "part", resume=True, **opts)
        torch.save({"full": full.model.state_dict(), "resumed": resumed.model.state_dict(),
                    "rows": [full.history, resumed.history]}, out / f"rank{rank}.pt")
    else:
        r = fit(net, xy, epochs=1, ema_decay=0.9, **kw)
        torch.save({k: v for k, v in r.model.state_dict().items() if "running" in k}, out / f"rank{rank}.pt")
""")


def _ranks_results(tmp_path, torchrun, mode: str) -> list:
    (tmp_path / "worker.py").write_text(RANKS_WORKER)
    proc = torchrun([tmp_path / "worker.py", tmp_path, mode], tmp_path, timeout=90)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]


@pytest.mark.slow
def test_a_stop_requested_on_one_rank_stops_every_rank(tmp_path, torchrun):
    """Before: a callback's request_stop on rank 0 alone stopped rank 0 while rank 1 trained on into collectives
    rank 0 never joined: gloo aborted the whole job (SIGABRT)."""
    rank0, rank1 = _ranks_results(tmp_path, torchrun, "stop")
    assert [row["batches_trained"] for row in rank0["rows"]] == [row["batches_trained"] for row in rank1["rows"]] == [2]


@pytest.mark.slow
def test_a_run_stopped_inside_an_accumulation_window_resumes_as_the_uninterrupted_one_on_every_rank(tmp_path,
                                                                                                     torchrun):
    """Before: the resume went on with the next epoch; now each rank finishes the stopped epoch from its own
    record (its generators, its share of the batches, its own gradients of the window the stop fell inside)."""
    for got in _ranks_results(tmp_path, torchrun, "partial"):
        full, resumed = got["rows"]
        assert [{k: v for k, v in row.items() if k != "epoch_time_s"} for row in resumed] == \
            [{k: v for k, v in row.items() if k != "epoch_time_s"} for row in full]
        for name, value in got["full"].items():
            assert torch.equal(value, got["resumed"][name]), name


@pytest.mark.slow
def test_the_weight_averages_batchnorm_statistics_are_the_same_on_every_rank(tmp_path, torchrun):
    """Before: each rank averaged its own BatchNorm running statistics into the EMA, and only rank 0's were
    saved, so the other ranks validated (and a resume went on) with other statistics."""
    rank0, rank1 = _ranks_results(tmp_path, torchrun, "ema")
    assert rank0.keys() == rank1.keys() and rank0
    for name, value in rank0.items():
        assert torch.equal(value, rank1[name]), name


@pytest.mark.slow
def test_validation_and_checkpoints_use_rank_0s_batchnorm_statistics_on_every_rank(tmp_path, torchrun):
    """Before: DDP broadcasts buffers only as a training forward starts, so each rank validated its shard with the
    BatchNorm statistics of its own last batches, while only rank 0's were saved: the logged val_loss (which
    best.pt, early stopping and ReduceLROnPlateau decide on) was no saved model's, and the ranks' models differed."""
    from zoo.engine import evaluate, load_checkpoint

    rank0, rank1 = _ranks_results(tmp_path, torchrun, "bn")
    for name, value in rank0["buffers"].items():
        assert torch.equal(value, rank1["buffers"][name]), name
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    load_checkpoint(tmp_path / "ck" / "epoch-0001.pt", net)
    alone = evaluate(net, (x[:21], (x[:21].sum(1) > 0).long()), amp=None)
    assert rank0["val_loss"] == rank1["val_loss"] == pytest.approx(alone["loss"], abs=1e-6)


@pytest.mark.slow
def test_a_dataloader_given_under_torchrun_is_shared_out_between_the_ranks(tmp_path, torchrun):
    """Before: a DataLoader passed to fit went through unchanged, so each rank trained every sample (16 batches of
    4 of 64 samples, each) and scored the whole validation set, gathered twice (42 predictions of 21 samples);
    zoo.vision's EpochBatchSampler gave both ranks the same batches."""
    rank0, rank1 = _ranks_results(tmp_path, torchrun, "loader")
    assert rank0["batches"] == rank1["batches"] == 8
    assert rank0["scored"] == rank1["scored"] == [21]
    shares = [[i for batch, _ in r["tensor_loader"] for i in batch] for r in (rank0, rank1)]
    assert len(shares[0]) == len(shares[1]) == 5 and sorted(shares[0] + shares[1]) == list(range(10))
    assert [s for _, s in rank0["tensor_loader"]] != [s for _, s in rank1["tensor_loader"]]  # augmented unalike


def test_a_dataloader_is_rebuilt_for_its_rank_with_its_own_options():
    """A user's loader, for rank 1 of 2: the engine's samplers instead of its own, everything else kept; one whose
    order cannot be carried over is refused, not run in full by every rank."""
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, WeightedRandomSampler

    from zoo.engine.data import ShardSampler, prepare_loader
    from zoo.engine.distributed import DistInfo

    ds = TensorDataset(torch.arange(11.0)[:, None], torch.zeros(11, dtype=torch.long))
    collate = lambda batch: batch
    gen = torch.Generator()
    given = DataLoader(ds, batch_size=3, shuffle=True, collate_fn=collate, drop_last=True, generator=gen)
    place = DistInfo(rank=1, world_size=2)
    train = prepare_loader(given, batch_size=99, shuffle=True, seed=7, dist=place, train=True)
    assert isinstance(train.sampler, DistributedSampler) and train.sampler.shuffle and train.sampler.seed == 7
    assert (train.sampler.rank, train.sampler.num_replicas) == (1, 2)
    assert (train.batch_size, train.collate_fn, train.drop_last, train.generator) == (3, collate, True, gen)
    val = prepare_loader(DataLoader(ds, batch_size=4), batch_size=99, shuffle=False, dist=place)
    assert isinstance(val.sampler, ShardSampler) and list(val.sampler) == [1, 3, 5, 7, 9]
    assert prepare_loader(given, batch_size=3, shuffle=True, dist=DistInfo()) is given  # one process: as it is
    weighted = DataLoader(ds, batch_size=3, sampler=WeightedRandomSampler([1.0] * 11, 11))
    with pytest.raises(ValueError, match=r"its own WeightedRandomSampler, .* pass its Dataset and batch_size"):
        prepare_loader(weighted, batch_size=3, shuffle=True, dist=place, train=True)


def test_epoch_batch_sampler_shares_out_by_rank():
    """zoo.vision's batch sampler gave every rank the same batches: each trained the same samples with the same
    augmentations. Shuffled, the ranks' shares are padded to one length (as many steps each); unshuffled, each
    sample goes to one rank; one process draws as before."""
    from zoo.vision.tensor_data import EpochBatchSampler

    def share(rank, shuffle):
        return [i for batch, _ in EpochBatchSampler(11, 2, shuffle=shuffle, seed=3, rank=rank, world_size=2)
                for i in batch]

    trained = [share(r, True) for r in (0, 1)]
    assert len(trained[0]) == len(trained[1]) == 6 and set(trained[0] + trained[1]) == set(range(11))
    assert sorted(share(0, False) + share(1, False)) == list(range(11))
    alone = EpochBatchSampler(11, 2, shuffle=True, seed=3)
    g = torch.Generator().manual_seed(3 * 1_000_003)
    order = torch.randperm(11, generator=g)
    assert [b for b, _ in alone] == [order[i:i + 2].tolist() for i in range(0, 11, 2)]
    with pytest.raises(ValueError, match="rank=2 is outside world_size=2"):
        EpochBatchSampler(11, 2, shuffle=True, rank=2, world_size=2)
