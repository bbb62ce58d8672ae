"""The ENVI header, checked against itself and against its data file before anything is mapped.

``spectral`` parses the text; every field the cube's layout depends on is then validated here: ``lines``,
``samples``, ``bands`` positive integers, ``header offset`` a non-negative integer, ``data type`` one of
ENVI's codes, ``byte order`` 0 or 1, ``interleave`` bsq/bil/bip, and the data file exactly
``header offset + lines * samples * bands * bytes per sample`` long. A header that disagrees with its file
(a wrong data type, a wrong image size) is refused rather than read as a cube of garbage.
"""

from __future__ import annotations

import contextlib
import locale
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zoo.hyperspectral.readers.errors import SceneFormatError

__all__ = ["DATA_EXTENSIONS", "EnviHeader", "find_header", "header_candidates", "missing_header",
           "parse_envi_header", "read_envi_header"]

# ENVI data type codes (ENVI header format documentation, "data type")
_DTYPES = {1: "u1", 2: "i2", 3: "i4", 4: "f4", 5: "f8", 6: "c8", 9: "c16", 12: "u2", 13: "u4", 14: "i8", 15: "u8"}
_MAX_HEADER_BYTES = 16 << 20  # a header listing thousands of bands is well under 1 MB
DATA_EXTENSIONS = ("", ".img", ".dat", ".sli", ".hyspex", ".raw", ".bin")  # as spectral's envi.open looks


@dataclass(frozen=True)
class EnviHeader:
    path: Path
    lines: int  # H
    samples: int  # W
    bands: int  # C
    offset: int  # bytes before the first sample
    dtype: np.dtype  # with the header's byte order
    interleave: str  # "bsq" | "bil" | "bip"
    metadata: dict[str, Any]

    @property
    def data_bytes(self) -> int:
        return self.lines * self.samples * self.bands * self.dtype.itemsize

    def check_file(self, data: Path) -> None:
        """The data file must hold exactly the header offset plus the image the header describes."""
        size = os.path.getsize(data)
        need = self.offset + self.data_bytes
        if size == need:
            return
        what = (f"the header ({self.lines} lines x {self.samples} samples x {self.bands} bands of "
                f"{self.dtype.name}, {self.dtype.itemsize} B each, header offset {self.offset}) needs {need} B")
        hint = ""
        n = self.lines * self.samples * self.bands
        per = (size - self.offset) / n if n else 0
        if per in (1, 2, 4, 8, 16) and per != self.dtype.itemsize:
            hint = f"; the file holds {int(per)} B per sample: is 'data type' wrong?"
        elif size > need:
            hint = "; is 'samples', 'lines', 'bands' or 'header offset' wrong?"
        raise SceneFormatError(f"ENVI data file {data} holds {size} B but {what}{hint}")


def header_candidates(path: Path) -> list[Path]:
    """The headers a data file ``path`` may have beside it, as ENVI and spectral users name them: ``X.hdr``
    beside ``X.img``, or ``X.img.hdr``, each in lower or upper case (a tree copied from Windows or a CD
    holds ``SCENE.IMG`` and ``SCENE.HDR``)."""
    names = (path.with_suffix(".hdr"), path.with_suffix(".HDR"), Path(str(path) + ".hdr"), Path(str(path) + ".HDR"))
    return list(dict.fromkeys(names))


def missing_header(path: Path) -> str | None:
    """None when a header of ``path`` exists (see :func:`find_header`); else the words saying where none was."""
    if path.suffix.lower() == ".hdr" or any(c.is_file() for c in header_candidates(path)):
        return None
    return f"no ENVI header found beside it (looked for {', '.join(c.name for c in header_candidates(path))})"


def find_header(path: Path) -> Path:
    """The ``.hdr`` of ``path`` (itself, or one of :func:`header_candidates` beside the data file)."""
    if path.suffix.lower() == ".hdr":
        if not path.is_file():
            raise FileNotFoundError(f"ENVI header not found: {path}")
        return path
    for cand in header_candidates(path):
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"{path}: {missing_header(path)}")


def _int_field(h: dict[str, Any], key: str, path: Path, *, minimum: int, default: int | None = None) -> int:
    raw = h.get(key)
    if raw is None:
        if default is not None:
            return default
        raise SceneFormatError(f"ENVI header {path} has no {key!r} field (it is required)")
    try:
        val = int(str(raw).strip())
    except ValueError:
        raise SceneFormatError(f"ENVI header {path}: {key!r} must be an integer; got {raw!r:.60}") from None
    if val < minimum:
        raise SceneFormatError(f"ENVI header {path}: {key!r} must be >= {minimum}; got {val}")
    return val


