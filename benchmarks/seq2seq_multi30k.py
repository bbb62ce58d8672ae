"""Recipe and claim (issue 5): Multi30k En<->De translation on a CPU, scored with sacreBLEU.

For each direction (de-en, en-de): a joint byte-level BPE (8,000) is trained on the training text; the
``seq2seq-transformer`` (defaults: pre-LN, 3+3 layers, d_model 256, 8 heads, shared embeddings) and the
``seq2seq-gru`` (Bahdanau) are trained through ``zoo.engine.fit`` (AdamW, inverse-sqrt warm-up, label
smoothing 0.1, ``amp="auto"`` (bf16 autocast where native), token-bucketed batches, best checkpoint by validation BLEU, each model under a
wall-clock budget), then scored on test_2016_flickr with sacreBLEU (detokenized, cased, 13a): the
Transformer greedy and with beam 5, the GRU greedy and beam 5. The best Transformer of each direction is
published as ``seq2seq-transformer.multi30k-<dir>`` (fp16 storage, tokenizer inside) with the BLEU measured
*on the published file*.

Goals: De->En >= 36 and En->De >= 32 BLEU for the Transformer trained in <= 60 minutes here. Anchor:
bentrevett/pytorch-seq2seq reports 36.52 De->En (3-layer Transformer) and 28.30 (GRU + Bahdanau), scored
on tokenized lowercase text, a softer metric.

    # full run, both directions (about 2 x (60 + 30) min training + ~10 min decoding; publishes weights):
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/seq2seq_multi30k.py
    # one direction / one model:
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/seq2seq_multi30k.py --directions de-en --models transformer
    # smoke (tiny subset and model, about 4 min, nothing published):
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/seq2seq_multi30k.py --smoke
    # training throughput of the Transformer, fp32 vs bf16 autocast (target tokens/s):
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/seq2seq_multi30k.py --measure-throughput 30
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import _harness

import zoo
from zoo.engine import Callback
from zoo.hub import shared_data_root
from zoo.seq2seq.data import MULTI30K_TEST, ParallelDataset, load_multi30k, make_loader
from zoo.seq2seq.tokenizer import train_tokenizer
from zoo.seq2seq.translate import bleu_eval_fn, corpus_bleu, seq2seq_forward, training_config

RESULTS = ROOT / "benchmarks" / "results"
WORK = ROOT / "benchmarks" / "_work" / "seq2seq_multi30k"
NAME = "seq2seq_multi30k"
GOALS = {"de-en": 36.0, "en-de": 32.0}
ANCHORS = {"bentrevett transformer de-en (tokenized, lowercase)": 36.52,
           "bentrevett gru+bahdanau de-en (tokenized, lowercase)": 28.30}
COMMAND = "flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/seq2seq_multi30k.py"


def machine() -> dict:
    return _harness.machine_info()


def write_json(name: str, payload: dict) -> Path:
    return _harness.save_result_json(name, payload, RESULTS)  # one file per CPU kind


DETAIL_KEYS = ("history", "samples", "config")  # per-run lists/dicts: kept in the JSON, out of the README table


def merge_runs(results: dict, path: Path) -> dict:
    """Fold this run into the results already at ``path``: one direction or model at a time adds to the earlier
    runs instead of replacing them (the same ``direction/model`` key: the newer run wins). Per-epoch history and
    samples move to ``details`` so the generated README table keeps the scalar figures."""
    old: dict = {}
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            print(f"warning: not merging unreadable {path}: {err}", file=sys.stderr)
        if old.get("benchmark") != NAME:
            old = {}
    results["runs"] = old.get("runs", []) + results.get("runs", [])
    for section in ("metrics", "published", "details"):
        results[section] = {**(old.get(section) or {}), **(results.get(section) or {})}
    for key, run in results["metrics"].items():
        moved = {k: run.pop(k) for k in DETAIL_KEYS if k in run}
        if moved:
            results["details"][key] = {**results["details"].get(key, {}), **moved}
    ratios = {}
    for direction, goal in GOALS.items():
        tr, gru = results["metrics"].get(f"{direction}/transformer"), results["metrics"].get(f"{direction}/gru")
        if tr:
            ratios[f"{direction}/transformer_beam5_vs_goal"] = tr["test_bleu_beam5"] / goal
            if gru:
                ratios[f"{direction}/transformer_vs_gru_beam5"] = tr["test_bleu_beam5"] / max(gru["test_bleu_beam5"], 1e-9)
    results["ratios"] = ratios
    return results


class TimeBudget(Callback):
    """Engine callback: stop when the next epoch would not finish inside ``minutes`` (or at the budget)."""

    def __init__(self, minutes: float) -> None:
        self.seconds = minutes * 60
        self.start = self.epoch_start = time.perf_counter()
        self.longest_epoch = 0.0

    def on_train_start(self, state) -> None:
        self.start = time.perf_counter()

    def on_epoch_start(self, state) -> None:
        self.epoch_start = time.perf_counter()

    def on_batch_end(self, state, logs) -> None:
        if time.perf_counter() - self.start > self.seconds:
            state.request_stop(f"time budget of {self.seconds / 60:.0f} min reached")

    def on_epoch_end(self, state, row) -> None:
        now = time.perf_counter()
        self.longest_epoch = max(self.longest_epoch, now - self.epoch_start)
        row["elapsed_min"] = round((now - self.start) / 60, 2)
        if now - self.start + self.longest_epoch > self.seconds:
            state.request_stop(f"the next epoch would end after the {self.seconds / 60:.0f} min budget")


def model_config(kind: str, vocab: int, smoke: bool) -> tuple[str, dict]:
    if kind == "transformer":
        cfg = {"src_vocab": vocab, "tgt_vocab": vocab}
        if smoke:
            cfg.update(d_model=64, n_heads=4, n_layers=1, d_ff=128)
        return "seq2seq-transformer", cfg
    if kind == "gru":
        cfg = {"src_vocab": vocab, "tgt_vocab": vocab, "attention": "bahdanau"}
        if smoke:
            cfg.update(emb_dim=32, hidden=64)
        return "seq2seq-gru", cfg
    raise ValueError(f"unknown model kind {kind!r}")


def train_one(kind: str, direction: str, data: dict, tok, args) -> dict:
    from zoo.engine import fit, load_checkpoint

    name, cfg = model_config(kind, args.vocab, args.smoke)
    torch.manual_seed(args.seed)
    model = zoo.build(name, **cfg)
    model.tokenizer = tok
    train_ds = ParallelDataset(data["train"], tok, model.max_len)
    val_ds = ParallelDataset(data["val"], tok, model.max_len)
    train_loader = make_loader(train_ds, max_tokens=args.max_tokens, seed=args.seed)
    val_loader = make_loader(val_ds, max_tokens=args.max_tokens, shuffle=False)
    n_bleu = args.val_bleu_sentences
    # BLEU is scored on fp32 decoding, as every published figure was (training still runs at --amp)
    eval_fn = bleu_eval_fn(data["val"].src[:n_bleu], data["val"].tgt[:n_bleu], beam_size=1, amp=None)
    lr = args.lr if args.lr is not None else (7e-4 if kind == "transformer" else 1e-3)
    warmup = min(args.warmup, max(1, len(train_loader)))
    config = training_config(epochs=args.epochs, lr=lr, warmup_steps=warmup, amp=args.amp, eval_fn=eval_fn)
    if kind == "gru":  # RNNs train better with a short warm-up and no inverse-sqrt decay to speak of
        config.update(schedule="cosine")
    minutes = args.minutes if kind == "transformer" else args.gru_minutes
    ckpt = WORK / f"{direction}-{kind}{'-smoke' if args.smoke else ''}"
    shutil.rmtree(ckpt, ignore_errors=True)  # a scratch folder: a new run refuses one holding an earlier run's
    print(f"\n== {name} {direction}: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{len(train_ds):,} pairs, {train_ds.num_tokens():,} target tokens/epoch, budget {minutes} min ==", flush=True)
    t0 = time.perf_counter()
    result = fit(model, train_loader, val_data=val_loader, seed=args.seed, checkpoint_dir=str(ckpt),
                 keep_last=1, callbacks=[TimeBudget(minutes)], progress=not args.no_progress, **config)
    train_s = time.perf_counter() - t0
    if result.checkpoint_path is not None:
        load_checkpoint(result.checkpoint_path, model)  # the best epoch by validation BLEU
    model.eval()
    test = data["test"]
    out = {"model": name, "config": dataclasses.asdict(model.config), "train_seconds": round(train_s, 1),
           "epochs": len(result.history), "best_epoch": result.best_epoch, "best_val_bleu_greedy": 100 * result.best_metric,  # eval_fn reports a fraction
           "history": result.history, "lr": lr, "warmup_steps": warmup, "amp": args.amp,
           "num_params": sum(p.numel() for p in model.parameters())}
    for beam in (1, 5):
        t1 = time.perf_counter()
        hyps = model.translate(test.src, beam_size=beam, batch_size=64 if beam == 1 else 32, progress=not args.no_progress,
                               amp=None)
        out[f"test_bleu_{'greedy' if beam == 1 else 'beam5'}"] = round(corpus_bleu(hyps, test.tgt), 2)
        out[f"decode_seconds_{'greedy' if beam == 1 else 'beam5'}"] = round(time.perf_counter() - t1, 1)
        if beam == 5:
            out["samples"] = [{"src": s, "ref": r, "hyp": h} for s, r, h in zip(test.src[:3], test.tgt[:3], hyps[:3])]
    print(f"{name} {direction}: test BLEU greedy {out['test_bleu_greedy']}, beam5 {out['test_bleu_beam5']} "
          f"({train_s / 60:.1f} min training, {len(result.history)} epochs)", flush=True)
    out["_model"] = model
    return out


def publish(direction: str, run: dict, data: dict) -> dict:
    from zoo import hub

    model = run["_model"]
    wname = f"seq2seq-transformer.multi30k-{direction}"
    cfg = {k: v for k, v in run["config"].items() if k != "dropout"}
    meta = {
        "dataset": f"Multi30k task 1 (github.com/multi30k/dataset), {direction}, test_2016_flickr",
        "metrics": {},
        "command": f"{COMMAND} --directions {direction}",
        "license": "weights: MIT (this project); data: Multi30k/Flickr30k terms, non-commercial research",
        "storage": "float16 (tokenizer and config inside the file as the module's extra state)",
        "train_minutes": round(run["train_seconds"] / 60, 1),
    }
    hub.add_weights(model, name=wname, config=cfg, meta=meta, dtype=torch.float16, force=True)  # only a recorded run gets here
    shipped = zoo.build("seq2seq-transformer", weights=wname)  # measure what users get: the fp16 file
    test = data["test"]
    metrics = {}
    for beam in (1, 5):
        hyps = shipped.translate(test.src, beam_size=beam, batch_size=64 if beam == 1 else 32, amp=None)
        metrics[f"sacrebleu_test2016_{'greedy' if beam == 1 else 'beam5'}"] = round(corpus_bleu(hyps, test.tgt), 2)
    meta["metrics"] = metrics
    hub.add_weights(model, name=wname, config=cfg, meta=meta, dtype=torch.float16, force=True)  # only a recorded run gets here
    print(f"published {wname}: {metrics}", flush=True)
    return {"name": wname, **metrics}


def measure_throughput(args) -> dict:
    """Target tokens/s of the Transformer's training step (teacher forcing, label-smoothed CE, AdamW),
    fp32 vs bf16 autocast, interleaved rounds of ``seconds`` each (after 3 warm-up batches), medians."""
    train = load_multi30k(args.data, "train", "de-en")
    tok = train_tokenizer(train.src + train.tgt, vocab_size=args.vocab)
    ds = ParallelDataset(train, tok, 256)
    runs: dict[str, list[float]] = {"fp32": [], "bf16": []} if _harness.native_bf16() else {"fp32": []}
    for r in range(args.rounds):
        for mode in list(runs):
            torch.manual_seed(0)
            model = zoo.build("seq2seq-transformer", src_vocab=args.vocab, tgt_vocab=args.vocab)
            opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
            loader = make_loader(ds, max_tokens=args.max_tokens, seed=r)
            warm, seen, t0 = 3, 0, None
            for batch in loader:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
                    logits, targets = seq2seq_forward(model, batch)
                    loss = F.cross_entropy(logits.float(), targets, label_smoothing=0.1)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if warm:
                    warm -= 1
                    if not warm:
                        t0 = time.perf_counter()
                    continue
                seen += targets.numel()
                if time.perf_counter() - t0 >= args.measure_throughput:
                    break
            tps = seen / (time.perf_counter() - t0)
            runs[mode].append(tps)
            print(f"round {r + 1}/{args.rounds} {mode}: {tps:,.0f} target tokens/s", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    epoch_tokens = ds.num_tokens()
    return {
        "target_tokens_per_s": med,
        "runs": runs,
        "bf16_speedup": med["bf16"] / med["fp32"] if "bf16" in med else None,  # None: no native bf16, not run
        "max_tokens": args.max_tokens,
        "target_tokens_per_epoch": epoch_tokens,
        "minutes_per_epoch_estimate": {k: epoch_tokens / v / 60 for k, v in med.items()},
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=shared_data_root() / "multi30k")
    p.add_argument("--directions", nargs="+", default=["de-en", "en-de"], choices=["de-en", "en-de"])
    p.add_argument("--models", nargs="+", default=["transformer", "gru"], choices=["transformer", "gru"])
    p.add_argument("--minutes", type=float, default=60.0, help="training budget of the Transformer")
    p.add_argument("--gru-minutes", type=float, default=30.0, help="training budget of the GRU")
    p.add_argument("--epochs", type=int, default=40, help="upper bound; the time budget usually stops first")
    p.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per batch")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--warmup", type=int, default=800)
    p.add_argument("--amp", default="auto", choices=["auto", "bf16", "none"],
                   help="auto (default): bf16 where this CPU computes matmuls faster in it, else fp32")
    p.add_argument("--val-bleu-sentences", type=int, default=1014, help="validation sentences scored per epoch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-publish", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--smoke", action="store_true", help="tiny subset and model, 1 epoch, nothing published")
    p.add_argument("--measure-throughput", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds for --measure-throughput")
    args = _harness.parse_args(p, argv, __file__)
    args.amp = None if args.amp == "none" else args.amp
    if not (args.data / "task1_raw").is_dir() and not any(args.data.glob("train.*")):
        raise SystemExit(f"Multi30k not found at {args.data} (expected task1_raw/train.de.gz ...); pass --data")
    cmd = _harness.command_line()
    if args.measure_throughput:
        res = measure_throughput(args)
        payload = {"benchmark": f"{NAME}_throughput", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   "machine": machine(), "command": cmd, "metrics": res, "peers": {},
                   "ratios": {"bf16_vs_fp32": res["bf16_speedup"]} if res["bf16_speedup"] else {}}
        speedup = f"bf16 speed-up {res['bf16_speedup']:.2f}x" if res["bf16_speedup"] else "bf16 not run (no native bf16)"
        print(json.dumps(res["target_tokens_per_s"]), speedup,
              "min/epoch:", {k: round(v, 1) for k, v in res["minutes_per_epoch_estimate"].items()})
        print(f"written {write_json(f'{NAME}_throughput', payload)}")
        return 0
    if args.smoke:
        args.epochs, args.minutes, args.gru_minutes = 1, 1.0, 0.5
        args.vocab, args.val_bleu_sentences, args.warmup = 1000, 50, 50
    t_all = time.perf_counter()
    results: dict = {"benchmark": NAME, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     "machine": machine(), "command": cmd, "metrics": {}, "peers": {"anchors": ANCHORS},
                     "ratios": {}, "goals": GOALS, "published": {}}
    for direction in args.directions:
        data = {split: load_multi30k(args.data, split, direction) for split in ("train", "val", MULTI30K_TEST)}
        data["test"] = data.pop(MULTI30K_TEST)
        if args.smoke:
            data = {"train": data["train"].subset(3000), "val": data["val"].subset(100), "test": data["test"].subset(100)}
        t_tok = time.perf_counter()
        tok = train_tokenizer(data["train"].src + data["train"].tgt, vocab_size=args.vocab)
        print(f"{direction}: BPE vocab {tok.vocab_size} in {time.perf_counter() - t_tok:.1f} s", flush=True)
        runs = {kind: train_one(kind, direction, data, tok, args) for kind in args.models}
        if ("transformer" in runs and not args.smoke and not args.no_publish
                and _harness.may_publish_weights(f"seq2seq-transformer.multi30k-{direction}")):
            results["published"][direction] = publish(direction, runs["transformer"], data)
        for kind, run in runs.items():
            run.pop("_model")
            results["metrics"][f"{direction}/{kind}"] = run
    results["wall_minutes"] = round((time.perf_counter() - t_all) / 60, 1)
    results["runs"] = [{"command": cmd, "date": results["date"], "wall_minutes": results["wall_minutes"],
                        "keys": sorted(results["metrics"])}]
    if not args.smoke:
        results = merge_runs(results, _harness.result_file(NAME, folder=RESULTS))
    print("\n| direction | model | train min | epochs | BLEU greedy | BLEU beam 5 | goal |")
    print("|---|---|---|---|---|---|---|")
    for key, run in results["metrics"].items():
        direction, kind = key.split("/")
        goal = GOALS[direction] if kind == "transformer" else "-"
        print(f"| {direction} | {run['model']} | {run['train_seconds'] / 60:.1f} | {run['epochs']} | "
              f"{run['test_bleu_greedy']} | {run['test_bleu_beam5']} | {goal} |")
    if args.smoke:
        print("(smoke run: results not written, nothing published)")
    else:
        print(f"written {write_json(NAME, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
