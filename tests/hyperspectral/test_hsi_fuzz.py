"""Fuzzing the scene readers: random damage to real (test-made) ENVI, SPE and .mat files either loads a
readable cube or raises SceneFormatError -- never another exception (nor a crash: the .mat fuzzer found
damaged tags that segfault scipy's reader, now refused by zoo.hyperspectral.readers.mat_v5). Each test runs
a fixed (derandomised) set of 200 examples so that CI sees the same cases every run; ZOO_FUZZ_EXAMPLES=5000
(with ZOO_FUZZ_RANDOM=1: new cases each run) explores further. ``--hypothesis-show-statistics`` shows how many loaded or were refused.
"""

from __future__ import annotations

import functools
import io
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from spectral.io import envi

from zoo.hyperspectral.readers import SceneFormatError, load_scene, open_envi, open_spe, write_spe

FUZZ = settings(max_examples=int(os.environ.get("ZOO_FUZZ_EXAMPLES", "200")), deadline=None, database=None,
                derandomize="ZOO_FUZZ_RANDOM" not in os.environ,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _cube():
    rng = np.random.default_rng(0)
    return (1000 + np.cumsum(rng.integers(-5, 6, size=(6, 5, 7)), axis=2)).astype(np.int16)


@functools.cache
def envi_seed() -> tuple[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        envi.save_image(f"{tmp}/s.hdr", _cube(), interleave="bil", force=True, ext=".img",
                        metadata={"wavelength": [f"{w}" for w in range(400, 470, 10)], "wavelength units": "nm"})
        return Path(tmp, "s.hdr").read_text(), Path(tmp, "s.img").read_bytes()


def _loads_or_refuses(load, *args, **kwargs):
    """Call a reader; a cube it returns must be fully readable."""
    try:
        scene = load(*args, **kwargs)
    except SceneFormatError as err:
        event("refused: " + re.sub(r"'[^']*'|[0-9]+", "_", str(err).split(": ", 1)[-1])[:40])  # the kind of defect
        return None
    cube = np.asarray(scene.cube)  # every byte it maps must be there
    assert cube.ndim == 3 and min(cube.shape) >= 1
    event("loaded")
    return scene


@FUZZ
@given(data=st.data())
def test_envi_header_and_data_fuzz(tmp_path, mutations, data):
    header, payload = envi_seed()
    hdr = data.draw(mutations.text(header, values=("bsq", "bil", "bip", "0", "1", "2", "4", "5", "12", "{400, 410}",
                                                   "6", "7", "30", "ENVI Spectral Library")), label="header")
    img = data.draw(st.one_of(st.just(payload), mutations.binary(payload, max_ops=2)), label="data")
    (tmp_path / "s.hdr").write_bytes(hdr)
    (tmp_path / "s.img").write_bytes(img)
    scene = _loads_or_refuses(open_envi, tmp_path / "s.hdr")
    if scene is not None:
        h, w, c = scene.layout.shape
        assert (tmp_path / "s.img").stat().st_size == scene.layout.offset + h * w * c * scene.layout.dtype.itemsize


# 2.x: xdim, datatype, ydim, NumFrames, version, calib_valid, polynom_order, polynom_coeff; 3.0: footer offset
_SPE_FIELDS = (42, 108, 656, 1446, 1992, 3098, 3101, 3263, 3271, 678)


@functools.cache
def spe_seeds() -> dict[float, bytes]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for version in (2.2, 3.0):
            path = write_spe(Path(tmp, f"v{version}.spe"), _cube().astype(np.uint16), version=version,
                             wavelengths=np.linspace(500, 560, 7))
            out[version] = path.read_bytes()
    return out


@FUZZ
@given(data=st.data())
def test_spe_fuzz(tmp_path, mutations, data):
    seed = spe_seeds()[data.draw(st.sampled_from((2.2, 3.0)), label="version")]
    (tmp_path / "x.spe").write_bytes(data.draw(mutations.binary(seed, hot=_SPE_FIELDS), label="file"))
    _loads_or_refuses(open_spe, tmp_path / "x.spe")


@FUZZ
@given(data=st.data())
def test_spe_xml_footer_fuzz(tmp_path, mutations, data):
    seed = spe_seeds()[3.0]
    body, xml = seed[:4100 + 6 * 5 * 7 * 2], seed[4100 + 6 * 5 * 7 * 2:]
    damaged = data.draw(mutations.text(xml.decode().replace("><", ">\n<"),
                                       values=("MonochromeUnsigned16", "MonochromeFloating64", "0", "-5", "1e3")),
                        label="footer")
    (tmp_path / "x.spe").write_bytes(body + damaged)
    _loads_or_refuses(open_spe, tmp_path / "x.spe")


@functools.cache
def mat_seeds() -> dict[str, bytes]:
    cube = _cube().astype(np.uint16)
    gt = (np.arange(30).reshape(6, 5) % 4).astype(np.uint8)
    seeds = {}
    for name, arrays, compress in (
        ("plain", {"scene": cube, "scene_gt": gt}, False),
        ("zipped", {"scene": cube, "scene_gt": gt}, True),
        ("unmixing", {"Y": cube.reshape(30, 7).T.astype(np.float64), "nRow": 6, "nCol": 5}, False),
    ):
        buf = io.BytesIO()
        scipy.io.savemat(buf, arrays, do_compression=compress)
        seeds[name] = buf.getvalue()
    return seeds


# the 128-byte header's version/endian marks, then the first data element's tag, array flags and dimensions
_MAT_FIELDS = (124, 126, 128, 132, 136, 140, 144, 148, 152, 156, 160, 164, 168, 172, 176, 180, 184)


@FUZZ
@given(data=st.data())
def test_mat_fuzz(tmp_path, mutations, data):
    seed = mat_seeds()[data.draw(st.sampled_from(("plain", "unmixing", "zipped")), label="seed")]
    (tmp_path / "x.mat").write_bytes(data.draw(mutations.binary(seed, hot=_MAT_FIELDS), label="file"))
    _loads_or_refuses(load_scene, tmp_path / "x.mat")


def test_fuzz_seeds_load(tmp_path):
    """The undamaged seeds load: the fuzzers start from working files."""
    (tmp_path / "s.hdr").write_text(envi_seed()[0])
    (tmp_path / "s.img").write_bytes(envi_seed()[1])
    np.testing.assert_array_equal(np.asarray(open_envi(tmp_path / "s.hdr").cube), _cube())
    for version, seed in spe_seeds().items():
        (tmp_path / f"{version}.spe").write_bytes(seed)
        assert open_spe(tmp_path / f"{version}.spe").shape == (6, 5, 7)
    for name, seed in mat_seeds().items():
        (tmp_path / f"{name}.mat").write_bytes(seed)
        assert load_scene(tmp_path / f"{name}.mat").shape[2] == 7


def test_mat_tag_that_crashed_scipy_is_refused(tmp_path):
    """Found by test_mat_fuzz: an unknown data-element type code made scipy's reader segfault (the process
    died); now the file is refused before scipy reads it."""
    import struct

    buf = bytearray(mat_seeds()["unmixing"])
    pos = 128 + 8  # inside the first miMATRIX: array flags, dimensions, name, then the data
    for _ in range(3):
        kind, size = struct.unpack_from("<II", buf, pos)
        pos += 8 if kind >> 16 else 8 + size + (-size % 8)
    struct.pack_into("<I", buf, pos, 65101)  # the data element's type: not a MATLAB type code
    (tmp_path / "bad.mat").write_bytes(bytes(buf))
    with pytest.raises(SceneFormatError, match=r"bad.mat is not a readable MATLAB .mat file: an element of unknown "
                                               r"type 65101 at byte 176"):
        load_scene(tmp_path / "bad.mat")


def test_spe_footer_with_an_unknown_encoding_is_refused(tmp_path):
    """Found by test_spe_xml_footer_fuzz (random run): encoding="ttf-8" made ElementTree raise LookupError."""
    (tmp_path / "x.spe").write_bytes(spe_seeds()[3.0].replace(b'encoding="utf-8"', b'encoding="ttf-8"'))
    with pytest.raises(SceneFormatError, match="SPE 3.0 footer is not well-formed XML: unknown encoding"):
        open_spe(tmp_path / "x.spe")
