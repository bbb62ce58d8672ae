"""MATLAB .mat scenes: v5 through scipy, v7.3 (HDF5) through h5py, with discovery of the cube and ground truth.

Two layouts are found in the wild:

* classification scenes (EHU/GIC: ``indian_pines_corrected``, ``paviaU``, ``salinas_gt``, ...): the cube is
  the largest 3-D numeric array and the ground truth the 2-D integer array whose shape matches the cube's
  first two axes (preferring names with ``gt`` / ``label`` / ``truth``, then ``map``, over mask names such
  as ``train_mask``; a choice the names leave open is warned about, naming ``gt_key=``); a file holding
  several cubes of that size (Indian Pines' raw 220 bands beside the corrected 200) is warned about too,
  naming ``cube_key=``;
* unmixing scenes (Samson, Jasper Ridge, Urban as distributed): ``Y`` (or ``V``) is ``bands x pixels`` with
  the image size in ``nRow`` / ``nCol``, pixels in MATLAB's column-major order (``reshape(Y', nRow, nCol, B)``);
  their ground-truth files hold abundances ``A`` (``endmembers x pixels``, same pixel order) and
  endmember spectra ``M`` (``bands x endmembers``), with names in ``cood`` when present.

Every file that cannot be read as either raises :class:`SceneFormatError` naming the file and what it holds.
"""

from __future__ import annotations

import os
import re
import struct
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from zoo._stacklevel import user_stacklevel
from zoo.hyperspectral.readers.errors import SceneFormatError
from zoo.hyperspectral.readers.mat_v5 import check_v5_structure
from zoo.hyperspectral.scene import Scene, band_first_hint

__all__ = ["KEY_ADVICE", "band_first_gt_hint", "describe_arrays", "find_cube_key", "find_gt_key", "find_unmixing_key",
           "gt_candidates", "keyed_ground_truth", "load_mat_arrays", "mat_ground_truth", "open_mat", "pick_gt_key",
           "refuse_unusable_gt", "unmixing_cube"]

_GT_HINT = re.compile(r"(gt|ground|label|truth|map|class|mask|dset)", re.IGNORECASE)
_LABEL_NAME = re.compile(r"(gt|ground|label|truth|class)", re.IGNORECASE)
_WEAK_LABEL_NAME = re.compile(r"(map|dset)", re.IGNORECASE)
# a train/val/test mask is a label-map-shaped integer array too; it must never win over the ground truth
_MASK_NAME = re.compile(r"(mask|train|test|val|split|fold)", re.IGNORECASE)
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_ROWS, _COLS = ("nRow", "nrow", "nRows", "n_row"), ("nCol", "ncol", "nCols", "n_col")
_UNMIXING_DATA = ("Y", "V", "X", "data")  # the names the distributed unmixing files use, best first
KEY_ADVICE = ("to load_scene, zoo.train, zoo.evaluate or zoo.predict (--set {key}=<name> on the command line) "
              "to pick another")
"""Where ``gt_key=`` / ``cube_key=`` are taken, for the warnings and errors that advise them."""


def _v5_errors() -> tuple[type[BaseException], ...]:
    from scipy.io.matlab import MatReadError

    # what scipy's MATLAB reader raises on a damaged or hostile file (found by the fuzz tests)
    return (MatReadError, ValueError, TypeError, NotImplementedError, OSError, EOFError, IndexError, KeyError,
            OverflowError, AttributeError, UnicodeDecodeError, zlib.error, struct.error, MemoryError,
            UnboundLocalError)  # scipy 1.17 on an unknown array class (mclass) leaves "arr" unset


class MatArrays(dict):
    """The numeric arrays of a .mat file by name, and in ``unread`` what each other variable is (complex, a
    struct, a cell array): an error finding no cube or no ground truth names them, where it said "(no numeric
    arrays)" of a file holding a complex cube."""

    def __init__(self, arrays: dict[str, np.ndarray], unread: dict[str, str]) -> None:
        super().__init__(arrays)
        self.unread = unread


