"""``video-tsn``: a Temporal Segment Network on a ResNet18 backbone.

Wang et al., "Temporal Segment Networks: Towards Good Practices for Deep Action Recognition", ECCV 2016,
https://arxiv.org/abs/1608.00859. Each of the clip's T frames (one per segment with
``sampling="segments"``) goes through the same 2D ResNet18 (``zoo.build("resnet18")``), and a
consensus over time turns the T feature vectors into one:

- ``consensus="avg"``: the paper's average (default);
- ``consensus="attention"``: a small attention pool (a 2-layer MLP scores each segment, softmax over
  time, weighted sum), as in attention-cluster / NetVLAD-style temporal pooling.

Both consensus functions are permutation-invariant: they see *which* frames occur, not in what order.
That is enough for UCF101, where appearance carries most of the class, but not for telling "moving
left" from "moving right". ``modality="rgbdiff"`` is the paper's RGB-difference input (section 3.2):
the backbone sees the difference of consecutive sampled frames, where direction of motion is visible.
"""

from __future__ import annotations

import torch
from torch import nn

from zoo.registry import register

__all__ = ["CONSENSUS", "MODALITIES", "VideoTSN", "video_tsn"]

CONSENSUS = ("avg", "attention")
MODALITIES = ("rgb", "rgbdiff")


class AttentionPool(nn.Module):
    def __init__(self, dim: int, hidden: int = 128) -> None:
        super().__init__()
        self.score = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, D)
        weights = self.score(feats).softmax(dim=1)  # (B, T, 1)
        return (weights * feats).sum(dim=1)


class VideoTSN(nn.Module):
    """``forward(x)``: ``x`` is ``(B, C, T, H, W)``; returns logits ``(B, num_classes)``."""

    def __init__(
        self,
        backbone: nn.Module,
        feature_dim: int,
        num_classes: int,
        consensus: str = "avg",
        modality: str = "rgb",
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        if consensus not in CONSENSUS:
            raise ValueError(f"consensus must be one of {CONSENSUS}, got {consensus!r}")
        if modality not in MODALITIES:
            raise ValueError(f"modality must be one of {MODALITIES}, got {modality!r}")
        self.backbone = backbone
        self.consensus = consensus
        self.modality = modality
        self.pool = AttentionPool(feature_dim) if consensus == "attention" else None
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(feature_dim, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Per-segment features ``(B, T', D)`` (T' = T, or T-1 for ``rgbdiff``)."""
        if x.ndim != 5:
            raise ValueError(f"VideoTSN expects (B, C, T, H, W), got shape {tuple(x.shape)}")
        if self.modality == "rgbdiff":
            if x.shape[2] < 2:
                raise ValueError("modality='rgbdiff' needs at least 2 frames per clip")
            x = x[:, :, 1:] - x[:, :, :-1]  # (B, C, T-1, H, W)
        b, c, t, h, w = x.shape
        frames = x.transpose(1, 2).reshape(b * t, c, h, w)  # (B*T, C, H, W)
        return self.backbone(frames).reshape(b, t, -1)  # (B, T, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.features(x)
        pooled = feats.mean(dim=1) if self.pool is None else self.pool(feats)  # (B, D)
        return self.fc(self.dropout(pooled))


@register(
    "video-tsn",
    family="video",
    summary="Temporal Segment Network: ResNet18 per segment + temporal consensus (avg or attention)",
    references=("https://arxiv.org/abs/1608.00859",),
)
def video_tsn(
    num_classes: int = 101,
    consensus: str = "avg",
    modality: str = "rgb",
    dropout: float = 0.5,
    backbone_weights: str | None = None,
    stem: str | None = None,
) -> VideoTSN:
    """Build a TSN.

    Args:
        num_classes: classifier outputs (UCF101: 101).
        consensus: ``"avg"`` or ``"attention"`` over segments.
        modality: ``"rgb"`` frames, or ``"rgbdiff"`` differences of consecutive sampled frames.
        dropout: before the classifier (the paper uses 0.8 for RGB on UCF101; 0.5 here).
        backbone_weights: weights for the ResNet18 backbone (e.g. ``"resnet18.imagenet1k-v1"``); its
            classifier is dropped, so any head size loads.
        stem: the ResNet18 stem (``"imagenet"``, or ``"cifar"`` for tiny frames); None: resnet18's
            default, or the one ``backbone_weights`` were trained with.
    """
    import zoo

    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    backbone = zoo.build("resnet18", weights=backbone_weights, **({} if stem is None else {"stem": stem}))
    head = getattr(backbone, "fc", None)
    if not isinstance(head, nn.Linear):
        raise TypeError("video-tsn needs a resnet18 with a Linear `fc` head to strip")
    feature_dim = head.in_features
    backbone.fc = nn.Identity()  # the TSN head replaces ResNet18's classifier
    return VideoTSN(backbone, feature_dim, num_classes, consensus=consensus, modality=modality, dropout=dropout)
