"""Video-level evaluation: each video counts once, classified by the mean softmax of its clips.

``zoo.evaluate(video_network, data)`` is :func:`evaluate_classifier`:

- on a video folder or UCF101 root, each video is scored by the clip ``zoo.predict`` classifies it by
  (:func:`zoo.video.predict.clip_indices`, read through :class:`PredictedClips`), so ``accuracy`` is the
  share of the videos ``zoo.predict`` labels right;
- on a clip dataset with several clips per video (one with ``video_index``: ``sampling="uniform"`` takes a
  clip every ``step_between_clips`` frames, the usual UCF101 protocol; or a ``Subset`` of one, as
  ``random_split`` makes, a ``ConcatDataset`` of them, each data set's videos kept apart, or a DataLoader of any
  of these, its sampler's clips), each video by the mean softmax of its clips, and ``clip_accuracy`` scores the
  clips one by one (there a long video, with more clips, weighs more);
- on any other Dataset or DataLoader, each item is a video (:func:`zoo.engine.evaluate`).

``evaluate_videos(model, dataset)`` gives both numbers of any clip dataset; ``video_eval_fn`` plugs it into
``zoo.engine.fit(eval_fn=...)`` so that ``monitor="val_video_accuracy"`` works.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.data import (
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    Subset,
    default_collate,
    default_convert,
)

from zoo._stacklevel import user_stacklevel
from zoo.engine.data import TARGET_KEYS, inference_loader, model_dtype, move_batch, split_batch
from zoo.engine.devices import model_device, run_device, usable_device
from zoo.engine.evaluation import metric_keys, metrics_from_topk
from zoo.engine.layout import call_laid_out, layout_for
from zoo.engine.modes import eval_mode
from zoo.engine.precision import model_amp
from zoo.video import sampling as S
from zoo.video.decoding import CorruptVideoError, read_frames
from zoo.video.predict import clip_indices

__all__ = ["PredictedClips", "evaluate_classifier", "evaluate_videos", "video_eval_fn"]

_TAKES = "batch_size, num_workers, device, amp, progress, metrics"


class PredictedClips(Dataset):
    """Each video of a clip dataset (:class:`zoo.video.ucf101.VideoClipDataset`, :class:`~zoo.video.ucf101.UCF101`)
    once, as the clip ``zoo.predict`` classifies it by: :func:`zoo.video.predict.clip_indices` on the
    dataset's timeline (its ``frame_rate``), decoded and transformed as the dataset decodes its own clips.

    An item is ``(clip, label)``, or None for a video whose frames do not decode (with a warning naming it,
    as ``zoo.predict`` reports it; the dataset's ``strict=True`` raises instead).
    """

    def __init__(self, dataset: Any, *, num_segments: int | None = None, frames_per_clip: int | None = None) -> None:
        missing = [a for a in ("videos", "labels", "frame_rate", "transform") if not hasattr(dataset, a)]
        if missing:
            raise TypeError(f"PredictedClips needs a video clip dataset (videos, labels, frame_rate, transform); "
                            f"a {type(dataset).__name__} has no {', '.join(missing)}")
        clip_indices(8, num_segments=num_segments, frames_per_clip=frames_per_clip)  # checks the recipe now
        self.dataset = dataset
        self.recipe = {"num_segments": num_segments, "frames_per_clip": frames_per_clip}

    def __len__(self) -> int:
        return len(self.dataset.videos)

    def video_index(self, item: int) -> int:
        return item

    @property
    def num_videos(self) -> int:
        return len(self)

    def __getitem__(self, item: int) -> tuple[Any, int] | None:
        ds = self.dataset
        meta = ds.videos[item]
        length = S.resampled_length(meta.num_frames, meta.fps, ds.frame_rate)
        idx = S.to_source_indices(clip_indices(length, **self.recipe), meta.num_frames, meta.fps, ds.frame_rate)
        try:
            frames = read_frames(meta.path, idx.tolist(), meta, thread_type=getattr(ds, "thread_type", "AUTO"),
                                 thread_count=getattr(ds, "thread_count", None), size=getattr(ds, "size", None))
        except (CorruptVideoError, OSError) as err:
            if getattr(ds, "strict", False):
                raise
            warnings.warn(f"cannot decode {meta.path}: {err}; it is left out of the evaluation",
                          stacklevel=user_stacklevel())
            return None
        clip = frames.permute(3, 0, 1, 2)  # (C, T, H, W)
        return (ds.transform(clip) if ds.transform is not None else clip), ds.labels[item]


class _WithVideoIndex(Dataset):
    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        # never another video's clip in this one's place (VideoClipDataset.item_or_none)
        one = getattr(self.dataset, "item_or_none", None)
        item = one(i) if one is not None else self.dataset[i]
        if item is None:
            return None
        video, label = item
        return video, label, self.dataset.video_index(i)


class _ClipSubset(Dataset):
    """A ``Subset`` (``random_split``) of a clip dataset, its items keeping their videos: without ``video_index``
    it was scored item by item, each clip of a ``uniform`` dataset counted as a video of its own."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> Any:
        return self.dataset[self.indices[i]]

    def item_or_none(self, i: int) -> Any:
        one = getattr(self.dataset, "item_or_none", None)
        return one(self.indices[i]) if one is not None else self.dataset[self.indices[i]]

    def video_index(self, i: int) -> int:
        return self.dataset.video_index(self.indices[i])

    @property
    def num_videos(self) -> int:  # the keys video_index gives are the whole dataset's
        return _video_count(self.dataset)


class _EachItemAVideo(Dataset):
    """A data set without ``video_index`` beside clip datasets in a ``ConcatDataset``: each item is a video, as
    ``zoo.evaluate`` reads such a data set alone."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> Any:
        return self.dataset[i]

    def video_index(self, i: int) -> int:
        return i

    @property
    def num_videos(self) -> int:
        return len(self.dataset)


class _ClipConcat(Dataset):
    """A ``ConcatDataset`` of clip datasets, each item keeping its video: a video's key is its index in its own
    data set plus the videos of the data sets before it, so two data sets' video 0 stay two videos. Without
    ``video_index`` it was scored item by item, each clip a video of its own."""

    def __init__(self, parts: Sequence[Any]) -> None:
        self.parts = list(parts)
        self.ends = list(itertools.accumulate(len(p) for p in self.parts))
        self.first_video = [0, *itertools.accumulate(_video_count(p) for p in self.parts)][:-1]

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def _where(self, i: int) -> tuple[int, int]:
        if not 0 <= i < len(self):
            raise IndexError(f"item {i} out of range for a data set of {len(self)}")
        k = bisect.bisect_right(self.ends, i)
        return k, i - (self.ends[k - 1] if k else 0)

    def __getitem__(self, i: int) -> Any:
        k, j = self._where(i)
        return self.parts[k][j]

    def item_or_none(self, i: int) -> Any:
        k, j = self._where(i)
        one = getattr(self.parts[k], "item_or_none", None)
        return one(j) if one is not None else self.parts[k][j]

    def video_index(self, i: int) -> int:
        k, j = self._where(i)
        return self.first_video[k] + self.parts[k].video_index(j)

    @property
    def num_videos(self) -> int:
        return self.first_video[-1] + _video_count(self.parts[-1]) if self.parts else 0


def _video_count(dataset: Any) -> int:
    """How many video keys ``dataset.video_index`` gives (``0 .. n-1``): its ``num_videos``, its ``videos``, else
    one more than the largest key of its items (index arithmetic, nothing decoded)."""
    count = getattr(dataset, "num_videos", None)
    if count is None and hasattr(dataset, "videos"):
        count = len(dataset.videos)
    if count is None:
        count = 1 + max((int(dataset.video_index(i)) for i in range(len(dataset))), default=-1)
    return int(count)


def _per_video(data: Any) -> Any:
    """``data`` as a dataset with ``video_index`` where it is one, or a ``Subset`` (of a ``Subset`` ...) or a
    ``ConcatDataset`` of one, or a DataLoader of any of them (its sampler's items); else ``data`` as it is (its items
    are the videos)."""
    if isinstance(data, DataLoader):
        return _loader_per_video(data)
    if isinstance(data, ConcatDataset):
        parts = [_per_video(d) for d in data.datasets]
        if not any(hasattr(p, "video_index") for p in parts):
            return data
        return _ClipConcat([p if hasattr(p, "video_index") else _EachItemAVideo(p) for p in parts])
    if not isinstance(data, Subset):
        return data
    inner = _per_video(data.dataset)
    if not hasattr(inner, "video_index"):
        return data
    # through the inner Subsets' indices (random_split of a random_split) to the clip dataset's own
    if isinstance(inner, _ClipSubset):
        return _ClipSubset(inner.dataset, [inner.indices[int(i)] for i in data.indices])
    return _ClipSubset(inner, [int(i) for i in data.indices])


def _loader_per_video(loader: DataLoader) -> Any:
    """A DataLoader of a clip dataset as the items its sampler draws, per video (it was scored clip by clip: its
    ``accuracy`` was the clip accuracy); a loader of anything else as it is."""
    if isinstance(loader.dataset, IterableDataset):
        return loader
    inner = _per_video(loader.dataset)
    if not hasattr(inner, "video_index"):
        return loader
    drawn = [int(i) for batch in loader.batch_sampler for i in batch] if loader.batch_sampler is not None else \
        [int(i) for i in loader.sampler]
    if drawn == list(range(len(inner))):
        return inner
    return _per_video(Subset(inner, drawn)) if isinstance(inner, _ClipSubset) else _ClipSubset(inner, drawn)


def _collate(items: list[Any]) -> Any:
    """A batch of the items that decoded (None when none did)."""
    kept = [i for i in items if i is not None]
    return default_collate(kept) if kept else None


class _LoadersCollate:
    """A DataLoader's own ``collate_fn`` on the ``(clip, label)`` items of the clips it draws, each clip's video
    index kept beside the batch: the loader is read again per video, and its collate (a transform of the batch,
    a dict batch) was bypassed without a word, scoring clips it never yields. Called on the list of items when
    the loader batches them, on each item when it does not (``batch_size=None``), as DataLoader calls it."""

    def __init__(self, collate_fn: Callable[[Any], Any], batched: bool) -> None:
        self.collate_fn, self.batched = collate_fn, batched

    def __call__(self, items: list[Any]) -> Any:
        kept = [i for i in items if i is not None]
        if not kept:
            return None
        pairs = [(video, label) for video, label, _ in kept]
        if self.batched:
            video, label = self._split(self.collate_fn(pairs))
        else:
            video, label = default_collate([self._split(self.collate_fn(p)) for p in pairs])
        label = torch.as_tensor(label)
        if not isinstance(video, torch.Tensor) or video.ndim == 0 or label.ndim != 1 \
                or not len(video) == len(label) == len(kept):
            name = getattr(self.collate_fn, "__name__", type(self.collate_fn).__name__)
            raise ValueError(f"zoo.evaluate on a video network: the DataLoader's collate_fn {name!r} made "
                             f"{type(video).__name__} clips and labels of shape {tuple(label.shape)} from {len(kept)} "
                             f"clips; video evaluation reads the loader's clips by video, so its collate must give "
                             f"a (B, ...) tensor of clips and B class indices for B items (no mixing, dropping or "
                             f"adding of clips): evaluate its dataset, or a DataLoader with such a collate_fn")
        return video, label, torch.tensor([v for _, _, v in kept])

    def _split(self, batch: Any) -> tuple[Any, Any]:
        try:
            return split_batch(batch)
        except TypeError:  # its words name forward_fn=, which the video evaluation does not take
            keys = f" with keys {', '.join(map(repr, batch))}" if isinstance(batch, dict) else ""
            under = ", ".join(map(repr, TARGET_KEYS))
            raise TypeError(f"zoo.evaluate on a video network: the DataLoader's collate_fn must return (clips, labels) "
                            f"or a dict of the clips and their labels (under one of {under}), as training reads its "
                            f"batches; got a {type(batch).__name__}{keys}") from None


@dataclass
class _Scores:
    probs: torch.Tensor  # (V, K): each video's mean softmax over its clips
    labels: torch.Tensor  # (V,)
    nll: torch.Tensor  # (V,): -log of that mean probability of the video's label
    clips: int
    clip_correct: int
    clip_loss_sum: float


@torch.inference_mode()
def _score(model: nn.Module, dataset: Any, *, batch_size: int, num_workers: int, device: str | torch.device | None,
           amp: str | None, progress: bool) -> _Scores:
    """Every clip of ``dataset`` through ``model``, gathered per video (``dataset.video_index``)."""
    from zoo._progress import ProgressBar
    from zoo.inputs import whole_number

    batch_size = whole_number(batch_size, "batch_size")  # else torch's DataLoader message, without zoo's way out
    num_workers = whole_number(num_workers, "num_workers", minimum=0)
    given = dataset
    dataset = _per_video(dataset)
    if isinstance(given, DataLoader) and dataset is not given:  # its items, read in batches of its own size
        batch_size, num_workers = given.batch_size or batch_size, given.num_workers
    if not hasattr(dataset, "video_index"):
        raise TypeError(f"video-level evaluation needs a video clip dataset with video_index(); "
                        f"got {type(dataset).__name__}")
    collate: Callable[[list[Any]], Any] = _collate
    if isinstance(given, DataLoader) and dataset is not given and given.collate_fn not in (default_collate,
                                                                                          default_convert):
        # its items are read again per video (their video index beside them), through its own collate
        collate = _LoadersCollate(given.collate_fn, batched=given.batch_sampler is not None)
    loader = inference_loader(_WithVideoIndex(dataset), batch_size, num_workers=num_workers, collate_fn=collate)
    device = run_device(model) if device is None else usable_device(device)
    if device != model_device(model):
        model.to(device)
    # "auto": bf16 where it runs faster; fp16 as zoo.engine.evaluate takes it, on CUDA
    amp = model_amp(amp, model, device, allow_fp16=device.type == "cuda")
    in_dtype = model_dtype(model)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp or "")
    autocast = torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    prob_sum: dict[int, torch.Tensor] = {}
    label_logps: dict[int, list[float]] = {}  # per video: log-probability of its label in each clip
    video_label: dict[int, int] = {}
    correct = total = 0
    loss_sum = 0.0
    # channels-last where it was measured faster (forward: TSN 1.1-2x, R(2+1)D 1.05-1.35x; zoo.engine.layout)
    with eval_mode(model), layout_for(model, "auto", device, amp) as last:
        for batch in ProgressBar(loader, desc="evaluating", disable=not progress, leave=False):
            if batch is None:  # no clip of this batch decoded
                continue
            video, label, vid = batch
            with autocast:
                logits, last = call_laid_out(model, move_batch(video, device, dtype=in_dtype), last, "auto")
            logp = logits.float().log_softmax(1).cpu()
            _check_labels(label, logp.shape[1])
            correct += int((logp.argmax(1) == label).sum())
            total += len(label)
            for lp, y, v in zip(logp, label.tolist(), vid.tolist()):
                prob_sum[v] = prob_sum[v] + lp.exp() if v in prob_sum else lp.exp()
                label_logps.setdefault(v, []).append(float(lp[y]))
                video_label[v] = y
                loss_sum -= float(lp[y])
    if total == 0:
        raise ValueError("video evaluation: the data set is empty (or none of its clips decoded)")
    order = sorted(video_label)
    counts = torch.tensor([len(label_logps[v]) for v in order], dtype=torch.float64)
    # -log(mean_c p_c) from the clips' log-probabilities: a clip's p underflows to 0 long before its log does
    lse = torch.stack([torch.logsumexp(torch.tensor(label_logps[v], dtype=torch.float64), 0) for v in order])
    return _Scores(probs=torch.stack([prob_sum[v] for v in order]) / counts[:, None].float(),
                   labels=torch.tensor([video_label[v] for v in order]), nll=torch.log(counts) - lse,
                   clips=total, clip_correct=correct, clip_loss_sum=loss_sum)


def _check_labels(label: torch.Tensor, k: int) -> None:
    """Refuse a label past the network's ``k`` outputs, as training does (unrefused, it would be an IndexError of the scoring)."""
    bad = label[(label < 0) | (label >= k)]
    if bad.numel():
        raise ValueError(f"label {int(bad[0])} for a model with {k} outputs (class indices 0..{k - 1}): build the "
                         f"model with as many outputs as the data set's classes (num_classes=), or score it on data "
                         f"of its own classes")


def evaluate_classifier(
    model: nn.Module,
    data: Any,
    *,
    metrics: Sequence[str] = ("accuracy",),
    batch_size: int = 8,
    num_workers: int = 0,
    device: str | torch.device | None = None,
    amp: str | None = "auto",
    progress: bool = False,
    **engine_options: Any,
) -> dict[str, float]:
    """``zoo.evaluate`` of a video network on ``data`` (see the module docs): ``loss`` and ``metrics``
    (``"accuracy"``, ``"top5"``, ...: :func:`zoo.engine.evaluate`'s names) over videos, each counted once.

    ``loss``: the mean over videos of ``-log p``, ``p`` the video's probability of its label, which is the
    mean of its clips' softmax; with one clip per video, the mean cross-entropy, as training reports it.
    ``clip_accuracy``: also reported when some video has several clips. A Dataset or DataLoader without
    ``video_index`` goes to :func:`zoo.engine.evaluate` (its items are the videos), with ``engine_options``.
    ``device``: where to run; default: where the model is (a given one moves the model there, and it stays).
    A ``Subset`` of a clip dataset (``random_split``), a ``ConcatDataset`` of clip datasets (a video's key is its
    data set's and its own index: two data sets' video 0 stay two videos) and a DataLoader of either (the clips its
    sampler draws, in batches of its ``batch_size``, on its ``num_workers``) are scored by video too.
    """
    if not hasattr(_per_video(data), "video_index"):
        from zoo.engine.evaluation import evaluate
        from zoo.engine.options import refuse_unknown_options

        refuse_unknown_options(engine_options, "zoo.evaluate on a video network (a Dataset of clips)", evaluate, skip=2)
        return evaluate(model, data, metrics=metrics, batch_size=batch_size, num_workers=num_workers, device=device,
                        amp=amp, progress=progress, **engine_options)
    if engine_options:
        raise TypeError(f"zoo.evaluate on a video network: unknown option(s) "
                        f"{', '.join(repr(k) for k in sorted(engine_options))}; it takes {_TAKES} (and on a "
                        "folder or UCF101 root, splits and fold)")
    keys = metric_keys(metrics)
    s = _score(model, data, batch_size=batch_size, num_workers=num_workers, device=device, amp=amp, progress=progress)
    num_classes = s.probs.shape[1]
    kmax = max([1] + [int(k[3:]) for k in keys if k.startswith("top")])
    top = s.probs.topk(min(kmax, num_classes), dim=1).indices
    out = {"loss": float(s.nll.mean()), **metrics_from_topk(top, s.labels, num_classes, keys)}
    if s.clips > len(s.labels):
        out["clip_accuracy"] = s.clip_correct / s.clips
    return out


def evaluate_videos(
    model: nn.Module,
    dataset,
    *,
    batch_size: int = 8,
    num_workers: int = 0,
    device: str | torch.device | None = None,
    amp: str | None = "auto",
    progress: bool = False,
) -> dict[str, float]:
    """``{"clip_accuracy", "video_accuracy", "loss", "clips", "videos"}`` of ``model`` on ``dataset``
    (``loss``: the mean cross-entropy over clips).

    ``device``: where to run; default: where the model is (a given one moves the model there, and it
    stays), as :func:`zoo.engine.evaluate`."""
    s = _score(model, dataset, batch_size=batch_size, num_workers=num_workers, device=device, amp=amp,
               progress=progress)
    return {
        "clip_accuracy": s.clip_correct / s.clips,
        "video_accuracy": float((s.probs.argmax(1) == s.labels).double().mean()),
        "loss": s.clip_loss_sum / s.clips,
        "clips": float(s.clips),
        "videos": float(len(s.labels)),
    }


def video_eval_fn(batch_size: int = 8, num_workers: int = 0, amp: str | None = "auto") -> Callable:
    """An ``eval_fn`` for :func:`zoo.engine.fit` adding ``video_accuracy`` to each epoch's validation."""

    def eval_fn(model: nn.Module, val_data) -> dict[str, float]:
        out = evaluate_videos(model, val_data, batch_size=batch_size, num_workers=num_workers, amp=amp)
        return {"video_accuracy": out["video_accuracy"]}

    return eval_fn
