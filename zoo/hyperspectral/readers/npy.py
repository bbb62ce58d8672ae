"""NumPy .npy scenes (the TensorLy copy of Indian Pines ships this way), memory-mapped."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from zoo.hyperspectral.readers.errors import SceneFormatError, npy_error
from zoo.hyperspectral.readers.ground_truth import with_ground_truth
from zoo.hyperspectral.scene import Scene

__all__ = ["open_npy"]


def open_npy(path: str | os.PathLike, *, gt_path: str | os.PathLike | None = None, name: str | None = None,
             mmap: bool = True) -> Scene:
    """An ``(H, W, C)`` .npy cube (memory-mapped), with a ground truth of any format if given."""
    path = Path(path)
    try:
        cube = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise npy_error(path, err) from None
    if cube.ndim != 3:
        raise SceneFormatError(f"{path}: expected an (H, W, C) cube, got shape {cube.shape}")
    if cube.dtype.kind not in "biuf":
        raise SceneFormatError(f"{path}: expected a numeric cube, got dtype {cube.dtype}")
    if cube.size == 0:
        raise SceneFormatError(f"{path}: expected an (H, W, C) cube, got the empty array of shape {cube.shape}")
    scene = Scene(cube=cube, name=name or path.stem)
    return scene if gt_path is None else with_ground_truth(scene, gt_path)
