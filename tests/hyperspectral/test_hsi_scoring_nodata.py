"""Scoring, no-data pixels and inputs: class ids that are not the model's 0..K-1, NaN pixels
left out with a mask, scikit-learn's 0-based (X, y) labels, evaluation on another scene, markers of
unpinned data set files, numpy n_components, 1-D patch labels."""

from __future__ import annotations

import numpy as np
import pytest

import zoo
from zoo.hyperspectral import BandStandardizer, HyperspectralPCA, PatchDataset, Scene, Split, valid_pixel_mask
from zoo.hyperspectral.evaluation import score_map
from zoo.hyperspectral.synthetic import make_scene


def _svm(**kw):
    return zoo.build("hsi-pca-svm", n_components=5, **kw)


# -- class ids --------------------------------------------------------------------------------------------
def test_default_blocks_split_scores_a_small_field_that_got_no_training_pixel():
    """Before: ValueError 'targets must lie in [0, 4)' under the default split="auto" (spatial blocks)."""
    s = make_scene(64, 64, 20, 4, seed=0)
    lab, cube = s.labels.copy(), np.asarray(s.cube).copy()
    lab[2:6, 2:6] = 5  # a field of a fifth class inside one 16x16 tile
    cube[2:6, 2:6] *= 1.5
    scene = Scene(cube, labels=lab, name="my-scene")
    svm = _svm()
    zoo.train(svm, scene)
    sp = svm.last_split_
    assert sp.info["split"] == "blocks" and not (sp.train & (lab == 5)).any() and (sp.test & (lab == 5)).any()
    m = zoo.evaluate(svm, scene)
    assert m["class_5_accuracy"] == 0.0  # never trained on: never predicted
    per_class = [m[f"class_{c}_accuracy"] for c in range(1, 6)]
    assert m["average_accuracy"] == pytest.approx(np.mean(per_class))
    assert m["n_test"] == int((sp.test & (lab > 0)).sum())


def test_gapped_class_ids_are_scored_and_reported_by_their_own_ids():
    s = make_scene(32, 32, 20, 4, seed=0)
    lab = s.labels.copy()
    lab[lab == 3] = 7  # ids 1, 2, 4, 7
    scene = Scene(s.cube, labels=lab, name="gapped")
    svm = _svm()
    zoo.train(svm, scene, split="random")
    m = zoo.evaluate(svm, scene)
    assert {k for k in m if k.startswith("class_")} == {f"class_{c}_accuracy" for c in (1, 2, 4, 7)}
    assert m["overall_accuracy"] > 0.9 and m["average_accuracy"] > 0.9  # absent ids 3, 5, 6 are not in AA


def test_a_one_pixel_class_of_a_random_split_is_trained_on_and_absent_from_the_scores():
    """A class of one pixel cannot be in both sets: it goes to training, with a warning (it went to the test set,
    unstratifying every other class: splits.random_split), and the scores name no class without test pixels."""
    s = make_scene(32, 32, 20, 4, seed=0)
    lab = s.labels.copy()
    lab[0, 0] = 5
    scene = Scene(s.cube, labels=lab, name="onepix")
    svm = _svm()
    with pytest.warns(UserWarning, match=r"class\(es\) \[5\] have one labelled pixel each: it goes to training"):
        zoo.train(svm, scene, split="random", seed=0)
    assert svm.last_split_.train[0, 0] and svm.last_split_.info["stratified"]
    m = zoo.evaluate(svm, scene)
    assert "class_5_accuracy" not in m and m["n_test"] == int(svm.last_split_.test.sum())


def test_score_map_sizes_the_confusion_matrix_by_class_id():
    labels = np.array([[1, 2, 7, 0]])
    pred = np.array([[1, 2, 2, 3]])
    s = score_map(pred, labels, np.ones_like(labels, bool), num_classes=3)
    assert s["confusion_matrix"].shape == (7, 7) and s["class_ids"] == list(range(1, 8))
    assert s["per_class_accuracy"][6] == 0.0 and s["per_class_accuracy"][2] is None  # id 3: no test pixel
    assert s["average_accuracy"] == pytest.approx(100 * 2 / 3)


