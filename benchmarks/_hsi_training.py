"""What the denormal benchmarks share: HybridSN trained on Indian Pines from a seed, ours and the peer in
alternating rounds, and a plot of two per-epoch series for both (optimizer_denormals.py, gradient_denormals.py)."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

import zoo
from zoo.engine.logs import atomic_savefig


def run_arguments(doc: str, *, epochs: int, late_from: int) -> argparse.ArgumentParser:
    """The command line both benchmarks take (``doc``: the script's docstring)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--rounds", type=int, default=1, help="pairs of runs; the order alternates")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vary-seed", action="store_true",
                   help="round r trains from seed + r (both runs of a round share it): seed-to-seed spread beside the pair's gap")
    p.add_argument("--split", default="disjoint")
    p.add_argument("--merge", action="store_true",
                   help="add these rounds to this CPU's earlier result (same epochs, split and threads; new seeds)")
    p.add_argument("--late-from", type=int, default=late_from, help="first epoch of the late-epoch medians")
    return p


def train_hybridsn(scene, *, seed: int, epochs: int, split: str, callbacks: list, **options: Any) -> dict[str, Any]:
    """``zoo.train`` of a fresh HybridSN on ``scene``: ``{"train_s", "params_sha256", "net"}``."""
    torch.manual_seed(seed)  # the initial weights come from the global generator when the network is built
    net = zoo.build("hybridsn")
    t0 = time.perf_counter()
    zoo.train(net, scene, split=split, seed=seed, epochs=epochs, progress=False, callbacks=callbacks, **options)
    train_s = time.perf_counter() - t0
    digest = hashlib.sha256()
    for _, p in sorted(net.state_dict().items()):
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return {"train_s": train_s, "params_sha256": digest.hexdigest(), "net": net}


def alternate(rounds: int, run: Callable[[bool, int], dict[str, Any]], describe: Callable[[dict[str, Any]], str]
              ) -> dict[str, list[dict[str, Any]]]:
    """``run(ours, round)`` for the peer and ours, the order swapped every round: ``{"zoo": [...], "torch": [...]}``."""
    runs: dict[str, list[dict[str, Any]]] = {"zoo": [], "torch": []}
    for r in range(rounds):
        for label in (("torch", "zoo") if r % 2 == 0 else ("zoo", "torch")):
            print(f"[{time.strftime('%H:%M:%S')}] round {r + 1}: {label}", file=sys.stderr, flush=True)
            runs[label].append(run(label == "zoo", r))
            print(f"  {describe(runs[label][-1])}", file=sys.stderr, flush=True)
    return runs


def seeds(args: argparse.Namespace) -> list[int]:
    """The seed of each round (``--vary-seed``: ``seed + r``; otherwise ``seed`` throughout)."""
    return [args.seed + (r if args.vary_seed else 0) for r in range(args.rounds)]


def identical_parameters(runs: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether ours and the peer ended with the same parameters in every round (rounds may differ in seed)."""
    return all(z["params_sha256"] == t["params_sha256"] for z, t in zip(runs["zoo"], runs["torch"]))


def merge_earlier(path: Path, runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace
                  ) -> tuple[dict[str, list[dict[str, Any]]], list[int], list[str]]:
    """The earlier result's rounds at ``path`` followed by ``runs``, the seeds of all of them and the earlier
    commands; refused when that result ran other settings or already holds one of these seeds."""
    earlier = json.loads(path.read_text())
    old = earlier["settings"]
    for key in ("epochs", "threads", "late_from_epoch"):
        mine = args.late_from if key == "late_from_epoch" else getattr(args, key)
        if old.get(key) != mine:
            raise SystemExit(f"--merge: {path} ran {key}={old.get(key)!r}, this run {mine!r}; rerun with the same")
    if old.get("data") != f"indian_pines, split {args.split}":
        raise SystemExit(f"--merge: {path} ran on {old.get('data')!r}, this run on split {args.split!r}")
    old_seeds = old.get("seeds", [old.get("seed")] * old["rounds"])
    if overlap := sorted(set(old_seeds) & set(seeds(args))):
        raise SystemExit(f"--merge: {path} already holds seeds {overlap}; pick --seed past {max(old_seeds)}")
    merged = {label: earlier["runs"][label] + runs[label] for label in runs}
    return merged, old_seeds + seeds(args), earlier.get("earlier_commands", []) + [earlier["command"]]


def plot_epochs(runs: dict[str, list[dict[str, Any]]], path: Path, series: Sequence[tuple[str, str]], title: str) -> None:
    """One panel per ``(key, title)`` in ``series``: ``run["epochs"][i][key]`` by epoch, ours blue, the peer red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(series), figsize=(4.5 * len(series), 3.4))
    for label, rounds in runs.items():
        for i, run in enumerate(rounds):
            xs = range(1, len(run["epochs"]) + 1)
            kw = {"color": "C0" if label == "zoo" else "C3", "alpha": 1.0 if i == 0 else 0.5, "marker": "o", "ms": 3,
                  "label": label if i == 0 else None}
            for ax, (key, _) in zip(axes, series):
                ax.plot(xs, [e[key] for e in run["epochs"]], **kw)
    for ax, (_, panel) in zip(axes, series):
        ax.set_xlabel("epoch")
        ax.set_title(panel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    atomic_savefig(fig, path)
    plt.close(fig)
