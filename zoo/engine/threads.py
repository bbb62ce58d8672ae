"""Process-wide torch CPU settings for one block of work: ``with torch_threads(2): ...``,
``with flush_denormal(): ...``.

``torch.set_num_threads`` and ``torch.set_flush_denormal`` are process-wide; a library call that changes
them must put them back, or the caller's later work runs on the wrong number of cores (or with other
numerics). The RL loop and the benchmarks use these.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

__all__ = ["available_cores", "check_threads", "flush_denormal", "flush_denormal_enabled", "torch_threads"]


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
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, 'all' or None, got {threads!r}")
    return threads


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


def flush_denormal_enabled() -> bool:
    """Whether this thread flushes denormal floats to zero (torch has a setter but no getter: a product
    whose exact value is denormal, 1e-41, comes out 0 only when flushing is on)."""
    return (torch.tensor([1e-38]) * torch.tensor([1e-3])).item() == 0.0


@contextlib.contextmanager
def flush_denormal(enabled: bool = True) -> Iterator[bool]:
    """Run the block with ``torch.set_flush_denormal(enabled)``, restoring the previous setting afterwards.
    Yields whether the setting took (False where the CPU has no flush-to-zero mode)."""
    prev = flush_denormal_enabled()
    took = torch.set_flush_denormal(enabled)
    try:
        yield took
    finally:
        if took and flush_denormal_enabled() != prev:
            torch.set_flush_denormal(prev)
