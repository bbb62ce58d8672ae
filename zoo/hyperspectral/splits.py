"""Train/test splits of a labelled scene, and the check that tells a leaky split from an honest one.

A window classifier sees every pixel of its ``w x w`` window. With a random pixel split (the HybridSN
protocol: 30 % of the labelled pixels, stratified) nearly every test window contains training pixels, so
the test score partly measures memorised neighbours. Spatially disjoint splits keep whole regions apart
and drop test pixels whose window would reach a training pixel (a guard band of ``w // 2`` pixels).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import ndimage

from zoo._stacklevel import user_stacklevel
from zoo.inputs import whole_number

__all__ = [
    "Split",
    "disjoint_mask_split",
    "guard_band",
    "holdout_blocks",
    "overlap_report",
    "random_split",
    "remap_mask_classes",
    "spatial_block_split",
]


@dataclass(frozen=True)
class Split:
    """Boolean ``(H, W)`` train and test masks over the labelled pixels."""

    train: np.ndarray
    test: np.ndarray
    name: str
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a 0/1 mask read back from .npy or a PNG indexed pixels by number (labels[train] took rows 0 and 1)
        object.__setattr__(self, "train", _boolean(self.train, "train"))
        object.__setattr__(self, "test", _boolean(self.test, "test"))
        if self.train.shape != self.test.shape:
            raise ValueError(f"train mask {self.train.shape} and test mask {self.test.shape} differ in shape")
        if np.any(self.train & self.test):
            raise ValueError(f"split {self.name!r}: {int((self.train & self.test).sum())} pixels in both sets")

    def overlap(self, window: int) -> dict[str, float]:
        return overlap_report(self.train, self.test, window)


def _boolean(mask: Any, name: str) -> np.ndarray:
    """A split's mask as booleans: 0/1 (or False/True) of any dtype is read as such, other values are refused."""
    mask = np.asarray(mask)
    if mask.dtype == bool:
        return mask
    values = np.unique(mask)
    if not np.isin(values, (0, 1)).all():
        raise ValueError(f"Split: the {name} mask must be boolean (or 0/1), got {mask.dtype} with values "
                         f"{values[:6].tolist()}: pass mask > 0 for a label map, or mask == CLASS")
    return mask.astype(bool)


def _reach(mask: np.ndarray, window: int) -> np.ndarray:
    """Pixels whose ``window x window`` neighbourhood contains a pixel of ``mask``."""
    # a string failed in a comparison that named no option, and 3.0 went on into the split's record
    window = whole_number(window, "window", hint="an odd number of pixels")
    if window % 2 == 0:
        raise ValueError(f"window must be a positive odd number; got {window}")
    return ndimage.maximum_filter(mask.astype(np.uint8), size=window, mode="constant", cval=0).astype(bool)


def overlap_report(train: np.ndarray, test: np.ndarray, window: int) -> dict[str, float]:
    """How many test pixels have a training pixel inside their window (``overlapping`` > 0: a leaky split)."""
    train, test = np.asarray(train, bool), np.asarray(test, bool)
    hit = _reach(train, window) & test
    n_test = int(test.sum())
    return {"window": window, "test_pixels": n_test, "overlapping_test_pixels": int(hit.sum()),
            "overlap_fraction": float(hit.sum() / n_test) if n_test else 0.0,
            "overlapping": bool(hit.any())}


def guard_band(train: np.ndarray, test: np.ndarray, window: int) -> np.ndarray:
    """``test`` without the pixels whose window reaches a training pixel."""
    return np.asarray(test, bool) & ~_reach(np.asarray(train, bool), window)


def _check_labels(labels: np.ndarray) -> np.ndarray:
    """An ``(H, W)`` map of class ids as int64: whole-number floats (a MATLAB double, ``np.where``'s result) as
    :class:`~zoo.hyperspectral.scene.Scene` takes them (``np.bincount`` refused them)."""
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"labels must be an (H, W) map; got shape {labels.shape}")
    if labels.dtype.kind == "f":
        finite = np.isfinite(labels)
        if not finite.all() or (labels != np.round(labels)).any():
            raise ValueError("labels must be whole class ids (0: unlabelled); this float map holds "
                             f"{'NaN/inf' if not finite.all() else 'fractions'}: pass np.rint(labels) or the ids")
        labels = labels.astype(np.int64)
    elif labels.dtype.kind not in "iub":
        raise ValueError(f"labels must be a map of integer class ids; got dtype {labels.dtype}")
    if (labels < 0).any():
        raise ValueError(f"labels must be class ids >= 0 (0: unlabelled); got {int(labels.min())}")
    if not (labels > 0).any():
        raise ValueError("labels have no labelled pixel (all 0)")
    return labels


