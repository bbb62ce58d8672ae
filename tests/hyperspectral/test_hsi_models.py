"""hybridsn and hsi-pca-svm: shapes, a short training that learns a generated scene, one-file save/load."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo
from zoo.api import Trainable
from zoo.hyperspectral import HSIPipeline, load_pipeline
from zoo.hyperspectral.synthetic import make_scene


def test_hybridsn_forward_shapes():
    net = zoo.build("hybridsn")
    assert (net.config.n_bands, net.config.num_classes, net.config.window) == (30, 16, 25)
    net.eval()
    with torch.no_grad():
        assert tuple(net(torch.randn(2, 1, 30, 25, 25)).shape) == (2, 16)
        assert tuple(net(torch.randn(3, 30, 25, 25)).shape) == (3, 16)  # channel dim added
    small = zoo.build("hybridsn", n_bands=15, num_classes=5, window=11)
    assert tuple(small(torch.randn(4, 1, 15, 11, 11)).shape) == (4, 5)
    # paper Fig. 1 sizes: 3-D maps (8, 24, 23, 23) -> (16, 20, 21, 21) -> (32, 18, 19, 19); 576 channels to 2-D
    x = net.conv3d(torch.randn(1, 1, 30, 25, 25))
    assert tuple(x.shape) == (1, 32, 18, 19, 19) and net.conv2d[0].in_channels == 576
    with pytest.raises(ValueError, match="expects input"):
        net(torch.randn(1, 1, 20, 25, 25))
    with pytest.raises(ValueError, match="n_bands >= 13"):
        zoo.build("hybridsn", n_bands=10)
    assert isinstance(net, Trainable)


def test_hybridsn_learns_generated_scene_and_saves_as_one_file(tmp_path):
    scene = make_scene(40, 40, 30, 4, block=8, noise=0.05, seed=3)
    # the weights are drawn when the network is built, before zoo.train's seed: from the global generator, which
    # the tests run before this one leave in any state (one of eight draws scored 0.825-0.881 here, the others
    # 0.96-0.99, in either memory layout)
    torch.manual_seed(0)
    net = zoo.build("hybridsn", n_bands=15, num_classes=4, window=9)
    result = zoo.train(net, scene, split="random", train_fraction=0.3, epochs=6, batch_size=32, lr=2e-3,
                       progress=False, seed=0)
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < 0.5 * losses[0]
    metrics = zoo.evaluate(net, scene)  # the test pixels of the training split
    assert metrics["overall_accuracy"] > 0.85  # fractions, as every zoo metric
    assert set(metrics) >= {"overall_accuracy", "average_accuracy", "kappa", "accuracy"}
    # scaler + PCA + network in one safetensors file; loads through zoo.build(weights=path)
    path = net.save(tmp_path / "hsn.safetensors", network_dtype=torch.float16)
    again = zoo.build("hybridsn", weights=str(path), n_bands=15, num_classes=4, window=9)
    assert again.has_preprocessor and again.pca_components.dtype == torch.float32
    np.testing.assert_allclose(again.reduce(scene), net.reduce(scene), rtol=1e-6, atol=1e-5)
    same = (again.predict_scene(scene, mask=net.last_split_.test) == net.predict_scene(scene, mask=net.last_split_.test))
    assert same.mean() > 0.98  # fp16 storage of the network only
    with pytest.raises(ValueError, match="no fitted preprocessing"):
        zoo.build("hybridsn", n_bands=15, num_classes=4, window=9).predict_scene(scene)


def test_pca_svm_pipeline_trainable_and_safetensors_round_trip(tmp_path):
    scene = make_scene(40, 40, 30, 4, seed=4)
    svm = zoo.build("hsi-pca-svm", n_components=8)
    assert isinstance(svm, HSIPipeline) and isinstance(svm, Trainable)
    res = zoo.train(svm, scene, split="random", train_fraction=0.3)
    assert res.history[0]["n_train"] == svm.last_split_.train.sum()
    m = zoo.evaluate(svm, scene)
    assert m["overall_accuracy"] > 0.90
    path = svm.save(tmp_path / "svm.safetensors")
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:  # tensors only: nothing to unpickle
        assert {"svm.support_vectors_", "__meta__"} <= set(f.keys())
    loaded = zoo.build("hsi-pca-svm", weights=str(path))
    X = scene.pixels()
    np.testing.assert_array_equal(loaded.predict(X), svm.predict(X))
    np.testing.assert_allclose(loaded.decision_function(X[:50]), svm.decision_function(X[:50]), rtol=1e-10)
    assert zoo.evaluate(loaded, scene, split="random", train_fraction=0.3) == pytest.approx(m)
    # plain (X, y) pixels work too, as for any estimator
    y = scene.labels.reshape(-1)
    keep = y > 0
    svm2 = zoo.build("hsi-pca-svm", n_components=5)
    zoo.train(svm2, (X[keep][::3], y[keep][::3]))
    assert zoo.evaluate(svm2, (X[keep], y[keep]))["overall_accuracy"] > 0.85
    with pytest.raises(ValueError, match="__meta__"):
        load_pipeline({"x": torch.zeros(1)})


def _blas_threads() -> set[int]:
    """BLAS's thread count (one value per BLAS library loaded)."""
    from threadpoolctl import threadpool_info

    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


@pytest.fixture
def blas_on_two_threads():
    """BLAS on 2 threads, so that a shared-out prediction's one can be told apart; put back afterwards."""
    from threadpoolctl import threadpool_limits

    blas = threadpool_limits(limits=2, user_api="blas")
    yield
    blas.restore_original_limits()


def _svm_of_a_small_scene():
    """A PCA+SVM pipeline trained on a generated scene, its 2,304 pixels and the labels scikit-learn gives them."""
    from sklearn.pipeline import Pipeline

    scene = make_scene(48, 48, 30, 4, seed=5)
    svm = zoo.build("hsi-pca-svm", n_components=8)
    zoo.train(svm, scene, split="random", train_fraction=0.3)
    X = scene.pixels()
    return svm, scene, X, Pipeline.predict(svm, X)


