"""What the denormal benchmarks share: HybridSN trained on Indian Pines from a seed, ours and the peer in
alternating rounds, and a plot of two per-epoch series for both (optimizer_denormals.py, gradient_denormals.py)."""

from __future__ import annotations

import argparse
import hashlib
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
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--rounds", type=int, default=1, help="pairs of runs; the order alternates")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", default="disjoint")
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


def alternate(rounds: int, run: Callable[[bool], dict[str, Any]], describe: Callable[[dict[str, Any]], str]
              ) -> dict[str, list[dict[str, Any]]]:
    """``run(ours)`` for the peer and ours, the order swapped every round: ``{"zoo": [...], "torch": [...]}``."""
    runs: dict[str, list[dict[str, Any]]] = {"zoo": [], "torch": []}
    for r in range(rounds):
        for label in (("torch", "zoo") if r % 2 == 0 else ("zoo", "torch")):
            print(f"[{time.strftime('%H:%M:%S')}] round {r + 1}: {label}", file=sys.stderr, flush=True)
            runs[label].append(run(label == "zoo"))
            print(f"  {describe(runs[label][-1])}", file=sys.stderr, flush=True)
    return runs


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
