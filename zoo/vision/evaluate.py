"""Classifier evaluation on an image dataset: accuracy, per-class recall, confusion matrix (PNG)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from zoo.engine import metrics as M
from zoo.engine.data import inference_loader, model_dtype, move_batch
from zoo.engine.devices import run_device
from zoo.engine.layout import call_laid_out, layout_for
from zoo.engine.modes import eval_mode
from zoo.engine.precision import model_amp

__all__ = ["classifier_report", "evaluate_classifier", "predict_dataset"]


@torch.no_grad()
def predict_dataset(model: nn.Module, data: Dataset | DataLoader, *, batch_size: int = 64, amp: str | None = "auto",
                    device: str | torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logits (N, K) float32, targets (N,))`` over ``data`` in order, model in eval mode, on the model's
    device (``device=`` moves the model there first)."""
    loader = inference_loader(data, batch_size)
    device = run_device(model, device)
    amp = model_amp(amp, model, device)  # "auto": bf16 only where this device runs convs faster in it
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp or "", None)
    model.to(device)
    in_dtype = model_dtype(model)
    logits, targets = [], []
    # channels-last where it was measured faster (ResNet18's forward: AMX bf16 1.3-1.9x, Zen 3 fp32 1.3-1.4x,
    # Zen 4 bf16 1.04-1.05x; zoo.engine.layout)
    with eval_mode(model), layout_for(model, "auto", device, amp) as last:
        for x, y in loader:
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                out, last = call_laid_out(model, move_batch(x, device, dtype=in_dtype), last, "auto")  # (B, K)
            logits.append(out.float().cpu())
            targets.append(torch.as_tensor(y))
    return torch.cat(logits), torch.cat(targets)


def evaluate_classifier(model: nn.Module, data: Dataset | DataLoader, *, class_names: Sequence[str] | None = None,
                        confusion_png: str | os.PathLike | None = None, batch_size: int = 64,
                        amp: str | None = "auto", device: str | torch.device | None = None) -> dict[str, Any]:
    """``{"accuracy", "per_class_recall": {class: recall}, "confusion_matrix": [[...]]}``; writes the
    row-normalised confusion matrix to ``confusion_png`` when given."""
    logits, targets = predict_dataset(model, data, batch_size=batch_size, amp=amp, device=device)
    return classifier_report(logits, targets, logits.shape[1], class_names=class_names, confusion_png=confusion_png)


def classifier_report(scores_or_preds: torch.Tensor, targets: torch.Tensor, num_classes: int, *,
                      class_names: Sequence[str] | None = None,
                      confusion_png: str | os.PathLike | None = None) -> dict[str, Any]:
    """:func:`evaluate_classifier`'s report from predictions already made: ``(N, K)`` scores or ``(N,)``
    predicted classes, and the targets (``zoo finetune`` reports on its last validation's)."""
    k = num_classes
    names = list(class_names) if class_names is not None else [str(i) for i in range(k)]
    if len(names) != k:
        raise ValueError(f"{len(names)} class names for a {k}-class model")
    shape = tuple(np.shape(scores_or_preds))
    if len(shape) == 2 and shape[1] != k:  # else argmax over one column predicts class 0 for every sample
        raise ValueError(f"scores of shape {shape} for a {k}-class model: expected (N, {k}) scores or (N,) predicted "
                         "classes (for one binary probability per sample, pass (p > 0.5).long())")
    cm = M.confusion_matrix(scores_or_preds, targets, k)
    recall = M.per_class_recall(cm)
    out = {
        "accuracy": M.accuracy(scores_or_preds, targets),
        "per_class_recall": {n: float(r) for n, r in zip(names, recall)},
        "confusion_matrix": [[int(v) for v in row] for row in cm.tolist()],
    }
    if confusion_png is not None:
        M.plot_confusion_matrix(cm, confusion_png, class_names=names)
    return out
