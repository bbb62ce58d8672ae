"""``r2plus1d_18``: torchvision's R(2+1)D-18, with Kinetics-400 weights through the hub.

Tran et al., "A Closer Look at Spatiotemporal Convolutions for Action Recognition", CVPR 2018,
https://arxiv.org/abs/1711.11248. The weights tag ``kinetics400-v1`` is torchvision's
``R2Plus1D_18_Weights.KINETICS400_V1`` file (its manifest entry carries ``{"num_classes": 400}``);
building with ``num_classes=101`` on top of it keeps the backbone and re-initialises ``fc`` with a
warning that says so. Inputs: ``(B, 3, T, H, W)`` floats normalised with
:data:`zoo.video.transforms.KINETICS_MEAN`/``KINETICS_STD`` (see ``transforms.kinetics_eval``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn
from torchvision.models.video import r2plus1d_18 as tv_r2plus1d_18

from zoo.registry import register

__all__ = ["r2plus1d_18"]


def _load_weights(model: nn.Module, path: Path, entry: Any) -> nn.Module:
    """Load strictly, except a classifier of another size (Kinetics' 400 vs UCF101's 101) starts fresh."""
    from zoo import hub

    model.load_report = hub.load_into(model, hub.load_state_dict(path), reinit=("fc.",))
    return model


@register(
    "r2plus1d_18",
    family="video",
    summary="R(2+1)D-18 (torchvision) video ResNet; Kinetics-400 weights, head adapted to UCF101's 101 classes",
    references=("https://arxiv.org/abs/1711.11248", "https://pytorch.org/vision/stable/models/video_resnet.html"),
    load_weights=_load_weights,
)
def r2plus1d_18(num_classes: int = 101) -> nn.Module:
    """torchvision's ``r2plus1d_18`` (no weights) with a ``num_classes`` head."""
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    return tv_r2plus1d_18(weights=None, num_classes=num_classes)
