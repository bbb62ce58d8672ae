"""ENVI (.hdr + raw data) through ``spectral``: every interleave, byte order and ENVI data type.

The cube is opened as a memmap, never loaded: ``Scene.cube`` is an ``(H, W, C)`` view of the file in
whatever interleave it has, and ``Scene.layout`` lets chunked code map one block at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from spectral.io import envi
from typing_extensions import Self

from zoo import fs
from zoo.hyperspectral.scene import RawLayout, Scene

__all__ = ["EnviWriter", "open_envi", "save_envi"]

_INTERLEAVE = {0: "bsq", 1: "bil", 2: "bip"}  # spectral's BSQ/BIL/BIP constants
_UNIT_TO_NM = {"nanometers": 1.0, "nm": 1.0, "micrometers": 1e3, "microns": 1e3, "um": 1e3, "millimeters": 1e6}


def _header_path(path: Path) -> Path:
    if path.suffix.lower() == ".hdr":
        return path
    for cand in (path.with_suffix(".hdr"), Path(str(path) + ".hdr")):
        if cand.exists():
            return cand
    raise FileNotFoundError(f"no ENVI header (.hdr) found for {path}")


def _wavelengths(meta: dict[str, Any], n_bands: int) -> np.ndarray | None:
    raw = meta.get("wavelength")
    if raw is None:
        return None
    try:
        wl = np.asarray([float(v) for v in raw], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"ENVI header: 'wavelength' must be numbers, got {raw!r:.80}") from err
    if wl.size != n_bands:
        raise ValueError(f"ENVI header lists {wl.size} wavelengths for {n_bands} bands")
    unit = str(meta.get("wavelength units", "nanometers")).strip().lower()
    return wl * _UNIT_TO_NM.get(unit, 1.0)


def open_envi(path: str | os.PathLike, image: str | os.PathLike | None = None, *, labels=None,
              name: str | None = None) -> Scene:
    """Open an ENVI scene lazily. ``path`` is the .hdr (or the data file next to it)."""
    hdr = _header_path(Path(path))
    try:
        img = envi.open(str(hdr), None if image is None else str(image))
    except envi.EnviException as err:  # spectral's own "bad header / data file not found"
        raise ValueError(f"cannot open ENVI scene {hdr}: {err}") from err
    interleave = _INTERLEAVE[img.interleave]
    dtype = np.dtype(img.dtype)
    rows, cols, bands = (int(v) for v in img.shape)
    expected = img.offset + rows * cols * bands * dtype.itemsize
    size = os.path.getsize(img.filename)
    if size < expected:
        raise ValueError(
            f"ENVI data file {img.filename} holds {size} bytes; the header ({rows}x{cols}x{bands} {dtype}, "
            f"offset {img.offset}) needs {expected}"
        )
    layout = RawLayout(Path(img.filename), int(img.offset), dtype, interleave, (rows, cols, bands))
    cube = img.open_memmap(interleave="bip")  # (H, W, C) view of the file, whatever its interleave
    meta = dict(img.metadata)
    return Scene(cube=cube, wavelengths=_wavelengths(meta, bands), labels=labels,
                 name=name or hdr.stem, metadata=meta, layout=layout)


def _meta(wavelengths: Iterable[float] | None, extra: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = dict(extra or {})
    if wavelengths is not None:
        meta["wavelength"] = [f"{float(w):.6g}" for w in wavelengths]
        meta.setdefault("wavelength units", "nanometers")
    return meta


def save_envi(path: str | os.PathLike, cube: np.ndarray, *, wavelengths=None, interleave: str = "bip",
              byteorder: int | None = None, metadata: dict[str, Any] | None = None, ext: str = ".img") -> Path:
    """Write an in-memory ``(H, W, C)`` cube as ENVI (atomically: temp files, then ``os.replace``)."""
    hdr = Path(path).with_suffix(".hdr")
    if np.ndim(cube) != 3:
        raise ValueError(f"save_envi needs an (H, W, C) cube; got shape {np.shape(cube)}")
    kwargs: dict[str, Any] = {"interleave": interleave, "force": True, "ext": ext,
                              "metadata": _meta(wavelengths, metadata)}
    if byteorder is not None:
        kwargs["byteorder"] = byteorder
    # data first, then the header: a header never points at nothing
    with fs.atomic_paths(hdr.with_suffix(ext), hdr, size=np.asarray(cube).nbytes) as (_, tmp_hdr):
        envi.save_image(str(tmp_hdr), np.asarray(cube), **kwargs)
    return hdr


class EnviWriter:
    """Write a BIP ENVI cube row block by row block (bounded memory), committed atomically on ``close``.

    >>> with EnviWriter("reduced.hdr", shape=(H, W, k), dtype=np.float32) as w:
    ...     for rows, block in chunks: w.write(block)
    """

    def __init__(self, path: str | os.PathLike, shape: tuple[int, int, int], dtype=np.float32, *,
                 wavelengths=None, metadata: dict[str, Any] | None = None, ext: str = ".img") -> None:
        self.hdr = Path(path).with_suffix(".hdr")
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.ext = ext
        h, w, c = self.shape
        self._staging = fs.PrivateTemp(self.hdr.parent, self.hdr.name, size=h * w * c * self.dtype.itemsize)
        self._tmp_hdr = self._staging.path_for(self.hdr)
        meta = _meta(wavelengths, metadata)
        meta.update({"lines": h, "samples": w, "bands": c, "header offset": 0, "file type": "ENVI Standard",
                     "data type": envi.dtype_to_envi[self.dtype.char], "interleave": "bip", "byte order": 0})
        envi.write_envi_header(str(self._tmp_hdr), meta)
        self._fh = open(self._tmp_hdr.with_suffix(ext), "wb")  # noqa: SIM115  (closed by close()/abort())
        self._rows = 0

    def write(self, block: np.ndarray) -> None:
        """Append ``(h, W, C)`` rows."""
        _, w, c = self.shape
        if block.ndim != 3 or block.shape[1:] != (w, c):
            raise ValueError(f"EnviWriter block must be (h, {w}, {c}); got {block.shape}")
        if self._rows + block.shape[0] > self.shape[0]:
            raise ValueError(f"EnviWriter: more than the {self.shape[0]} rows declared")
        self._fh.write(np.ascontiguousarray(block, dtype=self.dtype).tobytes())
        self._rows += block.shape[0]

    def close(self) -> Path:
        self._fh.close()
        if self._rows != self.shape[0]:
            self.abort()
            raise ValueError(f"EnviWriter: wrote {self._rows} of {self.shape[0]} rows; nothing committed")
        self._staging.commit(self.hdr.with_suffix(self.ext), self.hdr)  # data first, then its header
        return self.hdr

    def abort(self) -> None:
        self._fh.close()
        self._staging.abort()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
