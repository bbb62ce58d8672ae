"""The UCF101 clip dataset: an index from split files and container headers, clips decoded on demand.

``UCF101(root, split_dir, fold=1, train=True, frames_per_clip=16, ...)`` keeps torchvision's argument
names where they mean the same thing (``root``, ``fold``, ``train``, ``frames_per_clip``,
``step_between_clips``, ``frame_rate``, ``transform``; ``split_dir`` is torchvision's
``annotation_path``) and differs where torchvision's design hurts:

- the index comes from the split list and each file's header (:func:`zoo.video.decoding.probe`); no
  video is decoded to build it (torchvision's ``VideoClips`` decodes every file of the root, train and
  test alike, and in 0.29 needs TorchCodec);
- items are ``(video, label)`` with ``video`` a ``(C, T, H, W)`` uint8 tensor (or whatever
  ``transform`` makes of it); audio is never read, so batches never carry ragged audio
  (https://github.com/pytorch/vision/issues/2265);
- a split entry whose file is missing is an error; a corrupt or truncated file is skipped with a
  warning and listed in ``skipped`` (``strict=True`` raises instead);
- videos shorter than a clip give one clip that loops (``short_video="loop"``) or repeats its last
  frame (``"pad"``) instead of vanishing from the data set.

Lengths: ``sampling="uniform"`` has one item per clip (every ``step_between_clips`` frames, as
torchvision); ``"random"`` and ``"segments"`` have one item per video, drawn afresh on every access (with ``seed``:
drawn from ``(seed, epoch, item)``, see :meth:`VideoClipDataset.set_epoch`).
"""

from __future__ import annotations

import math
import numbers
import operator
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from torch.utils.data import Dataset

from zoo._progress import ProgressBar
from zoo._stacklevel import user_stacklevel
from zoo.engine.heap import keep_freed_memory_in_worker
from zoo.inputs import whole_number
from zoo.video import sampling as S
from zoo.video.decoding import (
    CorruptVideoError,
    DecodeStats,
    VideoMeta,
    check_thread_type,
    probe,
    read_frames,
)
from zoo.video.sizes import size_pair
from zoo.video.splits import read_class_index, read_split

__all__ = ["UCF101", "VideoClipDataset"]

Sampling = Literal["uniform", "random", "segments"]
_MAX_RETRIES = 5
_MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    # SplitMix64's finaliser: nearby (seed, epoch, item) triples get unrelated generator seeds
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _item_seed(seed: int, epoch: int, item: int) -> int:
    return _mix64(_mix64(_mix64(seed & _MASK64) ^ (epoch & _MASK64)) ^ (item & _MASK64))


def _epoch_cell(epoch: int) -> torch.Tensor:
    """A dataset's epoch, private until its first ``set_epoch`` puts it in shared memory (:meth:`VideoClipDataset.
    set_epoch`): a shared tensor holds a file descriptor while it lives, and a thousand datasets made in a sweep
    ran out of them ("Too many open files", reported as unreadable videos)."""
    return torch.full((), epoch, dtype=torch.int64)


def _item_index(item: Any) -> int:
    """An item asked for as a Python int. ``Subset(ds, np.arange(n))`` and ``SubsetRandomSampler(array)`` ask with
    NumPy ints and ``Subset(ds, torch.randperm(n))`` with 0-d tensors: seeded sampling failed on them ("Python
    int too large to convert to C long" in the 64-bit seed mixing, "manual_seed expected a long")."""
    if isinstance(item, bool):
        raise TypeError(f"an item index must be an int, got {item!r}")
    try:
        return operator.index(item)
    except TypeError:
        raise TypeError(f"an item index must be an int, got {item!r} ({type(item).__name__})") from None


def check_frame_rate(frame_rate: Any) -> None:
    """Refuse a ``frame_rate`` that is not None or a finite number of frames per second above 0: NaN and infinity
    failed in ``math.floor`` ("cannot convert float NaN to integer"), a str in a comparison, and ``True`` was read
    as 1 fps."""
    if frame_rate is None:
        return
    if isinstance(frame_rate, bool) or not isinstance(frame_rate, numbers.Real) or not math.isfinite(frame_rate) \
            or frame_rate <= 0:
        raise ValueError(f"frame_rate must be None (each video's own rate) or a number of frames per second > 0 to "
                         f"resample every video to, got {frame_rate!r}")


