"""A trained HybridSN given a scene of another band count says what hsi-pca-svm says for the same mistake: the
model, both band counts and how to fix the call. It said only "the preprocessing was fitted on 16-band scenes;
got cube shape (20, 20, 12)", naming neither the model nor a fix."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

import zoo
from zoo.hyperspectral import Scene
from zoo.hyperspectral.synthetic import make_scene


@pytest.fixture(scope="module")
def trained():
    """hsi-pca-svm and a HybridSN (n_bands=13, the least its 3-D convolutions take) trained on one 16-band scene."""
    scene = make_scene(20, 20, 16, 3, block=5, seed=0)
    torch.manual_seed(0)
    svm = zoo.build("hsi-pca-svm", n_components=5)
    net = zoo.build("hybridsn", n_bands=13, window=9, num_classes=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny scene's split warnings are not what is tested here
        zoo.train(svm, scene, split="random")
        zoo.train(net, scene, split="random", epochs=1, progress=False)
    return scene, svm, net


def _message(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


def test_hybridsn_on_fewer_bands_names_itself_both_counts_and_the_fix(trained):
    scene, _, net = trained
    cube = scene.cube[:, :, :12].copy()
    want = (r"hybridsn was fitted on 16-band scenes; scene 'scene' has 12 bands \(hybridsn takes scenes of at least "
            r"13 bands: train hsi-pca-svm on this one, or use a scene with the same 16 bands\)$")
    for call in (lambda: zoo.predict(net, cube), lambda: net.predict_scene(Scene(cube)),
                 lambda: zoo.evaluate(net, Scene(cube, labels=scene.labels))):
        assert re.search(want, _message(call))


def test_hybridsn_on_a_band_first_cube_says_to_transpose_it_as_hsi_pca_svm_does(trained):
    scene, svm, net = trained
    first = np.ascontiguousarray(scene.cube.transpose(2, 0, 1))  # (16, 20, 20): as rasterio reads it
    own = _message(lambda: zoo.predict(net, first))
    assert own.startswith("hybridsn was fitted on 16-band scenes; scene 'scene' has 20 bands (train it on this "
                          "scene with zoo.train, or use a scene with the same 16 bands)")
    assert own.endswith("pass cube.transpose(1, 2, 0)")
    # one check for both models: the same words but the model's name
    assert own.replace("hybridsn", "hsi-pca-svm") == _message(lambda: zoo.predict(svm, first))


def test_hybridsn_says_which_n_bands_fits_a_scene_narrower_than_its_own():
    """Between the least bands its layers take (13) and its n_bands (15): training it on the scene would be
    refused, one built with fewer components would not."""
    net = zoo.build("hybridsn", n_bands=15, window=9, num_classes=3)
    scene = make_scene(20, 20, 16, 3, block=5, seed=0)
    net.fit_preprocessor(scene, scene.labels > 0)
    with pytest.raises(ValueError, match=r"hybridsn was fitted on 16-band scenes; scene 'scene' has 14 bands \(train "
                                         r"a hybridsn built with n_bands <= 14 on this scene with zoo\.train"):
        net.predict_scene(Scene(scene.cube[:, :, :14].copy()))
    with pytest.raises(ValueError, match=r"hybridsn was fitted on 16-band scenes; an array of shape \(20, 20\) is not "
                                         r"an \(H, W, C\) cube: pass the scene's cube, its 16 bands last"):
        net.reduce(scene.cube[:, :, 0])
