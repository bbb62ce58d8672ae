"""Inputs the scene readers once misreported: label ids beyond int64 (a float raster's nodata FLT_MAX,
uint64's 2**64 - 1) wrapped round to a negative id, a .mat scene's own ground truth skipped the label-map
checks, a MATLAB sparse ground truth was dropped unseen, a complex .mat cube was "no numeric arrays", an
empty .npy cube named no file, a folder was called ENVI data without a header, an ENVI label map's
``data ignore value`` was read as a class."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.io
import scipy.sparse
from PIL import Image

from zoo.hyperspectral.readers import load_scene, save_envi
from zoo.hyperspectral.readers.errors import SceneFormatError

_FLT_MAX = np.finfo(np.float32).max


@pytest.fixture
def cube() -> np.ndarray:
    return np.random.default_rng(0).random((4, 5, 3)).astype(np.float32)


def _gt(value, dtype) -> np.ndarray:
    gt = np.ones((4, 5), dtype)
    gt[0, 0] = value
    return gt


def test_a_float_label_image_holding_flt_max_is_refused_with_that_value(tmp_path, cube):
    np.save(tmp_path / "cube.npy", cube)
    Image.fromarray(_gt(_FLT_MAX, np.float32), mode="F").save(tmp_path / "gt.tif")
    with pytest.raises(SceneFormatError, match=r"gt\.tif: ground truth holds the value 3\.40*2\d*e\+38, no class id"):
        load_scene(tmp_path / "cube.npy", gt=tmp_path / "gt.tif")


def test_a_uint64_envi_label_map_holding_its_maximum_is_refused_not_read_as_minus_one(tmp_path, cube):
    np.save(tmp_path / "cube.npy", cube)
    hdr = save_envi(tmp_path / "gt.hdr", _gt(np.iinfo(np.uint64).max, np.uint64)[:, :, None])
    with pytest.raises(SceneFormatError, match=r"gt\.hdr: ground truth holds the value 18446744073709551615"):
        load_scene(tmp_path / "cube.npy", gt=hdr)
    largest = np.iinfo(np.int64).max  # the largest id int64 holds is still one
    hdr = save_envi(tmp_path / "gt.hdr", _gt(largest, np.uint64)[:, :, None])
    assert load_scene(tmp_path / "cube.npy", gt=hdr).labels[0, 0] == largest


@pytest.mark.parametrize("gt_key", [None, "gt"])
def test_a_mat_scenes_own_ground_truth_is_checked_as_a_ground_truth_files(tmp_path, cube, gt_key):
    scipy.io.savemat(tmp_path / "s.mat", {"cube": cube, "gt": _gt(_FLT_MAX, np.float32)})
    with pytest.raises(SceneFormatError, match=r"s\.mat: ground truth 'gt' holds the value 3\.4"):
        load_scene(tmp_path / "s.mat", gt_key=gt_key)


def test_negative_ids_named_by_gt_key_in_the_scenes_own_mat_name_the_file(tmp_path, cube):
    scipy.io.savemat(tmp_path / "s.mat", {"cube": cube, "classes": _gt(-1, np.int16)})
    with pytest.raises(SceneFormatError, match=r"s\.mat: ground truth 'classes' must be >= 0 .*found -1"):
        load_scene(tmp_path / "s.mat", gt_key="classes")


@pytest.mark.parametrize("beside_cube", [True, False])
def test_a_sparse_mat_ground_truth_is_read_as_the_label_map_it_is(tmp_path, cube, beside_cube):
    labels = np.zeros((4, 5))
    labels[1, 2], labels[3, 4] = 3, 1
    gt = scipy.sparse.csc_matrix(labels)  # MATLAB's sparse(gt), as scipy reads it back
    if beside_cube:
        scipy.io.savemat(tmp_path / "s.mat", {"cube": cube, "gt": gt})
        scene = load_scene(tmp_path / "s.mat")
    else:
        np.save(tmp_path / "cube.npy", cube)
        scipy.io.savemat(tmp_path / "gt.mat", {"gt": gt})
        scene = load_scene(tmp_path / "cube.npy", gt=tmp_path / "gt.mat")
    np.testing.assert_array_equal(scene.labels, labels.astype(np.int64))


def test_a_complex_mat_cube_is_named_with_what_it_holds(tmp_path, cube):
    scipy.io.savemat(tmp_path / "s.mat", {"cube": cube + 1j * cube, "meta": {"sensor": "x"}})
    with pytest.raises(SceneFormatError, match=r"no 3-D .*not read: cube \(4, 5, 3\) complex64: complex numbers "
                                               r".*np\.abs.*meta \(1, 1\) struct"):
        load_scene(tmp_path / "s.mat")
    with pytest.raises(SceneFormatError, match=r"cube_key='cube' is no cube of real numbers: \(4, 5, 3\) complex64"):
        load_scene(tmp_path / "s.mat", cube_key="cube")
    scipy.io.savemat(tmp_path / "s.mat", {"cube": cube, "phase": cube[:, :, :1] * 1j})  # beside a real cube
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scene = load_scene(tmp_path / "s.mat", ground_truth=False)
    np.testing.assert_array_equal(scene.cube, cube)


def test_an_empty_npy_cube_names_its_file(tmp_path):
    np.save(tmp_path / "empty.npy", np.zeros((0, 5, 3), np.float32))
    with pytest.raises(SceneFormatError, match=r"empty\.npy: expected an \(H, W, C\) cube, got the empty array "
                                               r"of shape \(0, 5, 3\)"):
        load_scene(tmp_path / "empty.npy")


def test_a_folder_given_as_the_scene_or_its_ground_truth_is_called_a_folder(tmp_path, cube):
    folder = tmp_path / "indian_pines"  # no extension: it was taken for ENVI data without its header
    folder.mkdir()
    np.save(folder / "indian_pines.npy", cube)
    with pytest.raises(SceneFormatError, match=r"indian_pines is a folder, not a scene file: give one of its files "
                                               r"\(indian_pines\.npy\)"):
        load_scene(folder)
    with pytest.raises(SceneFormatError, match=r"indian_pines: the ground truth is a folder, not a file"):
        load_scene(folder / "indian_pines.npy", gt=folder)


def _v73(path, cube: np.ndarray, **extra) -> None:
    """A MATLAB v7.3 file as MATLAB lays one out: HDF5 behind a 512-byte text header, arrays column-major."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w", userblock_size=512) as f:
        if np.iscomplexobj(cube):  # MATLAB's complex: a compound of real and imag
            pair = np.empty(cube.T.shape, [("real", "<f4"), ("imag", "<f4")])
            pair["real"], pair["imag"] = cube.T.real, cube.T.imag
            f["cube"] = pair
        else:
            f["cube"] = cube.T
        for key, dense in extra.items():  # MATLAB's sparse: CSC arrays in a group, the row count an attribute
            csc = scipy.sparse.csc_matrix(dense)
            g = f.create_group(key)
            g.attrs["MATLAB_class"], g.attrs["MATLAB_sparse"] = np.bytes_("double"), np.uint64(dense.shape[0])
            g["data"], g["ir"], g["jc"] = csc.data, csc.indices.astype(np.uint64), csc.indptr.astype(np.uint64)
    with open(path, "r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, HDF5 schema 1.00 .".ljust(116))


