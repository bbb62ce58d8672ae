"""What turns a window network into a scene classifier: the fitted preprocessing (band standardisation +
PCA, stored as buffers so that network and preprocessing save and load as one weights file), training on
a scene through :func:`zoo.engine.fit`, evaluation and prediction of full label maps.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from zoo._stacklevel import user_stacklevel
from zoo.api import ModelState
from zoo.engine.data import inference_loader, model_dtype, move_batch
from zoo.engine.devices import usable_device
from zoo.engine.modes import eval_mode
from zoo.hyperspectral.evaluation import (
    array_input,
    as_scene,
    default_scene,
    given_split_mask,
    recorded_options,
    require_fitted_bands,
    require_valid_pixels,
    resolve_split,
    score_map,
)
from zoo.hyperspectral.patches import PatchDataset
from zoo.hyperspectral.pca import HyperspectralPCA
from zoo.hyperspectral.preprocessing import BandStandardizer, no_data_to_zero, scene_nodata, valid_pixel_mask
from zoo.hyperspectral.provenance import (
    TrainingRecord,
    forget_training_split,
    scene_fingerprint,
    screen_test_pixels,
)
from zoo.hyperspectral.scene import Scene

__all__ = ["PRE_KEYS", "SPECTRAL_NORMS", "SQUARE_SYMMETRIES", "TRAINING_KEY", "SceneClassifierMixin", "scene_recipe",
           "square_symmetry", "unit_spectra"]

PRE_KEYS = ("pre_mean", "pre_scale", "pca_mean", "pca_components", "pca_scale")
HEAD_PREFIX = "classifier.7."  # HybridSN's output layer (hybridsn.py), the one that depends on num_classes
TRAINING_KEY = "__training__"  # the TrainingRecord as JSON bytes (a uint8 tensor): not a module buffer


# the eight symmetries of a square window: (quarter turns, mirrored first)
SQUARE_SYMMETRIES = tuple((k, flip) for flip in (False, True) for k in range(4))


def square_symmetry(x: torch.Tensor, k: int, flip: bool, inverse: bool = False) -> torch.Tensor:
    """``x`` (``(..., H, W)``) mirrored left-right if ``flip``, then turned ``k`` quarter turns; ``inverse``
    undoes that transform."""
    if inverse:
        x = torch.rot90(x, -k, dims=(-2, -1))
        return x.flip(-1) if flip else x
    return torch.rot90(x.flip(-1) if flip else x, k, dims=(-2, -1))


SPECTRAL_NORMS = ("none", "l2")


def unit_spectra(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(N, C)`` pixels divided by their L2 norms (float64) and the mask of all-zero pixels (left zero)."""
    P = np.asarray(pixels, dtype=np.float64)
    norm = np.linalg.norm(P, axis=1, keepdims=True)
    zero = norm[:, 0] == 0
    return P / np.where(norm == 0, 1.0, norm), zero


def _validation_pixels(scene: Scene, val_scene: Scene, train: np.ndarray) -> np.ndarray:
    """The ``val_data`` scene's labelled pixels to validate on: all of them, but where it is the training scene
    (the same cube), those that are not training pixels. Validating on the training pixels scored the network
    on what it was fitted to, and chose the best epoch by it."""
    labelled = val_scene.labels > 0
    if val_scene.shape != scene.shape or scene_fingerprint(val_scene) != scene_fingerprint(scene):
        return labelled
    shared = labelled & train
    if not shared.any():  # the same cube with another ground truth (a disjoint split's test fields)
        return labelled
    rest = labelled & ~train
    if not rest.any():
        raise ValueError(f"val_data is the training scene {scene.name!r}, and every labelled pixel of it is a "
                         "training pixel: validate on held-out tiles of them with val_fraction=0.1, or give "
                         "another scene")
    warnings.warn(f"val_data is the training scene {scene.name!r}: its {int(shared.sum())} training pixels are left "
                  f"out, and the epochs are scored on its other {int(rest.sum())} labelled pixels, the ones an "
                  "evaluation scores afterwards; to keep them apart, validate on held-out training tiles with "
                  "val_fraction=0.1", UserWarning, stacklevel=user_stacklevel())
    return rest


def scene_recipe(scene: Scene, sp: Any, **options: Any) -> dict[str, Any]:
    """What training on a scene consumed, as its checkpoints record it (``data.*``): the scene's fingerprint
    (size and sampled spectra, :func:`~zoo.hyperspectral.provenance.scene_fingerprint`), the split by kind and
    by its very pixels (mask and labels hashed: a resume on another split would train on test pixels), and
    the options that shaped the windows; options the split kind does not read are left out."""
    import hashlib

    from zoo.hyperspectral.provenance import scene_fingerprint

    kind = sp.info.get("split", sp.name)
    pixels = hashlib.sha256(np.packbits(sp.train).tobytes())
    pixels.update(np.ascontiguousarray(scene.labels[sp.train], dtype=np.int64).tobytes())
    h, w, c = scene.shape
    recipe = {"scene": f"{h}x{w}x{c}, {scene_fingerprint(scene)[:16]}", "split": kind,
              "train_pixels": f"{int(sp.train.sum())} pixels, {pixels.hexdigest()[:16]}"}
    skip = {"train_fraction"} if kind not in ("random", "blocks") else set()
    skip |= {"block"} if kind != "blocks" else set()
    skip |= {"val_block"} if not options.get("val_fraction") else set()
    return {**recipe, **{k: v for k, v in options.items() if k not in skip}}


