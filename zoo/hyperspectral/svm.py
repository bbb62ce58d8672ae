"""``hsi-pca-svm``: per-band standardisation + :class:`HyperspectralPCA` + RBF SVM, as one scikit-learn
Pipeline that also implements ``zoo.api.Trainable`` (``zoo.train`` / ``zoo.evaluate`` on a scene).

The classic spectral baseline of the HybridSN paper's Table II (SVM, 85.30 % OA on Indian Pines with 30 %
training pixels). Melgani & Bruzzone, "Classification of hyperspectral remote sensing images with support
vector machines", IEEE TGRS 42(8), 2004. https://doi.org/10.1109/TGRS.2004.831865
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from joblib import parallel_backend
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import ThreadpoolController

from zoo._stacklevel import user_stacklevel
from zoo.api import ModelState
from zoo.engine.options import check_options
from zoo.engine.seed import seeded
from zoo.hyperspectral.evaluation import (
    SCENE_INPUTS,
    SPLIT_OPTIONS,
    array_input,
    as_scene,
    default_scene,
    given_split_mask,
    metrics_from_scores,
    recorded_options,
    refuse_scene_options,
    require_classes,
    require_fitted_bands,
    require_valid_pixels,
    resolve_split,
    score_labels,
    score_map,
    scored_pixels,
    warn_background_class,
)
from zoo.hyperspectral.pca import HyperspectralPCA
from zoo.hyperspectral.preprocessing import BandStandardizer, no_data_to_zero
from zoo.hyperspectral.provenance import ON_OVERLAP, TrainingRecord, forget_training_split, screen_test_pixels
from zoo.hyperspectral.scene import Scene
from zoo.hyperspectral.serialize import (
    META_KEY,
    estimator_state,
    pack_json,
    python_number,
    restore_estimator,
    unpack_json,
)
from zoo.inputs import whole_number

__all__ = ["HSIPipeline", "PCASVMConfig", "load_pipeline", "make_pca_svm"]

FORMAT = "zoo.hsi-pca-svm/1"
PREDICT_INPUTS = f"(N, C) pixel spectra, one (C,) spectrum, {SCENE_INPUTS}"
log = logging.getLogger(__name__)
KERNEL_TERMS_PER_THREAD = 1 << 24
""":meth:`HSIPipeline.predict_rows` gives a thread no fewer kernel terms than this (pixels x support vectors x
features), about 18 ms of libsvm's work on a core of an AMD EPYC Zen 3; far below it the threads cost more than
they save (there a 41-vector, 8-feature pipeline labelled 2,304 pixels in 4.4 ms in one call and 7.5 ms on two
threads; the shipped Indian Pines weights, 1,660 vectors of 70 features, 512 pixels in 64 and 38 ms)."""


@dataclass(frozen=True)
class PCASVMConfig:
    """The settings of the PCA + SVM pixel classifier (Indian Pines defaults of the HybridSN paper's baseline)."""

    n_components: int | float | None = 30  # not "float": zoo's config checks would make an int count 30.0, and 1 1.0
    """PCA components kept: an int count, a float in (0, 1) for that fraction of the variance, or None for all
    (as :class:`~zoo.hyperspectral.HyperspectralPCA` and scikit-learn's PCA take them)."""
    whiten: bool = False
    C: float = 100.0
    """RBF SVM regularisation."""
    gamma: float | str = "scale"
    """RBF kernel width: a float, or ``scale`` / ``auto`` (scikit-learn's rules)."""
    class_weight: str | dict | None = None
    """``balanced`` reweights classes by inverse frequency; a dict ``{class: weight}`` sets them (scikit-learn's
    ``SVC(class_weight=...)``: each class's C is multiplied by its weight, a class left out keeps 1)."""


class HSIPipeline(Pipeline):
    """scikit-learn Pipeline on ``(N, C)`` pixels, plus scene-level training, evaluation and prediction."""

    registry_name = "hsi-pca-svm"  # the name zoo.build knows it by, as every zoo model has (not a parameter)

    # -- zoo.api.Trainable -----------------------------------------------------------------------------
    def zoo_train(self, data: Any, *, labels: Any = None, split: Any = None, train_fraction: float | None = None,
                  seed: int = 0, train_mask: Any = None, window: int | None = None, block: int | None = None,
                  search: bool = False, param_grid: dict[str, list] | None = None, cv: int = 3,
                  n_jobs: int | None = None, progress: bool = False, gt_key: str | None = None,
                  cube_key: str | None = None, **unused):
        """Fit on the training pixels of ``data`` (a Scene, path or data set name) or on ``(X, y)``.

        ``split="auto"`` (the default): a public data set's protocol, ``"disjoint"`` with a ``train_mask``
        (array or file), else spatial ``"blocks"`` (see :func:`zoo.hyperspectral.evaluation.auto_split`;
        ``train_fraction`` 0.3, ``window`` 25, ``block`` 16 unless given). The training pixels are recorded
        (``training_record_``, saved with the weights) so no evaluation scores them. ``(X, y)`` pixels are
        fitted as they are (0 is a class, as in scikit-learn; a warning when 0 is the most frequent label, as the
        unlabelled pixels of a flattened scene are): the split options are an error with them.

        ``search=True`` picks ``svm__C`` / ``svm__gamma`` by stratified ``cv``-fold cross-validation (shuffled
        with ``seed``) on the training pixels only; ``progress=True`` has it report its folds (scikit-learn's
        ``verbose``: one fit has nothing to report). Its fits run on as many threads as torch computes on
        (``n_jobs=None``: libsvm releases the GIL; BLAS meanwhile on one thread), with the results of one job:
        on 2 cores of an AMD EPYC Zen 3, 9 settings x 3 folds on Indian Pines took 3.59-4.17 s against
        6.26-7.39 s in one job (1.68-1.77x, three runs of ``benchmarks/hsi_svm_search.py``); an int ``n_jobs``
        is scikit-learn's (joblib's processes). ``gt_key`` / ``cube_key``: the arrays of a .mat scene or
        ground truth to read (:func:`~zoo.hyperspectral.readers.load_scene`). Returns a ``zoo.engine.TrainResult``.
        """
        from zoo.engine import TrainResult

        check_options(unused, "zoo.train on hsi-pca-svm", ("labels", "split", "train_fraction", "seed", "train_mask",
                                                           "window", "block", "search", "param_grid", "cv", "n_jobs",
                                                           "progress", "gt_key", "cube_key"))
        if isinstance(data, tuple) and len(data) == 2 and getattr(data[0], "ndim", 2) != 3:  # 3-D: a cube, said so
            refuse_scene_options("zoo.train", {"labels": labels, "split": split, "train_fraction": train_fraction,
                                               "train_mask": train_mask, "window": window, "block": block,
                                               "gt_key": gt_key, "cube_key": cube_key})
            X, y = _pixels_and_labels(data)
            require_classes(y, "the training labels y", "a classifier needs pixels of at least two classes")
            warn_background_class(y, "zoo.train")
            record = (None, None, None)  # no scene: no pixels to keep out of a later evaluation, nor a test set
        else:
            X, y, record = self._train_pixels(as_scene(data, labels, gt_key=gt_key, cube_key=cube_key),
                                              "auto" if split is None else split,
                                              0.3 if train_fraction is None else train_fraction, seed, train_mask,
                                              25 if window is None else window, 16 if block is None else block)
        t0 = time.perf_counter()
        history: dict[str, Any] = {"epoch": 1, "step": 1}  # one fit: one row
        # as every family's run: seeded for itself, the caller's generator states put back (SVC.fit draws libsvm's
        # seed from NumPy's global generator, which moved the caller's)
        with seeded(seed):
            if search:
                grid = param_grid or {"svm__C": [10.0, 100.0, 1000.0], "svm__gamma": ["scale", 0.01, 0.1]}
                on_threads = n_jobs is None and torch.get_num_threads() > 1
                gs = GridSearchCV(self, grid, cv=StratifiedKFold(cv, shuffle=True, random_state=seed),
                                  n_jobs=torch.get_num_threads() if on_threads else n_jobs, refit=False,
                                  verbose=2 if progress else 0)
                with _libsvm_on_threads() if on_threads else contextlib.nullcontext():
                    gs.fit(X, y)
                self.set_params(**gs.best_params_)
                history["cv_accuracy"] = float(gs.best_score_)
                history["best_params"] = {k: v for k, v in gs.best_params_.items()}
            self.fit(X, y)  # forgets an earlier run's split; this run's is recorded once the fit succeeded
        self.split_, self.last_split_, self.training_record_ = record
        history["fit_seconds"] = time.perf_counter() - t0
        history["train_accuracy"] = float((self.predict_rows(X) == y).mean())
        history["n_train"] = len(y)
        monitor = "cv_accuracy" if search else "train_accuracy"
        return TrainResult(history=[history], best_metric=history[monitor], best_epoch=1, checkpoint_path=None,
                           model=self, monitor=monitor)

    def _train_pixels(self, scene: Scene, split: Any, train_fraction: float, seed: int, train_mask: Any, window: int,
                      block: int) -> tuple[np.ndarray, np.ndarray, tuple[Any, Any, TrainingRecord]]:
        """``(X, y)`` of the split's training pixels, and the record of the split and of those pixels
        (``split_``, the split, ``training_record_``)."""
        options = recorded_options(train_fraction=train_fraction, seed=seed, window=window, block=block)
        sp = resolve_split(scene, split=split, train_mask=train_mask, **options)
        require_valid_pixels(scene, scene.labels > 0, "among the labelled pixels")
        recipe = {"split": sp.info["split"], **options} if isinstance(split, str) else None
        record = TrainingRecord.from_mask(scene, sp.train, recipe or {"split": sp.name},
                                          given_split_mask(scene, sp, train_mask))
        return scene.pixels(sp.train), scene.labels[sp.train], (recipe, sp, record)

    def fit(self, X, y=None, **params):
        """scikit-learn's ``Pipeline.fit``. A fit forgets what an earlier one learnt, and with it the scene split
        an earlier ``zoo.train`` recorded: its test pixels may be among ``X`` now, so no evaluation may take
        them as held out."""
        _refuse_cube(X, "fit", "fit on the labelled pixels: fit(cube[labels > 0], labels[labels > 0]), or "
                               "zoo.train(model, Scene(cube, labels=labels))")
        forget_training_split(self)
        self._class_weight_by_class(y)
        return super().fit(X, y, **params)

    def predict(self, X, **params):
        """scikit-learn's ``Pipeline.predict`` on ``(N, C)`` pixels (:meth:`predict_scene` labels a cube)."""
        _refuse_cube(X, "predict", "predict_scene(Scene(cube)) or zoo.predict(model, cube) give its (H, W) label map")
        return super().predict(X, **params)

    def _class_weight_by_class(self, y: Any) -> None:
        """A ``class_weight`` read from JSON (a saved file's config, ``zoo train --model class_weight='{"3": 2}'``)
        names its classes as text: each key is matched to the class of ``y`` it spells (scikit-learn refused
        ``"3"`` as "not in class" when the classes are ids)."""
        svm = self.named_steps["svm"]
        if not isinstance(svm.class_weight, dict) or y is None:
            return
        classes = np.unique(np.asarray(y)).tolist()
        by_text = {str(int(c)) if isinstance(c, float) and c.is_integer() else str(c): c for c in classes}
        svm.set_params(class_weight={k if k in classes else by_text.get(str(k), k): v
                                     for k, v in svm.class_weight.items()})

    def zoo_evaluate(self, data: Any, *, labels: Any = None, mask: np.ndarray | None = None, split: Any = None,
                     on_overlap: str = "error", progress: bool = False, gt_key: str | None = None,
                     cube_key: str | None = None, **kw) -> dict[str, float]:
        """OA / AA / kappa (fractions) on the test pixels of the split used for training (or ``mask``/``split``,
        with the split options of :data:`~zoo.hyperspectral.evaluation.SPLIT_OPTIONS`); on another scene than
        the training one, on all its labelled pixels (``all_labelled_pixels``: 1).

        Test pixels that were training pixels of this model (its weights record them) are refused
        (``on_overlap="error"``) or left out and counted (``"exclude"``: ``excluded_training_pixels``).
        Classes are the scene's ids; one the model never trained on scores 0 (``class_<id>_accuracy``).
        ``(X, y)`` pixels are scored with their labels as they are, as ``zoo.train`` took them (0 is a class);
        the options that choose a scene's pixels are an error with them. ``gt_key`` / ``cube_key``: the arrays
        of a .mat scene or ground truth to read (:func:`~zoo.hyperspectral.readers.load_scene`). ``progress=True``
        shows a bar over the pixels classified (:meth:`predict_rows`).
        """
        check_options({k: v for k, v in kw.items() if k not in SPLIT_OPTIONS}, "zoo.evaluate on hsi-pca-svm",
                      ("labels", "mask", "split", "on_overlap", "progress", "gt_key", "cube_key", *SPLIT_OPTIONS))
        if on_overlap not in ON_OVERLAP:
            raise ValueError(f"on_overlap must be one of {ON_OVERLAP}; got {on_overlap!r}")
        # before the split is chosen: unfitted, the missing split would be blamed instead (predict says NotFittedError)
        check_is_fitted(self)
        if isinstance(data, tuple) and len(data) == 2 and getattr(data[0], "ndim", 2) != 3:  # 3-D: a cube, said so
            refuse_scene_options("zoo.evaluate", {"labels": labels, "mask": mask, "split": split, "gt_key": gt_key,
                                                  "cube_key": cube_key, **kw})
            X, y = _pixels_and_labels(data)
            warn_background_class(y, "zoo.evaluate")
            return metrics_from_scores(score_labels(self.predict_rows(X, progress=progress), y))
        scene = as_scene(data if data is not None else default_scene(self), labels, gt_key=gt_key, cube_key=cube_key)
        chosen, whole = scored_pixels(self, scene, mask, split, kw)
        test, excluded = screen_test_pixels(self, scene, chosen, on_overlap)
        require_valid_pixels(scene, test, "among the test pixels")
        pred = self.predict_scene(scene, mask=test, progress=progress)
        return metrics_from_scores(score_map(pred, scene.labels, test), excluded, whole)

    def zoo_predict(self, inputs: Any, *, mask: np.ndarray | None = None, progress: bool = False,
                    gt_key: str | None = None, cube_key: str | None = None) -> np.ndarray:
        """A scene (Scene, scene file, data set name, or an ``(H, W, C)`` cube) -> ``(H, W)`` label map
        (0 outside ``mask`` and on pixels without a spectrum, with a warning); ``(N, C)`` pixel spectra ->
        ``(N,)`` labels; one ``(C,)`` spectrum -> its label. Arrays may be NumPy arrays, torch tensors, pandas
        DataFrames / Series or lists of numbers. ``gt_key`` / ``cube_key``: the arrays of a .mat scene file
        to read. ``progress=True`` shows a bar over the pixels of a scene or of ``(N, C)`` spectra (a DataFrame
        or a single spectrum is one call to scikit-learn: no bar)."""
        arr = array_input(inputs) if gt_key is None and cube_key is None else None
        if arr is None:
            return self.predict_scene(as_scene(inputs, gt_key=gt_key, cube_key=cube_key, expected=PREDICT_INPUTS,
                                                       ground_truth=False),
                                      mask=mask, progress=progress)
        if mask is not None and arr.ndim in (1, 2):  # it would be dropped without a word
            raise ValueError(f"mask= selects pixels of a scene's (H, W) map; these are {arr.shape} pixel spectra: "
                             f"pass only the rows to classify (X[mask]), or the (H, W, C) cube with mask=")
        if arr.ndim == 1:
            # a Series as a one-row DataFrame: its index names the bands, as a DataFrame's columns do
            return self.predict(inputs.to_frame().T if hasattr(inputs, "to_frame") else arr[None])[0]
        if arr.ndim == 2:
            # a DataFrame as it is: scikit-learn checks its column names against those fit saw
            return self.predict(inputs) if hasattr(inputs, "columns") else self.predict_rows(arr, progress=progress)
        if arr.ndim == 3:
            return self.predict_scene(Scene(arr), mask=mask, progress=progress)
        raise ValueError(f"zoo.predict on hsi-pca-svm expected {PREDICT_INPUTS}; got {type(inputs).__name__} of "
                         f"shape {arr.shape}")

    def zoo_state(self) -> ModelState:
        from zoo.registry import validate_config

        svm, pca = self.named_steps["svm"], self.named_steps["pca"]
        weights = svm.class_weight
        if isinstance(weights, dict):  # class ids read from a label map are np.int64, which no JSON key may be
            weights = {python_number(k): python_number(v) for k, v in weights.items()}
        # set_params takes NumPy numbers as they come (svm__C=np.float32(3) from a grid): the config is saved as
        # JSON, so it is normalised as zoo.build normalises the same settings
        config = validate_config(self.registry_name, {"n_components": pca.n_components, "whiten": pca.whiten,
                                                      "C": svm.C, "gamma": svm.gamma, "class_weight": weights})
        return ModelState("hsi-pca-svm", config, self.export_state_dict())

    # -- scene helpers ---------------------------------------------------------------------------------
    def classes_and_names(self) -> np.ndarray:
        return self.named_steps["svm"].classes_

    def fitted_bands(self) -> int | None:
        """The band count the pipeline was fitted on (``None`` before fitting)."""
        return getattr(self.steps[0][1], "n_features_in_", None)

    def predict_rows(self, X: Any, chunk: int = 8192, *, progress: bool = False) -> np.ndarray:
        """``predict(X)`` for ``(N, C)`` pixels, in pieces of at most ``chunk`` rows (to bound the pipeline's
        temporaries), shared out over as many threads as torch computes on (``torch.get_num_threads()``: set it
        with ``torch.set_num_threads`` or ``OMP_NUM_THREADS``) where the SVM's work is large enough
        (:data:`KERNEL_TERMS_PER_THREAD` a thread). libsvm releases the GIL while it predicts and a pixel's
        label depends on its row alone, so the labels are those of one ``predict(X)``. Meanwhile BLAS runs on
        one thread: libsvm's kernel products call it, and its idle workers otherwise spin on the cores the
        pieces need (on a Zen 3, 512 pixels of the shipped weights took 64 ms in one call, as long on two
        threads with BLAS as it was, 38-41 ms with BLAS on one). On 2 cores of that Zen 3 the shipped weights
        label the 21,025 pixels of Indian Pines in 1.31-1.69 s against scikit-learn's 2.58-2.97 s (1.76-1.97x,
        three runs of ``benchmarks/hsi_predict_scene.py``). Shared-out calls from several of the user's
        threads take turns (each uses every thread already, and the BLAS limit is process-wide). Anything but a
        NumPy array (a DataFrame, whose column names scikit-learn checks) goes to ``predict`` as it is.
        ``progress=True``: a bar of the pixels labelled, piece by piece."""
        chunk = whole_number(chunk, "chunk", hint="pixels per predict call")
        if not isinstance(X, np.ndarray) or X.ndim != 2:
            return self.predict(X)
        n = len(X)
        threads = self._predict_threads(n)
        chunks = -(-n // chunk)  # pieces of at most `chunk` rows...
        pieces = threads * -(-chunks // threads)  # ...as many for every thread
        bounds = np.linspace(0, n, pieces + 1).round().astype(int)
        parts = [X[a:b] for a, b in itertools.pairwise(bounds)]
        from zoo._progress import ProgressBar

        with ProgressBar(total=n, disable=not progress, desc="predict", unit="pixel") as bar:
            if threads == 1:
                if len(parts) == 1:
                    return _counted(self.predict(X), bar)
                return np.concatenate([_counted(self.predict(part), bar) for part in parts])
            with _one_blas_thread(), ThreadPoolExecutor(threads, thread_name_prefix="zoo-svm-predict") as pool:
                return np.concatenate([_counted(labels, bar) for labels in pool.map(self.predict, parts)])

    def _predict_threads(self, rows: int) -> int:
        """Threads for :meth:`predict_rows`: 1 unless the last step is a fitted libsvm estimator (the one whose
        predict releases the GIL) with :data:`KERNEL_TERMS_PER_THREAD` terms for each."""
        vectors = getattr(self.steps[-1][1], "support_vectors_", None)  # (vectors, features)
        if vectors is None:
            return 1
        terms = rows * vectors.shape[0] * vectors.shape[1]
        return max(1, min(torch.get_num_threads(), terms // KERNEL_TERMS_PER_THREAD))

    def predict_scene(self, scene: Scene, mask: np.ndarray | None = None, chunk: int = 8192, *,
                      progress: bool = False) -> np.ndarray:
        """``(H, W)`` label map (0 outside ``mask``, and where a pixel has no spectrum: see
        :func:`~zoo.hyperspectral.preprocessing.no_data_to_zero`); ``progress``: a bar of the pixels labelled."""
        _check_map_classes(self.classes_and_names() if hasattr(self.named_steps["svm"], "classes_") else None)
        require_fitted_bands("hsi-pca-svm", self.fitted_bands(), scene)
        h, w, _ = scene.shape
        sel = np.ones((h, w), bool) if mask is None else np.asarray(mask, bool)
        if sel.shape != (h, w):
            raise ValueError(f"mask of shape {sel.shape} does not match the {h}x{w} scene")
        sel = no_data_to_zero(scene, sel)
        P = scene.pixels(sel)
        out = self.predict_rows(P, chunk, progress=progress) if len(P) else []
        pred = np.zeros((h, w), np.int64)
        pred[sel] = out
        return pred

    # -- weights ---------------------------------------------------------------------------------------
    def export_state_dict(self) -> dict[str, torch.Tensor]:
        """Every fitted array as a tensor, plus the JSON config under ``__meta__`` (see zoo.hyperspectral.serialize)."""
        import sklearn

        tensors: dict[str, torch.Tensor] = {}
        record = getattr(self, "training_record_", None)
        meta: dict[str, Any] = {"format": FORMAT, "sklearn": sklearn.__version__, "steps": [],
                                "split": getattr(self, "split_", None),
                                "training": record.to_json() if record is not None else None}
        for name, est in self.steps:
            if _STEP_CLASSES.get(type(est).__name__) is not type(est):  # a file load_pipeline could not read
                raise ValueError(f"step {name!r} is {est!r}: an hsi-pca-svm file holds the steps it loads "
                                 f"({', '.join(_STEP_CLASSES)}); save another pipeline with skops or joblib")
            t, plain = estimator_state(est, name)
            t.pop(f"{name}.covariance_", None)  # PCA's C x C covariance is not needed to transform
            tensors.update(t)
            meta["steps"].append({"name": name, "class": type(est).__name__, "attrs": plain})  # a list: order matters
        tensors[META_KEY] = pack_json(meta)
        return tensors

    def save(self, path: str | os.PathLike) -> Path:
        from zoo.hub import save_weights

        return save_weights(self.export_state_dict(), path)


_STEP_CLASSES = {"BandStandardizer": BandStandardizer, "HyperspectralPCA": HyperspectralPCA, "SVC": SVC}


def load_pipeline(path_or_state: str | os.PathLike | dict[str, torch.Tensor]) -> HSIPipeline:
    """Rebuild a fitted :class:`HSIPipeline` from its safetensors file (or state dict)."""
    import warnings

    import sklearn

    from zoo.hub import load_state_dict

    sd = load_state_dict(path_or_state) if not isinstance(path_or_state, dict) else path_or_state
    if META_KEY not in sd:
        raise ValueError("not an hsi-pca-svm weights file: no __meta__ record (was it saved by HSIPipeline.save?)")
    meta = unpack_json(sd[META_KEY])
    if meta.get("format") != FORMAT:
        raise ValueError(f"unsupported hsi-pca-svm weights format {meta.get('format')!r}; expected {FORMAT!r}")
    if meta.get("sklearn") != sklearn.__version__:
        warnings.warn(f"hsi-pca-svm weights were written with scikit-learn {meta.get('sklearn')}, "
                      f"this is {sklearn.__version__}; predictions are checked by tests only for equal versions",
                      stacklevel=user_stacklevel())
    steps = []
    for spec in meta["steps"]:
        name = spec["name"]
        cls = _STEP_CLASSES.get(spec["class"])
        if cls is None:
            raise ValueError(f"unknown pipeline step class {spec['class']!r}")
        steps.append((name, restore_estimator(cls, sd, spec["attrs"], name)))
    pipe = HSIPipeline(steps)
    pipe.split_ = meta.get("split")
    pipe.training_record_ = TrainingRecord.from_json(meta["training"]) if meta.get("training") else None
    return pipe


def make_pca_svm(n_components: float | None = 30, whiten: bool = False, C: float = 100.0,
                 gamma: float | str = "scale", class_weight: str | dict | None = None) -> HSIPipeline:
    """The unfitted pipeline: ``scale`` (:class:`BandStandardizer`), ``pca``, ``svm``."""
    return HSIPipeline([
        ("scale", BandStandardizer()),
        ("pca", HyperspectralPCA(n_components=n_components, whiten=whiten)),
        ("svm", SVC(kernel="rbf", C=C, gamma=gamma, class_weight=class_weight)),
    ])


def integral_classes(classes: Any) -> bool:
    """Whether fitted classes are class ids: integers, or whole-number floats (labels read from a .mat file or a
    DataFrame); not strings, which a label map or the ONNX graph's int64 labels cannot hold."""
    values = np.asarray(classes)
    return values.dtype.kind in "iub" or (values.dtype.kind == "f" and bool(np.all(values == np.round(values))))


def _check_map_classes(classes: np.ndarray | None) -> None:
    """A label map holds class ids with 0 for the pixels it leaves out: string classes cannot be written there
    (an int conversion fails), and a class 0 would read as unlabelled (warned)."""
    if classes is None:
        return
    values = np.asarray(classes)
    if not integral_classes(values):
        raise ValueError(f"hsi-pca-svm was fitted on labels {values.tolist()[:5]}: a scene's label map holds integer "
                         f"class ids (0: no label), so fit it on ids 1..K (LabelEncoder().fit_transform(y) + 1), or "
                         f"predict (N, C) pixels, which gives its own labels")
    if 0 in values.tolist():
        warnings.warn("hsi-pca-svm has a class 0 (fitted on 0-based labels): in this label map 0 is that class and "
                      "also every pixel outside the mask or without a spectrum; fit on ids 1..K to tell them apart",
                      stacklevel=user_stacklevel())


@functools.cache
def _blas_libraries() -> ThreadpoolController:
    """The BLAS libraries this process has loaded (found once: 13 ms; a limit then costs 0.1 ms)."""
    return ThreadpoolController()


# One shared-out prediction or search at a time. Each already runs on all of torch's threads, and the BLAS limit it
# holds is process-wide: threadpoolctl's limiter restores on exit what it found on entry, so two that overlapped on
# two of the user's threads (the second started while the first ran and ended after it) left BLAS on one thread for
# the rest of the process. Reentrant: a thread that holds it never waits for itself. A child forked while another
# thread held it (a DataLoader's workers) starts with its own.
_BLAS_HOLD = threading.RLock()


def _new_blas_hold() -> None:
    global _BLAS_HOLD
    _BLAS_HOLD = threading.RLock()


if hasattr(os, "register_at_fork"):  # POSIX: Windows has no fork
    os.register_at_fork(after_in_child=_new_blas_hold)


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on one thread while libsvm runs on several: its kernel products call BLAS, and OpenBLAS's idle
    workers would spin on the cores the other threads need. A caller on another thread waits for its turn."""
    with _BLAS_HOLD, _blas_libraries().limit(limits=1, user_api="blas"):
        yield


@contextlib.contextmanager
def _libsvm_on_threads() -> Iterator[None]:
    """scikit-learn's joblib jobs (a grid search's fits) on threads instead of processes, libsvm releasing the
    GIL, with BLAS on one thread."""
    with parallel_backend("threading"), _one_blas_thread():
        yield


def _refuse_cube(X: Any, method: str, instead: str) -> None:
    """An ``(H, W, C)`` cube (or a Scene) given where ``(N, C)`` pixels go: the scaler and the PCA take cubes, so
    it went through both (fitting them, in ``fit``) before the SVM said "Found array with dim 3, while dim <= 2 is
    required by SVC"."""
    if isinstance(X, Scene) or getattr(X, "ndim", None) == 3:
        raise ValueError(f"HSIPipeline.{method} takes (N, C) pixel spectra; got an (H, W, C) cube of shape "
                         f"{tuple(X.shape)}: {instead}")


def _counted(labels: np.ndarray, bar: Any) -> np.ndarray:
    """``labels`` of a piece of pixels, counted on the progress ``bar`` as they come."""
    bar.update(len(labels))
    return labels


def _pixels_and_labels(data: tuple[Any, Any]) -> tuple[Any, np.ndarray]:
    """``(X, y)`` as scikit-learn's ``fit`` takes them: a DataFrame ``X`` as it is (the pipeline keeps its column
    names and checks them at predict: as an array, columns in another order would be taken without a word), other
    ``X`` as an array; ``y`` one-dimensional (an ``(N, 1)`` column is raveled with scikit-learn's
    DataConversionWarning: compared as it comes, it would broadcast and score 0.23 for 0.88)."""
    from sklearn.utils.validation import column_or_1d

    X = data[0] if hasattr(data[0], "columns") else np.asarray(data[0])
    return X, column_or_1d(np.asarray(data[1]), warn=True)
