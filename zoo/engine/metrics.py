"""Classification metrics: top-k accuracy, confusion matrix, per-class recall, OA / AA / Cohen's kappa.

Conventions follow scikit-learn: a confusion matrix has true classes on rows and predictions on columns,
``cm[i, j]`` counts samples of class ``i`` predicted as ``j``. Inputs may be torch tensors, NumPy arrays or
lists; predictions are class indices or logits/scores (``(N, C)``: the argmax is taken). Targets equal to
``ignore_index`` (-100, as in ``nn.CrossEntropyLoss``) are left out, which is how padded sequence positions
and unlabelled hyperspectral pixels are handled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "accuracy",
    "average_accuracy",
    "classification_report",
    "cohen_kappa",
    "confusion_matrix",
    "num_scored",
    "overall_accuracy",
    "per_class_recall",
    "plot_confusion_matrix",
    "scored_count",
    "topk_accuracy",
]

IGNORE_INDEX = -100


def scored_count(targets: Any) -> int | torch.Tensor:
    """:func:`num_scored` without a host sync: a 0-dim device tensor for class-index targets, an int otherwise."""
    if isinstance(targets, torch.Tensor) and not targets.is_floating_point():
        return (targets != IGNORE_INDEX).sum()
    return num_scored(targets)


def num_scored(targets: Any) -> int:
    """How many targets a mean-reduced loss averaged over: class indices other than :data:`IGNORE_INDEX`,
    else the samples along dim 0; one for targets of unknown structure (a dict, say), so such batches weigh
    equally. Batch losses are weighted by this wherever the engine combines them (epoch means, accumulation)."""
    if isinstance(targets, torch.Tensor):
        if not targets.is_floating_point():
            return int((targets != IGNORE_INDEX).sum())
        return int(targets.shape[0]) if targets.dim() else 1
    if isinstance(targets, (list, tuple)) and targets and not isinstance(targets[0], torch.Tensor):
        return len(targets)
    return 1


def _as_tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    return torch.as_tensor(np.asarray(x))


def _flatten(scores_or_preds: Any, targets: Any, ignore_index: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (scores (N, C) or preds (N,), targets (N,)), class dim last, ignored targets removed."""
    x, y = _as_tensor(scores_or_preds), _as_tensor(targets)
    if y.is_floating_point():
        raise TypeError(f"targets must be class indices (an integer tensor), got dtype {y.dtype}")
    if x.dim() == y.dim() + 1 and x.shape[:1] + x.shape[2:] == y.shape:  # scores (B, C, *extra); C last
        if x.dim() > 2:
            x = x.movedim(1, -1)
        x = x.reshape(-1, x.shape[-1])
    elif x.shape == y.shape:
        x = x.reshape(-1)
        # .long() would truncate scores silently (0.9 -> class 0): predictions must already be class indices
        if x.is_floating_point() and not bool((x == x.round()).all()):
            raise ValueError(f"predictions of shape {tuple(x.shape)} have non-integer values (e.g. "
                             f"{float(x[x != x.round()][0]):.4g}): expected class indices, or (N, C) scores "
                             "for (N,) targets (for one binary probability per sample, pass (p > 0.5).long())")
    else:
        raise ValueError(f"scores/predictions of shape {tuple(x.shape)} do not match targets of shape "
                         f"{tuple(y.shape)}: expected (N,) predictions or (N, C) scores for (N,) targets")
    y = y.reshape(-1).long()
    if ignore_index is not None:
        keep = y != ignore_index
        if not bool(keep.all()):
            x, y = x[keep], y[keep]
    return x, y


def _preds(x: torch.Tensor) -> torch.Tensor:
    return x.argmax(-1) if x.dim() == 2 else x.long()


def accuracy(scores_or_preds: Any, targets: Any, *, ignore_index: int | None = IGNORE_INDEX) -> float:
    """Fraction of correct predictions (NaN when there is nothing to score)."""
    x, y = _flatten(scores_or_preds, targets, ignore_index)
    if y.numel() == 0:
        return float("nan")
    return float((_preds(x) == y).double().mean())


def topk_accuracy(scores: Any, targets: Any, k: int = 5, *, ignore_index: int | None = IGNORE_INDEX) -> float:
    """Fraction of samples whose true class is among the ``k`` highest scores (ties: torch.topk order)."""
    x, y = _flatten(scores, targets, ignore_index)
    if x.dim() != 2:
        raise ValueError("topk_accuracy needs scores of shape (N, C), not class predictions")
    if not 1 <= k <= x.shape[1]:
        raise ValueError(f"k must be in [1, {x.shape[1]}] for {x.shape[1]} classes, got {k}")
    if y.numel() == 0:
        return float("nan")
    top = x.topk(k, dim=1).indices  # (N, k)
    return float((top == y[:, None]).any(dim=1).double().mean())


