"""Seeding and RNG state capture: the ground that exact resume stands on.

Everything random in a run draws from four generators: Python's ``random``, NumPy's legacy global
generator, torch's CPU generator and the CUDA generators. :func:`set_seed` seeds all of them;
:func:`get_rng_state` / :func:`set_rng_state` capture and restore them as plain data (lists, ints,
tensors) so that a checkpoint stays loadable with ``torch.load(weights_only=True)``.

DataLoader shuffling is *not* taken from these global generators: :func:`epoch_generator` derives a
fresh generator from ``seed`` and the epoch number, so epoch ``k`` shuffles the same way whether the run
started at epoch 0 or was resumed at epoch ``k``.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from zoo.inputs import whole_number

__all__ = ["epoch_generator", "get_rng_state", "rng_state_kept", "seed_worker", "seeded", "set_rng_state", "set_seed"]


@contextlib.contextmanager
def rng_state_kept() -> Iterator[None]:
    """Put the caller's generator states back after the block, as scikit-learn never touches them: a run seeds
    the global generators for itself (:func:`set_seed`), and a caller drawing a hyperparameter sweep from
    ``random`` between runs would draw the same trial again after each ``seed=0`` run."""
    saved = get_rng_state()
    # CUDA's generators are seeded lazily, at its first use, by the last seed given: a run that seeds
    # them (or first uses CUDA) would leave the caller's pending seed replaced by its own
    lazy_cuda = torch.cuda.is_available() and not torch.cuda.is_initialized()
    pending = torch.initial_seed()
    try:
        yield
    finally:
        set_rng_state(saved)
        if lazy_cuda:
            torch.cuda.manual_seed_all(pending)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block on generators seeded with ``seed``, then put the caller's states back: a model built by
    name for a run draws the same initial weights every time, and the caller's own random streams (a
    hyperparameter sweep between runs, say) go on as if nothing had drawn from them."""
    with rng_state_kept():
        set_seed(seed)
        yield


def set_seed(seed: int, deterministic: bool = False) -> None:
    """Seed Python, NumPy and torch (CPU and every CUDA device).

    ``deterministic=True`` also asks torch for deterministic kernels (``use_deterministic_algorithms``,
    cuDNN deterministic, no cuDNN autotuning, a cuBLAS workspace config). Kernels without a deterministic
    implementation then raise instead of silently differing between runs; expect it to be slower on GPU.
    """
    seed = whole_number(seed, "seed", minimum=None)  # any int: NumPy's share of it is taken mod 2**32
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def get_rng_state() -> dict[str, Any]:
    """The state of every global generator, as ``weights_only``-loadable data."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        # NumPy's state holds an ndarray, which weights_only refuses; a tensor carries it exactly.
        "numpy": {"kind": kind, "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`get_rng_state` captured (CUDA states only when CUDA is there)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    npst = state["numpy"]
    np.random.set_state((npst["kind"], npst["keys"].cpu().numpy().astype(np.uint32), npst["pos"],
                         npst["has_gauss"], npst["cached_gaussian"]))
    torch.set_rng_state(state["torch"].cpu())  # generator states are CPU byte tensors, whatever the device
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        # as many as both machines have: a run saved with more visible GPUs resumes on fewer
        for index, cuda_state in enumerate(cuda[:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state.cpu(), index)


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A generator for one epoch's shuffling, a pure function of ``(seed, epoch)``."""
    g = torch.Generator()
    g.manual_seed((seed * 1_000_003 + epoch) % 2**63)
    return g


def seed_worker(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: torch seeds each worker, this passes that seed on to NumPy and random.

    torch derives the worker seed from the loader's generator (itself from :func:`epoch_generator`), so
    worker augmentations are reproducible and resume exactly.
    """
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
