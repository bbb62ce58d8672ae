"""Hyperspectral export: HybridSN with its preprocessing in the graph classifies raw-band windows like
``predict_scene`` (borders included, through the stored pad pixel); the PCA+SVM pipeline through skl2onnx
labels pixels like scikit-learn; torch.export of the pipeline is refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest

import zoo
from zoo.exporting import ExportError, read_metadata

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def indian_pines():
    from zoo.hyperspectral import load_dataset

    try:
        return load_dataset("indian_pines")
    except FileNotFoundError as err:
        pytest.skip(f"Indian Pines not available: {err}")


def _raw_windows(cube: np.ndarray, pixels: np.ndarray, window: int, pad_pixel: np.ndarray) -> np.ndarray:
    r = window // 2
    h, w, c = cube.shape
    padded = np.broadcast_to(pad_pixel.astype(np.float32), (h + 2 * r, w + 2 * r, c)).copy()
    padded[r:r + h, r:r + w] = cube
    return np.stack([padded[i:i + window, j:j + window] for i, j in pixels])  # (B, w, w, C_raw)


def test_hybridsn_raw_windows_classify_like_predict_scene(tmp_path, indian_pines):
    model = zoo.build("hybridsn", weights="indian-pines").eval()
    res = zoo.export(model, tmp_path / "hybridsn.onnx")
    meta = read_metadata(res.path)
    assert res.max_abs_diff <= res.atol == 1e-4 and meta["windows"].startswith("(B, 25, 25, 200)")
    rng = np.random.default_rng(0)
    labelled = np.argwhere(indian_pines.labels > 0)
    pixels = np.concatenate([[[0, 0], [0, 77], [144, 144], [3, 140], [130, 2]],
                             labelled[rng.choice(len(labelled), 40, replace=False)]])
    windows = _raw_windows(np.asarray(indian_pines.cube, np.float32), pixels, 25, np.asarray(meta["pad_pixel"]))
    session = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"windows": windows})
    mask = np.zeros(indian_pines.labels.shape, bool)
    mask[pixels[:, 0], pixels[:, 1]] = True
    want = model.predict_scene(indian_pines, mask=mask)
    got = np.zeros_like(want)
    got[pixels[:, 0], pixels[:, 1]] = logits.argmax(1) + 1
    assert (got == want).all()


def test_hybridsn_without_preprocessing_exports_the_bare_network(tmp_path):
    model = zoo.build("hybridsn", n_bands=18, num_classes=3, window=9)
    with pytest.warns(UserWarning, match="no fitted preprocessing"):
        res = zoo.export(model, tmp_path / "bare", "torch.export")
    assert read_metadata(res.path)["pca_windows"] == "(B, 18, 9, 9) float32"


def test_pca_svm_labels_like_sklearn_and_refuses_torch_export(tmp_path, indian_pines):
    pipe = zoo.build("hsi-pca-svm", weights="indian-pines")
    res = zoo.export(pipe, tmp_path / "svm.onnx")
    assert res.atol == 1e-3 and read_metadata(res.path)["classes"] == list(range(1, 17))
    pixels = indian_pines.pixels(indian_pines.labels > 0)[::7].astype(np.float32)  # ~1,500 real pixels
    session = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"])
    label, scores = session.run(None, {"pixels": pixels})
    np.testing.assert_array_equal(label, pipe.predict(pixels))
    np.testing.assert_allclose(scores, pipe.decision_function(pixels), atol=1e-3, rtol=1e-4)
    with pytest.raises(ExportError, match="scikit-learn pipeline .* no torch graph"):
        zoo.export(pipe, tmp_path / "svm.pt2", "torch.export")


def test_hybridsn_with_unit_spectra_exports_the_normalisation_and_pads_with_zero_pixels(tmp_path):
    from zoo.hyperspectral.synthetic import make_scene

    scene = make_scene(20, 20, n_bands=24, n_classes=3, seed=0)
    model = zoo.build("hybridsn", n_bands=16, num_classes=3, window=9, spectral_norm="l2").eval()
    model.fit_preprocessor(scene, scene.labels > 0)
    res = zoo.export(model, tmp_path / "l2.onnx")
    pad = np.asarray(read_metadata(res.path)["pad_pixel"])
    assert res.max_abs_diff <= res.atol and not pad.any()  # an all-zero raw pixel reduces to zero
    pixels = np.array([[0, 0], [0, 19], [19, 7], [10, 10], [4, 15]])  # corners and borders: padding counts
    cube = np.asarray(scene.cube, np.float32)
    session = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"windows": _raw_windows(cube, pixels, 9, pad)})
    # zoo's own path: reduce the scene, pad the reduced cube with zeros, run the network on the windows
    reduced = np.pad(model.reduce(scene), ((4, 4), (4, 4), (0, 0)))
    windows = np.stack([reduced[i:i + 9, j:j + 9].transpose(2, 0, 1) for i, j in pixels])
    import torch

    with torch.no_grad():
        want = model(torch.from_numpy(windows)).numpy()
    np.testing.assert_allclose(logits, want, atol=1e-4, rtol=1e-4)


def test_pca_svm_on_two_classes_gives_sklearns_one_score_per_pixel(tmp_path):
    from zoo.hyperspectral.synthetic import make_scene

    scene = make_scene(16, 16, 12, 2, seed=1)
    pipe = zoo.build("hsi-pca-svm", n_components=4)
    zoo.train(pipe, scene, split="random")
    res = zoo.export(pipe, tmp_path / "svm2.onnx")
    assert read_metadata(res.path)["scores"].startswith("(B,) SVC decision_function: > 0 for class 2")
    pixels = scene.pixels(scene.labels > 0).astype(np.float32)
    label, scores = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"]).run(None, {"pixels": pixels})
    np.testing.assert_array_equal(label, pipe.predict(pixels))
    np.testing.assert_allclose(scores, pipe.decision_function(pixels), atol=1e-3, rtol=1e-4)  # (B,), not (B, 2)


def test_pca_svm_graph_labels_a_pixel_without_data_0_as_predicts_map(tmp_path):
    """A pixel with a NaN or infinite band got a class from the ONNX graph (from NaN scores) where zoo.predict's
    map gives it 0, with nothing in the export saying so."""
    from zoo.hyperspectral.synthetic import make_scene

    scene = make_scene(16, 16, 12, 3, seed=1)
    pipe = zoo.build("hsi-pca-svm", n_components=4)
    zoo.train(pipe, scene, split="random")
    res = zoo.export(pipe, tmp_path / "svm3.onnx")
    cube = np.asarray(scene.cube, np.float32).copy()
    cube[2, 3, 5], cube[4, 4, :], cube[7, 1, 0] = np.nan, np.nan, -np.inf
    with pytest.warns(UserWarning):  # the map's own word on the pixels without data
        expected = zoo.predict(pipe, cube)
    label, _ = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"]).run(
        None, {"pixels": cube.reshape(-1, 12)})
    np.testing.assert_array_equal(label.reshape(16, 16), expected)
    assert (label.reshape(16, 16)[[2, 4, 7], [3, 4, 1]] == 0).all()
    assert "0 for a pixel with a NaN/inf band" in read_metadata(res.path)["label"]
    assert read_metadata(res.path)["no_data_label"] == 0  # classes 1..K: the map's 0


def test_pca_svm_fitted_on_0_based_labels_labels_a_pixel_without_data_as_no_class(tmp_path):
    """Before: the ONNX graph labelled a pixel with a NaN/inf band 0 whatever the classes, so a pipeline fitted on
    0-based labels gave it the label of its real class 0, with no word in the export; it is -1 there, recorded
    as the metadata's no_data_label."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 12)) * 50 + 1000
    y = np.repeat([0, 1, 2], 30)
    X[y == 1, :3] += 80
    X[y == 2, 3:6] += 80
    pipe = zoo.build("hsi-pca-svm", n_components=5)
    zoo.train(pipe, (X, y))
    res = zoo.export(pipe, tmp_path / "svm0.onnx")
    pixels = np.stack([X[0], X[0]]).astype(np.float32)
    pixels[1, 5] = np.nan
    label, _ = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"]).run(None, {"pixels": pixels})
    assert label.tolist() == [pipe.predict(X[:1])[0], -1] and label[0] == 0
    meta = read_metadata(res.path)
    assert meta["classes"] == [0, 1, 2] and meta["no_data_label"] == -1 and "-1 for a pixel with a NaN" in meta["label"]