_MAX_SPARSE_BYTES = 1 << 30  # a label map of the largest scenes, dense, is well under this


def _expandable_sparse(v: Any) -> bool:
    import scipy.sparse

    return (scipy.sparse.issparse(v) and v.dtype.kind in "biuf"
            and v.shape[0] * v.shape[1] * v.dtype.itemsize <= _MAX_SPARSE_BYTES)


def _complex_kind(shape: tuple[int, ...], dtype: Any) -> str:
    return f"{tuple(shape)} {np.dtype(dtype)}: complex numbers (zoo's models take real ones: keep np.abs(), .real or .imag)"


def _unread_kind(v: Any) -> str:
    """What a .mat variable that is no real numeric array is, in words, with its shape and dtype."""
    import scipy.sparse

    if scipy.sparse.issparse(v):
        return (f"{v.shape} sparse {v.dtype}: " + ("complex numbers" if v.dtype.kind == "c"
                                                    else "too large to expand"))
    if not isinstance(v, np.ndarray):
        return type(v).__name__
    if v.dtype.kind == "c":
        return _complex_kind(v.shape, v.dtype)
    what = {"O": "cell array", "V": "struct", "U": "text", "S": "text"}.get(v.dtype.kind, str(v.dtype))
    return f"{v.shape} {what}"


def _hdf5_sparse(group) -> Any:
    """A MATLAB v7.3 sparse matrix (a group of ``data``, ``ir``, ``jc``; its row count in ``MATLAB_sparse``)."""
    import scipy.sparse

    jc = np.asarray(group["jc"][()], dtype=np.int64)
    ir = np.asarray(group["ir"][()], dtype=np.int64) if "ir" in group else np.zeros(0, np.int64)
    data = np.asarray(group["data"][()]) if "data" in group else np.zeros(0)  # an all-zero matrix stores neither
    shape = (int(np.asarray(group.attrs["MATLAB_sparse"]).reshape(-1)[0]), jc.size - 1)
    return scipy.sparse.csc_matrix((data, ir, jc), shape=shape)


def _hdf5_arrays(path: Path) -> MatArrays:
    try:
        import h5py
    except ImportError as err:
        raise ImportError(f"{path} is a MATLAB v7.3 (HDF5) file: install h5py to read it") from err
    out: dict[str, np.ndarray] = {}
    unread: dict[str, str] = {}
    try:
        with h5py.File(path, "r") as f:
            for key, ds in f.items():
                if isinstance(ds, h5py.Dataset) and ds.dtype.kind in "biuf":
                    out[key] = np.asarray(ds[()]).T  # HDF5 stores MATLAB arrays column-major
                elif isinstance(ds, h5py.Dataset) and set(ds.dtype.names or ()) == {"real", "imag"}:
                    wide = ds.dtype["real"].itemsize == 8
                    unread[key] = _complex_kind(ds.shape[::-1], np.complex128 if wide else np.complex64)
                elif isinstance(ds, h5py.Group) and "MATLAB_sparse" in ds.attrs:
                    v = _hdf5_sparse(ds)
                    if _expandable_sparse(v):
                        out[key] = v.toarray()
                    else:
                        unread[key] = _unread_kind(v)
                else:
                    cls = ds.attrs.get("MATLAB_class", b"")
                    unread[key] = cls.decode(errors="replace") if isinstance(cls, bytes) and cls else type(ds).__name__
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, IndexError) as err:
        raise SceneFormatError(f"{path} is not a readable MATLAB v7.3 (HDF5) file: {err}") from None
    return MatArrays(out, unread)


