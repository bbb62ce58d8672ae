"""``zoo demo``: runs every step registered with :func:`demo`, each family's demo on its default weights."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from zoo.cli.commands import command
from zoo.cli.errors import UsageError


@dataclass(frozen=True)
class _DemoStep:
    title: str
    run: Callable[[], None]
    order: int


_DEMOS: list[_DemoStep] = []


def demo(title: str, order: int = 50):
    """Register a no-argument function as one step of ``zoo demo`` (lower ``order`` runs first)."""

    def decorator(fn: Callable[[], None]):
        _DEMOS.append(_DemoStep(title, fn, order))
        return fn

    return decorator


def _configure_demo(p: argparse.ArgumentParser) -> None:
    # extend: `--only rl --only video` runs both (the second replaced the first, which was skipped unsaid)
    p.add_argument("--only", nargs="*", action="extend",
                   help="run only the demo steps whose title contains one of these")


@command("demo", "run every family's demo on the default weights (a checkout's weights/; installed: pulled "
         "into the cache, or from a ZOO_WEIGHTS_URL mirror)", _configure_demo)
def _cmd_demo(args: argparse.Namespace) -> int:
    import zoo

    steps = sorted(_DEMOS, key=lambda s: (s.order, s.title))
    if args.only:
        chosen = [s for s in steps if any(o.lower() in s.title.lower() for o in args.only)]
        if not chosen:  # a typo would otherwise run nothing and pass
            raise UsageError(f"--only {' '.join(args.only)}: no demo step's title contains that; steps: "
                             + "; ".join(s.title for s in steps))
        steps = chosen
    print(f"zoo {zoo.__version__}: {len(zoo.list_models())} models registered: {', '.join(zoo.list_models())}")
    note = _demo_threads()
    if note:
        print(note)
    failed = 0
    times: list[tuple[str, float]] = []
    for step in steps:
        print(f"\n== {step.title} ==", flush=True)
        t0 = time.perf_counter()
        try:
            step.run()
        except Exception as err:  # one broken step must not hide the others
            failed += 1
            print(f"demo step failed: {type(err).__name__}: {err}", file=sys.stderr)
            from zoo.cli.entry import debug_env

            if debug_env():
                raise
        times.append((step.title, time.perf_counter() - t0))
        print(f"-- {times[-1][1]:.1f} s", flush=True)
    print("\ndemo step times: " + ", ".join(f"{t.split(':')[0].split(' (')[0]} {s:.1f} s" for t, s in times)
          + f"; total {sum(s for _, s in times):.1f} s")
    return 1 if failed else 0


def _demo_threads() -> str:
    """The demo's steps are small inferences. On a machine that other processes already keep busy, every op
    of a multi-threaded run waits for a descheduled peer thread (measured on a loaded 2-core VM: the seq2seq
    step 17 s with 2 threads, 0.4 s with 1), so a busy machine runs the steps single-threaded and says so.
    An explicit OMP_NUM_THREADS is obeyed."""
    if os.environ.get("OMP_NUM_THREADS") or not hasattr(os, "getloadavg"):
        return ""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load < cores:
        return ""
    import torch

    torch.set_num_threads(1)
    return f"(machine busy: load {load:.1f} on {cores} cores, so the steps run single-threaded)"
