"""Scenes that leave a choice to the user: a .mat ground truth holding several maps beside a cube of any format
(``gt_key=``), a .mat file holding several cubes (``cube_key=``), and a scene narrower than HybridSN's
``n_bands``; each choice is warned about or refused in words that name the way to make it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.io

import zoo
from zoo.cli import main
from zoo.hyperspectral.readers import SceneFormatError, load_scene
from zoo.hyperspectral.synthetic import make_scene


def _npy_with_two_maps(tmp_path):
    """A .npy cube and a .mat ground truth holding its map and a 0/1 mask (whose name leaves the pick open)."""
    s = make_scene(16, 16, 12, 3, block=4, seed=0)
    np.save(tmp_path / "cube.npy", np.asarray(s.cube))
    mask = (s.labels > 0).astype(np.uint8)
    mask[:, :8] = 0
    scipy.io.savemat(tmp_path / "gt.mat", {"map": s.labels, "mask_train": mask})
    return s, mask


def test_gt_key_picks_the_map_of_a_mat_ground_truth_beside_a_npy_cube(tmp_path):
    """Before: the warning said "pass gt_key=<name> to load_scene", and load_scene(cube.npy, gt=..., gt_key=...)
    raised "open_npy() got an unexpected keyword argument 'gt_key'"."""
    s, mask = _npy_with_two_maps(tmp_path)
    cube, gt = tmp_path / "cube.npy", tmp_path / "gt.mat"
    with pytest.warns(UserWarning, match=r"using 'map' .* pass gt_key=<name> to load_scene, zoo.train, zoo.evaluate "
                                         r"or zoo.predict \(--set gt_key=<name>"):
        np.testing.assert_array_equal(load_scene(cube, gt=gt).labels, s.labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the key given: no choice left to warn about
        scene = load_scene(cube, gt=gt, gt_key="mask_train")
    np.testing.assert_array_equal(scene.labels, mask)
    assert scene.metadata["gt_key"] == "mask_train"
    with pytest.raises(KeyError, match=r"gt_key='nope' is not in .*gt.mat; its arrays: map \(16, 16\), mask_train"):
        load_scene(cube, gt=gt, gt_key="nope")
    np.save(tmp_path / "gt.npy", s.labels)
    with pytest.raises(SceneFormatError, match=r"gt_key='map' names an array of a .mat ground truth file; .*gt.npy "
                                               r"is a .npy file holding one map: leave gt_key out"):
        load_scene(cube, gt=tmp_path / "gt.npy", gt_key="map")
    with pytest.raises(SceneFormatError, match=r"cube.npy is a .npy cube without one: give the .mat ground truth "
                                               r"with it \(gt=FILE.mat to load_scene, labels=FILE.mat"):
        load_scene(cube, gt_key="map")


def test_gt_key_passes_through_train_evaluate_predict_and_the_command_line(tmp_path, capsys):
    """Before: zoo.train / zoo.evaluate refused gt_key ("unknown option(s) 'gt_key'"), and so did --set gt_key=."""
    s, mask = _npy_with_two_maps(tmp_path)
    cube, gt = str(tmp_path / "cube.npy"), str(tmp_path / "gt.mat")
    svm = zoo.build("hsi-pca-svm", n_components=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zoo.train(svm, cube, labels=gt, gt_key="map", split="random")
        metrics = zoo.evaluate(svm, cube, labels=gt, gt_key="map")
        assert zoo.predict(svm, cube, gt_key=None).shape == (16, 16)
    assert metrics["n_test"] > 0
    # another map is read: its labelled pixels are all that is scored (the mask's 1s are class 1)
    with pytest.warns(UserWarning, match="were training pixels of this model"):
        mask_scores = zoo.evaluate(svm, cube, labels=gt, gt_key="mask_train", mask=mask > 0, on_overlap="exclude")
    assert mask_scores["n_test"] + mask_scores.get("excluded_training_pixels", 0) == int((mask > 0).sum())
    with pytest.raises(ValueError, match=r"gt_key='map' names an array of a .mat file this call reads; it got the "
                                         r"Scene 'synthetic-0'"):
        zoo.evaluate(svm, s, gt_key="map")
    with pytest.raises(ValueError, match=r"zoo.evaluate on \(X, y\) pixels got gt_key"):
        zoo.evaluate(svm, (s.pixels(s.labels > 0), s.labels[s.labels > 0]), gt_key="map")
    weights = zoo.save(svm, tmp_path / "svm.safetensors")
    capsys.readouterr()
    assert main(["eval", "hsi-pca-svm", "--weights", str(weights), "--data", cube, "--labels", gt,
                 "--set", "gt_key=map"]) == 0
    assert "overall_accuracy" in capsys.readouterr().out


def _two_cubes(tmp_path):
    """A .mat file holding a scene twice, as Indian Pines is distributed: 18 'raw' bands and 14 corrected ones."""
    s = make_scene(16, 16, 14, 3, block=4, seed=1)
    corr = np.asarray(s.cube)
    raw = np.concatenate([corr, corr[..., :4]], axis=2)
    scipy.io.savemat(tmp_path / "two.mat", {"scene_raw": raw, "scene_corrected": corr, "scene_gt": s.labels})
    return tmp_path / "two.mat"


def test_a_mat_file_with_two_cubes_warns_and_the_band_mismatch_names_cube_key(tmp_path):
    """Before: the larger cube was taken without a word, and a model fitted on the other refused the scene
    ("has 18 bands") without saying that the file holds one of its band count, nor how to read it."""
    path = _two_cubes(tmp_path)
    with pytest.warns(UserWarning, match=r"several arrays could be the cube; using the largest, 'scene_raw' \(18 "
                                         r"bands\), not 'scene_corrected' \(14 bands\): pass cube_key=<name>"):
        scene = load_scene(path)
    assert scene.n_bands == 18 and scene.metadata["other_cubes"] == {"scene_corrected": (16, 16, 14)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corrected = load_scene(path, cube_key="scene_corrected")
    assert corrected.n_bands == 14
    svm = zoo.build("hsi-pca-svm", n_components=4)
    zoo.train(svm, corrected, split="random")
    hint = r"its .mat file also holds 'scene_corrected' \(14 bands\): read that one with cube_key='scene_corrected'"
    with pytest.warns(UserWarning, match="cube_key="), pytest.raises(ValueError, match=r"has 18 bands .*" + hint):
        zoo.evaluate(svm, str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert zoo.evaluate(svm, str(path), cube_key="scene_corrected")["n_test"] > 0
        assert zoo.predict(svm, str(path), cube_key="scene_corrected").shape == (16, 16)
    net = zoo.build("hybridsn", n_bands=14, window=9)
    net.fit_preprocessor(corrected, corrected.labels > 0)
    with pytest.raises(ValueError, match=r"fitted on 14-band scenes.*" + hint):
        net.reduce(scene)
    with pytest.raises(KeyError, match=r"cube_key='nope' is not in .*two.mat; its arrays: scene_raw \(16, 16, 18\)"):
        load_scene(path, cube_key="nope")


def test_hybridsn_refuses_a_scene_narrower_than_n_bands_before_any_work():
    """Before: a warning "keeping all 20 components" from the PCA, then "PCA components must be (30, C_raw) for
    n_bands=30; got (20, 20)" from inside the model."""
    scene = make_scene(16, 16, 20, 3, block=4, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the PCA's warning would come before its error: it must not be reached
        with pytest.raises(ValueError, match=r"scene 'synthetic-2' has 20 bands, fewer than the n_bands=30 PCA "
                                             r"components this hybridsn takes .*zoo.build\('hybridsn', n_bands=N\) "
                                             r"for 13 <= N <= 20 \(13: the least its three 3-D convolutions take"):
            zoo.train(zoo.build("hybridsn", window=9), scene, split="random", epochs=1, progress=False)
        with pytest.raises(ValueError, match=r"has 20 bands, fewer than the n_bands=30"):  # the blocks split's
            zoo.train(zoo.build("hybridsn", window=9), scene, split="blocks", epochs=1, progress=False)  # warning came first
        narrow = make_scene(16, 16, 8, 3, block=4, seed=2)
        with pytest.raises(ValueError, match=r"has 8 bands.*hybridsn cannot classify it: its three 3-D convolutions "
                                             r"take n_bands >= 13"):
            zoo.build("hybridsn", window=9).fit_preprocessor(narrow, None)
    fitted = zoo.build("hybridsn", n_bands=20, window=9)  # the advised fix
    fitted.fit_preprocessor(scene, scene.labels > 0)
    assert fitted.reduce(scene).shape == (16, 16, 20)


@pytest.mark.parametrize("bad", ["negative", "nan"])
def test_a_scenes_own_ground_truth_that_is_no_label_map_is_refused_with_the_reason(tmp_path, bad):
    """Before: a ``gt`` of -1 for unlabelled (or NaN) was passed over: the scene had no labels, without a word,
    and zoo.train then asked for ground truth the file holds; given as gt=FILE.mat it said "no ground truth",
    not why."""
    s = make_scene(12, 12, 6, 3, seed=0)
    labels = np.where(np.arange(12)[:, None] % 3 == 0, 0, s.labels)  # every third row unlabelled
    gt = labels.astype(np.float64) - 1 if bad == "negative" else np.where(labels > 0, labels, np.nan)
    scipy.io.savemat(tmp_path / "scene.mat", {"cube": np.asarray(s.cube), "gt": gt})
    scipy.io.savemat(tmp_path / "cube.mat", {"cube": np.asarray(s.cube)})
    scipy.io.savemat(tmp_path / "gt.mat", {"gt": gt})
    why = r"must be >= 0 \(0 = unlabelled\); found -1" if bad == "negative" else r"must hold whole class ids .*; found fractions or NaN"
    with pytest.raises(SceneFormatError, match=rf"ground truth 'gt' {why}"):
        load_scene(tmp_path / "scene.mat")
    with pytest.raises(SceneFormatError, match=rf"ground truth 'gt' {why}"):
        load_scene(tmp_path / "cube.mat", gt=tmp_path / "gt.mat")
    assert load_scene(tmp_path / "scene.mat", ground_truth=False).labels is None  # a prediction needs none


def test_a_ground_truth_saved_with_a_band_axis_of_one_is_the_label_map(tmp_path):
    """Before: an (H, W, 1) ``gt`` was taken for a second cube ("several arrays could be the cube") and the
    scene had no labels; as gt=FILE.npy the same map was squeezed and read."""
    s = make_scene(12, 12, 6, 3, seed=0)
    scipy.io.savemat(tmp_path / "scene.mat", {"cube": np.asarray(s.cube), "gt": s.labels[:, :, None].astype(np.uint8)})
    scipy.io.savemat(tmp_path / "cube.mat", {"cube": np.asarray(s.cube)})
    scipy.io.savemat(tmp_path / "gt.mat", {"gt": s.labels[:, :, None].astype(np.uint8)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        own = load_scene(tmp_path / "scene.mat")
        given = load_scene(tmp_path / "cube.mat", gt=tmp_path / "gt.mat")
    np.testing.assert_array_equal(own.labels, s.labels)
    np.testing.assert_array_equal(given.labels, s.labels)
    assert own.n_bands == 6 and "other_cubes" not in own.metadata


def test_a_larger_3d_array_of_another_size_is_not_taken_for_the_cube_of_the_ground_truth(tmp_path):
    """Before: the largest 3-D array was the cube: reference chips (40, 40, 8) beside a (30, 20, 8) scene and its
    (30, 20) gt; the error then blamed the right ground truth, and a prediction read the chips without a word."""
    s = make_scene(30, 20, 8, 3, seed=0)
    chips = np.zeros((40, 40, 8), np.float32)
    scipy.io.savemat(tmp_path / "scene.mat", {"scene_cube": np.asarray(s.cube), "ref_chips": chips,
                                              "scene_gt": s.labels})
    with pytest.warns(UserWarning, match=r"took 'scene_cube' \(30, 20, 8\) as the cube; the file also holds the "
                                         r"3-D array\(s\) 'ref_chips' \(40, 40, 8\): pass cube_key=<name>"):
        scene = load_scene(tmp_path / "scene.mat")
    assert scene.shape == (30, 20, 8)
    np.testing.assert_array_equal(scene.labels, s.labels)
    with pytest.warns(UserWarning, match=r"took 'scene_cube'"):
        assert load_scene(tmp_path / "scene.mat", ground_truth=False).shape == (30, 20, 8)
    # a ground truth that fits no 3-D array: the error names the array taken and cube_key=
    scipy.io.savemat(tmp_path / "odd.mat", {"ref_chips": chips, "other": np.zeros((10, 10, 2), np.float32),
                                            "scene_gt": s.labels})
    with pytest.warns(UserWarning, match=r"took 'ref_chips'"), \
            pytest.raises(SceneFormatError, match=r"does not match the \(H, W\) = \(40, 40\) of the cube "
                                                  r"'ref_chips'.*pass cube_key=<name>"):
        load_scene(tmp_path / "odd.mat")