def _clip_options(sampling: Any, frames_per_clip: Any, step_between_clips: Any, num_segments: Any,
                  short_video: Any, frame_rate: Any = None) -> tuple[int, int, int]:
    """``(frames_per_clip, step_between_clips, num_segments)`` checked, as Python ints (``num_segments`` 8 where
    None), and ``frame_rate``. Checked when the data set is made, not at its first read: ``frames_per_clip=2.5``
    read 3 frames (uniform) or failed deep in torch (random), ``num_segments=0`` at the first item."""
    if sampling not in S.SAMPLINGS:
        raise ValueError(f"sampling must be one of {S.SAMPLINGS}, got {sampling!r}")
    if sampling != "segments" and num_segments is not None:
        raise ValueError("num_segments only applies to sampling='segments'")
    if short_video not in ("loop", "pad"):
        raise ValueError(f"short_video must be 'loop' or 'pad', got {short_video!r}")
    check_frame_rate(frame_rate)
    frames_per_clip = whole_number(frames_per_clip, "frames_per_clip")
    step_between_clips = whole_number(step_between_clips, "step_between_clips",
                                      hint="frames between the starts of consecutive uniform clips")
    num_segments = whole_number(num_segments, "num_segments", allow_none=True, hint="one frame from each of T segments")
    return frames_per_clip, step_between_clips, 8 if num_segments is None else num_segments


