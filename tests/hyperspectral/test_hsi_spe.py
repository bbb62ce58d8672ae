"""Princeton Instruments SPE: files built here (2.x and 3.0), and property-based fuzzing of the header parser."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zoo.hyperspectral.readers import load_scene
from zoo.hyperspectral.readers.spe import HEADER_SIZE, SPEFormatError, parse_spe_header, read_spe, write_spe


@pytest.mark.parametrize("version", [2.5, 3.0])
@pytest.mark.parametrize("dtype", [np.uint16, np.float32, np.int32, np.uint32])
def test_spe_round_trip(tmp_path, version, dtype):
    rng = np.random.default_rng(0)
    data = (rng.random((3, 4, 6)) * 1000).astype(dtype)  # (frames, rows, columns)
    wl = 500.0 + 0.5 * np.arange(6) + 1e-3 * np.arange(6) ** 2
    path = write_spe(tmp_path / "a.spe", data, version=version, wavelengths=wl)
    arr, hdr = read_spe(path)
    assert hdr.version == pytest.approx(version)
    np.testing.assert_array_equal(arr, data)
    np.testing.assert_allclose(hdr.wavelengths, wl, atol=1e-6)
    scene = load_scene(path)
    assert scene.shape == (3, 4, 6)  # frames -> rows, ROI rows -> columns, ROI columns -> bands
    np.testing.assert_allclose(scene.wavelengths, wl, atol=1e-6)


def test_spe30_frame_stride_with_metadata(tmp_path):
    """LightField appends per-frame metadata (e.g. time stamps) after each frame: the stride is larger."""
    data = np.arange(2 * 3 * 4, dtype=np.uint16).reshape(2, 3, 4)
    fb, stride = 24, 24 + 16
    body = b"".join(data[i].tobytes() + b"\xee" * 16 for i in range(2))
    xml = (f'<SpeFormat xmlns="http://www.princetoninstruments.com/spe/2009"><DataFormat><DataBlock type="Frame" '
           f'count="2" pixelFormat="MonochromeUnsigned16" size="{fb}" stride="{stride}"><DataBlock type="Region" '
           f'width="4" height="3" size="{fb}" stride="{fb}"/></DataBlock></DataFormat></SpeFormat>').encode()
    head = bytearray(HEADER_SIZE)
    struct.pack_into("<f", head, 1992, 3.0)
    struct.pack_into("<Q", head, 678, HEADER_SIZE + len(body))
    (tmp_path / "m.spe").write_bytes(bytes(head) + body + xml)
    arr, _ = read_spe(tmp_path / "m.spe")
    np.testing.assert_array_equal(arr, data)


def _valid(version: float) -> bytes:
    data = np.arange(2 * 3 * 5, dtype=np.uint16).reshape(2, 3, 5)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = write_spe(Path(d) / "v.spe", data, version=version, wavelengths=np.linspace(400, 410, 5))
        return p.read_bytes()


VALID = {2.5: _valid(2.5), 3.0: _valid(3.0)}


def _parse(blob: bytes):
    return parse_spe_header(blob[:HEADER_SIZE], len(blob), lambda off, n: blob[off:off + n])


def test_spe_malformed_files_are_clear_errors(tmp_path):
    with pytest.raises(SPEFormatError, match="4100-byte header"):
        _parse(b"\x00" * 100)
    blob = bytearray(VALID[2.5])
    struct.pack_into("<i", blob, 1446, 2**31 - 1)  # frames: would need ~2**31 * 30 B
    with pytest.raises(SPEFormatError, match="truncated or corrupt"):
        _parse(bytes(blob))
    blob = bytearray(VALID[2.5])
    struct.pack_into("<h", blob, 108, 4)
    with pytest.raises(SPEFormatError, match="datatype code 4"):
        _parse(bytes(blob))
    blob = bytearray(VALID[3.0])
    struct.pack_into("<Q", blob, 678, 2**63)
    with pytest.raises(SPEFormatError, match="outside the file"):
        _parse(bytes(blob))
    bomb = VALID[3.0][: struct.unpack_from("<Q", VALID[3.0], 678)[0]] + (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><l>&b;</l>')
    with pytest.raises(SPEFormatError, match="DTD"):
        _parse(bomb)
    (tmp_path / "t.spe").write_bytes(VALID[3.0][:4150])
    with pytest.raises(SPEFormatError):
        read_spe(tmp_path / "t.spe")


_FIELDS = [(42, "<H"), (108, "<h"), (656, "<H"), (1446, "<i"), (1992, "<f"), (678, "<Q"), (3098, "<B"),
           (3101, "<B"), (3263, "<d")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=st.sampled_from([2.5, 3.0]),
       edits=st.lists(st.tuples(st.sampled_from(_FIELDS), st.integers(min_value=-(2**63), max_value=2**64 - 1),
                                st.floats(width=32, allow_nan=True, allow_infinity=True)), max_size=4),
       cut=st.integers(min_value=0, max_value=6000),
       noise=st.lists(st.tuples(st.integers(0, 6000), st.integers(0, 255)), max_size=8))
def test_spe_header_fuzz(version, edits, cut, noise):
    """Mutated headers/footers: parse or raise SPEFormatError; a parsed header never claims bytes the file lacks."""
    blob = bytearray(VALID[version])
    for (off, fmt), ival, fval in edits:
        if fmt in ("<f", "<d"):
            struct.pack_into(fmt, blob, off, fval)
        else:
            bits = struct.calcsize(fmt) * 8
            signed = fmt[1].islower()
            lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
            struct.pack_into(fmt, blob, off, min(max(ival, lo), hi))
    for pos, byte in noise:
        if pos < len(blob):
            blob[pos] = byte
    blob = bytes(blob[: max(cut, 0)] if cut < len(blob) else blob)
    try:
        hdr = _parse(blob)
    except SPEFormatError:
        return
    end = len(blob)
    assert hdr.frames >= 1 and hdr.height >= 1 and hdr.width >= 1
    assert HEADER_SIZE + (hdr.frames - 1) * hdr.frame_stride + hdr.frame_bytes <= end
    if hdr.wavelengths is not None:
        assert hdr.wavelengths.shape == (hdr.width,)


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_spe_footer_fuzz(xml):
    """Arbitrary footer bytes never escape as anything but SPEFormatError."""
    base = VALID[3.0][: struct.unpack_from("<Q", VALID[3.0], 678)[0]]
    try:
        hdr = _parse(base + xml)
    except SPEFormatError:
        return
    assert hdr.frames * hdr.frame_bytes <= len(base) - HEADER_SIZE
