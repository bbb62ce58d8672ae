"""Classify one video file end to end: probe, sample, decode only those frames, transform, forward."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
from torch import nn

from zoo.video import sampling as S
from zoo.video.decoding import probe, read_frames

__all__ = ["predict_video"]


@torch.inference_mode()
def predict_video(
    model: nn.Module,
    path: str | os.PathLike,
    *,
    num_segments: int | None = 8,
    frames_per_clip: int | None = None,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Class probabilities ``(num_classes,)`` for the video at ``path``.

    ``num_segments``: TSN-style centre-of-segment frames; or ``frames_per_clip`` consecutive frames from
    the middle of the video (for 3D models like R(2+1)D). ``transform`` maps the ``(C, T, H, W)`` uint8
    clip to the model's input (e.g. ``ToFloat`` + ``Normalize``).
    """
    meta = probe(path)
    if frames_per_clip is not None:
        start = max((meta.num_frames - frames_per_clip) // 2, 0)
        idx = (torch.arange(frames_per_clip) + start) % meta.num_frames
    elif num_segments is not None:
        idx = S.segment_indices(meta.num_frames, num_segments, random=False)
    else:
        raise ValueError("predict_video: give num_segments or frames_per_clip")
    clip = read_frames(meta.path, idx.tolist(), meta).permute(3, 0, 1, 2)  # (C, T, H, W)
    if transform is not None:
        clip = transform(clip)
    was_training = model.training
    model.eval()
    try:
        logits = model(clip.unsqueeze(0))  # (1, num_classes)
    finally:
        model.train(was_training)
    return logits.float().softmax(1)[0]
