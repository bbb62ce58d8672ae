"""Princeton Instruments SPE files (WinSpec 2.x binary header, LightField 3.0 XML footer).

Why our own parser: the one maintained reader on PyPI, ``spexread`` 0.2.2 (MIT, beta), was checked: it pulls
in pydantic, numpydantic, xarray and lxml, and it sizes its buffers from header fields without comparing
them to the file (``np.zeros(roi.size // itemsize * count)``), so a damaged header asks for an arbitrary
allocation. Here every size read from a file is checked against the file's length before anything is
allocated or mapped, the XML footer is size-capped and parsed without DTDs/entities, and every defect is a
:class:`SPEFormatError` (a ``ValueError``) naming what was expected and what was found.

Layout (SPE 3.0 File Format Specification, Teledyne Princeton Instruments, 2012/2018): a 4100-byte header;
the data from byte 4100 as ``frames`` blocks of ``stride`` bytes, each holding the region(s) of interest
(``height x width`` pixels, row-major) and optional per-frame metadata; for 3.0 an XML footer at the
64-bit offset stored at byte 678. 2.x header fields used: ``xdim`` u16 @42, ``datatype`` i16 @108,
``ydim`` u16 @656, ``NumFrames`` i32 @1446, ``file_header_ver`` f32 @1992, wavelength calibration
(``calib_valid`` @3098, ``polynom_order`` u8 @3101, ``polynom_coeff`` 6 x f64 @3263).

A hyperspectral SPE cube is read as a push-broom scan: frame -> image row, ROI row -> image column, ROI
column -> band (the spectrograph's dispersion axis, which carries the wavelength calibration).
"""

from __future__ import annotations

import math
import os
import struct
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.hyperspectral.readers.errors import SceneFormatError
from zoo.hyperspectral.scene import Scene

__all__ = ["SPEFormatError", "SpeHeader", "open_spe", "parse_spe_header", "read_spe", "write_spe"]

HEADER_SIZE = 4100
MAX_XML_BYTES = 16 << 20  # a LightField footer is a few tens of kB
# 2.x datatype codes (SPE 3.0 spec, "legacy header", table of data types)
_DTYPES_2X = {0: "<f4", 1: "<i4", 2: "<i2", 3: "<u2", 5: "<f8", 6: "<u1", 8: "<u4"}
_PIXEL_FORMATS = {
    "monochromeunsigned16": "<u2",
    "monochromeunsigned32": "<u4",
    "monochromefloating32": "<f4",
    "monochromesigned16": "<i2",
    "monochromesigned32": "<i4",
    "monochromeunsigned8": "<u1",
}


class SPEFormatError(SceneFormatError):
    """A malformed or unsupported SPE file."""


@dataclass(frozen=True)
class SpeHeader:
    version: float
    dtype: np.dtype
    frames: int
    height: int  # ROI rows
    width: int  # ROI columns (the dispersion axis for a spectrograph)
    frame_stride: int  # bytes from one frame to the next (>= height * width * itemsize)
    data_offset: int = HEADER_SIZE
    wavelengths: np.ndarray | None = None  # one per ROI column, nm

    @property
    def frame_bytes(self) -> int:
        return self.height * self.width * self.dtype.itemsize


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _int_attr(el: ET.Element, name: str, what: str) -> int:
    raw = el.get(name)
    if raw is None:
        raise SPEFormatError(f"SPE 3.0 footer: {what} has no {name!r} attribute")
    try:
        val = int(raw)
    except ValueError:
        raise SPEFormatError(f"SPE 3.0 footer: {what} {name}={raw!r:.40} is not an integer") from None
    if val < 0:
        raise SPEFormatError(f"SPE 3.0 footer: {what} {name}={val} is negative")
    return val


