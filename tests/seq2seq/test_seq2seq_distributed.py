"""Token-bucket batches under DDP: each process trains on its share of every epoch's batches (the same number
on every rank), and validation loss and BLEU are one set of numbers on every rank."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest
import torch

import zoo
from zoo.seq2seq.data import TokenBucketSampler


def _lengths(n: int) -> list[int]:
    g = torch.Generator().manual_seed(0)
    return torch.randint(1, 40, (n,), generator=g).tolist()


@pytest.mark.parametrize("world", [2, 3])
def test_training_batches_are_shared_out_evenly_and_cover_the_epoch(world):
    """Before: rank and world size were ignored, so every rank trained on every batch, in the same order."""
    lengths = _lengths(101)
    one = TokenBucketSampler(lengths, max_tokens=None, batch_size=8, seed=3, rank=0, world_size=1)
    shares = [TokenBucketSampler(lengths, max_tokens=None, batch_size=8, seed=3, rank=r, world_size=world)
              for r in range(world)]
    for epoch in (0, 1):
        for s in (one, *shares):
            s.set_epoch(epoch)
        everything = list(one)  # 13 batches: the epoch's whole list, as one process cuts it
        got = [list(s) for s in shares]
        n = -(-len(everything) // world)
        assert [len(g) for g in got] == [len(s) for s in shares] == [n] * world  # DDP steps in lockstep
        # padded with the list's own first batches to n * world, as DistributedSampler pads
        padded = everything + everything[: n * world - len(everything)]
        assert Counter(tuple(b) for g in got for b in g) == Counter(tuple(b) for b in padded)
        assert sorted({i for g in got for b in g for i in b}) == list(range(101))
        for r, g in enumerate(got):
            assert g == padded[r::world]  # no two ranks draw the same batch (but for the padding)
    # a fresh order each epoch, the same on every rank and for a new sampler (an exact resume)
    again = TokenBucketSampler(lengths, max_tokens=None, batch_size=8, seed=3, rank=1, world_size=world)
    again.set_epoch(1)
    assert list(again) == got[1]
    again.set_epoch(0)
    assert list(again) != got[1]


def test_evaluation_batches_go_to_one_rank_each():
    lengths = _lengths(37)
    everything = list(TokenBucketSampler(lengths, max_tokens=100, shuffle=False, rank=0, world_size=1))
    got = [list(TokenBucketSampler(lengths, max_tokens=100, shuffle=False, rank=r, world_size=2)) for r in (0, 1)]
    assert sorted(got[0] + got[1]) == sorted(everything)  # each sentence scored once, none twice
    assert got[0] == everything[0::2] and got[1] == everything[1::2]


def test_the_place_defaults_to_torchruns_and_a_bad_one_is_refused(monkeypatch):
    lengths = _lengths(40)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    train = TokenBucketSampler(lengths, max_tokens=None, batch_size=4, seed=0)
    assert train.place() == (1, 2) and len(list(train)) == 5  # 10 batches, half of them here
    # an evaluation's shards need a process group to gather them: without one, this process scores all
    assert TokenBucketSampler(lengths, max_tokens=None, batch_size=4, shuffle=False).place() == (0, 1)
    with pytest.raises(ValueError, match="rank=2 is outside world_size=2"):
        TokenBucketSampler(lengths, batch_size=4, rank=2, world_size=2)
    with pytest.raises(ValueError, match="rank must be an int >= 0"):
        TokenBucketSampler(lengths, batch_size=4, rank=-1)


COMMON = textwrap.dedent("""
    NOUNS = ["Hund", "Katze", "Mann", "Frau", "Kind", "Vogel", "Pferd", "Junge"]
    VERBS = [("läuft", "runs"), ("springt", "jumps"), ("schläft", "sleeps"), ("singt", "sings")]
    EN = {"Hund": "dog", "Katze": "cat", "Mann": "man", "Frau": "woman", "Kind": "child", "Vogel": "bird",
          "Pferd": "horse", "Junge": "boy"}
    PAIRS = [(f"Ein {n} {v} {i}.", f"A {EN[n]} {w} {i}.") for i, (n, (v, w)) in
             enumerate((n, v) for n in NOUNS for v in VERBS)]  # 32 distinct pairs: 8 batches of 4
    VAL = PAIRS[:7]
    TINY = dict(src_vocab=300, tgt_vocab=300, emb_dim=16, hidden=16, dropout=0.0)
