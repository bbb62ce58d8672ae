"""What a user meets with scenes, labels and splits: a NaN band is named as a band to drop; (X, y) pixels
flattened with their unlabelled background warn; a split whose test set is a sliver of one class warns; saved weights of a disjoint split test the
pixels they were tested on after training."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zoo
from zoo.hyperspectral import Scene
from zoo.hyperspectral.synthetic import make_scene


def _svm(**kw):
    return zoo.build("hsi-pca-svm", n_components=5, **kw)


# -- a bad band -----------------------------------------------------------------------------------------------
def _scene_with_nan_bands(bands, extra_pixel=None):
    s = make_scene(24, 24, 20, 3, seed=0)
    cube = np.asarray(s.cube).astype(np.float64)
    cube[..., list(bands)] = np.nan
    if extra_pixel is not None:
        cube[extra_pixel + (0,)] = np.inf
    return Scene(cube, labels=s.labels, name="bad-band")


def test_training_on_a_cube_with_a_nan_band_names_the_band_to_drop():
    """Before: '576 pixels (at (row, col) (0, 0), ...) ... give them label 0 (unlabelled) or repair the cube'."""
    scene = _scene_with_nan_bands([7])
    net = zoo.build("hybridsn", n_bands=13, window=9, num_classes=3)
    for model, kw in ((_svm(), {}), (net, {"epochs": 1, "progress": False})):
        with pytest.raises(ValueError, match=r"band 7 \(0-based, of 20\) is NaN/inf in 576 of the 576 labelled pixels"
                                             r".*np\.setdiff1d\(np\.arange\(20\), \[7\]\)") as e:
            zoo.train(model, scene, split="random", **kw)
        assert "give them label 0" not in str(e.value)


def test_a_nan_band_and_a_bad_pixel_are_both_named():
    scene = _scene_with_nan_bands([4, 9], extra_pixel=(2, 3))
    with pytest.raises(ValueError, match=r"bands 4, 9 .* without them 1 pixel \(at \(row, col\) \(2, 3\)\) still holds"):
        zoo.train(_svm(), scene, split="random")


def test_scattered_nan_pixels_keep_the_pixel_error():
    s = make_scene(24, 24, 20, 3, seed=0)
    cube = np.asarray(s.cube).astype(np.float64)
    cube[0, 5, :] = np.nan
    with pytest.raises(ValueError, match=r"1 pixel \(at \(row, col\) \(0, 5\)\) among the labelled pixels") as e:
        zoo.train(_svm(), Scene(cube, labels=s.labels), split="random")
    assert "band" not in str(e.value).split("instead")[0]


def test_predicting_a_cube_with_a_nan_band_names_it_in_the_warning():
    svm = _svm()
    zoo.train(svm, make_scene(24, 24, 20, 3, seed=0), split="random")
    scene = _scene_with_nan_bands([3])
    with pytest.warns(UserWarning, match=r"576 of the 576 pixels to classify .* Band 3 \(0-based, of 20\) is NaN/inf"):
        assert (zoo.predict(svm, scene) == 0).all()


# -- (X, y) flattened from a scene, background included ------------------------------------------------------
def test_flattened_scene_pixels_with_background_warn_once_per_call():
    """Before: classes_ [0 1 2 3] and class_0_accuracy, without a word that 0 is a scene's unlabelled pixels."""
    s = make_scene(24, 24, 20, 3, seed=0)
    lab = s.labels.copy()
    lab[:, :14] = 0  # most pixels unlabelled, as in a real scene
    X, y = np.asarray(s.cube).reshape(-1, 20), lab.ravel()
    svm = _svm()
    for call in (lambda: zoo.train(svm, (X, y)), lambda: zoo.evaluate(svm, (X, y))):
        with pytest.warns(UserWarning, match=r"label 0 is the most frequent label of y \(336 of 576 pixels\).*"
                                             r"X\[y > 0\], y\[y > 0\]") as caught:
            call()
        assert len([w for w in caught if "most frequent" in str(w.message)]) == 1
        assert caught[0].filename == __file__
    assert 0 in svm.classes_  # still a class, as scikit-learn keeps it


@pytest.mark.parametrize("labels", ["zero_based", "binary"])
def test_ordinary_zero_based_labels_do_not_warn(labels):
    s = make_scene(24, 24, 20, 3, seed=0)
    X, y = s.pixels(s.labels > 0), s.labels[s.labels > 0] - 1  # 0 one class among three, not the majority
    if labels == "binary":
        y = (y == 2).astype(int)  # 0 the majority, but without it a single class: no background
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svm = _svm()
        zoo.train(svm, (X, y))
        zoo.evaluate(svm, (X, y))