@pytest.mark.parametrize("padding", ["reflect", "constant"])
def test_hybridsn_borders_and_no_data_pixels_as_in_predict(tmp_path, padding):
    """The stored padding mode is the one to pad the raw cube with (pad_pixel only for constant), and a
    pixel without data reduces to zero as ``reduce`` maps it instead of making its neighbours' windows NaN."""
    from zoo.hyperspectral.patches import pad_cube
    from zoo.hyperspectral.synthetic import make_scene

    scene = make_scene(12, 12, n_bands=16, n_classes=3, seed=0)
    cube = np.asarray(scene.cube, np.float32).copy()
    cube[5, 6, 3] = np.nan  # one band missing: the whole pixel has no data
    model = zoo.build("hybridsn", n_bands=13, num_classes=3, window=9, padding=padding).eval()
    model.fit_preprocessor(scene, scene.labels > 0)
    res = zoo.export(model, tmp_path / "h.onnx")
    meta = read_metadata(res.path)
    assert meta["padding"] == padding and ("pad_pixel" in meta) == (padding == "constant")
    raw = np.pad(cube, ((4, 4), (4, 4), (0, 0)), mode=padding)
    if padding == "constant":
        raw[:4], raw[-4:], raw[:, :4], raw[:, -4:] = (np.asarray(meta["pad_pixel"], np.float32),) * 4
    pixels = [(0, 0), (11, 3), (5, 5), (6, 7), (4, 6)]  # corners, borders, and next to the no-data pixel
    windows = np.stack([raw[i:i + 9, j:j + 9] for i, j in pixels])
    (logits,) = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"]).run(None, {"windows": windows})
    reduced = pad_cube(model.reduce(cube), 4, padding)  # zoo.predict's path: reduce, pad, window
    want = np.stack([reduced[i:i + 9, j:j + 9].transpose(2, 0, 1) for i, j in pixels])
    import torch

    with torch.no_grad():
        np.testing.assert_allclose(logits, model(torch.from_numpy(want)).numpy(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(("dtype", "fmt"), [("float16", "onnx"), ("bfloat16", "torch.export")])
def test_a_half_or_bfloat16_hybridsn_reads_raw_bands_unrounded_and_labels_like_predict(tmp_path, dtype, fmt):
    """Before: the graph of a .half() / bfloat16 HybridSN took its raw windows in that dtype, so raw values in
    the thousands were rounded (steps of 4 / 32 above 4096) before the reduction that zoo.predict makes from the
    float32 cube: Indian Pines was labelled 98.3 % / 95.5 % as predict_scene of the same model labels it."""
    import torch

    from zoo.hyperspectral import Scene

    model = zoo.build("hybridsn", weights="indian-pines").eval()
    rng = np.random.default_rng(0)  # raw-like pixels: the fitted band means (990-7169 counts) + their spread
    cube = (model.pre_mean.numpy() + model.pre_scale.numpy() * rng.standard_normal((6, 6, 200))).astype(np.float32)
    model.to(getattr(torch, dtype))
    res = zoo.export(model, tmp_path / "h", fmt)
    assert res.verified and res.max_abs_diff <= res.atol == 8 * torch.finfo(getattr(torch, dtype)).eps
    meta = read_metadata(res)
    declared = meta["windows"].split(") ")[1].split()[0]  # the dtype the graph takes its raw bands in
    raw = np.broadcast_to(np.asarray(meta["pad_pixel"], np.float32), (30, 30, 200)).copy()
    raw[12:18, 12:18] = cube
    windows = torch.from_numpy(np.stack([raw[i:i + 25, j:j + 25] for i in range(6) for j in range(6)]))
    windows = windows.to(getattr(torch, declared))
    if fmt == "onnx":
        session = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"])
        (logits,) = session.run(None, {"windows": windows.numpy()})
    else:
        with torch.no_grad():
            logits = torch.export.load(str(res.path)).module()(windows).float().numpy()
    np.testing.assert_array_equal(logits.argmax(1).reshape(6, 6) + 1, model.predict_scene(Scene(cube), amp=None))
    assert declared == "float32"


def _tiny_fitted_hybridsn():
    from zoo.hyperspectral.synthetic import make_scene

    scene = make_scene(16, 16, n_bands=16, n_classes=3, seed=0)
    model = zoo.build("hybridsn", n_bands=13, num_classes=3, window=9).eval()
    model.fit_preprocessor(scene, scene.labels > 0)
    return model


def test_a_float64_hybridsn_to_onnx_is_an_export_error_with_the_fix(tmp_path):
    """Before: a .double() HybridSN keeps its fitted preprocessing in float32, the export took float32 for its
    dtype, and onnxruntime's refusal of the float64 convolutions came out raw ('NotImplemented: ... Could not
    find an implementation for Conv(11) node'), not the ExportError a float64 network is told its ways out in."""
    model = _tiny_fitted_hybridsn().double()
    with pytest.raises(ExportError, match=r"onnxruntime cannot run the float64 ONNX graph 'classifier'.*nothing was "
                                          r"written.*model\.float\(\).*format='torch\.export'.*verify=False"):
        zoo.export(model, tmp_path / "h64.onnx")
    assert list(tmp_path.iterdir()) == []


def test_a_head_replaced_by_hand_is_described_by_its_outputs():
    """Before: the metadata's logits took the config's num_classes, which ``model.classifier[-1] =
    nn.Linear(128, 5)`` leaves at 3: '(B, 3); class id = argmax + 1' for a graph of five logits."""
    from torch import nn

    from zoo.exporting.exporters import spec_for

    model = _tiny_fitted_hybridsn()
    assert spec_for(model, {}).metadata["logits"] == "(B, 3); class id = argmax + 1"
    model.classifier[-1] = nn.Linear(128, 5)
    assert spec_for(model, {}).metadata["logits"] == "(B, 5); class id = argmax + 1"
