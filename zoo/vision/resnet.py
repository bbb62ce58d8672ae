"""ResNet18 (torchvision's) with the surgery fine-tuning needs: head replacement, ``in_chans``, a small-image stem.

He et al., "Deep Residual Learning for Image Recognition", https://arxiv.org/abs/1512.03385.
The network *is* ``torchvision.models.ResNet`` (same module names and state-dict keys), so torchvision's
``IMAGENET1K_V1`` file loads unchanged and a model built here drops into any torchvision-based code.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, ResNet

from zoo._stacklevel import user_stacklevel
from zoo.api import ModelState
from zoo.engine.head import (
    HEADLESS_HINT,
    ClassifierHead,
    classifier_outputs,
    reorder_outputs_by_name,
    reset_classifier,
    take_file_head,
    weights_as_backbone,
)
from zoo.engine.network import Network
from zoo.inputs import class_folders, whole_number
from zoo.registry import register

__all__ = ["STEMS", "ResNet18", "ResNet18Config", "adapt_input_conv", "default_pretrained_cfg", "folder_recipe",
           "replace_head", "resnet18"]

STEMS = ("imagenet", "cifar")

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def default_pretrained_cfg(stem: str = "imagenet", in_chans: int = 3) -> dict[str, Any]:
    """The preprocessing a network of this stem expects when the weights do not say otherwise (timm's
    ``pretrained_cfg`` keys: ``input_size``, ``resize``, ``mean``, ``std``, ``interpolation``)."""
    size, resize = (224, 256) if stem == "imagenet" else (32, 32)
    mean, std = IMAGENET_MEAN, IMAGENET_STD
    if in_chans != 3:  # no per-channel statistics for non-RGB inputs: leave scaling to the data
        mean, std = (0.0,) * in_chans, (1.0,) * in_chans
    return {"input_size": [in_chans, size, size], "resize": resize, "mean": list(mean), "std": list(std),
            "interpolation": "bilinear"}


def adapt_input_conv(in_chans: int, weight: torch.Tensor) -> torch.Tensor:
    """Adapt pretrained first-layer filters ``(O, 3, k, k)`` to ``in_chans`` input channels.

    As ``timm.models.adapt_input_conv``: one channel gets the sum of the RGB filters (exact for a grey image
    replicated to RGB); other counts cycle the RGB filters. A one-channel source is shared out over every
    channel (``w / in_chans`` each: a grey image replicated to ``in_chans`` channels gives the source's output).
    Unlike timm we keep the first three channels *unscaled* and scale only the extra ones by ``3 / in_chans``:
    a 3-channel image padded with zero channels then gives exactly the pretrained output (the pretrained
    network is recovered), while an input whose every channel carries signal stays within 2x of the RGB
    activation scale.
    """
    if weight.dim() != 4:
        raise ValueError(f"expected conv weights (O, I, kH, kW), got shape {tuple(weight.shape)}")
    src = weight.shape[1]
    if in_chans == src:
        return weight.clone()
    w = weight.float()
    if src == 1:  # a grey network's filter over every channel, shared: a grey image given as RGB reads the same
        out = w.repeat(1, in_chans, 1, 1) / in_chans
    elif in_chans == 1:
        out = w.sum(dim=1, keepdim=True)
    elif in_chans < src:
        out = w[:, :in_chans] * (src / in_chans)
    else:
        reps = math.ceil(in_chans / src)
        out = w.repeat(1, reps, 1, 1)[:, :in_chans].clone()
        out[:, src:] *= src / in_chans
    return out.to(weight.dtype)


@dataclass(frozen=True)
class ResNet18Config:
    """The settings of a ResNet18 (He et al. 2016, https://arxiv.org/abs/1512.03385)."""

    num_classes: int = 1000
    """Outputs of the ``fc`` head; loading weights trained for another count re-initialises ``fc`` and warns."""
    in_chans: int = 3
    """Input channels; with pretrained weights ``conv1`` is adapted (:func:`adapt_input_conv`)."""
    stem: Literal["imagenet", "cifar"] = "imagenet"
    """``imagenet``: 7x7 stride-2 conv + max-pool (224 px inputs); ``cifar``: 3x3 stride-1 conv, no max-pool
    (32 px inputs, kuangliu/pytorch-cifar). Weights record the stem they need."""
    zero_init_residual: bool = False
    """Zero the last BN of each block (Goyal et al., https://arxiv.org/abs/1706.02677)."""

    def __post_init__(self) -> None:
        if self.stem not in STEMS:
            raise ValueError(f"stem must be one of {STEMS}, got {self.stem!r}")
        whole_number(self.num_classes, "num_classes", hint=HEADLESS_HINT)
        whole_number(self.in_chans, "in_chans")


class ResNet18(ClassifierHead, Network, ResNet):
    """torchvision's ``ResNet`` (same modules and state-dict keys, so torchvision's files load unchanged)
    with what zoo's contract adds: image folders as data, ``zoo.predict`` on image paths, ``zoo.save`` with
    the class names and preprocessing inside the file.

    ``pretrained_cfg`` (timm's name) holds the preprocessing the network expects (input size, resize,
    mean/std) and, once known, its ``classes``. timm's head API (:mod:`zoo.engine.head`): ``forward_features``,
    ``forward_head(..., pre_logits=True)`` for pooled features, ``get_classifier``, ``reset_classifier``.
    """

    registry_name = "resnet18"  # the name zoo.build knows it by, as every zoo model has

    def __init__(self, config: ResNet18Config | None = None) -> None:
        c = config or ResNet18Config()
        super().__init__(BasicBlock, [2, 2, 2, 2], num_classes=c.num_classes, zero_init_residual=c.zero_init_residual)
        if c.stem == "cifar":
            self.conv1 = nn.Conv2d(c.in_chans, 64, kernel_size=3, stride=1, padding=1, bias=False)
            self.maxpool = nn.Identity()
        elif c.in_chans != 3:
            self.conv1 = nn.Conv2d(c.in_chans, 64, kernel_size=7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(self.conv1.weight, mode="fan_out", nonlinearity="relu")
        self.stem = c.stem
        self.zero_init_residual = c.zero_init_residual
        self.pretrained_cfg = {**default_pretrained_cfg(c.stem, c.in_chans), "stem": c.stem}

    @property
    def config(self) -> ResNet18Config:
        """The config that rebuilds this network's shapes (the head may have been replaced since it was built)."""
        return ResNet18Config(num_classes=classifier_outputs(self), in_chans=self.conv1.in_channels, stem=self.stem,
                              zero_init_residual=self.zero_init_residual)

    @property
    def num_features(self) -> int:
        """The pooled features' width (timm's name): what a head put on an ``nn.Identity`` ``fc`` takes in."""
        return self.layer4[-1].bn2.num_features

    @property
    def classes(self) -> list[str] | None:
        return self.pretrained_cfg.get("classes")

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W)`` -> the last stage's map ``(B, 512, H', W')`` (H/32 with the imagenet stem, H/8 with cifar's)."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """``forward_features``' map -> logits ``(B, num_classes)``, or with ``pre_logits`` the pooled ``(B, 512)``."""
        x = torch.flatten(self.avgpool(x), 1)  # (B, 512)
        return x if pre_logits else self.fc(x)

    # -- zoo.train / zoo.evaluate ------------------------------------------------------------------------
    def zoo_recipe(self, *, train: bool) -> dict[str, Any]:
        return {"metrics": ("accuracy", "top5") if classifier_outputs(self) >= 5 else ("accuracy",)}

    def zoo_data(self, data: Any, *, train: bool, image_size: int | None = None, augment: bool = True,
                 strict: bool = False, unknown_classes: str = "error", **options: Any) -> tuple[Any, dict[str, Any]]:
        """An image folder: ``DIR/train/<class>/...`` (+ ``DIR/val``) to train, ``DIR/val`` (or ``DIR/<class>``)
        to evaluate, with the transforms the network's weights expect. A Dataset of ``(PIL image, label)``
        (torchvision's data sets made without a transform; ``val_data=`` too) gets those transforms, and its
        ``classes`` name the outputs; a Dataset of tensors or a DataLoader passes as is.
        Training records the recipe (preprocessing, ``augment``, the folder's fingerprint) in the checkpoints:
        a resume with another is refused (``strict`` may change: it only says what a bad file does).
        ``unknown_classes="skip"``: a folder's class the network (or ``train/``) does not have is left out of
        the scored or validation set, with a warning naming it, instead of an error."""
        if train:  # the weights change: exports and saved files must not claim this is, say, resnet18.cifar10
            from zoo.vision.finetune import record_origin

            record_origin(self)
        from zoo.vision.transforms import transforms_for, with_image_size

        val = options.pop("val_data", None) if train else None
        # a validation folder given apart is read as a folder, with the training classes (not passed to fit as a str)
        checked = {"image_size": image_size, "augment": augment, "strict": strict, "unknown_classes": unknown_classes}
        if not isinstance(data, (str, os.PathLike)):
            data = self._transformed(data, train, image_size, augment)
            return data, options | ({"val_data": self._val(val, self.classes, **checked)} if val is not None else {})
        from zoo.engine.resume import with_recipe
        from zoo.vision.data import load_image_folders

        eval_tf = transforms_for(self, image_size=image_size)
        if not train:
            return self._folder(data, eval_tf, self.classes, strict, unknown_classes, "image folder"), options
        train_tf = transforms_for(self, train=True, image_size=image_size) if augment else eval_tf
        train_ds, val_ds = load_image_folders(data, train_transform=train_tf, eval_transform=eval_tf, strict=strict,
                                              unknown_classes=unknown_classes)
        self._check_classes(train_ds.classes, data)
        # a head trained on the same classes in another order keeps what it learned: outputs matched by name
        reorder_outputs_by_name(self, self.pretrained_cfg.get("classes"), list(train_ds.classes))
        # the network learns at image_size from here on: evaluate / predict / zoo.save must use it too
        self.pretrained_cfg = {**with_image_size(self.pretrained_cfg, image_size), "classes": list(train_ds.classes)}
        if val is not None:  # given apart: it replaces DIR/val
            val_ds = self._val(val, train_ds.classes, **checked)
        options = ({"val_data": val_ds} if val_ds is not None else {}) | options
        return train_ds, with_recipe(options, data=folder_recipe(self.pretrained_cfg, train_ds, options.get(
            "val_data"), augment, strict), may_change=("strict",))

    def _val(self, val: Any, classes: Any, *, image_size: int | None, augment: bool, strict: bool,
             unknown_classes: str) -> Any:
        """A validation set given apart: a folder read as one, anything else as :meth:`_transformed` reads it."""
        from zoo.vision.transforms import transforms_for

        if isinstance(val, (str, os.PathLike)):
            tf = transforms_for(self, image_size=image_size)
            return self._folder(val, tf, classes, strict, unknown_classes, "val_data folder")
        return self._transformed(val, False, image_size, augment)

    def _folder(self, root: Any, tf: Any, classes: Any, strict: bool, unknown_classes: str, what: str) -> Any:
        """:func:`zoo.vision.data.scored_folder`, its classes checked against the network's outputs."""
        from zoo.vision.data import scored_folder

        ds = scored_folder(root, tf, classes, strict=strict, unknown_classes=unknown_classes, what=what)
        self._check_classes(ds.classes, ds.root)
        return ds

    def _transformed(self, data: Any, train: bool, image_size: int | None, augment: bool) -> Any:
        """``data`` with the network's transforms where it yields PIL images (else as it is); ``(X, y)`` images
        are checked as predict checks a batch (a raw PyTorch error names neither the layout nor the fix)."""
        from zoo.vision.data import TransformedImages, dataset_classes, with_network_transforms
        from zoo.vision.finetune import record_classes
        from zoo.vision.predict import check_image_batch
        from zoo.vision.transforms import with_image_size

        if isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[0], (torch.Tensor, np.ndarray)) \
                and data[0].ndim == 4:
            check_image_batch(self, torch.as_tensor(data[0]), "X of (X, y)")

        ds = with_network_transforms(self, data, train=train, augment=augment, image_size=image_size)
        if not isinstance(ds, TransformedImages):
            named = dataset_classes(ds)  # ImageFolder(root, transform=...): tensors, and still the class names
            if named is not None and train:
                self._check_classes(named, type(data).__name__)
                reorder_outputs_by_name(self, self.pretrained_cfg.get("classes"), [str(c) for c in named])
                self.pretrained_cfg = record_classes(self.pretrained_cfg, named, classifier_outputs(self))
            elif named is not None:  # its own transform, its own label set: said as for PIL images, not refused
                self._warn_scored_by_index(named, data)
            return ds
        if ds.classes is not None:
            self._check_classes(list(ds.classes), type(data).__name__)
            if not train:
                self._warn_scored_by_index(ds.classes, data)
        if train:  # predict uses the size it trained at and names the classes, as after training on a folder
            if ds.classes is not None:
                reorder_outputs_by_name(self, self.pretrained_cfg.get("classes"), [str(c) for c in ds.classes])
            self.pretrained_cfg = record_classes(with_image_size(self.pretrained_cfg, image_size), ds.classes,
                                                 classifier_outputs(self))
        return ds

    def _warn_scored_by_index(self, classes: Any, data: Any) -> None:
        """A Dataset naming other classes than the network's is scored by index (a folder is matched by name): an
        ImageFolder of the bees alone scored each bee as output 0, 'ant', at accuracy 0, without a word."""
        theirs, ours = [str(c) for c in classes], [str(c) for c in self.classes or ()]
        if ours and theirs != ours:
            warnings.warn(f"{type(data).__name__}'s classes {theirs} are not the network's {ours}: its labels are "
                          f"scored by index (label i as output i, {theirs[0]!r} as {ours[0]!r}); give the images "
                          f"as a folder to match classes by name", stacklevel=user_stacklevel())

    def _check_classes(self, classes: list[str], where: Any) -> None:
        outputs = classifier_outputs(self)
        if len(classes) != outputs:
            raise ValueError(
                f"{where} has {len(classes)} classes but the network has {outputs} outputs: build it "
                f"with num_classes={len(classes)} (zoo.build('resnet18', num_classes={len(classes)}, weights=...)) "
                "or use zoo.finetune, which replaces the head")

    # -- zoo.finetune ---------------------------------------------------------------------------------------
    def zoo_finetune(self, data: Any, **config: Any):
        """``zoo.finetune(model, data, strategy=...)``: see :func:`zoo.vision.finetune.finetune`."""
        from zoo.vision.finetune import finetune

        return finetune(self, data, **config)

    # -- zoo.predict ----------------------------------------------------------------------------------------
    def zoo_predict(self, inputs: Any, *, topk: int = 1, batch_size: int = 32, device: str | torch.device | None = None,
                    amp: str | None = "auto", classes: Any = None, transform: Any = None,
                    exif_transpose: bool = True, progress: bool = False) -> list[dict[str, Any]]:
        """Image files, a folder, PIL images, an ``(N, C, H, W)`` float tensor, or a Dataset or DataLoader of
        them -> one dict per image:
        ``{"input", "label", "index", "prob", "topk": [(label, prob), ...]}``. Runs on the model's device
        (``device=`` moves it) at ``amp="auto"`` (``amp=None``: fp32); see :func:`zoo.vision.predict.predict`."""
        from zoo.vision.predict import predict

        classifier_outputs(self)  # a headless network's features are no class scores: say so, not "512 names"
        return predict(self, inputs, topk=topk, batch_size=batch_size, device=device, amp=amp, classes=classes,
                       transform=transform, exif_transpose=exif_transpose, progress=progress)

    # -- zoo.save ------------------------------------------------------------------------------------------
    def zoo_state(self) -> ModelState:
        cfg = {k: v for k, v in self.pretrained_cfg.items() if k != "weights"}
        return ModelState("resnet18", asdict(self.config), self.state_dict(),
                          {"zoo.pretrained_cfg": json.dumps(cfg)})


