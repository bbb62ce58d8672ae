"""The suite's own fixtures: what every test may take for granted, whatever ran before it in its worker."""

from __future__ import annotations

import random

import numpy as np
import torch


def _draws() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def _draws_after(seed: int) -> tuple[float, float, list[float]]:
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
    return _draws()


def test_a_test_starts_from_the_seeded_generators(_seeded_generators):
    first = _draws()  # before anything in this test drew
    assert first == _draws_after(_seeded_generators)


def test_what_one_test_draws_does_not_move_the_next_ones_start(_seeded_generators):
    # after the test above in the same worker, which drew from every generator, as this one does below
    first = _draws()
    for _ in range(5):
        _draws()
    assert first == _draws_after(_seeded_generators)
