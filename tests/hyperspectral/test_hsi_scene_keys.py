"""HybridSN on a scene narrower than its ``n_bands`` PCA components: refused before any work, in words that
name the ``n_bands=`` to build it with."""

from __future__ import annotations

import warnings

import pytest

import zoo
from zoo.hyperspectral.synthetic import make_scene


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
        narrow = make_scene(16, 16, 8, 3, block=4, seed=2)
        with pytest.raises(ValueError, match=r"has 8 bands.*hybridsn cannot classify it: its three 3-D convolutions "
                                             r"take n_bands >= 13"):
            zoo.build("hybridsn", window=9).fit_preprocessor(narrow, None)
    fitted = zoo.build("hybridsn", n_bands=20, window=9)  # the advised fix
    fitted.fit_preprocessor(scene, scene.labels > 0)
    assert fitted.reduce(scene).shape == (16, 16, 20)
