"""Claim (issue 15): the optimizers ``fit`` builds step several times faster on the CPU than torch's default.

On the CPU torch's Adam, AdamW and SGD run their per-tensor loop unless told otherwise (``foreach`` is the
default on CUDA only): AdamW makes about ten passes over every parameter tensor a step. ``fit`` builds them
with ``fused=True`` on the CPU (``zoo.engine.optim.FUSED_ON_CPU``): one pass. Measured, same run:

(a) one ``optimizer.step()`` over fixed random gradients, for the zoo's networks (resnet18, hybridsn,
    r2plus1d_18, seq2seq-transformer) and two optimizers (AdamW with weight decay on matrices, grouped as
    ``fit`` groups them; SGD with momentum 0.9): the peer is torch's default (the optimizer built as
    ``fit`` builds it with ``optimizer_options={"foreach": False}``), ours is ``fit``'s optimizer; torch's
    ``foreach`` is timed beside them. Interleaved repeats, medians, ratios; and the largest difference
    between the parameters after the timed steps (the fused kernel rounds in another order).
(b) end to end, ``fit``'s training samples/s, ours vs ``optimizer_options={"foreach": False}``:
    resnet18 (CIFAR stem) on random 32x32 images, batch 16 (finetune_resnet18's full fine-tuning setting),
    and hybridsn on random 30x25x25 windows, batch 32 (fit's default, which HybridSN's zoo.train keeps);
    AdamW, ``amp="auto"``; each timed fit follows an untimed one (oneDNN builds its kernels on first use),
    and the two alternate over ``--rounds``. Every ``optimizer.step()`` inside the timed fits is timed too
    (torch's global step hooks): its median, the steps' share of the fit, and the bound that share puts on
    the fit ratio, ``1 / (1 - share * (1 - ours / torch's))``: a step 5x faster that is 5 % of the fit can
    make the fit at most 1.04x faster.

Writes results/optimizer_step[.<cpu kind>].json and a PNG of the step times.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/optimizer_step.py            # ~6 minutes
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS_DIR, command_line, median, output_file, parse_args, write_result

import zoo
from zoo.engine import fit
from zoo.engine.optim import build_optimizer
from zoo.engine.threads import torch_threads

NAME = "optimizer_step"
NETWORKS = ("resnet18", "hybridsn", "r2plus1d_18", "seq2seq-transformer")
OPTIMIZERS = {"adamw": {"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.05, "options": {}},
              "sgd": {"optimizer": "sgd", "lr": 0.01, "weight_decay": 5e-4, "options": {"momentum": 0.9}}}
IMPLEMENTATIONS = {"torch_default": {"foreach": False}, "torch_foreach": {"foreach": True}, "zoo": {}}


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zoo.build(name)


def step_times(net_name: str, opt_name: str, repeats: int, steps: int) -> dict[str, Any]:
    """ms per ``optimizer.step()`` per implementation (interleaved repeats of ``steps`` steps)."""
    spec = OPTIMIZERS[opt_name]
    runs: dict[str, Any] = {}
    for impl, options in IMPLEMENTATIONS.items():
        model = build(net_name)
        params = list(model.parameters())
        g = torch.Generator().manual_seed(1)
        for p in params:
            p.grad = torch.randn(p.shape, generator=g).mul_(1e-3)
        opt = build_optimizer(spec["optimizer"], model, None, spec["lr"], spec["weight_decay"],
                              {**spec["options"], **options})
        opt.step()  # state allocated outside the timing
        runs[impl] = {"opt": opt, "params": params, "ms": [],
                      "fused": bool(opt.defaults.get("fused")), "foreach": bool(opt.defaults.get("foreach"))}
    for _ in range(repeats):
        for run in runs.values():
            t0 = time.perf_counter()
            for _ in range(steps):
                run["opt"].step()
            run["ms"].append((time.perf_counter() - t0) / steps * 1e3)
    ref = runs["torch_default"]["params"]
    out = {"params_m": sum(p.numel() for p in ref) / 1e6, "tensors": len(ref)}
    for impl, run in runs.items():
        gap = max(float((a.detach() - b.detach()).abs().max()) for a, b in zip(run["params"], ref))
        out[impl] = {"ms": median(run["ms"]), "ms_runs": [round(x, 3) for x in run["ms"]],
                     "fused": run["fused"], "foreach": run["foreach"], "max_param_diff_vs_torch_default": gap}
    return out


def training_data(net_name: str, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    if net_name == "resnet18":
        return torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g)
    return torch.randn(n, 1, 30, 25, 25, generator=g), torch.randint(0, 16, (n,), generator=g)


def train_speed(net_name: str, batch: int, batches: int, rounds: int) -> dict[str, Any]:
    """fit's samples/s with ours and with torch's default optimizer, alternating over ``rounds``."""
    data = training_data(net_name, batch * batches)
    speeds: dict[str, list[float]] = {"zoo": [], "torch_default": []}
    in_fit: dict[str, list[float]] = {"zoo": [], "torch_default": []}
    shares: dict[str, list[float]] = {"zoo": [], "torch_default": []}
    for r in range(rounds):
        order = ("torch_default", "zoo") if r % 2 == 0 else ("zoo", "torch_default")
        for impl in order:
            if net_name == "resnet18":
                torch.manual_seed(0)
                model = zoo.build("resnet18", num_classes=10, stem="cifar")
            else:
                model = build(net_name)
            kw = {"epochs": 1, "batch_size": batch, "optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.05,
                  "amp": "auto", "progress": False, "seed": 0, "optimizer_options": IMPLEMENTATIONS[impl] or None}
            fit(model, (data[0][: 2 * batch], data[1][: 2 * batch]), **kw)  # oneDNN's first-use kernels
            with _timed_steps() as step_s:
                t0 = time.perf_counter()
                fit(model, data, **kw)
                wall = time.perf_counter() - t0
            speeds[impl].append(len(data[1]) / wall)
            in_fit[impl].append(median(step_s) * 1e3)
            shares[impl].append(sum(step_s) / wall)
            print(f"  {net_name} {impl}: {speeds[impl][-1]:.1f} samples/s, step {in_fit[impl][-1]:.2f} ms "
                  f"({shares[impl][-1]:.1%} of the fit)", file=sys.stderr, flush=True)
    out = {impl: {"samples_per_s": median(v), "runs": [round(x, 2) for x in v],
                  "step_ms_in_fit": median(in_fit[impl]), "step_share_of_fit": median(shares[impl])}
           for impl, v in speeds.items()}
    # what the step's saving alone could give: the peer's fit time less (its step - ours), per batch
    ours, peer = out["zoo"], out["torch_default"]
    out["fit_ratio_bound_from_step"] = 1.0 / (1.0 - peer["step_share_of_fit"]
                                              * (1.0 - ours["step_ms_in_fit"] / peer["step_ms_in_fit"]))
    return out


@contextlib.contextmanager
def _timed_steps():
    """Seconds of every ``optimizer.step()`` while the block runs (torch's global step hooks)."""
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    times: list[float] = []
    started: list[float] = []
    pre = register_optimizer_step_pre_hook(lambda *_: started.append(time.perf_counter()))
    post = register_optimizer_step_post_hook(lambda *_: times.append(time.perf_counter() - started.pop()))
    try:
        yield times
    finally:
        pre.remove()
        post.remove()


def plot(steps: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(steps)
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.27
    for i, impl in enumerate(IMPLEMENTATIONS):
        ax.bar([x + (i - 1) * width for x in range(len(labels))], [steps[k][impl]["ms"] for k in labels], width,
               label=impl, color=("C3", "C1", "C0")[i])
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("ms per optimizer.step()")
    ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("optimizer.step() on the CPU: torch's default loop, foreach, and fit's fused choice")
    fig.tight_layout()
    from zoo.engine.logs import atomic_savefig

    atomic_savefig(fig, path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--steps", type=int, default=5, help="optimizer steps per timed sample")
    p.add_argument("--rounds", type=int, default=3, help="timed fit runs per variant in (b)")
    p.add_argument("--batches", type=int, default=24, help="batches per timed fit run in (b)")
    args = parse_args(p, argv, __file__)
    steps: dict[str, Any] = {}
    speed: dict[str, Any] = {}
    with torch_threads(args.threads):
        for net_name in NETWORKS:
            for opt_name in OPTIMIZERS:
                key = f"{net_name}/{opt_name}"
                steps[key] = step_times(net_name, opt_name, args.repeats, args.steps)
                s = steps[key]
                print(f"{key}: torch {s['torch_default']['ms']:.2f} ms, foreach {s['torch_foreach']['ms']:.2f} ms, "
                      f"zoo {s['zoo']['ms']:.2f} ms", file=sys.stderr, flush=True)
        for net_name, batch in (("resnet18", 16), ("hybridsn", 32)):
            speed[net_name] = train_speed(net_name, batch, args.batches, args.rounds)
    png = output_file(NAME, "png")
    plot(steps, png)
    ratios = {f"step/{k}": v["torch_default"]["ms"] / v["zoo"]["ms"] for k, v in steps.items()}
    ratios.update({f"fit/{k}": v["zoo"]["samples_per_s"] / v["torch_default"]["samples_per_s"] for k, v in speed.items()})
    ratios.update({f"fit_bound_from_step/{k}": v["fit_ratio_bound_from_step"] for k, v in speed.items()})
    write_result(
        NAME,
        metrics={"step_ms": {k: v["zoo"]["ms"] for k, v in steps.items()},
                 "fit_samples_per_s": {k: v["zoo"]["samples_per_s"] for k, v in speed.items()},
                 "fit_step_ms": {k: v["zoo"]["step_ms_in_fit"] for k, v in speed.items()},
                 "fit_step_share": {k: v["zoo"]["step_share_of_fit"] for k, v in speed.items()},
                 "max_param_diff_vs_torch_default": max(v["zoo"]["max_param_diff_vs_torch_default"]
                                                        for v in steps.values())},
        peers={"torch_default": {"step_ms": {k: v["torch_default"]["ms"] for k, v in steps.items()},
                                 "fit_samples_per_s": {k: v["torch_default"]["samples_per_s"] for k, v in speed.items()},
                                 "fit_step_ms": {k: v["torch_default"]["step_ms_in_fit"] for k, v in speed.items()},
                                 "fit_step_share": {k: v["torch_default"]["step_share_of_fit"] for k, v in speed.items()}},
               "torch_foreach": {"step_ms": {k: v["torch_foreach"]["ms"] for k, v in steps.items()}}},
        ratios=ratios,
        command=command_line(),
        extra={"settings": {"threads": args.threads, "repeats": args.repeats, "steps": args.steps,
                            "rounds": args.rounds, "batches": args.batches, "optimizers": OPTIMIZERS,
                            "fit": {"resnet18": "stem=cifar, 10 classes, 32x32, batch 16",
                                    "hybridsn": "defaults, 30x25x25 windows, batch 32", "optimizer": "adamw",
                                    "amp": "auto"}},
               "steps": steps, "fit": speed, "plot": str(png.relative_to(RESULTS_DIR.parent.parent)),
               "notes": "ratios = torch's default / ours for step times, ours / torch's default for samples/s "
                        "(above 1: ours faster). torch_default: foreach=False, what torch runs on the CPU when "
                        "nothing is said; zoo: fit's optimizer (fused=True on the CPU for adamw, adam, sgd). "
                        "fit_step_ms: median optimizer.step() inside the timed fits; fit_step_share: the steps' "
                        "share of the fit's wall time; fit_bound_from_step: the fit ratio the step's saving "
                        "alone would give, 1 / (1 - share_torch * (1 - step_ours / step_torch))."},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
