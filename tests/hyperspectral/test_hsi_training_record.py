"""Weights know their training pixels: no evaluation scores them (refused, or excluded and counted); a model
fitted on one band count says so on another; the CLI takes ground truth (--labels) and training masks for any
scene format, and picks spatial blocks on a user's scene without a mask."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import zoo
from zoo.cli import main
from zoo.hyperspectral import random_split
from zoo.hyperspectral.readers import SceneFormatError, load_scene, save_envi
from zoo.hyperspectral.synthetic import make_scene


@pytest.fixture(scope="module")
def indian_pines(shared_data):
    if not (shared_data / "hyperspectral/indian_pines/Indian_pines_corrected.npy").exists():
        pytest.skip(f"Indian Pines not found under {shared_data}")
    from zoo.hyperspectral.datasets import load_dataset

    return load_dataset("indian_pines")


def test_shipped_svm_on_a_scene_with_other_bands_names_both_counts():
    svm = zoo.build("hsi-pca-svm", weights="indian-pines")
    scene = make_scene(20, 20, 30, 3)
    with pytest.raises(ValueError, match=r"fitted on 200-band scenes; scene 'synthetic-0' has 30 bands"):
        zoo.evaluate(svm, scene, split="random")
    with pytest.raises(ValueError, match=r"X has 30 features, but BandStandardizer is expecting 200 features"):
        svm.predict(scene.pixels())


def test_shipped_weights_record_their_training_pixels(indian_pines):
    own = random_split(indian_pines.labels, 0.3, seed=0).train
    for name in ("hsi-pca-svm", "hybridsn"):
        model = zoo.build(name, weights="indian-pines")
        record = model.training_record_
        assert record.matches(indian_pines) and record.n_train == 3074
        np.testing.assert_array_equal(record.train_mask, own)
        assert model.split_["split"] == "random" and model.split_["seed"] == 0


def test_shipped_svm_refuses_blocks_split_that_scores_training_pixels(indian_pines):
    """Before: OA ~100 on 29 % training pixels, no warning."""
    svm = zoo.build("hsi-pca-svm", weights="indian-pines")
    # the blocks split's own numbers (since 2026-12-07 a tile taking a class far past its share stays in test)
    with pytest.raises(ValueError, match=r"354 of the 1088 test pixels \(33%\) were training pixels"):
        zoo.evaluate(svm, indian_pines, split="blocks")
    with pytest.warns(UserWarning, match="excluded, scoring the other 734"):
        m = zoo.evaluate(svm, indian_pines, split="blocks", on_overlap="exclude")
    assert m["n_test"] == 734 and m["excluded_training_pixels"] == 354
    own = zoo.evaluate(svm, indian_pines)  # its recorded split: nothing to exclude
    assert own["n_test"] == 7175 and "excluded_training_pixels" not in own
    assert own["overall_accuracy"] == pytest.approx(0.86411, abs=1e-4)  # 86.41 % (fractions, as every zoo metric)


def test_cli_eval_refuses_overlap_in_one_line(indian_pines, capsys):
    assert main(["eval", "hsi-pca-svm", "--weights", "indian-pines", "--set", "split=blocks"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]  # (the pull's progress bar aside)
    assert len(err) == 1 and "were training pixels of this model" in err[0] and "on_overlap=exclude" in err[0]
    with pytest.warns(UserWarning, match="excluded"):
        assert main(["eval", "hsi-pca-svm", "--weights", "indian-pines", "--set", "split=blocks",
                     "on_overlap=exclude"]) == 0
    assert "excluded_training_pixels: 354" in capsys.readouterr().out


def test_saved_svm_and_hybridsn_carry_the_training_mask(tmp_path):
    from zoo.hyperspectral.provenance import scene_fingerprint
    from zoo.hyperspectral.scene_model import TRAINING_KEY

    scene = make_scene(36, 36, 20, 3, seed=5)
    svm = zoo.build("hsi-pca-svm", n_components=5)
    zoo.train(svm, scene, split="random", train_fraction=0.3, seed=1)
    net = zoo.build("hybridsn", n_bands=13, num_classes=3, window=9)
    zoo.train(net, scene, split="random", train_fraction=0.3, seed=1, epochs=1, batch_size=64, progress=False)
    loaded = [zoo.build("hsi-pca-svm", weights=str(svm.save(tmp_path / "svm.safetensors"))),
              zoo.build("hybridsn", weights=str(net.save(tmp_path / "net.safetensors")), n_bands=13, num_classes=3,
                        window=9)]
    for model in loaded:
        np.testing.assert_array_equal(model.training_record_.train_mask, svm.last_split_.train)
        assert model.training_record_.fingerprint == scene_fingerprint(scene)
        zoo.evaluate(model, scene)  # the recorded split: no overlap
        with pytest.raises(ValueError, match="were training pixels of this model"):
            zoo.evaluate(model, scene, split="random", seed=2)
        other = make_scene(36, 36, 20, 3, seed=6)  # another scene: nothing of it was trained on
        zoo.evaluate(model, other, split="random", seed=2)
    assert TRAINING_KEY in zoo.hub.load_state_dict(tmp_path / "net.safetensors")


def test_a_plain_fit_forgets_the_split_an_earlier_train_recorded(tmp_path):
    """svm.fit on every labelled pixel after zoo.train kept the old split: evaluate scored training pixels as
    its test set (OA 1.0 on 717 pixels), and so did a model built from its saved file."""
    scene = make_scene(32, 32, 20, 3, seed=0)
    X, y = scene.cube.reshape(-1, 20), scene.labels.reshape(-1)
    svm = zoo.build("hsi-pca-svm", n_components=5)
    zoo.train(svm, scene, split="random")
    assert svm.training_record_ is not None and svm.split_["split"] == "random"
    assert svm.fit(X[y > 0], y[y > 0]) is svm
    assert svm.training_record_ is None and svm.split_ is None
    saved = zoo.build("hsi-pca-svm", weights=zoo.save(svm, tmp_path / "s.safetensors"))
    for model in (svm, saved):
        with pytest.raises(ValueError, match="records no training split"):
            zoo.evaluate(model, scene)
    zoo.train(svm, scene, split="random", seed=1)  # zoo.train records its own split again, after its fit
    assert svm.split_["seed"] == 1 and 0 < zoo.evaluate(svm, scene)["n_test"] < int((y > 0).sum())


def test_hybridsn_trained_again_on_windows_forgets_its_scene_split():
    """As hsi-pca-svm's fit (996a253): a HybridSN trained on a scene, then on windows of every labelled pixel,
    kept the scene's split, and evaluate scored the pixels it had just trained on as held out (OA 0.95)."""
    from zoo.hyperspectral.patches import PatchDataset

    scene = make_scene(24, 24, 20, 3, seed=0)
    net = zoo.build("hybridsn", n_bands=15, num_classes=3, window=9)
    zoo.train(net, scene, split="random", epochs=1, progress=False)
    assert net.split_["split"] == "random" and net.training_record_ is not None
    windows = PatchDataset.from_mask(net.reduce(scene), scene.labels, scene.labels > 0, window=9)
    zoo.train(net, windows, epochs=1, progress=False)
    assert net.split_ is None and net.training_record_ is None
    with pytest.raises(ValueError, match="records no training split"):
        zoo.evaluate(net, scene)


