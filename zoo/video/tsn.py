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
left" from "moving right". ``modality="rgbdiff"`` feeds the backbone differences of the clip's neighbouring
frames, ``x[:, :, t + 1] - x[:, :, t]`` (T-1 difference images for T frames), where direction of motion is
visible. With ``sampling="segments"`` (TSN's default here) those frames come from neighbouring segments, so
each difference spans about ``num_frames / num_segments`` frames of the video (~18 frames, 0.6 s, for a
141-frame UCF101 clip at 8 segments); with ``frames_per_clip`` they are consecutive frames. This is not the
paper's RGB difference (section 3.2), which stacks differences of consecutive frames inside one snippet, a
frame apart; the shipped ``video-tsn.synthetic-actions`` weights were trained on the differences above.

A TSN built on backbone weights (``backbone_weights=``) normalises frames with those weights' mean and std
(``resnet18.cifar10``: CIFAR-10's), not ImageNet's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from zoo.engine.head import HEADLESS_HINT, take_file_head
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
    """``rgb`` frames, or ``rgbdiff``: differences of neighbouring frames of the clip (with segment sampling,
    frames of neighbouring segments, not the paper's consecutive frames; see the module docs)."""
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
        self.video_cfg = {"size": 112, "resize": 128, **_backbone_stats(backbone, self._config), "num_segments": 8}
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

    def min_clip_frames(self) -> tuple[int, str]:
        if self.modality == "rgbdiff":  # forward_features' difference of neighbouring frames needs two
            return 2, "modality='rgbdiff' feeds it differences of neighbouring frames"
        return 1, ""

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


def _backbone_stats(backbone: nn.Module, config: TSNConfig) -> dict[str, list[float]]:
    """The mean and std frames are normalised with: those of the backbone weights' own ``pretrained_cfg`` when
    the backbone comes with weights (``resnet18.cifar10`` learned on CIFAR-normalised pixels: ImageNet's shifted
    every input by up to 0.2), else ImageNet's. The frame size stays the video default: the convolutions take
    any size, and the backbone's training size (CIFAR's 32 px) would throw away most of a video frame."""
    from zoo.video.transforms import IMAGENET_MEAN, IMAGENET_STD

    own = getattr(backbone, "pretrained_cfg", None) if config.backbone_weights is not None else None
    if isinstance(own, dict) and own.get("mean") is not None and own.get("std") is not None:
        return {"mean": [float(v) for v in own["mean"]], "std": [float(v) for v in own["std"]]}
    return {"mean": list(IMAGENET_MEAN), "std": list(IMAGENET_STD)}


def _load_weights(model: VideoTSN, path: Any, entry: Any, requested: dict[str, Any] | None = None) -> VideoTSN:
    """Load strictly; the classifier is the file's size unless ``num_classes`` was asked for (another size is
    re-initialised, with a warning); a ``modality`` asked for that is not the one the file records is refused."""
    from zoo import hub

    _refuse_other_modality(model, path, entry, requested or {})
    state = hub.load_state_dict(path)
    take_file_head(model, state, requested)
    model.load_report = hub.load_into(model, state, reinit=("fc.",))
    model.load_video_cfg(path, entry)
    return model


def _refuse_other_modality(model: VideoTSN, path: Any, entry: Any, requested: dict[str, Any]) -> None:
    """Refuse a ``modality`` that is not the file's own: no tensor's shape differs, so the weights loaded without
    a word and scored raw frames with a network trained on their differences (accuracy 1.0 -> 0.2)."""
    from zoo import registry

    asked = requested.get("modality")
    if asked is None:
        return
    # the manifest entry's config, else the file's own (zoo.save's metadata, a checkpoint's model.*); a plain
    # state dict records none, and is loaded as asked
    own = (dict(entry.config) if entry is not None else {}).get("modality") or \
        registry.file_config(path, model.registry_name).get("modality")
    if own is not None and asked != own:
        raise ValueError(f"{entry.name if entry is not None else path} was trained on modality={own!r} input, but "
                         f"modality={asked!r} was asked for: the same weights would score inputs they never learned "
                         "on; leave modality out to use the file's, or build without weights= to train a model of "
                         "that modality")


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
