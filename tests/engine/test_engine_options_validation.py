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


def test_the_engines_counts_take_numpy_integers_as_python_ints_and_refuse_a_bool():
    """A count from an array (``np.int64``) was refused by threads, seed, batch_size and num_classes, and
    prepare_loader took ``batch_size=True`` for batches of one."""
    import random

    import numpy as np

    from zoo.engine.data import prepare_loader
    from zoo.engine.head import replace_fc
    from zoo.engine.seed import set_seed
    from zoo.engine.threads import check_threads

    assert check_threads(np.int64(2)) == 2 and type(check_threads(np.int64(2))) is int
    set_seed(np.int64(3))
    drawn = random.random()
    set_seed(3)
    assert random.random() == drawn
    data = (torch.randn(8, 3), torch.randint(0, 2, (8,)))
    loader = prepare_loader(data, batch_size=np.int64(4), shuffle=False)
    assert loader.batch_size == 4 and type(loader.batch_size) is int
    with pytest.raises(ValueError, match=r"^batch_size must be an int >= 1, got True$"):
        prepare_loader(data, batch_size=True, shuffle=False)
    model = nn.Module()
    model.fc = nn.Linear(3, 2)
    assert replace_fc(model, np.int64(5)).fc.out_features == 5
    with pytest.raises(TypeError, match=r"^seed must be an int, got 3.0$"):
        set_seed(3.0)
