"""``zoo.finetune``: transfer a pretrained classifier to new data with one of three strategies.

* ``"head"`` — only the classifier trains; the backbone is frozen *including its BatchNorm statistics*
  (frozen BN layers are kept in eval mode even while the model is in train mode). Why: with a small new
  data set, updating running means/variances shifts the features the head is learning on (and the
  pretrained statistics are what the frozen filters were trained against); it also makes the backbone a
  fixed function, so its features can be computed once (``cache_features``) and the head trained on them.
* ``"full"`` — every layer trains, with discriminative learning rates: the backbone gets
  ``lr * backbone_lr_mult`` (default 0.1), the new head ``lr`` (Howard & Ruder, ULMFiT,
  https://arxiv.org/abs/1801.06146; Yosinski et al., https://arxiv.org/abs/1411.1792). BN trains normally.
* ``"top"`` — the head and the ``top_stages`` highest backbone stages train (default 1: ResNet's
  ``layer4``), at ``lr * backbone_lr_mult``; the lower stages and the stem stay frozen, BN included.
* ``"gradual"`` — starts as ``"head"`` and unfreezes one backbone stage per ``unfreeze_every`` epochs from
  the top (ResNet: ``layer4`` -> ``layer3`` -> ``layer2`` -> ``layer1``; the stem stays frozen, its
  Gabor-like filters transfer best). The optimizer holds every parameter group from the start (frozen
  parameters have no gradient, so the optimizer skips them) and an engine callback flips
  ``requires_grad`` and BN modes at each epoch start.

``freeze_bn=True`` keeps *every* BatchNorm layer in eval mode (the pretrained running statistics), also in
the stages that train (their affine weights still learn): with small batches of a new domain, batch
statistics are noisy and the running ones drift from what the pretrained filters expect.

Parameters that sit on the model itself rather than in a child (torchvision ViT's ``class_token``) are
frozen and opened with the lowest backbone stage.

Everything else (bf16 autocast, schedules, checkpoints, early stopping, progress bars, metrics) is
:func:`zoo.engine.fit`'s; extra keyword arguments go to it unchanged. On return every parameter has
``requires_grad=True`` again and no hook stays on the model.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import math
import numbers
import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from zoo._stacklevel import user_stacklevel
from zoo.engine.callbacks import Callback, TrainState
from zoo.engine.data import as_dataset_if_xy, inference_loader, model_dtype, move_batch, train_val, xy_dataset
from zoo.engine.head import head_name, num_outputs, output_layers, reorder_outputs_by_name, reset_classifier
from zoo.engine.layout import call_laid_out, layout_for
from zoo.engine.modes import eval_mode
from zoo.engine.precision import model_amp
from zoo.engine.seed import rng_state_kept
from zoo.vision.data import (
    TransformedImages,
    dataset_classes,
    image_columns,
    labels_by_name,
    with_network_transforms,
)

__all__ = ["StrategyPlan", "backbone_stages", "extract_features", "finetune", "head_name", "plan_strategy"]

STRATEGIES = ("head", "top", "full", "gradual")
log = logging.getLogger(__name__)
_BN = (nn.modules.batchnorm._BatchNorm,)


def _has_params(m: nn.Module) -> bool:
    return any(True for _ in m.parameters())


def backbone_stages(model: nn.Module) -> tuple[list[str], list[str]]:
    """``(stages top-down, stem)``: the top-level children that gradual unfreezing opens one by one, and
    those that stay frozen. ResNet: ``["layer4", "layer3", "layer2", "layer1"]`` and ``["conv1", "bn1"]``;
    other models: every parameterised top-level child but the head, top-down, with nothing held back."""
    head = head_name(model)
    names = [n for n, m in model.named_children() if n != head and _has_params(m)]
    stages = [n for n in names if re.fullmatch(r"layer\d+", n)]
    if stages:
        stages.sort(key=lambda n: int(n[5:]), reverse=True)
        return stages, [n for n in names if n not in stages]
    return list(reversed(names)), []


@dataclass
class StrategyPlan:
    """Which top-level modules train at a given epoch (everything else is frozen, BN in eval mode). Parameters
    that sit on the model itself, outside every child (torchvision ViT's ``class_token``), go with the lowest
    stage: frozen and opened with it."""

    strategy: str
    head: str
    stages: list[str]
    stem: list[str]
    unfreeze_every: int = 1
    trainable_at: dict[int, list[str]] = field(default_factory=dict)
    top_stages: int = 1
    freeze_bn: bool = False
    frozen_backbone: bool = False  # backbone_lr_mult=0: only the head trains, whatever the strategy

    @property
    def lowest(self) -> str:
        """The stage the model's own parameters go with (the head where there is no stage)."""
        return self.stages[-1] if self.stages else self.head

    def trainable(self, epoch: int) -> list[str]:
        if self.strategy == "head" or self.frozen_backbone:
            return [self.head]
        if self.strategy == "full":
            return [self.head, *self.stages, *self.stem]
        if self.strategy == "top":
            return [self.head, *self.stages[:self.top_stages]]
        k = min(len(self.stages), epoch // self.unfreeze_every)
        return [self.head, *self.stages[:k]]


def _whole(key: str, value: Any, *, optional: bool = False) -> None:
    """A count option that is an int (not a bool, not a float or a str): ``top_stages=1.0`` reached a slice and
    ``unfreeze_every="2"`` a modulo, as Python errors naming neither."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        fix = f"{key}={int(value)}" if _integral(value) else f"a whole number, {key}=2 say"
        raise TypeError(f"finetune: {key} must be an int{' or None' if optional else ''}, got {value!r} "
                        f"({type(value).__name__}): pass {fix}")


def _integral(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().isdigit()
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
        and float(value).is_integer()


def _flag(key: str, value: Any, *, optional: bool = False) -> None:
    """An on/off option that is a bool: a str is truthy, so ``freeze_bn="no"`` (what ``--set freeze_bn=no``
    passes) kept BN frozen and ``cache_features="off"`` cached, without a word."""
    if (optional and value is None) or isinstance(value, bool):
        return
    none = ", or None for the default" if optional else ""
    raise TypeError(f"finetune: {key} must be True or False{none}, got {value!r} ({type(value).__name__}): pass "
                    f"{key}=True or {key}=False (on the command line --set {key}=true or --set {key}=false)")


def plan_strategy(model: nn.Module, strategy: str, epochs: int = 1, unfreeze_every: int | None = None,
                  top_stages: int = 1, freeze_bn: bool = False, backbone_lr_mult: float = 0.1) -> StrategyPlan:
    """The plan of ``strategy`` for ``model``, its settings checked (before finetune changes the model);
    a ``gradual`` run too short to open every stage is warned about."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    _whole("epochs", epochs)
    _whole("top_stages", top_stages)
    _whole("unfreeze_every", unfreeze_every, optional=True)
    _flag("freeze_bn", freeze_bn)
    stages, stem = backbone_stages(model)
    if not 1 <= top_stages <= len(stages):
        raise ValueError(f"top_stages must be in 1..{len(stages)} (the backbone stages {stages}), got {top_stages}")
    if unfreeze_every is None:  # spread the unfreezing over the run: head alone first, all stages by the end
        unfreeze_every = max(1, epochs // (len(stages) + 1))
    if unfreeze_every < 1:
        raise ValueError(f"unfreeze_every must be >= 1, got {unfreeze_every}")
    plan = StrategyPlan(strategy, head_name(model), stages, stem, unfreeze_every, top_stages=top_stages,
                        freeze_bn=freeze_bn, frozen_backbone=strategy != "head" and backbone_lr_mult == 0)
    if strategy == "gradual" and not plan.frozen_backbone:
        _warn_unopened(plan, epochs)
    return plan


def _warn_unopened(plan: StrategyPlan, epochs: int) -> None:
    """Stages a ``gradual`` run never opens: epochs=3 trained layer4 and layer3 and left layer2 and layer1 as
    they were, without a word (the README's example ran it for one epoch: the head alone)."""
    opened = len(plan.trainable(max(epochs, 1) - 1)) - 1
    if opened >= len(plan.stages):
        return
    every, needed = plan.unfreeze_every, len(plan.stages) * plan.unfreeze_every + 1
    warnings.warn(f"finetune: strategy='gradual' with epochs={epochs} and unfreeze_every={every} never trains "
                  f"{', '.join(plan.stages[opened:])} (the head trains alone for {every} epoch(s), then one more stage "
                  f"opens every {every} epoch(s)): give epochs={needed} or more to train every stage, or use strategy='top' "
                  "(top_stages=) or 'full'", stacklevel=user_stacklevel())


class _Freezer:
    """Applies a plan at each epoch start; keeps frozen BN layers in eval mode through ``model.train()``
    with a forward pre-hook (the engine calls ``model.train()`` every epoch, after callbacks may run)."""

    def __init__(self, model: nn.Module, plan: StrategyPlan) -> None:
        self.model, self.plan = model, plan
        self.frozen_bn: list[nn.Module] = []
        self.handle = model.register_forward_pre_hook(self._pre_forward)

    def _pre_forward(self, module: nn.Module, args: Any) -> None:
        if module.training:
            for bn in self.frozen_bn:
                bn.eval()

    def apply(self, epoch: int) -> list[str]:
        active = set(self.plan.trainable(epoch))
        self.frozen_bn = []
        for name, child in self.model.named_children():
            on = name in active
            for p in child.parameters():
                p.requires_grad_(on)
            if not on or self.plan.freeze_bn:
                self.frozen_bn += [m for m in child.modules() if isinstance(m, _BN)]
        for p in self.model.parameters(recurse=False):  # ViT's class_token: with the lowest stage
            p.requires_grad_(self.plan.lowest in active)
        if self.model.training:
            for bn in self.frozen_bn:
                bn.eval()
        return sorted(active)

    def close(self) -> None:
        self.handle.remove()
        for p in self.model.parameters():
            p.requires_grad_(True)
        self.model.train(self.model.training)


class _UnfreezeCallback(Callback):
    """Engine callback: apply the plan at every epoch start (a run resumed at epoch k freezes as epoch k)."""

    def __init__(self, freezer: _Freezer, verbose: bool) -> None:
        self.freezer, self.verbose, self.last = freezer, verbose, None

    def on_epoch_start(self, state: TrainState) -> None:
        active = self.freezer.apply(state.epoch)
        if self.verbose and active != self.last:
            log.info("finetune: epoch %d: training %s", state.epoch + 1, ", ".join(active))
        self.last = active


def param_groups(model: nn.Module, plan: StrategyPlan, backbone_lr_mult: float) -> list[dict[str, Any]]:
    """One group for the head at fit's ``lr``, one per backbone stage at ``lr * backbone_lr_mult`` (``lr_scale``;
    only the modules the strategy ever trains: ``head`` (or ``backbone_lr_mult=0``) -> the head alone;
    ``gradual`` -> head and stages). The model's own parameters join the lowest stage's group."""
    names = [plan.head] if plan.frozen_backbone else {
        "head": [plan.head], "top": [plan.head, *plan.stages[:plan.top_stages]], "gradual": [plan.head, *plan.stages],
        "full": [plan.head, *plan.stages, *plan.stem]}[plan.strategy]
    groups = []
    for name in names:
        params = list(getattr(model, name).parameters())
        if name == plan.lowest:
            params += list(model.parameters(recurse=False))
        if params:
            # as fractions of fit's lr: a resume with another lr runs every group at its share of it
            groups.append({"params": params, "lr_scale": 1.0 if name == plan.head else backbone_lr_mult,
                           "name": name})
    return groups


@torch.no_grad()
def extract_features(model: nn.Module, data: Dataset | DataLoader, *, batch_size: int = 64, amp: str | None = "auto",
                     device: str | torch.device | None = None, channels_last: bool | str = "auto",
                     progress: bool = True) -> TensorDataset:
    """The frozen backbone's outputs (everything but the head) for every sample, in order, as a
    ``TensorDataset(features (N, D) float32, targets (N,))``. ``device``: where to run; default: where the
    model is (a given one moves the model there, and it stays), as :func:`zoo.engine.evaluate`; ``channels_last``
    as there ("auto": channels-last where it was measured faster, :mod:`zoo.engine.layout`)."""
    from zoo._progress import ProgressBar
    from zoo.engine.devices import run_device

    device = run_device(model, device)
    name = head_name(model)
    head = getattr(model, name)
    setattr(model, name, nn.Identity())
    model.to(device)
    feats, targets = [], []
    amp = model_amp(amp, model, device)  # "auto": bf16 only where this device runs convs faster in it
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp or "", None)
    in_dtype = model_dtype(model)
    # a ready DataLoader is used as it is (its batches may be built by a custom sampler); give one without
    # random augmentation, or each sample's single cached view is a random one
    loader = inference_loader(data, batch_size)
    try:
        with eval_mode(model), layout_for(model, channels_last, device, amp) as last:
            for x, y in ProgressBar(loader, desc="features", disable=not progress, leave=False):
                x = move_batch(x, device, last, dtype=in_dtype)
                with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                    f, last = call_laid_out(model, x, last, channels_last)  # (B, D)
                feats.append(f.float().flatten(1).cpu())
                targets.append(torch.as_tensor(y).cpu())
    finally:
        setattr(model, name, head)
    return TensorDataset(torch.cat(feats), torch.cat(targets))


def _split_data(data: Any) -> tuple[Any, Any]:
    """``(train, val)`` from the forms :func:`zoo.train` takes (:func:`zoo.engine.data.train_val`: ``(train,
    val)`` pairs and dicts too).

    Two tensors are ``(X, y)`` (as ``zoo.train`` reads them), never ``(train, val)``: a validation set is
    ``((X, y), (X_val, y_val))``, ``{"train": ..., "val": ...}`` or ``val_data=``.
    """
    if (samples := image_columns(data)) is not None:
        return samples, None
    if (pair := train_val(data)) is not None:
        return pair
    if isinstance(data, dict):
        raise ValueError(f"data dict needs a 'train' key, got {sorted(data)}")  # noqa: TRY004 (a key, not a type)
    if (xy := xy_dataset(data)) is not None:
        return xy, None
    if isinstance(data, tuple) or (isinstance(data, list) and len(data) == 2):
        if len(data) != 2:
            raise ValueError(f"data as a tuple must be (X, y) tensors or (train, val), got {len(data)} items")
        return as_dataset_if_xy(data[0]), as_dataset_if_xy(data[1])
    if isinstance(data, list):  # samples, as zoo.train reads a list: [(PIL image, label), ...] or dicts
        return data, None
    if isinstance(data, (Dataset, DataLoader)) or (hasattr(data, "__getitem__") and hasattr(data, "__len__")):
        return data, None
    raise TypeError(
        f"data must be an image folder (DIR/train, DIR/val), a Dataset or DataLoader, (X, y) tensors, (train, val) "
        f"or {{'train': ..., 'val': ...}}; got {type(data).__name__}"
    )


def _folders_apart(data: Any, fit_kwargs: dict[str, Any]) -> Any:
    """``(train_dir, val_dir)``: the training folder, the other moved to ``fit_kwargs["val_data"]``."""
    pair = None if isinstance(data, (str, os.PathLike)) else train_val(data)
    if pair is None or not all(isinstance(d, (str, os.PathLike)) for d in pair):
        return data
    if fit_kwargs.get("val_data") is not None:
        raise ValueError("validation data given twice: in the data (train_dir, val_dir) and as val_data")
    fit_kwargs["val_data"] = pair[1]
    return pair[0]


def _given_val(model: nn.Module, fit_kwargs: dict[str, Any], val_data: Any, image_size: int | None, strict: bool,
               unknown_classes: str) -> Any:
    """``val_data=`` where given (it replaces the data's own): a folder is read as one, under the classes the
    training data gave the model (passed on, it would go to fit as a str); a data set gets the network's eval transforms."""
    if "val_data" not in fit_kwargs:
        return val_data
    given = fit_kwargs.pop("val_data")
    if not isinstance(given, (str, os.PathLike)):
        return with_network_transforms(model, as_dataset_if_xy(given), False, image_size=image_size)
    from zoo.vision.data import scored_folder
    from zoo.vision.transforms import transforms_for

    classes = (getattr(model, "pretrained_cfg", None) or {}).get("classes")
    return scored_folder(given, transforms_for(model, train=False, image_size=image_size), classes, strict=strict,
                         unknown_classes=unknown_classes, what="val_data folder")


def _finetune_data(model: nn.Module, data: Any, num_classes: int | None, augment: bool, image_size: int | None,
                   strict: bool, unknown_classes: str = "error") -> tuple[Any, Any]:
    """``(train, val)`` data; an image folder also sets the head size (replacing a head of another size, which
    is logged) and the class names the model predicts."""
    classes, asked = None, num_classes
    if isinstance(data, (str, os.PathLike)):
        if getattr(model, "pretrained_cfg", None) is None:
            hint = ""
            if registered := getattr(model, "registry_name", None):
                from zoo import list_weights

                tags = [w.split(".", 1)[1] for w in list_weights(registered)]
                weights = repr(tags[0]) if tags else "PATH"
                hint = (f"; to fine-tune the zoo model {registered!r} on its own kind of folder, train it from its "
                        f"weights with a new head: zoo.train(zoo.build({registered!r}, weights={weights}, "
                        f"num_classes=N), folder)")
            raise TypeError(f"finetune reads {data} as an image folder, preprocessed as the model's pretrained_cfg "
                            f"says (zoo vision networks have one); a {type(model).__name__} has none: pass a Dataset "
                            f"or DataLoader of (input, label) batches, or (X, y) tensors{hint}")
        from zoo.vision.data import load_image_folders
        from zoo.vision.transforms import transforms_for

        eval_tf = transforms_for(model, train=False, image_size=image_size)
        train_tf = transforms_for(model, train=True, image_size=image_size) if augment else eval_tf
        train_data, val_data = load_image_folders(data, train_transform=train_tf, eval_transform=eval_tf, strict=strict,
                                                  unknown_classes=unknown_classes)
        classes = train_data.classes
        if num_classes is not None and num_classes != len(classes):
            # zoo.train refuses the same mismatch: outputs no folder class maps to could never be trained
            raise ValueError(f"{data} has {len(classes)} classes ({', '.join(classes)}) but num_classes={num_classes}: "
                             f"leave num_classes out (the folder sets the head size) or pass num_classes={len(classes)}")
        num_classes = len(classes)
    else:
        train_data, val_data = _split_data(data)
        _check_image_arrays(model, train_data, val_data)
        train_data, val_data = (with_network_transforms(model, d, train, augment=augment, image_size=image_size)
                                for d, train in ((train_data, True), (val_data, False)))
        # a torchvision data set names its classes with a transform of its own too (ImageFolder(root, transform=...)
        # yields tensors): else the head kept the weights' size and names, and predict labelled ants 'airplane'
        classes = dataset_classes(train_data)
        if classes is not None and num_classes is not None and num_classes != len(classes):
            raise ValueError(f"the data set has {len(classes)} classes but num_classes={num_classes}: leave "
                             f"num_classes out (the data set's classes set the head size) or pass {len(classes)}")
        num_classes = len(classes) if classes is not None else num_classes
    current = num_outputs(model)
    _warn_unnamed_labels(model, classes, num_classes)
    cfg = getattr(model, "pretrained_cfg", None)
    if classes is None and asked is not None and isinstance(cfg, dict) and cfg.get("classes") is not None:
        # num_classes=K is the warning's "K labels named 0..K-1", also where K is the weights' head size
        model.pretrained_cfg = {k: v for k, v in cfg.items() if k != "classes"}
    if isinstance(cfg, dict) and classes is not None and current == len(classes):
        reorder_outputs_by_name(model, cfg.get("classes"), [str(c) for c in classes])
    if num_classes is not None and current != num_classes:
        # what fine-tuning to a new class count is for (the README's path, timm's num_classes=): logged, not
        # a warning on every such call
        log.info("finetune: replacing the %s-class head with a fresh %d-class head", current, num_classes)
        reset_classifier(model, num_classes)
    if hasattr(model, "pretrained_cfg") and (classes is not None or isinstance(train_data, TransformedImages)):
        from zoo.vision.transforms import with_image_size

        # the network is tuned at image_size: evaluate / predict / zoo.save must use it too, not the size of the
        # weights it started from (also where the data set names no classes: a Dataset of PIL images); a data set
        # of tensors was sized by its own transform, not by image_size
        cfg = model.pretrained_cfg
        if isinstance(data, (str, os.PathLike)) or isinstance(train_data, TransformedImages):
            cfg = with_image_size(cfg, image_size)
        model.pretrained_cfg = record_classes(cfg, classes, num_outputs(model))
    record_origin(model)
    return train_data, val_data


def _check_image_arrays(model: nn.Module, train_data: Any, val_data: Any) -> None:
    """``(X, y)`` images for a convolutional network checked as zoo.train and zoo.predict check them: a uint8 or
    channels-last ``X`` (NumPy's and CIFAR10.data's layout) failed inside the first conv, in words naming neither
    the layout nor the fix ("expected input[8, 32, 32, 3] to have 3 channels, but got 32 channels")."""
    first = next((m for m in model.modules() if isinstance(m, nn.modules.conv._ConvNd)), None)
    if not isinstance(first, nn.Conv2d):  # a network of other inputs (a Conv3d's clips) reads them as it will
        return
    from zoo.vision.predict import check_image_batch

    for data, what in ((train_data, "X of (X, y)"), (val_data, "X of the validation (X, y)")):
        if isinstance(data, TensorDataset) and data.tensors[0].dim() == 4:
            check_image_batch(model, data.tensors[0], what)


def _warn_unnamed_labels(model: nn.Module, classes: Any, num_classes: int | None) -> None:
    """Data that names no classes, without num_classes: the head keeps its size and the weights' class names,
    which then label predictions of another label set (ants and bees predicted as 'airplane') without a word."""
    names = (getattr(model, "pretrained_cfg", None) or {}).get("classes")
    if classes is None and num_classes is None and names:
        warnings.warn(f"finetune: the data names no classes and num_classes is not given, so the head keeps its "
                      f"{len(names)} outputs and the weights' class names ({', '.join(map(str, names[:3]))}, ...): "
                      "pass num_classes=K for K labels (named 0..K-1), or data that names its classes (an image "
                      "folder, a Dataset with .classes)", stacklevel=user_stacklevel())


def record_classes(cfg: dict[str, Any], classes: Any, num_outputs: int) -> dict[str, Any]:
    """``cfg`` naming ``classes`` (the data set's); a data set that names none keeps the cfg's names only where
    they still fit the head (a new head of another size has outputs the old names do not describe)."""
    if classes is not None:
        return {**cfg, "classes": [str(c) for c in classes]}
    if cfg.get("classes") is not None and len(cfg["classes"]) != num_outputs:
        return {k: v for k, v in cfg.items() if k != "classes"}
    return cfg


def backbone_weights(model: nn.Module) -> str | None:
    """The weights ``model`` holds as they were loaded (a weights name, or a file's absolute path), None once it
    was trained (:func:`record_origin` moved the name to ``finetuned_from``: the backbone may differ since)."""
    cfg = getattr(model, "pretrained_cfg", None) or {}
    # backbone_from: the head was replaced since; backbone_weights: only a head was tuned since
    source = cfg.get("weights") or cfg.get("backbone_from") or cfg.get("backbone_weights")
    if source is not None and Path(str(source)).expanduser().is_file():  # a relative path breaks in another folder
        return str(Path(str(source)).expanduser().resolve())
    return source


_LOADED_BACKBONE = "_zoo_loaded_backbone"  # the attribute holding record_loaded_backbone's digest


_DIGEST_SAMPLES = 4096  # values per tensor, evenly spaced in its logical order


def backbone_digest(model: nn.Module) -> str:
    """A digest of ``model``'s state outside its head: each tensor's name, dtype, shape, float64 sum and
    :data:`_DIGEST_SAMPLES` of its values. Every zoo.build with weights records one, so it reads each tensor once
    instead of hashing all of its bytes (a third of a ResNet18 build); a load_state_dict or a training step
    changes sums and samples alike. ``torch.take`` samples in logical order: the layout does not count."""
    head = head_name(model) + "."
    digest = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for key, tensor in model.state_dict().items():
            if key.startswith(head):
                continue
            step = max(1, tensor.numel() // _DIGEST_SAMPLES)
            sample = torch.take(tensor, torch.arange(0, tensor.numel(), step, device=tensor.device))
            total = torch.sum(tensor, dtype=torch.float64) if tensor.is_floating_point() else tensor.sum()
            digest.update(f"{key}:{tensor.dtype}:{tuple(tensor.shape)}:{total.item()!r}".encode())
            digest.update(sample.cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def record_loaded_backbone(model: nn.Module) -> None:
    """Remember the backbone the weights named in ``pretrained_cfg["weights"]`` gave ``model``: the name alone
    cannot tell a ``load_state_dict`` or an in-place change made since, after which it no longer rebuilds it."""
    setattr(model, _LOADED_BACKBONE, backbone_digest(model))


def backbone_changed(model: nn.Module) -> bool:
    """Whether ``model``'s backbone differs from the one its weights loaded (False where none was recorded)."""
    loaded = getattr(model, _LOADED_BACKBONE, None)
    return loaded is not None and loaded != backbone_digest(model)


def record_origin(model: nn.Module) -> None:
    """``pretrained_cfg["weights"]`` names the weights the network holds; fine-tuning changes them (every
    strategy trains the head at least, and zoo.train all of it), so that name moves to ``finetuned_from``:
    exports and saved metadata must not claim a tuned network is, say, resnet18.cifar10."""
    cfg = getattr(model, "pretrained_cfg", None)
    origin = cfg.get("weights") or cfg.get("backbone_from") if isinstance(cfg, dict) else None
    if origin is not None:  # a head reset had moved the name to backbone_from: training changes that backbone too
        model.pretrained_cfg = {**{k: v for k, v in cfg.items() if k not in ("weights", "backbone_from")},
                                "finetuned_from": origin}
    if isinstance(getattr(model, "pretrained_cfg", None), dict):  # a run that may train the backbone: no longer
        model.pretrained_cfg.pop("backbone_weights", None)  # the weights it names (a cached-head run sets it again)


@rng_state_kept()  # the surgery's seeding, like fit's, is the run's, not the caller's
def finetune(
    model: nn.Module,
    data: Any,
    *,
    strategy: str = "head",
    num_classes: int | None = None,
    epochs: int = 5,
    lr: float = 1e-3,
    backbone_lr_mult: float = 0.1,
    unfreeze_every: int | None = None,
    top_stages: int = 1,
    freeze_bn: bool = False,
    augment: bool = True,
    cache_features: bool | None = None,
    image_size: int | None = None,
    strict: bool = False,
    unknown_classes: str = "error",
    batch_size: int = 32,
    amp: str | None = "auto",
    device: str | torch.device | None = None,
    callbacks: Iterable[Any] = (),
    progress: bool = True,
    **fit_kwargs: Any,
):
    """Fine-tune a pretrained classifier; returns the engine's ``TrainResult`` (``.model`` is the network).

    Args:
        model: a network with a ``fc``/``classifier``/``head`` Linear head (``zoo.finetune`` builds one from
            a registered name and its ``weights``).
        data: an image folder ``DIR`` with ``train/`` and ``val/`` class folders (transforms come from the
            model's weights: :func:`zoo.vision.transforms.transforms_for`), a training ``Dataset`` or
            ``DataLoader``, ``(X, y)`` tensors (as :func:`zoo.train`), ``(train, val)`` or
            ``{"train": ..., "val": ...}`` (a validation set also as ``val_data=``). Training at an ``image_size``
            on a folder records it in ``pretrained_cfg``: evaluate, predict and ``zoo.save`` then use it.
        strategy: ``"head"``, ``"top"``, ``"full"`` or ``"gradual"`` (see the module docstring).
        num_classes: head size; default: the folder's class count (on a folder, another count is an
            error). A head of another size is replaced by a fresh one (logged at INFO on ``zoo.vision.finetune``).
        backbone_lr_mult: backbone learning rate as a fraction of the head's (``top``, ``full``, ``gradual``);
            0 freezes the backbone as ``head`` does (no gradients, its BatchNorm statistics kept).
        unfreeze_every: ``gradual``: epochs between unfreezing stages (default: spread over ``epochs``); a run
            shorter than ``len(stages) * unfreeze_every + 1`` epochs never opens the lowest stages (warned).
        top_stages: ``top``: how many backbone stages train, from the top (default 1).
        freeze_bn: keep every BatchNorm layer's running statistics (eval mode) while training.
        augment: random train augmentation for folder data (off: the eval transform for training too).
        unknown_classes: ``"skip"``: a ``val/`` class that ``train/`` lacks is left out with a warning (else an error).
        cache_features: ``head`` only: compute the frozen backbone's features once and train the head on them.
            Default: on exactly when augmentation is off (each epoch's new views cannot reuse features).
        device: where to train; default: where the model is (as :func:`zoo.engine.fit`).
        **fit_kwargs: anything :func:`zoo.engine.fit` takes (schedule, warmup_steps, checkpoint_dir, seed, ...)
            but ``param_groups`` and a ready ``optimizer`` object: finetune makes the groups (an optimizer by
            name, with ``optimizer_options``, or a factory). ``seed`` seeds the generators before a new head is
            drawn: the same seed repeats the whole run.

    Every argument is checked before the model is changed, and a run that fails before its first epoch puts
    the head and ``pretrained_cfg`` back: a failed call leaves the network as it was. A zoo network built
    without weights is warned about unless ``strategy="full"`` (its frozen backbone is random).
    """
    common = {"epochs": epochs, "batch_size": batch_size, "lr": lr, "amp": amp, "device": device, "progress": progress}
    callbacks = list(callbacks)
    plan = _checked_plan(model, strategy, cache_features, fit_kwargs, common, callbacks, epochs=epochs,
                         unfreeze_every=unfreeze_every, top_stages=top_stages, backbone_lr_mult=backbone_lr_mult,
                         freeze_bn=freeze_bn, augment=augment, strict=strict, num_classes=num_classes)
    use_cache = _caches_features(model, strategy, cache_features, augment)
    _seed_before_surgery(fit_kwargs.get("seed"))
    data = _folders_apart(data, fit_kwargs)
    backbone = backbone_weights(model) if use_cache else None  # before _finetune_data marks the network tuned
    with _undone_unless_trained(model) as started:
        train_data, val_data = _finetune_data(model, data, num_classes, augment and not use_cache, image_size, strict,
                                              unknown_classes)
        val_data = _given_val(model, fit_kwargs, val_data, image_size, strict, unknown_classes)
        fit_kwargs = _with_recipe(model, data, train_data, val_data, fit_kwargs, plan, backbone_lr_mult=backbone_lr_mult,
                                  unfreeze_every=unfreeze_every, top_stages=top_stages, freeze_bn=freeze_bn,
                                  augment=augment, cache_features=use_cache, strict=strict, backbone_weights=backbone)
        val_data = labels_by_name(val_data, (getattr(model, "pretrained_cfg", None) or {}).get("classes"))
        if use_cache:
            return _finetune_cached(model, plan, train_data, val_data, common, [started, *callbacks], fit_kwargs)
        groups = param_groups(model, plan, backbone_lr_mult)
        result = _fit_planned(model, plan, train_data, val_data, groups, [started, *callbacks], common, fit_kwargs)
    result.model = model
    return result


def _caches_features(model: nn.Module, strategy: str, cache_features: bool | None, augment: bool) -> bool:
    """Whether the head trains on cached features (``head`` only; by default where nothing is augmented)."""
    use_cache = strategy == "head" and (cache_features if cache_features is not None else not augment)
    if use_cache and backbone_changed(model):
        # a cached run's checkpoints hold the head alone, rebuilt around the weights the network was loaded with,
        # which it no longer holds: train the head on the frozen backbone, so that they hold the whole network
        log.info("finetune: the backbone changed since its weights were loaded: features are not cached, so that "
                 "the checkpoints hold the whole network")
        return False
    return use_cache


def _checked_plan(model: nn.Module, strategy: str, cache_features: bool | None, fit_kwargs: dict[str, Any],
                  common: dict[str, Any], callbacks: list[Any], **settings: Any) -> StrategyPlan:
    """Every argument checked, then the plan (with its own checks) and what is warned about, all before the
    surgery: checks that ran after it (top_stages out of range, fit's) left a new random head behind."""
    _check_arguments(model, strategy, cache_features, fit_kwargs, **settings)
    _check_run(fit_kwargs, common, callbacks)
    plan = plan_strategy(model, strategy, settings["epochs"], settings["unfreeze_every"],
                         top_stages=settings["top_stages"], freeze_bn=settings["freeze_bn"],
                         backbone_lr_mult=settings["backbone_lr_mult"])
    _warn_random_backbone(model, plan)
    return plan


def _fit_planned(model: nn.Module, plan: StrategyPlan, train_data: Any, val_data: Any, groups: list[dict[str, Any]],
                 callbacks: list[Any], common: dict[str, Any], fit_kwargs: dict[str, Any]):
    """fit with the plan applied at every epoch start; every parameter trainable again and no hook left after."""
    from zoo.engine import fit

    freezer = _Freezer(model, plan)
    freezer.apply(0)
    cb = _UnfreezeCallback(freezer, verbose=common["progress"] and plan.strategy == "gradual")
    try:
        return fit(model, train_data, val_data, param_groups=groups, callbacks=[cb, *callbacks], **common, **fit_kwargs)
    finally:
        freezer.close()


class _Started(Callback):
    """Notes that the run's first epoch began: up to then, nothing was trained."""

    def __init__(self) -> None:
        self.started = False

    def on_epoch_start(self, state: TrainState) -> None:
        self.started = True


@contextlib.contextmanager
def _undone_unless_trained(model: nn.Module):
    """The surgery (a new head, the class names and origin in ``pretrained_cfg``) put back when the run fails
    before its first epoch: a failure that checks before it could not see (a ``val_data`` folder of other
    classes, a warm-up longer than the run, an unreadable image) left the caller's network with a random head."""
    name = head_name(model)
    head = getattr(model, name)
    # reset_classifier replaces a Sequential head's last Linear inside it (and the auxiliary classifiers, which
    # reorder_outputs_by_name reorders too): every link is kept, not the top alone
    links = [(parent, attr, child) for parent in head.modules() for attr, child in parent.named_children()]
    links += output_layers(model)[1:]
    had_cfg = "pretrained_cfg" in vars(model)
    cfg = copy.deepcopy(model.pretrained_cfg) if had_cfg else None
    started = _Started()
    try:
        yield started
    except BaseException:
        if not started.started:
            setattr(model, name, head)
            for parent, attr, child in links:
                setattr(parent, attr, child)
            if had_cfg:
                model.pretrained_cfg = cfg
        raise


def _warn_random_backbone(model: nn.Module, plan: StrategyPlan) -> None:
    """A zoo network built without weights, fine-tuned with its backbone frozen in whole or in part: the head
    learnt on random features (the `zoo finetune` default, and zoo.finetune("resnet18", ...)) without a word.
    A warning, not an error: one may mean it (a baseline). ``full`` trains everything: a run from scratch."""
    cfg = getattr(model, "pretrained_cfg", None)
    if (plan.strategy == "full" and not plan.frozen_backbone) or not isinstance(cfg, dict) \
            or any(cfg.get(k) is not None for k in ("weights", "finetuned_from", "backbone_weights", "backbone_from")):
        return
    from zoo import list_weights, registry

    name = getattr(model, "registry_name", None)
    tags = [w.split(".", 1)[1] for w in list_weights(name)] if name in registry.list_models() else []
    tag = tags[0] if tags else "PATH"
    how = (f"zoo.finetune({name!r}, data, weights={tag!r}) or zoo.build({name!r}, weights={tag!r}); on the command "
           f"line zoo finetune {name} --weights {tag}" + (f" (weights: {', '.join(tags)})" if tags else "")
           if name else "load pretrained weights into it first")
    kept = "the whole backbone" if plan.strategy == "head" or plan.frozen_backbone else "part of the backbone"
    warnings.warn(f"finetune: the {name or type(model).__name__} holds no pretrained weights (it was built without "
                  f"weights=), so strategy={plan.strategy!r} keeps {kept} frozen at its random initial values: pass "
                  f"weights, {how}; or use strategy='full' to train the whole network from scratch",
                  stacklevel=user_stacklevel())


def _check_fit_options(fit_kwargs: dict[str, Any]) -> None:
    """A key neither finetune nor fit takes is named with both calls' options (fit's error lists fit's
    alone, so ``imagesize`` would not be told about ``image_size``)."""
    import dataclasses
    import inspect

    from zoo.engine.options import FitConfig, check_options

    fit_keys = {f.name for f in dataclasses.fields(FitConfig)} | {"val_data"}
    own = [name for name, p in inspect.signature(finetune).parameters.items()
           if p.kind is p.KEYWORD_ONLY]
    check_options(set(fit_kwargs) - fit_keys, "zoo.finetune", [*own, *fit_keys])


def _with_recipe(model: nn.Module, data: Any, train_data: Any, val_data: Any, fit_kwargs: dict[str, Any],
                 plan: StrategyPlan, **settings: Any) -> dict[str, Any]:
    """``fit_kwargs`` recording what this fine-tuning run consumed before ``fit`` (the strategy and its
    settings; on an image folder its preprocessing and fingerprint, as ``zoo.train`` records them), so that
    a resume of its checkpoints with another recipe is refused (:func:`zoo.engine.resume.with_recipe`)."""
    from zoo.engine.resume import with_recipe
    from zoo.vision.resnet import folder_recipe

    recipe = {"strategy": plan.strategy, **settings}
    if plan.strategy == "gradual":  # the schedule in use: unfreeze_every=None is derived from epochs, so a resume
        # with more epochs would freeze stages that were open again (refused; unfreeze_every= keeps the schedule)
        recipe["unfreeze_every_used"] = plan.unfreeze_every
    if not settings["cache_features"]:  # only a cached-feature run's checkpoints hold the head alone, and name
        # the backbone's weights, so that zoo.build(name, weights="DIR/best.pt") rebuilds the network around it
        recipe.pop("backbone_weights")
    if isinstance(data, (str, os.PathLike)) and getattr(model, "pretrained_cfg", None) is not None:
        recipe.update(folder_recipe(model.pretrained_cfg, train_data, val_data, settings["augment"], settings["strict"]))
    architecture = getattr(model, "zoo_architecture", None)
    # given or derived, the schedule is compared as unfreeze_every_used: unfreeze_every=1 continues a run of None's 1
    return with_recipe(fit_kwargs, data=recipe, model=architecture() if callable(architecture) else None,
                       may_change=("strict", "unfreeze_every") if plan.strategy == "gradual" else ("strict",),
                       name=getattr(model, "registry_name", None))


def _seed_before_surgery(seed: Any) -> None:
    """fit seeds only once it starts: without this, a new head would come from whatever state the generators
    are in, and the same seed would give another run. No ``seed`` is fit's default one (0), as by name: else
    the head would come from the caller's generators, another one each call."""
    from zoo.engine.options import FitConfig
    from zoo.engine.seed import set_seed

    set_seed(FitConfig.seed if seed is None else int(seed))


def _check_arguments(model: Any, strategy: str, cache_features: bool | None, fit_kwargs: dict[str, Any],
                     **settings: Any) -> None:
    _check_fit_options(fit_kwargs)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    for key in ("epochs", "top_stages"):
        _whole(key, settings[key])
    _whole("unfreeze_every", settings["unfreeze_every"], optional=True)
    _whole("num_classes", settings["num_classes"], optional=True)
    for key in ("freeze_bn", "augment", "strict"):
        _flag(key, settings[key])
    _flag("cache_features", cache_features, optional=True)
    # a setting of another strategy is ignored, so it is said (a typo in strategy= would go unseen); a warning, not an
    # error: a study's grid may pass one setting to every strategy
    for key, default, takes in (("unfreeze_every", None, ("gradual",)), ("top_stages", 1, ("top",)),
                                ("backbone_lr_mult", 0.1, ("top", "full", "gradual"))):
        if settings[key] != default and strategy not in takes:
            warnings.warn(f"finetune: {key}={settings[key]!r} applies to strategy={' or '.join(map(repr, takes))}; "
                          f"strategy={strategy!r} does not use it: leave it out, or choose that strategy",
                          stacklevel=user_stacklevel())
    if settings["epochs"] < 1:
        raise ValueError(f"epochs must be >= 1, got {settings['epochs']}")
    if settings["num_classes"] is not None and settings["num_classes"] < 1:
        raise ValueError(f"num_classes must be >= 1 (the new head's outputs), got {settings['num_classes']}")
    mult = settings["backbone_lr_mult"]
    if isinstance(mult, bool) or not isinstance(mult, numbers.Real) or not math.isfinite(mult) or mult < 0:
        # nan trained the backbone to NaN and saved it with exit 0; a negative one climbed the loss
        raise ValueError(f"backbone_lr_mult must be a finite number >= 0 (the backbone's share of lr; 0 freezes "
                         f"it), got {mult!r}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"finetune takes a network (zoo.finetune builds one from a name), got {type(model).__name__}")
    if cache_features and strategy != "head":
        raise ValueError(f"cache_features=True needs strategy='head' (the backbone must be frozen), got {strategy!r}")


def _check_run(fit_kwargs: dict[str, Any], common: dict[str, Any], callbacks: list[Any]) -> None:
    """fit's checks of its options, made before the surgery: fit made them only once it started, after the head
    was replaced, so ``lr="1e-3"``, ``epochs=2.5``, ``schedule="cosin"`` or ``device="cuda"`` on a machine
    without a GPU left the caller's network with a new random head and its class names gone."""
    from zoo.engine.devices import usable_device
    from zoo.engine.options import FitConfig, UnknownOptionError
    from zoo.engine.precision import normalize_amp

    given = {k: v for k, v in fit_kwargs.items() if k != "val_data"}
    _refuse_own_groups(given)
    try:
        cfg = FitConfig.from_options({**given, **common})
    except UnknownOptionError:
        raise
    except TypeError as err:  # fit's "fit: lr expects float, got '1e-3' (str)": said as the call the user made
        raise TypeError(f"finetune: {str(err).removeprefix('fit: ')}; pass a value of that type (zoo.engine.FitConfig "
                        "documents fit's options)") from None
    normalize_amp(cfg.amp)  # (FitConfig refused unknown schedule and optimizer names)
    if cfg.device is not None:
        usable_device(cfg.device)
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise TypeError(f"callbacks must be zoo.engine.Callback instances, got {type(cb).__name__}")


def _refuse_own_groups(given: dict[str, Any]) -> None:
    """fit's ``optimizer=`` (a ready optimizer) and ``param_groups=``: finetune makes the groups (the head at lr,
    the stages at lr * backbone_lr_mult, frozen ones left out), so either failed inside fit, in words about
    things the caller had not done ("param_groups is for optimizers fit builds")."""
    from zoo.engine.optim import OPTIMIZERS

    ready = given.get("optimizer")
    if not isinstance(ready, torch.optim.Optimizer) and given.get("param_groups") is None:
        return
    if isinstance(ready, torch.optim.Optimizer):
        name = type(ready).__name__.lower()
        what = f"a ready optimizer (optimizer={type(ready).__name__}(...))"
        named = f"optimizer={name if name in OPTIMIZERS else 'sgd'!r}"
    else:
        what, named = "param_groups=", "optimizer='sgd'"
    raise ValueError(f"finetune builds the optimizer's parameter groups itself (the head at lr, the backbone stages "
                     f"the strategy trains at lr * backbone_lr_mult), so {what} cannot be used: pass the optimizer by "
                     f"name with its options, {named}, optimizer_options={{'momentum': 0.9}} say, with lr= and "
                     f"backbone_lr_mult= (or optimizer=fn(param_groups, lr=..., weight_decay=...), which gets them)")


def _finetune_cached(model: nn.Module, plan: StrategyPlan, train_data: Any, val_data: Any,
                     common: dict[str, Any], callbacks: list[Any], fit_kwargs: dict[str, Any]):
    """``head`` with a feature cache: one backbone pass per sample, then the head trains on (N, D) features."""
    from zoo.engine import fit

    backbone = fit_kwargs["config"].get("data.backbone_weights")
    if backbone is not None:  # untouched by this run: a second head-only run (or its resume) names it too
        model.pretrained_cfg = {**model.pretrained_cfg, "backbone_weights": backbone}

    kw = {"batch_size": max(64, common["batch_size"]), "amp": common["amp"], "device": common["device"],
          "channels_last": fit_kwargs.get("channels_last", "auto"), "progress": common["progress"]}
    train_feats = extract_features(model, train_data, **kw)
    val_feats = extract_features(model, val_data, **kw) if val_data is not None else None
    fit_kwargs = {k: v for k, v in fit_kwargs.items() if k != "channels_last"}  # (N, D) features: no layout
    head = getattr(model, plan.head)
    result = fit(head, train_feats, val_feats, callbacks=callbacks, **common, **fit_kwargs)
    if common["device"] is not None:  # the head trained there: the whole network stays together
        model.to(common["device"])
    result.model = model
    return result
