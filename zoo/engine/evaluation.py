"""Evaluation: loss and metrics of a network on data, in eval mode under ``torch.inference_mode()``.

:func:`evaluate` is the public face; :func:`evaluate_loader` is what ``fit`` calls every epoch. Under DDP
each rank scores its shard and the results are gathered, so every sample counts once.
"""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from zoo._stacklevel import user_stacklevel
from zoo.engine import metrics as metrics_mod
from zoo.engine.data import (
    TARGET_KEYS,
    inference_loader,
    model_dtype,
    move_batch,
    prepare_loader,
    say_if_called_directly,
    split_batch,
    train_val,
)
from zoo.engine.devices import model_device, run_device, usable_device
from zoo.engine.distributed import DistInfo, all_gather_objects, live_place
from zoo.engine.forward import (
    autocast,
    call_model,
    check_amp,
    check_loss_value,
    default_loss,
    forward,
    ignored_class,
    mean_denominator,
)
from zoo.engine.layout import fall_back_channels_first, layout_for
from zoo.engine.modes import eval_mode
from zoo.engine.options import DEFAULT_METRICS

__all__ = ["ClassPredictions", "call_eval_fn", "evaluate", "evaluate_loader", "metric_keys", "metrics_from_topk",
           "predict_outputs", "score_loader"]

_TOPK = re.compile(r"^top(\d+)$")
# top-1 accuracy's names: overall_accuracy is the hyperspectral one (its evaluate reports OA / AA / kappa)
ACCURACY_NAMES = frozenset({"accuracy", "overall_accuracy"})


def metric_keys(metrics: str | Iterable[str]) -> list[str]:
    """The metric names asked for, checked; one name alone (``metrics="accuracy"``, as scikit-learn's
    ``scoring=``) is that one, not its letters."""
    known = {*ACCURACY_NAMES, "average_accuracy", "balanced_accuracy", "kappa", "per_class_recall"}
    out = [metrics] if isinstance(metrics, str) else list(metrics)
    for m in out:
        if not isinstance(m, str) or (m not in known and not _TOPK.match(m)):
            raise ValueError(f"unknown metric {m!r}; expected some of {sorted(known)} or 'topK' (e.g. 'top5'); "
                             "family metrics (BLEU) go in eval_fn")
        if _TOPK.match(m) and int(_TOPK.match(m).group(1)) < 1:  # 'top0' scored 0.0
            raise ValueError(f"{m!r}: a top-K accuracy needs K >= 1 (the K best classes hold the label)")
    return out



@dataclass(frozen=True)
class ClassPredictions:
    """What a classification scoring predicted, every rank's samples gathered: ``top`` (N, k) each sample's
    highest-scoring classes, best first (``top[:, 0]`` its prediction), ``targets`` (N,), and ``num_classes``
    (the width of the outputs). ``fit`` keeps the latest validation's as ``TrainState.val_predictions``."""

    top: torch.Tensor
    targets: torch.Tensor
    num_classes: int


def evaluate_loader(
    model: nn.Module, loader: Iterable[Any], *, device: torch.device, forward_fn: Callable | None,
    loss_fn: Callable, metrics: list[str], amp: str | None, channels_last: bool, progress: bool,
    desc: str = "eval",
) -> dict[str, float]:
    """The loss and ``metrics`` of ``model`` over ``loader`` (see :func:`score_loader`)."""
    return score_loader(model, loader, device=device, forward_fn=forward_fn, loss_fn=loss_fn, metrics=metrics,
                        amp=amp, channels_last=channels_last, progress=progress, desc=desc)[0]


