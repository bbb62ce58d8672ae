"""Windows at borders, split overlap (random detected, disjoint clean), metrics against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.hyperspectral import (
    PatchDataset,
    disjoint_mask_split,
    overlap_report,
    random_split,
    spatial_block_split,
)
from zoo.hyperspectral.evaluation import score_map
from zoo.hyperspectral.patches import pad_cube
from zoo.hyperspectral.synthetic import make_scene


def test_patches_at_borders():
    h, w, c = 6, 5, 3
    cube = np.arange(h * w * c, dtype=np.float32).reshape(h, w, c)
    labels = np.arange(1, h * w + 1).reshape(h, w)
    coords = np.array([[0, 0], [5, 4], [2, 2], [0, 4]])
    for mode, ref in [("constant", "constant"), ("reflect", "reflect"), ("edge", "edge"), ("symmetric", "symmetric")]:
        ds = PatchDataset(cube, coords, labels, window=5, padding=mode)
        padded = np.pad(cube, ((2, 2), (2, 2), (0, 0)), mode=ref)
        for i, (r, cc) in enumerate(coords):
            x, y = ds[i]
            assert tuple(x.shape) == (1, c, 5, 5)
            np.testing.assert_array_equal(x[0].numpy(), padded[r:r + 5, cc:cc + 5].transpose(2, 0, 1))
            np.testing.assert_array_equal(x[0, :, 2, 2].numpy(), cube[r, cc])  # centre is the pixel itself
            assert int(y) == labels[r, cc] - 1
    corner = PatchDataset(cube, [[0, 0]], labels, window=5, padding="constant")[0][0][0]
    assert (corner[:, :2, :].numpy() == 0).all() and (corner[:, :, :2].numpy() == 0).all()
    # one padded copy, items are views of it: no per-window materialisation
    ds = PatchDataset(cube, np.argwhere(labels > 0), labels, window=5)
    assert ds[0][0].untyped_storage().data_ptr() == ds.padded.untyped_storage().data_ptr()
    assert len(ds) == h * w
    with pytest.raises(ValueError, match="odd"):
        PatchDataset(cube, coords, labels, window=4)
    with pytest.raises(ValueError, match="outside"):
        PatchDataset(cube, [[6, 0]], labels, window=3)
    with pytest.raises(ValueError, match="reflect"):
        pad_cube(cube, 7, "reflect")
    unl = PatchDataset(cube, [[0, 0]], np.zeros((h, w), int), window=3)
    assert int(unl[0][1]) == -100
    # augmentation: each item is one of the 8 quarter-turn / mirror versions of the window, centre unchanged
    plain = PatchDataset(cube, coords, labels, window=5)[2][0][0].numpy()
    variants = [np.rot90(plain, k, axes=(1, 2)) for k in range(4)]
    variants += [v[:, :, ::-1] for v in variants]
    aug = PatchDataset(cube, coords, labels, window=5, augment=True)
    torch.manual_seed(0)
    seen = set()
    for _ in range(40):
        x = aug[2][0][0].numpy()
        match = [i for i, v in enumerate(variants) if np.array_equal(v, x)]
        assert match, "augmented window is not a rotation/mirror of the window"
        seen.add(match[0])
        np.testing.assert_array_equal(x[:, 2, 2], cube[2, 2])
    assert len(seen) >= 6


def test_random_split_overlap_is_detected():
    scene = make_scene(40, 40, 10, 4, seed=0)
    sp = random_split(scene.labels, 0.3, seed=0)
    assert not (sp.train & sp.test).any()
    assert sp.train.sum() + sp.test.sum() == (scene.labels > 0).sum()
    for k in range(1, 5):  # stratified: each class near 30 % train
        n = (scene.labels == k).sum()
        assert abs(sp.train[scene.labels == k].sum() - 0.3 * n) <= 1
    rep = sp.overlap(window=25)
    assert rep["overlapping"] and rep["overlap_fraction"] > 0.95
    assert not sp.overlap(window=1)["overlapping"]  # a pixel classifier sees only its own pixel


@pytest.mark.parametrize("seed", range(6))
def test_a_block_split_keeps_every_class_of_several_tiles_in_both_sets(seed):
    """A class of one pixel in one tile and 16 in another went wholly to train when its 1-pixel tile was drawn
    first (1 < 0.3 * 17, so the loop took the big tile too), or when another class's draw took its last tile."""
    labels = np.zeros((4, 12), int)
    labels[0, 0] = 1  # tile 0: one pixel of class 1
    labels[:, 4:8] = 1  # tile 1: sixteen pixels of class 1
    labels[:, 8:12] = 2
    labels[0:2, 1] = 2  # class 2 in tiles 2 and 0
    sp = spatial_block_split(labels, block=4, train_fraction=0.3, window=1, seed=seed)
    for cls in (1, 2):
        assert (sp.train & (labels == cls)).any() and (sp.test & (labels == cls)).any(), (cls, seed)
    assert not (sp.train & sp.test).any() and ((sp.train | sp.test) == (labels > 0)).all()