class VideoClipDataset(Dataset):
    """Clips from a list of ``(path, label)`` videos; :class:`UCF101` fills the list from split files."""

    def __init__(
        self,
        videos: list[tuple[str, int]],
        classes: list[str],
        *,
        frames_per_clip: int = 16,
        step_between_clips: int = 1,
        sampling: Sampling = "uniform",
        num_segments: int | None = None,
        train: bool = True,
        frame_rate: float | None = None,
        transform: Callable[[torch.Tensor], Any] | None = None,
        short_video: S.ShortVideo = "loop",
        strict: bool = False,
        thread_type: str = "AUTO",
        thread_count: int | None = None,
        progress: bool = True,
        seed: int | None = None,
        size: tuple[int, int] | None = None,
    ) -> None:
        frames_per_clip, step_between_clips, num_segments = _clip_options(
            sampling, frames_per_clip, step_between_clips, num_segments, short_video, frame_rate)
        self.classes = list(classes)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.frames_per_clip = frames_per_clip
        self.step_between_clips = step_between_clips
        self.sampling = sampling
        self.num_segments = num_segments
        self.train = train
        self.frame_rate = frame_rate
        self.transform = transform
        self.short_video = short_video
        self.strict = strict
        self.thread_type = check_thread_type(thread_type)
        self.thread_count = whole_number(thread_count, "thread_count", minimum=0, allow_none=True,
                                         hint="decoder threads, 0: FFmpeg's choice")
        # (16.7, 20) was scaled to 16 rows and (True, 20) to one, without a word
        self.size = size_pair(size, "size", int_means=None, allow_none=True)
        # a Python int: NumPy's (a sweep's np.int64) overflowed in _item_seed's 64-bit masking
        self.seed = whole_number(seed, "seed", minimum=None, allow_none=True)
        self.stats = DecodeStats()  # this process's decoding cost (each DataLoader worker has its own)
        self.failed_reads = 0

        videos = [(path, self._checked_label(label, path)) for path, label in videos]
        self.skipped: list[tuple[str, str]] = []  # (path, reason): corrupt or truncated files
        self.videos: list[VideoMeta] = []
        self.labels: list[int] = []
        for path, label in ProgressBar(videos, desc="indexing videos", unit="video", disable=not progress, leave=False):
            try:
                self.videos.append(probe(path))
                self.labels.append(label)
            except CorruptVideoError as err:
                if strict:
                    raise
                self.skipped.append((path, str(err)))
        if self.skipped:
            warnings.warn(
                f"skipped {len(self.skipped)} unreadable video(s) of {len(videos)}, e.g. {self.skipped[0][1]} "
                "(see .skipped; strict=True raises instead)",
                stacklevel=user_stacklevel(),
            )
        if not self.videos:
            raise ValueError(f"no readable videos among the {len(videos)} listed")
        lost = sorted({self.classes[label] for _, label in videos} - {self.classes[i] for i in self.labels})
        if train and lost:  # the warning above counted them; a class nothing teaches is an error, as an empty folder
            raise ValueError(f"every video of class(es) {lost} is unreadable (see .skipped): the network would learn "
                             "nothing of them; repair or replace those files, or remove the class")
        self._lengths = [S.resampled_length(m.num_frames, m.fps, frame_rate) for m in self.videos]
        # uniform: item -> (video, clip); cumulative clip counts give the mapping without a big table
        if sampling == "uniform":
            counts = [S.num_uniform_clips(n, frames_per_clip, step_between_clips) for n in self._lengths]
            self._cum = torch.tensor(counts, dtype=torch.int64).cumsum(0)
        self._epoch = _epoch_cell(0)

    def _checked_label(self, label: Any, path: str) -> int:
        """A video's label as a Python int index into ``classes``: -1 was taken (read as the last class by the
        class checks, and "Target -1 is out of bounds" in the first batch's loss), ``True`` as 1, and one past the
        classes failed here with a bare "list index out of range". NumPy ints and 0-d tensors (``zip(paths,
        labels)`` of an array or a tensor) are taken as the int they hold."""
        try:
            index = None if isinstance(label, bool) else operator.index(label)
        except TypeError:
            index = None
        if index is None or not 0 <= index < len(self.classes):
            raise ValueError(f"{path}: label {label!r} is not a class index: expected an int from 0 to "
                             f"{len(self.classes) - 1}, one per class of classes={self.classes[:5]}"
                             f"{' ...' if len(self.classes) > 5 else ''}")
        return index

    @property
    def epoch(self) -> int:
        return int(self._epoch)

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self._epoch.fill_(whole_number(epoch, "epoch", minimum=None))

    def set_epoch(self, epoch: int) -> None:
        """With ``seed``, the epoch whose clips ``random`` / ``segments`` sampling draws (as
        ``DistributedSampler.set_epoch``; ``zoo.train`` calls it before every epoch). Call it before iterating,
        epoch 0 included: from then on the epoch is kept in shared memory, so DataLoader workers, persistent ones
        too, see each later call (a plain attribute stayed at the value the workers were made with, and
        ``persistent_workers=True`` drew epoch 0's clips every epoch)."""
        if not self._epoch.is_shared():
            self._epoch.share_memory_()  # forked workers and torch's pickler for spawned ones share it from here
        self.epoch = epoch

    def __copy__(self) -> VideoClipDataset:
        copied = type(self).__new__(type(self))
        copied.__dict__.update(self.__dict__)
        copied._epoch = _epoch_cell(self.epoch)  # its own epoch, as each copy had while it was an int
        return copied

    # -- index -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._cum[-1]) if self.sampling == "uniform" else len(self.videos)

    @property
    def num_videos(self) -> int:
        return len(self.videos)

    def video_index(self, item: int) -> int:
        """The video an item comes from (for video-level accuracy: mean over a video's clips)."""
        item = _item_index(item)
        if self.sampling != "uniform":
            return item
        return int(torch.searchsorted(self._cum, torch.tensor(item), right=True))

    def _rng(self, item: int) -> torch.Generator | None:
        # Each item's draw is a function of (seed, epoch, item) alone: the same whichever worker reads
        # it and however many there are, different every epoch, and a resumed run draws what the
        # uninterrupted run drew with no generator state to checkpoint. A fresh generator costs ~4 us
        # (as much as reseeding a kept one) and leaves nothing shared between threads.
        if self.seed is None:
            return None
        return torch.Generator().manual_seed(_item_seed(self.seed, self.epoch, item))

    def frame_indices(self, item: int) -> tuple[int, torch.Tensor]:
        """``(video_index, source frame indices)`` of an item, without decoding anything."""
        item = _item_index(item)
        if not 0 <= item < len(self):
            raise IndexError(f"item {item} out of range for a data set of {len(self)}")
        v = self.video_index(item)
        length = self._lengths[v]
        if self.sampling == "uniform":
            clip = item - (int(self._cum[v - 1]) if v > 0 else 0)
            idx = S.uniform_clip(length, self.frames_per_clip, self.step_between_clips, clip, self.short_video)
        elif self.sampling == "random":
            idx = S.random_clip(length, self.frames_per_clip, self._rng(item), self.short_video)
        else:
            idx = S.segment_indices(length, self.num_segments, random=self.train, generator=self._rng(item))
        meta = self.videos[v]
        return v, S.to_source_indices(idx, meta.num_frames, meta.fps, self.frame_rate)

    # -- reading -----------------------------------------------------------------------------------

    def read_clip(self, item: int) -> tuple[torch.Tensor, int, int]:
        """``(video (C, T, H, W) uint8, label, video_index)`` before the transform."""
        v, idx = self.frame_indices(item)
        meta = self.videos[v]
        # thread_count None: one decoder thread in DataLoader workers, FFmpeg's choice elsewhere (decoding.py)
        try:
            frames = read_frames(
                meta.path, idx.tolist(), meta, thread_type=self.thread_type, thread_count=self.thread_count,
                stats=self.stats, size=self.size,
            )  # (T, H, W, C)
        except CorruptVideoError as err:
            # a DataLoader worker's error named the file but not the item the sampler asked for
            if hasattr(err, "add_note"):  # Python >= 3.11
                err.add_note(f"reading item {item} of this {type(self).__name__} (video {v}, frames {idx.tolist()})")
            raise
        # a (C, T, H, W) view of the (T, H, W, C) frames: no copy here; Resize works on this layout
        # directly (3-channel images) and the collate copies the final clip once
        return frames.permute(3, 0, 1, 2), self.labels[v], v

    def __getitem__(self, item: int):
        # a worker frees a batch of clips at once; glibc would hand that memory back to the OS and fault
        # it in again for the next batch (zoo/engine/heap.py)
        keep_freed_memory_in_worker()
        item = _item_index(item)  # the transform's seed is drawn from it too
        tried = 0
        while True:
            try:
                video, label, _ = self.read_clip(item)
                break
            except CorruptVideoError as err:
                # Headers can look fine while the data is broken; count it and take the next item so
                # that one bad file does not end an epoch.
                self._undecodable(err)
                tried += 1
                if tried >= _MAX_RETRIES:
                    raise
                item = self._next_video_item(item)
        return self._transformed(video, item), label

    def item_or_none(self, item: int):
        """``self[item]``, or None where its video does not decode (counted and warned as there): scoring by
        video must never take the next video's clip for it, which ``self[item]`` does so that one bad file does
        not end a training epoch (its clips were filed under the bad video, with the next video's label)."""
        keep_freed_memory_in_worker()
        item = _item_index(item)
        try:
            video, label, _ = self.read_clip(item)
        except CorruptVideoError as err:
            self._undecodable(err)
            return None
        return self._transformed(video, item), label

    def _undecodable(self, err: CorruptVideoError) -> None:
        if self.strict:
            raise err
        self.failed_reads += 1
        warnings.warn(f"skipping an undecodable clip: {err}", stacklevel=user_stacklevel())

    def _transformed(self, video: torch.Tensor, item: int) -> torch.Tensor:
        if self.transform is not None and self.seed is None:
            video = self.transform(video)
        elif self.transform is not None:  # torchvision's random transforms draw from torch's global generator, the
            # main process's with num_workers=0 and each worker's otherwise: drawn from (seed, epoch, item), the
            # same crops and flips for any num_workers, as the clips are
            with torch.random.fork_rng(devices=[]):  # the CPU generator alone: torch.manual_seed costs 150 us
                torch.default_generator.manual_seed(_item_seed(self.seed, self.epoch, item) ^ 0x5EED)
                video = self.transform(video)
        return video

    def _next_video_item(self, item: int) -> int:
        """The first item of the next video: with ``uniform`` sampling ``item + 1`` is the next clip of the same
        undecodable video, and five of them ended the pass."""
        if self.sampling != "uniform":
            return (item + 1) % len(self)
        return int(self._cum[self.video_index(item)]) % len(self)


