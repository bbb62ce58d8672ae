"""zoo.engine.heap: DataLoader workers keep the memory a batch frees instead of faulting it in again."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
import torch

from zoo.engine import heap

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not hasattr(os, "fork"),
                                reason="mallopt thresholds are glibc's")

# A worker's pattern: a batch of 8 clip-sized blocks (16x240x320x3 bytes) filled, then freed together,
# five times; prints the page faults of the last four batches per block.
_BATCHES = r"""
import resource, sys
import numpy as np
from zoo.engine import heap
if sys.argv[1] == "keep":
    assert heap.keep_freed_memory()
N = 16 * 240 * 320 * 3
def batch():
    items = [np.empty(N, np.uint8) for _ in range(8)]
    for a in items:
        a[:] = 1
batch()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    batch()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 32)
"""


def _faults_per_block(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", _BATCHES, mode], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    return float(out.stdout.strip().splitlines()[-1])


@glibc_only
def test_freed_batches_stay_in_the_heap():
    # a 3.7 MB block is 900 pages: kept memory is reused without faulting any of them in again
    assert _faults_per_block("keep") < 50


def test_the_main_process_is_left_alone(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "keep_freed_memory", lambda: calls.append(1) or True)
    assert heap.keep_freed_memory_in_worker() is False and calls == []


def test_other_c_libraries_are_left_alone(monkeypatch):
    monkeypatch.setattr(heap, "_applied_pid", None)
    monkeypatch.setattr(heap, "_declined_pid", None)
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert heap.keep_freed_memory() is False
    # decided once per process: the binary is not read again for every item
    monkeypatch.setattr(platform, "libc_ver", lambda: pytest.fail("libc_ver asked twice"))
    assert heap.keep_freed_memory() is False


class _Applied(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, i):
        return heap.keep_freed_memory_in_worker(), heap._applied_pid == os.getpid()


@glibc_only
def test_a_dataloader_worker_keeps_freed_memory():
    loader = torch.utils.data.DataLoader(_Applied(), batch_size=None, num_workers=1)
    assert [tuple(x) for x in loader] == [(True, True)]
