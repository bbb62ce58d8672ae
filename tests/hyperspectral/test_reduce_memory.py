"""HybridSN's reduce (and so predict/evaluate), valid_pixel_mask and Scene.pixels read one block of rows at a
time, and a sparse prediction only the rows its windows reach: turning the whole scene into float64 at once
takes ~8x the file in memory even for 100 pixels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import zoo
from zoo.hyperspectral import Scene, valid_pixel_mask
from zoo.hyperspectral.readers.envi import open_envi, save_envi
from zoo.hyperspectral.synthetic import make_scene


class RowReader:
    """An ``(H, W, C)`` cube that can be read by row slices only, as a file larger than memory would be:
    it records the rows of every read, and turning it into one whole array fails."""

    def __init__(self, cube: np.ndarray) -> None:
        self._cube = cube
        self.shape, self.ndim, self.dtype = cube.shape, cube.ndim, cube.dtype
        self.reads: list[tuple[int, int]] = []

    def __getitem__(self, key):
        if not isinstance(key, slice):
            raise TypeError(f"read by {key!r}, not by a slice of rows")
        start, stop, _ = key.indices(self.shape[0])
        self.reads.append((start, stop))
        return self._cube[key]

    def __array__(self, *args, **kwargs):
        raise AssertionError("the whole cube was read into one array")

    @property
    def largest(self) -> int:
        return max(stop - start for start, stop in self.reads)


def _model_and_cube(spectral_norm: str = "none", padding: str = "constant"):
    scene = make_scene(23, 31, 30, 4, block=6, noise=0.1, seed=2)
    torch.manual_seed(0)
    net = zoo.build("hybridsn", n_bands=15, num_classes=4, window=9, spectral_norm=spectral_norm,
                     padding=padding).eval()
    net.fit_preprocessor(scene, scene.labels > 0)
    cube = np.asarray(scene.cube, np.float32).copy()
    cube[5, 7, 3] = np.nan  # no spectrum: NaN in a band
    cube[11, 2] = -1.0  # no spectrum: the no-data value in every band
    return net, cube


def _whole_scene_reference(net, cube: np.ndarray) -> np.ndarray:
    """The preprocessing applied to the whole cube at once in float64 (what reduce computed before)."""
    P = cube.reshape(-1, cube.shape[2]).astype(np.float64)
    if net.unit_spectra:
        P = P / np.where((n := np.linalg.norm(P, axis=1, keepdims=True)) == 0, 1.0, n)
    d = {k: getattr(net, k).double().numpy() for k in ("pre_mean", "pre_scale", "pca_mean", "pca_components",
                                                       "pca_scale")}
    Z = ((P - d["pre_mean"]) / d["pre_scale"] - d["pca_mean"]) @ d["pca_components"].T * d["pca_scale"]
    Z[~valid_pixel_mask(cube, nodata=-1.0).reshape(-1)] = 0.0
    return Z.astype(np.float32).reshape(*cube.shape[:2], -1)


@pytest.mark.parametrize("spectral_norm", ["none", "l2"])
def test_reduce_reads_row_blocks_and_equals_the_whole_scene_result(spectral_norm):
    """Before: np.asarray(scene.cube) then one float64 copy (and three more temporaries) of all pixels."""
    net, cube = _model_and_cube(spectral_norm)
    reader = RowReader(cube)
    scene = Scene(reader, metadata={"data ignore value": "-1"})
    net.reduce_chunk_bytes = 4 * cube.shape[1] * cube.shape[2] * cube.itemsize  # 4 rows at a time
    reduced = net.reduce(scene)
    assert reduced.shape == (23, 31, 15) and reduced.dtype == np.float32
    assert reader.reads == [(0, 4), (4, 8), (8, 12), (12, 16), (16, 20), (20, 23)]  # one pass, 4 rows a read
    np.testing.assert_allclose(reduced, _whole_scene_reference(net, cube), rtol=1e-6, atol=1e-6)
    assert not reduced[5, 7].any() and not reduced[11, 2].any()  # no data reduces to the padding value
    np.testing.assert_array_equal(net.reduce(scene, rows=slice(6, 13)), reduced[6:13])


@pytest.mark.parametrize("padding", ["constant", "reflect"])
def test_sparse_prediction_reads_only_the_rows_its_windows_reach(padding):
    """A few pixels of a large scene: the windows path reduces the rows within window // 2 of them, and
    predicts what the whole scene's dense pass predicts there (at the scene's edge too, where the padding
    of the rows read must be the scene's)."""
    net, cube = _model_and_cube(padding=padding)
    reader = RowReader(cube)
    scene = Scene(reader, metadata={"data ignore value": "-1"})
    mask = np.zeros(cube.shape[:2], bool)
    mask[0, 4] = mask[5, 30] = True
    sparse = net.predict_scene(scene, mask=mask, method="windows", amp=None)
    assert max(stop for _, stop in reader.reads) <= 5 + 4 + 1  # rows 0..9: window 9 around rows 0 and 5
    with pytest.warns(UserWarning, match="2 of the 713 pixels to classify have no spectrum"):
        full = net.predict_scene(Scene(cube, metadata={"data ignore value": "-1"}), method="dense", amp=None)
    assert (sparse[mask] == full[mask]).all() and (sparse[~mask] == 0).all()
    reader.reads.clear()
    mask[:] = False
    assert not net.predict_scene(scene, mask=mask, amp=None).any()  # no pixel: nothing to read
    assert reader.reads == []