def test_weights_without_a_record_warn(tmp_path):
    scene = make_scene(24, 24, 12, 3, seed=7)
    svm = zoo.build("hsi-pca-svm", n_components=4)
    zoo.train(svm, (scene.pixels(scene.labels > 0), scene.labels[scene.labels > 0]))
    with pytest.warns(UserWarning, match="records no training pixels"):
        zoo.evaluate(svm, scene, split="random")


def test_record_round_trip_and_malformed_records():
    from zoo.hyperspectral.provenance import TrainingRecord

    scene = make_scene(13, 7, 5, 2)
    mask = np.zeros((13, 7), bool)
    mask[::3, 1::2] = True
    rec = TrainingRecord.from_mask(scene, mask, {"split": "random"})
    again = TrainingRecord.from_json(rec.to_json())
    np.testing.assert_array_equal(again.train_mask, mask)
    assert again == rec and again.matches(scene)
    bad = rec.to_json() | {"train_mask_packbits": "AAAA"}
    with pytest.raises(ValueError, match="mask bytes"):
        TrainingRecord.from_json(bad)
    with pytest.raises(ValueError, match="malformed training record"):
        TrainingRecord.from_json({"scene": "x"})


def _user_scene(tmp_path, fmt):
    """A user's scene in ``fmt`` and its ground truth as a separate file of the same kind."""
    scene = make_scene(48, 48, 16, 3, block=8, seed=2)
    labels = scene.labels.astype(np.uint8)
    if fmt == "npy":
        np.save(tmp_path / "cube.npy", scene.cube)
        np.save(tmp_path / "gt.npy", labels)
        return scene, tmp_path / "cube.npy", tmp_path / "gt.npy"
    if fmt == "envi":
        save_envi(tmp_path / "cube.hdr", scene.cube)
        save_envi(tmp_path / "gt.hdr", labels[:, :, None])
        return scene, tmp_path / "cube.hdr", tmp_path / "gt.hdr"
    np.save(tmp_path / "cube.npy", scene.cube)
    Image.fromarray(labels, mode="L").save(tmp_path / "gt.png")
    return scene, tmp_path / "cube.npy", tmp_path / "gt.png"


