"""Torch's CPU thread count for one block of work: ``with torch_threads(2): ...``.

``torch.set_num_threads`` is process-wide; a library call that changes it must put it back, or the
caller's later work runs on the wrong number of cores. The RL loop and the benchmarks use this.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from zoo.inputs import whole_number

__all__ = ["available_cores", "check_threads", "torch_threads"]


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_threads(threads: int | str | None) -> int | None:
    """``None`` (leave torch's setting), a positive int, or ``"all"`` (every available core) -> int | None."""
    if threads is None:
        return None
    if threads == "all":
        return available_cores()
    return whole_number(threads, "threads", allow_none=True, hint="or 'all': every available core")


@contextlib.contextmanager
def torch_threads(threads: int | str | None) -> Iterator[int]:
    """Run the block with ``threads`` torch intra-op threads, restoring the previous count afterwards."""
    n = check_threads(threads)
    prev = torch.get_num_threads()
    if n is not None and n != prev:
        torch.set_num_threads(n)
    try:
        yield torch.get_num_threads()
    finally:
        if torch.get_num_threads() != prev:
            torch.set_num_threads(prev)