@torch.inference_mode()
def score_loader(
    model: nn.Module, loader: Iterable[Any], *, device: torch.device, forward_fn: Callable | None,
    loss_fn: Callable, metrics: list[str], amp: str | None, channels_last: bool, progress: bool,
    desc: str = "eval",
) -> tuple[dict[str, float], ClassPredictions | None]:
    """``(loss and metrics, the predictions they came from)``: the predictions only when ``metrics`` asks for
    classification metrics (else None)."""
    from zoo._progress import ProgressBar

    kmax = max([1] + [int(m.group(1)) for k in metrics if (m := _TOPK.match(k))])
    ignored = ignored_class(loss_fn)  # the loss's ignore_index: its targets are left out of the metrics too
    loss_sum = torch.zeros((), dtype=torch.float64)
    weight_sum = 0.0  # what the batches' means divided by: the set's loss is their mean over it
    count = 0
    preds: list[torch.Tensor] = []
    targs: list[torch.Tensor] = []
    num_classes = 0
    dtype = model_dtype(model)  # float inputs are cast to it: float64 from NumPy feeds a float32 net
    with eval_mode(model):
        for batch in ProgressBar(loader, desc=desc, disable=not progress, leave=False, dynamic_ncols=True):
            batch = move_batch(batch, device, channels_last, dtype)
            with autocast(amp, device):
                outputs, targets = forward(model, batch, forward_fn)
                loss = check_loss_value(loss_fn(outputs, targets))
            n = metrics_mod.num_scored(targets)
            weight = float(mean_denominator(loss_fn, targets))
            if weight:  # a batch whose targets are all ignore_index has a NaN mean loss, and NaN * 0 is NaN
                loss_sum += loss.detach().double().cpu() * weight
                weight_sum += weight
            count += n
            if metrics:
                scores, y = _scores_targets(outputs, targets, ignored)
                num_classes = max(num_classes, scores.shape[1])
                preds.append(scores.topk(min(kmax, scores.shape[1]), dim=1).indices.cpu())
                targs.append(y.cpu())
    gathered = all_gather_objects((float(loss_sum), weight_sum, count, preds, targs, num_classes))
    loss_total = sum(g[0] for g in gathered)
    weight_sum = sum(g[1] for g in gathered)
    count = sum(g[2] for g in gathered)
    out: dict[str, float] = {"loss": loss_total / weight_sum if weight_sum else float("nan")}
    if not metrics:
        return out, None
    p = torch.cat([t for g in gathered for t in g[3]]) if count else torch.zeros((0, 1), dtype=torch.long)
    y = torch.cat([t for g in gathered for t in g[4]]) if count else torch.zeros((0,), dtype=torch.long)
    num_classes = max(g[5] for g in gathered)
    out.update(metrics_from_topk(p, y, num_classes, metrics))
    return out, ClassPredictions(p, y, num_classes)


