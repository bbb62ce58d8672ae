"""Training labels with a single class are refused, naming the scene, before either model fits; training pixels
that lack a class of the scene warn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zoo
from zoo.hyperspectral.evaluation import resolve_split
from zoo.hyperspectral.scene import Scene
from zoo.hyperspectral.splits import Split
from zoo.hyperspectral.synthetic import make_scene


def _one_class_scene(seed: int = 2) -> Scene:
    s = make_scene(24, 24, 20, 3, block=6, seed=seed)
    return Scene(cube=s.cube, labels=(s.labels > 0).astype(np.int64), name="all-ones")


@pytest.mark.parametrize("name,kw", [("hsi-pca-svm", {"n_components": 5}), ("hybridsn", {"window": 9, "n_bands": 16})])
def test_a_single_class_scene_is_refused_before_training(name, kw):
    """Before: hsi-pca-svm raised scikit-learn's "The number of classes has to be greater than one; got 1
    class" (no scene named); hybridsn trained a one-class network without a word."""
    model = zoo.build(name, **kw)
    train_kw = {"block": 6} if name == "hsi-pca-svm" else {"block": 6, "epochs": 1, "progress": False}
    with pytest.raises(ValueError, match=r"pixels of scene 'all-ones' hold only class 1; need >= 2 classes.*gt_key="):
        zoo.train(model, _one_class_scene(), **train_kw)


def test_a_split_whose_training_pixels_hold_one_class_is_refused_but_evaluation_is_not():
    s = make_scene(24, 24, 20, 3, block=6, seed=2)
    train = s.labels == 1
    sp = Split(train, (s.labels > 1), "by-hand")
    with pytest.raises(ValueError, match=r"training pixels of split 'by-hand' on scene 'synthetic-2' hold "
                                         r"only class 1; .*the scene holds classes 1, 2, 3"):
        resolve_split(s, split=sp)
    assert resolve_split(s, split=sp, for_training=False) is sp
    # an evaluation takes a split's test pixels only: a one-class scene is scored, not refused
    svm = zoo.build("hsi-pca-svm", n_components=5)
    zoo.train(svm, s, block=6, window=5)
    scores = zoo.evaluate(svm, _one_class_scene(seed=3), split="random")
    assert 0.0 <= scores["overall_accuracy"] <= 1.0


def test_svm_on_pixels_needs_two_classes_and_zero_is_a_class_there():
    s = make_scene(24, 24, 20, 3, block=6, seed=2)
    X = s.cube.reshape(-1, 20)
    svm = zoo.build("hsi-pca-svm", n_components=5)
    with pytest.raises(ValueError, match=r"the training labels y hold only class 7; need >= 2 classes"):
        zoo.train(svm, (X, np.full(len(X), 7)))
    y = (s.labels.reshape(-1) > 1).astype(np.int64)  # (X, y) pixels follow scikit-learn: 0 is a class
    zoo.train(svm, (X, y))
    assert set(np.unique(svm.predict(X))) <= {0, 1}


def test_training_without_a_class_of_the_scene_warns_naming_it():
    """Before: block=8, window=5 (the thin-test-set warning's advice) trained on classes 2 and 3 of 1, 2, 3 without
    a word, and class 1 scored 0."""
    scene = make_scene(32, 32, 20, 3, seed=0)
    with pytest.warns(UserWarning, match=r"training pixels hold 2 of the scene's 3 classes; class 1 has none.*"
                                         r"smaller tiles \(block=, now 8"):
        zoo.train(zoo.build("hsi-pca-svm", n_components=5), scene, block=8, window=5)
    ready = resolve_split(scene, split="random", seed=0)
    ready = Split(ready.train & (scene.labels != 1), ready.test, "mine", {})
    with pytest.warns(UserWarning, match="class 1 has none"):
        resolve_split(scene, split=ready)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zoo.train(zoo.build("hsi-pca-svm", n_components=5), scene, split="random")  # every class trains
        resolve_split(scene, split=ready, for_training=False)  # evaluation uses the test pixels only


def test_class_weight_takes_a_dict_of_class_ids_as_scikit_learns_svc_does(tmp_path, capsys):
    """Before: `class_weight={2: 50.0}` was refused ("expects str | None"), and a fitted SVC holding one could not
    be saved ("not storable without pickle"). Keys read from JSON (a file's config, the command line) are text."""
    from zoo.cli import main

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 8)).astype(np.float32), np.repeat([1, 2, 3], 20)
    plain = zoo.build("hsi-pca-svm", n_components=4, C=0.05)
    zoo.train(plain, (X, y))
    for weights in ({2: 50.0}, {"2": 50.0}):
        model = zoo.build("hsi-pca-svm", n_components=4, C=0.05, class_weight=weights)
        zoo.train(model, (X, y))
        assert np.bincount(model.predict(X), minlength=4)[2] > np.bincount(plain.predict(X), minlength=4)[2]
    loaded = zoo.build("hsi-pca-svm", weights=zoo.save(model, tmp_path / "w.safetensors"))
    assert loaded.get_params()["svm__class_weight"] == {2: 50.0}
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    again = zoo.build("hsi-pca-svm", **loaded.zoo_state().config)  # a refit with the file's settings
    zoo.train(again, (X, y))
    np.testing.assert_array_equal(again.predict(X), model.predict(X))

    scene = make_scene(24, 24, 20, 3, block=6, seed=2)
    np.save(tmp_path / "cube.npy", scene.cube)
    np.save(tmp_path / "gt.npy", scene.labels)
    assert main(["train", "hsi-pca-svm", "--data", str(tmp_path / "cube.npy"), "--set", f"labels={tmp_path / 'gt.npy'}",
                 "split=random", "--model", "n_components=4", 'class_weight={"3": 2.5}',
                 "--out", str(tmp_path / "cli.safetensors")]) == 0, capsys.readouterr().err
    assert zoo.build("hsi-pca-svm", weights=tmp_path / "cli.safetensors").get_params()["svm__class_weight"] == {3: 2.5}
