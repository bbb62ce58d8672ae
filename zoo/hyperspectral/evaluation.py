"""Scene-level protocol shared by the pipelines: choosing the split, scoring a label map, drawing it.

OA, AA and Cohen's kappa come from :mod:`zoo.engine.metrics` (one implementation for the project); this
module only turns ``(H, W)`` label maps into those calls and draws the classification map.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from zoo._stacklevel import user_stacklevel
from zoo.hyperspectral.scene import Scene, band_first_hint
from zoo.hyperspectral.splits import Split, disjoint_mask_split, random_split, spatial_block_split

log = logging.getLogger(__name__)

__all__ = ["SCENE_INPUTS", "SPLIT_OPTIONS", "array_input", "as_scene", "auto_split", "class_colors", "cube_key_hint",
           "given_split_mask", "metrics_from_scores", "plot_classification_map", "recorded_options",
           "refuse_scene_options", "require_classes", "require_fitted_bands", "require_valid_pixels", "resolve_split",
           "score_labels", "score_map", "scored_pixels", "warn_background_class"]

SPLIT_OPTIONS = ("train_fraction", "seed", "window", "block", "train_mask", "guard")
"""The keywords of :func:`resolve_split` a user may pass to ``zoo.evaluate`` on a scene to choose its test pixels."""

# the options a training run records (the split, with the weights; the recipe, in its checkpoints) that are whole
# numbers: their least value and what they count. The others (fractions, noise, flags) are checked where they are read.
_RECORDED_COUNTS: dict[str, tuple[int, str]] = {
    "seed": (0, ""), "window": (1, "the side of the window around a pixel, in pixels"),
    "block": (1, "the side of a tile, in pixels"), "val_block": (1, "the side of a held-out tile, in pixels")}


def recorded_options(**options: Any) -> dict[str, Any]:
    """``options`` of a training run as the plain Python values its record holds: a NumPy number from a grid
    search (``np.int64(8)``, ``np.float32(0.3)``) trained, and then ``zoo.save`` refused the model, whose JSON
    could not hold the split it recorded. Whole numbers (:data:`_RECORDED_COUNTS`) are checked here, before any
    work, by :func:`zoo.inputs.whole_number`; the others are NumPy's scalars made Python's, and checked where read."""
    from zoo.hyperspectral.serialize import python_number
    from zoo.inputs import whole_number

    return {name: whole_number(value, name, minimum=_RECORDED_COUNTS[name][0], hint=_RECORDED_COUNTS[name][1])
            if name in _RECORDED_COUNTS else python_number(value) for name, value in options.items()}


def refuse_scene_options(call: str, given: Mapping[str, Any]) -> None:
    """``(X, y)`` pixels are used as they are: options that choose or screen a scene's pixels (a split, a
    mask, ground truth) would be dropped without a word, so any given (not None) is an error."""
    named = sorted(k for k, v in given.items() if v is not None)
    if named:
        raise ValueError(f"{call} on (X, y) pixels got {', '.join(named)}: options for a scene (its ground truth, "
                         f"split or mask), while (X, y) pixels are used as they are; leave them out, or pass the "
                         f"Scene (zoo.hyperspectral.Scene, a scene file or a data set name) instead")


def warn_background_class(y: np.ndarray, call: str) -> None:
    """Warn when ``(X, y)`` pixels look flattened from a scene with its unlabelled pixels: 0 is the most
    frequent label, beside at least two others. ``(X, y)`` labels are used as they are (0 is a class, as
    in scikit-learn), so ``cube.reshape(-1, C), gt.ravel()`` would learn and score the background as a
    class. Ordinary 0-based labels, where 0 is not the majority, pass silently; so does a 0/1 ``y``,
    which without its 0s would hold a single class."""
    y = np.asarray(y).reshape(-1)
    if y.dtype.kind not in "iuf" or not (y == 0).any():
        return
    ids, counts = np.unique(y, return_counts=True)
    zero = int(counts[ids == 0][0])
    if ids.size >= 3 and zero > counts[ids != 0].max():
        warnings.warn(f"{call}: label 0 is the most frequent label of y ({zero} of {y.size} pixels). (X, y) pixels "
                      f"keep 0 as a class, as scikit-learn does, but a scene's ground truth uses 0 for unlabelled "
                      f"pixels: if y comes from one (gt.ravel()), drop them with X[y > 0], y[y > 0], or give the cube "
                      f"and its ground truth, {call}(model, cube, labels=gt), which leaves them out", stacklevel=user_stacklevel())


SCENE_INPUTS = "a Scene, a scene path, a data set name or an (H, W, C) cube"


def as_scene(data: Any, labels: str | os.PathLike | np.ndarray | None = None, *, gt_key: str | None = None,
             cube_key: str | None = None, expected: str = SCENE_INPUTS, ground_truth: bool = True) -> Scene:
    """A Scene from a Scene, a path (any reader), a data set name (``"indian_pines"``) or an ``(H, W, C)``
    array (a cube read by the user, as ``predict`` takes it); ``labels``: its ground truth, as a file (.npy,
    .mat, ENVI, PNG/TIFF) or an ``(H, W)`` array (0: unlabelled), for a cube that ships without one.
    ``gt_key`` / ``cube_key``: the arrays of a .mat file to read (:func:`~zoo.hyperspectral.readers.load_scene`).
    ``expected``: what the caller takes, as its refusal of anything else says. ``ground_truth=False``: a scene
    file's ground truth is not looked for (a prediction reads the cube alone)."""
    if labels is not None and not isinstance(labels, (str, os.PathLike, np.ndarray)):
        given = array_input(labels)  # a torch tensor or a list of lists, as the cube may be given
        if given is None or given.ndim != 2:
            raise TypeError("labels= expected the ground truth as a file (.npy, .mat, ENVI, PNG/TIFF) or an (H, W) "
                            "array of class ids; got " + (_what(labels) if given is None else
                                                           f"a {type(labels).__name__} of shape {given.shape}"))
        labels = given
    if isinstance(labels, np.ndarray):
        from dataclasses import replace

        if gt_key is not None:
            raise ValueError(f"gt_key={gt_key!r} names the ground truth among the arrays of a .mat file; labels= "
                             f"is an array already: leave gt_key out")
        shape = getattr(data, "shape", ())
        if len(shape) == 3 and labels.shape == tuple(shape[1:]) != tuple(shape[:2]):
            raise ValueError(f"the cube {tuple(shape)} is band-first, (C, H, W): its ground truth {labels.shape} is "
                             f"its last two axes. zoo reads cubes as (H, W, C) (spectral's layout; rasterio and GDAL "
                             f"read (C, H, W)): pass cube.transpose(1, 2, 0)")
        scene = as_scene(data, cube_key=cube_key)
        return replace(scene, labels=labels, metadata={**scene.metadata, "ground_truth": "array"})
    if labels is not None:
        from zoo.hyperspectral.readers import with_ground_truth

        return with_ground_truth(as_scene(data, cube_key=cube_key), labels, gt_key=gt_key)
    if isinstance(data, (str, os.PathLike)) and _exists(data):
        from zoo.hyperspectral.readers import load_scene

        return load_scene(Path(data), gt_key=gt_key, cube_key=cube_key, ground_truth=ground_truth)
    keys = [f"{k}={v!r}" for k, v in (("gt_key", gt_key), ("cube_key", cube_key)) if v is not None]
    if keys:  # a Scene, a cube or a data set is read already: the keys would be dropped without a word
        raise ValueError(f"{' and '.join(keys)} {'name arrays' if len(keys) > 1 else 'names an array'} of a .mat "
                         f"file this call reads; it got "
                         f"{_what(data)}: leave them out, or pass them to load_scene when reading the file")
    if isinstance(data, Scene):
        return data
    if isinstance(data, np.ndarray) and data.ndim == 3:
        return Scene(cube=data, name="array")
    if isinstance(data, (str, os.PathLike)):
        from zoo.hyperspectral.datasets import DATASETS, load_dataset

        if str(data).lower().replace("-", "_") in DATASETS:
            return load_dataset(str(data))
        raise FileNotFoundError(f"{data!r} is neither a scene file nor a known data set ({', '.join(DATASETS)})")
    if isinstance(data, tuple) and len(data) == 2 and getattr(data[0], "ndim", None) == 3:
        raise TypeError("(cube, ground truth): pass the (H, W, C) cube as data and the (H, W) map as labels=, "
                        "e.g. zoo.train(name, cube, labels=gt), zoo.evaluate(model, cube, labels=gt)")
    shape = f" of shape {data.shape}" if isinstance(data, np.ndarray) else ""
    raise TypeError(f"expected {expected}; got {type(data).__name__}{shape}")