@pytest.mark.parametrize("fmt", ["npy", "envi", "png"])
def test_cli_labels_for_any_scene_format_and_blocks_by_default(tmp_path, capsys, fmt):
    """Before: no way to give ground truth for a .npy or ENVI cube on the command line."""
    scene, cube, gt = _user_scene(tmp_path, fmt)
    np.testing.assert_array_equal(load_scene(cube, gt=gt).labels, scene.labels)
    out = tmp_path / "svm.safetensors"
    code = main(["train", "hsi-pca-svm", "--data", str(cube), "--labels", str(gt), "--model", "n_components=4",
                 "--set", "window=5", "block=8", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "split: blocks (spatial tiles, the honest default" in printed
    model = zoo.build("hsi-pca-svm", weights=str(out))
    assert model.split_["split"] == "blocks"
    assert main(["eval", "hsi-pca-svm", "--weights", str(out), "--data", str(cube), "--labels", str(gt)]) == 0
    printed = capsys.readouterr().out
    assert "split: blocks (recorded in the weights)" in printed and "overall_accuracy" in printed


def test_cli_disjoint_split_from_a_training_mask_file(tmp_path, capsys):
    scene, cube, gt = _user_scene(tmp_path, "npy")
    mask = np.zeros(scene.labels.shape, np.uint8)
    mask[:, :20] = 1  # train on the left, test on the right: a 0/1 mask selects pixels
    Image.fromarray(mask, mode="L").save(tmp_path / "mask.png")
    out = tmp_path / "svm.safetensors"
    assert main(["train", "hsi-pca-svm", "--data", str(cube), "--labels", str(gt), "--model", "n_components=4",
                 "--set", f"train_mask={tmp_path / 'mask.png'}", "--out", str(out)]) == 0
    assert "split: disjoint (a training mask was given" in capsys.readouterr().out
    model = zoo.build("hsi-pca-svm", weights=str(out))
    np.testing.assert_array_equal(model.training_record_.train_mask, (mask > 0) & (scene.labels > 0))
    m = zoo.evaluate(model, load_scene(cube, gt=gt))  # the recorded disjoint split, its mask from the weights
    assert m["n_test"] == int(((scene.labels > 0) & (mask == 0)).sum())
    np.save(tmp_path / "short.npy", mask[:40])
    assert main(["train", "hsi-pca-svm", "--data", str(cube), "--labels", str(gt),
                 "--set", f"train_mask={tmp_path / 'short.npy'}"]) == 2
    assert "training mask has shape (40, 48); the scene is (H, W) = (48, 48)" in capsys.readouterr().err


def test_label_files_that_do_not_fit_are_errors(tmp_path):
    _, cube, _ = _user_scene(tmp_path, "npy")
    rgb = np.zeros((48, 48, 3), np.uint8)
    Image.fromarray(rgb, mode="RGB").save(tmp_path / "rgb.png")
    with pytest.raises(SceneFormatError, match="RGB image; a label map must have one channel"):
        load_scene(cube, gt=tmp_path / "rgb.png")
    np.save(tmp_path / "frac.npy", np.full((48, 48), 0.5))
    with pytest.raises(SceneFormatError, match="whole class ids"):
        load_scene(cube, gt=tmp_path / "frac.npy")
    (tmp_path / "gt.txt").write_text("1 2 3")
    with pytest.raises(SceneFormatError, match="unknown ground truth format '.txt'"):
        load_scene(cube, gt=tmp_path / "gt.txt")
    assert main(["train", "hsi-pca-svm", "--data", str(cube), "--labels", str(tmp_path / "none.npy")]) == 2


def test_training_the_svm_pipeline_leaves_the_callers_random_streams_where_they_were():
    """As every family's run (README: a run puts the caller's generator states back): SVC.fit drew libsvm's seed from
    NumPy's global generator, which moved the caller's; a sweep drawing from it between runs drew other trials."""
    import random

    import torch

    scene = make_scene(24, 24, 12, 3, seed=2)

    def draws():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    untouched = [draws(), draws()]
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    got = [draws()]
    zoo.train("hsi-pca-svm", scene, split="random", model_config={"n_components": 4}, seed=0)
    got.append(draws())
    assert got == untouched


@pytest.mark.parametrize("split", ["blocks", "random"])
@pytest.mark.parametrize("fraction", [1.5, 0.0, -0.5, "abc", True])
def test_train_fraction_outside_zero_to_one_is_refused_by_every_split(split, fraction):
    """The blocks split (a scene's default) took 1.5 (768 of 1,024 pixels to train, 16 to test) without a word, and a
    string failed in a comparison that named no option."""
    with pytest.raises(ValueError, match=r"train_fraction must be in \(0, 1\); got "):
        zoo.train("hsi-pca-svm", make_scene(32, 32, 12, 3), split=split, train_fraction=fraction, window=1)
