"""fit refuses settings that cannot work before it trains anything, naming what was expected."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.engine import fit


@pytest.mark.parametrize(("option", "match"), [
    ({"keep_last": 0}, r"keep_last must be >= 1, got 0"),
    ({"early_stopping_patience": 0}, r"early_stopping_patience must be >= 1 .*got 0"),
    ({"early_stopping_min_delta": -0.1}, r"early_stopping_min_delta must be >= 0, got -0.1"),
    ({"label_smoothing": 1.5}, r"label_smoothing must be in \[0, 1\], got 1.5"),
])
def test_bad_settings_fail_before_the_first_batch(tmp_path, option, match):
    seen = []

    def loss(out, y):  # records that training started
        seen.append(1)
        return nn.functional.cross_entropy(out, y)

    x, y = torch.randn(8, 3), torch.randint(0, 2, (8,))
    with pytest.raises(ValueError, match=match):
        fit(nn.Linear(3, 2), (x, y), (x, y), epochs=2, progress=False, checkpoint_dir=tmp_path, loss_fn=loss, **option)
    assert seen == [] and list(tmp_path.iterdir()) == []