def test_valid_pixel_mask_reads_row_blocks(monkeypatch):
    """Before: np.isfinite of the whole cube, an (H, W, C) bool array beside it."""
    from zoo.hyperspectral import preprocessing

    _, cube = _model_and_cube()
    want = np.isfinite(cube).all(axis=2) & ~(cube == -1.0).all(axis=2)
    monkeypatch.setattr(preprocessing, "VALID_CHUNK_BYTES", 3 * cube.shape[1] * cube.shape[2] * cube.itemsize)
    reader = RowReader(cube)
    scene = Scene(reader, metadata={"data ignore value": "-1"})
    np.testing.assert_array_equal(valid_pixel_mask(scene), want)
    assert reader.largest == 3
    np.testing.assert_array_equal(valid_pixel_mask(scene, rows=slice(4, 12)), want[4:12])
    np.testing.assert_array_equal(valid_pixel_mask(cube, nodata=-1.0), want)  # a plain array as well


@pytest.mark.parametrize("interleave", ["bsq", "bil"])
def test_lazily_opened_file_is_reduced_and_read_block_by_block(tmp_path, interleave):
    """A file opened lazily is read through short-lived mappings of a few rows (``scene.layout``), never
    through its whole-file view: before, reduce and Scene.pixels reshaped that view, a copy of the cube."""
    net, cube = _model_and_cube()
    lazy = open_envi(save_envi(tmp_path / "s.hdr", cube, interleave=interleave, metadata={"data ignore value": -1}))
    scene = dataclasses.replace(lazy, cube=RowReader(lazy.cube))  # the whole-file view may not be read
    net.reduce_chunk_bytes = 5 * cube.shape[1] * cube.shape[2] * cube.itemsize
    np.testing.assert_allclose(net.reduce(scene), _whole_scene_reference(net, cube), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(scene.pixels(), cube.reshape(-1, cube.shape[2]))
    mask = np.zeros(cube.shape[:2], bool)
    mask[2, 3] = mask[9, 0] = mask[9, 30] = True
    np.testing.assert_array_equal(scene.pixels(mask), cube[mask])
    assert scene.pixels(np.zeros(cube.shape[:2], bool)).shape == (0, cube.shape[2])
    assert scene.cube.reads == []


def test_all_pixels_of_a_bip_file_are_a_view_of_it(tmp_path):
    """A BIP file is already (H*W, C) on disk: all its pixels are a view of the mapping, not a copy in memory."""
    _, cube = _model_and_cube()
    lazy = open_envi(save_envi(tmp_path / "s.hdr", cube, interleave="bip"))
    pixels = lazy.pixels()
    np.testing.assert_array_equal(pixels, cube.reshape(-1, cube.shape[2]))
    assert not pixels.flags.owndata  # a view of the mapping
