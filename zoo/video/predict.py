"""Classify one video file end to end: probe, sample, decode only those frames, transform, forward.

:func:`clip_indices` is the one definition of the frames a video is classified by: ``zoo.predict`` reads
them, and ``zoo.evaluate`` on a video folder scores each video by the same frames
(:class:`zoo.video.evaluation.PredictedClips`), so the two agree video by video."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from zoo.engine.data import model_dtype, move_batch
from zoo.engine.devices import inference_placement, model_device
from zoo.engine.layout import forward_channels_last
from zoo.engine.modes import eval_mode
from zoo.inputs import whole_number
from zoo.video import sampling as S
from zoo.video.decoding import probe, read_frames

__all__ = ["clip_indices", "forward_probs", "load_clip", "predict_video"]


def _clip_counts(num_segments: Any, frames_per_clip: Any) -> tuple[int | None, int | None]:
    """The clip options checked, as Python ints: at most one given, each a whole number >= 1. ``frames_per_clip=2.5``
    read 3 frames and ``True`` one, ``0`` failed in the decoder ("indices is empty") and ``-2`` in torch.arange."""
    if num_segments is not None and frames_per_clip is not None:
        raise ValueError(f"give num_segments or frames_per_clip, not both: got num_segments={num_segments!r}, "
                         f"frames_per_clip={frames_per_clip!r}")
    return (whole_number(num_segments, "num_segments", allow_none=True, hint="one frame from each of T segments"),
            whole_number(frames_per_clip, "frames_per_clip", allow_none=True, hint="T consecutive frames"))


def clip_indices(num_frames: int, *, num_segments: int | None = None, frames_per_clip: int | None = None) -> torch.Tensor:
    """The frames (indices ``< num_frames``) a video is classified by: ``frames_per_clip`` consecutive frames
    from its middle (a shorter video loops), or the centre frame of each of ``num_segments`` equal segments
    (8 when neither is given)."""
    num_segments, frames_per_clip = _clip_counts(num_segments, frames_per_clip)
    if frames_per_clip is not None:
        start = max((num_frames - frames_per_clip) // 2, 0)
        return (torch.arange(frames_per_clip) + start) % num_frames
    return S.segment_indices(num_frames, 8 if num_segments is None else num_segments, random=False)


def load_clip(
    path: str | os.PathLike,
    *,
    num_segments: int | None = None,
    frames_per_clip: int | None = None,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """The clip :func:`predict_video` classifies: ``(C, T, H, W)`` uint8, or what ``transform`` makes of it.
    A zoo video network's own recipe and eval transform, as ``zoo.predict`` reads a video for it:
    ``recipe, transform = model.predict_inputs(); load_clip(path, transform=transform, **recipe)``."""
    num_segments, frames_per_clip = _clip_counts(num_segments, frames_per_clip)  # before probing: a wrong call
    meta = probe(path)
    idx = clip_indices(meta.num_frames, num_segments=num_segments, frames_per_clip=frames_per_clip)
    clip = read_frames(meta.path, idx.tolist(), meta).permute(3, 0, 1, 2)  # (C, T, H, W)
    return transform(clip) if transform is not None else clip


@torch.inference_mode()
def predict_video(
    model: nn.Module,
    path: str | os.PathLike,
    *,
    num_segments: int | None = None,
    frames_per_clip: int | None = None,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    device: str | torch.device | None = None,
    amp: str | None = "auto",
) -> torch.Tensor:
    """Class probabilities ``(num_classes,)`` for the video at ``path``.

    ``num_segments``: TSN-style centre-of-segment frames; or ``frames_per_clip`` consecutive frames from the
    middle of the video (for 3D models like R(2+1)D). ``transform`` maps the ``(C, T, H, W)`` uint8 clip to the
    model's input (e.g. ``ToFloat`` + ``Normalize``). A zoo video network (``video-tsn``, ``r2plus1d_18``)
    records both: what is not given is its own, as ``zoo.predict`` reads the video; another model needs a
    ``transform`` (and takes 8 segment centres when neither clip option is given).
    ``device`` and ``amp``: see :func:`zoo.engine.devices.inference_placement`.
    """
    _, dtype = inference_placement(model, device, amp)
    own = getattr(model, "predict_inputs", None)  # zoo's video networks: the recipe in their video_cfg
    if own is not None and (transform is None or (num_segments is None and frames_per_clip is None)):
        recipe, eval_transform = own()
        if num_segments is None and frames_per_clip is None:
            num_segments, frames_per_clip = recipe.get("num_segments"), recipe.get("frames_per_clip")
        transform = eval_transform if transform is None else transform
    if transform is None:  # before decoding: the call is wrong, not the file
        raise ValueError(f"predict_video: {type(model).__name__} records no input recipe, and the decoded clip is "
                         f"uint8 (C, T, H, W), which the network's float weights do not take (\"expected scalar "
                         f"type Byte\"); pass transform= mapping it to the network's input, such as "
                         f"zoo.video.transforms.Compose([Resize(...), CenterCrop(...), ToFloat(), "
                         f"Normalize(IMAGENET_MEAN, IMAGENET_STD)]) with the size and statistics it was trained on")
    clip = load_clip(path, num_segments=num_segments, frames_per_clip=frames_per_clip, transform=transform)
    return forward_probs(model, clip.unsqueeze(0), dtype)[0]


@torch.inference_mode()
def forward_probs(model: nn.Module, clips: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Softmax over classes of ``clips`` ``(N, C, T, H, W)`` in eval mode, on the model's device, under autocast
    to ``dtype`` (None: fp32; float clips are cast to the model's own dtype); ``(N, K)`` float32 on CPU."""
    device = model_device(model)
    with eval_mode(model), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
        # channels-last input, the model as it is (threads may share it): zoo.engine.layout.channels_last_input
        # contiguous first: a decoded clip's (C, T, H, W) is a permuted view, channels innermost, and where the
        # input stays channels-first a convolution of those strides rounds otherwise than one of a stacked batch
        # (predict_video and zoo.predict differed in the last bit)
        x = move_batch(clips, device, dtype=model_dtype(model)).contiguous()  # (N, C, T, H, W)
        logits = forward_channels_last(model, x, dtype)  # (N, num_classes)
    return logits.float().softmax(1).cpu()
