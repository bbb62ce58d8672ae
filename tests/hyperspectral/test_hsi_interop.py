"""The hyperspectral estimators meet scikit-learn, pandas and torch as their stand-ins do: output feature names
and set_output, array-likes to zoo.predict, band checks of MinMaxNormalizer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import zoo
from zoo.hyperspectral import BandStandardizer, HyperspectralPCA, MinMaxNormalizer
from zoo.hyperspectral.serialize import estimator_state, restore_estimator
from zoo.hyperspectral.synthetic import make_scene

RNG = np.random.default_rng(0)
X = RNG.random((40, 20))
Y = (X[:, 0] > 0.5).astype(int) + 1


def _svm():
    return zoo.build("hsi-pca-svm", n_components=3)


# -- feature names and set_output -----------------------------------------------------------------------------
def test_steps_name_their_output_features_and_take_set_output():
    """Before: 'Unable to configure output for BandStandardizer()'; no get_feature_names_out on either step."""
    pipe = _svm().set_output(transform="default").fit(X, Y)
    assert pipe[:-1].get_feature_names_out().tolist() == ["pca0", "pca1", "pca2"]  # as scikit-learn's PCA
    assert BandStandardizer().fit(X).get_feature_names_out()[[0, 19]].tolist() == ["x0", "x19"]
    assert HyperspectralPCA(2).set_output(transform="default").fit(X).get_feature_names_out().tolist() == ["pca0", "pca1"]
    assert isinstance(pipe[:-1].transform(X), np.ndarray)


def test_set_output_pandas_gives_dataframes_and_the_model_saves(tmp_path):
    pd = pytest.importorskip("pandas")
    from zoo.hyperspectral.svm import load_pipeline

    frame = pd.DataFrame(X, columns=[f"b{i}" for i in range(20)])
    pipe = _svm().set_output(transform="pandas").fit(frame, Y)
    out = pipe[:-1].transform(frame)
    assert isinstance(out, pd.DataFrame) and out.columns.tolist() == ["pca0", "pca1", "pca2"]
    again = load_pipeline(pipe.save(tmp_path / "m.safetensors"))
    assert again.named_steps["scale"].feature_names_in_.tolist() == frame.columns.tolist()
    np.testing.assert_array_equal(again.predict(frame), pipe.predict(frame))


def test_feature_names_seen_in_fit_survive_the_weights_file():
    """Before: 'BandStandardizer.feature_names_in_: cannot store dtype object as a tensor' (a DataFrame's names)."""
    est = BandStandardizer().fit(X)
    est.feature_names_in_ = np.asarray([f"b{i}" for i in range(20)], dtype=object)
    tensors, plain = estimator_state(est, "scale")
    back = restore_estimator(BandStandardizer, tensors, plain, "scale")
    assert back.feature_names_in_.dtype == object and back.feature_names_in_.tolist() == est.feature_names_in_.tolist()
    np.testing.assert_array_equal(back.mean_, est.mean_)


def test_weights_of_another_scikit_learn_take_this_releases_parameters():
    """SVC weights written with scikit-learn 1.9 hold probability='deprecated' (its placeholder default); loaded
    into 1.7 (Python 3.10's newest) they kept it, and clone().fit failed "'probability' ... must be an instance
    of 'bool'"; a parameter added since the file was written failed get_params (an AttributeError)."""
    from sklearn.base import BaseEstimator, clone

    class Newer(BaseEstimator):  # this release's signature: probability=False, and a parameter the file lacks
        def __init__(self, probability=False, added=3, kept="deprecated"):
            self.probability, self.added, self.kept = probability, added, kept

        def fit(self, X, y=None):
            assert isinstance(self.probability, bool)
            return self

    plain = {"probability": {"value": "deprecated"}, "kept": {"value": "deprecated"}, "fitted_": {"value": 1}}
    back = restore_estimator(Newer, {}, plain, "svm")
    assert back.get_params() == {"probability": False, "added": 3, "kept": "deprecated"} and back.fitted_ == 1
    clone(back).fit(X)


# -- zoo.predict on array-likes -------------------------------------------------------------------------------
def test_predict_takes_pixels_as_lists_and_tensors():
    """Before: 'expected a Scene, a scene path, a data set name or an (H, W, C) cube; got list' (and Tensor)."""
    svm = _svm().fit(X, Y)
    want = svm.predict(X[:4])
    np.testing.assert_array_equal(zoo.predict(svm, X[:4].tolist()), want)
    np.testing.assert_array_equal(zoo.predict(svm, torch.tensor(X[:4])), want)
    assert zoo.predict(svm, torch.tensor(X[0])) == want[0]  # one spectrum
    cube = X[:4].reshape(2, 2, 20)
    np.testing.assert_array_equal(zoo.predict(svm, torch.tensor(cube)), zoo.predict(svm, cube))
    with pytest.raises(TypeError, match=r"expected \(N, C\) pixel spectra, one \(C,\) spectrum, a Scene"):
        zoo.predict(svm, {"spectra": X[:4]})
    with pytest.raises(ValueError, match=r"expected \(N, C\) pixel spectra.*shape \(1, 2, 2, 20\)"):
        zoo.predict(svm, cube[None])


def test_predict_takes_a_dataframe_of_pixels():
    pd = pytest.importorskip("pandas")
    svm = _svm().fit(X, Y)
    np.testing.assert_array_equal(zoo.predict(svm, pd.DataFrame(X[:4])), svm.predict(X[:4]))
    assert zoo.predict(svm, pd.Series(X[0])) == svm.predict(X[:1])[0]


def test_hybridsn_predicts_a_tensor_cube_and_names_its_window_for_pixels():
    scene = make_scene(12, 12, 20, 3, seed=0)
    net = zoo.build("hybridsn", n_bands=13, num_classes=3, window=9).eval()
    net.fit_preprocessor(scene, None)
    cube = np.asarray(scene.cube)
    np.testing.assert_array_equal(zoo.predict(net, torch.tensor(cube)), zoo.predict(net, cube))
    with pytest.raises(ValueError, match=r"9x9 window .* got list of shape \(2, 20\).*hsi-pca-svm"):
        zoo.predict(net, cube[0, :2].tolist())


# -- MinMaxNormalizer checks what it transforms ---------------------------------------------------------------
def test_minmax_refuses_another_band_count_and_nan():
    """Before: fitted on 20 bands, it transformed 5-band pixels without a word."""
    mm = MinMaxNormalizer().fit(X)
    with pytest.raises(ValueError, match="expecting 20 features"):
        mm.transform(X[:, :5])
    with pytest.raises(ValueError, match="expecting 20"):
        mm.transform(X[:, :5].reshape(2, 20, 5))
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MinMaxNormalizer().fit(bad)
    assert mm.transform(X).dtype == np.float64 and mm.transform(X.astype(np.float32)).dtype == np.float32


# -- (X, y) pixels as scikit-learn takes them --------------------------------------------------------------------
def test_train_and_evaluate_take_a_column_of_labels_as_scikit_learn_does():
    """``zoo.train(svm, (X, y[:, None]))`` compared (N,) predictions with the (N, 1) column: they broadcast to
    (N, N) and train_accuracy / best_metric read 0.23 where the pipeline's score was 0.88."""
    from sklearn.exceptions import DataConversionWarning

    svm = _svm()
    with pytest.warns(DataConversionWarning):
        result = zoo.train(svm, (X, Y[:, None]))
    assert result.best_metric == pytest.approx(svm.score(X, Y)) and result.history[0]["train_accuracy"] > 0.6
    with pytest.warns(DataConversionWarning):
        scored = zoo.evaluate(svm, (X, Y[:, None]))
    assert scored["accuracy"] == pytest.approx(svm.score(X, Y))
    with pytest.raises(ValueError, match="1d array"):
        zoo.train(_svm(), (X, np.stack([Y, Y], 1)))


def test_train_keeps_a_dataframes_column_names_so_predict_checks_them():
    """zoo.train turned a DataFrame into an array: the names were lost, so a frame with its columns in another
    order was classified as it came (37.5 % of Indian Pines predictions changed), where fit refuses it."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=[f"b{i}" for i in range(20)])
    svm = _svm()
    zoo.train(svm, (frame, Y))
    assert svm.named_steps["scale"].feature_names_in_.tolist() == frame.columns.tolist()
    with pytest.raises(ValueError, match="feature names"):
        zoo.predict(svm, frame[frame.columns[::-1]])
    assert zoo.evaluate(svm, (frame, Y))["accuracy"] == pytest.approx(svm.score(frame, Y))


def test_evaluate_on_a_cube_and_its_ground_truth_says_how_to_give_them():
    """``zoo.evaluate(svm, (cube, gt))`` warned that label 0 was the most frequent label and failed in SVC ('Found
    array with dim 3'), where zoo.train on the same pair says to pass labels=."""
    scene = make_scene(height=12, width=12, n_bands=20, n_classes=2, seed=0)
    svm = _svm().fit(X, Y)
    said = r"\(cube, ground truth\): pass the \(H, W, C\) cube as data and the \(H, W\) map as labels="
    with pytest.raises(TypeError, match=said):
        zoo.train(_svm(), (np.asarray(scene.cube), scene.labels))
    with pytest.raises(TypeError, match=said):
        zoo.evaluate(svm, (np.asarray(scene.cube), scene.labels))
