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

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from zoo.engine.head import HEADLESS_HINT
from zoo.inputs import whole_number
from zoo.registry import register
from zoo.video.classifier import VideoClassifierMixin, classes_in

__all__ = ["CONSENSUS", "MODALITIES", "TSNConfig", "VideoTSN", "video_tsn"]

CONSENSUS = ("avg", "attention")
MODALITIES = ("rgb", "rgbdiff")


class AttentionPool(nn.Module):
    def __init__(self, dim: int, hidden: int = 128) -> None:
        super().__init__()
        self.score = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, D)
        weights = self.score(feats).softmax(dim=1)  # (B, T, 1)
        return (weights * feats).sum(dim=1)


@dataclass(frozen=True)
class TSNConfig:
    """The settings of a Temporal Segment Network on ResNet18 (Wang et al. 2016)."""

    num_classes: int = 101
    """Classifier outputs (UCF101: 101)."""
    consensus: Literal["avg", "attention"] = "avg"
    """How the segments' features become one: their average (the paper), or a learned attention pool."""
    modality: Literal["rgb", "rgbdiff"] = "rgb"
    """``rgb`` frames, or ``rgbdiff``: differences of consecutive sampled frames (motion direction)."""
    dropout: float = 0.5
    """Before the classifier (the paper uses 0.8 for RGB on UCF101)."""
    backbone_weights: str | None = None
    """Weights for the ResNet18 backbone (e.g. ``resnet18.imagenet1k-v1``); its classifier is dropped."""
    stem: Literal["imagenet", "cifar"] | None = None
    """The ResNet18 stem (``cifar`` for tiny frames); None: the backbone weights' own, else ``imagenet``."""


class VideoTSN(VideoClassifierMixin, nn.Module):
    """``forward(x)``: ``x`` is ``(B, C, T, H, W)``; returns logits ``(B, num_classes)``."""

    registry_name = "video-tsn"

    def __init__(
        self,
        backbone: nn.Module,
        feature_dim: int,
        num_classes: int,
        consensus: str = "avg",
        modality: str = "rgb",
        dropout: float = 0.5,
        config: TSNConfig | None = None,
    ) -> None:
        nn.Module.__init__(self)
        self._config = config or TSNConfig(num_classes=num_classes, consensus=consensus, modality=modality,
                                           dropout=dropout)
        from zoo.video.transforms import IMAGENET_MEAN, IMAGENET_STD

        self.video_cfg = {"size": 112, "resize": 128, "mean": list(IMAGENET_MEAN), "std": list(IMAGENET_STD),
                          "num_segments": 8}
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

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
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

    @property
    def num_classes(self) -> int:
        return self.fc.out_features

    @property
    def config(self) -> TSNConfig:
        from dataclasses import replace

        return replace(self._config, num_classes=self.fc.out_features)

    def zoo_state(self):
        state = super().zoo_state()
        # The file holds the whole backbone, so rebuilding from it must not fetch backbone_weights again
        # (offline that fails, and the file's tensors would overwrite them anyway). The stem those weights
        # chose is what the tensors need; their name stays in the metadata as provenance.
        source = state.config.get("backbone_weights")
        state.config.update(backbone_weights=None, stem=getattr(self.backbone, "stem", state.config.get("stem")))
        if source is not None:
            state.metadata["zoo.backbone_weights"] = str(source)
        return state

    def forward_head(self, feats: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Segment consensus over ``(B, T', D)`` -> logits ``(B, num_classes)``, or with ``pre_logits`` the
        pooled ``(B, D)`` video features (before dropout)."""
        pooled = feats.mean(dim=1) if self.pool is None else self.pool(feats)  # (B, D)
        return pooled if pre_logits else self.fc(self.dropout(pooled))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


def _load_weights(model: VideoTSN, path: Any, entry: Any) -> VideoTSN:
    from zoo import hub

    model.load_report = hub.load_into(model, hub.load_state_dict(path), reinit=("fc.",))
    model.load_video_cfg(path, entry)
    return model


@register(
    "video-tsn",
    config=TSNConfig,
    references=("https://arxiv.org/abs/1608.00859",),
    load_weights=_load_weights,
    infer_config=classes_in,
)
def video_tsn(**config: Any) -> VideoTSN:
    """A TSN on ``zoo.build("resnet18")``; ``config``: :class:`TSNConfig` fields."""
    import zoo

    cfg = TSNConfig(**config)
    whole_number(cfg.num_classes, "num_classes", hint=HEADLESS_HINT)
    backbone = zoo.build("resnet18", weights=cfg.backbone_weights, **({} if cfg.stem is None else {"stem": cfg.stem}))
    head = getattr(backbone, "fc", None)
    if not isinstance(head, nn.Linear):
        raise TypeError("video-tsn needs a resnet18 with a Linear `fc` head to strip")
    feature_dim = head.in_features
    backbone.fc = nn.Identity()  # the TSN head replaces ResNet18's classifier
    return VideoTSN(backbone, feature_dim, cfg.num_classes, consensus=cfg.consensus, modality=cfg.modality,
                    dropout=cfg.dropout, config=cfg)