def test_a_v73_sparse_ground_truth_and_complex_cube_as_the_v5_ones(tmp_path, cube):
    labels = np.zeros((4, 5))
    labels[1, 2], labels[3, 4] = 3, 1
    _v73(tmp_path / "s.mat", cube, gt=labels)
    np.testing.assert_array_equal(load_scene(tmp_path / "s.mat").labels, labels.astype(np.int64))
    _v73(tmp_path / "c.mat", cube + 1j * cube)
    with pytest.raises(SceneFormatError, match=r"not read: cube \(4, 5, 3\) complex64: complex numbers"):
        load_scene(tmp_path / "c.mat")


@pytest.mark.parametrize(("dtype", "nodata"), [(np.uint8, 255), (np.int16, -1), (np.float32, -9999.0)])
def test_an_envi_label_maps_data_ignore_value_marks_unlabelled_pixels(tmp_path, cube, dtype, nodata):
    np.save(tmp_path / "cube.npy", cube)
    gt = np.ones((4, 5, 1), dtype)
    gt[0, :2], gt[3, 3:] = 2, nodata  # 255 was class 255 (255 classes); -1 and -9999 refused as negative ids
    hdr = save_envi(tmp_path / "gt.hdr", gt, metadata={"data ignore value": nodata})
    scene = load_scene(tmp_path / "cube.npy", gt=hdr)
    expected = np.where(gt[:, :, 0] == nodata, 0, gt[:, :, 0]).astype(np.int64)
    np.testing.assert_array_equal(scene.labels, expected)
    assert scene.n_classes == 2
