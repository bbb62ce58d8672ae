"""A generated action data set in the UCF101 layout: shapes that move, encoded with PyAV's mpeg4.

Five classes: a bright shape (disc, square or triangle; random colour, size, start and speed) on a dark
noisy background either moves right, left, up, down, or grows in place. The clips are written as
``<root>/videos/<Class>/v_<Class>_gXX_cYY.avi`` with ``<root>/splits/{classInd,trainlist01,testlist01}.txt``
(CRLF, like the official files), so :class:`zoo.video.UCF101` reads them like the real thing — decoding,
seeking and split parsing included. Train and test use disjoint groups (``g01``-``g05`` test), as
UCF101 keeps a group's clips on one side.

Direction is only visible over time: a single frame of "moving left" looks like one of "moving right".
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from zoo import fs
from zoo._progress import ProgressBar
from zoo.inputs import whole_number

__all__ = ["CLASSES", "MIN_SIZE", "SyntheticConfig", "make_synthetic_actions", "render_clip", "write_video"]

CLASSES = ("MoveRight", "MoveLeft", "MoveUp", "MoveDown", "Grow")
MIN_SIZE = 16
"""The smallest frame a clip is rendered at: the shape (up to 0.16 of the frame across) must travel over half the
frame and stay inside it."""
_SHAPES = ("disc", "square", "triangle")


# each field's command-line option (zoo video-synthetic), named in its error
_OPTIONS = {"size": "--size", "num_frames": "--frames", "train_per_class": "--train-per-class",
            "test_per_class": "--test-per-class", "seed": "--seed"}
# written beside videos/ and splits/: the config the clips there were made with
_STAMP = "synthetic.json"


@dataclass(frozen=True)
class SyntheticConfig:
    size: int = 64  # frame height and width (even, for yuv420p)
    num_frames: int = 32
    fps: int = 25
    train_per_class: int = 40
    test_per_class: int = 12
    seed: int = 0

    def __post_init__(self) -> None:
        # checked before any file is written: --train-per-class 0 wrote a data set that training then failed on
        # (a class with no video), --frames 0 failed in the encoder after the folders were made
        for field in dataclasses.fields(self):
            option = _OPTIONS.get(field.name)
            value = whole_number(getattr(self, field.name), field.name, minimum=0 if field.name == "seed" else 1,
                                 hint=f"{option} on the command line" if option else "")
            object.__setattr__(self, field.name, value)  # a Python int (NumPy's is no JSON for the stamp)
        if self.size % 2 or self.size < MIN_SIZE:
            raise ValueError(f"size must be even and >= {MIN_SIZE} (--size on the command line), got {self.size}")


def _mask(shape: str, cy: float, cx: float, r: float, size: int) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    if shape == "disc":
        return (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    if shape == "square":
        return (np.abs(yy - cy) <= r) & (np.abs(xx - cx) <= r)
    # an upward triangle: inside the box and below the two slanted edges
    top = cy - r
    return (yy >= top) & (yy <= cy + r) & (np.abs(xx - cx) <= (yy - top) / 2 + 0.5)


def render_clip(label: int, rng: np.random.Generator, size: int = 64, num_frames: int = 32) -> np.ndarray:
    """One clip of class ``CLASSES[label]``: ``(T, H, W, 3)`` uint8, ``size`` pixels square (at least
    :data:`MIN_SIZE`: a smaller frame leaves the shape no room to travel)."""
    # size=16.7 failed in NumPy ("'float' object cannot be interpreted as an integer"), size=True and 0 in the
    # shape's random start ("high - low < 0"); a float label in the class lookup
    label = whole_number(label, "label", minimum=0, hint=f"a class index below {len(CLASSES)}")
    if label >= len(CLASSES):
        raise ValueError(f"label must be in [0, {len(CLASSES)}) (a class index of {CLASSES}), got {label}")
    size = whole_number(size, "size", minimum=MIN_SIZE, hint="frame height and width in pixels")
    num_frames = whole_number(num_frames, "num_frames")
    shape = _SHAPES[rng.integers(len(_SHAPES))]
    colour = rng.uniform(150, 255, size=3)
    background = rng.uniform(0, 60, size=3)
    r0 = rng.uniform(0.09, 0.16) * size
    travel = rng.uniform(0.35, 0.55) * size  # distance covered over the clip
    margin = r0 + 1
    # Start so that the whole path stays inside the frame.
    lo, hi = margin, size - margin
    cy, cx = rng.uniform(lo, hi), rng.uniform(lo, hi)
    name = CLASSES[label]
    if name == "MoveRight":
        cx = rng.uniform(lo, hi - travel)
    elif name == "MoveLeft":
        cx = rng.uniform(lo + travel, hi)
    elif name == "MoveDown":
        cy = rng.uniform(lo, hi - travel)
    elif name == "MoveUp":
        cy = rng.uniform(lo + travel, hi)
    frames = np.empty((num_frames, size, size, 3), dtype=np.uint8)
    noise = rng.normal(0, 8, size=(num_frames, size, size, 1))
    for t in range(num_frames):
        f = t / max(num_frames - 1, 1)
        y, x, r = cy, cx, r0
        if name == "MoveRight":
            x = cx + f * travel
        elif name == "MoveLeft":
            x = cx - f * travel
        elif name == "MoveDown":
            y = cy + f * travel
        elif name == "MoveUp":
            y = cy - f * travel
        else:  # Grow: from r0/2 to about 2.2 r0, clipped by the frame
            r = r0 * (0.5 + 1.7 * f)
        img = np.broadcast_to(background, (size, size, 3)).copy()
        img[_mask(shape, y, x, r, size)] = colour
        frames[t] = np.clip(img + noise[t], 0, 255).astype(np.uint8)
    return frames


def write_video(path: str | os.PathLike, frames: np.ndarray, fps: int = 25, bit_rate: int = 400_000) -> Path:
    """Encode ``(T, H, W, 3)`` uint8 frames with PyAV's mpeg4 encoder (container from the suffix).

    Written to a temp file and renamed into place, so a crash never leaves half a video. ``fps``: a whole number
    or a ``Fraction`` (``Fraction(30000, 1001)``) of frames per second.
    """
    path = Path(path)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or not all(frames.shape[:3]):
        raise ValueError(f"frames must be (T, H, W, 3) uint8 with T, H, W >= 1, got {frames.shape} {frames.dtype}")
    # fps=0 was written as a 24 fps video without a word, and 2.5 failed inside PyAV ("'float' object has no
    # attribute 'numerator'"); a rate it takes is a whole number or a Fraction
    if isinstance(fps, bool) or not isinstance(fps, numbers.Rational) or fps <= 0:
        raise ValueError(f"fps must be a whole number or a Fraction of frames per second > 0 (Fraction(30000, 1001) "
                         f"for 29.97), got {fps!r}")
    fps = int(fps) if fps.denominator == 1 else Fraction(fps.numerator, fps.denominator)
    bit_rate = whole_number(bit_rate, "bit_rate", hint="bits per second")
    with fs.atomic_path(path) as tmp, av.open(str(tmp), mode="w") as out:
        stream = out.add_stream("mpeg4", rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.bit_rate = bit_rate
        for img in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _write_lines(path: Path, lines: list[str]) -> None:
    fs.write_bytes(path, "".join(f"{ln}\r\n" for ln in lines).encode("ascii"))


def make_synthetic_actions(
    root: str | os.PathLike, config: SyntheticConfig = SyntheticConfig(), *, progress: bool = True
) -> tuple[Path, Path]:
    """Write the data set under ``root``; returns ``(video_root, split_dir)`` for :class:`UCF101`.

    ``root/synthetic.json`` records the config. Called again with the same config, existing clips are kept (the
    generator is deterministic for a given config), so a second call only fills in what is missing; with
    another config (or no record), the clips are made again, and those of the old config that the new one does
    not name are removed: a folder never mixes clips of two configs.
    """
    root = Path(root)
    videos, splits = root / "videos", root / "splits"
    splits.mkdir(parents=True, exist_ok=True)
    train, test, jobs = _clip_list(config)
    _forget_other_config(root, videos, config, [rel for rel, _, _ in jobs])
    for rel, label, seed in ProgressBar(jobs, desc="generating clips", unit="clip", disable=not progress, leave=False):
        dest = videos / rel
        if dest.is_file():
            continue
        frames = render_clip(label, np.random.default_rng(seed), config.size, config.num_frames)
        write_video(dest, frames, config.fps)
    _write_lines(splits / "classInd.txt", [f"{i + 1} {c}" for i, c in enumerate(CLASSES)])
    _write_lines(splits / "trainlist01.txt", train)
    _write_lines(splits / "testlist01.txt", test)
    return videos, splits


def _clip_list(config: SyntheticConfig) -> tuple[list[str], list[str], list[tuple[str, int, int]]]:
    """``(trainlist lines, testlist lines, [(clip path under videos/, label, seed)])`` of ``config``."""
    rng = np.random.default_rng(config.seed)
    train, test = [], []
    jobs = []
    for label, name in enumerate(CLASSES):
        total = config.train_per_class + config.test_per_class
        for k in range(total):
            is_test = k < config.test_per_class
            # 5 test groups and the rest for training, 4 clips a group at most like UCF101's c01-c07
            group = (k % 5) + 1 if is_test else 6 + (k - config.test_per_class) // 4
            clip = (k // 5) + 1 if is_test else (k - config.test_per_class) % 4 + 1
            rel = f"{name}/v_{name}_g{group:02d}_c{clip:02d}.avi"
            (test if is_test else train).append(rel if is_test else f"{rel} {label + 1}")
            jobs.append((rel, label, int(rng.integers(2**31))))
    return train, test, jobs


def _read_stamp(path: Path) -> dict[str, Any] | None:
    try:
        stamp = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or not ours
        return None
    return stamp if isinstance(stamp, dict) else None


def _forget_other_config(root: Path, videos: Path, config: SyntheticConfig, clips: list[str]) -> None:
    """Remove the clips a run with another config left in ``videos`` (the stamp's, and those ``clips`` names), then
    record ``config``: a second run kept every clip whose name it found, made at the first run's size, length and
    seed. The stamp is written after the removal and before any clip: a run cut short leaves only clips of the
    config it records, which the next run with that config keeps."""
    stamp = root / _STAMP
    wanted = dataclasses.asdict(config)
    old = _read_stamp(stamp)
    if old == wanted:
        return
    stale = set(clips)
    try:
        before = SyntheticConfig(**old) if old is not None else None
    except (TypeError, ValueError):  # a stamp of another version: the clips this config names are all we know
        before = None
    if before is not None:
        stale |= {rel for rel, _, _ in _clip_list(before)[2]}
    for rel in sorted(stale):
        (videos / rel).unlink(missing_ok=True)
    fs.write_text(stamp, json.dumps(wanted, indent=1) + "\n")
