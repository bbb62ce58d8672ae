"""Claim (issue 15): training never slows down as optimizer moments turn denormal (``zoo.engine.denormals``).

HybridSN on Indian Pines, the family's own ``zoo.train`` recipe (AdamW), trained twice from the same seed:
ours (the engine's default, moments below 1e-30 / 1e-36 zeroed every 32 steps) and the peer, the same run
with ``flush_tiny_moments=False``: the same AdamW (fused on the CPU since 2026-12-03 12:30, torch's per-tensor
loop before) as torch computes it. Recorded per epoch for both: the median time of
``optimizer.step()`` (the flush runs outside it, so it is in the training time only) and the share of the
optimizer's moments that are denormal; per run the whole training time and a digest of the trained
parameters, which must be equal (the flush changes no parameter). On an Intel CPU each denormal operand
costs a microcode assist; other CPUs are measured by running this there. The two runs alternate in order
over ``--rounds``. Writes results/optimizer_denormals[.<cpu kind>].json and a PNG of the step time and the
denormal share per epoch.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/optimizer_denormals.py              # ~15-20 minutes a round
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/optimizer_denormals.py --epochs 15 --rounds 2
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS_DIR, command_line, median, result_file, write_result

import zoo
from zoo.engine.callbacks import Callback
from zoo.engine.denormals import MOMENT_FLOORS
from zoo.engine.logs import atomic_savefig
from zoo.engine.threads import torch_threads
from zoo.hyperspectral import load_dataset

NAME = "optimizer_denormals"
TINY = torch.finfo(torch.float32).tiny  # the smallest normal fp32


class StepProbe(Callback):
    """Times every ``optimizer.step()`` and counts denormal moments at each epoch's end."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.epochs: list[dict[str, float]] = []

    def on_train_start(self, state) -> None:
        opt = state.optimizer
        inner = opt.step

        @functools.wraps(inner)
        def step(*args, **kwargs):
            t0 = time.perf_counter()
            out = inner(*args, **kwargs)
            self.times.append(time.perf_counter() - t0)
            return out

        opt.step = step

    def on_epoch_end(self, state, row) -> None:
        moments = [t for st in state.optimizer.state.values() for k, t in st.items() if k in MOMENT_FLOORS]
        denormal = sum(int(((t != 0) & (t.abs() < TINY)).sum()) for t in moments)
        total = sum(t.numel() for t in moments)
        start = sum(e["steps"] for e in self.epochs)
        self.epochs.append({"steps": len(self.times) - start, "step_ms": 1e3 * median(self.times[start:]),
                            "denormal_pct": 100 * denormal / total, "epoch_s": row["epoch_time_s"]})


def train(scene, flush: bool, epochs: int, seed: int, split: str) -> dict[str, Any]:
    torch.manual_seed(seed)  # the initial weights come from the global generator when the network is built
    net = zoo.build("hybridsn")
    probe = StepProbe()
    t0 = time.perf_counter()
    zoo.train(net, scene, split=split, seed=seed, epochs=epochs, progress=False, flush_tiny_moments=flush,
              callbacks=[probe])
    train_s = time.perf_counter() - t0
    digest = hashlib.sha256()
    for _, p in sorted(net.state_dict().items()):
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return {"train_s": train_s, "epochs": probe.epochs, "step_ms_all": 1e3 * median(probe.times),
            "params_sha256": digest.hexdigest()}


def plot(runs: dict[str, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for label, rounds in runs.items():
        for i, run in enumerate(rounds):
            xs = range(1, len(run["epochs"]) + 1)
            kw = {"color": "C0" if label == "zoo" else "C3", "alpha": 1.0 if i == 0 else 0.5, "marker": "o", "ms": 3,
                  "label": label if i == 0 else None}
            axes[0].plot(xs, [e["step_ms"] for e in run["epochs"]], **kw)
            axes[1].plot(xs, [e["denormal_pct"] for e in run["epochs"]], **kw)
    for ax, title in zip(axes, ("optimizer.step() median (ms)", "denormal moments (%)")):
        ax.set_xlabel("epoch")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("HybridSN on Indian Pines, AdamW: moment flush (zoo) vs torch as it is")
    fig.tight_layout()
    atomic_savefig(fig, path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--rounds", type=int, default=1, help="pairs of runs; the order alternates")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", default="disjoint")
    p.add_argument("--late-from", type=int, default=5, help="first epoch of the late-epoch step-time medians")
    args = p.parse_args(argv)
    scene = load_dataset("indian_pines")
    runs: dict[str, list[dict[str, Any]]] = {"zoo": [], "torch": []}
    with torch_threads(args.threads):
        for r in range(args.rounds):
            order = ("torch", "zoo") if r % 2 == 0 else ("zoo", "torch")
            for label in order:
                print(f"[{time.strftime('%H:%M:%S')}] round {r + 1}: {label}", file=sys.stderr, flush=True)
                run = train(scene, label == "zoo", args.epochs, args.seed, args.split)
                runs[label].append(run)
                print(f"  {run['train_s']:.1f} s, step ms per epoch "
                      f"{[round(e['step_ms'], 1) for e in run['epochs']]}, denormal % "
                      f"{[round(e['denormal_pct'], 2) for e in run['epochs']]}", file=sys.stderr, flush=True)

    def summary(label: str) -> dict[str, Any]:
        rounds = runs[label]
        late = [e["step_ms"] for run in rounds for e in run["epochs"][args.late_from - 1:]]
        return {"train_s": median([run["train_s"] for run in rounds]),
                "step_ms": median([run["step_ms_all"] for run in rounds]),
                "step_ms_late": median(late) if late else None,
                "denormal_pct_last_epoch": median([run["epochs"][-1]["denormal_pct"] for run in rounds])}

    ours, peer = summary("zoo"), summary("torch")
    digests = {run["params_sha256"] for rounds in runs.values() for run in rounds}
    png = result_file(NAME, "png")
    plot(runs, png)
    ratios = {"train_s": peer["train_s"] / ours["train_s"], "step_ms": peer["step_ms"] / ours["step_ms"]}
    if ours["step_ms_late"] and peer["step_ms_late"]:
        ratios["step_ms_late"] = peer["step_ms_late"] / ours["step_ms_late"]
    write_result(
        NAME,
        metrics={**ours, "identical_parameters": len(digests) == 1},
        peers={"torch_adamw_as_is": peer},
        ratios=ratios,
        command=command_line(),
        extra={
            "settings": {"model": "hybridsn (defaults)", "data": f"indian_pines, split {args.split}",
                         "epochs": args.epochs, "rounds": args.rounds, "threads": args.threads, "seed": args.seed,
                         "late_from_epoch": args.late_from, "optimizer": "zoo.train's default for HybridSN (AdamW)"},
            "runs": runs,
            "plot": str(png.relative_to(RESULTS_DIR.parent.parent)),
            "notes": "ratios = torch's AdamW as it is / ours (above 1: ours faster). step_ms: median "
                     "optimizer.step() over every step; step_ms_late: over the epochs from late_from_epoch on, "
                     "once torch's moments have turned denormal; train_s includes the flush and everything else.",
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
