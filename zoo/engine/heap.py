"""Keep freed heap memory in DataLoader workers instead of handing it back to the OS after every batch.

A worker that builds batches of large items (a 16-frame 320x240 clip is 3.7 MB before its transform)
allocates and frees the same few megabytes for every batch. glibc's malloc adapts its thresholds to
that size, serves the items from the heap, and then, when the batch's items are freed together, finds
more free memory at the top of the heap than its trim threshold (twice the largest block seen) and
returns it to the OS. The next batch faults every page back in: 896 page faults per 3.7 MB clip, which
made a UCF101 read in a worker take 11.3-12.1 ms against 8.3-8.7 ms with the memory kept (2-core AMD
Zen 4; benchmarks/README.md). The usual cure is another allocator (jemalloc, tcmalloc) loaded with
LD_PRELOAD, as PyTorch's CPU performance guide suggests
(https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html); a library cannot do that, but it
can fix glibc's two thresholds with ``mallopt`` so that blocks up to 32 MiB come from the heap and
freed memory stays there for the next batch.

Only worker processes are changed (:func:`keep_freed_memory_in_worker`): they exist to build batches,
and what they keep is the memory their next batch needs again. Other C libraries (musl, macOS) are left
alone.
"""

from __future__ import annotations

import ctypes
import os
import platform

import torch

__all__ = ["keep_freed_memory", "keep_freed_memory_in_worker"]

# glibc <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): blocks above it are always
# mapped (and faulted in) afresh.
MMAP_THRESHOLD = 32 << 20
# Free memory glibc may keep at the top of the heap: a batch's items are freed together, so this must
# exceed a batch (64 clips of 16x240x320x3 bytes is 236 MB); what is kept never exceeds the peak the
# worker already reached.
TRIM_THRESHOLD = 1 << 30

# The process that set the thresholds, and the one that found it could not: each worker decides once (the
# answer is asked for on every item, and platform.libc_ver reads the interpreter's binary).
_applied_pid: int | None = None
_declined_pid: int | None = None


def keep_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds (:data:`MMAP_THRESHOLD`, :data:`TRIM_THRESHOLD`) for this
    process; once per process. True where glibc took them, False elsewhere (another C library)."""
    global _applied_pid, _declined_pid
    pid = os.getpid()
    if pid in (_applied_pid, _declined_pid):
        return pid == _applied_pid
    if _set_thresholds():
        _applied_pid = pid
        return True
    _declined_pid = pid
    return False


def _set_thresholds() -> bool:
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # the mmap threshold first: setting either one turns off glibc's adaptive thresholds, and a fixed
    # 128 KiB mmap threshold (the default) would map every clip afresh
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def keep_freed_memory_in_worker() -> bool:
    """:func:`keep_freed_memory` when called inside a DataLoader worker process; False (nothing changed)
    in any other process."""
    if torch.utils.data.get_worker_info() is None:
        return False
    return keep_freed_memory()
