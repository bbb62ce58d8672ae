"""NumPy .npy scenes (the TensorLy copy of Indian Pines ships this way), memory-mapped."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from zoo.hyperspectral.scene import Scene

__all__ = ["open_npy"]


def open_npy(path: str | os.PathLike, *, gt_path: str | os.PathLike | None = None, name: str | None = None,
             mmap: bool = True) -> Scene:
    """An ``(H, W, C)`` .npy cube (memory-mapped), with an ``(H, W)`` .npy/.mat ground truth if given."""
    path = Path(path)
    try:
        cube = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ValueError as err:
        raise ValueError(f"{path} is not a plain .npy array: {err}") from err
    if cube.ndim != 3:
        raise ValueError(f"{path}: expected an (H, W, C) cube, got shape {cube.shape}")
    labels = None
    if gt_path is not None:
        gt_path = Path(gt_path)
        if gt_path.suffix.lower() == ".mat":
            from zoo.hyperspectral.readers.mat import find_gt_key, load_mat_arrays

            arrays = load_mat_arrays(gt_path)
            key = find_gt_key(arrays, cube.shape[:2])
            if key is None:
                raise ValueError(f"{gt_path}: no (H, W) = {cube.shape[:2]} label array")
            labels = arrays[key]
        else:
            labels = np.load(gt_path, allow_pickle=False)
    return Scene(cube=cube, labels=labels, name=name or path.stem)
