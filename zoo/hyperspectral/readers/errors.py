"""``SceneFormatError``: the one error type of the scene and label readers.

Every reader (ENVI, .mat, .npy, SPE, label maps) turns a file it cannot use -- a lying header, a truncated
or corrupt file, an array of the wrong shape -- into this error, naming the file, what was expected and
what was found. It is a ``ValueError``, so callers that catch ``ValueError`` (the ``zoo`` command does)
keep working.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["SceneFormatError", "npy_error"]


class SceneFormatError(ValueError):
    """A scene, ground-truth or mask file that cannot be read as what it claims to be."""


def npy_error(path: Path, err: Exception) -> SceneFormatError:
    """The error for a .npy file ``np.load`` refused: a file shorter than its own header says is called
    truncated, with both sizes (NumPy's words are "mmap length is greater than file size")."""
    import numpy as np

    try:
        with open(path, "rb") as f:
            try:
                version = np.lib.format.read_magic(f)
            except ValueError:  # np.load then tried it as a pickle and advised loading it unsafely: never
                f.seek(0)
                return SceneFormatError(f"{path} is not a .npy file: it does not start with NumPy's header "
                                        f"(first bytes {f.read(8)!r})")
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(f)
            need = f.tell() + math.prod(shape) * dtype.itemsize
        have = os.path.getsize(path)
    except (ValueError, OSError, EOFError):
        return SceneFormatError(f"{path} is not a plain .npy array: {err}")
    if dtype.hasobject:  # a whole file, not a short one: its objects are pickled, and never unpickled here
        return SceneFormatError(f"{path} holds Python objects (dtype {dtype}, stored as a pickle), which zoo never "
                                f"loads: save the array as numbers (np.save(path, arr.astype(np.float32)))")
    if have < need:
        return SceneFormatError(f"{path} is truncated: its header says a {dtype} array of shape {shape} "
                                f"({need:,} bytes with the header), the file holds {have:,} bytes")
    return SceneFormatError(f"{path} is not a plain .npy array: {err}")
