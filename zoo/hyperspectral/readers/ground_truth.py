"""Ground truth and training masks from any file a user has: .npy, .mat, ENVI, or a PNG/TIFF label image.

A label map is ``(H, W)``, integer-valued, ``>= 0`` (0 = unlabelled), and must match the scene's
``(H, W)``; anything else raises :class:`SceneFormatError` naming the file, the expected and the found shape.
A training mask is read the same way (class ids, or 0/1).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from zoo.hyperspectral.readers.errors import SceneFormatError, npy_error
from zoo.hyperspectral.scene import band_first_hint

__all__ = ["IMAGE_EXTENSIONS", "labels_from_abundances", "read_ground_truth", "read_label_map", "with_ground_truth"]

IMAGE_EXTENSIONS = (".png", ".tif", ".tiff", ".bmp", ".gif", ".pgm", ".pnm")
_LABEL_MODES = ("1", "L", "P", "I", "I;16", "I;16B", "I;16L", "F")  # single channel: grey levels or palette ids


def _from_image(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img.load()
            if img.mode not in _LABEL_MODES:
                raise SceneFormatError(f"{path} is a {img.mode} image; a label map must have one channel (class ids "
                                       f"as grey levels or palette indices), not colours")
            return np.asarray(img)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        if isinstance(err, SceneFormatError):
            raise
        raise SceneFormatError(f"{path} is not a readable image: {err}") from None


def _from_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise npy_error(path, err) from None


def _from_envi(path: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """The one band of an ENVI label map, and ``{"class_names": ...}`` when its header names the classes."""
    from zoo.hyperspectral.readers.envi import open_envi

    scene = open_envi(path, check_byte_order=False)  # class ids are not smooth data: nothing to judge
    if scene.n_bands != 1:
        raise SceneFormatError(f"{path}: an ENVI label map has one band; this one has {scene.n_bands}")
    from zoo.hyperspectral.preprocessing import scene_nodata

    labels = np.asarray(scene.cube[:, :, 0])
    try:
        nodata = scene_nodata(scene)
    except ValueError:
        raise SceneFormatError(f"{path}: 'data ignore value' must be a number; got "
                               f"{scene.metadata['data ignore value']!r:.40}") from None
    if nodata is not None:  # pixels without a class: unlabelled (0), not class 255 nor a refused -1
        labels = np.where(np.isnan(labels) if np.isnan(nodata) else labels == nodata, 0, labels)
    raw = scene.metadata.get("class names")
    names = [] if raw is None else [str(n).strip() for n in np.atleast_1d(raw)]
    # ENVI names the values 0..K-1, 0 being "Unclassified"; Scene.class_names names classes 1..K (0: unlabelled)
    return labels, ({"class_names": tuple(names[1:])} if len(names) > 1 else {})


def check_label_map(arr: np.ndarray, path: Path, shape: tuple[int, int] | None, what: str,
           n_bands: int | None = None) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim != 2:
        raise SceneFormatError(f"{path}: {what} must be an (H, W) map; got shape {arr.shape}")
    if shape is not None and arr.shape != tuple(shape):
        hint = " (transposed?)" if arr.shape == tuple(shape)[::-1] else ""
        first = "" if n_bands is None else band_first_hint((*shape, n_bands), labels=arr.shape)
        raise SceneFormatError(f"{path}: {what} has shape {arr.shape}{hint}; the scene is (H, W) = {tuple(shape)}"
                               + first)
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iuf":
        raise SceneFormatError(f"{path}: {what} must be numeric class ids; got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise SceneFormatError(f"{path}: {what} must hold whole class ids (0 = unlabelled); found fractions or NaN")
    if arr.size and arr.min() < 0:
        raise SceneFormatError(f"{path}: {what} must be >= 0 (0 = unlabelled); found {arr.min()}")
    # class ids are read as int64: a larger one (a float raster's nodata FLT_MAX, uint64's 2**64 - 1) would wrap
    # round to a negative id the file does not hold
    if arr.size and arr.max() >= 2**63:
        raise SceneFormatError(f"{path}: {what} holds the value {arr.max()}, no class id (ids are whole numbers below "
                               f"2**63; a nodata value? mark unlabelled pixels 0)")
    return arr.astype(np.int64)


def read_ground_truth(path: str | os.PathLike, shape: tuple[int, int] | None = None, *, what: str = "ground truth",
                      n_bands: int | None = None, gt_key: str | None = None) -> tuple[np.ndarray | None, dict[str, Any]]:
    """``(label map, extras)``: extras hold unmixing abundances/endmembers of a .mat ground truth, or the
    ``class_names`` (classes 1..K, as :attr:`Scene.class_names`) an ENVI classification header gives.

    ``gt_key`` names the label map among the arrays of a .mat file (the other formats hold one map)."""
    from zoo.hyperspectral.readers.envi_header import find_header
    from zoo.hyperspectral.readers.mat import (
        band_first_gt_hint,
        describe_arrays,
        keyed_ground_truth,
        load_mat_arrays,
        mat_ground_truth,
        pick_gt_key,
        refuse_unusable_gt,
    )

    path = Path(path)
    if path.is_dir():
        raise SceneFormatError(f"{path}: the {what} is a folder, not a file: give the file in it that holds the map")
    if not path.is_file():
        raise FileNotFoundError(f"{what} file not found: {path}")
    ext = path.suffix.lower()
    if gt_key is not None and ext != ".mat":
        raise SceneFormatError(f"gt_key={gt_key!r} names an array of a .mat {what} file; {path} is a "
                               f"{ext or '(no extension)'} file holding one map: leave gt_key out")
    if ext == ".mat":
        arrays = load_mat_arrays(path)
        if gt_key is not None:
            labels = keyed_ground_truth(arrays, gt_key, shape, path, n_bands)
            return check_label_map(labels, path, shape, what), {"gt_key": gt_key}
        if shape is None:
            key = pick_gt_key(arrays, None, path)
            if key is None:
                refuse_unusable_gt(arrays, None, path, what)
                raise SceneFormatError(f"{path}: no 2-D label array; arrays: {describe_arrays(arrays)}")
            return check_label_map(arrays[key], path, None, what), {}
        labels, extras = mat_ground_truth(arrays, shape, path, n_bands=n_bands)
        if labels is None and not extras:
            refuse_unusable_gt(arrays, shape, path, what)
            raise SceneFormatError(f"{path}: no {what} for a scene of (H, W) = {tuple(shape)}: expected an (H, W) "
                                   f"integer label map or abundances A; found {describe_arrays(arrays, shape)}"
                                   f"{band_first_gt_hint(arrays, shape, n_bands)}")
        return (None if labels is None else check_label_map(labels, path, shape, what, n_bands)), extras
    if ext == ".npy":
        return check_label_map(_from_npy(path), path, shape, what, n_bands), {}
    if ext in IMAGE_EXTENSIONS:
        return check_label_map(_from_image(path), path, shape, what, n_bands), {}
    try:
        find_header(path)
    except FileNotFoundError:
        raise SceneFormatError(f"{path}: unknown {what} format {ext or '(no extension)'!r}; expected .npy, .mat, "
                               f"an ENVI .hdr/data pair, or an image ({', '.join(IMAGE_EXTENSIONS)})") from None
    labels, extras = _from_envi(path)
    return check_label_map(labels, path, shape, what, n_bands), extras


def read_label_map(path: str | os.PathLike, shape: tuple[int, int] | None = None, *,
                   what: str = "label map") -> np.ndarray:
    """An ``(H, W)`` int64 label map (or training mask) from any supported file; abundances are not labels."""
    labels, _ = read_ground_truth(path, shape, what=what)
    if labels is None:
        raise SceneFormatError(f"{path} holds abundances, not a {what} (pass abundance_labels=True to the scene "
                               f"reader to label pixels by their dominant endmember)")
    return labels


def labels_from_abundances(extras: dict[str, Any], path: str | os.PathLike) -> np.ndarray:
    """Every pixel labelled with its dominant endmember: ``argmax(abundances) + 1`` (classes 1..K)."""
    if "abundances" not in extras:
        raise SceneFormatError(f"abundance_labels=True but {path} holds no abundance matrix A")
    return np.argmax(extras["abundances"], axis=2).astype(np.int64) + 1


def with_ground_truth(scene, path: str | os.PathLike, *, abundance_labels: bool = False, gt_key: str | None = None):
    """``scene`` with the labels (and unmixing extras) of the ground-truth file ``path`` (``gt_key``: the
    array of a .mat file holding several maps)."""
    from dataclasses import replace

    labels, extras = read_ground_truth(path, scene.shape[:2], n_bands=scene.n_bands, gt_key=gt_key)
    gt_names = extras.pop("class_names", None)
    if abundance_labels:
        labels = labels_from_abundances(extras, path)
    names = extras.get("endmember_names") if abundance_labels else (scene.class_names or gt_names)
    return replace(scene, labels=labels, class_names=names,
                   metadata={**scene.metadata, **extras, "ground_truth": str(path)})