def test_hybridsn_refuses_class_ids_beyond_its_outputs_naming_both():
    s = make_scene(20, 20, 16, 3, seed=1)
    lab = s.labels.copy()
    lab[0, :3] = 5
    net = zoo.build("hybridsn", n_bands=13, window=9, num_classes=3)
    with pytest.raises(ValueError, match=r"class id\(s\) \[5\], but this hybridsn has 3 outputs"), \
            pytest.warns(UserWarning, match="records no training pixels"):
        zoo.evaluate(net, Scene(s.cube, labels=lab), mask=lab > 0)


def test_hybridsn_training_checks_every_labelled_class_not_only_the_training_ones():
    s = make_scene(20, 20, 16, 3, seed=1)
    lab = s.labels.copy()
    lab[0, 0] = 4
    test = np.zeros(lab.shape, bool)
    test[0, 0] = True  # class 4 only in the test set
    split = Split((lab > 0) & ~test, test, "mine")
    net = zoo.build("hybridsn", n_bands=13, window=9, num_classes=3)
    with pytest.raises(ValueError, match="classes up to 4; the model was built with num_classes=3"):
        zoo.train(net, Scene(s.cube, labels=lab), split=split, epochs=1, progress=False)


# -- NaN / no-data pixels ---------------------------------------------------------------------------------
def _nan_cube():
    cube = np.random.default_rng(0).normal(size=(20, 20, 8)).astype(np.float32)
    cube[3, 4, 2] = np.nan
    return cube


@pytest.mark.parametrize("est", [HyperspectralPCA(n_components=3), BandStandardizer()], ids=lambda e: type(e).__name__)
def test_fit_with_valid_pixel_mask_leaves_nan_pixels_out(est):
    """Before: 'Input X contains NaN ... exclude those pixels with mask=valid_pixel_mask(...)' for exactly that."""
    cube = _nan_cube()
    valid = valid_pixel_mask(cube)
    fitted = type(est)(**est.get_params()).fit(cube, mask=valid)
    ref = type(est)(**est.get_params()).fit(cube[valid])
    np.testing.assert_allclose(fitted.mean_, ref.mean_)
    # (N, C) pixels with a mask over them: the same
    pixels = cube.reshape(-1, 8)
    np.testing.assert_allclose(type(est)(**est.get_params()).fit(pixels, mask=valid.reshape(-1)).mean_, ref.mean_)
    # a NaN pixel the mask keeps is still refused, and the error says which
    with pytest.raises(ValueError, match=r"NaN or infinity in 1 pixel \(at \(row, col\) \(3, 4\)\) of the pixels mask"):
        type(est)(**est.get_params()).fit(cube, mask=np.ones((20, 20), bool))


def test_pca_transform_with_a_mask_leaves_nan_pixels_out():
    cube = _nan_cube()
    valid = valid_pixel_mask(cube)
    pca = HyperspectralPCA(n_components=3).fit(cube, mask=valid)
    np.testing.assert_allclose(pca.transform(cube, mask=valid), pca.transform(cube[valid]))


def _scene_with_nodata_pixel(labelled: bool = False):
    s = make_scene(24, 24, 20, 3, seed=0)
    cube, lab = np.asarray(s.cube).copy(), s.labels.copy()
    r, c = 0, 5
    assert lab[r, c] > 0
    if not labelled:
        lab[r, c] = 0
    cube[r, c, :] = np.nan
    return Scene(cube, labels=lab, name="nan-nodata"), (r, c)


def test_svm_maps_a_nan_nodata_pixel_to_zero_with_a_warning():
    """Before: scikit-learn's raw 'Input X contains NaN' on zoo.predict of the scene."""
    scene, (r, c) = _scene_with_nodata_pixel()
    svm = _svm()
    zoo.train(svm, scene, split="random")
    with pytest.warns(UserWarning, match="1 of the 576 pixels to classify have no spectrum"):
        label_map = zoo.predict(svm, scene)
    assert label_map[r, c] == 0 and (np.delete(label_map.reshape(-1), r * 24 + c) > 0).all()


def test_training_refuses_labelled_nan_pixels_saying_where():
    scene, (r, c) = _scene_with_nodata_pixel(labelled=True)
    net = zoo.build("hybridsn", n_bands=13, window=9, num_classes=3)
    for model, kw in ((_svm(), {}), (net, {"epochs": 1, "progress": False})):
        with pytest.raises(ValueError, match=rf"1 pixel \(at \(row, col\) \({r}, {c}\)\) among the labelled pixels"):
            zoo.train(model, scene, split="random", **kw)


