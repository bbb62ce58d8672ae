"""Transforms for ``(C, T, H, W)`` video clips (uint8 from the loader, float after ``ToFloat``).

Spatial transforms apply one draw to every frame of a clip (a crop that moved between frames would be
fake motion). Resizing goes through ``torchvision.transforms.v2.functional.resize``, which treats all
leading dimensions as a batch and accepts uint8.

``kinetics_eval(...)``/``kinetics_train(...)`` reproduce what torchvision's Kinetics-400 video weights
expect (``R2Plus1D_18_Weights.KINETICS400_V1.transforms()``: resize to 128x171 without antialiasing,
centre crop 112, scale to [0, 1], normalise with the Kinetics mean/std), to within one uint8 level of
rounding (torch's uint8 bilinear kernel against torchvision's float one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torchvision.transforms.v2.functional as TF

from zoo.inputs import whole_number
from zoo.video.sizes import size_pair

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "KINETICS_MEAN",
    "KINETICS_STD",
    "CenterCrop",
    "Compose",
    "Normalize",
    "RandomCrop",
    "RandomHorizontalFlip",
    "Resize",
    "TemporalJitter",
    "ToFloat",
    "kinetics_eval",
    "kinetics_train",
]

KINETICS_MEAN = (0.43216, 0.394666, 0.37645)
KINETICS_STD = (0.22803, 0.22145, 0.216989)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _check(video: torch.Tensor) -> None:
    if not isinstance(video, torch.Tensor) or video.ndim != 4:
        got = tuple(video.shape) if isinstance(video, torch.Tensor) else type(video).__name__
        raise ValueError(f"expected a video tensor of shape (C, T, H, W), got {got}")


def _size2(size: int | Sequence[int], name: str) -> tuple[int, int]:
    """A crop's ``(height, width)``: an int is a square. Checked (:func:`zoo.video.sizes.size_pair`): ``(16.7, 20)``
    cropped 16 rows, ``True`` one pixel and ``0`` an empty clip, without a word."""
    size = size_pair(size, name)
    return (size, size) if isinstance(size, int) else size


class Compose:
    def __init__(self, transforms: Sequence) -> None:
        self.transforms = list(transforms)

    def __call__(self, video: torch.Tensor) -> torch.Tensor:
        for t in self.transforms:
            video = t(video)
        return video

    def __repr__(self) -> str:
        inner = ", ".join(repr(t) for t in self.transforms)
        return f"Compose([{inner}])"


class ToFloat:
    """uint8 in [0, 255] -> float32 in [0, 1]."""

    def __call__(self, video: torch.Tensor) -> torch.Tensor:
        _check(video)
        if video.dtype == torch.uint8:
            return video.to(torch.float32).div_(255.0)
        return video.to(torch.float32)

    def __repr__(self) -> str:
        return "ToFloat()"


class Resize:
    """Resize every frame; an int resizes the shorter side to it (aspect kept), as torchvision does.

    ``antialias=False`` is plain bilinear interpolation, what torchvision's video weights were trained on
    (its ``VideoClassification`` transform hard-codes it); on downscaled frames it differs from the
    antialiased default by up to ~0.7 in normalised units.
    """

    def __init__(self, size: int | Sequence[int], antialias: bool = True) -> None:
        size = size_pair(size, "Resize size", int_means="the shorter side, aspect kept")
        self.size = [size] if isinstance(size, int) else list(size)
        self.antialias = antialias

    def __call__(self, video: torch.Tensor) -> torch.Tensor:
        _check(video)
        # as T images of 3 channels (T, C, H, W): torch's uint8 antialiased kernel handles 3-channel
        # images 4-8x faster than (C, T, H, W) read as C images of T channels; decoded frames are
        # (T, H, W, C) in memory, so this is also the channels-last layout it is fastest on
        frames = TF.resize(video.transpose(0, 1), self.size, antialias=self.antialias)
        return frames.transpose(0, 1)  # (C, T, H', W')

    def __repr__(self) -> str:
        return f"Resize({self.size})" if self.antialias else f"Resize({self.size}, antialias=False)"


class CenterCrop:
    def __init__(self, size: int | Sequence[int]) -> None:
        self.size = _size2(size, "CenterCrop size")

    def __call__(self, video: torch.Tensor) -> torch.Tensor:
        _check(video)
        return TF.center_crop(video, list(self.size))

    def __repr__(self) -> str:
        return f"CenterCrop({self.size})"


class RandomCrop:
    """One random crop position for the whole clip."""

    def __init__(self, size: int | Sequence[int]) -> None:
        self.size = _size2(size, "RandomCrop size")

    def __call__(self, video: torch.Tensor) -> torch.Tensor:
        _check(video)
        h, w = video.shape[-2:]
        th, tw = self.size
        if h < th or w < tw:
            raise ValueError(f"RandomCrop{self.size} is larger than the frames ({h}x{w}); resize first")
        top = int(torch.randint(h - th + 1, (1,)))
        left = int(torch.randint(w - tw + 1, (1,)))
        return video[..., top : top + th, left : left + tw]

    def __repr__(self) -> str:
        return f"RandomCrop({self.size})"


class RandomHorizontalFlip:
    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, video: torch.Tensor) -> torch.Tensor:
        _check(video)
        return video.flip(-1) if float(torch.rand(())) < self.p else video

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


class Normalize:
    """Per-channel ``(x - mean) / std`` on a float ``(C, T, H, W)`` clip."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1, 1)

    def __call__(self, video: torch.Tensor) -> torch.Tensor:
        _check(video)
        if not video.is_floating_point():
            raise ValueError(f"Normalize expects a float clip (apply ToFloat first), got {video.dtype}")
        if video.shape[0] != self.mean.shape[0]:
            raise ValueError(f"Normalize has {self.mean.shape[0]} channels, the clip has {video.shape[0]}")
        return (video - self.mean.to(video.dtype)) / self.std.to(video.dtype)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean.flatten().tolist()}, std={self.std.flatten().tolist()})"