def _parse_footer(xml: bytes, data_end: int) -> SpeHeader:
    if b"<!DOCTYPE" in xml or b"<!ENTITY" in xml:
        raise SPEFormatError("SPE 3.0 footer: DTDs / entities are not allowed in an SPE footer")
    try:
        root = ET.fromstring(xml)
    except (ET.ParseError, LookupError) as err:  # LookupError: an unknown encoding="..." (found by fuzzing)
        raise SPEFormatError(f"SPE 3.0 footer is not well-formed XML: {err}") from None
    frame = next((el for el in root.iter() if _local(el.tag) == "DataBlock" and el.get("type") == "Frame"), None)
    if frame is None:
        raise SPEFormatError("SPE 3.0 footer has no <DataBlock type=\"Frame\">")
    fmt = (frame.get("pixelFormat") or "").strip().lower()
    if fmt not in _PIXEL_FORMATS:
        raise SPEFormatError(f"SPE 3.0 footer: unsupported pixelFormat {frame.get('pixelFormat')!r}; "
                             f"supported: {sorted(_PIXEL_FORMATS)}")
    dtype = np.dtype(_PIXEL_FORMATS[fmt])
    count = _int_attr(frame, "count", "Frame block")
    stride = _int_attr(frame, "stride", "Frame block")
    regions = [el for el in frame if _local(el.tag) == "DataBlock" and el.get("type") == "Region"]
    if len(regions) != 1:
        raise SPEFormatError(f"SPE 3.0 file with {len(regions)} regions of interest; one region is supported")
    width = _int_attr(regions[0], "width", "Region block")
    height = _int_attr(regions[0], "height", "Region block")
    wavelengths = None
    for el in root.iter():
        if _local(el.tag) == "Wavelength" and el.text and el.text.strip():
            try:
                wl = np.array([float(v) for v in el.text.replace(";", ",").split(",") if v.strip()])
            except ValueError:
                raise SPEFormatError("SPE 3.0 footer: <Wavelength> is not a list of numbers") from None
            if np.all(np.isfinite(wl)):
                wavelengths = _roi_wavelengths(wl, width, _sensor_mapping(root, regions[0]))
            break
    return _checked(3.0, dtype, count, height, width, stride, data_end, wavelengths)


def _sensor_mapping(root: ET.Element, region: ET.Element) -> ET.Element | None:
    """The region's ``<SensorMapping>``: the one its ``calibrations`` ids name, else the footer's only one."""
    mappings = [el for el in root.iter() if _local(el.tag) == "SensorMapping"]
    ids = {v.strip() for v in (region.get("calibrations") or "").split(",")}
    named = [el for el in mappings if el.get("id") in ids]
    if len(named) == 1:
        return named[0]
    return mappings[0] if len(mappings) == 1 else None


def _roi_wavelengths(wl: np.ndarray, width: int, mapping: ET.Element | None) -> np.ndarray | None:
    """One wavelength per ROI column. ``<Wavelength>`` lists one per sensor column, and the ROI's ``width``
    columns are sensor columns ``x .. x + width * xBinning - 1`` of its ``<SensorMapping>``, each binned group
    read as the mean of its columns' wavelengths (as Princeton Instruments' loadSPE.m slices them)."""
    if mapping is None:  # no mapping: a list of the ROI's own columns (write_spe's), or a ROI from column 0
        return wl[:width] if wl.size >= width else None
    try:
        x, binning = int(mapping.get("x", "0")), int(mapping.get("xBinning", "1"))
    except ValueError:
        x, binning = -1, 0
    span = width * binning
    if x >= 0 and binning >= 1 and x + span <= wl.size:
        return wl[x:x + span].reshape(width, binning).mean(axis=1)
    if wl.size == width:  # a list of the ROI's own columns already
        return wl
    warnings.warn(f"SPE 3.0 footer: <SensorMapping x={mapping.get('x')!r} xBinning={mapping.get('xBinning')!r}> "
                  f"puts the region's {width} columns outside the {wl.size} wavelengths of <Wavelength> (expected "
                  f"x >= 0, xBinning >= 1 and x + {width} * xBinning <= {wl.size}): the scene has no wavelengths",
                  stacklevel=user_stacklevel())
    return None