def test_evaluate_on_a_scene_with_labelled_nan_test_pixels_is_a_clear_error():
    scene, (r, c) = _scene_with_nodata_pixel(labelled=True)
    svm = _svm()
    zoo.train(svm, make_scene(24, 24, 20, 3, seed=0), split="random")
    with pytest.raises(ValueError, match=rf"\({r}, {c}\)\) among the test pixels of scene 'nan-nodata'"):
        zoo.evaluate(svm, scene)


def test_hybridsn_trains_beside_nan_nodata_pixels_and_maps_them_to_zero():
    """Before: training failed on the NaN of an unlabelled pixel (the scaler checked the whole cube)."""
    import torch

    torch.manual_seed(0)
    scene, (r, c) = _scene_with_nodata_pixel()
    net = zoo.build("hybridsn", n_bands=13, window=9, num_classes=3)
    zoo.train(net, scene, split="random", epochs=1, batch_size=64, progress=False)
    assert all(torch.isfinite(p).all() for p in net.parameters())
    reduced = net.reduce(scene)
    assert np.isfinite(reduced).all() and (reduced[r, c] == 0).all()  # the padding value
    for method in ("dense", "windows"):
        with pytest.warns(UserWarning, match="1 of the 576 pixels to classify have no spectrum"):
            label_map = net.predict_scene(scene, method=method, amp=None)
        assert label_map[r, c] == 0 and (np.delete(label_map.reshape(-1), r * 24 + c) > 0).all()


# -- (X, y) pixels: labels as they are ----------------------------------------------------------------------
def test_pixel_arrays_with_zero_based_labels_score_class_zero():
    """Before: class 0 was dropped as 'unlabelled' (512 of 576 pixels scored; an all-0 set gave nan)."""
    s = make_scene(24, 24, 20, 3, seed=0)
    X, y = s.pixels(s.labels > 0), s.labels[s.labels > 0] - 1
    svm = _svm()
    zoo.train(svm, (X, y))
    m = zoo.evaluate(svm, (X, y))
    assert m["n_test"] == len(y) == 576 and m["class_0_accuracy"] == 1.0
    zeros = zoo.evaluate(svm, (X[y == 0], y[y == 0]))
    assert zeros["n_test"] == 64 and zeros["overall_accuracy"] == 1.0
    wrong = zoo.evaluate(svm, (X[y == 0], np.full(64, 2)))  # every prediction wrong
    assert wrong["overall_accuracy"] == 0.0 and wrong["class_2_accuracy"] == 0.0


# -- which pixels an evaluation scores ----------------------------------------------------------------------
def test_evaluate_on_another_scene_scores_all_its_labelled_pixels():
    """Before: the training split's test mask was applied to any scene (a shape error, or the wrong pixels)."""
    A = make_scene(32, 32, 20, 3, seed=0)
    svm = _svm()
    zoo.train(svm, A, split="random")
    own = zoo.evaluate(svm, A)
    assert own["n_test"] == int(svm.last_split_.test.sum()) and "all_labelled_pixels" not in own
    for other in (make_scene(48, 40, 20, 3, seed=1), make_scene(32, 32, 20, 3, seed=2)):
        m = zoo.evaluate(svm, other)
        assert m["n_test"] == int((other.labels > 0).sum()) and m["all_labelled_pixels"] == 1.0
    with pytest.raises(ValueError, match=r"mask of shape \(32, 32\) does not match the 48x40 scene"):
        zoo.evaluate(svm, make_scene(48, 40, 20, 3, seed=1), mask=svm.last_split_.test)


def test_a_fit_on_pixel_arrays_forgets_the_previous_scene_split():
    """Before: the first training's test mask was scored although the (X, y) fit had trained on it."""
    A = make_scene(32, 32, 20, 3, seed=0)
    svm = _svm()
    zoo.train(svm, A, split="random")
    test = svm.last_split_.test
    zoo.train(svm, (A.pixels(test), A.labels[test]))
    with pytest.raises(ValueError, match="records no training split"):
        zoo.evaluate(svm, A)