def folder_recipe(pretrained_cfg: dict[str, Any], train_ds: Any, val_ds: Any, augment: bool,
                  strict: bool) -> dict[str, Any]:
    """What training on an image folder consumed, as its checkpoints record it (``data.*``): the
    preprocessing, ``augment``, ``strict``, each split's fingerprint (its files' names and sizes) and the
    class names."""
    recipe = {k: pretrained_cfg.get(k) for k in ("input_size", "resize", "mean", "std", "interpolation")}
    recipe.update(augment=bool(augment), strict=bool(strict), train_images=_data_fingerprint(train_ds))
    if getattr(train_ds, "classes", None):  # a network built from a checkpoint names its outputs with them
        recipe["classes"] = [str(c) for c in train_ds.classes]
    if val_ds is not None:
        recipe["val_images"] = _data_fingerprint(val_ds)
    return recipe


def _data_fingerprint(ds: Any) -> str:
    """An image folder's fingerprint (its files' names, sizes and first bytes); for other data (a Dataset the
    user passed as ``val_data``, say) its kind and size, all that can be told of it cheaply."""
    from zoo.engine.resume import files_fingerprint

    samples, root = getattr(ds, "samples", None), getattr(ds, "root", None)
    if samples is not None and root is not None:
        return files_fingerprint((p for p, _ in samples), root=root)
    size = f" of {len(ds)} items" if hasattr(ds, "__len__") else ""
    return f"{type(ds).__name__}{size}"