def parse_envi_header(h: dict[str, Any], path: Path) -> EnviHeader:
    """Validate the fields of a parsed header dict (``spectral``'s lower-cased keys)."""
    lines = _int_field(h, "lines", path, minimum=1)
    samples = _int_field(h, "samples", path, minimum=1)
    bands = _int_field(h, "bands", path, minimum=1)
    offset = _int_field(h, "header offset", path, minimum=0, default=0)
    code = _int_field(h, "data type", path, minimum=0)
    if code not in _DTYPES:
        raise SceneFormatError(f"ENVI header {path}: 'data type' {code} is not an ENVI data type; "
                               f"expected one of {sorted(_DTYPES)}")
    order = _int_field(h, "byte order", path, minimum=0)
    if order not in (0, 1):
        raise SceneFormatError(f"ENVI header {path}: 'byte order' must be 0 (little-endian) or 1 (big-endian); "
                               f"got {order}")
    interleave = str(h.get("interleave", "")).strip().lower()
    if interleave not in ("bsq", "bil", "bip"):
        raise SceneFormatError(f"ENVI header {path}: 'interleave' must be bsq, bil or bip; "
                               f"got {h.get('interleave')!r:.40}")
    if str(h.get("file type", "")).strip().lower() == "envi spectral library":
        raise SceneFormatError(f"{path} is an ENVI spectral library, not an image cube")
    for key in ("major frame offsets", "minor frame offsets"):
        vals = h.get(key)
        if vals is not None and any(str(v).strip() not in ("0", "") for v in np.atleast_1d(vals)):
            raise SceneFormatError(f"ENVI header {path}: {key!r} (frame padding) is not supported")
    dtype = np.dtype(("<" if order == 0 else ">") + _DTYPES[code])
    if dtype.itemsize == 1:
        dtype = np.dtype(_DTYPES[code])
    return EnviHeader(path, lines, samples, bands, offset, dtype, interleave, dict(h))


def _legacy_text(hdr: Path) -> str | None:
    """The text of a header saved in Windows-1252 or Latin-1 (by Notepad, or an old ENVI: ``wavelength units =
    \u00b5m``, an accented description), which ``spectral`` reads as UTF-8 only; None for a file of NUL bytes (binary),
    one larger than any header, or one that is valid UTF-8 (whatever failed then was not its encoding)."""
    if hdr.stat().st_size > _MAX_HEADER_BYTES:
        return None
    raw = hdr.read_bytes()
    if b"\0" in raw:
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        try:
            return raw.decode("cp1252")
        except UnicodeDecodeError:  # the five bytes cp1252 leaves undefined
            return raw.decode("latin-1")
    return None


def _read_fields(hdr: Path) -> dict[str, Any]:
    from spectral.io import envi

    try:
        return envi.read_envi_header(str(hdr))
    except (envi.EnviException, UnicodeDecodeError) as err:  # spectral's own parse errors; binary junk
        first = err
    text = _legacy_text(hdr)
    if text is not None:  # spectral parses a path only, read in the locale's encoding: hand it the text so
        with tempfile.TemporaryDirectory() as tmp:
            utf = Path(tmp) / hdr.name
            utf.write_text(text, encoding=locale.getpreferredencoding(False), errors="replace")
            with contextlib.suppress(envi.EnviException):
                return envi.read_envi_header(str(utf))
    raise SceneFormatError(f"{hdr} is not a readable ENVI header: {first or type(first).__name__}") from None


def read_envi_header(path: str | os.PathLike) -> EnviHeader:
    """Parse and validate the ``.hdr`` of ``path`` (UTF-8, or Windows-1252/Latin-1 text)."""
    hdr = find_header(Path(path))
    return parse_envi_header(_read_fields(hdr), hdr)


def find_data_file(header: EnviHeader, image: str | os.PathLike | None = None) -> Path:
    """The data file: ``image`` when given, else the header's name with a known ENVI extension."""
    if image is not None:
        data = Path(image)
        if not data.is_file():
            raise FileNotFoundError(f"ENVI data file not found: {data}")
        return data
    stem = header.path.with_suffix("")
    exts = [*DATA_EXTENSIONS, "." + header.interleave]
    for ext in [*exts, *(e.upper() for e in exts)]:
        cand = Path(str(stem) + ext)
        if cand.is_file() and cand != header.path:
            return cand
    raise FileNotFoundError(f"no ENVI data file for {header.path}: looked for {stem.name} with extensions "
                            f"{', '.join(e or '(none)' for e in exts)}")