def confusion_matrix(scores_or_preds: Any, targets: Any, num_classes: int | None = None, *,
                     ignore_index: int | None = IGNORE_INDEX) -> np.ndarray:
    """``(C, C)`` int64 counts, rows = true class, columns = predicted class."""
    x, y = _flatten(scores_or_preds, targets, ignore_index)
    p = _preds(x)
    if num_classes is None:
        if x.dim() == 2:
            num_classes = x.shape[1]
        else:
            num_classes = max(int(y.max()) if y.numel() else -1, int(p.max()) if p.numel() else -1) + 1
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise ValueError(f"targets must lie in [0, {num_classes}), got range [{int(y.min())}, {int(y.max())}]")
    if p.numel() and (int(p.min()) < 0 or int(p.max()) >= num_classes):
        raise ValueError(f"predictions must lie in [0, {num_classes}), got [{int(p.min())}, {int(p.max())}]")
    cm = torch.bincount(y * num_classes + p, minlength=num_classes * num_classes)
    return cm.reshape(num_classes, num_classes).numpy().astype(np.int64)


def _check_cm(cm: Any) -> np.ndarray:
    cm = np.asarray(cm)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        raise ValueError(f"expected a square confusion matrix, got shape {cm.shape}")
    return cm.astype(np.float64)


def per_class_recall(cm: Any) -> np.ndarray:
    """Recall of each class (diagonal / row sum); NaN for classes with no true samples."""
    cm = _check_cm(cm)
    support = cm.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(support > 0, np.diag(cm) / np.where(support > 0, support, 1), np.nan)


def overall_accuracy(cm: Any) -> float:
    """OA: trace / total."""
    cm = _check_cm(cm)
    total = cm.sum()
    return float(np.trace(cm) / total) if total else float("nan")


def average_accuracy(cm: Any) -> float:
    """AA: mean per-class recall over classes that occur (balanced accuracy)."""
    recall = per_class_recall(cm)
    return float(np.nanmean(recall)) if np.isfinite(recall).any() else float("nan")


def cohen_kappa(cm: Any) -> float:
    """Cohen's kappa, (p_o - p_e) / (1 - p_e), the agreement beyond chance (https://doi.org/10.1177/001316446002000104).
    NaN where it is 0/0, as scikit-learn's ``cohen_kappa_score``: nothing scored, or every target and prediction
    one class (chance agrees always, so no agreement beyond it can be measured; 1.0 there made a validation set
    of one class the best epoch of any run that predicted it)."""
    cm = _check_cm(cm)
    total = cm.sum()
    if total == 0:
        return float("nan")
    p_o = np.trace(cm) / total
    p_e = float((cm.sum(axis=0) * cm.sum(axis=1)).sum()) / total**2
    return float((p_o - p_e) / (1 - p_e)) if p_e != 1 else float("nan")


def classification_report(scores_or_preds: Any, targets: Any, num_classes: int | None = None, *,
                          ignore_index: int | None = IGNORE_INDEX) -> dict[str, Any]:
    """``{"overall_accuracy", "average_accuracy", "kappa", "per_class_recall", "confusion_matrix"}``."""
    cm = confusion_matrix(scores_or_preds, targets, num_classes, ignore_index=ignore_index)
    return {
        "overall_accuracy": overall_accuracy(cm),
        "average_accuracy": average_accuracy(cm),
        "kappa": cohen_kappa(cm),
        "per_class_recall": per_class_recall(cm),
        "confusion_matrix": cm,
    }


MAX_LABELLED_CLASSES = 60  # beyond: index ticks instead of a label per class


def plot_confusion_matrix(cm: Any, path: str | Path, *, class_names: list[str] | None = None,
                          normalize: bool = True, title: str | None = None) -> Path:
    """Write the confusion matrix as a PNG (rows normalised to recall when ``normalize``); returns the path.
    Up to :data:`MAX_LABELLED_CLASSES` classes each tick is a class name; with more, the axes show class
    indices (the order of ``class_names``)."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.engine.logs import atomic_savefig

    counts = _check_cm(cm)
    n = counts.shape[0]
    if class_names is not None and len(class_names) != n:
        raise ValueError(f"{len(class_names)} class names for a {n}x{n} confusion matrix")
    shown = counts
    if normalize:
        rows = counts.sum(axis=1, keepdims=True)
        shown = np.divide(counts, rows, out=np.zeros_like(counts), where=rows > 0)
    size = min(20.0, 3 + 0.35 * n)
    fig, ax = plt.subplots(figsize=(size, size))
    im = ax.imshow(shown, cmap="Blues", vmin=0, vmax=1 if normalize else None)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    if n <= MAX_LABELLED_CLASSES:
        ticks = np.arange(n)
        labels = class_names if class_names is not None else [str(i) for i in range(n)]
        ax.set_xticks(ticks, labels, rotation=90 if n > 10 else 0)
        ax.set_yticks(ticks, labels)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
    else:  # a label per class of 1000 is unreadable at any size and takes 36 s to draw: matplotlib's own ticks
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=10, integer=True))
        ax.set_xlabel("predicted (class index)")
        ax.set_ylabel("true (class index)")
    if n <= 20:
        for i in range(n):
            for j in range(n):
                txt = f"{shown[i, j]:.2f}" if normalize else f"{int(counts[i, j])}"
                ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                        color="white" if shown[i, j] > 0.5 * shown.max() else "black")
    ax.set_title(title or ("confusion matrix (row-normalised)" if normalize else "confusion matrix"))
    fig.tight_layout()
    out = atomic_savefig(fig, path)
    plt.close(fig)
    return out