replace_head = reset_classifier  # an alias: zoo.vision.replace_head is zoo.engine.head.reset_classifier


def _load_weights(model: ResNet18, path: Path, entry: Any, requested: dict[str, Any] | None = None) -> ResNet18:
    """Registry hook: adapt ``conv1`` to ``in_chans``, load strictly, re-initialise a head of another size
    than a ``num_classes`` the caller asked for (else the head is the file's size: a torchvision state dict
    records no config), and take the preprocessing and class names the weights carry (manifest meta or the
    file's metadata)."""
    from zoo import hub

    state = hub.load_state_dict(path)
    run = hub.training_config(path)
    if run is not None and run.get("data.cache_features") and set(state) == {"weight", "bias"}:
        state = _around_cached_head(state, run, path)
    take_file_head(model, state, requested)  # a trained head is kept, not swapped for a fresh 1000-way one
    w = state.get("conv1.weight")
    conv = model.conv1
    if w is not None and w.shape[1] != conv.in_channels and w.shape[2:] == conv.weight.shape[2:]:
        state["conv1.weight"] = adapt_input_conv(conv.in_channels, w)
    report = hub.load_into(model, state, reinit=("fc.",))
    from zoo.vision.finetune import record_loaded_backbone

    record_loaded_backbone(model)  # beside the name below: a head-only fine-tune checks the backbone is still it
    cfg = dict(model.pretrained_cfg)
    if w is not None and w.shape[1] != conv.in_channels:  # the file's own statistics, for _fit_channels to adapt
        own = default_pretrained_cfg(cfg.get("stem", model.config.stem), int(w.shape[1]))
        cfg.update(mean=own["mean"], std=own["std"])
    saved = hub.read_metadata(path).get("zoo.pretrained_cfg") if hub.state.is_safetensors(path) else None
    if saved:  # written by zoo.save / zoo finetune: the preprocessing the network was trained with
        cfg.update({k: v for k, v in json.loads(saved).items() if k != "classes"})
        classes = json.loads(saved).get("classes")
    elif run is not None:  # a checkpoint of zoo.train / zoo.finetune
        cfg.update({k: run[f"data.{k}"] for k in ("input_size", "resize", "mean", "std", "interpolation")
                    if f"data.{k}" in run})
        classes = run.get("data.classes")  # recorded since 2026-12-06: earlier ones name outputs by index
    else:
        # the manifest's preprocessing: meta["transforms"] = {"resize", "crop", "mean", "std"}
        meta = dict(getattr(entry, "meta", None) or {})
        tf = dict(meta.get("transforms") or {})
        if "crop" in tf:
            cfg["input_size"] = [conv.in_channels, int(tf["crop"]), int(tf["crop"])]
        for key in ("resize", "mean", "std", "interpolation"):
            if key in tf:
                cfg[key] = tf[key]
        # meta["classes"], else torchvision's categories for its own weights (WeightsEntry.classes)
        classes = meta.get("classes") or getattr(entry, "classes", None)
    _fit_channels(cfg, conv.in_channels)
    if classes is not None and model.fc.out_features == len(classes):
        cfg["classes"] = list(classes)
    cfg["weights"] = getattr(entry, "name", None) or str(path)
    if any(key.startswith("fc.") for key, _, _ in report.reinitialized):  # num_classes= unlike the file's
        cfg = weights_as_backbone(cfg)
    model.pretrained_cfg = cfg
    model.load_report = report
    return model


