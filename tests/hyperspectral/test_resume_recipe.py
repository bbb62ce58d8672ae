"""HybridSN on a scene resumes only on the scene, split and window recipe it was trained with: a resume on
another split would train on pixels the first split tested on, and the recorded training pixels (the
evaluation's leakage guard) would only hold the new split's."""

from __future__ import annotations

import shutil

import pytest
import torch

import zoo
from zoo.engine import ResumeError
from zoo.hyperspectral.synthetic import make_scene

ARCH = {"n_bands": 13, "num_classes": 3, "window": 9}


def _train(scene, folder, epochs, **options):
    torch.manual_seed(0)
    options = {"split": "random", "train_fraction": 0.3, "batch_size": 64, "amp": None, "progress": False, **options}
    return zoo.train(zoo.build("hybridsn", **ARCH), scene, epochs=epochs, checkpoint_dir=folder, **options)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("hsi_resume")
    scene = make_scene(24, 24, 20, 3, seed=0)
    _train(scene, base / "run", 1)
    return base, scene


@pytest.mark.parametrize(("change", "said"), [
    ({"split": "blocks", "block": 8}, "data.split: 'random' in epoch-0001.pt, 'blocks' now"),
    ({"train_fraction": 0.5}, "data.train_fraction: 0.3 in epoch-0001.pt, 0.5 now"),
    ({"seed": 1}, "seed: 0 in epoch-0001.pt, 1 now"),
    ({"augment": True}, "data.augment: False in epoch-0001.pt, True now"),
    ({"noise_std": 0.5}, "data.noise_std: 0.0 in epoch-0001.pt, 0.5 now"),
    ({"scene": 9}, "data.scene: '24x24x20, "),
])
def test_a_changed_scene_split_or_recipe_is_refused(first_run, tmp_path, change, said):
    base, scene = first_run
    change = dict(change)
    if "scene" in change:
        scene = make_scene(24, 24, 20, 3, seed=change.pop("scene"))
    run = shutil.copytree(base / "run", tmp_path / "run")
    with pytest.raises(ResumeError) as err:
        _train(scene, run, 2, resume=True, **change)
    assert said in str(err.value)
    if change.get("split") == "blocks":  # other training pixels: some were test pixels of the first epoch
        assert "data.train_pixels: " in str(err.value)


def test_the_same_recipe_resumes_and_its_evaluation_keeps_the_leakage_guard(first_run, tmp_path):
    base, scene = first_run
    run = shutil.copytree(base / "run", tmp_path / "run")
    result = _train(scene, run, 2, resume=True)
    assert result.resumed["changed"] == {"epochs": (1, 2)}
    recorded = torch.load(run / "epoch-0002.pt", weights_only=True)["config"]
    assert recorded["data.split"] == "random" and recorded["model.window"] == 9
    scores = zoo.evaluate(result.model, scene)  # the split's own test pixels: none was trained on
    assert 0.0 <= scores["overall_accuracy"] <= 1.0


def test_a_checkpoint_that_records_n_classes_builds_and_resumes(first_run, tmp_path):
    """Checkpoints written while HybridSN's class count was n_classes record model.n_classes: zoo.build reads
    it as num_classes, without a warning the user could do nothing about, and the run resumes."""
    import warnings

    base, scene = first_run
    run = shutil.copytree(base / "run", tmp_path / "run")
    checkpoint = torch.load(run / "epoch-0001.pt", weights_only=True)
    checkpoint["config"]["model.n_classes"] = checkpoint["config"].pop("model.num_classes")
    torch.save(checkpoint, run / "epoch-0001.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert zoo.build("hybridsn", weights=run / "epoch-0001.pt").config.num_classes == 3
    assert _train(scene, run, 2, resume=True).resumed["changed"] == {"epochs": (1, 2)}
    # and its class count is compared as the run's: it was left out, the head's shapes failing later instead
    run = shutil.copytree(base / "run", tmp_path / "run4")
    checkpoint["config"]["model.n_classes"] = 4
    torch.save(checkpoint, run / "epoch-0001.pt")
    with pytest.raises(ValueError, match=r"model.num_classes: 4 in epoch-0001.pt, 3 now"):
        _train(scene, run, 2, resume=True)
