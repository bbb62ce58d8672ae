"""Which frames of a video make a clip: pure index arithmetic, no I/O.

Three strategies (all return display indices into the *source* video):

- ``uniform``: every clip of ``frames_per_clip`` consecutive frames starting every ``step`` frames
  (torchvision's ``VideoClips``); used for evaluation and video-level accuracy (mean over clips).
- ``random``: one clip of ``frames_per_clip`` consecutive frames at a random start (training).
- ``segments``: TSN's sparse sampling (Wang et al. 2016, https://arxiv.org/abs/1608.00859): the video
  is cut into ``num_segments`` equal segments and one frame is taken from each, at a random offset
  when training and at the segment's centre when testing.

``frame_rate`` resamples first: the clip is defined on a timeline at that rate and mapped back to
source frames (torchvision's ``_resample_video_idx``: ``floor(i * src_fps / frame_rate)``).

Clip longer than the video: ``short_video="loop"`` wraps around to the start (the clip replays the
video); ``"pad"`` repeats the last frame. Either way a short video still yields one clip, where
torchvision drops it.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

__all__ = [
    "SAMPLINGS",
    "num_uniform_clips",
    "random_clip",
    "resampled_length",
    "segment_indices",
    "to_source_indices",
    "uniform_clip",
]

SAMPLINGS = ("uniform", "random", "segments")
ShortVideo = Literal["loop", "pad"]


def resampled_length(num_frames: int, fps: float, frame_rate: float | None) -> int:
    """Frames of the video on the ``frame_rate`` timeline (the source count without resampling)."""
    if frame_rate is None:
        return num_frames
    if frame_rate <= 0:
        raise ValueError(f"frame_rate must be positive, got {frame_rate}")
    return max(1, math.floor(num_frames * frame_rate / fps))


def to_source_indices(
    idx: torch.Tensor, num_frames: int, fps: float, frame_rate: float | None
) -> torch.Tensor:
    """Map indices on the resampled timeline to source frame indices."""
    if frame_rate is None:
        return idx.clamp_(0, num_frames - 1)
    src = torch.floor(idx.to(torch.float64) * (fps / frame_rate)).to(torch.int64)
    return src.clamp_(0, num_frames - 1)


def _fit(idx: torch.Tensor, length: int, short_video: ShortVideo) -> torch.Tensor:
    if short_video == "loop":
        return idx % length
    if short_video == "pad":
        return idx.clamp(max=length - 1)
    raise ValueError(f"short_video must be 'loop' or 'pad', got {short_video!r}")


def num_uniform_clips(length: int, frames_per_clip: int, step: int) -> int:
    """Clips ``uniform`` takes from a video of ``length`` frames (at least one, see ``short_video``)."""
    if frames_per_clip < 1 or step < 1:
        raise ValueError(f"frames_per_clip and step must be >= 1, got {frames_per_clip}, {step}")
    if length < frames_per_clip:
        return 1
    return (length - frames_per_clip) // step + 1


def uniform_clip(
    length: int, frames_per_clip: int, step: int, clip: int, short_video: ShortVideo = "loop"
) -> torch.Tensor:
    """The ``clip``-th uniform clip: frames ``clip*step .. clip*step + frames_per_clip - 1``."""
    n = num_uniform_clips(length, frames_per_clip, step)
    if not 0 <= clip < n:
        raise IndexError(f"clip {clip} out of range for a video with {n} clips")
    return _fit(torch.arange(frames_per_clip) + clip * step, length, short_video)


def random_clip(
    length: int, frames_per_clip: int, generator: torch.Generator | None = None, short_video: ShortVideo = "loop"
) -> torch.Tensor:
    """``frames_per_clip`` consecutive frames at a uniformly random start."""
    high = max(length - frames_per_clip, 0) + 1
    start = int(torch.randint(high, (1,), generator=generator))
    return _fit(torch.arange(frames_per_clip) + start, length, short_video)


def segment_indices(
    length: int, num_segments: int, *, random: bool, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One frame from each of ``num_segments`` equal segments (TSN). Shorter videos repeat frames."""
    if num_segments < 1:
        raise ValueError(f"num_segments must be >= 1, got {num_segments}")
    edges = torch.arange(num_segments + 1, dtype=torch.float64) * (length / num_segments)
    lo, width = edges[:-1], edges[1:] - edges[:-1]
    if random:
        offset = torch.rand(num_segments, generator=generator, dtype=torch.float64) * width
    else:
        offset = width / 2
    return torch.floor(lo + offset).to(torch.int64).clamp_(0, length - 1)