def _around_cached_head(head: dict[str, torch.Tensor], run: dict[str, Any], path) -> dict[str, torch.Tensor]:
    """The whole network's state for a checkpoint of ``zoo.finetune(strategy="head")`` on cached features, which
    holds the head alone (``weight``, ``bias``: fit trained the head on the backbone's features): the backbone
    from the weights the run recorded (``data.backbone_weights``), the head from the checkpoint."""
    from zoo import hub

    source = run.get("data.backbone_weights")
    if not source:
        raise ValueError(f"{path} holds only the classifier head that zoo.finetune(strategy='head') trained on "
                         f"cached features, and names no backbone weights (a run of an older zoo, or a backbone "
                         f"trained or changed before the fine-tuning): build the network that was fine-tuned and "
                         f"load the head, model.fc.load_state_dict(torch.load(path, weights_only=True)['model'])")
    backbone, _ = hub.resolve(source, model="resnet18")
    state = hub.load_state_dict(backbone)
    inner = hub.training_config(backbone)
    if inner is not None and inner.get("data.cache_features") and set(state) == {"weight", "bias"}:
        state = _around_cached_head(state, inner, backbone)  # a head tuned on a network built from such a file
    state = {k: v for k, v in state.items() if not k.startswith("fc.")}
    return {**state, "fc.weight": head["weight"], "fc.bias": head["bias"]}