def _checked(version: float, dtype: np.dtype, frames: int, height: int, width: int, stride: int,
             data_end: int, wavelengths: np.ndarray | None) -> SpeHeader:
    if frames < 1 or height < 1 or width < 1:
        raise SPEFormatError(f"SPE header declares an empty data block: {frames} frames of {height}x{width}")
    frame_bytes = height * width * dtype.itemsize
    if stride < frame_bytes:
        raise SPEFormatError(f"SPE frame stride {stride} B is smaller than one {height}x{width} {dtype} frame "
                             f"({frame_bytes} B)")
    # Python ints: no overflow; nothing has been allocated yet
    need = HEADER_SIZE + (frames - 1) * stride + frame_bytes
    if need > data_end:
        raise SPEFormatError(
            f"SPE header declares {frames} frames of {height}x{width} {dtype.name} ({need - HEADER_SIZE} B of "
            f"data) but the file has only {max(0, data_end - HEADER_SIZE)} B of data: truncated or corrupt"
        )
    return SpeHeader(version, dtype, frames, height, width, stride, HEADER_SIZE, wavelengths)


def parse_spe_header(head: bytes, file_size: int, read_at=None) -> SpeHeader:
    """Parse and validate the 4100-byte header (and, for 3.0, the footer read with ``read_at(offset, n)``)."""
    if len(head) < HEADER_SIZE or file_size < HEADER_SIZE:
        raise SPEFormatError(f"file is {file_size} B; an SPE file starts with a {HEADER_SIZE}-byte header")
    (version,) = struct.unpack_from("<f", head, 1992)
    # WinSpec 1.x files left this zero; anything else outside (0, 100) is not an SPE header
    if (not math.isfinite(version) or not 0.0 < version < 100.0) and version != 0.0:
        raise SPEFormatError(f"SPE header version field is {version!r}; expected 1.x, 2.x or 3.0")
    if version >= 3.0:
        (xml_offset,) = struct.unpack_from("<Q", head, 678)
        if not HEADER_SIZE <= xml_offset < file_size:
            raise SPEFormatError(f"SPE 3.0 footer offset {xml_offset} lies outside the file ({file_size} B)")
        n = file_size - xml_offset
        if n > MAX_XML_BYTES:
            raise SPEFormatError(f"SPE 3.0 footer of {n} B exceeds the {MAX_XML_BYTES} B limit")
        if read_at is None:
            raise SPEFormatError("SPE 3.0 footer cannot be read (no reader given)")
        return _parse_footer(read_at(xml_offset, n), xml_offset)
    (xdim,) = struct.unpack_from("<H", head, 42)
    (code,) = struct.unpack_from("<h", head, 108)
    (ydim,) = struct.unpack_from("<H", head, 656)
    (frames,) = struct.unpack_from("<i", head, 1446)
    if code not in _DTYPES_2X:
        raise SPEFormatError(f"SPE 2.x datatype code {code} is not one of {sorted(_DTYPES_2X)}")
    dtype = np.dtype(_DTYPES_2X[code])
    wavelengths = None
    calib_valid, order = head[3098], head[3101]
    if calib_valid and 1 <= order <= 5:
        coeff = np.array(struct.unpack_from("<6d", head, 3263)[: order + 1])
        if np.all(np.isfinite(coeff)) and xdim:
            with np.errstate(all="ignore"):
                wl = np.polynomial.polynomial.polyval(np.arange(xdim, dtype=np.float64), coeff)
            wavelengths = wl if np.all(np.isfinite(wl)) else None
    return _checked(float(version), dtype, frames, ydim, xdim, ydim * xdim * dtype.itemsize, file_size,
                    wavelengths)


def _open_header(path: Path) -> SpeHeader:
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(HEADER_SIZE)

        def read_at(offset: int, n: int) -> bytes:
            fh.seek(offset)
            return fh.read(n)

        return parse_spe_header(head, size, read_at)


def read_spe(path: str | os.PathLike) -> tuple[np.ndarray, SpeHeader]:
    """``(frames, height, width)`` memmap of an SPE file's data, and its validated header."""
    path = Path(path)
    hdr = _open_header(path)
    n = (hdr.frames - 1) * hdr.frame_stride + hdr.frame_bytes  # validated against the file size
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=hdr.data_offset, shape=(n,))
    frames = np.lib.stride_tricks.as_strided(raw, shape=(hdr.frames, hdr.frame_bytes),
                                             strides=(hdr.frame_stride, 1), writeable=False)
    data = frames.view(hdr.dtype).reshape(hdr.frames, hdr.height, hdr.width)
    return data, hdr


