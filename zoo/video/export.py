"""What ``zoo.export`` ships for a video model: the clip classifier, ``clips (B, C, T, H, W) -> logits``.

Clips are float frames already normalised as the model was trained (``zoo.video.transforms``). The batch
axis is dynamic for both models; TSN's time axis is dynamic too (any number of segments, at least 2, or 3
with ``modality="rgbdiff"``, whose frame differences must not collapse to one), while R(2+1)D's is fixed at
the traced ``frames`` (its temporal strides make the shapes of later layers depend on T by rounding).
The spatial size is the traced ``size``. Tolerance: ``atol = rtol = 1e-4`` on the logits.
"""

from __future__ import annotations

import torch
from torchvision.models.video import VideoResNet

from zoo.exporting import ExportSpec, Graph, register_exporter
from zoo.video.tsn import VideoTSN

__all__ = ["export_r2plus1d", "export_tsn"]


def _clips(batch: int, frames: int, size: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, 3, frames, size, size, generator=torch.Generator().manual_seed(seed))


def _spec(model: torch.nn.Module, name: str, sample: torch.Tensor, checks: list[torch.Tensor],
          time_axis: dict[int, str], min_frames: int) -> ExportSpec:
    graph = Graph("classifier", model, (sample,), ("clips",), ("logits",), {0: {0: "batch", **time_axis}},
                  checks=[(c,) for c in checks], min_sizes={"frames": min_frames})
    t = "T" if time_axis else str(sample.shape[2])
    meta = {"model": name, "clips": f"(B, 3, {t}, {sample.shape[3]}, {sample.shape[4]}) float32, normalised"}
    return ExportSpec([graph], atol=1e-4, rtol=1e-4, metadata=meta)


@register_exporter(VideoTSN)
def export_tsn(model: VideoTSN, batch: int = 2, frames: int = 8, size: int = 112) -> ExportSpec:
    """TSN with dynamic batch and segment count; checked on (1, frames + 2) and (batch + 1, frames - 1) too."""
    min_frames = 3 if model.modality == "rgbdiff" else 2
    if frames - 1 < min_frames:
        raise ValueError(f"frames must be at least {min_frames + 1} to check another segment count, got {frames}")
    checks = [_clips(1, frames + 2, size, 1), _clips(batch + 1, frames - 1, size, 2)]
    return _spec(model, "video-tsn", _clips(batch, frames, size, 0), checks, {2: "frames"}, min_frames)


@register_exporter(VideoResNet)
def export_r2plus1d(model: VideoResNet, batch: int = 2, frames: int = 16, size: int = 112) -> ExportSpec:
    """R(2+1)D with a dynamic batch; ``frames`` and ``size`` are fixed at export; checked on batch 1 too."""
    return _spec(model, "r2plus1d_18", _clips(batch, frames, size, 0), [_clips(1, frames, size, 1)], {}, 1)
