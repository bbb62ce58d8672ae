"""Image transforms bound to the weights: the eval pipeline a network was trained with, and its train twin.

The numbers (input size, resize, mean/std, interpolation) come from ``model.pretrained_cfg`` (timm's name),
which :mod:`zoo.vision.resnet` fills from the builder's stem and, when weights are loaded, from the
manifest entry's ``meta``; so ``transforms_for(zoo.build("resnet18", weights="cifar10"))`` gives the
CIFAR preprocessing and ``weights="imagenet1k-v1"`` gives torchvision's ``ImageClassification`` one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms import v2 as T

from zoo.inputs import whole_number

__all__ = ["resolve_cfg", "transforms_for", "with_image_size"]

def interpolation_mode(value: Any) -> InterpolationMode:
    """torchvision's ``InterpolationMode`` of a ``pretrained_cfg["interpolation"]``: the enum itself or its name in
    any case (``"bicubic"``, ``"BICUBIC"``, ``"lanczos"``); anything else is an error, not a silent bilinear."""
    if isinstance(value, InterpolationMode):
        return value
    name = str(getattr(value, "value", value)).strip().lower()
    try:
        return InterpolationMode(name)
    except ValueError:
        known = ", ".join(repr(m.value) for m in InterpolationMode)
        raise ValueError(f"interpolation {value!r} is none of torchvision's InterpolationMode: {known}") from None


def resolve_cfg(model_or_cfg: Any, image_size: int | None = None) -> dict[str, Any]:
    """``pretrained_cfg`` of a model (or a mapping), with ``image_size`` overriding the crop (and the resize
    scaled by the same ratio, as timm's ``crop_pct``)."""
    if isinstance(model_or_cfg, Mapping):
        cfg = dict(model_or_cfg)
    else:
        cfg = getattr(model_or_cfg, "pretrained_cfg", None)
        if cfg is None:
            raise TypeError(
                f"{type(model_or_cfg).__name__} has no pretrained_cfg; pass a zoo vision model or a mapping "
                "with input_size, resize, mean, std"
            )
        cfg = dict(cfg)
    for key in ("input_size", "mean", "std"):
        if key not in cfg:
            raise ValueError(f"pretrained_cfg is missing {key!r}: got keys {sorted(cfg)}")
    size = int(cfg["input_size"][-1])
    resize = int(cfg.get("resize", size))
    if image_size is not None:
        image_size = whole_number(image_size, "image_size", hint="pixels on a side")
        resize = max(image_size, round(resize * image_size / size))
        size = image_size
    cfg["size"], cfg["resize"] = size, resize
    return cfg


def with_image_size(cfg: Mapping[str, Any], image_size: int | None) -> dict[str, Any]:
    """``cfg`` for a network trained at ``image_size``: its crop and its resize (scaled by the same ratio, as
    :func:`resolve_cfg` does), so that evaluate, predict and a saved file use the size the network learnt
    at instead of the one its original weights had. ``None``: ``cfg`` unchanged."""
    out = dict(cfg)
    if image_size is None:
        return out
    resolved = resolve_cfg(cfg, image_size)
    out["input_size"] = [int(cfg["input_size"][0]), resolved["size"], resolved["size"]]
    out["resize"] = resolved["resize"]
    return out


def transforms_for(model_or_cfg: Any, *, train: bool = False, image_size: int | None = None) -> T.Compose:
    """PIL image -> normalised float tensor ``(C, H, W)``: RGB for a 3-channel network, greyscale (``L``)
    for a 1-channel one (``input_size[0]``); image files hold no other channel counts.

    Eval: resize the short side to ``resize``, centre-crop ``size`` (deterministic).
    Train: small images (<= 64 px, CIFAR-like) get padded random crops + flips, the standard CIFAR recipe;
    larger ones get ``RandomResizedCrop`` + flips, torchvision's ImageNet recipe.
    """
    cfg = resolve_cfg(model_or_cfg, image_size)
    channels = int(cfg["input_size"][0])
    if channels not in (1, 3):
        raise ValueError(
            f"a network with {channels} input channels cannot read image files: images load as RGB (3 channels) "
            f"or, for in_chans=1, greyscale (1 channel). Build it with in_chans=3 or in_chans=1, or pass tensors: "
            f"(X, y) with X of shape (N, {channels}, H, W) (or a Dataset of such samples) to zoo.train / "
            f"zoo.finetune / zoo.evaluate, and a preprocessed (N, {channels}, H, W) float tensor to zoo.predict")
    size, resize = cfg["size"], cfg["resize"]
    interp = interpolation_mode(cfg.get("interpolation") or "bilinear")
    grey = [T.Grayscale(num_output_channels=1)] if channels == 1 else []
    tail = [T.ToImage(), T.ToDtype(torch.float32, scale=True), T.Normalize(cfg["mean"], cfg["std"])]
    if not train:
        return T.Compose([*grey, T.Resize(resize, interpolation=interp, antialias=True), T.CenterCrop(size), *tail])
    if size <= 64:
        head = [T.Resize(resize, interpolation=interp, antialias=True), T.CenterCrop(size),
                T.RandomCrop(size, padding=max(1, size // 8), padding_mode="reflect"), T.RandomHorizontalFlip()]
    else:
        head = [T.RandomResizedCrop(size, interpolation=interp, antialias=True), T.RandomHorizontalFlip()]
    return T.Compose([*grey, *head, *tail])