def load_mat_arrays(path: str | os.PathLike) -> MatArrays:
    """All numeric arrays of a .mat file by name (MATLAB's column-major v7.3 arrays are transposed back, its
    sparse matrices expanded); what the others are in the result's ``unread``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f".mat file not found: {path}")
    with open(path, "rb") as fh:
        head = fh.read(600)
    if not head:
        raise SceneFormatError(f"{path} is empty (0 bytes): not a MATLAB .mat file")
    if _HDF5_MAGIC in head[:8] or head[512:520] == _HDF5_MAGIC:
        return _hdf5_arrays(path)
    import scipy.io

    check_v5_structure(path)  # a damaged tag would crash scipy's compiled reader, not raise
    try:
        raw = scipy.io.loadmat(path)
    except _v5_errors() as err:
        raise SceneFormatError(f"{path} is not a readable MATLAB .mat file: {type(err).__name__}: {err}") from None
    arrays, unread = {}, {}
    for k, v in raw.items():
        if k.startswith("__"):
            continue
        if _expandable_sparse(v):  # MATLAB's sparse(gt): a label map saved sparse is a label map all the same
            v = v.toarray()
        if isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
            arrays[k] = v
        else:
            unread[k] = _unread_kind(v)
    return MatArrays(arrays, unread)


def describe_arrays(arrays: dict[str, np.ndarray], shape: tuple[int, int] | None = None) -> str:
    """``"name (shape)"`` of each array; ``(transposed?)`` after a 2-D one whose shape is ``shape`` reversed;
    then the variables of a :class:`MatArrays` that were not read, and what they are."""
    def one(k: str, v: np.ndarray) -> str:
        flip = shape is not None and v.ndim == 2 and v.shape == tuple(shape)[::-1] and shape[0] != shape[1]
        return f"{k} {v.shape}" + (" (transposed?)" if flip else "")

    unread = getattr(arrays, "unread", {})
    skipped = "; not read: " + ", ".join(f"{k} {what}" for k, what in unread.items()) if unread else ""
    return (", ".join(one(k, v) for k, v in arrays.items()) or "(no numeric arrays)") + skipped


def _as_map(v: np.ndarray) -> np.ndarray:
    """An ``(H, W, 1)`` array as the ``(H, W)`` map it is (a label map saved with a singleton band axis)."""
    return v[:, :, 0] if v.ndim == 3 and v.shape[2] == 1 else v


def _is_label_map(key: str, v: np.ndarray) -> bool:
    """An ``(H, W, 1)`` array named like ground truth: a label map, never a cube."""
    return v.ndim == 3 and v.shape[2] == 1 and _name_rank(key) == 0


def find_cube_key(arrays: dict[str, np.ndarray]) -> str:
    """The largest 3-D array, preferring one whose (H, W) is that of a map named like ground truth (a file may
    hold other 3-D arrays, such as reference chips, larger than the scene)."""
    cubes = [k for k, v in arrays.items() if v.ndim == 3 and not _is_label_map(k, v)]
    if not cubes:
        raise SceneFormatError(f"no 3-D (H, W, C) array and no unmixing layout (Y: bands x pixels with nRow/nCol) "
                               f"in this .mat file; arrays: {describe_arrays(arrays)}")
    gt_shapes = {_as_map(v).shape for k, v in arrays.items() if _name_rank(k) == 0 and _as_map(v).ndim == 2}
    return max(cubes, key=lambda k: (arrays[k].shape[:2] in gt_shapes, arrays[k].size))


def _name_rank(key: str) -> int:
    """0: named like ground truth; 1: like a label map or a subset of one; 2: like a mask; 3: no hint."""
    label, mask = _LABEL_NAME.search(key) is not None, _MASK_NAME.search(key) is not None
    if label and not mask:
        return 0
    if label or (_WEAK_LABEL_NAME.search(key) and not mask):
        return 1
    return 2 if mask else 3


def gt_candidates(arrays: dict[str, np.ndarray], shape: tuple[int, int] | None = None) -> list[str]:
    """Keys that could be the ground truth (2-D, integer-valued, non-negative, ``shape`` when given), best first.

    Ground-truth names beat label-map names, which beat mask names (``train_mask``); then fewest distinct
    values (a label map, not an image band).
    """
    cands = []
    for k, v in arrays.items():
        v = _as_map(v)
        if v.ndim != 2 or (shape is not None and v.shape != tuple(shape)) or v.size == 0:
            continue
        if v.dtype.kind == "f" and not (np.all(np.isfinite(v)) and np.all(v == np.round(v))):
            continue
        if v.min() < 0:
            continue
        cands.append(k)
    return sorted(cands, key=lambda k: (_name_rank(k), len(np.unique(arrays[k]))))


def find_gt_key(arrays: dict[str, np.ndarray], shape: tuple[int, int] | None = None) -> str | None:
    """The best ground-truth candidate of :func:`gt_candidates`, or None."""
    cands = gt_candidates(arrays, shape)
    return cands[0] if cands else None


def pick_gt_key(arrays: dict[str, np.ndarray], shape: tuple[int, int] | None, path: Path, *,
                beside_cube: str | None = None) -> str | None:
    """:func:`find_gt_key`, warning when the names leave the choice open (a second candidate as well named as
    the chosen one, or a chosen one not named like ground truth), so a mask is never taken silently.

    ``beside_cube``: the key of the cube when ``arrays`` are the rest of a scene's own .mat file; there even a
    lone candidate named like a mask or not at all (``elevation``, ``cloud_mask``) is warned about, while a
    file given as the ground truth is taken at its word for its one map."""
    cands = gt_candidates(arrays, shape)
    if not cands:
        return None
    best = cands[0]
    rivals = [k for k in cands[1:] if _name_rank(k) == _name_rank(best)]
    if rivals or (_name_rank(best) > 0 and len(cands) > 1):
        others = ", ".join(repr(k) for k in cands[1:])
        warnings.warn(f"{path}: several arrays could be the ground truth; using {best!r} "
                      f"({len(np.unique(arrays[best]))} distinct values), not {others}: pass gt_key=<name> "
                      + KEY_ADVICE.format(key="gt_key"), stacklevel=user_stacklevel())
    elif beside_cube is not None and _name_rank(best) >= 2:  # rank 1 (map, dset): label maps as published
        warnings.warn(f"{path}: took {best!r} ({len(np.unique(arrays[best]))} distinct values) as the ground "
                      f"truth, the one (H, W) map of whole numbers beside the cube {beside_cube!r}, though it is "
                      f"not named like one (gt, label, truth, class). If it is not the ground truth, give that with "
                      f"the cube (gt=FILE to load_scene, labels=FILE to zoo.train / zoo.evaluate, --labels FILE on "
                      f"the command line; gt_key=<name> names another array of this file), or read the cube "
                      f"without labels: zoo.hyperspectral.readers.load_mat_arrays({str(path)!r})[{beside_cube!r}] "
                      f"is the cube as an array", stacklevel=user_stacklevel())
    return best


def band_first_gt_hint(arrays: dict[str, np.ndarray], shape: tuple[int, int] | None, n_bands: int | None) -> str:
    """:func:`~zoo.hyperspectral.scene.band_first_hint` for a cube of ``shape`` + ``(n_bands,)`` when one of
    the 2-D ``arrays`` is its last two axes; else ""."""
    if shape is None or n_bands is None:
        return ""
    cube = (*shape, n_bands)
    return next((h for v in arrays.values() if v.ndim == 2 and (h := band_first_hint(cube, labels=v.shape))), "")


def keyed_ground_truth(arrays: dict[str, np.ndarray], gt_key: str, shape: tuple[int, int] | None,
                       path: Path, n_bands: int | None = None) -> np.ndarray:
    """The array ``gt_key`` of a .mat file's ``arrays``, checked to be ``shape`` = the cube's (H, W)."""
    if gt_key not in arrays:
        raise KeyError(f"gt_key={gt_key!r} is not in {path}; its arrays: {describe_arrays(arrays, shape)}")
    labels = _as_map(arrays[gt_key])
    if shape is not None and labels.shape != tuple(shape):
        raise SceneFormatError(f"{path}: ground truth {gt_key!r} has shape {labels.shape}; the cube is "
                               f"(H, W) = {tuple(shape)}{band_first_gt_hint({gt_key: labels}, shape, n_bands)}")
    return labels


def _positive_scalar(arrays: dict[str, np.ndarray], names: tuple[str, ...]) -> int | None:
    for name in names:
        v = arrays.get(name)
        if v is not None and v.size == 1:
            x = float(v.reshape(-1)[0])
            if np.isfinite(x) and x >= 1 and x == int(x):
                return int(x)
    return None


def find_unmixing_key(arrays: dict[str, np.ndarray]) -> tuple[str, int, int] | None:
    """``(key, nRow, nCol)`` of an unmixing data matrix (``bands x pixels`` or ``pixels x bands``), if any."""
    rows, cols = _positive_scalar(arrays, _ROWS), _positive_scalar(arrays, _COLS)
    if rows is None or cols is None:
        return None
    n = rows * cols
    cands = [k for k, v in arrays.items() if v.ndim == 2 and n in v.shape and v.size > n]
    if not cands:
        return None
    named = [k for k in _UNMIXING_DATA if k in cands]
    return (named[0] if named else max(cands, key=lambda k: arrays[k].size)), rows, cols


def _pixels_last(mat: np.ndarray, n: int, what: str) -> np.ndarray:
    """``(K, n)`` from a ``(K, n)`` or ``(n, K)`` matrix of ``n`` pixels."""
    if mat.ndim == 2 and mat.shape[1] == n:
        return mat
    if mat.ndim == 2 and mat.shape[0] == n:
        return mat.T
    raise SceneFormatError(f"{what} has shape {mat.shape}; expected (k, {n}) or ({n}, k) for {n} pixels")


def unmixing_cube(matrix: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``(rows, cols, K)`` from a ``(K, rows * cols)`` matrix whose pixels run column-major (MATLAB's order)."""
    m = _pixels_last(np.asarray(matrix), rows * cols, "the unmixing matrix")
    return m.T.reshape((rows, cols, m.shape[0]), order="F")  # cube[:, :, k] = reshape(m[k], rows, cols, 'F')


