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

import functools
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS_DIR, command_line, median, output_file, parse_args, write_result
from _hsi_training import alternate, identical_parameters, plot_epochs, run_arguments, seeds, train_hybridsn

from zoo.engine.callbacks import Callback
from zoo.engine.denormals import MOMENT_FLOORS
from zoo.engine.options import FitConfig
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
    probe = StepProbe()
    out = train_hybridsn(scene, seed=seed, epochs=epochs, split=split, callbacks=[probe], flush_tiny_moments=flush)
    return {"train_s": out["train_s"], "epochs": probe.epochs, "step_ms_all": 1e3 * median(probe.times),
            "params_sha256": out["params_sha256"]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(run_arguments(__doc__, epochs=8, late_from=5), argv, __file__)
    scene = load_dataset("indian_pines")
    with torch_threads(args.threads):
        runs = alternate(args.rounds, lambda ours, r: train(scene, ours, args.epochs, seeds(args)[r], args.split),
                         lambda run: f"{run['train_s']:.1f} s, step ms per epoch "
                                     f"{[round(e['step_ms'], 1) for e in run['epochs']]}, denormal % "
                                     f"{[round(e['denormal_pct'], 2) for e in run['epochs']]}")

    def summary(label: str) -> dict[str, Any]:
        rounds = runs[label]
        late = [e["step_ms"] for run in rounds for e in run["epochs"][args.late_from - 1:]]
        return {"train_s": median([run["train_s"] for run in rounds]),
                "step_ms": median([run["step_ms_all"] for run in rounds]),
                "step_ms_late": median(late) if late else None,
                "denormal_pct_last_epoch": median([run["epochs"][-1]["denormal_pct"] for run in rounds])}

    ours, peer = summary("zoo"), summary("torch")
    png = output_file(NAME, "png")
    plot_epochs(runs, png, [("step_ms", "optimizer.step() median (ms)"), ("denormal_pct", "denormal moments (%)")],
                "HybridSN on Indian Pines, AdamW: moment flush (zoo) vs torch as it is")
    ratios = {"train_s": peer["train_s"] / ours["train_s"], "step_ms": peer["step_ms"] / ours["step_ms"]}
    if ours["step_ms_late"] and peer["step_ms_late"]:
        ratios["step_ms_late"] = peer["step_ms_late"] / ours["step_ms_late"]
    write_result(
        NAME,
        metrics={**ours, "identical_parameters": identical_parameters(runs)},
        peers={"torch_adamw_as_is": peer},
        ratios=ratios,
        command=command_line(),
        extra={
            "settings": {"model": "hybridsn (defaults)", "data": f"indian_pines, split {args.split}",
                         "epochs": args.epochs, "rounds": args.rounds, "threads": args.threads, "seeds": seeds(args),
                         "late_from_epoch": args.late_from, "optimizer": "zoo.train's default for HybridSN (AdamW)"},
            "runs": runs,
            "plot": str(png.relative_to(RESULTS_DIR.parent.parent)),
            "notes": "ratios = torch's AdamW as it is / ours (above 1: ours faster). step_ms: median "
                     "optimizer.step() over every step; step_ms_late: over the epochs from late_from_epoch on, "
                     "once torch's moments have turned denormal; train_s includes the flush and everything else. Both "
                     f"runs keep fit's default flush_tiny_grads={FitConfig.flush_tiny_grads}.",
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
