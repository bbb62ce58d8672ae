"""ResNet18 (torchvision's) with the surgery fine-tuning needs: head replacement, ``in_chans``, a small-image stem.

He et al., "Deep Residual Learning for Image Recognition", https://arxiv.org/abs/1512.03385.
The network *is* ``torchvision.models.ResNet`` (same module names and state-dict keys), so torchvision's
``IMAGENET1K_V1`` file loads unchanged and a model built here drops into any torchvision-based code.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torchvision.models import resnet18 as tv_resnet18

from zoo.registry import register

__all__ = ["STEMS", "adapt_input_conv", "default_pretrained_cfg", "replace_head", "resnet18"]

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
    replicated to RGB); other counts cycle the RGB filters. Unlike timm we keep the first three channels
    *unscaled* and scale only the extra ones by ``3 / in_chans``: a 3-channel image padded with zero
    channels then gives exactly the pretrained output (the pretrained network is recovered), while an
    input whose every channel carries signal stays within 2x of the RGB activation scale.
    """
    if weight.dim() != 4:
        raise ValueError(f"expected conv weights (O, I, kH, kW), got shape {tuple(weight.shape)}")
    src = weight.shape[1]
    if in_chans == src:
        return weight.clone()
    w = weight.float()
    if in_chans == 1:
        out = w.sum(dim=1, keepdim=True)
    elif in_chans < src:
        out = w[:, :in_chans] * (src / in_chans)
    else:
        reps = math.ceil(in_chans / src)
        out = w.repeat(1, reps, 1, 1)[:, :in_chans].clone()
        out[:, src:] *= src / in_chans
    return out.to(weight.dtype)


def replace_head(model: nn.Module, num_classes: int) -> nn.Module:
    """Give ``model.fc`` a fresh ``Linear(in_features, num_classes)`` (torchvision's default init)."""
    if not isinstance(getattr(model, "fc", None), nn.Linear):
        raise TypeError(f"expected a model with an nn.Linear `fc` head, got {type(model).__name__}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    old = model.fc
    model.fc = nn.Linear(old.in_features, num_classes).to(old.weight.device, old.weight.dtype)
    return model


def _load_weights(model: nn.Module, path: Path, entry: Any) -> nn.Module:
    """Registry hook: adapt ``conv1`` to ``in_chans``, load strictly, re-initialise a head of another size."""
    from zoo import hub

    state = hub.load_state_dict(path)
    w = state.get("conv1.weight")
    conv = model.conv1
    if w is not None and w.shape[1] != conv.in_channels and w.shape[2:] == conv.weight.shape[2:]:
        state["conv1.weight"] = adapt_input_conv(conv.in_channels, w)
    report = hub.load_into(model, state, reinit=("fc.",))
    cfg = dict(model.pretrained_cfg)
    meta = dict(getattr(entry, "meta", None) or {})
    # the manifest's preprocessing: meta["transforms"] = {"resize", "crop", "mean", "std"} (the hub's form
    # for upstream files and ours); mean/std only apply to RGB inputs
    tf = dict(meta.get("transforms") or {})
    if "crop" in tf:
        cfg["input_size"] = [conv.in_channels, int(tf["crop"]), int(tf["crop"])]
    for key in ("resize", "mean", "std", "interpolation"):
        if key in tf and (conv.in_channels == 3 or key in ("resize", "interpolation")):
            cfg[key] = tf[key]
    if "classes" in meta and model.fc.out_features == len(meta["classes"]):
        cfg["classes"] = list(meta["classes"])
    cfg["weights"] = getattr(entry, "name", None) or str(path)
    model.pretrained_cfg = cfg
    model.load_report = report
    return model


@register(
    "resnet18",
    family="vision",
    summary="ResNet18 (torchvision), fine-tunable: head surgery, in_chans, small-image stem",
    references=("https://arxiv.org/abs/1512.03385", "https://pytorch.org/vision/stable/models/resnet.html"),
    load_weights=_load_weights,
)
def resnet18(
    num_classes: int = 1000,
    in_chans: int = 3,
    stem: str = "imagenet",
    zero_init_residual: bool = False,
) -> nn.Module:
    """torchvision's ResNet18.

    Args:
        num_classes: size of the ``fc`` head. Loading weights trained for another count re-initialises
            ``fc`` and warns.
        in_chans: input channels; with pretrained weights ``conv1`` is adapted (:func:`adapt_input_conv`).
        stem: ``"imagenet"`` (default: 7x7 stride-2 conv + max-pool, 224x224 inputs) or ``"cifar"`` (3x3
            stride-1 conv, no max-pool: the usual stem for 32x32 images, kuangliu/pytorch-cifar). The stem
            changes ``conv1``'s shape, so weights record the stem they need in their config.
        zero_init_residual: zero the last BN of each block (Goyal et al., https://arxiv.org/abs/1706.02677).
    """
    if stem not in STEMS:
        raise ValueError(f"stem must be one of {STEMS}, got {stem!r}")
    if not isinstance(in_chans, int) or in_chans < 1:
        raise ValueError(f"in_chans must be a positive int, got {in_chans!r}")
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    model = tv_resnet18(weights=None, num_classes=num_classes, zero_init_residual=zero_init_residual)
    if stem == "cifar":
        model.conv1 = nn.Conv2d(in_chans, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif in_chans != 3:
        model.conv1 = nn.Conv2d(in_chans, 64, kernel_size=7, stride=2, padding=3, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.pretrained_cfg = default_pretrained_cfg(stem, in_chans)
    model.pretrained_cfg["stem"] = stem
    return model