def _names(path: Path, key: str, k: int) -> tuple[str, ...] | None:
    """Endmember names (``cood``: a cell array of strings) when the file has them."""
    import scipy.io

    try:
        raw = scipy.io.loadmat(path, variable_names=[key]).get(key)
        names = tuple(str(np.asarray(x).reshape(-1)[0]).strip() for x in np.asarray(raw, dtype=object).reshape(-1))
    except (*_v5_errors(), AttributeError):
        return None
    return names if len(names) == k else None


def mat_ground_truth(arrays: dict[str, np.ndarray], shape: tuple[int, int], path: Path, *,
                     n_bands: int | None = None, beside_cube: str | None = None) -> tuple[np.ndarray | None, dict[str, Any]]:
    """``(label map or None, extras)`` from a .mat file's arrays for a scene of ``shape`` = (H, W).

    ``extras`` holds ``abundances`` ``(H, W, K)`` (from ``A``, column-major pixels), ``endmembers``
    ``(K, C)`` (from ``M``) and ``endmember_names`` when the file has them. ``beside_cube``: see
    :func:`pick_gt_key`.
    """
    h, w = shape
    key = pick_gt_key(arrays, shape, path, beside_cube=beside_cube)
    labels = _as_map(arrays[key]) if key is not None else None
    extras: dict[str, Any] = {} if key is None else {"gt_key": key}
    if "A" in arrays and h * w in arrays["A"].shape:
        ab = unmixing_cube(arrays["A"], h, w)  # (H, W, K)
        extras["abundances"] = ab
        if "M" in arrays:
            m = np.asarray(arrays["M"])
            k = ab.shape[2]
            if m.ndim != 2 or k not in m.shape or (n_bands is not None and n_bands not in m.shape):
                raise SceneFormatError(f"{path}: endmembers M have shape {m.shape}; expected (bands, {k}) "
                                       f"= ({n_bands if n_bands is not None else 'C'}, {k})")
            extras["endmembers"] = m.T if m.shape[1] == k and (n_bands is None or m.shape[0] == n_bands) else m
        names = _names(path, "cood", ab.shape[2])
        if names:
            extras["endmember_names"] = names
    return labels, extras


