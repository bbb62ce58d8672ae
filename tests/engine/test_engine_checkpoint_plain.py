"""Checkpoints stay loadable with weights_only=True whatever numbers callbacks and configs hand them."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from zoo.engine import LambdaCallback, fit


def test_numpy_values_in_rows_and_config_keep_the_checkpoint_loadable(tmp_path):
    x, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    # a callback may add entries to the row: NumPy scalars are the everyday case (sklearn metrics return them)
    cb = LambdaCallback(on_epoch_end=lambda s, row: row.update(val_f1=np.float64(0.5), n=np.int64(3)))

    def run(epochs, **kw):
        torch.manual_seed(0)
        return fit(nn.Linear(3, 2), (x, y), epochs=epochs, checkpoint_dir=tmp_path, progress=False,
                   callbacks=[cb], lr=np.float64(1e-2), config={"note": np.float32(2.5)}, **kw)

    run(1)
    ckpt = torch.load(tmp_path / "epoch-0001.pt", weights_only=True)
    assert ckpt["history"][0]["val_f1"] == 0.5 and type(ckpt["history"][0]["n"]) is int
    assert type(ckpt["config"]["lr"]) is float and ckpt["config"]["note"] == 2.5
    resumed = run(2, resume=True)  # used to skip the unloadable file with a warning and start from scratch
    assert resumed.resumed is not None and resumed.resumed["checkpoint"] == tmp_path / "epoch-0001.pt"  # a Path
    assert [r["epoch"] for r in resumed.history] == [1, 2]
