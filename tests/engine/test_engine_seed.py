"""zoo.engine.seed: a run's seeding leaves the caller's generators as they were, CUDA's pending seed included."""

from __future__ import annotations

import torch

from zoo.engine import seed


def test_a_seeded_block_gives_back_the_callers_pending_cuda_seed(monkeypatch):
    """CUDA seeds its generators lazily, at first use, from the last seed given (``torch.manual_seed`` queues
    it): a run's ``set_seed(0)`` replaced the caller's pending seed, which no saved state could put back.
    CI has no GPU: CUDA is made to look present and not yet used, and its seeding calls are recorded
    (tests/test_cuda.py checks the real thing where a GPU is)."""
    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", calls.append)
    torch.manual_seed(123)
    with seed.seeded(0):
        assert calls[0] == 123 and calls[-1] == 0  # the caller's seed, then the run's, both pending
        torch.rand(3)
    assert calls[-1] == 123 and torch.initial_seed() == 123
