"""ENVI (.hdr + raw data): every interleave, byte order and ENVI data type; writing through ``spectral``.

The header is parsed by ``spectral`` and validated by :mod:`.envi_header` (fields, and the data file's
size); the cube is then opened as a memmap, never loaded: ``Scene.cube`` is an ``(H, W, C)`` view of the
file in whatever interleave it has, and ``Scene.layout`` lets chunked code map one block at a time.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from spectral.io import envi
from typing_extensions import Self

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.hyperspectral.readers.envi_header import (
    DATA_EXTENSIONS,
    EnviHeader,
    find_data_file,
    read_envi_header,
)
from zoo.hyperspectral.readers.errors import SceneFormatError
from zoo.hyperspectral.scene import RawLayout, Scene

__all__ = ["EnviWriter", "header_path", "open_envi", "save_envi", "verify_byte_order"]

_UNIT_TO_NM = {"nanometers": 1.0, "nanometer": 1.0, "nanometres": 1.0, "nanometre": 1.0, "nm": 1.0,
               "micrometers": 1e3, "micrometer": 1e3, "micrometres": 1e3, "micrometre": 1e3, "microns": 1e3,
               "micron": 1e3, "um": 1e3, "\u00b5m": 1e3, "\u03bcm": 1e3, "millimeters": 1e6, "millimeter": 1e6,
               "millimetres": 1e6, "millimetre": 1e6, "mm": 1e6, "centimeters": 1e7, "centimetres": 1e7, "cm": 1e7,
               "meters": 1e9, "metres": 1e9, "m": 1e9, "angstroms": 0.1, "angstrom": 0.1}
"""ENVI's length units for ``wavelength units`` (its header documentation's spellings, British ones, the micro sign
and the Greek mu of hand-written headers), as nanometres."""
_NOT_LENGTHS = ("index", "ghz", "mhz", "khz", "hz")  # ENVI's units that number bands by something else
_SAMPLE_PIXELS = 256  # spectra read to judge the byte order (a few pages of even a huge file)


def _wavelengths(meta: dict[str, Any], n_bands: int, hdr: Path) -> np.ndarray | None:
    raw = meta.get("wavelength")
    if raw is None:
        return None
    # spectral splits the list on commas: a trailing comma leaves an empty last entry, "{}" one empty entry
    listed = [v for v in np.atleast_1d(raw) if str(v).strip()]
    if not listed:
        return None
    try:
        wl = np.asarray([float(v) for v in listed], dtype=np.float64)
    except (TypeError, ValueError):  # an optional field: the cube is still readable, as spectral reads it
        warnings.warn(f"ENVI header {hdr}: 'wavelength' must be a list of numbers; got {raw!r:.80}: the scene "
                      f"has no wavelengths (fix the header's 'wavelength' field)", stacklevel=user_stacklevel())
        return None
    if wl.size != n_bands:
        raise SceneFormatError(f"ENVI header {hdr} lists {wl.size} wavelengths for {n_bands} bands")
    given = meta.get("wavelength units")
    unit = str(given if given is not None else "").strip().lower()
    if unit in _UNIT_TO_NM:
        return wl * _UNIT_TO_NM[unit]
    if unit == "wavenumber" and np.all(wl > 0):  # cm^-1
        return 1e7 / wl
    told = "(none given)" if given is None else "are no length unit known here"
    counting = wl.size > 1 and np.array_equal(wl, np.arange(wl[0], wl[0] + wl.size)) and wl[0] in (0, 1)
    if unit in _NOT_LENGTHS or counting:  # "Index", "GHz", ..., or band numbers: no wavelengths to read
        warnings.warn(f"ENVI header {hdr}: wavelength units {given!r} {told} and the values "
                      f"{wl.min():g}-{wl.max():g} " + ("count the bands" if counting else "are no wavelengths")
                      + ": the scene has no wavelengths (set 'wavelength units' in the header)",
                      stacklevel=user_stacklevel())
        return None
    # none, "Unknown" or a spelling not known here: optical wavelengths are 0.3-15 in micrometres and 300-15,000
    # in nanometres, so the values tell which (read as nanometres, micrometres made every wavelength-based
    # step, such as dropping the water bands, a silent no-op)
    micrometres = bool(wl.size) and float(np.nanmax(np.abs(wl))) < 100.0
    warnings.warn(f"ENVI header {hdr}: wavelength units {given!r} {told}; wavelengths {wl.min():g}-{wl.max():g} "
                  f"read as " + ("micrometres" if micrometres else "nanometres")
                  + " (set 'wavelength units' in the header)", stacklevel=user_stacklevel())
    return wl * (1e3 if micrometres else 1.0)


def _warn_scale_factor(meta: dict[str, Any], hdr: Path) -> None:
    """Say once per scene that the values are read as stored, not divided by ``reflectance scale factor``.

    Why not divide: the cube is a memmap view of the file, which every chunked reader maps block by block as
    stored; a model's fitted standardisation expects the values it was trained on (a factor applied to a
    scene a model was trained on raw changes its predictions); and the factor, kept in ``metadata``, goes
    into any header zoo writes from it again, so the values written must stay the stored ones.
    """
    raw = meta.get("reflectance scale factor")
    if raw is None:
        return
    try:
        factor = float(str(raw).strip())
    except ValueError:
        factor = float("nan")
    if factor == 1.0:
        return
    how = (f"for reflectance divide them by {factor:g}: scene.with_cube(scene.cube / {factor:g}, "
           f"scene.wavelengths) in memory, or each block of scene.iter_row_chunks() for a cube larger than memory"
           if np.isfinite(factor) and factor > 0 else "it is no positive number, so nothing can be divided by it")
    warnings.warn(f"ENVI header {hdr}: 'reflectance scale factor' = {raw!r:.40}; zoo reads the values as stored "
                  f"(spectral's load() and read_pixel() divide them by it); {how}", stacklevel=user_stacklevel())


def _sample(cube: np.ndarray) -> np.ndarray:
    """A few spectra ``(P, C)`` spread over the cube (single-band cubes: row segments ``(P, <=256)``)."""
    h, w, c = cube.shape
    n = int(np.ceil(np.sqrt(_SAMPLE_PIXELS)))
    rows = np.unique(np.linspace(0, h - 1, n).astype(int))
    if c >= 2:
        cols = np.unique(np.linspace(0, w - 1, n).astype(int))
        return np.asarray(cube[rows[:, None], cols[None, :], :]).reshape(-1, c)
    return np.asarray(cube[rows, : min(w, 256), 0])


def _other_order(a: np.ndarray) -> np.ndarray:
    return a.view(a.dtype.newbyteorder())  # the same bytes, read in the other order


def _wild(a: np.ndarray) -> tuple[float, float]:
    """``(fraction of values no instrument writes, spread of magnitudes)`` of float samples.

    Wild values are NaN/inf and magnitudes beyond 1e30 or below 1e-30; the spread is the standard deviation
    of log2|x| over the other non-zero values (a few units for data, tens for byte-swapped floats, whose
    exponent byte is a mantissa byte).
    """
    with np.errstate(all="ignore"):
        x = np.abs(a.astype(np.float64)).ravel()
        bad = ~np.isfinite(x) | ((x != 0) & ((x < 1e-30) | (x > 1e30)))
        ok = x[~bad & (x != 0)]
        spread = float(np.log2(ok).std()) if ok.size > 1 else 0.0
    return (float(bad.mean()) if bad.size else 0.0), spread


def _roughness(a: np.ndarray) -> float:
    """Mean step between neighbouring samples (spectra and images are smooth; their byte swaps are not)."""
    return float(np.abs(np.diff(a.astype(np.float64), axis=-1)).mean()) if a.shape[-1] > 1 else 0.0


def verify_byte_order(cube: np.ndarray, header: EnviHeader) -> None:
    """Refuse a cube that reads as garbage in the header's byte order and as data in the other.

    Floats: as declared, most values wild (NaN/inf, > 1e30 or < 1e-30) where swapped almost none are, or
    no fewer wild values and magnitudes spread over 4x more octaves than swapped.
    Integers wider than a byte: neighbouring samples 16x rougher as declared than swapped (a swap moves
    the noisy low byte to the top). For 16-bit data whose declared low byte never changes the two
    readings cannot be told apart (8-bit values stored swapped, or values scaled by 256) and the header is
    trusted; for wider integers values below 2**24 are far likelier than multiples of 256.
    """
    dtype = header.dtype
    if dtype.itemsize == 1 or dtype.kind == "c":
        return
    a = _sample(cube)
    if a.size == 0:
        return
    swapped = _other_order(a)
    declared = "big" if header.dtype.byteorder == ">" else "little"
    other = "little" if declared == "big" else "big"
    if dtype.kind == "f":
        (w_decl, s_decl), (w_swap, s_swap) = _wild(a), _wild(swapped)
        if (w_swap < 0.01 and w_decl > 0.5) or (w_swap <= w_decl and s_decl > 4 * max(s_swap, 1.0)):
            raise SceneFormatError(
                f"ENVI header {header.path} says byte order = {int(declared == 'big')} ({declared}-endian), but "
                f"read that way {w_decl:.0%} of sampled values are NaN/inf/absurd and magnitudes spread over "
                f"{s_decl:.1f} octaves (std of log2|x|); read as {other}-endian: {w_swap:.0%} and {s_swap:.1f}. "
                f"The header's byte order looks wrong: fix it (or pass check_byte_order=False)")
        return
    if dtype.itemsize == 2:
        low = a.view(np.uint8).reshape(*a.shape, 2)[..., 1 if declared == "big" else 0]
        if np.all(low == low.flat[0]):
            return  # ambiguous: the declared low byte never changes
    r_decl, r_swap = _roughness(a), _roughness(swapped)
    if r_decl > 16 * r_swap:
        raise SceneFormatError(
            f"ENVI header {header.path} says byte order = {int(declared == 'big')} ({declared}-endian), but the "
            f"data read that way jump {r_decl / max(r_swap, 1e-12):.0f}x more between neighbouring samples than "
            f"read as {other}-endian (mean step {r_decl:.4g} vs {r_swap:.4g}): the header's byte order looks "
            f"wrong; fix it (or pass check_byte_order=False)")


def open_envi(path: str | os.PathLike, image: str | os.PathLike | None = None, *, labels=None,
              name: str | None = None, check_byte_order: bool = True) -> Scene:
    """Open an ENVI scene lazily. ``path`` is the .hdr (or the data file next to it).

    The header is validated against itself and the data file's size (:mod:`.envi_header`); with
    ``check_byte_order`` a sample of the data must look like data in the header's byte order.

    Values are the stored ones: a ``reflectance scale factor`` (which spectral's ``load()`` divides by) is
    kept in ``metadata`` and named in a warning, never applied (``scene.with_cube(scene.cube / factor,
    scene.wavelengths)`` applies it in memory; a model applies the scaling it was trained with).
    """
    path = Path(path)
    header = read_envi_header(path)
    if image is None and path.suffix.lower() != ".hdr":
        image = path
    data = find_data_file(header, image)
    header.check_file(data)
    if header.dtype.kind == "c":
        raise SceneFormatError(f"ENVI header {header.path}: data type {header.metadata.get('data type')} holds "
                               f"complex numbers ({header.dtype.name}); zoo's models take real cubes: read it with "
                               f"spectral (spectral.envi.open) and keep np.abs(), .real or .imag")
    layout = RawLayout(data, header.offset, header.dtype, header.interleave,
                       (header.lines, header.samples, header.bands))
    cube = layout.memmap()  # (H, W, C) view of the file, whatever its interleave
    if check_byte_order:
        verify_byte_order(cube, header)
    meta = dict(header.metadata)
    _warn_scale_factor(meta, header.path)
    return Scene(cube=cube, wavelengths=_wavelengths(meta, header.bands, header.path), labels=labels,
                 name=name or header.path.stem, metadata=meta, layout=layout)


_DATA_SUFFIXES = (".hdr", ".bsq", ".bil", ".bip", *DATA_EXTENSIONS)
_PER_BAND = ("wavelength", "fwhm", "bbl", "band names", "data gain values", "data offset values")
"""Header fields that hold one entry per band: a source scene's, kept in ``metadata``, may list other bands."""


def header_path(path: str | os.PathLike) -> Path:
    """The .hdr a writer makes of ``path``: ``x.hdr``, ``x.img`` (an ENVI data extension) and ``x`` give
    ``x.hdr``; any other suffix is part of the name (``scene.pca`` -> ``scene.pca.hdr``), so writing
    ``scene.pca`` never replaces ``scene.hdr`` and ``scene.img``."""
    path = Path(path)
    if path.suffix.lower() in _DATA_SUFFIXES or not path.suffix:
        return path.with_suffix(".hdr")
    return path.with_name(path.name + ".hdr")


def _meta(wavelengths: Iterable[float] | None, extra: dict[str, Any] | None, n_bands: int) -> dict[str, Any]:
    meta: dict[str, Any] = dict(extra or {})
    if wavelengths is not None:  # written in nanometres, whatever unit a source scene's metadata names
        meta["wavelength"] = [f"{float(w):.6g}" for w in wavelengths]
        meta["wavelength units"] = "nanometers"
    stale = [k for k in _PER_BAND if k in meta and np.ndim(meta[k]) == 1 and len(meta[k]) != n_bands]
    for key in stale:
        del meta[key]
    if "wavelength" not in meta:
        meta.pop("wavelength units", None)
    if stale:
        warnings.warn(f"ENVI metadata {', '.join(repr(k) for k in stale)} list entries for another number of "
                      f"bands than the cube's {n_bands} (a source scene's?): not written", stacklevel=user_stacklevel())
    return meta


def _envi_dtype(dtype: Any, who: str) -> np.dtype:
    """``dtype`` little-endian, refused before anything is written when ENVI has no data type for it."""
    dt = np.dtype(dtype).newbyteorder("<")
    if dt.char not in envi.dtype_to_envi:
        known = ", ".join(sorted({np.dtype(c).name for c in envi.dtype_to_envi}))
        raise ValueError(f"{who}: ENVI has no data type for {np.dtype(dtype).name}; use one of {known}")
    return dt


def save_envi(path: str | os.PathLike, cube: np.ndarray, *, wavelengths=None, interleave: str = "bip",
              byteorder: int | None = None, metadata: dict[str, Any] | None = None, ext: str = ".img") -> Path:
    """Write an in-memory ``(H, W, C)`` cube as ENVI (atomically: temp files, then ``os.replace``).

    ``path`` names the header (see :func:`header_path`); the data file is the header's name with ``ext``."""
    hdr = header_path(path)
    cube = np.asarray(cube)
    if cube.ndim != 3:
        raise ValueError(f"save_envi needs an (H, W, C) cube; got shape {cube.shape}")
    _envi_dtype(cube.dtype, "save_envi")
    kwargs: dict[str, Any] = {"interleave": interleave, "force": True, "ext": ext,
                              "metadata": _meta(wavelengths, metadata, cube.shape[2])}
    if byteorder is not None:
        kwargs["byteorder"] = byteorder
    # data first, then the header: a header never points at nothing
    with fs.atomic_paths(hdr.with_suffix(ext), hdr, size=cube.nbytes) as (_, tmp_hdr):
        envi.save_image(str(tmp_hdr), cube, **kwargs)
    return hdr


class EnviWriter:
    """Write a BIP ENVI cube row block by row block (bounded memory), committed atomically on ``close``.

    >>> with EnviWriter("reduced.hdr", shape=(H, W, k), dtype=np.float32) as w:
    ...     for rows, block in chunks: w.write(block)
    """

    def __init__(self, path: str | os.PathLike, shape: tuple[int, int, int], dtype=np.float32, *,
                 wavelengths=None, metadata: dict[str, Any] | None = None, ext: str = ".img") -> None:
        self.hdr = header_path(path)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = _envi_dtype(dtype, "EnviWriter")
        self.ext = ext
        h, w, c = self.shape
        meta = _meta(wavelengths, metadata, c)
        meta.update({"lines": h, "samples": w, "bands": c, "header offset": 0, "file type": "ENVI Standard",
                     "data type": envi.dtype_to_envi[self.dtype.char], "interleave": "bip", "byte order": 0})
        self._staging = fs.PrivateTemp(self.hdr.parent, self.hdr.name, size=h * w * c * self.dtype.itemsize)
        try:
            self._tmp_hdr = self._staging.path_for(self.hdr)
            envi.write_envi_header(str(self._tmp_hdr), meta)
            self._fh = open(self._tmp_hdr.with_suffix(ext), "wb")  # noqa: SIM115  (closed by close()/abort())
        except BaseException:
            self._staging.abort()
            raise
        self._rows = 0

    def write(self, block: np.ndarray) -> None:
        """Append ``(h, W, C)`` rows."""
        _, w, c = self.shape
        if block.ndim != 3 or block.shape[1:] != (w, c):
            raise ValueError(f"EnviWriter block must be (h, {w}, {c}); got {block.shape}")
        if self._rows + block.shape[0] > self.shape[0]:
            raise ValueError(f"EnviWriter: more than the {self.shape[0]} rows declared")
        try:
            self._fh.write(np.ascontiguousarray(block, dtype=self.dtype).tobytes())
        except OSError as err:
            raise self._failed(err) from None
        self._rows += block.shape[0]

    def _failed(self, err: OSError) -> OSError:
        """A full disk or a file-size limit, named with the file and its size as save_envi's; nothing kept."""
        with contextlib.suppress(OSError):
            self.abort()
        h, w, c = self.shape
        return fs.write_error(err, self.hdr.with_suffix(self.ext), h * w * c * self.dtype.itemsize)

    def close(self) -> Path:
        try:
            self._fh.close()  # flushes the last buffered rows: a full disk may first show here
        except OSError as err:
            raise self._failed(err) from None
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
