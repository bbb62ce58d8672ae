"""Every ``--json`` output of the CLI is strict JSON: a number JSON has not (NaN, an infinity) is null."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from zoo.cli import main


def _strict(text: str):
    """``json.loads`` as jq and JSON.parse read: Python's ``NaN`` / ``Infinity`` are errors."""
    def refuse(constant: str):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_eval_json_of_a_folder_of_one_class_is_strict_json(tmp_path, capsys):
    """``zoo eval --json`` printed ``NaN`` for the recall of each class the folder lacks: `jq` refused the line."""
    folder = tmp_path / "one" / "airplane"
    folder.mkdir(parents=True)
    for i in range(2):
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    with pytest.warns(UserWarning, match="have no folder here"):
        assert main(["eval", "resnet18", "--weights", "cifar10", "--data", str(tmp_path / "one"), "--set",
                     'metrics=["accuracy", "per_class_recall"]', "--json"]) == 0
    metrics = _strict(capsys.readouterr().out)
    assert metrics["recall_1"] is None and isinstance(metrics["recall_0"], float)


def test_json_line_writes_numbers_json_has_not_as_null():
    from zoo.cli import json_line

    value = {"nan": float("nan"), "array": np.array([1.0, np.inf]), "tensor": torch.tensor(-np.inf),
             "float32": np.float32(0.5), "nested": [(1, float("inf"))], "path": Path("x")}
    assert _strict(json_line(value)) == {"nan": None, "array": [1.0, None], "tensor": None, "float32": 0.5,
                                         "nested": [[1, None]], "path": "x"}