class SceneClassifierMixin:
    """Mixed into an ``nn.Module`` whose input is a ``(1, k, w, w)`` window of ``k`` PCA components.

    Subclasses provide ``self.config.n_bands`` (= k), ``.window`` and ``.num_classes``, and ``registry_name``.
    ``zoo.train`` / ``zoo.evaluate`` take a scene (Scene, scene file, data set name) or a Dataset of windows.
    """

    # where zoo_train's **fit_kwargs and zoo_evaluate's **kw go (zoo.registry.call_options reads it)
    zoo_options_of: ClassVar[dict[str, str]] = {"zoo_train": "zoo.engine.options.FitConfig",
                                                "zoo_evaluate": "zoo.engine.evaluation.evaluate"}

    padding: str = "constant"

    # -- preprocessing buffers -------------------------------------------------------------------------
    @property
    def has_preprocessor(self) -> bool:
        return all(k in self._buffers for k in PRE_KEYS)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        # a fresh network has no preprocessing buffers until it is trained: load_state_dict of a trained one's
        # state would fail 'Unexpected key(s) "pre_mean", ...' where torch's own round trip is expected to work
        if not self.has_preprocessor and all(prefix + k in state_dict for k in PRE_KEYS):
            k = self.config.n_bands
            shape = tuple(state_dict[prefix + "pca_components"].shape)
            if len(shape) != 2 or shape[0] != k:
                raise ValueError(f"PCA components must be ({k}, C_raw) for n_bands={k}; got {shape}")
            device = next((p.device for p in self.parameters()), torch.device("cpu"))  # where the network is
            for name in PRE_KEYS:
                self.register_buffer(name, torch.empty(state_dict[prefix + name].shape, dtype=torch.float32,
                                                       device=device))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _apply(self, fn, recurse=True):
        # .half(), .to(torch.bfloat16), .double() cast every floating buffer; the fitted standardisation and PCA
        # stay float32 (rounded to bf16, a band's mean moved 15 raw units on Indian Pines and the components 0.4
        # sigma), only moving where the network goes
        kept = {k: self._buffers[k] for k in PRE_KEYS if self._buffers.get(k) is not None}
        out = super()._apply(fn, recurse)
        for name, before in kept.items():
            after = self._buffers[name]
            if after.dtype != torch.float32:
                self._buffers[name] = before.to(device=after.device, dtype=torch.float32)
        return out

    def set_preprocessor(self, mean, scale, pca_mean, components, pca_scale) -> None:
        """Install fitted standardisation and PCA (``components``: ``(k, C_raw)``) as persistent buffers."""
        vals = [torch.as_tensor(np.asarray(v), dtype=torch.float32) for v in (mean, scale, pca_mean, components,
                                                                              pca_scale)]
        k = self.config.n_bands
        if vals[3].shape[0] != k or vals[3].dim() != 2:
            raise ValueError(f"PCA components must be ({k}, C_raw) for n_bands={k}; got {tuple(vals[3].shape)}")
        for name, v in zip(PRE_KEYS, vals):
            self.register_buffer(name, v.clone())

    @property
    def unit_spectra(self) -> bool:
        """``spectral_norm="l2"``: every pixel's spectrum is divided by its L2 norm before standardisation."""
        return getattr(self.config, "spectral_norm", "none") == "l2"

    def fitted_bands(self) -> int | None:
        """The band count the preprocessing was fitted on (``None`` before training), as hsi-pca-svm's."""
        return self.pre_mean.numel() if self.has_preprocessor else None

    def _retrain_hint(self, scene: Any) -> str:
        """How this model would fit ``scene``'s bands instead: training it on the scene, unless the scene has
        fewer bands than the ``n_bands`` PCA components it takes (:meth:`require_bands` would refuse it)."""
        shape, name = tuple(scene.shape), self.registry_name
        c = shape[-1] if shape else 0
        if c >= self.config.n_bands:
            return "train it on this scene with zoo.train"
        if c >= self.min_n_bands:
            return f"train a {name} built with n_bands <= {c} on this scene with zoo.train"
        return f"{name} takes scenes of at least {self.min_n_bands} bands: train hsi-pca-svm on this one"

    # the fewest PCA components the network's layers take, and which layers (HybridSN: its 3-D convolutions)
    min_n_bands: int = 1
    min_n_bands_layers: str = "its layers"

    def require_bands(self, scene: Scene) -> None:
        """Refuse a scene with fewer bands than the ``n_bands`` PCA components the network takes, before any
        work: PCA keeps at most one component per band, and the network's input depth is fixed when built."""
        k, c, least = self.config.n_bands, scene.n_bands, self.min_n_bands
        if c >= k:
            return
        name = self.registry_name
        fix = (f"build it with zoo.build({name!r}, n_bands=N) for {least} <= N <= {c} ({least}: the least "
               f"{self.min_n_bands_layers} take; model_config={{'n_bands': {c}}} for zoo.train by name, "
               f"--n-bands {c} on the command line)" if c >= least else
               f"{name} cannot classify it: {self.min_n_bands_layers} take n_bands >= {least}, so scenes of at "
               f"least {least} bands (hsi-pca-svm classifies pixels of any band count)")
        raise ValueError(f"scene {scene.name!r} has {c} bands, fewer than the n_bands={k} PCA components this "
                         f"{name} takes (PCA keeps at most one per band): {fix}")

    def fit_preprocessor(self, scene: Scene, train_mask: np.ndarray | None) -> None:
        """Fit (spectral normalisation +) standardisation + whitened PCA on the training pixels only."""
        self.require_bands(scene)  # before the PCA, whose fit would end in a shape error
        if self.unit_spectra:
            pixels, zero = unit_spectra(scene.pixels(train_mask))
            pixels = pixels[~zero]  # an all-zero pixel (no data) has no direction to learn from
            scaler = BandStandardizer().fit(pixels)
        else:
            scaler = BandStandardizer().fit(scene.cube, mask=train_mask)
            pixels = scene.pixels(train_mask)
        if len(pixels) < self.config.n_bands:  # the PCA's own refusal names its n_components, not this setting
            raise ValueError(f"{len(pixels)} training pixels cannot give the {self.config.n_bands} PCA components "
                             f"{type(self).__name__} reduces a scene to (n_bands={self.config.n_bands}): train on "
                             f"more pixels, or build it with n_bands <= {len(pixels)}")
        pca = HyperspectralPCA(n_components=self.config.n_bands, whiten=True).fit(scaler.transform(pixels))
        self.set_preprocessor(scaler.mean_, scaler.scale_, pca.mean_, pca.components_,
                              1.0 / np.sqrt(np.maximum(pca.explained_variance_, 1e-12)))

    # raw bytes of the row block reduced at once: its float64 temporaries stay a few times this, whatever
    # the scene's size (a whole 1000x1000x200 scene in float64 at once peaked near 6 GB)
    reduce_chunk_bytes: int = 16 << 20

    def reduce(self, scene: Scene | np.ndarray, rows: slice | None = None) -> np.ndarray:
        """``(H, W, C_raw)`` -> ``(H, W, k)`` float32 through the stored preprocessing (``rows``: only those
        rows of the scene, ``(len(rows), W, k)``); a pixel without a spectrum (NaN/inf, or the no-data
        value: see :func:`valid_pixel_mask`) reduces to 0, the padding value, so it does not turn every
        window that reaches it into NaN. Reads and reduces one block of rows at a time (float64 math), so
        a lazily opened file is never in memory whole."""
        if not self.has_preprocessor:
            raise ValueError("this model has no fitted preprocessing: train it on a scene with zoo.train, or load "
                             "weights that include it (e.g. zoo.build('hybridsn', weights='indian-pines'))")
        nodata = scene_nodata(scene)
        if not isinstance(scene, Scene):
            scene = np.asarray(scene)
        # the message hsi-pca-svm gives: the model, both band counts and the fix (it said only "the preprocessing
        # was fitted on 16-band scenes; got cube shape (20, 20, 12)")
        require_fitted_bands(self.registry_name, self.fitted_bands(), scene, self._retrain_hint(scene))
        h, w, _ = scene.shape
        start, stop, _ = (rows or slice(0, h)).indices(h)
        out = np.zeros((max(0, stop - start), w, self.config.n_bands), np.float32)
        if out.size == 0:
            return out
        scene = scene if isinstance(scene, Scene) else Scene(scene)
        for sl, block in scene.iter_row_chunks(self.reduce_chunk_bytes, dtype=None, rows=slice(start, stop)):
            out[sl.start - start:sl.stop - start] = self._reduce_block(block, nodata)
        return out

    def _reduce_block(self, block: np.ndarray, nodata: float | None) -> np.ndarray:
        """:meth:`reduce` of one ``(h, W, C_raw)`` block of rows as stored, in float64."""
        hb, w, c = block.shape
        P = np.asarray(block, dtype=np.float64, order="C").reshape(-1, c)  # may be the caller's cube: not written
        if self.unit_spectra:
            P, zero = unit_spectra(P)
        # the buffers live where the network does (a GPU, say); this arithmetic runs in NumPy
        pre_mean, pre_scale, pca_mean, pca_components, pca_scale = (
            t.detach().to("cpu", torch.float64).numpy()
            for t in (self.pre_mean, self.pre_scale, self.pca_mean, self.pca_components, self.pca_scale))
        Z = P - pre_mean  # a new array: the steps below work in place on it
        Z /= pre_scale
        Z -= pca_mean
        Z = Z @ pca_components.T
        Z *= pca_scale
        if self.unit_spectra:
            Z[zero] = 0.0  # no data reduces to the padding value, as the exported graph does
        Z[~valid_pixel_mask(block, nodata).reshape(-1)] = 0.0
        return Z.reshape(hb, w, -1)

    # -- zoo.api.Trainable -----------------------------------------------------------------------------
    def zoo_train(self, data: Any, *, labels: Any = None, split: Any = "auto", train_fraction: float = 0.3, seed: int = 0,
                  train_mask: Any = None, block: int = 16, val_data: Any = None, augment: bool = False,
                  noise_std: float = 0.0, val_fraction: float = 0.0, val_block: int = 8, gt_key: str | None = None,
                  cube_key: str | None = None, **fit_kwargs):
        """Train on a scene (Scene, path or data set name): split, fit the preprocessing on the training
        pixels, cut windows on the fly, then :func:`zoo.engine.fit` (``fit_kwargs``: epochs, lr, amp, ...).

        ``split="auto"``: the data set's protocol, ``"disjoint"`` with a ``train_mask`` (array or file), else
        spatial ``"blocks"``; the training pixels are recorded with the weights so that no evaluation scores
        them. Regularisation: ``augment`` (random quarter turns and mirrors of the windows), ``noise_std``
        (Gaussian noise on the whitened PCA components of every training window). ``val_fraction``: hold out
        that share of the training pixels as whole ``val_block``-pixel tiles (see
        :func:`~zoo.hyperspectral.splits.holdout_blocks`), validate on them each epoch (with
        ``early_stopping_patience`` to stop) and end with the weights of the best epoch by ``monitor``
        (default ``val_loss``; counted as fit counts it, ``early_stopping_min_delta`` too: the epoch the result
        reports as ``best_epoch`` and ``best.pt`` holds). ``val_data``: a scene to validate on every epoch instead
        (a Scene with ground truth, a scene file or a data set name: every labelled pixel's window, reduced with
        the preprocessing fitted on the training pixels, as the training windows are), or ready windows (a
        Dataset, DataLoader or ``(X, y)``). A Dataset/DataLoader of ready windows goes to the engine unchanged.
        The checkpoints record the scene's fingerprint, the split (its training pixels) and the recipe: a
        resume with any of them changed is refused, so no test pixel was trained on before the resume.
        ``gt_key`` / ``cube_key``: the arrays of a .mat scene or ground truth to read (``load_scene``)."""
        from zoo.engine import RestoreBest, fit
        from zoo.engine.network import refuse_unknown_train_options
        from zoo.engine.resume import with_recipe

        # before the split, the preprocessing fit and the record of the training pixels, which fit's own
        # refusal came after (and in its words, not zoo.train's)
        refuse_unknown_train_options(self, fit_kwargs)
        arch = dataclasses.asdict(self.config)
        if isinstance(data, (Dataset, DataLoader)):
            if gt_key is not None or cube_key is not None:
                raise ValueError("gt_key= / cube_key= name arrays of a .mat scene file; a Dataset of windows is "
                                 "trained on as it comes: leave them out")
            val_scene = self._validation_scene(val_data)
            if val_scene is not None:  # reduced with the preprocessing the model holds (none: reduce says so)
                val_data = self._windows(self.reduce(val_scene), val_scene.labels, val_scene.labels > 0)
            forget_training_split(self)  # these windows may be an earlier scene run's test pixels
            return fit(self, data, val_data, seed=seed, **with_recipe(fit_kwargs, model=arch, name=self.registry_name))
        options = recorded_options(train_fraction=train_fraction, seed=seed, block=block, augment=augment,
                                   noise_std=noise_std, val_fraction=val_fraction, val_block=val_block)
        if options["val_fraction"] and val_data is not None:
            raise ValueError("give val_data or val_fraction (held-out training tiles), not both")
        scene = as_scene(data, labels, gt_key=gt_key, cube_key=cube_key)
        self.require_bands(scene)  # before the split, whose warnings would come first for a scene refused anyway
        val_scene = self._validation_scene(val_data, scene.n_bands)  # read and checked before any training
        sp, fit_mask, held_out = self._training_pixels(scene, split, train_mask, options)
        t0 = time.perf_counter()
        self.fit_preprocessor(scene, fit_mask)
        reduced = self.reduce(scene)
        train_ds = self._windows(reduced, scene.labels, fit_mask, augment=options["augment"],
                                 noise_std=options["noise_std"])
        fit_kwargs.setdefault("monitor", "train_loss" if val_data is None and held_out is None else "val_loss")
        if held_out is not None:
            val_data = self._windows(reduced, scene.labels, held_out)
            # the best epoch as fit counts it (its min_delta too): the one it reports and copies to best.pt, which a
            # resume reads it back from once keep_last pruned its epoch file
            fit_kwargs["callbacks"] = [*fit_kwargs.get("callbacks", ()),
                                       RestoreBest(fit_kwargs["monitor"], fit_kwargs.get("monitor_mode"),
                                                   fit_kwargs.get("early_stopping_min_delta", 0.0))]
        elif val_scene is not None:
            val_data = self._windows(self.reduce(val_scene), val_scene.labels,
                                     _validation_pixels(scene, val_scene, sp.train))
        self.split_ = ({"split": sp.info["split"], "train_fraction": options["train_fraction"], "seed": options["seed"],
                        "window": self.config.window, "block": options["block"]} if isinstance(split, str) else None)
        self.last_split_ = sp
        self.training_record_ = TrainingRecord.from_mask(scene, sp.train, self.split_ or {"split": sp.name},
                                                         given_split_mask(scene, sp, train_mask))
        recipe = scene_recipe(scene, sp, **{k: v for k, v in options.items() if k != "seed"})
        result = fit(self, train_ds, val_data, seed=options["seed"],
                     **with_recipe(fit_kwargs, data=recipe, model=arch, name=self.registry_name))
        if result.history:
            result.history[-1]["preprocess_and_train_seconds"] = time.perf_counter() - t0
            if held_out is not None:
                result.history[-1]["held_out_pixels"] = int(held_out.sum())
        return result

    def _training_pixels(self, scene: Scene, split: Any, train_mask: Any,
                         options: dict[str, Any]) -> tuple[Any, np.ndarray, np.ndarray | None]:
        """``(split, fit mask, held-out mask or None)``: the scene's split, checked against the network's outputs
        and the pixels' spectra, and the ``val_fraction`` of its training pixels held out as whole tiles."""
        from zoo.hyperspectral.splits import holdout_blocks

        sp = resolve_split(scene, split=split, train_fraction=options["train_fraction"], seed=options["seed"],
                           window=self.config.window, block=options["block"], train_mask=train_mask)
        # every labelled pixel, not only the training ones: a class beyond the outputs that only the
        # test set holds would make the evaluation after training fail
        n_cls = int(scene.labels.max())
        if n_cls > self.config.num_classes:
            raise ValueError(f"the scene has classes up to {n_cls}; the model was built with num_classes="
                             f"{self.config.num_classes} (build it with num_classes={n_cls})")
        require_valid_pixels(scene, scene.labels > 0, "among the labelled pixels")
        if not options["val_fraction"]:
            return sp, sp.train, None
        fit_mask, held_out = holdout_blocks(sp.train, scene.labels, options["val_fraction"],
                                            block=options["val_block"], seed=options["seed"])
        if not held_out.any():
            raise ValueError(f"val_fraction={options['val_fraction']} with {options['val_block']}-pixel tiles holds "
                             f"out no training pixel ({int(sp.train.sum())} training pixels); raise it or use "
                             "smaller tiles")
        return sp, fit_mask, held_out

    def _validation_scene(self, val_data: Any, bands: int | None = None) -> Scene | None:
        """``val_data`` given in the family's own form (a Scene with ground truth, a scene file or a data set
        name) read and checked before any training (``bands``: the training scene's); its windows are cut once
        the preprocessing is fitted. None where it is windows already (a Dataset, a DataLoader or ``(X, y)``,
        which the engine takes as they come) or not given. Anything else is a TypeError here: the engine took a
        path's characters for samples, after a whole epoch."""
        if val_data is None or isinstance(val_data, (Dataset, DataLoader)) or (
                isinstance(val_data, tuple) and len(val_data) == 2):
            return None
        if not isinstance(val_data, (str, os.PathLike, Scene)):
            raise TypeError(f"val_data for {self.registry_name}: expected a Scene with ground truth, a scene file or "
                            f"a data set name (its labelled pixels, reduced as the training scene is), a Dataset or "
                            f"DataLoader of windows, or (X, y) windows; got {type(val_data).__name__}")
        scene = as_scene(val_data)
        if scene.labels is None or not (scene.labels > 0).any():
            raise ValueError(f"val_data: scene {scene.name!r} has no labelled pixels to validate on; give its ground "
                             f"truth with it: val_data=zoo.hyperspectral.load_scene(path, gt=FILE)")
        if bands is not None and scene.n_bands != bands:
            raise ValueError(f"val_data: scene {scene.name!r} has {scene.n_bands} bands, the training scene {bands}: "
                             f"the preprocessing fitted on the one reduces only scenes of its bands")
        n = int(scene.labels.max())
        if n > self.config.num_classes:
            raise ValueError(f"val_data: scene {scene.name!r} has classes up to {n}; this {self.registry_name} has "
                             f"num_classes={self.config.num_classes} outputs (class ids 1..{self.config.num_classes})")
        require_valid_pixels(scene, scene.labels > 0, "among the validation pixels")
        return scene

    def _windows(self, reduced: np.ndarray, labels: np.ndarray, mask: np.ndarray,
                 **augmentation: Any) -> PatchDataset:
        """The windows of the pixels of ``mask`` in a reduced scene, as the network reads them (its window side
        and border padding): training, held-out and validation pixels alike."""
        return PatchDataset.from_mask(reduced, labels, mask, window=self.config.window, padding=self.padding,
                                      **augmentation)

    def zoo_evaluate(self, data: Any, *, labels: Any = None, mask: np.ndarray | None = None, split: Any = None,
                     batch_size: int = 256, amp: str | None = "auto", on_overlap: str = "error", tta: bool = False,
                     progress: bool = False, device: Any = None, gt_key: str | None = None,
                     cube_key: str | None = None, **kw) -> dict[str, float]:
        """OA / AA / kappa (fractions) on the test pixels of the training split (or ``mask`` / ``split``, with
        the split options of :data:`~zoo.hyperspectral.evaluation.SPLIT_OPTIONS`; on another scene than the
        training one, all its labelled pixels: ``all_labelled_pixels`` 1); test pixels that were training
        pixels are refused or, with ``on_overlap="exclude"``, left out and counted.
        Class ids beyond the model's ``num_classes`` outputs cannot be predicted, and are refused.
        ``tta=True`` averages the class probabilities over the eight quarter turns and mirrors of each window
        (see :meth:`predict_scene`). Runs on the model's device (``device=`` moves the model there first).
        ``gt_key`` / ``cube_key``: the arrays of a .mat scene or ground truth to read (``load_scene``).
        On a Dataset of windows, the same metrics through the engine (``kw``: its options)."""
        from zoo.engine.options import check_options
        from zoo.hyperspectral.evaluation import SPLIT_OPTIONS, metrics_from_scores, scored_pixels
        from zoo.inputs import whole_number

        batch_size = whole_number(batch_size, "batch_size")  # the dense path never batches: checked here for both
        if isinstance(data, (Dataset, DataLoader)):
            from zoo.engine import evaluate

            if tta or gt_key is not None or cube_key is not None:
                given = "tta=True" if tta else "gt_key= / cube_key="
                raise ValueError(f"{given} works on a scene (its windows are cut here); a Dataset of windows is "
                                 f"scored as it comes: pass the scene, or leave it out")
            from zoo.engine.options import refuse_unknown_options

            refuse_unknown_options(kw, f"zoo.evaluate on {self.registry_name} (a Dataset of windows)", evaluate,
                                   skip=2, also=["tta"])
            where = {} if device is None else {"device": device}
            # the scene path's metrics always; a user's metrics= (top5, per_class_recall, ...) come beside them
            metrics = ("accuracy", "average_accuracy", "kappa",
                       *(m for m in kw.pop("metrics", ()) if m not in ("accuracy", "average_accuracy", "kappa")))
            out = evaluate(self, data, batch_size=batch_size, amp=amp, progress=progress, metrics=metrics,
                           **where, **kw)
            return {**out, "overall_accuracy": out["accuracy"]}
        check_options({k: v for k, v in kw.items() if k not in SPLIT_OPTIONS}, f"zoo.evaluate on {self.registry_name}",
                      ("labels", "mask", "split", "batch_size", "amp", "on_overlap", "tta", "progress", "device",
                       "gt_key", "cube_key", *SPLIT_OPTIONS))
        scene = as_scene(data if data is not None else default_scene(self), labels, gt_key=gt_key, cube_key=cube_key)
        chosen, whole = scored_pixels(self, scene, mask, split, kw)
        test, excluded = screen_test_pixels(self, scene, chosen, on_overlap)
        n = self.config.num_classes
        beyond = np.unique(scene.labels[test & (scene.labels > n)])
        if beyond.size:
            raise ValueError(f"scene {scene.name!r} has test pixels of class id(s) {beyond.tolist()}, but this "
                             f"{self.registry_name} has {n} outputs (class ids 1..{n}): it cannot predict them. "
                             f"Evaluate on ground truth numbered 1..{n} as in training, or leave those pixels "
                             f"out with mask=")
        require_valid_pixels(scene, test, "among the test pixels")
        if device is not None:
            self.to(usable_device(device))
        pred = self.predict_scene(scene, mask=test, batch_size=batch_size, amp=amp, tta=tta, progress=progress)
        return metrics_from_scores(score_map(pred, scene.labels, test, num_classes=n), excluded, whole)

    # A window costs as much as ~44 pixels of the dense pass (HybridSN, 25x25 windows, FLOPs): below
    # this share of the scene's pixels, cutting windows around the selected ones is cheaper.
    dense_min_fraction: float = 0.02
    # activation bytes per pixel of one row tile of the dense pass (two consecutive layers alive)
    dense_bytes_per_pixel: int = 6 * 1024
    dense_memory_budget: int = 512 * 1024**2

    @torch.inference_mode()
    def predict_scene(self, scene: Scene, mask: np.ndarray | None = None, *, batch_size: int = 256,
                      amp: str | None = "auto", method: str = "auto", tile_rows: int | None = None,
                      progress: bool = False, tta: bool = False) -> np.ndarray:
        """``(H, W)`` map of classes 1..n (0 outside ``mask``, and where a pixel has no spectrum: see
        :func:`~zoo.hyperspectral.preprocessing.no_data_to_zero`).

        ``method="dense"`` runs the network over the whole scene at once (``dense_forward``: the
        convolutions once, the head as convolutions; in row tiles of ``tile_rows`` to bound memory),
        ``"windows"`` cuts one window per selected pixel and batches them, ``"auto"`` picks dense unless
        the mask selects under ``dense_min_fraction`` of the pixels. Both give the same logits within
        float rounding. ``amp="auto"``: bf16 where this CPU computes convolutions faster in it.
        ``tta=True`` (test-time augmentation) classifies each pixel by the mean class probabilities of its
        window under the eight symmetries of the square (quarter turns, with and without a mirror), the
        transforms ``augment=True`` trains with; it costs eight passes. Use it on networks trained with
        ``augment=True`` only: one trained on upright windows is not invariant to turns (measured on Indian
        Pines' random split: OA 99.55 without, 93.03 with; benchmarks/hsi_recipe.py).
        """
        from zoo.engine.precision import model_amp
        from zoo.inputs import whole_number

        batch_size = whole_number(batch_size, "batch_size")  # the dense path never batches: checked here for both
        if method not in ("auto", "dense", "windows"):
            raise ValueError(f"method must be 'auto', 'dense' or 'windows', got {method!r}")
        h, w, _ = scene.shape
        sel = np.ones((h, w), bool) if mask is None else np.asarray(mask, bool)
        if sel.shape != (h, w):
            raise ValueError(f"mask of shape {sel.shape} does not match the {h}x{w} scene")
        can_dense = hasattr(self, "dense_forward")
        if method == "dense" and not can_dense:
            raise ValueError(f"{type(self).__name__} has no dense_forward; use method='windows'")
        sel = no_data_to_zero(scene, sel)
        dense = can_dense and (method == "dense" or (method == "auto" and sel.sum() >= self.dense_min_fraction * h * w))
        device = next(self.parameters()).device
        amp = model_amp(amp, self, device, allow_fp16=False)
        with eval_mode(self), torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp == "bf16"):
            if dense:
                classes = self._dense_classes(self.reduce(scene), device, tile_rows, progress, tta)[sel]
            else:  # only the rows the windows reach are reduced: a few pixels of a large scene stay cheap
                lo, hi = self._window_rows(sel)
                reduced = self.reduce(scene, rows=slice(lo, hi))
                classes = (self._window_classes(reduced, sel[lo:hi], device, batch_size, progress, tta)
                           if hi > lo else np.zeros(0, np.int64))
        pred = np.zeros((h, w), np.int64)
        pred[sel] = classes + 1
        return pred

    def zoo_predict(self, inputs: Any, *, mask: np.ndarray | None = None, batch_size: int = 256,
                    amp: str | None = "auto", progress: bool = False, tta: bool = False,
                    device: Any = None, gt_key: str | None = None, cube_key: str | None = None) -> np.ndarray:
        """A scene (Scene, scene file, data set name, or an ``(H, W, C_raw)`` cube) -> ``(H, W)`` label map
        of classes 1..n (0 outside ``mask`` and on pixels without a spectrum, with a warning). Runs on the
        model's device (``device=`` moves the model there first). ``gt_key`` / ``cube_key``: the arrays of a
        .mat scene file to read. The cube may be a NumPy array, a torch tensor or a nested list."""
        keyed = gt_key is not None or cube_key is not None
        arr = None if keyed else array_input(inputs)
        w = self.config.window
        if arr is not None and arr.ndim != 3:
            raise ValueError(f"{self.registry_name} classifies a pixel from the {w}x{w} window around it, so it "
                             f"predicts a scene: an (H, W, C) cube, a Scene, a scene file or a data set name; got "
                             f"{'an array' if isinstance(inputs, np.ndarray) else type(inputs).__name__} of shape "
                             f"{arr.shape} (pixel spectra without their neighbours: hsi-pca-svm classifies those)")
        scene = Scene(arr) if arr is not None else as_scene(inputs, gt_key=gt_key, cube_key=cube_key,
                                                                   ground_truth=False)
        if device is not None:
            self.to(usable_device(device))
        return self.predict_scene(scene, mask=mask, batch_size=batch_size, amp=amp, progress=progress, tta=tta)

    def zoo_state(self, network_dtype: torch.dtype | None = None) -> ModelState:
        meta = {"zoo.split": json.dumps(self.split_)} if getattr(self, "split_", None) else {}
        return ModelState(self.registry_name, dataclasses.asdict(self.config), self.export_state_dict(network_dtype),
                          meta)

    def _window_rows(self, sel: np.ndarray) -> tuple[int, int]:
        """``(lo, hi)``: the rows the windows of the pixels of ``sel`` reach (``(0, 0)`` when none). Cut from
        those rows only, every window equals its cut from the whole scene: it meets the scene's padding
        only where the rows reach the scene's edge."""
        hit = np.flatnonzero(sel.any(axis=1))
        if not hit.size:
            return 0, 0
        r = self.config.window // 2
        return max(0, int(hit[0]) - r), min(sel.shape[0], int(hit[-1]) + r + 1)

    def _window_classes(self, reduced: np.ndarray, sel: np.ndarray, device: torch.device, batch_size: int,
                        progress: bool, tta: bool = False) -> np.ndarray:
        """Class index of each selected pixel (row-major), one window per pixel."""
        from zoo._progress import ProgressBar

        ds = PatchDataset.from_mask(reduced, None, sel, window=self.config.window, padding=self.padding)
        out = []
        for xb, _ in ProgressBar(inference_loader(ds, batch_size), disable=not progress, desc="predict"):
            xb = move_batch(xb, device, dtype=model_dtype(self))  # (B, ..., w, w)
            if not tta:
                out.append(self(xb).float().argmax(1).cpu())
                continue
            probs = sum(self(square_symmetry(xb, k, flip)).float().softmax(1) for k, flip in SQUARE_SYMMETRIES)
            out.append(probs.argmax(1).cpu())
        return torch.cat(out).numpy() if out else np.zeros(0, np.int64)

    def _dense_classes(self, reduced: np.ndarray, device: torch.device, tile_rows: int | None,
                       progress: bool, tta: bool = False) -> np.ndarray:
        """``(H, W)`` class indices from ``dense_forward`` over row tiles of the padded cube; with ``tta``, of
        the mean probabilities over the padded cube's eight symmetries (each map turned back)."""
        from zoo.hyperspectral.patches import pad_cube

        r = self.config.window // 2
        padded = torch.from_numpy(np.ascontiguousarray(pad_cube(reduced, r, self.padding).transpose(2, 0, 1)))
        padded = move_batch(padded, device, dtype=model_dtype(self))  # (C, H + 2r, W + 2r)
        if not tta:  # class indices tile by tile: memory stays (H, W), whatever the number of classes
            return self._dense_map(padded, tile_rows, progress, lambda logits: logits.argmax(0)).numpy()
        probs = None  # (num_classes, H, W): eight maps turned back and summed
        for k, flip in SQUARE_SYMMETRIES:
            p = self._dense_map(square_symmetry(padded, k, flip), tile_rows, progress, lambda logits: logits.softmax(0))
            p = square_symmetry(p, k, flip, inverse=True)  # in the scene's orientation
            probs = p if probs is None else probs.add_(p)
        return probs.argmax(0).numpy()

    def _dense_map(self, padded: torch.Tensor, tile_rows: int | None, progress: bool, per_tile) -> torch.Tensor:
        """``per_tile`` of the fp32 logits ``(num_classes, rows, W)`` of each row tile of a padded
        ``(C, H + 2r, W + 2r)`` cube, joined along the rows (on the CPU)."""
        from zoo._progress import ProgressBar

        r = self.config.window // 2
        h, w = padded.shape[1] - 2 * r, padded.shape[2] - 2 * r
        rows = tile_rows or max(1, self.dense_memory_budget // (self.dense_bytes_per_pixel * (w + 2 * r)))
        if rows < 1:
            raise ValueError(f"tile_rows must be >= 1, got {rows}")
        tiles = []
        for r0 in ProgressBar(range(0, h, rows), disable=not progress, desc="predict (dense)"):
            r1 = min(h, r0 + rows)
            logits = self.dense_forward(padded[:, r0:r1 + 2 * r])  # output row i <- padded rows i..i+2r
            tiles.append(per_tile(logits.float()).cpu())
        return torch.cat(tiles, dim=-2)

    # -- weights ---------------------------------------------------------------------------------------
    def export_state_dict(self, network_dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
        """The network (optionally cast, e.g. fp16 storage) plus the preprocessing buffers in fp32."""
        sd = {k: v.detach().clone() for k, v in self.state_dict().items()}
        if network_dtype is not None:
            sd = {k: (v.to(network_dtype) if v.is_floating_point() and k not in PRE_KEYS else v) for k, v in sd.items()}
        record = getattr(self, "training_record_", None)
        if record is not None:
            from zoo.hyperspectral.serialize import pack_json

            sd[TRAINING_KEY] = pack_json(record.to_json())
        return sd

    def save(self, path, network_dtype: torch.dtype | None = None):
        """``zoo.save``'s file (the config, the split, the preprocessing in fp32) with the network stored in
        ``network_dtype`` (fp16 storage): without the config it recorded, a network trained with
        ``spectral_norm="l2"`` or ``padding="edge"`` loaded back with the builder's defaults, without a word."""
        from zoo.hub import save_weights

        state = self.zoo_state(network_dtype)
        return save_weights(state.tensors, path, metadata=state.file_metadata())


def _drops_preprocessing(model: nn.Module, path, entry, asked: str | None) -> bool:
    """Whether the file's scaler and PCA must stay out: they were fitted on spectra of another
    ``spectral_norm`` than the one asked for, and would feed other inputs without a word (95 % of the Indian
    Pines predictions change). The network still loads (a start for ``zoo.train``, which fits them again), with a
    warning; ``predict`` before that says the model has no fitted preprocessing."""
    from zoo.registry import file_config

    saved = dict(entry.config) if entry is not None else file_config(path, model.registry_name)
    own = saved.get("spectral_norm", "none")
    if asked is None or not saved or asked == own:  # a file that records no config: nothing to hold it against
        return False
    warnings.warn(f"{entry.name if entry is not None else path} was fitted with spectral_norm={own!r}; its band "
                  f"scaler and PCA do not take spectra normalised by spectral_norm={asked!r}, so they are not "
                  "loaded: zoo.train fits them again on a scene (leave spectral_norm out to use the file's)",
                  stacklevel=user_stacklevel())
    return True


def load_scene_model(model: nn.Module, path, entry=None, requested: dict[str, Any] | None = None) -> nn.Module:
    """``load_weights`` for the registry: preprocessing buffers (any scene's band count) then the network."""
    from types import SimpleNamespace

    from zoo.engine.head import take_file_head
    from zoo.hub import load_into, load_state_dict

    sd = load_state_dict(path)
    if all(k in sd for k in PRE_KEYS) and _drops_preprocessing(model, path, entry, (requested or {}).get("spectral_norm")):
        for key in PRE_KEYS:
            del sd[key]
    if TRAINING_KEY in sd:
        from zoo.hyperspectral.serialize import unpack_json

        record = TrainingRecord.from_json(unpack_json(sd.pop(TRAINING_KEY)))
        model.training_record_ = record
        model.split_ = {k: v for k, v in record.split.items() if k in ("split", "train_fraction", "seed", "window", "block")} or None
    pre = [k for k in PRE_KEYS if k in sd]
    if pre and len(pre) != len(PRE_KEYS):
        raise ValueError(f"weights file {path} has only some preprocessing tensors: {pre}")
    if pre:
        k = sd["pca_components"].shape[0]
        if k != model.config.n_bands:
            raise ValueError(f"weights file {path} was made with n_bands={k} (its PCA keeps {k} components), the "
                             f"model asks for n_bands={model.config.n_bands}: leave n_bands out of zoo.build (it "
                             f"comes from the file), or train a new model for {model.config.n_bands} bands")
        model.set_preprocessor(*(sd[k].float() for k in PRE_KEYS))
    # a plain state dict (torch.save(net.state_dict()), a .pth) records no config: its trained output layer sizes
    # the network's unless num_classes was asked for, as resnet18's and the video models' heads are sized
    # (take_file_head reads a torchvision "fc"; HybridSN's output layer is classifier.7)
    take_file_head(SimpleNamespace(fc=model.get_classifier(), reset_classifier=model.reset_classifier),
                   {"fc.weight": sd.get(HEAD_PREFIX + "weight")}, requested)
    # another num_classes is a new classifier output layer, left freshly initialised with a warning (as for
    # the other families' heads); any other shape (window, n_bands) cannot be adapted and is an error
    load_into(model, sd, reinit=(HEAD_PREFIX,))
    from zoo import hub

    if hub.state.is_safetensors(path):  # by its bytes: a file zoo.save wrote keeps its split under any name
        split = hub.read_metadata(path).get("zoo.split")
        if split:
            model.split_ = json.loads(split)
    return model