def _share_out_every(rows: int, svm, monkeypatch) -> None:
    """Let ``predict_rows`` give a thread ``rows`` pixels (the small pipeline's work is too little otherwise)."""
    from zoo.hyperspectral import svm as svm_module

    vectors = svm.named_steps["svm"].support_vectors_
    monkeypatch.setattr(svm_module, "KERNEL_TERMS_PER_THREAD", rows * vectors.shape[0] * vectors.shape[1])


def test_pca_svm_labels_a_scene_on_torchs_threads_as_one_predict_call_does(monkeypatch, blas_on_two_threads):
    import threading

    from sklearn.pipeline import Pipeline

    from zoo.engine.threads import torch_threads

    svm, scene, X, want = _svm_of_a_small_scene()  # 2,304 pixels
    calls: list[tuple[int, int]] = []  # (thread, rows) of each predict call
    blas_threads: set[int] = set()  # BLAS's thread count during each call
    together = threading.Barrier(1)

    def predict(rows):
        calls.append((threading.get_ident(), len(rows)))
        blas_threads.update(_blas_threads())
        together.wait(timeout=10)  # breaks unless `parties` calls run at once, on as many threads
        return Pipeline.predict(svm, rows)

    monkeypatch.setattr(svm, "predict", predict)
    # this small pipeline's work is too little to share out (one call, on the caller's thread, BLAS as it is)...
    with torch_threads(2):
        np.testing.assert_array_equal(svm.predict_rows(X), want)
    assert calls == [(threading.get_ident(), len(X))]
    # ...so the test asks for a thread per 256 of its pixels
    _share_out_every(256, svm, monkeypatch)
    for threads, chunk, pieces in ((2, 8192, 2), (2, 1000, 4), (1, 1000, 3), (4, 8192, 4)):
        together = threading.Barrier(threads)
        calls.clear()
        blas_threads.clear()
        with torch_threads(threads):
            got = svm.predict_rows(X, chunk=chunk)
            np.testing.assert_array_equal(got, want)
            assert len(calls) == pieces and sum(n for _, n in calls) == len(X) and max(n for _, n in calls) <= chunk
            assert len({t for t, _ in calls}) == threads
            if threads > 1:
                assert blas_threads == {1}, blas_threads
            # the scene's map, zoo.predict's and zoo.evaluate's pixels go the same way
            np.testing.assert_array_equal(svm.predict_scene(scene).reshape(-1), want)
            np.testing.assert_array_equal(zoo.predict(svm, X), want)
            assert zoo.evaluate(svm, (X, want))["overall_accuracy"] == 1.0
    together = threading.Barrier(1)
    calls.clear()
    with torch_threads(2):  # too few pixels to share: one call, on the caller's thread
        np.testing.assert_array_equal(svm.predict_rows(X[:511]), want[:511])
    assert calls == [(threading.get_ident(), 511)]
    assert _blas_threads() == {2}  # given back
    for bad in (0, 2.5):
        with pytest.raises((TypeError, ValueError), match=r"chunk must be an int >= 1 \(pixels per predict call\)"):
            svm.predict_rows(X, chunk=bad)