def _exists(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a file or folder; False for a string no file can have (a spectrum typed on the
    command line, '1,2,...', would fail 'File name too long' before it could be called no scene)."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


def array_input(data: Any) -> np.ndarray | None:
    """``data`` as a NumPy array when it is an array of numbers by another name: an ndarray, a torch tensor
    (on any device), a pandas DataFrame or Series, a (nested) list of numbers; None for anything else (a
    Scene, a path or data set name, a tuple, a list of spectra of different lengths), which
    :func:`as_scene` reads or refuses."""
    if isinstance(data, np.ndarray):
        return data
    if hasattr(data, "detach") and hasattr(data, "cpu"):  # a torch tensor, wherever it lives
        t = data.detach().cpu()
        try:
            return t.numpy()
        except TypeError:  # bfloat16 and other dtypes NumPy has not
            return t.float().numpy()
    if not (isinstance(data, list) or hasattr(data, "__array__")):
        return None
    try:
        arr = np.asarray(data)
    except ValueError:  # ragged: not one array
        return None
    return arr if arr.dtype.kind in "biuf" else None


def _what(data: Any) -> str:
    if isinstance(data, Scene):
        return f"the Scene {data.name!r}"
    if isinstance(data, (str, os.PathLike)):
        return f"the data set name {str(data)!r}"
    return f"a {type(data).__name__}" + (f" of shape {data.shape}" if isinstance(data, np.ndarray) else "")


def cube_key_hint(scene: Any, bands: int) -> str:
    """A hint for a scene from a .mat file that holds other cubes of its size (``metadata["other_cubes"]``)
    given to a model fitted on ``bands`` bands: the ``cube_key=`` that reads another one; else ""."""
    others = getattr(scene, "metadata", {}).get("other_cubes") or {}
    if not others:
        return ""
    fits = [k for k, shape in others.items() if shape[2] == bands]
    listed = ", ".join(f"{k!r} ({shape[2]} bands)" for k, shape in others.items())
    key = fits[0] if fits else "<name>"
    return (f"; its .mat file also holds {listed}: read {'that one' if fits else 'another'} with "
            f"cube_key={repr(key) if fits else key} (load_scene, zoo.evaluate, zoo.predict; --set cube_key={key} "
            f"on the command line)")


def require_fitted_bands(model: str, fitted: int | None, scene: Any,
                         retrain: str = "train it on this scene with zoo.train") -> None:
    """Refuse a scene (or an array) that is not an ``(H, W, C)`` cube of the ``fitted`` bands the preprocessing of
    ``model`` (its registry name) was fitted on, with one message for both models of the family (HybridSN's named
    neither itself nor a fix): both band counts, ``retrain`` (how that model would fit this scene), a scene of the
    training bands, and a transpose for a band-first cube or the ``cube_key=`` of a .mat file's other cube where
    they fit. ``fitted`` None: unfitted, nothing to compare."""
    shape = tuple(scene.shape)
    if fitted is None or (len(shape) == 3 and shape[2] == fitted):
        return
    what = f"scene {scene.name!r}" if isinstance(scene, Scene) else f"an array of shape {shape}"
    if len(shape) != 3:
        raise ValueError(f"{model} was fitted on {fitted}-band scenes; {what} is not an (H, W, C) cube: pass the "
                         f"scene's cube, its {fitted} bands last")
    raise ValueError(f"{model} was fitted on {fitted}-band scenes; {what} has {shape[2]} bands ({retrain}, or use a "
                     f"scene with the same {fitted} bands){band_first_hint(shape, fitted)}{cube_key_hint(scene, fitted)}")


def default_scene(model: Any) -> str:
    """The data set a model's weights record as their training scene, when it is a public one zoo knows
    (so ``zoo.evaluate(svm_from_weights)`` scores on it); else an error asking for the scene."""
    from zoo.hyperspectral.datasets import DATASETS

    record = getattr(model, "training_record_", None)
    name = None if record is None else str(record.scene).lower().replace("-", "_")
    if name in DATASETS:
        return name
    raise ValueError("which scene? pass data= (a Scene, a scene file or a data set name"
                     + (f"; these weights were trained on {record.scene!r})" if record is not None else ")"))


def auto_split(scene: Scene, train_mask: Any = None) -> str:
    """The split ``split="auto"`` means: a public data set's published protocol (Indian Pines: ``"random"``);
    ``"disjoint"`` when a training mask is given; otherwise ``"blocks"`` -- on a user's own scene random
    pixels would put most test windows next to training pixels of the same field."""
    if scene.metadata.get("protocol"):
        return str(scene.metadata["protocol"])
    return "disjoint" if train_mask is not None else "blocks"


def _mask_array(scene: Scene, train_mask: Any) -> np.ndarray | None:
    """A training mask given as an array or as a file (.npy, .mat, ENVI, PNG/TIFF), checked against the scene."""
    if train_mask is None or isinstance(train_mask, np.ndarray):
        return train_mask
    if isinstance(train_mask, (str, os.PathLike)):
        from zoo.hyperspectral.readers import read_label_map

        return read_label_map(Path(train_mask).expanduser(), scene.shape[:2], what="training mask")
    return np.asarray(train_mask)


def given_split_mask(scene: Scene, sp: Split, train_mask: Any = None) -> np.ndarray | None:
    """The training mask a disjoint split ``sp`` was cut from (``train_mask``: an array or a file, else the
    scene's), for :meth:`~zoo.hyperspectral.provenance.TrainingRecord.from_mask`; None for other splits."""
    if sp.info.get("split") != "disjoint":
        return None
    mask = _mask_array(scene, train_mask)
    return mask if mask is not None else scene.metadata.get("train_mask")


def require_classes(y: np.ndarray, what: str, hint: str) -> None:
    """Refuse training labels ``y`` with fewer than two classes before any fit: scikit-learn's own error
    names neither the scene nor the labels, and a network trains on one class silently."""
    classes = np.unique(np.asarray(y))
    if classes.size < 2:
        found = f"only class {classes[0]}" if classes.size else "no class"
        raise ValueError(f"{what} hold {found}; need >= 2 classes to train a classifier ({hint})")


def _require_scene_classes(scene: Scene) -> np.ndarray:
    """The scene's classes; an error when there are fewer than two (a mask or a wrong map taken as labels)."""
    every = np.unique(scene.labels[scene.labels > 0])
    require_classes(every, f"the labelled pixels of scene {scene.name!r}",
                    "check the ground truth: labels= / gt=, or gt_key= for a .mat file holding several 2-D maps")
    return every


def _require_training_classes(scene: Scene, train: np.ndarray, kind: str) -> None:
    every = _require_scene_classes(scene)
    held = scene.labels[np.asarray(train, bool)]
    require_classes(held[held > 0], f"the training pixels of split {kind!r} on scene {scene.name!r}",
                    f"the scene holds classes {', '.join(str(c) for c in every)}: try another seed, a larger "
                    f"train_fraction or another split")


def _refuse_options_the_split_ignores(kind: str, train_mask: Any, guard: bool) -> None:
    """A ``train_mask`` / ``guard`` the chosen kind of split never reads: ignored, the pixels the user set aside for
    testing were trained on (186 of a random split's 268 training pixels outside the mask). (``block`` and
    ``window`` come with a model's recorded split to any split an evaluation names, and are not refused.)"""
    ignored = [f"{name}={shown}" for name, shown, reads in (
        ("train_mask", "<mask>", train_mask is not None and kind != "disjoint"),
        ("guard", "True", guard is True and kind == "random")) if reads]  # blocks are always guarded
    if ignored:
        raise ValueError(f"split={kind!r} does not read {', '.join(ignored)} (the disjoint split's): choose "
                         "split='disjoint', or leave them out")


def resolve_split(scene: Scene, *, split: str | Split = "auto", train_fraction: float = 0.3, seed: int = 0,
                  window: int = 25, block: int = 16, train_mask: Any = None, guard: bool = False,
                  for_training: bool = True) -> Split:
    """``"random"`` (stratified, HybridSN protocol), ``"disjoint"`` (``train_mask=``: an array or a file, else
    the scene's ``train_mask`` metadata), ``"blocks"`` (spatial tiles, always guarded), ``"auto"`` (see
    :func:`auto_split`), or a ready :class:`Split`. ``split.info["split"]`` names the kind chosen.

    ``guard`` drops disjoint-mask test pixels whose ``window`` reaches a training pixel. Off by default:
    on Indian Pines the published mask leaves no test pixel 12 pixels away from every training pixel, so
    a guarded 25x25 split is empty; the overlap is reported instead (``Split.overlap``).

    ``for_training`` (the default) refuses labels whose training pixels hold fewer than two classes; an
    evaluation, which only uses the test pixels, passes False.
    """
    if isinstance(split, Split):
        if for_training and scene.labels is not None:
            _require_training_classes(scene, split.train, split.name)
            _warn_missing_training_classes(scene, split, split.name)
        return split
    if scene.labels is None:
        raise ValueError(f"scene {scene.name!r} has no labels: cannot split it for training (give ground truth: "
                         f"load_scene(path, gt=FILE), or --labels FILE on the command line)")
    if for_training and (scene.labels > 0).any():
        _require_scene_classes(scene)  # before splitting: a split error would hide the real cause
    train_mask = _mask_array(scene, train_mask)
    kind = auto_split(scene, train_mask) if split == "auto" else split
    if split == "auto":
        why = {"random": f"the published protocol of {scene.name}", "disjoint": "a training mask was given",
               "blocks": "spatial tiles, the honest default on a scene without a training mask"}.get(kind, "")
        log.info("split: %s (%s; split=random|blocks|disjoint to choose)", kind, why)
    _refuse_options_the_split_ignores(kind, train_mask, guard)
    if kind == "random":
        sp = random_split(scene.labels, train_fraction, seed=seed)
    elif kind == "disjoint":
        mask = train_mask if train_mask is not None else scene.metadata.get("train_mask")
        if mask is None:
            raise ValueError("split='disjoint' needs a training mask (train_mask=array or file; CLI: --set "
                             "train_mask=FILE), or a data set that ships one")
        sp = disjoint_mask_split(scene.labels, mask, window=window, guard=guard)
    elif kind == "blocks":
        sp = spatial_block_split(scene.labels, block=block, train_fraction=train_fraction, window=window, seed=seed)
    else:
        raise ValueError(f"split must be 'auto', 'random', 'disjoint', 'blocks' or a Split; got {split!r}")
    for part, mask in (("training", sp.train), ("test", sp.test)):
        if not mask.any():
            raise ValueError(f"split {kind!r} on scene {scene.name!r} ({scene.shape[0]}x{scene.shape[1]}) leaves no "
                             f"{part} pixels ({sp.info}); try a smaller block/window or another split")
    if for_training:
        _require_training_classes(scene, sp.train, kind)
        _warn_missing_training_classes(scene, sp, kind)
    _warn_thin_test_set(scene, sp, kind, train_fraction)
    sp.info.setdefault("split", kind)
    return sp


def _warn_missing_training_classes(scene: Scene, sp: Split, kind: str) -> None:
    """Warn when the training pixels of a split lack classes the scene has: a classifier never predicts a
    class it never saw, so each such class scores 0 on its test pixels, after a training run that looked
    fine. A block split of a small scene does this (whole tiles, and a narrow ``window`` guard leaves a
    class's only tiles to the test set)."""
    every = np.unique(scene.labels[scene.labels > 0])
    held = np.unique(scene.labels[np.asarray(sp.train, bool) & (scene.labels > 0)])
    missing = np.setdiff1d(every, held)
    if not missing.size:
        return
    shown = ", ".join(str(c) for c in missing[:10]) + (", ..." if missing.size > 10 else "")
    plural = missing.size != 1
    if kind.startswith("blocks"):  # a Split passed ready is named "blocks-16"
        fix = (f"smaller tiles (block=, now {sp.info.get('block')}: a class inside a single tile goes whole to "
               f"the test set); split='random' (test pixels beside training pixels: optimistic scores); or a "
               f"training mask (train_mask=) with fields of every class")
    elif kind.startswith("disjoint"):
        fix = "a training mask with fields of every class (train_mask=)"
    else:
        fix = "a larger train_fraction, another seed, or a training mask with fields of every class (train_mask=)"
    warnings.warn(f"split {kind!r} on scene {scene.name!r} ({scene.shape[0]}x{scene.shape[1]}): the training pixels "
                  f"hold {held.size} of the scene's {every.size} classes; class{'es' if plural else ''} {shown} "
                  f"{'have' if plural else 'has'} none, so the model never learns {'them' if plural else 'it'} and "
                  f"scores 0 on {'their' if plural else 'its'} test pixels (class_<id>_accuracy). Give {fix}",
                  stacklevel=user_stacklevel())


def _warn_thin_test_set(scene: Scene, sp: Split, kind: str, train_fraction: float) -> None:
    """Warn when a split's test set cannot back its scores: fewer classes than the training set, or (random
    and block splits) under half the share ``train_fraction`` leaves it. Whole tiles of several classes and
    the guard band (test pixels within ``window // 2`` of a training tile are dropped) make a block split of
    a small scene train on far more than ``train_fraction`` and test on a sliver, which may score 100 %."""
    labelled = int((scene.labels > 0).sum())
    n_train, n_test = int(sp.train.sum()), int(sp.test.sum())
    train_cls = np.unique(scene.labels[sp.train & (scene.labels > 0)])
    test_cls = np.unique(scene.labels[sp.test & (scene.labels > 0)])
    tiny = kind in ("random", "blocks") and n_test < 0.5 * (1.0 - train_fraction) * labelled
    if test_cls.size >= train_cls.size and not tiny:
        return
    shown = ", ".join(str(c) for c in test_cls[:10]) + (", ..." if test_cls.size > 10 else "")
    guard = sp.info.get("test_dropped_by_guard", 0)
    dropped = (f"; {guard} test pixels within {int(sp.info['window']) // 2} px of a training pixel were dropped "
               f"(window={sp.info['window']})" if guard else "")
    fraction = f", train_fraction={train_fraction:g}" if kind in ("random", "blocks") else ""
    if kind == "blocks":
        fix = (f"smaller tiles (block=, now {sp.info['block']}) or, for hsi-pca-svm, a narrower guard (window=); "
               f"split='random' (test pixels beside training pixels: optimistic scores); or a training mask "
               f"(train_mask=) of fields chosen per class")
    elif kind == "disjoint":
        fix = "a training mask that leaves test fields of every class (train_mask=)"
    else:
        fix = "a smaller train_fraction, or another seed"
    warnings.warn(f"split {kind!r} on scene {scene.name!r} ({scene.shape[0]}x{scene.shape[1]}): the test set holds "
                  f"{n_test} of the {labelled} labelled pixels, of {test_cls.size} class"
                  f"{'es' if test_cls.size != 1 else ''} ({shown}), the training set {n_train} "
                  f"({100 * n_train / labelled:.0f} %{fraction}) of {train_cls.size} classes{dropped}. Its scores "
                  f"say little about this model; give {fix}", stacklevel=user_stacklevel())


def score_map(pred: np.ndarray, labels: np.ndarray, mask: np.ndarray, num_classes: int | None = None, *,
              n_classes: int | None = None) -> dict[str, Any]:
    """OA / AA / kappa (in %), per-class accuracy and the confusion matrix on the pixels of ``mask``.

    ``pred`` and ``labels`` hold 1-based classes (0 = unlabelled) as the ground truth does. Classes are the
    scene's ids: the confusion matrix and ``per_class_accuracy`` (``class_ids`` names them) run over ids
    1..n, n the largest of ``num_classes``, the ground truth's ids and the predicted ones. A class the model
    never predicts (one it never trained on) scores 0; an id without test pixels (a gap such as 3 in
    1, 2, 4, 7) has accuracy None and no part in AA, which averages over the classes of the test set.
    ``n_classes``: the old name of ``num_classes`` (a FutureWarning).
    """
    from zoo.config import current_keys
    from zoo.engine import metrics as M

    given = {k: v for k, v in (("num_classes", num_classes), ("n_classes", n_classes)) if v is not None}
    num_classes = current_keys("score_map", given, {"n_classes": "num_classes"}).get("num_classes")

    labels = np.asarray(labels)
    mask = np.asarray(mask, bool) & (labels > 0)
    y = labels[mask].astype(np.int64) - 1
    p = np.asarray(pred)[mask].astype(np.int64) - 1
    if (p < 0).any():
        raise ValueError("predictions must be classes 1..n on every scored pixel")
    n = max(int(num_classes or 0), int(labels.max()), int(p.max()) + 1 if p.size else 0)
    return _scores(M.confusion_matrix(p, y, num_classes=n), list(range(1, n + 1)))


def score_labels(pred: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """:func:`score_map`'s scores for ``(N,)`` labels taken as they are: every value is a class (0 too, as
    scikit-learn's 0-based labels), ``class_ids`` the sorted classes of ``y`` and ``pred``."""
    from zoo.engine import metrics as M

    y, pred = np.asarray(y).reshape(-1), np.asarray(pred).reshape(-1)
    if y.shape != pred.shape:
        raise ValueError(f"{y.size} labels for {pred.size} predictions")
    ids, index = np.unique(np.concatenate([y, pred]), return_inverse=True)
    cm = M.confusion_matrix(index[y.size:], index[:y.size], num_classes=max(len(ids), 1))
    # whole-number float ids (y read from MATLAB or a DataFrame) are the classes the scene path names as ints:
    # class_1_accuracy, not class_1.0_accuracy
    whole = ids.dtype.kind == "f" and bool(np.all(np.isfinite(ids) & (ids == np.round(ids))))
    return _scores(cm, [int(i) if whole else i.item() if isinstance(i, np.generic) else i for i in ids])


def _scores(cm: np.ndarray, class_ids: list) -> dict[str, Any]:
    """OA / AA / kappa and per-class accuracy (in %) of a confusion matrix whose rows/columns are ``class_ids``."""
    from zoo.engine import metrics as M

    recall = M.per_class_recall(cm)
    return {
        "overall_accuracy": 100.0 * M.overall_accuracy(cm),
        "average_accuracy": 100.0 * M.average_accuracy(cm),
        "kappa": 100.0 * M.cohen_kappa(cm),
        "per_class_accuracy": [None if np.isnan(r) else 100.0 * float(r) for r in recall],
        "class_ids": class_ids,
        "confusion_matrix": cm,
        "n_test": int(cm.sum()),
    }


def require_valid_pixels(scene: Scene, pixels: np.ndarray, what: str) -> None:
    """Refuse labelled pixels that have no spectrum to learn from or to classify: NaN/inf in a band, or the
    scene's no-data value in every band (see :func:`~zoo.hyperspectral.preprocessing.valid_pixel_mask`).
    When the NaN/inf fill whole bands (most of ``pixels``), the error names those bands to drop instead."""
    from zoo.hyperspectral.preprocessing import describe_nan_bands, describe_pixels, valid_pixel_mask

    bad = np.asarray(pixels, bool) & ~valid_pixel_mask(scene)
    if bad.any():
        bands = describe_nan_bands(scene, pixels, what.removeprefix("among the "))
        if bands:
            raise ValueError(f"scene {scene.name!r}: {bands}")
        raise ValueError(f"{describe_pixels(bad)} {what} of scene {scene.name!r} hold NaN/inf (or the no-data "
                         f"value) instead of a spectrum: give them label 0 (unlabelled) or repair the cube")


def class_colors(n: int) -> np.ndarray:
    """``(n + 1, 3)`` RGB in [0, 1]: black for 0 (unlabelled), then a distinct colour per class: tab20's 20,
    then tab20b's and tab20c's (60 in all), then hues a golden-ratio turn apart at alternating lightness.
    tab20 alone repeated from class 21 on (class 21 drawn as class 1), where spectral's ``spy_colors`` tell 38
    classes apart and public scenes have up to 22 (WHU-Hi-HongHu)."""
    import colorsys

    import matplotlib

    base = np.vstack([matplotlib.colormaps[name](np.linspace(0, 1, 20))[:, :3]
                      for name in ("tab20", "tab20b", "tab20c")])
    extra = max(n, 1) - len(base)
    if extra > 0:
        more = [colorsys.hsv_to_rgb((0.618033988749895 * i) % 1.0, 0.85, (0.95, 0.7, 0.5)[i % 3])
                for i in range(extra)]
        base = np.vstack([base, np.asarray(more)])
    cols = np.vstack([np.zeros((1, 3)), base[: max(n, 1)]])
    return cols[: n + 1]


def plot_classification_map(pred: np.ndarray, labels: np.ndarray | None, path: str | os.PathLike, *,
                            class_names: tuple[str, ...] | list[str] | None = None, title: str = "",
                            test_mask: np.ndarray | None = None) -> Path:
    """PNG with the ground truth beside the predicted map (and the test-pixel errors when given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    from zoo.engine.logs import atomic_savefig

    n = int(max(pred.max(), labels.max() if labels is not None else 0))
    cmap = ListedColormap(class_colors(n))
    panels = [("ground truth", labels)] if labels is not None else []
    panels.append(("prediction", pred))
    if labels is not None and test_mask is not None:
        err = np.zeros(labels.shape, np.int64)
        tm = np.asarray(test_mask, bool) & (labels > 0)
        err[tm] = np.where(pred[tm] == labels[tm], 1, 2)
        panels.append(("test pixels: right (grey) / wrong (red)", err))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 2.5, 4.6))
    axes = np.atleast_1d(axes)
    for ax, (name, img) in zip(axes, panels):
        if name.startswith("test pixels"):
            ax.imshow(img, cmap=ListedColormap([(0, 0, 0), (0.6, 0.6, 0.6), (0.9, 0.1, 0.1)]), vmin=0, vmax=2,
                      interpolation="nearest")
        else:
            ax.imshow(img, cmap=cmap, vmin=0, vmax=n, interpolation="nearest")
        ax.set_title(name, fontsize=9)
        ax.axis("off")
    if class_names:
        from matplotlib.patches import Patch

        cols = class_colors(n)
        handles = [Patch(color=cols[i + 1], label=f"{i + 1} {nm}") for i, nm in enumerate(class_names[:n])]
        fig.legend(handles=handles, loc="center right", fontsize=6, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.82 if class_names else 1, 1))
    out = atomic_savefig(fig, path)
    plt.close(fig)
    return out


def scored_pixels(model: Any, scene: Scene, mask, split, kw: dict[str, Any]) -> tuple[np.ndarray, bool]:
    """``(test mask, whole)``: the pixels to score, and whether they are all the labelled pixels of a scene
    other than the training scene (none of which the model saw)."""
    if scene.labels is None:
        raise ValueError(f"scene {scene.name!r} has no labels to score against (give ground truth: "
                         f"load_scene(path, gt=FILE), or --labels FILE on the command line)")
    if mask is not None:
        if kw:
            raise ValueError(f"zoo.evaluate: mask= names the test pixels itself, so the split options "
                             f"{', '.join(sorted(kw))} have nothing to choose; give mask= or the split options, not both")
        mask = np.asarray(mask, bool)
        if mask.shape != scene.shape[:2]:
            raise ValueError(f"mask of shape {mask.shape} does not match the {scene.shape[0]}x{scene.shape[1]} "
                             f"scene {scene.name!r}")
        return _some_test_pixels(scene, mask, "mask=", "a mask= that selects labelled pixels"), False
    record = getattr(model, "training_record_", None)
    own = record is not None and record.matches(scene)
    last = getattr(model, "last_split_", None)
    if split is None and not kw and last is not None and own:
        return _some_test_pixels(scene, last.test, f"the split {last.name!r} it was trained with{_info(last)}",
                                 _SPLIT_FIX), False
    if split is None and not kw and record is not None and not own:
        # a split's test set keeps test pixels apart from training pixels of the same scene; on another
        # scene no pixel was a training pixel, so every labelled one is a fair test pixel
        log.info("scene %r is not the training scene (%s): scoring all its labelled pixels", scene.name,
                 record.describe())
        return scene.labels > 0, True
    cfg = dict(getattr(model, "split_", None) or {})
    if split is not None:
        cfg["split"] = split
    elif "split" in cfg:
        log.info("split: %s (recorded in the weights)", cfg["split"])
    cfg.update(kw)
    if "split" not in cfg:
        raise ValueError("evaluate on a scene needs mask=..., split=..., or a model trained on a scene through "
                         "zoo.train (this one records no training split: it was fitted on (X, y) pixels, or its "
                         "weights carry none)")
    if (cfg["split"] == "disjoint" and cfg.get("train_mask") is None and "train_mask" not in scene.metadata
            and own):
        cfg["train_mask"] = record.split_mask  # the mask it was trained with, kept in its weights
    sp = resolve_split(scene, **cfg, for_training=False)
    return _some_test_pixels(scene, sp.test, f"split {sp.name!r}{_info(sp)}", _SPLIT_FIX), False


def _info(sp: Split) -> str:
    return f" ({sp.info})" if sp.info else ""


_SPLIT_FIX = "split= a Split with test pixels (of a block split: a smaller window=), split='random', or mask="


def _some_test_pixels(scene: Scene, test: np.ndarray, chosen: str, fix: str) -> np.ndarray:
    """``test``, refused where it holds no labelled pixel: a ready Split with an empty test set (a block split of a
    small scene) or a mask of unlabelled pixels was scored NaN in every metric, without a word."""
    if not (test & (scene.labels > 0)).any():
        raise ValueError(f"zoo.evaluate: {chosen} leaves no labelled test pixel in the {scene.shape[0]}x"
                         f"{scene.shape[1]} scene {scene.name!r}, so there is nothing to score (every metric would "
                         f"be NaN); give {fix}")
    return test


def metrics_from_scores(scores: dict[str, Any], excluded: int = 0, all_labelled: bool = False) -> dict[str, float]:
    """:func:`score_map`'s percentages -> zoo's metrics: fractions in [0, 1], ``accuracy`` = ``overall_accuracy``,
    ``class_<id>_accuracy`` per class with test pixels (``id``: the class as the labels name it)."""
    out = {k: float(scores[k]) / 100.0 for k in ("overall_accuracy", "average_accuracy", "kappa")}
    out["accuracy"] = out["overall_accuracy"]
    out["n_test"] = float(scores["n_test"])
    if excluded:
        out["excluded_training_pixels"] = float(excluded)
    if all_labelled:
        out["all_labelled_pixels"] = 1.0
    ids = scores.get("class_ids") or range(1, len(scores["per_class_accuracy"]) + 1)
    for i, v in zip(ids, scores["per_class_accuracy"]):
        if v is not None:
            out[f"class_{i}_accuracy"] = float(v) / 100.0
    return out