# -- n_components ----------------------------------------------------------------------------------------
def test_n_components_accepts_numpy_numbers_and_refuses_one_point_zero_as_scikit_learn():
    cube = np.random.default_rng(0).normal(size=(10, 10, 6))
    assert HyperspectralPCA(np.float32(0.9)).fit(cube).n_components_ == HyperspectralPCA(0.9).fit(cube).n_components_
    assert HyperspectralPCA(np.int64(3)).fit(cube).n_components_ == 3
    assert HyperspectralPCA(3.0).fit(cube).n_components_ == 3  # zoo's config layer passes whole floats
    with pytest.raises(ValueError, match=r"variance fraction in \(0, 1\); got 1.0"):
        HyperspectralPCA(1.0).fit(cube)
    with pytest.raises(TypeError, match="n_components must be an int"):
        HyperspectralPCA(True).fit(cube)
    one = zoo.build("hsi-pca-svm", n_components=1)  # an int stays an int through the config: one component
    assert one.named_steps["pca"].n_components == 1 and isinstance(one.named_steps["pca"].n_components, int)


# -- PatchDataset ----------------------------------------------------------------------------------------
def test_patch_dataset_checks_1d_labels_against_the_coords():
    cube = np.zeros((5, 6, 2), np.float32)
    with pytest.raises(ValueError, match="expected 3, got 2"):
        PatchDataset(cube, [[0, 0], [1, 1], [2, 2]], np.array([1, 2]), window=3)
    with pytest.raises(ValueError, match=r"label map must be \(H, W\) = \(5, 6\)"):
        PatchDataset(cube, [[0, 0]], np.ones((4, 6), int), window=3)


# -- data set files that zoo does not pin ------------------------------------------------------------------
def test_unpinned_dataset_file_gets_a_marker_and_a_changed_file_is_refused(tmp_path, monkeypatch):
    import os

    from zoo.hub import HashMismatchError, verified
    from zoo.hub.fetch import sha256_file
    from zoo.hyperspectral import datasets
    from zoo.hyperspectral.datasets import DataFile, DatasetInfo

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    np.save(mirror / "cube.npy", np.arange(4 * 5 * 6, dtype=np.uint16).reshape(4, 5, 6))
    np.save(mirror / "gt.npy", (np.arange(20).reshape(4, 5) % 3).astype(np.uint8))
    info = DatasetInfo("toy_unpinned", (DataFile("cube.npy", "https://example.invalid/cube.npy", None, "cube"),
                                        DataFile("gt.npy", "https://example.invalid/gt.npy", None, "gt")),
                       license="test", citation="test")
    monkeypatch.setitem(datasets.DATASETS, "toy_unpinned", info)
    folder = datasets.fetch("toy_unpinned", allow_unverified=True, progress=False, base_url=str(mirror))
    cube = folder / "cube.npy"
    assert verified.recorded(cube) == sha256_file(cube)  # the promised record of the hash
    datasets.load_dataset("toy_unpinned")
    os.utime(cube, ns=(1, 1))  # touched, same bytes: hashed again, and loads
    datasets.load_dataset("toy_unpinned")
    arr = np.load(cube)
    arr[0, 0, 0] += 1
    np.save(cube, arr)  # same size, other bytes
    with pytest.raises(HashMismatchError, match="cube.npy changed since it was downloaded"):
        datasets.load_dataset("toy_unpinned")


def test_band_standardizer_refuses_nan_pixels_of_a_scene_instead_of_a_nan_mean():
    cube = _nan_cube()
    scene = Scene(cube)
    with pytest.raises(ValueError, match="1 of the pixels to fit on hold NaN/inf"):
        BandStandardizer().fit(scene)
    np.testing.assert_allclose(BandStandardizer().fit(scene, mask=valid_pixel_mask(scene)).mean_,
                               BandStandardizer().fit(cube[valid_pixel_mask(cube)]).mean_)


def test_a_cube_trained_with_a_labels_file_implies_the_class_count(tmp_path):
    """``zoo.train("hybridsn", "cube.npy", labels="gt.npy")`` builds a head for the labels' classes (3), not
    the paper's 16: the ground truth comes as a loop option, and the class count is inferred from it."""
    import numpy as np

    from zoo import registry

    rng = np.random.default_rng(0)
    np.save(tmp_path / "cube.npy", rng.random((12, 10, 8)).astype(np.float32))
    gt = np.zeros((12, 10), np.int64)
    gt[:4], gt[4:8], gt[8:] = 1, 2, 3
    np.save(tmp_path / "gt.npy", gt)
    inferred = registry.infer_config("hybridsn", str(tmp_path / "cube.npy"), labels=str(tmp_path / "gt.npy"))
    assert inferred == {"num_classes": 3}