class TemporalJitter:
    """Move each frame up to ``max_shift`` positions in time (clamped at the ends; order is kept).

    A cheap stand-in for sampling jitter when the clip is already decoded: each output frame t shows
    input frame ``clamp(t + u_t)`` with ``u_t`` uniform in ``[-max_shift, max_shift]``, sorted so
    that time never runs backwards.
    """

    def __init__(self, max_shift: int = 1) -> None:
        # a float reached torch.randint at the first clip ("received an invalid combination of arguments")
        self.max_shift = whole_number(max_shift, "TemporalJitter max_shift", minimum=0, hint="frames")

    def __call__(self, video: torch.Tensor) -> torch.Tensor:
        _check(video)
        t = video.shape[1]
        shift = torch.randint(-self.max_shift, self.max_shift + 1, (t,))
        idx = (torch.arange(t) + shift).clamp_(0, t - 1).sort().values
        return video[:, idx]

    def __repr__(self) -> str:
        return f"TemporalJitter(max_shift={self.max_shift})"


def kinetics_eval(resize: Sequence[int] = (128, 171), crop: int = 112) -> Compose:
    """The evaluation transform torchvision's Kinetics-400 video weights expect (their resize is not
    antialiased)."""
    resize, crop = _kinetics_sizes("kinetics_eval", resize, crop)
    return Compose([Resize(resize, antialias=False), CenterCrop(crop), ToFloat(),
                    Normalize(KINETICS_MEAN, KINETICS_STD)])


def kinetics_train(resize: Sequence[int] = (128, 171), crop: int = 112, flip: float = 0.5) -> Compose:
    """Training augmentation matching :func:`kinetics_eval` (random crop and horizontal flip)."""
    resize, crop = _kinetics_sizes("kinetics_train", resize, crop)
    return Compose(
        [Resize(resize, antialias=False), RandomCrop(crop), RandomHorizontalFlip(flip), ToFloat(),
         Normalize(KINETICS_MEAN, KINETICS_STD)]
    )


def _kinetics_sizes(function: str, resize: Any, crop: Any) -> tuple[int | tuple[int, int], int | tuple[int, int]]:
    """``resize`` and ``crop`` checked under the names the caller of ``function`` gave them."""
    return (size_pair(resize, f"{function} resize", int_means="the shorter side, aspect kept"),
            size_pair(crop, f"{function} crop"))