def _check_fraction(train_fraction: Any, name: str = "train_fraction") -> float:
    """A fraction in (0, 1): the blocks split took 1.5 (768 of 1,024 pixels to train, 16 to test) and a string
    failed in a comparison that named no option."""
    if isinstance(train_fraction, bool) or not isinstance(train_fraction, numbers.Real) \
            or not 0.0 < train_fraction < 1.0:
        raise ValueError(f"{name} must be in (0, 1); got {train_fraction!r}")
    return float(train_fraction)


def random_split(labels: np.ndarray, train_fraction: float = 0.3, *, seed: int = 0,
                 stratify: bool = True) -> Split:
    """Stratified random pixel split (HybridSN protocol: 30 % train). Expect heavy window overlap.

    A class of one labelled pixel cannot be in both sets: it goes to training, with a warning, and the other
    classes are stratified (scikit-learn refuses such a class; left unstratified, one stray pixel changed every
    class's share, a 9-pixel class taking 56 % or 44 % of its pixels for training)."""
    from sklearn.model_selection import train_test_split

    labels = _check_labels(labels)
    train_fraction = _check_fraction(train_fraction)
    coords = np.argwhere(labels > 0)
    y = labels[labels > 0]
    alone = np.isin(y, np.flatnonzero(np.bincount(y) == 1)) if stratify else np.zeros(len(y), bool)
    rest = np.flatnonzero(~alone)
    if alone.any():
        warnings.warn(f"class(es) {sorted(int(c) for c in y[alone])} have one labelled pixel each: it goes to "
                      "training (a class cannot be in both sets); the other classes are split stratified",
                      stacklevel=user_stacklevel())
    strat = y[rest] if stratify and len(np.unique(y[rest])) < len(rest) else None
    _check_room(y[rest], train_fraction, strat is not None)
    tr, te = train_test_split(rest, train_size=train_fraction, random_state=seed, stratify=strat)
    tr = np.concatenate([tr, np.flatnonzero(alone)])
    train = np.zeros(labels.shape, bool)
    test = np.zeros(labels.shape, bool)
    train[tuple(coords[tr].T)] = True
    test[tuple(coords[te].T)] = True
    return Split(train, test, f"random-{train_fraction:g}", {"seed": seed, "stratified": strat is not None})


def _check_room(y: np.ndarray, train_fraction: float, stratified: bool) -> None:
    """What scikit-learn's train_test_split refuses, said with this call's options (it named train_size and
    test_size, which the caller never gave): a stratified split needs a pixel of each class on both sides."""
    import math

    n, k = len(y), len(np.unique(y))
    n_train = math.floor(train_fraction * n)  # as train_test_split rounds a float train_size
    n_test = n - n_train
    need = k if stratified else 1
    if n_train >= need and n_test >= need:
        return
    counts = ", ".join(f"{int(c)}: {int(m)}" for c, m in zip(*np.unique(y, return_counts=True)))
    raise ValueError(f"random split of {n} labelled pixels in {k} classes at train_fraction={train_fraction:g} gives "
                     f"{n_train} training and {n_test} test pixels; a stratified split needs at least {need} on "
                     f"each side (one per class). Pixels per class: {counts}. Choose a train_fraction between "
                     f"{need / n:.2g} and {1 - need / n:.2g}, or label more pixels")


