"""Scene readers: ENVI, MATLAB .mat, .npy and Princeton Instruments SPE, all returning a :class:`Scene`."""

from __future__ import annotations

import os
from pathlib import Path

from zoo.hyperspectral.readers.envi import EnviWriter, open_envi, save_envi
from zoo.hyperspectral.readers.errors import SceneFormatError
from zoo.hyperspectral.readers.mat import find_cube_key, find_gt_key, load_mat_arrays, open_mat
from zoo.hyperspectral.readers.npy import open_npy
from zoo.hyperspectral.readers.spe import SPEFormatError, open_spe, read_spe, write_spe
from zoo.hyperspectral.scene import Scene

__all__ = [
    "EnviWriter",
    "SPEFormatError",
    "SceneFormatError",
    "find_cube_key",
    "find_gt_key",
    "load_mat_arrays",
    "load_scene",
    "open_envi",
    "open_mat",
    "open_npy",
    "open_spe",
    "read_spe",
    "save_envi",
    "write_spe",
]


def load_scene(path: str | os.PathLike, *, gt: str | os.PathLike | None = None, name: str | None = None,
               **kwargs) -> Scene:
    """Open a user's scene by extension: ``.hdr``/ENVI data, ``.mat``, ``.npy``, ``.spe``.

    ``gt`` is an optional ground-truth file (.npy, .mat, or an ENVI classification image).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"scene file not found: {path}")
    ext = path.suffix.lower()
    labels = None
    if gt is not None and ext != ".mat" and ext != ".npy":
        labels = _load_labels(Path(gt))
    if ext == ".mat":
        return open_mat(path, gt_path=gt, name=name, **kwargs)
    if ext == ".npy":
        return open_npy(path, gt_path=gt, name=name, **kwargs)
    if ext == ".spe":
        return open_spe(path, labels=labels, name=name)
    if ext == ".hdr" or path.with_suffix(".hdr").exists() or Path(str(path) + ".hdr").exists():
        return open_envi(path, labels=labels, name=name, **kwargs)
    raise ValueError(f"unknown scene format {ext!r} for {path}; expected .hdr (ENVI), .mat, .npy or .spe")


def _load_labels(path: Path):
    import numpy as np

    if path.suffix.lower() == ".npy":
        return np.load(path, allow_pickle=False)
    if path.suffix.lower() == ".mat":
        arrays = load_mat_arrays(path)
        key = find_gt_key(arrays)
        if key is None:
            raise ValueError(f"{path}: no 2-D label array")
        return arrays[key]
    return np.asarray(open_envi(path).cube[:, :, 0])
