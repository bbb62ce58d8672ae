"""Checkpoints stay loadable with weights_only=True whatever numbers callbacks and configs hand them."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, fit
from zoo.engine.checkpoint import CheckpointError, read_checkpoint

RAN: list[str] = []


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


class Holder:
    """A class of a user's own, as ``torch.save`` of an object pickles it: loading it would have to run code."""

    def __init__(self) -> None:
        self.w = torch.ones(2)

    def __setstate__(self, state) -> None:
        RAN.append("setstate")
        self.__dict__.update(state)


def test_a_pickle_holding_a_refused_type_is_named_so_and_a_truncated_file_is_called_corrupt(tmp_path):
    """Before: a whole ``torch.save`` file of an object of a user's class was called "truncated or corrupt"."""
    foreign = tmp_path / "foreign.pt"
    torch.save({"format": "zoo.checkpoint/1", "model": {}, "held": Holder()}, foreign)
    name = f"{Holder.__module__}.{Holder.__qualname__}"
    with pytest.raises(CheckpointError) as caught:
        read_checkpoint(foreign)
    message = str(caught.value)
    assert re.search(rf"reads as a pickle, but holds {re.escape(name)}, a type that loading with "
                     r"weights_only=True refuses", message), message
    assert "corrupt" not in message and RAN == []

    whole = tmp_path / "whole.pt"
    torch.save({"model": {"w": torch.ones(1000)}}, whole)
    for bad, data in (("truncated.pt", whole.read_bytes()[:300]), ("garbage.pt", b"\x80\x02not a pickle" * 8)):
        (tmp_path / bad).write_bytes(data)
        with pytest.raises(CheckpointError, match=r"is not a loadable checkpoint \(truncated or corrupt; "):
            read_checkpoint(tmp_path / bad)
