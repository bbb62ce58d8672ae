"""``r2plus1d_18``: torchvision's R(2+1)D-18, with Kinetics-400 weights through the hub.

Tran et al., "A Closer Look at Spatiotemporal Convolutions for Action Recognition", CVPR 2018,
https://arxiv.org/abs/1711.11248. The weights tag ``kinetics400-v1`` is torchvision's
``R2Plus1D_18_Weights.KINETICS400_V1`` file (its manifest entry carries ``{"num_classes": 400}``);
building with ``num_classes=101`` on top of it keeps the backbone and re-initialises ``fc`` with a
warning that says so. A plain state-dict file (``.pth``) gives the network its own head's size, unless
``num_classes`` is asked for. Inputs: ``(B, 3, T, H, W)`` floats normalised with
:data:`zoo.video.transforms.KINETICS_MEAN`/``KINETICS_STD``. With the Kinetics weights the input recipe
is torchvision's (``transforms.kinetics_eval``, from the entry's ``meta["transforms"]``): frames resized to
128x171 without antialiasing, centre crop 112. Built without weights, the network is trained (and files
it saves fed) on frames whose shorter side is resized to 128, antialiased.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torchvision.models.video.resnet import BasicBlock, Conv2Plus1D, R2Plus1dStem, VideoResNet

from zoo.engine.head import HEADLESS_HINT, take_file_head
from zoo.inputs import whole_number
from zoo.registry import register
from zoo.video.classifier import VideoClassifierMixin, classes_in

__all__ = ["R2Plus1D18", "R2Plus1DConfig", "r2plus1d_18"]


@dataclass(frozen=True)
class R2Plus1DConfig:
    """The settings of an R(2+1)D-18 (Tran et al. 2018)."""

    num_classes: int = 101
    """Classifier outputs (UCF101: 101). With weights: the file's head size unless given (Kinetics-400 carries
    400; another count re-initialises the head, with a warning)."""

    def __post_init__(self) -> None:
        whole_number(self.num_classes, "num_classes", hint=HEADLESS_HINT)


class R2Plus1D18(VideoClassifierMixin, VideoResNet):
    """torchvision's ``r2plus1d_18`` (same modules and state-dict keys) with zoo's contract."""

    registry_name = "r2plus1d_18"

    def __init__(self, config: R2Plus1DConfig | None = None) -> None:
        c = config or R2Plus1DConfig()
        VideoResNet.__init__(self, block=BasicBlock, conv_makers=[Conv2Plus1D] * 4, layers=[2, 2, 2, 2],
                             stem=R2Plus1dStem, num_classes=c.num_classes)
        from zoo.video.transforms import KINETICS_MEAN, KINETICS_STD

        self.video_cfg = {"size": 112, "resize": 128, "mean": list(KINETICS_MEAN), "std": list(KINETICS_STD),
                          "frames_per_clip": 16}

    @property
    def num_classes(self) -> int:
        return self.fc.out_features

    @property
    def config(self) -> R2Plus1DConfig:
        return R2Plus1DConfig(num_classes=self.fc.out_features)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, 3, T, H, W)`` -> the last stage's map ``(B, 512, T/8, H/16, W/16)``."""
        return self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """``forward_features``' map -> logits ``(B, num_classes)``, or with ``pre_logits`` the pooled ``(B, 512)``."""
        x = self.avgpool(x).flatten(1)  # (B, 512)
        return x if pre_logits else self.fc(x)


def _load_weights(model: R2Plus1D18, path: Path, entry: Any, requested: dict[str, Any] | None = None) -> nn.Module:
    """Load strictly; the classifier is the file's size unless ``num_classes`` was asked for, and a head of
    another size than that one (Kinetics' 400 vs UCF101's 101) starts fresh, with a warning."""
    from zoo import hub

    state = hub.load_state_dict(path)
    take_file_head(model, state, requested)
    model.load_report = hub.load_into(model, state, reinit=("fc.",))
    model.load_video_cfg(path, entry)
    return model


@register(
    "r2plus1d_18",
    config=R2Plus1DConfig,
    references=("https://arxiv.org/abs/1711.11248", "https://pytorch.org/vision/stable/models/video_resnet.html"),
    load_weights=_load_weights,
    infer_config=classes_in,
)
def r2plus1d_18(**config: Any) -> R2Plus1D18:
    """torchvision's ``r2plus1d_18`` (no weights) with a ``num_classes`` head."""
    return R2Plus1D18(R2Plus1DConfig(**config))
