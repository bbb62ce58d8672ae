"""ENVI headers that lie about their data file: refused with the field and the sizes named, never read as
a cube of garbage; byte-order claims checked against the data (both directions)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from spectral.io import envi

from zoo.hyperspectral.readers import SceneFormatError, load_scene, open_envi


def _smooth_cube(dtype, shape=(12, 10, 30), seed=0) -> np.ndarray:
    """Spectra as instruments give them: smooth along bands and similar between neighbours."""
    rng = np.random.default_rng(seed)
    base = 1000 + np.cumsum(rng.integers(-4, 5, size=shape), axis=2) + np.arange(shape[2]) * 3
    if np.dtype(dtype).kind == "f":
        return (base / 10000.0).astype(dtype)  # reflectance 0.1 ... 0.2
    return base.astype(dtype)


def _write(tmp_path, cube, byteorder=0, interleave="bil", name="s"):
    hdr = tmp_path / f"{name}.hdr"
    envi.save_image(str(hdr), cube, interleave=interleave, byteorder=byteorder, force=True, ext=".img")
    return hdr


def _edit(hdr, key, value):
    text = hdr.read_text()
    text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.MULTILINE)
    if n == 0:
        text += f"{key} = {value}\n"
    hdr.write_text(text)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint16, np.int16, np.int32])
@pytest.mark.parametrize("byteorder", [0, 1])
def test_declared_byte_order_matches_data_loads(tmp_path, dtype, byteorder):
    """Genuinely big-endian (and little-endian) files load exactly as written."""
    cube = _smooth_cube(dtype)
    scene = open_envi(_write(tmp_path, cube, byteorder))
    np.testing.assert_array_equal(np.asarray(scene.cube), cube)
    assert scene.cube.dtype.byteorder in (">" if byteorder else "<", "=" if not byteorder else ">")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint16, np.int16, np.int32])
@pytest.mark.parametrize("byteorder", [0, 1])
def test_wrong_byte_order_is_refused(tmp_path, dtype, byteorder):
    """Little-endian data under ``byte order = 1`` (and the reverse) is refused, not read as NaN/garbage."""
    hdr = _write(tmp_path, _smooth_cube(dtype), byteorder)
    _edit(hdr, "byte order", 1 - byteorder)
    with pytest.raises(SceneFormatError, match="byte order"):
        open_envi(hdr)
    # the escape hatch reads the bytes as the header says
    assert open_envi(hdr, check_byte_order=False).shape == (12, 10, 30)


def test_byte_order_claim_checked_on_real_indian_pines(tmp_path, shared_data):
    path = shared_data / "hyperspectral/indian_pines/Indian_pines_corrected.npy"
    if not path.exists():
        pytest.skip(f"data not found: {path}")
    cube = np.load(path, mmap_mode="r")[:48, :48]
    for order in (0, 1):
        hdr = _write(tmp_path, np.asarray(cube), order, name=f"ip{order}")
        np.testing.assert_array_equal(np.asarray(open_envi(hdr).cube), cube)
        _edit(hdr, "byte order", 1 - order)
        with pytest.raises(SceneFormatError, match="byte order looks wrong"):
            open_envi(hdr)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("byte order", "7", r"'byte order' must be 0 \(little-endian\) or 1 \(big-endian\); got 7"),
    ("byte order", "big", r"'byte order' must be an integer; got 'big'"),
    ("data type", "99", r"'data type' 99 is not an ENVI data type"),
    ("data type", "12", r"holds 5600 B .* needs 2800 B; the file holds 4 B per sample: is 'data type' wrong"),
    ("data type", "5", r"needs 11200 B; the file holds 4 B per sample"),
    ("samples", "7", r"holds 5600 B but the header \(5 lines x 7 samples .* needs 3920 B"),
    ("samples", "11", r"needs 6160 B"),
    ("lines", "-5", r"'lines' must be >= 1; got -5"),
    ("bands", "0", r"'bands' must be >= 1; got 0"),
    ("bands", "4.5", r"'bands' must be an integer"),
    ("interleave", "xyz", r"'interleave' must be bsq, bil or bip; got 'xyz'"),
    ("header offset", "16", r"header offset 16\) needs 5616 B"),
    ("header offset", "-1", r"'header offset' must be >= 0"),
    ("file type", "ENVI Spectral Library", r"spectral library, not an image cube"),
    ("major frame offsets", "{2, 0}", r"frame padding\) is not supported"),
])
def test_lying_header_fields_are_refused(tmp_path, key, value, message):
    cube = _smooth_cube(np.float32, shape=(5, 10, 28))  # 5600 B of float32
    hdr = _write(tmp_path, cube)
    _edit(hdr, key, value)
    with pytest.raises(SceneFormatError, match=message) as info:
        open_envi(hdr)
    assert str(hdr.with_suffix("")) in str(info.value)  # the file is named
    with pytest.raises(ValueError):  # a ValueError for callers that catch those (the zoo command does)
        load_scene(hdr)


def test_header_offset_is_honoured(tmp_path):
    cube = _smooth_cube(np.int16, shape=(4, 6, 8))
    hdr = _write(tmp_path, cube)
    data = hdr.with_suffix(".img")
    data.write_bytes(b"\xff" * 128 + data.read_bytes())
    with pytest.raises(SceneFormatError, match="needs 384 B"):
        open_envi(hdr)
    _edit(hdr, "header offset", 128)
    np.testing.assert_array_equal(np.asarray(open_envi(hdr).cube), cube)


def test_missing_fields_and_non_headers(tmp_path):
    hdr = _write(tmp_path, _smooth_cube(np.float32, shape=(3, 4, 5)))
    hdr.write_text(hdr.read_text().replace("lines = 3\n", ""))
    with pytest.raises(SceneFormatError, match="no 'lines' field"):
        open_envi(hdr)
    (tmp_path / "junk.hdr").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x01\xff\xfe")
    (tmp_path / "junk.img").write_bytes(b"\x00" * 8)
    with pytest.raises(SceneFormatError, match="not a readable ENVI header"):
        open_envi(tmp_path / "junk.hdr")
    (tmp_path / "plain.hdr").write_text("not envi\nlines = 3\n")
    with pytest.raises(SceneFormatError, match="not a readable ENVI header"):
        open_envi(tmp_path / "plain.hdr")