def test_float_class_ids_of_pixels_are_named_as_a_scenes_ints():
    """Before: y of floats (read from MATLAB, a DataFrame) named its metrics class_1.0_accuracy, where the scene
    path says class_1_accuracy."""
    s = make_scene(24, 24, 20, 3, seed=0)
    X, y = s.pixels(s.labels > 0), s.labels[s.labels > 0].astype(np.float64)
    svm = _svm()
    zoo.train(svm, (X, y))
    assert {k for k in zoo.evaluate(svm, (X, y)) if k.startswith("class_")} == {f"class_{c}_accuracy" for c in (1, 2, 3)}


# -- a small scene's block split --------------------------------------------------------------------------------
def _small_scene():
    """Three classes in vertical stripes, 40x40: 16x16 tiles straddle them, and a training tile's guard band
    reaches most of the rest."""
    rng = np.random.default_rng(0)
    lab = np.repeat(np.arange(1, 4), 14)[:40][None, :].repeat(40, axis=0)
    cube = rng.normal(size=(40, 40, 12)) + lab[..., None] * 2.0
    return Scene(cube, labels=lab, name="small")


def test_a_block_split_whose_test_set_is_a_sliver_warns_with_the_counts():
    """Before: a 48x48 crop trained on 72 % of its pixels (train_fraction 0.3) and scored OA 1.0 on 27 test
    pixels of one class, without a word."""
    svm = _svm()
    # (48 test pixels of 1 class until 2026-12-07, when a tile taking a class far past its share stayed in test)
    with pytest.warns(UserWarning, match=r"split 'blocks' on scene 'small' \(40x40\): the test set holds 160 of the "
                                         r"1600 labelled pixels, of 3 classes \(1, 2, 3\), the training set 832 \(52 %, "
                                         r"train_fraction=0.3\) of 3 classes.*block=, now 16") as caught:
        zoo.train(svm, _small_scene())
    assert caught[0].filename == __file__
    assert len([w for w in caught if "split 'blocks'" in str(w.message)]) == 1