def _case_hint(root: Path, missing: list[str]) -> str:
    """Names the class folders under ``root`` that differ only in case from the split file's (``biking`` for
    ``Biking``): on a case-sensitive file system their videos are missing, which says nothing of why."""
    wanted = dict.fromkeys(m.split("/")[0] for m in missing)
    have = {f.name.lower(): f.name for f in root.iterdir() if f.is_dir()}
    pairs = [(have[w.lower()], w) for w in wanted if not (root / w).is_dir() and w.lower() in have]
    if not pairs:
        return ""
    said = ", ".join(f"{root / h} exists for {w!r}" for h, w in pairs[:3])
    return (f"; {said}, differing only in case: rename {'it' if len(pairs) == 1 else 'them'} as the split files "
            f"spell the classes")


class UCF101(VideoClipDataset):
    """UCF101 (https://www.crcv.ucf.edu/data/UCF101.php) from its ``root`` and official split files.

    Args:
        root: folder holding ``<Class>/v_<Class>_gXX_cYY.avi`` (the unpacked ``UCF-101`` folder).
        split_dir: folder with ``classInd.txt`` and the train/test lists (``ucfTrainTestlist``).
        fold: 1, 2 or 3. train: the trainlist (True) or the testlist (False) of that fold.
        frames_per_clip: T for ``uniform`` and ``random`` sampling.
        step_between_clips: frames between the starts of consecutive ``uniform`` clips.
        sampling: ``"uniform"`` | ``"random"`` | ``"segments"`` (see :mod:`zoo.video.sampling`).
        num_segments: T for ``segments`` sampling (default 8).
        frame_rate: resample every video to this rate first (None: the file's own rate).
        transform: applied to the ``(C, T, H, W)`` uint8 clip (see :mod:`zoo.video.transforms`).
        short_video: ``"loop"`` or ``"pad"`` for clips longer than their video.
        strict: raise on corrupt or truncated videos instead of skipping them with a warning.
        thread_type, thread_count: PyAV decoder threading (``"AUTO"``: frame + slice threads;
            ``thread_count`` None: FFmpeg's choice in the main process, 1 inside DataLoader workers;
            :func:`zoo.video.decoding.decoder_thread_count`). DataLoader workers also keep the heap
            memory a batch of clips frees for the next batch (glibc only; :mod:`zoo.engine.heap`).
        seed: makes ``random`` / ``segments`` sampling a function of ``(seed, epoch, item)``: the same
            clips for any ``num_workers``, new ones each epoch (:meth:`set_epoch`; ``zoo.train`` calls it,
            a hand-written loop should too, or every epoch draws epoch 0's clips), and a resumed run
            draws what the uninterrupted one did. None draws from torch's global RNG.
        size: ``(height, width)`` to scale the frames to while they are converted to RGB (one swscale
            pass, bilinear, no antialiasing); 0.78-0.96x the clips/s of converting full frames and
            resizing them with :class:`zoo.video.transforms.Resize` on the CPUs measured
            (benchmarks/ucf101_loader.py), but the clips carry fewer bytes from there on. None keeps
            the file's size.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        split_dir: str | os.PathLike,
        fold: int = 1,
        train: bool = True,
        frames_per_clip: int = 16,
        step_between_clips: int = 1,
        sampling: Sampling = "uniform",
        num_segments: int | None = None,
        frame_rate: float | None = None,
        transform: Callable[[torch.Tensor], Any] | None = None,
        short_video: S.ShortVideo = "loop",
        strict: bool = False,
        thread_type: str = "AUTO",
        thread_count: int | None = None,
        progress: bool = True,
        seed: int | None = None,
        size: tuple[int, int] | None = None,
    ) -> None:
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"UCF101 root folder not found: {root}")
        self.root = root
        self.split_dir = Path(split_dir)
        self.fold = fold
        entries = read_split(split_dir, fold, train)
        classes = read_class_index(split_dir)
        paths = [(os.path.join(root, *e.path.split("/")), e.label) for e in entries]
        missing = [(e, p) for e, (p, _) in zip(entries, paths) if not os.path.isfile(p)]
        if missing:
            listing = f"{'train' if train else 'test'}list{fold:02d}.txt"
            # the line too: the path alone left the user searching a 9,537-line list for the entry to mend
            shown = ", ".join(f"{p} (line {e.line} of {self.split_dir / listing})" for e, p in missing[:3])
            raise FileNotFoundError(
                f"{len(missing)} of the {len(paths)} videos in {listing} are missing under {root}, e.g. {shown}"
                f"{_case_hint(root, [e.path for e, _ in missing])}"
            )
        listed = {e.label for e in entries}
        unlisted = [c for i, c in enumerate(classes) if i not in listed]
        if train and unlisted:
            # the network gets an output per classInd.txt class (classes_in), and one no video teaches is never
            # predicted: training went on without a word and its test videos all scored wrong
            shown = ", ".join(unlisted[:5]) + (", ..." if len(unlisted) > 5 else "")
            warnings.warn(
                f"{len(unlisted)} of the {len(classes)} classes of {self.split_dir / 'classInd.txt'} have no video in "
                f"trainlist{fold:02d}.txt ({shown}): the network has an output for each class but never learns, and "
                f"never predicts, a class no video teaches; list the class(es)' videos in trainlist{fold:02d}.txt, or "
                "remove the class(es) from classInd.txt (renumbering the others) to train without",
                stacklevel=user_stacklevel(),
            )
        super().__init__(
            paths, classes,
            frames_per_clip=frames_per_clip, step_between_clips=step_between_clips, sampling=sampling,
            num_segments=num_segments, train=train, frame_rate=frame_rate, transform=transform,
            short_video=short_video, strict=strict, thread_type=thread_type, thread_count=thread_count,
            progress=progress, seed=seed, size=size,
        )