def test_disjoint_splits_have_no_overlap():
    scene = make_scene(96, 96, 10, 4, block=8, seed=1)
    sp = spatial_block_split(scene.labels, block=24, train_fraction=0.3, window=9, seed=0)
    rep = overlap_report(sp.train, sp.test, 9)
    assert not rep["overlapping"] and rep["test_pixels"] > 0 and sp.train.sum() > 0
    assert sp.info["test_dropped_by_guard"] > 0
    # a given training mask with its own class numbering (as indianpines_disjoint_dset.mat)
    mask = np.zeros_like(scene.labels)
    left = np.zeros(scene.labels.shape, bool)
    left[:, :30] = True
    perm = {1: 3, 2: 1, 3: 4, 4: 2}
    for gt_cls, mask_cls in perm.items():
        mask[left & (scene.labels == gt_cls)] = mask_cls
    dj = disjoint_mask_split(scene.labels, mask, window=9, guard=True)
    assert dj.info["class_mapping"] == {v: k for k, v in perm.items()}
    assert not dj.overlap(9)["overlapping"] and dj.test.sum() > 0
    assert (scene.labels[dj.train] > 0).all() and not (dj.train & dj.test).any()
    unguarded = disjoint_mask_split(scene.labels, mask, window=9)
    assert unguarded.overlap(9)["overlapping"]  # neighbours across the boundary are reported, not hidden


def test_real_disjoint_mask(shared_data):
    from zoo.hyperspectral.datasets import load_dataset

    if not (shared_data / "hyperspectral" / "indian_pines" / "indianpines_disjoint_dset.mat").exists():
        pytest.skip("Indian Pines disjoint mask not in the shared data")
    scene = load_dataset("indian_pines")
    dj = disjoint_mask_split(scene.labels, scene.metadata["train_mask"], window=25)
    assert dj.info["class_mapping"][1] == 2 and dj.info["class_mapping"][10] == 1
    assert dj.train.sum() == 5528 and dj.test.sum() == 4711
    assert not dj.overlap(1)["overlapping"] and dj.overlap(25)["overlapping"]


def test_metrics_against_hand_computed_values():
    labels = np.array([[1, 1, 1, 2, 2, 0], [3, 3, 3, 3, 0, 0]])
    pred = np.array([[1, 1, 2, 2, 2, 3], [3, 3, 1, 3, 1, 1]])
    mask = np.ones_like(labels, bool)
    s = score_map(pred, labels, mask, num_classes=3)
    # confusion rows (true) 1: [2, 1, 0]; 2: [0, 2, 0]; 3: [1, 0, 3]  -> 7 of 9 right
    np.testing.assert_array_equal(s["confusion_matrix"], [[2, 1, 0], [0, 2, 0], [1, 0, 3]])
    assert s["overall_accuracy"] == pytest.approx(100 * 7 / 9)
    assert s["average_accuracy"] == pytest.approx(100 * (2 / 3 + 1 + 3 / 4) / 3)
    p_e = (3 * 3 + 2 * 3 + 4 * 3) / 81  # row totals 3, 2, 4; column totals 3, 3, 3
    assert s["kappa"] == pytest.approx(100 * (7 / 9 - p_e) / (1 - p_e))
    assert s["per_class_accuracy"] == pytest.approx([200 / 3, 100.0, 75.0])
    assert s["n_test"] == 9


def test_score_map_takes_the_class_count_as_num_classes_and_its_old_name_with_a_warning():
    labels = np.array([[1, 2, 0]])
    mask = np.ones_like(labels, bool)
    assert len(score_map(labels, labels, mask, num_classes=4)["per_class_accuracy"]) == 4
    with pytest.warns(FutureWarning, match="score_map: n_classes is renamed num_classes"):
        assert len(score_map(labels, labels, mask, n_classes=4)["per_class_accuracy"]) == 4
    with pytest.raises(TypeError, match="num_classes=4 and n_classes=5 name one setting"):
        score_map(labels, labels, mask, num_classes=4, n_classes=5)


