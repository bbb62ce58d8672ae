"""A structural check of MATLAB v5 files, run before scipy reads them.

scipy's compiled v5 reader trusts a data element's type code as an index into a table
(``VarReader5.read_numeric``: ``self.dtypes[mdtype]``), so one damaged tag in a .mat file kills the
process with a segmentation fault instead of raising (found by ``tests/hyperspectral/test_hsi_fuzz.py``).
This walks every element tag -- top level, inside ``miMATRIX`` (recursively) and inside ``miCOMPRESSED``
elements after decompressing them -- and refuses unknown type codes and sizes that run past their parent,
so such a file raises :class:`SceneFormatError` before scipy sees it.

Layout (MATLAB "MAT-File Format", v5): a 128-byte header whose bytes 126-127 read ``IM`` in a little-endian
file; then data elements, each an 8-byte tag ``(type: u32, size: u32)`` and ``size`` bytes padded to 8 (not
padded: ``miCOMPRESSED``), or a
"small data element" whose first u32 holds ``size << 16 | type`` with ``size <= 4`` and the data in the
tag's second half.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from pathlib import Path

from zoo.hyperspectral.readers.errors import SceneFormatError

__all__ = ["check_v5_structure"]

MI_MATRIX, MI_COMPRESSED = 14, 15
# miINT8 .. miSINGLE, miDOUBLE, miINT64, miUINT64, miMATRIX, miUTF8/16/32 (miCOMPRESSED only at the top level)
_INNER_TYPES = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 12, 13, 14, 16, 17, 18})
_MAX_DEPTH = 64  # cells of cells of ...: deeper than any real file, shallow enough for the stack


class _Walker:
    def __init__(self, path: Path, endian: str) -> None:
        self.path, self.u4 = path, struct.Struct(endian + "II")

    def fail(self, what: str, at: int) -> SceneFormatError:
        return SceneFormatError(f"{self.path} is not a readable MATLAB .mat file: {what} at byte {at}")

    def elements(self, buf, start: int, end: int, depth: int, top: bool) -> None:
        pos = start
        while pos < end:
            if end - pos < 8:
                if top and not any(buf[pos:end]):
                    return  # trailing zero padding after the last variable
                raise self.fail(f"a truncated element tag ({end - pos} bytes)", pos)
            kind, size = self.u4.unpack_from(buf, pos)
            if kind >> 16:  # small data element: size in the upper half, at most 4 bytes of data
                if top or (kind >> 16) > 4 or (kind & 0xFFFF) not in _INNER_TYPES:
                    raise self.fail(f"an invalid small data element (type {kind & 0xFFFF}, {kind >> 16} bytes)", pos)
                pos += 8
                continue
            body = pos + 8
            nxt = body + size + (0 if kind == MI_COMPRESSED else -size % 8)  # compressed elements are not padded
            if body + size > end:
                raise self.fail(f"an element of {size} bytes running past its end ({end - body} bytes left)", pos)
            if top and kind not in (MI_MATRIX, MI_COMPRESSED):
                raise self.fail(f"a top-level element of type {kind} (expected miMATRIX or miCOMPRESSED)", pos)
            if not top and kind not in _INNER_TYPES:
                raise self.fail(f"an element of unknown type {kind}", pos)
            if kind in (MI_COMPRESSED, MI_MATRIX) and depth >= _MAX_DEPTH:
                raise self.fail(f"elements nested more than {_MAX_DEPTH} deep", pos)
            if kind == MI_COMPRESSED:
                self.compressed(buf, body, size, depth + 1)
            elif kind == MI_MATRIX:
                self.elements(buf, body, body + size, depth + 1, top=False)
            pos = min(nxt, end)

    def compressed(self, buf, body: int, size: int, depth: int) -> None:
        try:
            inner = zlib.decompressobj().decompress(buf[body:body + size])
        except zlib.error as err:
            raise self.fail(f"a compressed element that does not inflate ({err})", body) from None
        self.elements(inner, 0, len(inner), depth, top=True)


def check_v5_structure(path: str | Path) -> None:
    """Raise :class:`SceneFormatError` if a v5 .mat file has a tag scipy's reader cannot survive."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(128)
        if len(head) < 128 or 0 in head[:4]:  # too short for v5 (scipy refuses it), or v4 (a pure-Python reader)
            return
        marks = head[126:128]
        if marks not in (b"IM", b"MI"):
            raise SceneFormatError(f"{path} is not a readable MATLAB .mat file: endian marks {marks!r} at byte 126 "
                                   "(expected 'IM' or 'MI')")
        size = path.stat().st_size
        if size == 128:
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            _Walker(path, "<" if marks == b"IM" else ">").elements(buf, 128, size, 0, top=True)