def _scores_targets(outputs: Any, targets: Any,
                    ignored: int = metrics_mod.IGNORE_INDEX) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs ``(N, C)`` / ``(N, C, *)`` and integer targets -> scores ``(M, C)``, targets ``(M,)``, without the
    targets equal to ``ignored`` (the loss's ``ignore_index``: :func:`zoo.engine.forward.ignored_class`)."""
    if isinstance(outputs, torch.Tensor) and isinstance(targets, torch.Tensor) and targets.shape == outputs.shape \
            and (targets.is_floating_point() or outputs.dim() == 2) and outputs.dim() >= 2 and outputs.shape[1] > 1:
        check_not_multi_hot(targets)
        # soft labels (mixup, distillation): the class they weigh most; one-hot integer labels: their class
        targets = targets.argmax(1)
    if not isinstance(outputs, torch.Tensor) or not isinstance(targets, torch.Tensor) \
            or targets.is_floating_point():
        raise TypeError("classification metrics need tensor outputs and integer class targets; for other tasks "
                        "pass metrics=() (and eval_fn for your own metrics)")
    if outputs.dim() == 2 and targets.shape == (len(outputs), 1):
        targets = targets.squeeze(1)  # (N, 1) labels, as the default loss takes them
    if outputs.dim() != targets.dim() + 1:
        raise ValueError(f"outputs of shape {tuple(outputs.shape)} do not match targets {tuple(targets.shape)}: "
                         "expected (N, C) scores for (N,) targets, or (N, C, ...) for (N, ...)")
    check_class_scores(outputs)
    scores = outputs.movedim(1, -1).reshape(-1, outputs.shape[1]) if outputs.dim() > 2 else outputs
    y = targets.reshape(-1)
    keep = y != ignored
    return scores[keep].float(), y[keep].long()


def check_class_scores(outputs: torch.Tensor) -> None:
    """Refuse one output per sample for accuracy, top-k and kappa: the argmax of one column is always class 0, so
    a binary model with one logit would score the share of class 0 (0.72 for a model right 0.995 of the time)."""
    if outputs.dim() >= 2 and outputs.shape[1] == 1:
        raise ValueError(f"accuracy, top-k and kappa rank class scores, and the model gives 1 output per sample "
                         f"(outputs {tuple(outputs.shape)}): for a binary classifier with one logit, score it with "
                         f"eval_fn=lambda model, data: {{'binary_accuracy': ...}} ((logit > 0) == y), or give it 2 "
                         f"outputs and the default loss; metrics=() turns them off")


def check_not_multi_hot(targets: torch.Tensor) -> None:
    """Refuse 0/1 targets with several 1s in a row (multi-label) for accuracy: their argmax is the first label
    only (0.53 for predictions 0.92 right element-wise). Soft labels, whose rows sum to 1, stay taken."""
    binary = bool(((targets == 0) | (targets == 1)).all())
    if binary and bool((targets.sum(1) != 1).any()):
        raise ValueError("accuracy, top-k and kappa take one class per sample, and these targets are multi-hot "
                         "(rows of 0/1 with other than one 1: multi-label): score them with eval_fn (element-wise "
                         "or exact-match accuracy of (outputs > 0) against the targets); metrics=() turns them off")


def metrics_from_topk(top: torch.Tensor, y: torch.Tensor, num_classes: int, metrics: list[str]) -> dict[str, float]:
    """``metrics`` (see :func:`metric_keys`) of predictions given as each sample's top classes, best first
    (``top``: (N, k) class indices, k at least the largest topK asked for) against targets ``y`` (N,): what
    :func:`evaluate_loader` and a family that ranks classes its own way (video's per-video scores) share."""
    out: dict[str, float] = {}
    cm = None
    for name in metrics:
        m = _TOPK.match(name)
        if name in ACCURACY_NAMES:
            out[name] = float((top[:, 0] == y).double().mean()) if len(y) else float("nan")
        elif m:
            k = int(m.group(1))
            if k > num_classes:  # said once per calling line by Python's warning registry, not every epoch
                warnings.warn(f"{name} of a model with {num_classes} outputs is 1.0 whatever it predicts (its "
                              f"{num_classes} classes are all among the {k} best)", stacklevel=user_stacklevel())
            out[name] = float((top[:, :k] == y[:, None]).any(1).double().mean()) if len(y) else float("nan")
        else:
            if cm is None:
                cm = metrics_mod.confusion_matrix(top[:, 0], y, num_classes=num_classes)
            if name in ("average_accuracy", "balanced_accuracy"):
                out[name] = metrics_mod.average_accuracy(cm)
            elif name == "kappa":
                out[name] = metrics_mod.cohen_kappa(cm)
            elif name == "per_class_recall":
                out.update({f"recall_{i}": float(r) for i, r in enumerate(metrics_mod.per_class_recall(cm))})
    return out


def evaluate(
    model: nn.Module,
    data: Any,
    *,
    batch_size: int | None = None,
    forward_fn: Callable[[nn.Module, Any], tuple[Any, Any]] | None = None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    label_smoothing: float = 0.0,
    metrics: Sequence[str] = DEFAULT_METRICS,
    amp: str | None = "auto",
    device: str | torch.device | None = None,
    channels_last: bool | str = "auto",
    num_workers: int | None = None,
    collate_fn: Any = None,
    eval_fn: Callable[[nn.Module, Any], dict[str, float]] | None = None,
    progress: bool = False,
) -> dict[str, float]:
    """Loss and metrics of ``model`` on ``data``, in eval mode under ``torch.inference_mode()``.

    ``metrics``: ``"accuracy"``, ``"topK"`` (``"top5"``), ``"average_accuracy"`` (= balanced accuracy),
    ``"kappa"``, ``"per_class_recall"`` (-> ``recall_0``, ``recall_1``, ...); default accuracy, none with a
    ``loss_fn`` of your own (as ``fit``). ``eval_fn(model, data)``
    adds family metrics. Under DDP each rank scores its shard and the results are gathered; under torchrun
    without a live process group (no ``init_process_group``, so nothing to gather with) each process scores all.
    ``device``: where to run; default: where the model is (a given one moves the model there, and it stays).
    ``channels_last``: as :func:`zoo.engine.fit`'s ("auto": channels-last for a network whose convolutions are
    all 2-D or all 3-D, on a CPU of a kind where that was measured no slower in the precision it runs, 1.3-2x
    faster on the AMX Xeon in bf16, 1.2-1.4x on a Zen 3 in fp32, 1.04-1.25x on a Zen 4 in bf16; the model leaves
    in the layout it came in).
    The model's train/eval mode is restored afterwards. ``batch_size`` (default 64), ``num_workers`` (default 0)
    and ``collate_fn`` make the loader; a DataLoader given keeps its own, and one of them given with another value
    is said not to be applied.
    """
    given = {k: v for k, v in (("batch_size", batch_size), ("num_workers", num_workers), ("collate_fn", collate_fn))
             if v is not None}
    say_if_called_directly(data, given, "zoo.engine.evaluate")
    batch_size, num_workers = (64 if batch_size is None else batch_size), (num_workers or 0)
    if train_val(data) is not None:  # fit takes them together; scoring both as one set would mean nothing
        raise ValueError("evaluate scores one data set, and this holds a training and a validation set ((train, val) "
                         "or a dict with 'train'): pass the one to score, such as data['val']")
    device = run_device(model) if device is None else usable_device(device)
    amp = check_amp(amp, device, model)
    keys = metric_keys(() if loss_fn is not None and metrics is DEFAULT_METRICS else metrics)  # as fit
    loader = prepare_loader(data, batch_size=batch_size, shuffle=False, num_workers=num_workers,
                            collate_fn=collate_fn, dist=DistInfo(*live_place()), pin_memory=device.type == "cuda")
    with contextlib.suppress(TypeError, AttributeError):  # no len(): an IterableDataset, scored as it comes
        if len(loader.dataset) == 0:  # scored, it would be {'loss': nan, 'accuracy': nan}
            raise ValueError(f"evaluate: no samples to score (an empty {type(loader.dataset).__name__})")
    if device != model_device(model):
        model.to(device)
    score = functools.partial(evaluate_loader, model, loader, device=device, forward_fn=forward_fn,
                              loss_fn=loss_fn or default_loss(label_smoothing), metrics=keys, amp=amp, progress=progress)
    with layout_for(model, channels_last, device, amp) as last:
        try:
            out = score(channels_last=last)
        except RuntimeError as err:  # a forward that .view()s a channels-last activation: scored channels-first
            if not (last and fall_back_channels_first(model, err, channels_last)):
                raise
            out = score(channels_last=False)
    if eval_fn is not None:
        out.update(call_eval_fn(eval_fn, model, data))
    return out


def call_eval_fn(eval_fn: Callable, model: nn.Module, data: Any) -> dict[str, float]:
    with eval_mode(model), torch.inference_mode():
        extra = eval_fn(model, data)
    if not isinstance(extra, dict):
        raise TypeError(f"eval_fn must return a dict of metrics, got {type(extra).__name__}")
    return {str(k): float(v) for k, v in extra.items()}


PREDICT_BATCH = 64
"""Samples per forward when :func:`predict_outputs` batches a Dataset itself."""


def predict_outputs(model: nn.Module, inputs: Any) -> Any:
    """A plain network's raw outputs, in eval mode without gradients, where the model is (float inputs in its
    dtype): for a tensor or NumPy batch, one call; for a Dataset or DataLoader (Keras' ``predict(dataset)``),
    batch by batch, the inputs of ``(inputs, targets)`` samples, outputs concatenated along the batch (a list
    of the batches' outputs where they are no tensors)."""
    import numpy as np
    from torch.utils.data import DataLoader, Dataset

    device, dtype = run_device(model), model_dtype(model)
    if isinstance(inputs, np.ndarray):
        inputs = torch.as_tensor(inputs)
    if isinstance(inputs, torch.Tensor):
        with eval_mode(model), torch.inference_mode():
            return model(move_batch(inputs, device, dtype=dtype))
    if not isinstance(inputs, (Dataset, DataLoader)):
        raise TypeError(f"zoo.predict on a plain {type(model).__name__} takes a tensor batch, a NumPy array, a "
                        f"Dataset or a DataLoader, got {type(inputs).__name__}")
    loader = inference_loader(inputs, PREDICT_BATCH)
    outs = []
    with eval_mode(model), torch.inference_mode():
        for batch in loader:
            # the inputs of (inputs, targets) or of a dict with its targets, passed as fit passes them
            # (model(*inputs) for a tuple, model(**inputs) for a dict); a batch without targets is the inputs
            if isinstance(batch, (tuple, list)) and len(batch) == 1:
                batch = batch[0]  # TensorDataset(x): the inputs alone
            labelled = isinstance(batch, (tuple, list)) or (
                isinstance(batch, dict) and any(k in batch for k in TARGET_KEYS))
            out = call_model(model, move_batch(split_batch(batch)[0] if labelled else batch, device, dtype=dtype))
            outs.append(out.cpu() if isinstance(out, torch.Tensor) else out)
    return torch.cat(outs) if outs and all(isinstance(o, torch.Tensor) for o in outs) else outs