def spatial_block_split(labels: np.ndarray, *, block: int = 16, train_fraction: float = 0.3, window: int = 25,
                        seed: int = 0) -> Split:
    """Whole ``block x block`` tiles go to train or test; test pixels within ``window // 2`` of train are dropped.

    Blocks are drawn per class (in random order, each class's blocks until it has ``train_fraction`` of its
    pixels, a block that would leave it further from that share than it is skipped) so that every class that
    spans more than one block is represented in both sets.
    """
    labels = _check_labels(labels)
    train_fraction = _check_fraction(train_fraction)
    block = whole_number(block, "block", hint="the side of a tile, in pixels")  # 0: ZeroDivisionError; -4 tiled
    h, w = labels.shape
    rng = np.random.default_rng(seed)
    tile = (np.arange(h)[:, None] // block) * (-(-w // block)) + (np.arange(w)[None, :] // block)
    train_tiles: set[int] = set()
    classes = np.unique(labels[labels > 0])
    spans = [set(np.unique(tile[labels == cls]).tolist()) for cls in classes]
    spans = [s for s in spans if len(s) > 1]  # the classes to keep in both sets

    def keeps_test(t: int) -> bool:
        # a tile that would take the last test tile of a class stays in test: a 1-pixel tile drawn first, then
        # the 16-pixel one, sent every pixel of that class to train; so could another class's draw
        return all(s - train_tiles - {t} for s in spans)

    for cls in classes:
        in_cls = labels == cls
        tiles, counts = np.unique(tile[in_cls], return_counts=True)
        order = rng.permutation(len(tiles))
        target, got = train_fraction * in_cls.sum(), sum(counts[i] for i, t in enumerate(tiles) if t in train_tiles)
        for i in order:
            if got >= target or len(tiles) < 2:
                break
            # a tile that would leave the class further from its share than it is stays in test: a 45-pixel
            # tile drawn first took 45 of a 46-pixel class (98 %) to train, and its test set was 1 pixel
            if tiles[i] not in train_tiles and got + counts[i] - target < target - got and keeps_test(int(tiles[i])):
                train_tiles.add(int(tiles[i]))
                got += counts[i]
    in_train_tile = np.isin(tile, list(train_tiles))
    train = in_train_tile & (labels > 0)
    raw_test = ~in_train_tile & (labels > 0)
    test = guard_band(train, raw_test, window)
    _refuse_an_empty_side(train, raw_test, test, block, window)
    return Split(train, test, f"blocks-{block}", {"seed": seed, "block": block, "window": window,
                                                   "test_dropped_by_guard": int(raw_test.sum() - test.sum())})


def _refuse_an_empty_side(train: np.ndarray, raw_test: np.ndarray, test: np.ndarray, block: int, window: int) -> None:
    """Refuse a block split with no training or no test pixel, as scikit-learn's ``train_test_split`` refuses an
    empty side: a block as large as the scene (or a class in a single tile) left training empty, and a window near
    the scene's size guarded every test pixel away, without a word (zoo.evaluate then scored NaN)."""
    h, w = train.shape
    if not train.any():
        tiles = -(-h // block) * -(-w // block)
        smaller = max(1, min(h, w) // 4)
        hint = f"a smaller block, such as block={smaller} (a quarter of the shorter side)" if smaller < block \
            else "a smaller block"
        raise ValueError(f"spatial block split leaves no training pixels: block={block} cuts the {h}x{w} labels into "
                         f"{tiles} tile(s), and a tile goes to training only for a class that spans two or more (a "
                         f"class inside one tile stays whole in the test set); pass {hint}")
    if not test.any():
        if not raw_test.any():  # every labelled pixel in a training tile: a split of nothing to test
            raise ValueError(f"spatial block split leaves no test pixels: every labelled pixel of the {h}x{w} labels "
                             f"fell in a training tile (block={block}); pass a smaller train_fraction or block")
        # chessboard distance of each test pixel to the nearest training pixel: one is kept while window // 2 < it
        far = int(ndimage.distance_transform_cdt(~train, metric="chessboard")[raw_test].max())
        raise ValueError(f"spatial block split leaves no test pixels: with block={block} on the {h}x{w} labels, all "
                         f"{int(raw_test.sum())} pixels of the test tiles lie within window // 2 = {window // 2} px "
                         f"of a training pixel (window={window}), and the guard band drops them; pass window="
                         f"{2 * far - 1} or less (the farthest is {far} px away), or split the scene another way "
                         f"(random_split, disjoint_mask_split)")


def remap_mask_classes(mask_labels: np.ndarray, labels: np.ndarray) -> dict[int, int]:
    """Map a training mask's class ids onto the ground truth's by majority vote over shared pixels.

    ``indianpines_disjoint_dset.mat`` numbers its 16 classes in another order than the EHU ground truth
    (its class 1 is the ground truth's 2, Corn-notill, ...); this recovers the mapping from the data.
    """
    mapping: dict[int, int] = {}
    for c in np.unique(mask_labels[mask_labels > 0]):
        votes = np.bincount(labels[(mask_labels == c) & (labels > 0)], minlength=int(labels.max()) + 1)
        if votes.sum() == 0:
            raise ValueError(f"training-mask class {c} shares no pixel with the labelled ground truth")
        mapping[int(c)] = int(votes.argmax())
    if len(set(mapping.values())) != len(mapping):
        raise ValueError(f"training-mask classes do not map one-to-one onto the ground truth: {mapping}")
    return mapping


def _is_boolean_mask(train_mask: np.ndarray, labels: np.ndarray) -> bool:
    """A mask of one value besides 0 (0/1, or 0/255 as an image editor saves a binary PNG) over pixels of several
    ground-truth classes selects pixels; it does not name classes (one class could not train a classifier)."""
    if np.unique(train_mask[train_mask != 0]).size != 1:
        return False
    return np.unique(labels[(train_mask > 0) & (labels > 0)]).size > 1


def holdout_blocks(train: np.ndarray, labels: np.ndarray, fraction: float, *, block: int = 8,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split the training pixels into ``(fit, held_out)`` by whole ``block x block`` tiles, for validation.

    Held-out pixels are never a random sprinkle among training pixels (their windows would be nearly the
    training windows, and validation would say little about new fields): a tile goes out whole, with every
    class's training pixels in it. Tiles are drawn in random order and taken while no class exceeds
    ``fraction`` of its training pixels, so each class gives at most that share and a class inside one tile
    keeps all its pixels for training.
    """
    train = np.asarray(train, bool)
    labels = _check_labels(labels)
    if train.shape != labels.shape:
        raise ValueError(f"training mask {train.shape} and labels {labels.shape} differ in shape")
    # a string failed in a comparison, and block=2.5 cut tiles at fractional pixel positions without a word
    fraction = _check_fraction(fraction, "the held-out fraction")
    block = whole_number(block, "block", hint="the side of a tile, in pixels")
    h, w = labels.shape
    tile = (np.arange(h)[:, None] // block) * (-(-w // block)) + (np.arange(w)[None, :] // block)
    y = np.where(train, labels, 0)
    n_cls = int(y.max()) + 1
    budget = np.floor(fraction * np.bincount(y[train], minlength=n_cls)).astype(np.int64)
    held = np.zeros(n_cls, np.int64)
    out_tiles = []
    rng = np.random.default_rng(seed)
    for t in rng.permutation(np.unique(tile[train])):
        counts = np.bincount(y[(tile == t) & train], minlength=n_cls)
        if np.all(held + counts <= budget):
            held += counts
            out_tiles.append(t)
    held_out = train & np.isin(tile, out_tiles)
    return train & ~held_out, held_out


def disjoint_mask_split(labels: np.ndarray, train_mask: np.ndarray, *, window: int = 25,
                        guard: bool = False) -> Split:
    """A split from a given spatially disjoint training mask (e.g. ``indianpines_disjoint_dset.mat``).

    Training pixels: mask pixels that the ground truth labels with the class the mask's class maps to
    (pixels where the two disagree, or that the ground truth leaves unlabelled, are dropped and counted);
    a 0/1 mask (or 0 and one other value: a 0/255 PNG) selects pixels, which train with their ground-truth class.
    Test pixels: the other labelled pixels, minus (``guard``) those whose window reaches a training pixel.
    """
    labels = _check_labels(labels)
    train_mask = np.asarray(train_mask).astype(np.int64)
    if train_mask.shape != labels.shape:
        raise ValueError(f"training mask {train_mask.shape} and labels {labels.shape} differ in shape")
    if not (train_mask > 0).any():
        raise ValueError("the training mask marks no pixel (all 0)")
    if _is_boolean_mask(train_mask, labels):
        mapping = None  # a 0/1 mask: its pixels train with the ground truth's own labels
        train = (train_mask > 0) & (labels > 0)
    else:
        mapping = remap_mask_classes(train_mask, labels)
        mapped = np.zeros_like(labels)
        for src, dst in mapping.items():
            mapped[train_mask == src] = dst
        train = (mapped > 0) & (mapped == labels)
    raw_test = (labels > 0) & ~(train_mask > 0)
    test = guard_band(train, raw_test, window) if guard else raw_test
    info = {
        "class_mapping": mapping,
        "mask_pixels": int((train_mask > 0).sum()),
        "mask_pixels_dropped": int((train_mask > 0).sum() - train.sum()),
        "test_dropped_by_guard": int(raw_test.sum() - test.sum()),
        "window": window,
        "guarded": guard,
    }
    info.update({f"window_overlap_{k}": v for k, v in overlap_report(train, test, window).items()
                 if k in ("overlapping_test_pixels", "overlap_fraction")})
    return Split(train, test, "disjoint-mask", info)