def _fit_channels(cfg: dict[str, Any], in_chans: int) -> None:
    """Make the weights' preprocessing fit a network built with another ``in_chans``. One channel gets the
    average of the RGB statistics: :func:`adapt_input_conv` sums the RGB filters, which sees a grey image as
    the RGB network saw it replicated when the channels share one mean and std. Other counts have no
    statistics to inherit: scaling is left to the data (mean 0, std 1), as for a network without weights."""
    cfg["input_size"] = [in_chans, *list(cfg["input_size"])[1:]]
    for key, neutral in (("mean", 0.0), ("std", 1.0)):
        values = [float(v) for v in cfg.get(key) or ()]
        if len(values) == in_chans:
            continue
        if in_chans == 1 and values:
            cfg[key] = [sum(values) / len(values)]
        elif len(values) == 1:
            cfg[key] = values * in_chans
        else:
            cfg[key] = [neutral] * in_chans


def _classes_in(data: Any) -> dict[str, Any]:
    """An image folder implies ``num_classes`` (its training split's class folders)."""
    if not isinstance(data, (str, os.PathLike)) or not Path(data).is_dir():
        return {}
    from zoo.vision.data import find_split

    root = Path(data)
    folder = find_split(root, "train") or root
    classes = class_folders(folder)
    return {"num_classes": len(classes)} if classes else {}


@register(
    "resnet18",
    config=ResNet18Config,
    references=("https://arxiv.org/abs/1512.03385", "https://pytorch.org/vision/stable/models/resnet.html"),
    load_weights=_load_weights,
    infer_config=_classes_in,
)
def resnet18(**config: Any) -> ResNet18:
    """torchvision's ResNet18 with zoo's contract; ``config``: :class:`ResNet18Config` fields."""
    return ResNet18(ResNet18Config(**config))
