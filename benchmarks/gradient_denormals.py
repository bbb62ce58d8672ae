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
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/gradient_denormals.py --rounds 4 --vary-seed  # seeds 0-3
    ... --rounds 4 --vary-seed --seed 4 --merge     # seeds 4-7 added to the result above

With ``--vary-seed`` each round trains from its own seed, so the test-accuracy gap of a pair (same seed) can be
read against the spread between seeds (``oa_gap_points_per_round``, ``oa_spread_points_across_rounds``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS_DIR, command_line, median, output_file, parse_args, result_file, write_result
from _hsi_training import (
    alternate,
    identical_parameters,
    merge_earlier,
    plot_epochs,
    run_arguments,
    seeds,
    train_hybridsn,
)

import zoo
from zoo.engine.callbacks import Callback
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
    probe = GradProbe()
    out = train_hybridsn(scene, seed=seed, epochs=epochs, split=split, callbacks=[probe], flush_tiny_grads=floor)
    return {"train_s": out["train_s"], "epochs": probe.epochs,
            "overall_accuracy": zoo.evaluate(out["net"], scene)["overall_accuracy"], "params_sha256": out["params_sha256"]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(run_arguments(__doc__, epochs=6, late_from=4), argv, __file__)
    scene = load_dataset("indian_pines")
    with torch_threads(args.threads):
        runs = alternate(args.rounds, lambda ours, r: train(scene, ours, args.epochs, seeds(args)[r], args.split),
                         lambda run: f"{run['train_s']:.1f} s, epochs {[round(e['epoch_s'], 1) for e in run['epochs']]} s, "
                                     f"denormal grad % {[round(e['denormal_grad_pct'], 4) for e in run['epochs']]}, "
                                     f"OA {run['overall_accuracy']:.4f}")
    all_seeds, earlier_commands = seeds(args), []
    if args.merge:
        runs, all_seeds, earlier_commands = merge_earlier(result_file(NAME), runs, args)

    def summary(label: str) -> dict[str, Any]:
        rounds = runs[label]
        late = [e["epoch_s"] for run in rounds for e in run["epochs"][args.late_from - 1:]]
        return {"train_s": median([run["train_s"] for run in rounds]),
                "epoch_s_late": median(late) if late else None,
                "overall_accuracy": median([run["overall_accuracy"] for run in rounds]),
                "denormal_grad_pct_last_epoch": median([run["epochs"][-1]["denormal_grad_pct"] for run in rounds])}

    ours, peer = summary("zoo"), summary("torch")
    # the accuracy question is whether ours - peer in a round (same seed) is larger than the spread across seeds
    gaps = [100 * (z["overall_accuracy"] - t["overall_accuracy"]) for z, t in zip(runs["zoo"], runs["torch"])]
    spread = {label: 100 * (max(r["overall_accuracy"] for r in rs) - min(r["overall_accuracy"] for r in rs))
              for label, rs in runs.items()}
    png = output_file(NAME, "png")
    plot_epochs(runs, png, [("epoch_s", "epoch time (s)"), ("denormal_grad_pct", "denormal parameter-gradient entries (%)")],
                "HybridSN on Indian Pines: output-gradient floor (zoo) vs torch's backward as it is")
    ratios = {"train_s": peer["train_s"] / ours["train_s"]}
    if ours["epoch_s_late"] and peer["epoch_s_late"]:
        ratios["epoch_s_late"] = peer["epoch_s_late"] / ours["epoch_s_late"]
    write_result(
        NAME,
        metrics={**ours, "identical_parameters": identical_parameters(runs),
                 "oa_gap_points_per_round": [round(g, 2) for g in gaps], "oa_gap_points_median": median(gaps),
                 "oa_spread_points_across_rounds": spread},
        peers={"torch_backward_as_is": peer},
        ratios=ratios,
        command=command_line(),
        extra={
            "settings": {"model": "hybridsn (defaults)", "data": f"indian_pines, split {args.split}",
                         "epochs": args.epochs, "rounds": len(all_seeds), "threads": args.threads, "seeds": all_seeds,
                         "late_from_epoch": args.late_from},
            "runs": runs,
            **({"earlier_commands": earlier_commands} if earlier_commands else {}),
            "plot": str(png.relative_to(RESULTS_DIR.parent.parent)),
            "notes": "ratios = torch's backward as it is / ours (above 1: ours faster). epoch_s_late: median epoch "
                     "time from late_from_epoch on; train_s: the whole zoo.train call. Both runs flush optimizer "
                     "moments (flush_tiny_moments, the default).",
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
