"""The hyperspectral family under the one API: NumPy numbers as options, val_data in the family's own forms, a
plain state dict's head, progress= in every call."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import scipy.io
import torch

import zoo
from zoo.hyperspectral.patches import PatchDataset
from zoo.hyperspectral.synthetic import make_scene

SMALL_NET = {"n_bands": 15, "window": 9, "num_classes": 3}


@pytest.fixture(scope="module")
def scene():
    return make_scene(24, 24, 20, 3, seed=0)


def _recorded_split(path) -> dict:
    return json.loads(zoo.hub.read_metadata(path)["zoo.split"])


@pytest.mark.filterwarnings("ignore:split .blocks.")  # a small scene in 8-pixel tiles: a thin test set, said
def test_numpy_numbers_as_options_are_recorded_as_python_numbers(scene, tmp_path):
    """seed=np.int64(1), train_fraction=np.float32(.3), block=np.int64(8) (a grid search's values) trained, and
    zoo.save then refused the model: 'Object of type int64 is not JSON serializable'. The family's own calls
    keep them as Python numbers, so the saved split reads back as the one trained."""
    svm = zoo.build("hsi-pca-svm", n_components=5)
    svm.zoo_train(scene, split="random", seed=np.int64(1), train_fraction=np.float32(0.3), window=np.int64(9))
    assert {k: type(v) for k, v in svm.split_.items()} == {"split": str, "train_fraction": float, "seed": int,
                                                          "window": int, "block": int}
    back = zoo.build("hsi-pca-svm", weights=zoo.save(svm, tmp_path / "svm.safetensors"))
    assert back.split_ == svm.split_ and back.split_["train_fraction"] == pytest.approx(0.3)
    svm.set_params(svm__C=np.float32(3), pca__n_components=np.int64(4), svm__class_weight={np.int64(1): np.float32(2)})
    zoo.train(svm, scene, split="random")
    back = zoo.build("hsi-pca-svm", weights=zoo.save(svm, tmp_path / "svm2.safetensors"))
    assert back.get_params()["svm__C"] == 3.0 and back.get_params()["pca__n_components"] == 4

    net = zoo.build("hybridsn", **SMALL_NET)
    net.zoo_train(scene, split="blocks", block=np.int64(8), seed=np.int64(2), train_fraction=np.float32(0.4),
                  noise_std=np.float32(0.01), augment=np.bool_(True), epochs=1, progress=False)
    path = zoo.save(net, tmp_path / "net.safetensors")
    assert _recorded_split(path) == {"split": "blocks", "train_fraction": pytest.approx(0.4), "seed": 2, "window": 9,
                                     "block": 8}


def test_hybridsn_validates_on_a_scene_reduced_as_its_training_scene(scene, tmp_path):
    """val_data= a Scene was refused ('a folder path must be turned into a Dataset by the model's family') and a
    scene file was batched as its characters after a whole epoch. A scene is now every labelled pixel's window,
    reduced with the scaler and PCA fitted on the training pixels."""
    other = make_scene(24, 24, 20, 3, seed=5)
    net = zoo.build("hybridsn", **SMALL_NET)
    # fp32 on both sides: where amp="auto" picks bf16 for 3-D convolutions (an AVX512_BF16 Xeon without AMX) the
    # two losses differ by bf16's rounding under another batching (1.4e-4 relative), not by the data scored
    result = zoo.train(net, scene, split="random", val_data=other, epochs=1, batch_size=64, progress=False, amp=None)
    assert result.monitor == "val_loss"
    windows = PatchDataset.from_mask(net.reduce(other), other.labels, other.labels > 0, window=9, padding=net.padding)
    scored = zoo.engine.evaluate(net, windows, amp=None)["loss"]
    assert result.history[-1]["val_loss"] == pytest.approx(scored, rel=1e-4)
    mat = tmp_path / "other.mat"
    scipy.io.savemat(mat, {"cube": other.cube, "gt": other.labels})
    again = zoo.train(zoo.build("hybridsn", **SMALL_NET), scene, split="random", val_data=str(mat), epochs=1,
                      batch_size=64, progress=False)
    assert "val_loss" in again.history[-1]


def test_hybridsn_refuses_val_data_it_cannot_read_before_training(scene, tmp_path):
    np.save(tmp_path / "cube.npy", scene.cube)  # a cube without its ground truth
    for bad, error, match in ((str(tmp_path / "cube.npy"), ValueError, "no labelled pixels to validate on"),
                              (make_scene(24, 24, 25, 3, seed=1), ValueError, "has 25 bands, the training scene 20"),
                              (make_scene(24, 24, 20, 5, seed=1), ValueError, r"classes up to [45]"),
                              ([1, 2, 3], TypeError, "val_data for hybridsn: expected a Scene.*got list"),
                              (7, TypeError, "got int")):
        net = zoo.build("hybridsn", **SMALL_NET)
        before = {k: v.clone() for k, v in net.state_dict().items()}
        with pytest.raises(error, match=match):
            zoo.train(net, scene, split="random", val_data=bad, epochs=1, progress=False)
        assert not net.has_preprocessor  # refused before the preprocessing was fitted: nothing trained
        assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())


def test_a_plain_state_dict_builds_with_its_own_head(tmp_path):
    """resnet18 and the video models size their head from a plain .pth's; HybridSN gave a fresh 16-way head with
    a warning, dropping the trained one."""
    torch.manual_seed(0)
    trained = zoo.build("hybridsn", **SMALL_NET)
    torch.save(trained.state_dict(), tmp_path / "net.pth")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is left freshly initialised
        net = zoo.build("hybridsn", weights=tmp_path / "net.pth", n_bands=15, window=9)
    assert net.config.num_classes == 3 and torch.equal(net.get_classifier().weight, trained.get_classifier().weight)
    again = zoo.build("hybridsn", weights=zoo.save(net, tmp_path / "net.safetensors"))
    assert again.config.num_classes == 3  # the config it records is the head's size
    with pytest.warns(UserWarning, match="left freshly initialised"):  # asked for: a new head, said so
        assert zoo.build("hybridsn", weights=tmp_path / "net.pth", n_bands=15, window=9,
                         num_classes=5).get_classifier().out_features == 5


def test_the_pca_svm_takes_progress_in_evaluate_and_predict(scene, capsys):
    """progress=False, which turns any bar off, was an unknown option to hsi-pca-svm's evaluate and predict."""
    svm = zoo.build("hsi-pca-svm", n_components=5)
    zoo.train(svm, scene, split="random")
    quiet = zoo.evaluate(svm, scene, progress=False)
    assert zoo.evaluate(svm, scene, progress=True) == quiet
    assert "predict" in capsys.readouterr().err  # the bar, on stderr
    np.testing.assert_array_equal(zoo.predict(svm, scene, progress=True), zoo.predict(svm, scene, progress=False))
    pixels = scene.cube.reshape(-1, scene.n_bands)
    np.testing.assert_array_equal(zoo.predict(svm, pixels, progress=False), svm.predict(pixels))


def test_validating_on_the_training_scene_leaves_its_training_pixels_out(scene):
    """val_data=the training scene validated on every labelled pixel, the training ones included (the network
    scored on what it was fitted to, and the best epoch chosen by it)."""
    net = zoo.build("hybridsn", **SMALL_NET)
    with pytest.warns(UserWarning, match=r"val_data is the training scene .* training pixels are left out"):
        result = zoo.train(net, scene, split="random", val_data=scene, epochs=1, batch_size=64, progress=False,
                           amp=None)
    rest = (scene.labels > 0) & ~net.last_split_.train
    windows = PatchDataset.from_mask(net.reduce(scene), scene.labels, rest, window=9, padding=net.padding)
    scored = zoo.engine.evaluate(net, windows, amp=None)["loss"]
    assert result.history[-1]["val_loss"] == pytest.approx(scored, rel=1e-4)