def test_a_split_with_a_test_set_of_every_class_does_not_warn():
    scene = make_scene(64, 64, 20, 4, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zoo.train(_svm(), scene, split="random")
        zoo.train(_svm(), scene, split="blocks", window=9)


# -- a disjoint split's test set after saving ---------------------------------------------------------------------
def _disjoint_scene():
    s = make_scene(32, 32, 20, 3, seed=0)
    mask = np.where(np.arange(32)[None, :] < 12, s.labels, 0)
    rows, cols = np.nonzero(mask)
    wrong = (rows[:5], cols[:5])
    mask[wrong] = mask[wrong] % 3 + 1  # mask pixels the ground truth labels otherwise: not trained on
    return s, mask, wrong


@pytest.mark.filterwarnings("ignore:split 'disjoint'")  # its test set lacks class 1: beside the point here
def test_saved_disjoint_weights_test_the_pixels_tested_after_training(tmp_path):
    """Before: reloaded weights took their training pixels for the mask, so the 5 mask pixels the ground truth
    disagrees with (in the training fields, not trained on) became test pixels: Indian Pines scored 4721 test
    pixels as a .npy scene and 4711 as "indian_pines", whose published mask the scene carries."""
    s, mask, wrong = _disjoint_scene()
    svm = _svm()
    zoo.train(svm, s, split="disjoint", train_mask=mask)
    assert not svm.training_record_.train_mask[wrong].any()
    fresh = zoo.evaluate(svm, s)["n_test"]
    assert fresh == int(((s.labels > 0) & (mask == 0)).sum())
    svm.save(tmp_path / "dis.safetensors")
    again = zoo.build("hsi-pca-svm", weights=str(tmp_path / "dis.safetensors"))
    assert zoo.evaluate(again, s)["n_test"] == fresh  # the scene carries no mask: the weights' own


def test_a_training_record_saved_without_the_given_mask_still_loads():
    from zoo.hyperspectral.provenance import TrainingRecord

    s, mask, _ = _disjoint_scene()
    train = (mask > 0) & (mask == s.labels)
    record = TrainingRecord.from_mask(s, train, {"split": "disjoint"}, mask)
    old = record.to_json()
    old.pop("given_mask_packbits")
    assert np.array_equal(TrainingRecord.from_json(old).split_mask, train)
    assert np.array_equal(TrainingRecord.from_json(record.to_json()).split_mask, mask > 0)


# -- a scikit-learn / spectral user's pass (2026-12-06) ---------------------------------------------------------
def test_a_binary_training_mask_of_0_and_255_selects_pixels_and_a_home_path_is_expanded(tmp_path, monkeypatch):
    """A 0/255 PNG (an image editor's binary mask) was read as class 255, mapped onto one ground-truth class and
    refused as 'hold only class 2 ... try another seed'; train_mask='~/m.npy' was 'not found: ~/m.npy'."""
    scene = make_scene(24, 24, 20, 3, seed=0)
    mask = np.zeros(scene.labels.shape, np.uint8)
    mask[:, :10] = 255  # the left strip: pixels of every class
    monkeypatch.setenv("HOME", str(tmp_path))
    np.save(tmp_path / "m.npy", mask)
    binary = _svm()
    zoo.train(binary, scene, split="disjoint", train_mask="~/m.npy")
    ones = _svm()
    zoo.train(ones, scene, split="disjoint", train_mask=(mask > 0).astype(np.uint8))
    assert binary.training_record_.n_train == ones.training_record_.n_train > 0
    np.testing.assert_array_equal(binary.predict_scene(scene), ones.predict_scene(scene))


def test_labels_as_a_tensor_or_lists_and_mask_with_pixels():
    """labels= as a torch tensor or nested lists (as the cube may be given) failed 'expected str, bytes or
    os.PathLike object, not Tensor'; mask= beside (N, C) pixels was dropped without a word."""
    import torch

    scene = make_scene(24, 24, 20, 3, seed=0)
    cube = np.asarray(scene.cube)
    svm = _svm()
    zoo.train(svm, cube, labels=torch.as_tensor(scene.labels), split="random")
    assert zoo.evaluate(svm, cube, labels=scene.labels.tolist()) == zoo.evaluate(svm, cube, labels=scene.labels)
    with pytest.raises(TypeError, match=r"labels= expected .* \(H, W\) array of class ids; got a Tensor of shape "
                                        r"\(2, 24, 24\)"):
        zoo.evaluate(svm, cube, labels=torch.zeros(2, 24, 24))
    with pytest.raises(ValueError, match=r"mask= selects pixels of a scene's \(H, W\) map; these are \(10, 20\)"):
        zoo.predict(svm, cube[0, :10], mask=np.ones(10, bool))


def test_hybridsn_refuses_an_even_window_and_an_unknown_padding_when_built():
    """Both built and failed only inside zoo.train, after the PCA fit; n_components=None (keep every component,
    as HyperspectralPCA documents it) was refused by hsi-pca-svm's config as 'expects int | float'."""
    with pytest.raises(ValueError, match="must be odd; got window=12"):
        zoo.build("hybridsn", window=12)
    with pytest.raises(ValueError, match=r"padding must be one of \('reflect', 'symmetric', 'edge', 'constant'\); "
                                         r"got 'zeros'"):
        zoo.build("hybridsn", padding="zeros")
    assert zoo.build("hybridsn", padding="edge").padding == "edge"
    svm = zoo.build("hsi-pca-svm", n_components=None)
    X = np.random.default_rng(0).random((30, 8))
    assert svm.fit(X, (X[:, 0] > 0.5) + 1).named_steps["pca"].n_components_ == 8


def test_string_labels_save_and_a_scene_map_of_them_is_refused_naming_the_fix(tmp_path):
    """An SVM fitted on scikit-learn's usual '<U' string labels failed zoo.save ('SVC.classes_: cannot store dtype
    <U3 as a tensor') and a scene's map ('invalid literal for int()'); a class 0 was 0 of the map's unlabelled too."""
    X = np.random.default_rng(0).random((40, 12))
    svm = _svm().fit(X, np.where(X[:, 0] > 0.5, "c2", "c1"))
    again = zoo.build("hsi-pca-svm", weights=zoo.save(svm, tmp_path / "s.safetensors"))
    assert again.classes_and_names().tolist() == ["c1", "c2"]
    np.testing.assert_array_equal(again.predict(X), svm.predict(X))
    with pytest.raises(ValueError, match=r"fitted on labels \['c1', 'c2'\]: a scene's label map holds integer"):
        zoo.predict(again, X.reshape(4, 10, 12))
    zero_based = _svm().fit(X, (X[:, 0] > 0.5).astype(int))
    with pytest.warns(UserWarning, match="has a class 0"):
        zoo.predict(zero_based, X.reshape(4, 10, 12))


def test_saving_a_pipeline_with_a_step_its_file_cannot_hold_is_refused_at_save():
    """set_params(scale=StandardScaler()) saved a file the load refused ('unknown pipeline step class'); 'passthrough'
    failed 'vars() argument must have __dict__ attribute'."""
    from sklearn.preprocessing import StandardScaler

    X = np.random.default_rng(0).random((40, 12))
    y = (X[:, 0] > 0.5) + 1
    for step in (StandardScaler(), "passthrough"):
        svm = _svm().set_params(scale=step).fit(X, y)
        with pytest.raises(ValueError, match=r"step 'scale' is .*: an hsi-pca-svm file holds the steps it loads "
                                             r"\(BandStandardizer, HyperspectralPCA, SVC\)"):
            svm.export_state_dict()


def test_hybridsn_on_fewer_training_pixels_than_its_bands_names_n_bands():
    """HyperspectralPCA's refusal of more components than pixels told a HybridSN user to give 'a smaller
    n_components, a variance fraction such as 0.99': HybridSN's setting is n_bands, an int."""
    scene = make_scene(24, 24, 40, 3, seed=0)
    mask = np.zeros(scene.labels.shape, np.uint8)
    mask[tuple(np.argwhere(scene.labels > 0)[:20].T)] = 1
    net = zoo.build("hybridsn", n_bands=30, window=9, num_classes=3)
    with pytest.raises(ValueError, match=r"20 training pixels cannot give the 30 PCA components HybridSN reduces a "
                                         r"scene to \(n_bands=30\): train on more pixels, or build it with n_bands <= 20"):
        zoo.train(net, scene, split="disjoint", train_mask=mask, epochs=1, progress=False)


def test_a_spectrum_typed_as_text_is_no_scene_not_an_os_error():
    """zoo.predict(svm, '1,1,...,1') (a spectrum typed on the command line) failed 'OSError: [Errno 36] File name
    too long' from the check whether it names a file."""
    with pytest.raises(FileNotFoundError, match="is neither a scene file nor a known data set"):
        zoo.predict(_svm(), ",".join(["1"] * 200))


def test_whole_number_float_labels_make_a_map_and_string_labels_are_refused_by_the_export(tmp_path):
    """9f9ce80 refused the map of an SVM fitted on 1.0 / 2.0 (labels read from a .mat file or a DataFrame), which
    worked before; the export of one fitted on strings failed int()'s 'invalid literal'."""
    pytest.importorskip("skl2onnx")
    from zoo.exporting import ExportError

    X = np.random.default_rng(0).random((40, 12))
    floats = _svm().fit(X, np.where(X[:, 0] > 0.5, 2.0, 1.0))
    assert set(np.unique(zoo.predict(floats, X.reshape(4, 10, 12))).tolist()) <= {1, 2}
    strings = _svm().fit(X, np.where(X[:, 0] > 0.5, "c2", "c1"))
    with pytest.raises(ExportError, match=r"fitted on labels \['c1', 'c2'\]: the ONNX graph gives int64 class ids"):
        zoo.export(strings, tmp_path / "s.onnx")


def test_the_pipelines_fit_and_predict_on_a_cube_point_to_the_scene_methods():
    """Before: the scaler and the PCA took the cube (fit fitted both) and then the SVM said "Found array with dim
    3, while dim <= 2 is required by SVC", naming neither the pixels it wants nor predict_scene."""
    s = make_scene(16, 16, 12, 3, seed=1)
    pixels, labels = s.cube[s.labels > 0], s.labels[s.labels > 0]
    fresh = _svm()
    with pytest.raises(ValueError, match=r"HSIPipeline.fit takes \(N, C\) pixel spectra; got an \(H, W, C\) cube"):
        fresh.fit(s.cube, s.labels)
    assert not hasattr(fresh.named_steps["pca"], "components_")  # nothing was fitted on the way to the error
    model = _svm().fit(pixels, labels)
    for cube in (s.cube, s):
        with pytest.raises(ValueError, match=r"HSIPipeline.predict takes \(N, C\) pixel spectra.*predict_scene"):
            model.predict(cube)
    np.testing.assert_array_equal(model.predict(pixels), model.predict_scene(s)[s.labels > 0])
