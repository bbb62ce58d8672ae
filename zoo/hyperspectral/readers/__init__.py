"""Scene readers: ENVI, MATLAB .mat, .npy and Princeton Instruments SPE, all returning a :class:`Scene`."""

from __future__ import annotations

import os
from pathlib import Path

from zoo.hyperspectral.readers.envi import EnviWriter, open_envi, save_envi
from zoo.hyperspectral.readers.envi_header import DATA_EXTENSIONS, missing_header
from zoo.hyperspectral.readers.errors import SceneFormatError
from zoo.hyperspectral.readers.ground_truth import read_ground_truth, read_label_map, with_ground_truth
from zoo.hyperspectral.readers.mat import (
    find_cube_key,
    find_gt_key,
    find_unmixing_key,
    load_mat_arrays,
    open_mat,
    unmixing_cube,
)
from zoo.hyperspectral.readers.npy import open_npy
from zoo.hyperspectral.readers.spe import SPEFormatError, open_spe, read_spe, write_spe
from zoo.hyperspectral.scene import Scene

__all__ = [
    "EnviWriter",
    "SPEFormatError",
    "SceneFormatError",
    "find_cube_key",
    "find_gt_key",
    "find_unmixing_key",
    "load_mat_arrays",
    "load_scene",
    "open_envi",
    "open_mat",
    "open_npy",
    "open_spe",
    "read_ground_truth",
    "read_label_map",
    "read_spe",
    "save_envi",
    "unmixing_cube",
    "with_ground_truth",
    "write_spe",
]


def load_scene(path: str | os.PathLike, *, gt: str | os.PathLike | None = None, name: str | None = None,
               abundance_labels: bool = False, gt_key: str | None = None, cube_key: str | None = None,
               ground_truth: bool = True, **kwargs) -> Scene:
    """Open a user's scene by extension: ``.hdr``/ENVI data, ``.mat``, ``.npy``, ``.spe``.

    ``gt`` is an optional ground-truth file of any of these formats, or a PNG/TIFF label image
    (:func:`read_ground_truth`). ``abundance_labels=True`` labels the pixels of an unmixing scene by their
    dominant endmember. ``gt_key`` names the ground truth among the arrays of a .mat file (``gt`` when given,
    else the scene's own .mat), whatever the cube's format; ``cube_key`` the cube among a .mat scene's arrays.
    ``ground_truth=False``: a .mat scene's cube alone, without looking for its ground truth (for predicting).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"scene file not found: {path}")
    if path.is_dir():  # its name has no extension: it was taken for headerless ENVI data
        found = sorted(p.name for p in path.iterdir() if p.suffix.lower() in (".hdr", ".mat", ".npy", ".spe"))
        listed = ", ".join(found[:8]) + (", ..." if len(found) > 8 else "")
        raise SceneFormatError(f"{path} is a folder, not a scene file: give " + (f"one of its files ({listed})"
                               if found else "a .hdr (ENVI), .mat, .npy or .spe file"))
    ext = path.suffix.lower()
    if ext == ".mat":
        return open_mat(path, gt_path=gt, name=name, abundance_labels=abundance_labels, gt_key=gt_key,
                        cube_key=cube_key, ground_truth=ground_truth, **kwargs)
    if cube_key is not None:
        raise SceneFormatError(f"cube_key={cube_key!r} names the cube among the arrays of a .mat file; {path} is "
                               f"a {ext or '(no extension)'} file holding one cube: leave cube_key out")
    if gt_key is not None and gt is None:
        raise SceneFormatError(f"gt_key={gt_key!r} names the ground truth among the arrays of a .mat file; {path} "
                               f"is a {ext or '(no extension)'} cube without one: give the .mat ground truth with "
                               f"it (gt=FILE.mat to load_scene, labels=FILE.mat to zoo.train / zoo.evaluate, "
                               f"--labels FILE.mat on the command line)")
    if ext == ".npy":
        scene = open_npy(path, name=name, **kwargs)
    elif ext == ".spe":
        scene = open_spe(path, name=name)
    else:
        missing = missing_header(path)
        if missing and ext in (*DATA_EXTENSIONS, ".bsq", ".bil", ".bip"):
            raise SceneFormatError(f"{path} looks like ENVI data, but {missing}: put its header beside it")
        if missing:
            raise SceneFormatError(f"unknown scene format {ext!r} for {path}; expected .hdr (ENVI), .mat, .npy or "
                                   f".spe, or ENVI data with its header; {missing}")
        scene = open_envi(path, name=name, **kwargs)
    if gt is None:
        if abundance_labels:
            raise SceneFormatError(f"abundance_labels=True needs a ground-truth file with abundances (gt=...) for {path}")
        return scene
    return with_ground_truth(scene, gt, abundance_labels=abundance_labels, gt_key=gt_key)