def test_pca_svm_predictions_on_two_threads_take_turns_and_give_blas_its_threads_back(monkeypatch,
                                                                                     blas_on_two_threads):
    """Two predictions on two of the user's threads, the second started while the first ran and ended after it,
    left BLAS on one thread for the rest of the process: each took the limit on entry and restored on exit what
    it had found, the second the first's limit. Now the second waits for the first (each uses every thread)."""
    import threading
    import time

    from sklearn.pipeline import Pipeline

    from zoo.engine.threads import torch_threads

    svm, _, X, want = _svm_of_a_small_scene()  # two pieces of 1,152 pixels for this thread's call, of 750 for the other's
    _share_out_every(256, svm, monkeypatch)
    first_running, other_called, first_out = threading.Event(), threading.Event(), threading.Event()
    pieces: list[tuple[int, set[int], bool]] = []  # (rows, BLAS's thread counts, the first call had returned), in order

    def predict(rows):
        pieces.append((len(rows), _blas_threads(), first_out.is_set()))
        if len(rows) == 1152:  # the other thread calls while this one runs
            first_running.set()
            assert other_called.wait(timeout=10)
            time.sleep(0.3)
        else:  # and would end after it
            assert first_out.wait(timeout=10)
        return Pipeline.predict(svm, rows)

    def other():
        assert first_running.wait(timeout=10)
        other_called.set()
        got["other"] = svm.predict_rows(X[:1500])

    monkeypatch.setattr(svm, "predict", predict)
    got = {}
    with torch_threads(2):
        caller = threading.Thread(target=other)
        caller.start()
        try:
            np.testing.assert_array_equal(svm.predict_rows(X), want)
        finally:
            first_out.set()
            caller.join(60)
    np.testing.assert_array_equal(got["other"], want[:1500])
    assert sorted(n for n, _, _ in pieces) == [750, 750, 1152, 1152]
    assert all(blas == {1} for _, blas, _ in pieces), pieces  # one BLAS thread while libsvm runs on two
    # the second call waited for the first: none of its pieces started before both of the first's (first_out is
    # set only once the first call has returned to this thread, which the second may beat to its first piece)
    assert [n for n, _, _ in pieces][:2] == [1152, 1152], pieces
    assert _blas_threads() == {2}  # and BLAS has its two back once both returned


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_forked_while_a_prediction_holds_blas_can_predict():
    """The turn-taking lock, held by another thread when the process forked (a DataLoader starting its workers),
    stayed held in the child for good: its first shared-out prediction would wait forever."""
    import threading

    from zoo.hyperspectral import svm as svm_module

    held, release = threading.Event(), threading.Event()

    def hold():
        with svm_module._one_blas_thread():
            held.set()
            release.wait(timeout=30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(timeout=10)
        pid = os.fork()
        if pid == 0:  # the child: exit 0 if it gets the turn
            os._exit(0 if svm_module._BLAS_HOLD.acquire(timeout=5) else 3)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        holder.join(10)
    assert os.waitstatus_to_exitcode(status) == 0


def test_pca_svm_search_fits_on_threads_with_the_results_of_one_job(monkeypatch):
    import threading

    from threadpoolctl import threadpool_limits

    from zoo.engine.threads import torch_threads

    scene = make_scene(40, 40, 30, 4, seed=6)
    options = {"split": "random", "train_fraction": 0.3, "search": True, "cv": 2,
               "param_grid": {"svm__C": [1.0, 100.0], "svm__gamma": ["scale", 0.1]}}
    fits: list[tuple[int, set[int]]] = []  # (thread, BLAS's thread counts) of each fit
    fit = HSIPipeline.fit

    def recorded_fit(self, X, y=None, **params):
        fits.append((threading.get_ident(), _blas_threads()))
        return fit(self, X, y, **params)

    monkeypatch.setattr(HSIPipeline, "fit", recorded_fit)
    with threadpool_limits(limits=2, user_api="blas"):  # so that BLAS on one thread can be told apart
        one_job = zoo.build("hsi-pca-svm", n_components=8)
        with torch_threads(2):
            want = zoo.train(one_job, scene, n_jobs=1, **options).history[0]
        assert {t for t, _ in fits} == {threading.get_ident()} and {n for _, b in fits for n in b} == {2}
        fits.clear()
        threaded = zoo.build("hsi-pca-svm", n_components=8)
        with torch_threads(2):
            got = zoo.train(threaded, scene, **options).history[0]
        searched = fits[:-1]  # the last: the refit on every training pixel, on the caller's thread
        assert len(searched) == 8 and threading.get_ident() not in {t for t, _ in searched}
        assert {n for _, b in searched for n in b} == {1} and fits[-1] == (threading.get_ident(), {2})
    assert (got["best_params"], got["cv_accuracy"], got["train_accuracy"]) == \
        (want["best_params"], want["cv_accuracy"], want["train_accuracy"])
    X = scene.pixels()
    np.testing.assert_array_equal(threaded.predict(X), one_job.predict(X))


def test_pca_svm_weights_of_another_scikit_learn_load_with_a_warning(tmp_path, monkeypatch):
    import warnings

    import sklearn

    scene = make_scene(24, 24, 12, 3, seed=7)
    svm = zoo.build("hsi-pca-svm", n_components=4)
    zoo.train(svm, scene, split="random", train_fraction=0.3, seed=1)
    path = svm.save(tmp_path / "svm.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the version that wrote it: silent
        load_pipeline(path)
    wrote = sklearn.__version__
    monkeypatch.setattr(sklearn, "__version__", "0.0.dev0")
    with pytest.warns(UserWarning, match=rf"written with scikit-learn {re.escape(wrote)}, this is 0\.0\.dev0"):
        loaded = load_pipeline(path)
    X = scene.pixels()
    np.testing.assert_array_equal(loaded.predict(X), svm.predict(X))


def test_demo_without_indian_pines(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ZOO_SHARED_DATA", str(tmp_path / "absent"))
    from zoo.hyperspectral.cli import _demo

    _demo()
    out = capsys.readouterr().out
    assert "zoo hsi-fetch indian_pines" in out and "OA" in out
    from zoo.hub import zoo_home

    assert (zoo_home() / "demo" / "synthetic_pca_svm_map.png").stat().st_size > 1000


def test_demo_whose_home_cannot_take_its_maps_writes_them_elsewhere(monkeypatch, tmp_path, capsys):
    """A home where $ZOO_HOME/demo cannot be made (read-only, or a file in its place) failed the whole step
    with an OSError for its PNGs. The folder it takes instead is the system temp folder's (here the test's own:
    every run of the suite left one in /tmp)."""
    import tempfile

    monkeypatch.setenv("ZOO_SHARED_DATA", str(tmp_path / "absent"))
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "demo").write_text("not a folder")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    from zoo.hyperspectral.cli import _demo

    _demo()
    out = capsys.readouterr().out
    moved = Path(out.split("the maps go to ", 1)[1].split(")", 1)[0])
    assert "OA" in out and (moved / "synthetic_pca_svm_map.png").stat().st_size > 1000
    assert moved.parent == tmp_path / "tmp" and moved.name.startswith("zoo-demo-")


def _fitted_hybridsn(padding: str = "constant", seed: int = 0):
    """A random HybridSN (small: 9x9 windows, 15 bands) with a fitted preprocessing, and its scene."""
    scene = make_scene(23, 31, 30, 4, block=6, noise=0.1, seed=seed)
    torch.manual_seed(seed)
    net = zoo.build("hybridsn", n_bands=15, num_classes=4, window=9, padding=padding)
    net.fit_preprocessor(scene, None)
    return net.eval(), scene


@pytest.mark.parametrize("padding", ["constant", "reflect"])
def test_dense_pass_equals_the_per_window_network(padding):
    net, scene = _fitted_hybridsn(padding)
    from zoo.hyperspectral.patches import PatchDataset, pad_cube

    reduced = net.reduce(scene)
    r = net.config.window // 2
    padded = torch.from_numpy(np.ascontiguousarray(pad_cube(reduced, r, padding).transpose(2, 0, 1)))
    with torch.no_grad():
        dense = net.dense_forward(padded)  # (4, 23, 31)
        ds = PatchDataset.from_mask(reduced, None, np.ones(scene.shape[:2], bool), window=9, padding=padding)
        windows = net(torch.stack([ds[i][0] for i in range(len(ds))]))  # (23 * 31, 4), row-major
    assert dense.shape == (4, 23, 31)
    torch.testing.assert_close(dense.permute(1, 2, 0).reshape(-1, 4), windows, rtol=1e-4, atol=1e-5)


def test_predict_scene_dense_windows_and_tiles_agree():
    net, scene = _fitted_hybridsn(seed=1)
    kw = {"amp": None}
    full = net.predict_scene(scene, method="windows", **kw)
    assert (net.predict_scene(scene, method="dense", **kw) == full).all()
    assert (net.predict_scene(scene, method="dense", tile_rows=5, **kw) == full).all()  # 23 rows: 5 tiles
    mask = np.zeros(scene.shape[:2], bool)
    mask[3, 4] = mask[20, 30] = True
    sparse = net.predict_scene(scene, mask=mask, method="auto", **kw)  # 2 of 713 pixels: windows
    assert (sparse[mask] == full[mask]).all() and (sparse[~mask] == 0).all()
    assert net.training is False
    with pytest.raises(ValueError, match="method must be"):
        net.predict_scene(scene, method="fast")
    with pytest.raises(ValueError, match="does not match"):
        net.predict_scene(scene, mask=np.ones((3, 3), bool))


def test_tta_averages_the_eight_symmetries_of_each_window():
    """tta=True: the class of the mean softmax over the window's quarter turns and mirrors, the same by the
    dense pass (turning the whole padded scene) and per window; and not simply the plain prediction."""
    from zoo.hyperspectral.patches import PatchDataset

    net, scene = _fitted_hybridsn(seed=1)
    kw = {"amp": None, "tta": True}
    windows = net.predict_scene(scene, method="windows", **kw)
    assert (net.predict_scene(scene, method="dense", **kw) == windows).all()
    assert (net.predict_scene(scene, method="dense", tile_rows=4, **kw) == windows).all()
    ds = PatchDataset.from_mask(net.reduce(scene), None, np.ones(scene.shape[:2], bool), window=9)
    x = torch.stack([ds[i][0] for i in range(len(ds))])  # (713, 1, C, 9, 9)
    with torch.no_grad():
        views = [torch.rot90(v, k, dims=(-2, -1)) for v in (x, x.flip(-1)) for k in range(4)]
        want = torch.stack([net(v).softmax(1) for v in views]).mean(0).argmax(1) + 1
    assert (torch.from_numpy(windows).reshape(-1) == want).all()
    assert not any(torch.equal(a, b) for i, a in enumerate(views) for b in views[i + 1:])  # eight distinct views
    with pytest.raises(ValueError, match="tta=True works on a scene"):
        net.zoo_evaluate(ds, tta=True)


def test_dense_pass_on_indian_pines_matches_windows(shared_data):
    """The shipped weights on the real scene: the dense map equals the per-window one (fp32)."""
    from zoo.hyperspectral.datasets import load_dataset

    if not (shared_data / "hyperspectral" / "indian_pines" / "Indian_pines_corrected.npy").is_file():
        pytest.skip("Indian Pines not in the shared data")
    scene = load_dataset("indian_pines")
    net = zoo.build("hybridsn", weights="indian-pines")
    rng = np.random.default_rng(0)
    mask = np.zeros(scene.shape[:2], bool)
    mask[tuple(rng.integers(0, 145, (2, 300)))] = True  # 300 windows: a few seconds
    dense = net.predict_scene(scene, method="dense", amp=None)
    windows = net.predict_scene(scene, mask=mask, method="windows", amp=None)
    assert (dense[mask] == windows[mask]).all()


def test_hybridsn_held_out_tiles_validate_and_the_best_epoch_is_kept():
    scene = make_scene(40, 40, 30, 4, block=8, noise=0.05, seed=3)
    net = zoo.build("hybridsn", n_bands=15, num_classes=4, window=9)
    kept = {}

    def remember(state, row):  # the weights each epoch ended with
        kept[state.epoch + 1] = {k: v.clone() for k, v in state.model.state_dict().items()}

    from zoo.engine import LambdaCallback

    result = zoo.train(net, scene, split="random", train_fraction=0.5, epochs=4, batch_size=32, lr=2e-3, seed=0,
                       progress=False, val_fraction=0.25, val_block=6, noise_std=0.1, augment=True,
                       callbacks=[LambdaCallback(on_epoch_end=remember)])
    rows = result.history
    assert all("val_loss" in r for r in rows) and rows[-1]["held_out_pixels"] > 0
    best = min(range(len(rows)), key=lambda i: rows[i]["val_loss"]) + 1
    assert result.best_epoch == best
    for k, v in net.state_dict().items():  # the model ends at the best epoch's weights, not the last
        assert torch.equal(v, kept[best][k]), k
    # the recorded training pixels are all of the split's, held-out tiles included: no evaluation scores them
    assert net.training_record_.n_train == int(net.last_split_.train.sum())
    with pytest.raises(ValueError, match="not both"):
        zoo.train(net, scene, split="random", epochs=1, val_fraction=0.2, val_data=object(), progress=False)


def test_unit_spectra_reduce_brighter_and_darker_fields_alike():
    import dataclasses

    scene = make_scene(16, 16, n_bands=24, n_classes=3, seed=1)
    model = zoo.build("hybridsn", n_bands=16, num_classes=3, window=9, spectral_norm="l2")
    model.fit_preprocessor(scene, scene.labels > 0)
    gain = np.random.default_rng(0).uniform(0.2, 5.0, size=(16, 16, 1))  # every pixel brighter or darker
    cube = np.asarray(scene.cube, np.float64) * gain
    cube[3, 4] = 0.0  # no data
    relit = dataclasses.replace(scene, cube=cube)
    a, b = model.reduce(scene), model.reduce(relit)
    keep = np.ones((16, 16), bool)
    keep[3, 4] = False
    np.testing.assert_allclose(a[keep], b[keep], atol=1e-4)
    assert not b[3, 4].any()  # an all-zero pixel reduces to the padding value
    plain = zoo.build("hybridsn", n_bands=16, num_classes=3, window=9)  # the paper's preprocessing is not invariant
    plain.fit_preprocessor(scene, scene.labels > 0)
    assert not np.allclose(plain.reduce(scene)[keep], plain.reduce(relit)[keep], atol=1e-2)
    with pytest.raises(ValueError, match="spectral_norm must be one of"):
        zoo.build("hybridsn", spectral_norm="l1")


# --- evaluate / train options ------------------------------------------------------------------------------


def test_pca_svm_names_unknown_options_and_refuses_scene_options_with_pixels():
    """Before: (X, y) took any option silently (a typo, on_overlap='bogus', a mask, a split it ignored)."""
    scene = make_scene(16, 16, 20, 3, seed=0)
    svm = zoo.build("hsi-pca-svm", n_components=5)
    zoo.train(svm, scene, split="random")
    X, y = scene.pixels(scene.labels > 0), scene.labels[scene.labels > 0]
    for data in (scene, (X, y)):
        with pytest.raises(TypeError, match=r"zoo.evaluate on hsi-pca-svm: unknown option\(s\) 'batchsize'; it takes "
                                            r"block, cube_key, gt_key, guard, labels, mask, on_overlap, progress, "
                                            r"seed, split"):
            zoo.evaluate(svm, data, batchsize=8)
        with pytest.raises(ValueError, match=r"on_overlap must be one of \('error', 'exclude'\); got 'bogus'"):
            zoo.evaluate(svm, data, on_overlap="bogus")
    with pytest.raises(ValueError, match=r"zoo.evaluate on \(X, y\) pixels got mask: options for a scene"):
        zoo.evaluate(svm, (X, y), mask=np.zeros((2, 2), bool))
    with pytest.raises(ValueError, match=r"zoo.evaluate on \(X, y\) pixels got split, train_fraction"):
        zoo.evaluate(svm, (X, y), split="random", train_fraction=0.5)
    with pytest.raises(ValueError, match=r"zoo.train on \(X, y\) pixels got block, split, train_fraction: options "
                                         r"for a scene .* or pass the Scene"):
        zoo.train(svm, (X, y), split="blocks", train_fraction=0.1, block=4, seed=5)
    assert zoo.train(svm, (X, y), seed=5).history[0]["n_train"] == len(y)  # seed also shuffles a CV search
    # progress= means what it means in every family (here: the CV search reports its folds; was refused)
    zoo.train(svm, (X, y), progress=False)
    # one spectrum is one pixel (it was read as a 1-D "scene cube" and refused)
    assert zoo.predict(svm, X[0]) == zoo.predict(svm, X[:1])[0]
    with pytest.raises(TypeError, match=r"unknown option\(s\) 'train_frac' \(did you mean 'train_fraction'\?\)"):
        zoo.train(svm, scene, train_frac=0.2)
    with pytest.raises(ValueError, match="mask= names the test pixels itself"):
        zoo.evaluate(svm, scene, mask=scene.labels > 0, train_fraction=0.5)


@pytest.mark.filterwarnings("ignore:HybridSN records no training pixels")
def test_hybridsn_evaluate_takes_progress_and_device_and_names_unknown_options(capfd):
    """Before: progress= and device= reached resolve_split: "TypeError: resolve_split() got an unexpected keyword"."""
    net, scene = _fitted_hybridsn()
    mask = scene.labels > 0
    plain = zoo.evaluate(net, scene, mask=mask)
    capfd.readouterr()
    assert zoo.evaluate(net, scene, mask=mask, progress=True, device="cpu") == plain
    assert "predict" in capfd.readouterr().err  # the bar of the pass over the scene
    net.split_ = {"split": "random", "train_fraction": 0.3, "seed": 0}  # as training on a scene records it
    assert set(zoo.evaluate(net, scene, progress=False, device="cpu", seed=1)) >= {"overall_accuracy", "kappa"}
    with pytest.raises(TypeError, match=r"zoo.evaluate on hybridsn: unknown option\(s\) 'batchsize' \(did you mean "
                                        r"'batch_size'\?\)"):
        zoo.evaluate(net, scene, batchsize=8)
    windows = torch.utils.data.TensorDataset(torch.rand(2, 1, 15, 9, 9), torch.tensor([0, 1]))
    with pytest.raises(TypeError, match=r"hybridsn \(a Dataset of windows\): unknown option\(s\) 'batchsize'"):
        zoo.evaluate(net, windows, batchsize=8)  # it reached the engine: "got an unexpected keyword argument"
    assert zoo.evaluate(net, windows, metrics=["top2"])["top2"] >= 0  # "got multiple values for 'metrics'"
    assert zoo.predict(net, scene, device="cpu").shape == scene.shape[:2]


def test_hybridsn_weights_adapt_to_another_number_of_classes_and_refuse_other_shapes(tmp_path):
    """design.md: a different num_classes re-initialises the head and says so; the error for n_bands came from
    deep in set_preprocessor, and window's told the user to pass reinit=('fc.',), which zoo.build does not take."""
    net, scene = _fitted_hybridsn()
    path = zoo.save(net, tmp_path / "h.safetensors")
    with pytest.warns(UserWarning, match=r"left freshly initialised.*classifier\.7\.weight file \[4, 128\] model \[6, 128\]"):
        wider = zoo.build("hybridsn", weights=path, num_classes=6)
    kept = {k: v for k, v in net.state_dict().items() if not k.startswith("classifier.7.")}
    assert all(torch.equal(wider.state_dict()[k], v) for k, v in kept.items())  # the rest loaded whole
    assert zoo.predict(wider, scene).max() < 6
    with pytest.raises(ValueError, match="made with n_bands=15 .* asks for n_bands=14: leave n_bands out"):
        zoo.build("hybridsn", weights=path, n_bands=14)
    with pytest.raises(ValueError, match=r"classifier\.1\.weight.*only classifier\.7\. may differ, as a new classifier head"):
        zoo.build("hybridsn", weights=path, window=11)


def test_weights_keep_what_their_fit_was_made_with(tmp_path):
    """hsi-pca-svm took n_components=5 / C=1.0 beside its weights and used the file's 8 / 100.0 without a word;
    HybridSN took spectral_norm="l2" beside a file fitted without it and fed its scaler and PCA other inputs."""
    scene = make_scene(24, 24, 20, 3, seed=0)
    svm = zoo.build("hsi-pca-svm", n_components=8)
    zoo.train(svm, scene, split="random")
    path = zoo.save(svm, tmp_path / "svm.safetensors")
    with pytest.raises(ValueError, match=r"fitted with n_components=8, C=100.0, but n_components=5, C=1.0 was asked"):
        zoo.build("hsi-pca-svm", weights=path, n_components=5, C=1.0)
    same = zoo.build("hsi-pca-svm", weights=path, n_components=8, C=100.0)  # the file's own: nothing to refuse
    np.testing.assert_array_equal(same.predict(scene.pixels()), svm.predict(scene.pixels()))

    net, scene = _fitted_hybridsn()
    path = zoo.save(net, tmp_path / "h.safetensors")
    with pytest.warns(UserWarning, match=r"fitted with spectral_norm='none'.*not loaded: zoo.train fits them again"):
        l2 = zoo.build("hybridsn", weights=path, spectral_norm="l2")
    assert not l2.has_preprocessor and l2.config.spectral_norm == "l2"
    assert torch.equal(l2.classifier[7].weight, net.classifier[7].weight)  # the network loads: a start to train
    with pytest.raises(ValueError, match="no fitted preprocessing"):
        zoo.predict(l2, scene)
    zoo.train(l2, scene, split="random", epochs=1, batch_size=64, progress=False)
    assert l2.has_preprocessor and zoo.predict(l2, scene).shape == scene.shape[:2]
    own = zoo.build("hybridsn", weights=path, spectral_norm="none")
    np.testing.assert_array_equal(zoo.predict(own, scene), zoo.predict(net, scene))


def test_hybridsn_names_its_class_count_num_classes_as_every_other_family_does(tmp_path):
    """zoo.build, zoo.train, model_info, the config and the command line say num_classes, as torchvision and
    timm (and zoo's other families) do; HybridSN's own n_classes still builds, with a FutureWarning."""
    from zoo import registry
    from zoo.cli import build_parser, model_kv
    from zoo.hyperspectral import HybridSNConfig

    assert "num_classes" in zoo.model_info("hybridsn").default_config
    assert "n_classes" not in zoo.model_info("hybridsn").default_config
    net, scene = _fitted_hybridsn()
    path = zoo.save(net, tmp_path / "h.safetensors")
    with pytest.warns(UserWarning, match=r"left freshly initialised.*classifier\.7\.weight file \[4, 128\] model \[6, 128\]"):
        assert zoo.build("hybridsn", weights=path, num_classes=6).config.num_classes == 6
    run = zoo.train("hybridsn", scene, model_config={"num_classes": 6, "n_bands": 15, "window": 9}, epochs=1,
                    batch_size=64, progress=False)  # beside the num_classes the scene implies (4)
    assert run.model.config.num_classes == 6
    assert model_kv("hybridsn", ["num_classes=5"]) == {"num_classes": 5}
    args = build_parser(["train", "hybridsn"]).parse_args(["train", "hybridsn", "--num-classes", "5"])
    assert args.cfg__num_classes == "5"
    # zoo.finetune's refusal gives the call for a zoo network with a class head (it pointed at the vision
    # family's finetune, which cannot read a scene)
    with pytest.raises(TypeError, match=r"zoo\.train\(zoo\.build\('hybridsn', weights='indian-pines', num_classes=N\)"):
        zoo.finetune("hybridsn", scene)

    with pytest.warns(FutureWarning, match="n_classes is renamed num_classes"):
        assert zoo.build("hybridsn", n_classes=5).config.num_classes == 5
    with pytest.warns(FutureWarning, match="n_classes is renamed num_classes"):
        config = HybridSNConfig(n_classes=5)
    assert config == HybridSNConfig(num_classes=5)
    with pytest.warns(FutureWarning, match=r"HybridSNConfig\.n_classes is renamed num_classes; read \.num_classes"):
        assert config.n_classes == 5
    with pytest.warns(FutureWarning):  # beside the num_classes the scene implies: the caller's wins, as num_classes
        run = zoo.train("hybridsn", scene, model_config={"n_classes": 6, "n_bands": 15, "window": 9}, epochs=1,
                        batch_size=64, progress=False)
    assert run.model.config.num_classes == 6
    with pytest.warns(FutureWarning):
        assert model_kv("hybridsn", ["n_classes=5"]) == {"num_classes": 5}
    with pytest.warns(FutureWarning, match="--n-classes is renamed --num-classes"):
        args = build_parser(["train", "hybridsn"]).parse_args(["train", "hybridsn", "--n-classes", "5"])
    assert args.cfg__num_classes == "5"
    with pytest.warns(FutureWarning):
        assert registry.validate_config("hybridsn", {"n_classes": 5}) == {"num_classes": 5}
    with pytest.warns(FutureWarning):
        assert zoo.build("hybridsn", num_classes=5, n_classes=5).config.num_classes == 5
    with pytest.raises(TypeError, match=r"num_classes=5 and n_classes=6 name one setting .*give one"):
        zoo.build("hybridsn", num_classes=5, n_classes=6)
    with pytest.raises(TypeError, match=r"num_classes=5 and n_classes=6 name one setting"):
        HybridSNConfig(num_classes=5, n_classes=6)


def test_files_that_record_n_classes_still_load_without_a_warning(tmp_path, monkeypatch):
    """A weights file, a manifest entry and a training checkpoint written while the key was n_classes (the
    published HybridSN files' own metadata says n_classes) build, with num_classes beside them too."""
    import dataclasses
    import json
    import shutil
    import warnings

    from zoo import hub
    from zoo.hub import store

    published = tmp_path / "old.safetensors"  # a copy: no manifest entry, the file's own zoo.config is read
    shutil.copy(hub.pull("hybridsn.indian-pines-disjoint"), published)
    assert json.loads(hub.read_metadata(published)["zoo.config"])["n_classes"] == 16
    shipped = store.read_manifest

    def old_manifest(*args, **kwargs):
        entries = dict(shipped(*args, **kwargs))
        old = entries["hybridsn.indian-pines"]
        entries[old.name] = dataclasses.replace(old, config={"n_bands": 30, "n_classes": 16, "window": 25})
        return entries

    monkeypatch.setattr(store, "read_manifest", old_manifest)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert zoo.build("hybridsn", weights=published).config.num_classes == 16
        assert zoo.build("hybridsn", weights="indian-pines").config.window == 25
        with pytest.warns(UserWarning, match="left freshly initialised"):
            assert zoo.build("hybridsn", weights=published, num_classes=6).config.num_classes == 6
        with pytest.warns(UserWarning, match="left freshly initialised"):
            assert zoo.build("hybridsn", weights="indian-pines", num_classes=6).config.num_classes == 6


def test_a_trained_hybridsns_state_dict_loads_into_a_fresh_one():
    """torch's own round trip (build, load_state_dict) failed 'Unexpected key(s) "pre_mean", ...': a fresh
    network has no preprocessing buffers until it is trained."""
    net, scene = _fitted_hybridsn()
    fresh = zoo.build("hybridsn", n_bands=15, num_classes=4, window=9)
    fresh.load_state_dict(net.state_dict())
    assert fresh.has_preprocessor
    np.testing.assert_array_equal(zoo.predict(fresh, scene), zoo.predict(net, scene))
    # tensors of another device (a GPU's; "meta" here) load where the network is, not through numpy
    elsewhere = zoo.build("hybridsn", n_bands=15, num_classes=4, window=9).to("meta")
    elsewhere.load_state_dict({k: v.to("meta") for k, v in net.state_dict().items()})
    assert elsewhere.pre_mean.device.type == "meta" and elsewhere.has_preprocessor
    with pytest.raises(ValueError, match=r"PCA components must be \(16, C_raw\) for n_bands=16; got \(15, 30\)"):
        zoo.build("hybridsn", n_bands=16, num_classes=4, window=9).load_state_dict(net.state_dict())


def test_hybridsn_predict_names_what_it_takes_for_pixel_spectra():
    net, _ = _fitted_hybridsn()
    with pytest.raises(ValueError, match=r"9x9 window around it, so it predicts a scene.*shape \(4, 30\).*hsi-pca-svm"):
        zoo.predict(net, np.zeros((4, 30), np.float32))


@pytest.mark.parametrize("name, config, loop", [("hsi-pca-svm", {"n_components": 5}, {}),
                                                ("hybridsn", {"n_bands": 15, "window": 9}, {"epochs": 1})])
def test_a_cube_and_its_ground_truth_as_arrays_train_and_evaluate(name, config, loop):
    """A cube the user read (scipy.io.loadmat, spectral) and its map: zoo.predict took the (H, W, C) array,
    zoo.train and zoo.evaluate refused it ("expected a Scene, a scene path or a data set name; got ndarray"),
    and labels= took only a file. A (cube, gt) tuple, which reads as (X, y) pixels, says how to pass them."""
    scene = make_scene(24, 24, 20, 3, block=6, seed=0)
    cube, gt = np.asarray(scene.cube), np.asarray(scene.labels)
    result = zoo.train(name, cube, labels=gt, model_config=config, split="random", **loop)
    scores = zoo.evaluate(result.model, cube, labels=gt, split="random")
    assert 0.0 <= scores["overall_accuracy"] <= 1.0
    assert zoo.predict(result.model, cube).shape == gt.shape
    with pytest.raises(TypeError, match=r"\(cube, ground truth\): pass the \(H, W, C\) cube as data and the \(H, W\) "
                                        r"map as labels="):
        zoo.train(name, (cube, gt), model_config=config, **loop)
    with pytest.raises(ValueError, match=r"labels"):
        zoo.train(name, cube, labels=gt[:5], model_config=config, **loop)
    # a band-first cube, as rasterio and GDAL read it: the ground truth's shape shows it ("labels must be (H, W) =
    # (20, 24); got (24, 24)" before), and a model fitted on 20 bands sees 20 in its first axis
    band_first = cube.transpose(2, 0, 1)
    hint = r"pass cube\.transpose\(1, 2, 0\)"
    with pytest.raises(ValueError, match=r"the cube \(20, 24, 24\) is band-first, \(C, H, W\).*" + hint):
        zoo.train(name, band_first, labels=gt, model_config=config, **loop)
    with pytest.raises(ValueError, match=r"the cube \(20, 24, 24\) looks band-first.*" + hint):
        zoo.predict(result.model, band_first)


def test_a_training_checkpoint_names_its_model_when_another_is_built_from_it(tmp_path):
    """zoo.build('resnet18', weights=<a hybridsn run's best.pt>) said "unknown config key(s) 'n_bands', ...",
    where a .safetensors of another model names the model it holds; a resume into another model listed
    batch_size and monitor as the changes."""
    scene = make_scene(24, 24, 20, 3, seed=0)
    torch.manual_seed(0)
    zoo.train(zoo.build("hybridsn", n_bands=15, window=9, num_classes=3), scene, split="random", epochs=1,
              checkpoint_dir=tmp_path, progress=False)
    for name in ("resnet18", "video-tsn", "td3"):
        with pytest.raises(ValueError, match=rf"is a training checkpoint of a 'hybridsn' model, not '{name}': build it "
                                             rf"with zoo.build\('hybridsn'"):
            zoo.build(name, weights=str(tmp_path / "best.pt"))
    assert zoo.build("hybridsn", weights=str(tmp_path / "best.pt")).config.n_bands == 15


def test_evaluate_on_an_unfitted_pca_svm_says_it_is_not_fitted():
    """Before: zoo.evaluate(zoo.build("hsi-pca-svm"), cube, labels=gt) blamed the split ("this one records no
    training split: it was fitted on (X, y) pixels, ..."), while predict and split='random' said NotFittedError."""
    from sklearn.exceptions import NotFittedError

    s = make_scene(16, 16, 12, 3, block=4, seed=0)
    svm = zoo.build("hsi-pca-svm")
    for kw in ({}, {"split": "random"}):
        with pytest.raises(NotFittedError, match="This HSIPipeline instance is not fitted yet"):
            zoo.evaluate(svm, np.asarray(s.cube), labels=s.labels, **kw)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        zoo.evaluate(svm, (s.pixels(s.labels > 0), s.labels[s.labels > 0]))


def test_replacing_a_config_by_the_old_name_of_a_renamed_field():
    """dataclasses.replace passes every current field beside the caller's key: replace(cfg, n_classes=3) met
    num_classes=16 with it and was refused as a clash the caller never wrote."""
    import dataclasses

    from zoo.hyperspectral.hybridsn import HybridSNConfig

    with pytest.warns(FutureWarning, match="n_classes is renamed num_classes"):
        assert dataclasses.replace(HybridSNConfig(num_classes=9), n_classes=3).num_classes == 3
    with pytest.raises(TypeError, match="name one setting"):
        HybridSNConfig(num_classes=9, n_classes=3)


def test_a_label_map_out_writes_the_png_the_option_promises(tmp_path, capsys):
    from PIL import Image

    from zoo.hyperspectral import cli

    label_map = np.zeros((6, 9), np.int64)
    label_map[:, 3:] = 2
    cli.write_label_map(label_map, tmp_path / "map")
    assert np.array_equal(np.load(tmp_path / "map.npy"), label_map)
    png = Image.open(tmp_path / "map.png").convert("RGB")
    assert png.size == (9, 6)
    assert png.getpixel((0, 0)) == (0, 0, 0) and png.getpixel((8, 5)) != (0, 0, 0)  # 0 is unlabelled: black
    assert "map.png" in capsys.readouterr().out


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc: a folder no one may create files in")
def test_a_label_map_out_folder_that_takes_no_file_is_refused_before_the_prediction(tmp_path):
    """``zoo predict hsi-pca-svm SCENE --out ro/map.npy`` predicted the whole scene (seconds to minutes) and then
    failed to write; the folder is tried when ``--out`` is read. /proc/self refuses new files even to root."""
    from zoo.cli import UsageError
    from zoo.hyperspectral import cli

    with pytest.raises(UsageError, match="not writable"):
        cli.label_map_paths("/proc/self/map.npy", "scene.npy")
    assert cli.label_map_paths(str(tmp_path / "map.npy"), "scene.npy")[0] == tmp_path / "map.npy"
    assert not list(tmp_path.iterdir())  # the probe is gone


@pytest.mark.parametrize("flags", [["--n-classes", "9", "--num-classes", "10"], ["--num-classes", "10", "--n-classes", "9"]])
def test_the_old_and_new_class_count_flags_differing_are_refused(flags, capsys):
    """zoo train hybridsn --n-classes 9 --num-classes 10 trained 10 classes (the last flag won), where
    zoo.build and HybridSNConfig refuse the same two values."""
    from zoo.cli import main

    with pytest.warns(FutureWarning, match="--n-classes is renamed"):
        code = main(["train", "hybridsn", *flags, "--data", "no-such-scene.npy", "--epochs", "1"])
    assert code == 2
    assert "--num-classes 10 and --n-classes 9 name one setting (--n-classes is the old name of --num-classes); " \
           "give one" in capsys.readouterr().err


def test_hybridsn_predict_and_evaluate_check_batch_size_on_every_path():
    """Before: the dense path (a whole scene, the default) took batch_size 0, -3, 2.5 or "8" without a word, and
    the windows path failed in torch's DataLoader ("batch_size should be a positive integer value")."""
    scene = make_scene(16, 16, 15, 3, seed=0)
    net = zoo.build("hybridsn", n_bands=15, num_classes=3, window=9)
    zoo.train(net, scene, split="random", train_fraction=0.5, epochs=1, batch_size=32, progress=False, seed=0)
    few = np.zeros((16, 16), bool)
    few[3:5, 3:6] = True  # six pixels: the windows path
    for bad, error in ((0, ValueError), (-3, ValueError), (2.5, TypeError), ("8", TypeError), (True, TypeError)):
        for mask in (None, few):
            with pytest.raises(error, match=rf"batch_size must be an int >= 1, got {re.escape(repr(bad))}"):
                zoo.predict(net, scene, mask=mask, batch_size=bad)
        with pytest.raises(error, match=r"batch_size must be an int >= 1"):
            zoo.evaluate(net, scene, batch_size=bad)
    assert zoo.predict(net, scene, mask=few, batch_size=np.int64(4)).shape == (16, 16)


def test_a_hybridsn_saved_with_fp16_storage_loads_back_whole_and_half_keeps_its_preprocessing_fp32(tmp_path):
    """Before: HybridSN.save(path, network_dtype=...) wrote no config: a network trained with spectral_norm="l2"
    and padding="edge" loaded back with the defaults (36 % of a map agreeing); and .half() / .to(bf16) rounded
    the fitted standardisation and PCA, which zoo.save then kept (a band's mean 15 raw units off)."""
    scene = make_scene(16, 16, 15, 3, seed=0)
    net = zoo.build("hybridsn", n_bands=13, num_classes=3, window=9, spectral_norm="l2", padding="edge")
    zoo.train(net, scene, split="random", train_fraction=0.5, epochs=1, batch_size=32, progress=False, seed=0)
    path = net.save(tmp_path / "h.safetensors", network_dtype=torch.float16)
    again = zoo.build("hybridsn", weights=str(path))
    assert again.config == net.config
    np.testing.assert_array_equal(again.reduce(scene), net.reduce(scene))
    before = {k: getattr(net, k).clone() for k in ("pre_mean", "pre_scale", "pca_mean", "pca_components")}
    for cast in (torch.float16, torch.bfloat16, torch.float64):
        net.to(cast)
        assert net.classifier[7].weight.dtype == cast
        for name, value in before.items():
            assert getattr(net, name).dtype == torch.float32 and torch.equal(getattr(net, name), value), name
