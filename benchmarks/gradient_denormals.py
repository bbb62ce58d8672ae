"""Claim (issue 15): training does not slow down as its gradients shrink into the denormal range.

HybridSN on Indian Pines, the family's own ``zoo.train`` recipe, trained twice from the same seed: ours
(``flush_tiny_grads=True``, opt-in: gradient entries of the model's outputs at or below 1e-20 zeroed,
``zoo.engine.denormals.OUTPUT_GRAD_FLOOR``) and the peer, the engine's default ``flush_tiny_grads=False``:
the backward as torch computes it. Once the network is sure of its training windows, the wrong classes' probabilities (1e-25,
1e-40, ...) go back through every layer and reach the denormal range, where an Intel core takes a microcode
assist per operand. Recorded per epoch for both: the epoch's time and the share of parameter-gradient
entries that are denormal; per run the training time, the test accuracy and a digest of the parameters.
The runs alternate in order over ``--rounds``. Writes results/gradient_denormals[.<cpu kind>].json and a PNG.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/gradient_denormals.py          # ~6 minutes a run
"""

from __future__ import annotations

import argparse
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
from zoo.engine.logs import atomic_savefig
from zoo.engine.threads import torch_threads
from zoo.hyperspectral import load_dataset

NAME = "gradient_denormals"
TINY = torch.finfo(torch.float32).tiny  # the smallest normal fp32


class GradProbe(Callback):
    """Counts denormal entries of every parameter gradient (a tensor hook) and keeps each epoch's time."""

    def __init__(self) -> None:
        self.epochs: list[dict[str, float]] = []
        self.count = [0, 0]

    def on_train_start(self, state) -> None:
        for p in state.model.parameters():
            p.register_hook(self._hook)

    def _hook(self, grad: torch.Tensor) -> None:
        self.count[0] += int(((grad != 0) & (grad.abs() < TINY)).sum())
        self.count[1] += grad.numel()

    def on_epoch_end(self, state, row) -> None:
        self.epochs.append({"epoch_s": row["epoch_time_s"], "denormal_grad_pct": 100 * self.count[0] / max(1, self.count[1])})
        self.count = [0, 0]


def train(scene, floor: bool, epochs: int, seed: int, split: str) -> dict[str, Any]:
    torch.manual_seed(seed)  # the initial weights come from the global generator when the network is built
    net = zoo.build("hybridsn")
    probe = GradProbe()
    t0 = time.perf_counter()
    zoo.train(net, scene, split=split, seed=seed, epochs=epochs, progress=False, flush_tiny_grads=floor,
              callbacks=[probe])
    train_s = time.perf_counter() - t0
    scores = zoo.evaluate(net, scene)
    digest = hashlib.sha256()
    for _, p in sorted(net.state_dict().items()):
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return {"train_s": train_s, "epochs": probe.epochs, "overall_accuracy": scores["overall_accuracy"],
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
            axes[0].plot(xs, [e["epoch_s"] for e in run["epochs"]], **kw)
            axes[1].plot(xs, [e["denormal_grad_pct"] for e in run["epochs"]], **kw)
    for ax, title in zip(axes, ("epoch time (s)", "denormal parameter-gradient entries (%)")):
        ax.set_xlabel("epoch")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("HybridSN on Indian Pines: output-gradient floor (zoo) vs torch's backward as it is")
    fig.tight_layout()
    atomic_savefig(fig, path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--rounds", type=int, default=1, help="pairs of runs; the order alternates")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", default="disjoint")
    p.add_argument("--late-from", type=int, default=4, help="first epoch of the late-epoch time medians")
    args = p.parse_args(argv)
    scene = load_dataset("indian_pines")
    runs: dict[str, list[dict[str, Any]]] = {"zoo": [], "torch": []}
    with torch_threads(args.threads):
        for r in range(args.rounds):
            for label in (("torch", "zoo") if r % 2 == 0 else ("zoo", "torch")):
                print(f"[{time.strftime('%H:%M:%S')}] round {r + 1}: {label}", file=sys.stderr, flush=True)
                run = train(scene, label == "zoo", args.epochs, args.seed, args.split)
                runs[label].append(run)
                print(f"  {run['train_s']:.1f} s, epochs {[round(e['epoch_s'], 1) for e in run['epochs']]} s, denormal "
                      f"grad % {[round(e['denormal_grad_pct'], 4) for e in run['epochs']]}, OA "
                      f"{run['overall_accuracy']:.4f}", file=sys.stderr, flush=True)

    def summary(label: str) -> dict[str, Any]:
        rounds = runs[label]
        late = [e["epoch_s"] for run in rounds for e in run["epochs"][args.late_from - 1:]]
        return {"train_s": median([run["train_s"] for run in rounds]),
                "epoch_s_late": median(late) if late else None,
                "overall_accuracy": median([run["overall_accuracy"] for run in rounds]),
                "denormal_grad_pct_last_epoch": median([run["epochs"][-1]["denormal_grad_pct"] for run in rounds])}

    ours, peer = summary("zoo"), summary("torch")
    png = result_file(NAME, "png")
    plot(runs, png)
    ratios = {"train_s": peer["train_s"] / ours["train_s"]}
    if ours["epoch_s_late"] and peer["epoch_s_late"]:
        ratios["epoch_s_late"] = peer["epoch_s_late"] / ours["epoch_s_late"]
    write_result(
        NAME,
        metrics={**ours, "identical_parameters": len({run["params_sha256"] for rs in runs.values() for run in rs}) == 1},
        peers={"torch_backward_as_is": peer},
        ratios=ratios,
        command=command_line(),
        extra={
            "settings": {"model": "hybridsn (defaults)", "data": f"indian_pines, split {args.split}",
                         "epochs": args.epochs, "rounds": args.rounds, "threads": args.threads, "seed": args.seed,
                         "late_from_epoch": args.late_from},
            "runs": runs,
            "plot": str(png.relative_to(RESULTS_DIR.parent.parent)),
            "notes": "ratios = torch's backward as it is / ours (above 1: ours faster). epoch_s_late: median epoch "
                     "time from late_from_epoch on; train_s: the whole zoo.train call. Both runs flush optimizer "
                     "moments (flush_tiny_moments, the default).",
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
