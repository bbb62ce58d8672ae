"""Fixtures of the vision tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def _pil_folder(root: Path, classes: tuple[str, ...] = ("ant", "bee"), per_class: int = 4) -> Path:
    rng = np.random.default_rng(0)
    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            arr = (rng.random((20, 24, 3)) * 80 + 120 * c).astype(np.uint8)
            Image.fromarray(arr).convert("L" if i == 0 else "RGB").save(root / name / f"{i}.png")  # one grey
    return root


@pytest.fixture
def pil_folder():
    """``pil_folder(root)`` writes ``root/<class>/<i>.png`` (two classes of four small images, one grey each)."""
    return _pil_folder
