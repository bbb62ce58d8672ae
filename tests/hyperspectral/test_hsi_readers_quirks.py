"""Reader quirks of files written elsewhere: SPE regions of interest, hand-edited or Latin-1 ENVI headers, a
reflectance scale factor, types ENVI lacks, complex torch cubes."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest
import torch
from spectral.io import envi

from zoo.hyperspectral.readers import EnviWriter, load_scene, open_envi, save_envi
from zoo.hyperspectral.readers.errors import SceneFormatError
from zoo.hyperspectral.scene import Scene


def _spe_with_roi(path, sensor_wl: np.ndarray, x: int, width: int, binning: int) -> np.ndarray:
    """An SPE 3.0 file of 3 frames of a ``4 x width`` region read from sensor columns ``x ..`` (LightField's
    footer: a wavelength per sensor column, the region placed by its ``<SensorMapping>``); returns its data."""
    frames, height = 3, 4
    data = np.arange(frames * height * width, dtype="<u2").reshape(frames, height, width)
    fb = height * width * 2
    xml = (f'<?xml version="1.0" encoding="utf-8"?><SpeFormat version="3.0" '
           f'xmlns="http://www.princetoninstruments.com/spe/2009"><DataFormat><DataBlock type="Frame" '
           f'version="3.0" count="{frames}" pixelFormat="MonochromeUnsigned16" size="{fb}" stride="{fb}">'
           f'<DataBlock type="Region" count="1" width="{width}" height="{height}" size="{fb}" stride="{fb}" '
           f'calibrations="1,2"/></DataBlock></DataFormat><Calibrations><WavelengthMapping id="1">'
           f'<Wavelength xml:space="preserve">{",".join(f"{w:.3f}" for w in sensor_wl)}</Wavelength>'
           f'</WavelengthMapping><SensorInformation id="3" width="{sensor_wl.size}" height="100"/>'
           f'<SensorMapping id="2" x="{x}" y="0" width="{width * binning}" height="{height}" '
           f'xBinning="{binning}" yBinning="1"/></Calibrations></SpeFormat>').encode()
    head = bytearray(4100)
    struct.pack_into("<f", head, 1992, 3.0)
    struct.pack_into("<Q", head, 678, 4100 + data.nbytes)
    path.write_bytes(bytes(head) + data.tobytes() + xml)
    return data


@pytest.mark.parametrize("binning", [1, 2])
def test_spe30_region_wavelengths_are_its_own_sensor_columns(tmp_path, binning):
    """Before: ``wl[:width]``, the sensor's first columns (500-590 nm for a region at columns 25-34)."""
    sensor_wl = np.linspace(500.0, 890.0, 40)  # 10 nm per sensor column
    data = _spe_with_roi(tmp_path / "roi.spe", sensor_wl, x=5 if binning == 2 else 25, width=10, binning=binning)
    scene = load_scene(tmp_path / "roi.spe")
    np.testing.assert_array_equal(np.asarray(scene.cube), data)
    want = np.arange(750.0, 841.0, 10.0) if binning == 1 else 555.0 + 20.0 * np.arange(10)  # pairs' means
    np.testing.assert_allclose(scene.wavelengths, want)


def _envi_with(tmp_path, extra: str, cube: np.ndarray | None = None) -> tuple:
    cube = (np.arange(3 * 4 * 3).reshape(3, 4, 3) + 100).astype(np.float32) if cube is None else cube
    envi.save_image(str(tmp_path / "s.hdr"), cube, force=True)
    with open(tmp_path / "s.hdr", "a") as fh:
        fh.write(extra)
    return tmp_path / "s.hdr", cube


@pytest.mark.parametrize(("listed", "want"), [("{400, 500, 600,}", [400, 500, 600]), ("{}", None),
                                               ("{400, n/a, 600}", "warns")])
def test_a_malformed_optional_wavelength_list_leaves_the_scene_readable(tmp_path, listed, want):
    """Before: SceneFormatError "'wavelength' must be numbers" for the whole scene, which spectral reads."""
    hdr, cube = _envi_with(tmp_path, f"wavelength units = Nanometers\nwavelength = {listed}\n")
    if want == "warns":
        with pytest.warns(UserWarning, match=r"s\.hdr: 'wavelength' must be a list of numbers; got .*n/a"):
            scene = open_envi(hdr)
        assert scene.wavelengths is None
    else:
        scene = open_envi(hdr)
        assert scene.wavelengths is None if want is None else np.allclose(scene.wavelengths, want)
    np.testing.assert_array_equal(np.asarray(scene.cube), cube)


def test_a_reflectance_scale_factor_is_named_and_values_stay_as_stored(tmp_path):
    """Before: silently raw where spectral's load() divides; now raw (every access path alike) with a warning
    naming the factor and how to apply it."""
    stored = np.array([[[500, 3000, 4500]]], dtype=np.int16)
    hdr, _ = _envi_with(tmp_path, "reflectance scale factor = 10000\n", stored)
    with pytest.warns(UserWarning, match=r"'reflectance scale factor' = '10000'; zoo reads the values as stored.*"
                                         r"scene\.with_cube\(scene\.cube / 10000, scene\.wavelengths\)") as got:
        scene = open_envi(hdr)
    assert len(got) == 1
    np.testing.assert_array_equal(np.asarray(scene.cube), stored)
    np.testing.assert_array_equal(scene.pixels(), stored.reshape(1, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a factor of 1 changes nothing: no warning
        open_envi(_envi_with(tmp_path, "reflectance scale factor = 1.0\n", stored)[0])


def test_a_latin1_header_is_read_and_a_binary_one_still_refused(tmp_path):
    """Before: "appears to be a binary file" for ``wavelength units = \u00b5m`` saved as Latin-1."""
    hdr, cube = _envi_with(tmp_path, "")
    text = hdr.read_text() + "description = {caf\u00e9}\nwavelength units = \u00b5m\nwavelength = {0.45, 0.55, 0.65}\n"
    hdr.write_bytes(text.encode("latin-1"))
    scene = open_envi(hdr)
    np.testing.assert_allclose(scene.wavelengths, [450, 550, 650])
    np.testing.assert_array_equal(np.asarray(scene.cube), cube)
    hdr.write_bytes(b"ENVI\x00\x01\xff\xfe" * 16)
    with pytest.raises(SceneFormatError, match=r"s\.hdr is not a readable ENVI header: .*binary"):
        open_envi(hdr)


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.bool_])
def test_save_envi_of_a_type_envi_lacks_is_a_value_error_naming_the_types(tmp_path, dtype):
    """Before: spectral's EnviDataTypeError (no ValueError) from save_envi, a ValueError from EnviWriter."""
    cube = np.zeros((2, 3, 4), dtype=dtype)
    for write in (lambda: save_envi(tmp_path / "a.hdr", cube), lambda: EnviWriter(tmp_path / "b.hdr", cube.shape,
                                                                                   dtype)):
        with pytest.raises(ValueError, match=rf"ENVI has no data type for {np.dtype(dtype).name}; use one of "
                                             r".*float32"):
            write()
    assert list(tmp_path.iterdir()) == []


def test_a_complex_tensor_is_no_scene():
    """Before: accepted, and iter_row_chunks dropped the imaginary part with only a ComplexWarning."""
    with pytest.raises(ValueError, match=r"must hold real numbers; got dtype torch\.complex64"):
        Scene(cube=torch.ones(2, 3, 4, dtype=torch.complex64))
    assert Scene(cube=torch.ones(2, 3, 4, dtype=torch.bool)).shape == (2, 3, 4)  # NumPy's bool is a scene too
