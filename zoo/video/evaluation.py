"""Clip-level and video-level accuracy (video: the mean of the softmax over all of a video's clips).

``evaluate_videos(model, dataset)`` works on any :class:`zoo.video.ucf101.VideoClipDataset`; with
``sampling="uniform"`` a video has many clips, so the two numbers differ (the usual UCF101 protocol
reports the video-level one). ``video_eval_fn`` plugs the same into ``zoo.engine.fit(eval_fn=...)`` so
that ``monitor="val_video_accuracy"`` works.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from zoo.engine.data import model_device, run_device
from zoo.engine.precision import model_op_kind, resolve_amp

__all__ = ["evaluate_videos", "video_eval_fn"]


class _WithVideoIndex(Dataset):
    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        video, label = self.dataset[i]
        return video, label, self.dataset.video_index(i)


@torch.inference_mode()
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
    """``{"clip_accuracy", "video_accuracy", "loss", "clips", "videos"}`` of ``model`` on ``dataset``.

    ``device``: where to run; default: where the model is (a given one moves the model there, and it
    stays), as :func:`zoo.engine.evaluate`."""
    if not hasattr(dataset, "video_index"):
        raise TypeError(f"evaluate_videos needs a video clip dataset with video_index(); got {type(dataset).__name__}")
    from tqdm.auto import tqdm

    loader = DataLoader(_WithVideoIndex(dataset), batch_size=batch_size, num_workers=num_workers)
    was_training = model.training
    device = run_device(model) if device is None else torch.device(device)
    if device != model_device(model):
        model.to(device)
    model.eval()
    amp = resolve_amp(amp, device, op=model_op_kind(model), allow_fp16=False)  # "auto": bf16 where it runs faster
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16) if amp == "bf16" else contextlib.nullcontext()
    )
    prob_sum: dict[int, torch.Tensor] = {}
    video_label: dict[int, int] = {}
    correct = total = 0
    loss_sum = 0.0
    try:
        for video, label, vid in tqdm(loader, desc="evaluating", disable=not progress, leave=False):
            video, label = video.to(device), label.to(device)
            with autocast:
                logits = model(video)
            logits = logits.float()
            loss_sum += float(nn.functional.cross_entropy(logits, label, reduction="sum"))
            correct += int((logits.argmax(1) == label).sum())
            total += len(label)
            probs = logits.softmax(1).cpu()
            for p, y, v in zip(probs, label.tolist(), vid.tolist()):
                prob_sum[v] = prob_sum[v] + p if v in prob_sum else p.clone()
                video_label[v] = y
    finally:
        model.train(was_training)
    if total == 0:
        raise ValueError("evaluate_videos: the data set is empty")
    video_correct = sum(int(prob_sum[v].argmax()) == y for v, y in video_label.items())
    return {
        "clip_accuracy": correct / total,
        "video_accuracy": video_correct / len(video_label),
        "loss": loss_sum / total,
        "clips": float(total),
        "videos": float(len(video_label)),
    }


def video_eval_fn(batch_size: int = 8, num_workers: int = 0, amp: str | None = "auto") -> Callable:
    """An ``eval_fn`` for :func:`zoo.engine.fit` adding ``video_accuracy`` to each epoch's validation."""

    def eval_fn(model: nn.Module, val_data) -> dict[str, float]:
        out = evaluate_videos(model, val_data, batch_size=batch_size, num_workers=num_workers, amp=amp)
        return {"video_accuracy": out["video_accuracy"]}

    return eval_fn