def refuse_unusable_gt(arrays: dict[str, np.ndarray], shape: tuple[int, int] | None, path: Path,
                       what: str = "ground truth") -> None:
    """Raise why an array named like ground truth (``gt``, ``label``, ...) of the scene's (H, W) is no label map
    (negative ids, fractions, NaN): found no label map, the caller would otherwise say there is none."""
    from zoo.hyperspectral.readers.ground_truth import check_label_map

    for k, v in arrays.items():
        m = _as_map(v)
        if _name_rank(k) == 0 and m.ndim == 2 and m.size and (shape is None or m.shape == tuple(shape)):
            check_label_map(m, path, shape, f"{what} {k!r}")


def _wrong_gt(arrays: dict[str, np.ndarray], shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """Ground-truth-looking arrays (2-D, named like one) whose shape is not the cube's."""
    return {k: v for k, v in arrays.items()
            if v.ndim == 2 and v.shape != tuple(shape) and _GT_HINT.search(k) and v.size > 1}


def _rival_cubes(arrays: dict[str, np.ndarray], chosen: str, path: Path) -> dict[str, tuple[int, ...]]:
    """The other 3-D arrays of the chosen cube's (H, W) by name (their shapes), with a warning naming them:
    a file may hold a scene twice (Indian Pines as distributed: 220 raw bands and 200 corrected ones), and
    the largest is taken, which a model fitted on the other refuses."""
    hw = arrays[chosen].shape[:2]
    rivals = {k: tuple(v.shape) for k, v in arrays.items() if k != chosen and v.ndim == 3 and v.shape[:2] == hw
              and not _is_label_map(k, v)}
    sized = {k: v.shape for k, v in arrays.items() if k != chosen and v.ndim == 3 and v.shape[:2] != hw
             and not _is_label_map(k, v)}
    if sized:  # another scene, chips, a stack: the chosen one is the cube only by size or a map's (H, W)
        warnings.warn(f"{path}: took {chosen!r} {arrays[chosen].shape} as the cube; the file also holds the 3-D "
                      f"array(s) {', '.join(f'{k!r} {c}' for k, c in sized.items())}: pass cube_key=<name> "
                      + KEY_ADVICE.format(key="cube_key"), stacklevel=user_stacklevel())
    if rivals:
        others = ", ".join(f"{k!r} ({c[2]} bands)" for k, c in rivals.items())
        warnings.warn(f"{path}: several arrays could be the cube; using the largest, {chosen!r} "
                      f"({arrays[chosen].shape[2]} bands), not {others}: pass cube_key=<name> "
                      + KEY_ADVICE.format(key="cube_key"), stacklevel=user_stacklevel())
    return rivals


def _select_cube(arrays: dict[str, np.ndarray], cube_key: str | None, path: Path):
    """``(key, (H, W, C) cube, metadata)``: a 3-D array, or an unmixing matrix reshaped with nRow/nCol."""
    if cube_key is None:
        unmix = find_unmixing_key(arrays)
        has_3d = any(v.ndim == 3 for v in arrays.values())
        try:
            cube_key = unmix[0] if unmix is not None and not has_3d else find_cube_key(arrays)
        except SceneFormatError as err:  # name the file: the caller may have opened several
            raise SceneFormatError(f"{path}: {err}") from None
        rivals = _rival_cubes(arrays, cube_key, path)
    elif cube_key in getattr(arrays, "unread", {}):
        raise SceneFormatError(f"{path}: cube_key={cube_key!r} is no cube of real numbers: {arrays.unread[cube_key]}")
    elif cube_key not in arrays:
        raise KeyError(f"cube_key={cube_key!r} is not in {path}; its arrays: {describe_arrays(arrays)}")
    else:
        rivals = {}
    v = arrays[cube_key]
    if v.size == 0:
        raise SceneFormatError(f"{path}: {cube_key!r} is empty (shape {v.shape})")
    if v.ndim == 3:
        return cube_key, v, ({"other_cubes": rivals} if rivals else {})
    rows, cols = _positive_scalar(arrays, _ROWS), _positive_scalar(arrays, _COLS)
    if v.ndim == 2 and rows is not None and cols is not None:
        meta = {"layout": "unmixing (bands x pixels, column-major)", "n_row": rows, "n_col": cols}
        return cube_key, unmixing_cube(v, rows, cols), meta
    raise SceneFormatError(f"{path}: {cube_key!r} has shape {v.shape}; expected an (H, W, C) cube, or a bands x "
                           f"pixels matrix with nRow/nCol beside it")


def open_mat(path: str | os.PathLike, *, cube_key: str | None = None, gt_key: str | None = None,
             gt_path: str | os.PathLike | None = None, name: str | None = None,
             abundance_labels: bool = False, ground_truth: bool = True) -> Scene:
    """A scene from a .mat cube (and its ground truth, in the same file or in ``gt_path``, any format).

    ``cube_key`` / ``gt_key`` name the cube / the ground truth among the file's arrays (``gt_key``: among
    ``gt_path``'s when that is given, a .mat too) where the discovery would pick another; a file holding
    several cubes of one size records the others in ``metadata["other_cubes"]`` (name: shape).
    ``abundance_labels=True`` labels every pixel with its dominant endmember (argmax abundance + 1) when
    the ground truth is an abundance matrix rather than a label map. ``ground_truth=False`` reads the cube
    alone, looking for no ground truth among the file's arrays (a prediction needs none, so a map that does
    not fit, or one not named like ground truth, neither stops nor warns it).
    """
    from zoo.hyperspectral.readers.ground_truth import (
        check_label_map,
        labels_from_abundances,
        read_ground_truth,
    )

    path = Path(path)
    arrays = load_mat_arrays(path)
    cube_key, cube, meta = _select_cube(arrays, cube_key, path)
    shape = cube.shape[:2]
    gt_file = Path(gt_path) if gt_path is not None else path
    if gt_path is not None:  # any format; gt_key (a .mat ground truth's array) is checked there
        labels, extras = read_ground_truth(gt_file, shape, n_bands=cube.shape[2], gt_key=gt_key)
    elif gt_key is not None:
        labels = keyed_ground_truth(arrays, gt_key, shape, path, cube.shape[2])
        labels, extras = check_label_map(labels, path, shape, f"ground truth {gt_key!r}"), {}
    elif not ground_truth:
        labels, extras = None, {}
    else:
        own = {k: v for k, v in arrays.items() if k != cube_key}
        labels, extras = mat_ground_truth(own, shape, path, n_bands=cube.shape[2], beside_cube=cube_key)
        if labels is not None:  # checked as a ground-truth file's are: Scene would name no file
            labels = check_label_map(labels, path, shape, f"ground truth {extras['gt_key']!r}")
        if labels is None and not extras:
            refuse_unusable_gt(own, shape, path)
        wrong = _wrong_gt(own, shape)
        if labels is None and not extras and wrong:
            hint = band_first_gt_hint(wrong, shape, cube.shape[2])
            raise SceneFormatError(f"{path}: ground truth {describe_arrays(wrong, shape)} does not match the (H, W) "
                                   f"= {shape} of the cube {cube_key!r}{hint} (if {cube_key!r} is not the cube, "
                                   "pass cube_key=<name> "
                                   + KEY_ADVICE.format(key="cube_key") + ")")
    gt_names = extras.pop("class_names", None)  # an ENVI classification ground truth's
    if abundance_labels:
        labels = labels_from_abundances(extras, gt_file)
    meta.update({"gt_key": gt_key, **extras, "cube_key": cube_key})
    names = extras.get("endmember_names") if abundance_labels else gt_names
    return Scene(cube=cube, labels=labels, name=name or path.stem, metadata=meta, class_names=names)