def open_spe(path: str | os.PathLike, *, labels=None, name: str | None = None) -> Scene:
    """A push-broom SPE scan as a Scene: ``(frames, rows, columns)`` -> ``(H, W, C)``."""
    data, hdr = read_spe(path)
    return Scene(cube=data, wavelengths=hdr.wavelengths, labels=labels, name=name or Path(path).stem,
                 metadata={"spe_version": hdr.version})


def write_spe(path: str | os.PathLike, data: np.ndarray, *, version: float = 3.0,
              wavelengths: np.ndarray | None = None) -> Path:
    """Write ``(frames, height, width)`` data as SPE 2.x or 3.0 (for tests and round trips; atomic)."""
    data = np.asarray(data)
    if data.ndim != 3:
        raise ValueError(f"write_spe needs (frames, height, width); got {data.shape}")
    frames, height, width = data.shape
    head = bytearray(HEADER_SIZE)
    struct.pack_into("<f", head, 1992, version)
    struct.pack_into("<i", head, 2996, 0x01234567)  # WinView_id
    struct.pack_into("<h", head, 4098, 0x5555)  # lastvalue
    if version >= 3.0:
        fmt = {v: k for k, v in _PIXEL_FORMATS.items()}
        code = np.dtype(data.dtype).newbyteorder("<").str
        if code not in fmt:
            raise ValueError(f"SPE 3.0 stores {sorted(fmt)}; got {data.dtype}")
        body = np.ascontiguousarray(data, dtype=code).tobytes()
        pf = {"<u2": "MonochromeUnsigned16", "<u4": "MonochromeUnsigned32", "<f4": "MonochromeFloating32",
              "<i2": "MonochromeSigned16", "<i4": "MonochromeSigned32", "<u1": "MonochromeUnsigned8"}[code]
        fb = height * width * data.dtype.itemsize
        wl = "" if wavelengths is None else (
            "<Calibrations><WavelengthMapping><Wavelength>" + ",".join(f"{w:.6f}" for w in wavelengths)
            + "</Wavelength></WavelengthMapping></Calibrations>")
        xml = (
            '<?xml version="1.0" encoding="utf-8"?><SpeFormat version="3.0" '
            'xmlns="http://www.princetoninstruments.com/spe/2009"><DataFormat>'
            f'<DataBlock type="Frame" version="3.0" count="{frames}" pixelFormat="{pf}" size="{fb}" stride="{fb}">'
            f'<DataBlock type="Region" count="1" width="{width}" height="{height}" size="{fb}" stride="{fb}"/>'
            f"</DataBlock></DataFormat>{wl}</SpeFormat>"
        ).encode()
        struct.pack_into("<Q", head, 678, HEADER_SIZE + len(body))
        payload = bytes(head) + body + xml
    else:
        codes = {v: k for k, v in _DTYPES_2X.items()}
        code = np.dtype(data.dtype).newbyteorder("<").str
        if code not in codes:
            raise ValueError(f"SPE 2.x stores {sorted(codes)}; got {data.dtype}")
        struct.pack_into("<H", head, 42, width)
        struct.pack_into("<h", head, 108, codes[code])
        struct.pack_into("<H", head, 656, height)
        struct.pack_into("<i", head, 1446, frames)
        if wavelengths is not None:  # store a polynomial fit, as WinSpec does
            order = min(3, width - 1) if width > 1 else 0
            coeff = np.polynomial.polynomial.polyfit(np.arange(width), np.asarray(wavelengths, float), order)
            head[3098] = 1
            head[3101] = order
            struct.pack_into("<6d", head, 3263, *np.pad(coeff, (0, 6 - coeff.size)))
        payload = bytes(head) + np.ascontiguousarray(data, dtype=code).tobytes()
    return fs.write_bytes(path, payload)
