"""MATLAB .mat scenes: v5 through scipy, v7.3 (HDF5) through h5py, with discovery of the cube and ground truth.

The EHU/GIC files name their arrays freely (``indian_pines_corrected``, ``paviaU``, ``salinas_gt``, ...),
so the cube is the largest 3-D numeric array and the ground truth the 2-D integer array whose shape matches
the cube's first two axes (preferring names with ``gt`` / ``label`` / ``map``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from zoo.hyperspectral.scene import Scene

__all__ = ["find_cube_key", "find_gt_key", "load_mat_arrays", "open_mat"]

_GT_HINT = re.compile(r"(gt|ground|label|truth|map|class|mask|dset)", re.IGNORECASE)
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def load_mat_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """All numeric arrays of a .mat file by name (MATLAB's column-major v7.3 arrays are transposed back)."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(600)
    if _HDF5_MAGIC in head[:8] or head[512:520] == _HDF5_MAGIC:
        try:
            import h5py
        except ImportError as err:
            raise ImportError(f"{path} is a MATLAB v7.3 (HDF5) file: install h5py to read it") from err
        out: dict[str, np.ndarray] = {}
        with h5py.File(path, "r") as f:
            for key, ds in f.items():
                if isinstance(ds, h5py.Dataset) and ds.dtype.kind in "biuf":
                    out[key] = np.asarray(ds[()]).T  # HDF5 stores MATLAB arrays column-major
        return out
    import scipy.io

    try:
        raw = scipy.io.loadmat(path)
    except (ValueError, TypeError, NotImplementedError) as err:
        raise ValueError(f"{path} is not a readable MATLAB .mat file: {err}") from err
    return {k: v for k, v in raw.items()
            if not k.startswith("__") and isinstance(v, np.ndarray) and v.dtype.kind in "biuf"}


def find_cube_key(arrays: dict[str, np.ndarray]) -> str:
    cubes = [k for k, v in arrays.items() if v.ndim == 3]
    if not cubes:
        shapes = {k: v.shape for k, v in arrays.items()}
        raise ValueError(f"no 3-D (H, W, C) array in this .mat file; arrays: {shapes}")
    return max(cubes, key=lambda k: arrays[k].size)


def find_gt_key(arrays: dict[str, np.ndarray], shape: tuple[int, int] | None = None) -> str | None:
    """The ground-truth array: 2-D, integer-valued, non-negative, ``shape`` when given."""
    cands = []
    for k, v in arrays.items():
        if v.ndim != 2 or (shape is not None and v.shape != tuple(shape)) or v.size == 0:
            continue
        if v.dtype.kind == "f" and not (np.all(np.isfinite(v)) and np.all(v == np.round(v))):
            continue
        if v.min() < 0:
            continue
        cands.append(k)
    if not cands:
        return None
    # a name that says "ground truth" wins; then fewest distinct values (a label map, not an image band)
    return min(cands, key=lambda k: (_GT_HINT.search(k) is None, len(np.unique(arrays[k]))))


def open_mat(path: str | os.PathLike, *, cube_key: str | None = None, gt_key: str | None = None,
             gt_path: str | os.PathLike | None = None, name: str | None = None) -> Scene:
    """A scene from a .mat cube (and its ground truth, in the same file or in ``gt_path``)."""
    arrays = load_mat_arrays(path)
    if cube_key is None:
        cube_key = find_cube_key(arrays)
    elif cube_key not in arrays:
        raise KeyError(f"{cube_key!r} not in {path}; arrays: {sorted(arrays)}")
    cube = arrays[cube_key]
    labels = None
    gt_arrays = load_mat_arrays(gt_path) if gt_path is not None else arrays
    if gt_key is None:
        gt_key = find_gt_key(gt_arrays, cube.shape[:2])
    if gt_key is not None:
        if gt_key not in gt_arrays:
            raise KeyError(f"{gt_key!r} not in {gt_path or path}; arrays: {sorted(gt_arrays)}")
        labels = gt_arrays[gt_key]
    return Scene(cube=cube, labels=labels, name=name or Path(path).stem, metadata={"cube_key": cube_key,
                 "gt_key": gt_key})
