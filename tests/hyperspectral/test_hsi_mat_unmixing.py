""".mat scenes: ground truth that does not fit is an error (not silently dropped), empty/garbage files are
errors, and the unmixing layout (Samson / Jasper Ridge / Urban: Y bands x pixels + nRow/nCol, column-major)
with its abundance/endmember ground truth."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io

from zoo.hyperspectral.readers import SceneFormatError, load_scene, open_mat


def _cube(shape=(6, 5, 8), seed=0):
    return np.random.default_rng(seed).integers(0, 1000, size=shape).astype(np.uint16)


def test_ground_truth_of_the_wrong_shape_in_the_same_file_is_an_error(tmp_path):
    cube = _cube()
    scipy.io.savemat(tmp_path / "s.mat", {"cube": cube, "scene_gt": np.ones((5, 6), np.uint8)})
    with pytest.raises(SceneFormatError, match=r"scene_gt \(5, 6\) \(transposed\?\) does not match .* \(6, 5\)"):
        open_mat(tmp_path / "s.mat")


def test_ground_truth_file_of_the_wrong_shape_is_an_error(tmp_path):
    """Before: the labels were dropped silently and training later said 'has no labels'."""
    scipy.io.savemat(tmp_path / "c.mat", {"cube": _cube()})
    scipy.io.savemat(tmp_path / "g.mat", {"labels": np.ones((7, 5), np.uint8)})
    with pytest.raises(SceneFormatError, match=r"g.mat: no ground truth for a scene of \(H, W\) = \(6, 5\).*labels \(7, 5\)"):
        load_scene(tmp_path / "c.mat", gt=tmp_path / "g.mat")
    np.save(tmp_path / "c.npy", _cube())
    with pytest.raises(SceneFormatError, match=r"g.mat: no ground truth"):
        load_scene(tmp_path / "c.npy", gt=tmp_path / "g.mat")
    np.save(tmp_path / "g.npy", np.ones((5, 6), np.uint8))
    with pytest.raises(SceneFormatError, match=r"g.npy: ground truth has shape \(5, 6\) \(transposed\?\); the scene is"):
        load_scene(tmp_path / "c.npy", gt=tmp_path / "g.npy")


def test_real_ground_truth_of_another_scene_is_refused(shared_data):
    folder = shared_data / "hyperspectral"
    cube, other = folder / "indian_pines/Indian_pines_corrected.npy", folder / "ground_truth_only/paviaU_gt.mat"
    if not (cube.exists() and other.exists()):
        pytest.skip("Indian Pines cube or Pavia U ground truth not found")
    with pytest.raises(SceneFormatError, match=r"paviaU_gt \(610, 340\)"):
        load_scene(cube, gt=other)


@pytest.mark.parametrize("content", [b"", b"MATLAB 5.0 MAT-file" + b"\x00" * 20, b"\x00" * 200, b"garbage" * 30])
def test_empty_and_garbage_mat_files_are_errors(tmp_path, content):
    (tmp_path / "bad.mat").write_bytes(content)
    with pytest.raises(SceneFormatError, match="bad.mat"):
        load_scene(tmp_path / "bad.mat")
    if not content:
        with pytest.raises(SceneFormatError, match=r"empty \(0 bytes\)"):
            open_mat(tmp_path / "bad.mat")


def _unmixing(tmp_path, key="Y", rows=4, cols=5, bands=6, k=3, seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.random((bands, rows * cols))  # bands x pixels, pixels column-major as MATLAB's reshape
    A = rng.dirichlet(np.ones(k), size=rows * cols).T  # endmembers x pixels
    M = rng.random((bands, k))  # bands x endmembers
    scipy.io.savemat(tmp_path / "scene.mat", {key: Y, "nRow": rows, "nCol": cols, "nBand": bands, "maxValue": Y.max()})
    names = np.array(["Tree", "Water", "Soil"][:k], dtype=object)
    scipy.io.savemat(tmp_path / "end.mat", {"A": A, "M": M, "cood": names, "nEnd": k})
    return Y, A, M


@pytest.mark.parametrize("key", ["Y", "V"])  # Jasper Ridge / Urban name it Y, Samson V
def test_unmixing_layout_is_read_column_major(tmp_path, key):
    Y, A, M = _unmixing(tmp_path, key)
    scene = load_scene(tmp_path / "scene.mat")
    assert scene.shape == (4, 5, 6)
    by_hand = np.stack([Y[b].reshape(4, 5, order="F") for b in range(6)], axis=2)
    np.testing.assert_array_equal(scene.cube, by_hand)
    np.testing.assert_array_equal(scene.cube[1, 2], Y[:, 2 * 4 + 1])  # pixel (row 1, col 2) is column 2*nRow+1
    assert scene.labels is None and scene.metadata["n_row"] == 4
    with_gt = load_scene(tmp_path / "scene.mat", gt=tmp_path / "end.mat")
    ab = with_gt.metadata["abundances"]
    assert ab.shape == (4, 5, 3)
    np.testing.assert_array_equal(ab[:, :, 2], A[2].reshape(4, 5, order="F"))
    np.testing.assert_array_equal(with_gt.metadata["endmembers"], M.T)  # (K, C): one spectrum per row
    assert with_gt.metadata["endmember_names"] == ("Tree", "Water", "Soil")
    assert with_gt.labels is None  # abundances are not labels unless asked for
    labelled = load_scene(tmp_path / "scene.mat", gt=tmp_path / "end.mat", abundance_labels=True)
    np.testing.assert_array_equal(labelled.labels, A.argmax(0).reshape(4, 5, order="F") + 1)
    assert labelled.class_names == ("Tree", "Water", "Soil") and labelled.labels.min() >= 1


def test_unmixing_pixels_by_bands_and_abundance_errors(tmp_path):
    Y, A, _ = _unmixing(tmp_path)
    scipy.io.savemat(tmp_path / "t.mat", {"data": Y.T, "nRow": 4, "nCol": 5})  # pixels x bands
    np.testing.assert_array_equal(load_scene(tmp_path / "t.mat").cube, load_scene(tmp_path / "scene.mat").cube)
    with pytest.raises(SceneFormatError, match="holds no abundance matrix A"):
        load_scene(tmp_path / "scene.mat", abundance_labels=True)
    scipy.io.savemat(tmp_path / "badA.mat", {"A": A[:, :-1]})  # one pixel short
    with pytest.raises(SceneFormatError, match=r"badA.mat: no ground truth .*A \(3, 19\)"):
        load_scene(tmp_path / "scene.mat", gt=tmp_path / "badA.mat")
    scipy.io.savemat(tmp_path / "badM.mat", {"A": A, "M": np.ones((7, 3))})
    with pytest.raises(SceneFormatError, match=r"endmembers M have shape \(7, 3\); expected \(bands, 3\) = \(6, 3\)"):
        load_scene(tmp_path / "scene.mat", gt=tmp_path / "badM.mat")
    scipy.io.savemat(tmp_path / "noshape.mat", {"Y": Y})  # no nRow/nCol: not a scene
    with pytest.raises(SceneFormatError, match=r"noshape.mat: no 3-D \(H, W, C\) array and no unmixing layout"):
        load_scene(tmp_path / "noshape.mat")


def test_unmixing_abundances_for_a_3d_cube(tmp_path):
    """An abundance ground truth fits any scene whose pixel count it has (pixels column-major)."""
    _, A, _ = _unmixing(tmp_path)
    cube = np.random.default_rng(3).random((4, 5, 6)).astype(np.float32)
    np.save(tmp_path / "c.npy", cube)
    scene = load_scene(tmp_path / "c.npy", gt=tmp_path / "end.mat", abundance_labels=True)
    np.testing.assert_array_equal(scene.labels, A.argmax(0).reshape(4, 5, order="F") + 1)