def test_patch_noise_is_fresh_per_item_and_leaves_the_cube_clean():
    cube = np.arange(6 * 6 * 3, dtype=np.float32).reshape(6, 6, 3)
    labels = np.ones((6, 6), int)
    plain = PatchDataset(cube, [[2, 3]], labels, window=3)[0][0]
    noisy = PatchDataset(cube, [[2, 3]], labels, window=3, noise_std=0.5)
    torch.manual_seed(0)
    a, b = noisy[0][0], noisy[0][0]
    assert not torch.equal(a, b), "noise must be drawn per item"
    assert 0.3 < float((a - plain).std()) < 0.7  # the requested spread, around the clean window
    assert torch.equal(noisy.padded, PatchDataset(cube, [[2, 3]], labels, window=3).padded)
    with pytest.raises(ValueError, match="noise_std"):
        PatchDataset(cube, [[2, 3]], labels, window=3, noise_std=-1.0)


def test_holdout_blocks_takes_whole_tiles_within_each_class_budget():
    from zoo.hyperspectral.splits import holdout_blocks

    scene = make_scene(48, 48, 10, 4, block=12, seed=1)
    train = scene.labels > 0
    labels = scene.labels
    fit_part, held = holdout_blocks(train, labels, 0.25, block=8, seed=0)
    assert not (fit_part & held).any() and np.array_equal(fit_part | held, train)
    assert held.any()
    for c in range(1, 5):  # no class gives more than its share
        assert (labels[held] == c).sum() <= 0.25 * (labels[train] == c).sum()
    tile = (np.arange(48)[:, None] // 8) * 6 + np.arange(48)[None, :] // 8
    for t in np.unique(tile[held]):  # a held-out tile has none of its training pixels left in fit_part
        assert not (fit_part & (tile == t)).any()
    again = holdout_blocks(train, labels, 0.25, block=8, seed=0)
    assert np.array_equal(again[1], held)  # seeded
    one = np.zeros((48, 48), bool)
    one[:4, :4] = True  # one class inside a single tile: nothing can be held out without taking all of it
    assert not holdout_blocks(one, one.astype(int), 0.5, block=8)[1].any()
    with pytest.raises(ValueError, match="fraction"):
        holdout_blocks(train, labels, 1.0)


def test_a_class_of_one_pixel_goes_to_training_and_the_others_stay_stratified():
    """Before: one stray pixel of a class turned stratification off for the whole split, without a word: a 9-pixel
    class took 56 % or 44 % of its pixels for training instead of a third."""
    from zoo.hyperspectral.splits import random_split

    labels = np.zeros((20, 20), np.int64)
    labels[:10, :] = 1  # 200 pixels
    labels[10:13, :10] = 2  # 30 pixels
    labels[15, :9] = 3  # 9 pixels
    labels[19, 19] = 4  # one stray pixel
    for seed in range(4):
        with pytest.warns(UserWarning, match=r"class\(es\) \[4\] have one labelled pixel each: it goes to training"):
            sp = random_split(labels, 1 / 3, seed=seed)
        assert sp.train[19, 19] and sp.info["stratified"]
        taken = [int(sp.train[labels == c].sum()) for c in (1, 2, 3)]
        assert all(abs(n - share) <= 1 for n, share in zip(taken, (200 / 3, 10, 3))), taken


@pytest.mark.parametrize("block", [0, -4, 2.5, True])
def test_a_block_side_that_is_no_positive_whole_number_is_refused(block):
    """Before: 0 was a bare ZeroDivisionError, -4 tiled the scene meaninglessly, True and 2.5 were taken."""
    from zoo.hyperspectral.splits import spatial_block_split

    labels = make_scene(16, 16, 4, 3, seed=0).labels
    with pytest.raises((ValueError, TypeError), match=r"block must be an int >= 1 \(the side of a tile"):
        spatial_block_split(labels, block=block)


@pytest.mark.parametrize(("split", "option"), [("random", {"train_mask": "mask"}), ("blocks", {"train_mask": "mask"}),
                                               ("random", {"guard": True})])
def test_a_split_option_the_chosen_split_never_reads_is_refused(split, option):
    """Before: train_mask= with split="random" (or "blocks") was ignored: pixels set aside for testing were
    trained on (186 of 268 training pixels outside the mask), without a word."""
    from zoo.hyperspectral.evaluation import resolve_split

    scene = make_scene(16, 16, 4, 3, seed=0)
    if "train_mask" in option:
        option = {"train_mask": scene.labels * (np.arange(16)[:, None] < 8)}
    with pytest.raises(ValueError, match=rf"split={split!r} does not read {next(iter(option))}="):
        resolve_split(scene, split=split, **option)


def test_a_split_of_0_1_masks_is_a_split_of_booleans_and_other_values_are_refused():
    """Before: a Split of uint8 masks (read back from .npy or a PNG) was kept as such, and labels[split.train]
    indexed rows 0 and 1: hsi-pca-svm trained on thousands of wrong pixels and failed 'Found array with dim 3'."""
    import zoo
    from zoo.hyperspectral.splits import Split

    s = make_scene(24, 24, 12, 3, block=6, seed=2)
    sp = random_split(s.labels, 0.3, seed=0)
    as_ints = Split(sp.train.astype(np.uint8), sp.test.astype(np.uint8), "mine")
    assert as_ints.train.dtype == bool and np.array_equal(as_ints.train, sp.train)
    by_bool, by_int = zoo.build("hsi-pca-svm", n_components=4), zoo.build("hsi-pca-svm", n_components=4)
    zoo.train(by_bool, s, split=Split(sp.train, sp.test, "mine"))
    zoo.train(by_int, s, split=as_ints)
    np.testing.assert_array_equal(by_int.predict_rows(s.pixels(sp.test)), by_bool.predict_rows(s.pixels(sp.test)))
    with pytest.raises(ValueError, match=r"train mask must be boolean \(or 0/1\), got int64 with values \[1, 2, 3\]"):
        Split(s.labels.astype(np.int64), np.zeros_like(sp.test), "a label map")


@pytest.mark.parametrize("split", ["random", "blocks", "holdout"])
def test_splits_take_a_whole_number_float_label_map_and_refuse_fractions(split):
    """Before: random_split and holdout_blocks failed inside np.bincount ("Cannot cast array data from
    dtype('float64')") on a MATLAB double map, which spatial_block_split and Scene took."""
    from zoo.hyperspectral.splits import Split, holdout_blocks

    s = make_scene(24, 24, 12, 3, block=6, seed=2)
    make = {"random": lambda y: random_split(y, 0.3, seed=0),
            "blocks": lambda y: spatial_block_split(y, block=6, window=3, seed=0),
            "holdout": lambda y: Split(*holdout_blocks(sp_train, y, 0.3, block=6, seed=0), "held out")}[split]
    sp_train = random_split(s.labels, 0.5, seed=1).train
    want, got = make(s.labels), make(s.labels.astype(np.float64))
    assert np.array_equal(got.train, want.train) and np.array_equal(got.test, want.test)
    with pytest.raises(ValueError, match="whole class ids"):
        make(s.labels + 0.5)


def test_a_random_split_with_no_room_for_every_class_names_train_fraction_and_the_counts():
    """Before: scikit-learn's "The train_size = 9 should be greater or equal to the number of classes = 10", about
    options the caller never gave."""
    labels = np.zeros((6, 5), np.int64)
    labels.flat[:30] = np.repeat(np.arange(1, 11), 3)
    with pytest.raises(ValueError, match=r"random split of 30 labelled pixels in 10 classes at train_fraction=0.3 "
                                         r"gives 9 training and 21 test pixels.*at least 10 on each side.*1: 3"):
        random_split(labels, 0.3)
    assert random_split(labels, 0.5).train.sum() == 15  # room for every class on both sides


def test_a_block_split_skips_a_tile_that_would_take_a_class_far_past_its_share():
    """Before: a class of 45 pixels in one tile and 1 in another took the 45-pixel tile whenever it was drawn
    first: 98 % of the class trained, its test set one pixel (Indian Pines' class 1 at block=8)."""
    labels = np.full((16, 16), 2, np.int64)
    labels.flat[np.flatnonzero((np.arange(256) // 16 < 8) & (np.arange(256) % 16 < 8))[:45]] = 1  # tile 0
    labels[0, 8] = 1  # tile 1
    shares = []
    for seed in range(8):
        sp = spatial_block_split(labels, block=8, train_fraction=0.3, window=1, seed=seed)
        shares.append(sp.train[labels == 1].mean())
    assert max(shares) < 0.5, shares


@pytest.mark.parametrize("window", [3.0, "3", True])
def test_a_window_that_is_no_whole_number_is_refused_naming_window(window):
    """Before: 3.0 failed in numpy's padding ("`pad_width` must be of integral type"), "3" in a comparison, and
    True was taken as a window of 1; the splits' guard band took 3.0 into its record and failed on "3"."""
    cube = np.zeros((6, 5, 3), np.float32)
    with pytest.raises(TypeError, match="window must be an int"):
        PatchDataset(cube, [[0, 0]], window=window)
    labels = np.zeros((10, 10), np.int64)
    labels[2:8, 2:8] = 1
    with pytest.raises(TypeError, match="window must be an int"):
        overlap_report(labels > 0, labels > 0, window)
    with pytest.raises(TypeError, match="window must be an int"):
        spatial_block_split(labels, block=3, window=window)


def test_pad_cube_refuses_what_it_cannot_pad_in_its_own_words():
    """Before: numpy's "index can't contain negative values" (radius -1), "operands could not be broadcast
    together with remapped shapes" (a 2-D image) and "can't extend empty axis 0" (an empty scene)."""
    cube = np.zeros((6, 5, 3), np.float32)
    with pytest.raises(ValueError, match="radius must be an int >= 0"):
        pad_cube(cube, -1)
    with pytest.raises(TypeError, match="radius must be an int"):
        pad_cube(cube, 2.0)
    with pytest.raises(ValueError, match=r"expected an \(H, W, C\) cube; got shape \(6, 5\)"):
        pad_cube(cube[..., 0], 1)
    with pytest.raises(ValueError, match="empty 0x5 scene"):
        pad_cube(cube[:0], 1, "edge")
    with pytest.raises(ValueError, match="'symmetric', 'edge' or 'constant' pad any scene"):
        pad_cube(cube, 5, "reflect")
    for mode in ("symmetric", "edge", "constant"):  # a window larger than the scene, as those modes allow
        assert pad_cube(cube, 5, mode).shape == (16, 15, 3)


@pytest.mark.parametrize(("option", "value", "match"), [
    ("block", 2.5, "block must be an int"), ("block", True, "block must be an int"),
    ("fraction", "0.3", "held-out fraction must be in")])
def test_holdout_blocks_refuses_a_block_or_fraction_of_the_wrong_type(option, value, match):
    """Before: block=2.5 cut tiles at fractional positions and True tiles of 1 pixel, without a word; a string
    fraction failed in a comparison ("'<' not supported between instances of 'float' and 'str'")."""
    from zoo.hyperspectral.splits import holdout_blocks

    labels = np.zeros((10, 10), np.int64)
    labels[2:8, 2:8] = 1
    kwargs = {"block": 2, "fraction": 0.3, option: value}
    with pytest.raises((TypeError, ValueError), match=match):
        holdout_blocks(labels > 0, labels, kwargs.pop("fraction"), **kwargs)


def test_a_block_split_with_no_training_or_no_test_pixel_is_refused_naming_block_window_and_scene():
    """Before: a window near the scene's size guarded every test pixel away, and a block as large as the scene left
    no training pixel; both came back as a Split with an empty side, without a word."""
    labels = np.random.default_rng(0).integers(1, 4, size=(20, 20))
    with pytest.raises(ValueError, match=r"leaves no test pixels: with block=4 on the 20x20 labels, all 256 pixels of "
                                         r"the test tiles lie within window // 2 = 20 px of a training pixel "
                                         r"\(window=41\).*pass window=7 or less \(the farthest is 4 px away\)"):
        spatial_block_split(labels, block=4, window=41)
    assert spatial_block_split(labels, block=4, window=7).test.any()  # the window it names keeps test pixels
    for block in (20, 32):
        with pytest.raises(ValueError, match=rf"leaves no training pixels: block={block} cuts the 20x20 labels into "
                                             rf"1 tile\(s\).*pass a smaller block, such as block=5"):
            spatial_block_split(labels, block=block, window=5)
    assert spatial_block_split(labels, block=5, window=1).train.any()


def test_evaluating_on_a_split_or_mask_without_test_pixels_is_refused():
    """Before: zoo.evaluate on a ready Split with an empty test set (what a block split of a small scene gave) or on
    a mask of unlabelled pixels scored NaN in every metric, without a word."""
    import zoo
    from zoo.hyperspectral.splits import Split

    scene = make_scene(16, 16, 8, 3, block=4, seed=0)
    model = zoo.build("hsi-pca-svm", n_components=4)
    zoo.train(model, scene, split="random")
    train = spatial_block_split(scene.labels, block=4, window=3).train
    with pytest.raises(ValueError, match=r"zoo.evaluate: split 'mine' leaves no labelled test pixel in the 16x16 "
                                         r"scene 'synthetic-0', so there is nothing to score"):
        zoo.evaluate(model, scene, split=Split(train, np.zeros_like(train), "mine"))
    with pytest.raises(ValueError, match=r"zoo.evaluate: mask= leaves no labelled test pixel.*give a mask= that "
                                         r"selects labelled pixels"):
        zoo.evaluate(model, scene, mask=scene.labels == 0)