""")

WORKER = COMMON + textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    import torch, zoo

    out, rank = Path(sys.argv[1]), int(os.environ["RANK"])
    torch.manual_seed(0)
    m = zoo.build("seq2seq-gru", **TINY)
    seen, forward = [], m.forward

    def recording(src, tgt_in, *a, **k):
        if m.training:  # the sentences this rank trains on (validation runs in eval mode)
            seen.append([r[r != 0].tolist() for r in src])
        return forward(src, tgt_in, *a, **k)

    m.forward = recording
    import importlib

    tr = importlib.import_module("zoo.seq2seq.translate")  # the module (zoo.seq2seq.translate is also its function)

    decoded, translate = [], tr._translate_texts  # what BLEU decodes with
    tr._translate_texts = lambda model, items, **k: decoded.append(len(items)) or translate(model, items, **k)
    r = zoo.train(m, (PAIRS, VAL), epochs=2, batch_size=4, progress=False, seed=0, amp=None)
    ev = zoo.evaluate(m, VAL, batch_size=4, amp=None)  # in the live group: shared out and gathered
    (out / f"rank{rank}.json").write_text(json.dumps({"seen": seen, "decoded": decoded, "history": r.history, "eval": ev}))
    if rank == 0:
        m.forward = forward
        zoo.save(m, out / "m.safetensors")
    import torch.distributed as dist
    dist.barrier()
    dist.destroy_process_group()
    # Gloo's teardown can still abort a finished process at interpreter exit ("terminate called without an active
    # exception", SIGABRT; pytorch/pytorch#190489): one run in several tens here, after the results were written.
    # The worker's work is done and checked from its files, so it leaves without the interpreter's teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
""")


@pytest.mark.slow
def test_two_processes_each_train_on_half_and_agree_on_validation(tmp_path, torchrun):
    """Before: each of 2 ranks trained on all 32 pairs in the same 8 batches (16 steps, the work done twice) and
    decoded all of the validation sentences for BLEU."""
    (tmp_path / "worker.py").write_text(WORKER, encoding="utf-8")
    proc = torchrun([tmp_path / "worker.py", tmp_path], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    ns: dict = {}
    exec(COMMON, ns)  # noqa: S102 - the same sentences here
    for epoch in range(2):
        batches = [rk["seen"][epoch * 4 : (epoch + 1) * 4] for rk in ranks]
        assert [len(b) for b in batches] == [4, 4] and len(ranks[0]["seen"]) == 8  # 8 batches of 4, half each
        rows = [tuple(row) for b in batches for batch in b for row in batch]
        assert len(rows) == len(set(rows)) == len(ns["PAIRS"])  # every pair once an epoch, on one rank
    assert [row["step"] for row in ranks[0]["history"]] == [4, 8]
    strip = [[{k: v for k, v in row.items() if k != "epoch_time_s"} for row in rk["history"]] for rk in ranks]
    assert strip[0] == strip[1]  # train and validation loss, accuracy and BLEU: one value on every rank
    assert "val_bleu" in strip[0][-1] and "val_loss" in strip[0][-1]
    assert ranks[0]["eval"] == ranks[1]["eval"]
    # BLEU: each rank decodes its share of the 7 sentences (2 validations and the evaluation), all score the whole
    assert [rk["decoded"] for rk in ranks] == [[4, 4, 4], [3, 3, 3]]
    alone = zoo.evaluate(zoo.build("seq2seq-gru", weights=str(tmp_path / "m.safetensors")), ns["VAL"], batch_size=4,
                         amp=None)  # one process scores every pair: the shards gathered are the same numbers
    for key in ("loss", "accuracy", "bleu"):
        assert ranks[0]["eval"][key] == pytest.approx(alone[key], abs=1e-5), key
