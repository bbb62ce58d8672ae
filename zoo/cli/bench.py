"""``zoo bench [NAME]``: list or run the benchmark scripts of a source checkout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from zoo.cli.commands import command
from zoo.cli.errors import UsageError


def _benchmarks_dir() -> Path | None:
    """The checkout's ``benchmarks/``; None for an installed package (whose parent folder is site-packages,
    where another distribution's top-level ``benchmarks`` must never be taken for ours)."""
    from zoo.hub.manifest import checkout_root

    root = checkout_root()
    return None if root is None else root / "benchmarks"


def _configure_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="benchmark name (benchmarks/NAME.py); omit to list them")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark script")


@command("bench", "list or run the benchmark scripts of a checkout (benchmarks/*.py)", _configure_bench)
def _cmd_bench(args: argparse.Namespace) -> int:
    import subprocess

    folder = _benchmarks_dir()
    if folder is None:
        raise UsageError(f"zoo bench runs the benchmark scripts of a source checkout, and this zoo is installed "
                         f"({Path(__file__).resolve().parent}): run it in a clone of the repository")
    scripts = sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_")) if folder.is_dir() else []
    if not scripts:
        raise UsageError(f"no benchmark scripts found in {folder} (benchmarks live in a source checkout)")
    if args.name is None:
        print("\n".join(scripts))
        return 0
    if args.name not in scripts:
        raise UsageError(f"unknown benchmark {args.name!r}; available: {', '.join(scripts)}")
    return subprocess.call([sys.executable, str(folder / f"{args.name}.py"), *args.args])
