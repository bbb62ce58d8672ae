"""What the engine does to one batch, in training and in evaluation alike: precision, forward, loss."""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from zoo._stacklevel import user_stacklevel
from zoo.engine.data import split_batch
from zoo.engine.metrics import IGNORE_INDEX, scored_count
from zoo.engine.precision import model_amp, resolve_amp

__all__ = ["autocast", "call_model", "check_amp", "default_loss", "forward", "ignored_class", "mean_denominator"]


def check_amp(amp: Any, device: torch.device, model: nn.Module | None = None, *, training: bool = False) -> str | None:
    """``"bf16"``, ``"fp16"`` or None (fp32) for ``amp`` on ``device``.

    ``"auto"``: bf16 only where this device computes the model's kind of op faster in it (and, when
    ``training``, computes its gradients right: :mod:`zoo.engine.precision` measures and caches both);
    otherwise fp32.
    """
    if model is not None:
        amp = model_amp(amp, model, device, training=training)
    else:
        amp = resolve_amp(amp, device, op="matmul", training=training)
    if amp == "fp16" and device.type != "cuda":
        raise ValueError(f"amp='fp16' needs a CUDA device (a grad scaler guards fp16 gradients), got "
                         f"device={device}; use amp='bf16' on CPU")
    return amp


def autocast(amp: str | None, device: torch.device) -> contextlib.AbstractContextManager:
    if amp is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)


_REGRESSION = "loss_fn=torch.nn.functional.mse_loss and metrics=()"


def default_loss(label_smoothing: float) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Cross entropy with ``label_smoothing`` (targets equal to -100 are ignored). Class indices of any integer
    dtype are taken (NumPy labels are often int32 or uint8; ``F.cross_entropy`` takes int64 only)."""

    def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if not isinstance(outputs, torch.Tensor):  # a dict with "logits" (Hugging Face), a tuple with aux outputs
            got = f"a dict (keys {', '.join(map(repr, outputs))})" if isinstance(outputs, dict) else \
                f"a {type(outputs).__name__}"
            raise TypeError(f"the model returns {got}; the default loss takes a tensor of class scores: pass "
                            "forward_fn=fn(model, batch) -> (scores, targets), e.g. lambda m, b: (m(b[0])['logits'], "
                            "b[1]), or your own loss_fn")
        # over one output, cross-entropy is 0 whatever the weights: a regression run without loss_fn would
        # train nothing and report a loss of 0.0
        if outputs.dim() >= 2 and outputs.shape[1] == 1:
            raise ValueError(f"the default loss is cross-entropy over classes, and the model gives 1 output per "
                             f"sample (outputs {tuple(outputs.shape)}), where it is always 0: for regression pass "
                             f"{_REGRESSION}; for two classes give the model 2 outputs (or loss_fn=lambda outputs, y: "
                             "torch.nn.functional.binary_cross_entropy_with_logits(outputs.squeeze(1), y.float()))")
        if targets.is_floating_point() and targets.shape != outputs.shape:
            raise ValueError(f"float targets {tuple(targets.shape)} for outputs {tuple(outputs.shape)}: the default "
                             "loss is cross-entropy, over class indices (integer targets: y.astype(np.int64) for "
                             "labels stored as whole floats) or class probabilities (float targets shaped like the "
                             f"outputs); for regression pass {_REGRESSION}")
        if not targets.is_floating_point() and targets.shape == outputs.shape and outputs.dim() == 2:
            # one-hot integer labels (Keras' categorical ones: to_categorical, OneHotEncoder) as the class
            # probabilities they are; F.cross_entropy failed "Expected floating point type ... got Long"
            targets = targets.to(outputs.dtype)
        if not targets.is_floating_point() and targets.dtype != torch.long:
            targets = targets.long()
        if not targets.is_floating_point() and outputs.dim() == 2 and targets.shape == (len(outputs), 1):
            targets = targets.squeeze(1)  # (N, 1) labels, as Keras' sparse cross-entropy takes them
        try:
            return F.cross_entropy(outputs, targets, label_smoothing=label_smoothing)
        except IndexError as err:  # torch's "Target 4 is out of bounds." names neither the outputs nor the fix
            if "out of bounds" not in str(err) or targets.is_floating_point():
                raise
            k = outputs.shape[1]
            bad = targets[(targets < 0) & (targets != -100) | (targets >= k)]
            raise ValueError(f"label {int(bad[0]) if bad.numel() else '?'} for a model with {k} outputs (class "
                             f"indices 0..{k - 1}): build the model with as many outputs as classes "
                             "(num_classes=), or map the labels to 0..K-1 (sklearn's LabelEncoder)") from err

    return loss


def mean_denominator(loss_fn: Callable, targets: Any) -> int | torch.Tensor:
    """What ``loss_fn``'s batch mean divides by, which the engine weighs each batch's loss by wherever it combines
    batches (an accumulation window, the epoch's ``train_loss``, evaluation's ``loss``), so that they equal the
    one big batch's mean. For an ``nn.CrossEntropyLoss`` or ``nn.NLLLoss`` of ``reduction="mean"`` over class
    indices, the class weights of the targets it scores summed, as torch divides by them (its own ``weight`` and
    ``ignore_index``); for any other loss the scored targets (:func:`zoo.engine.metrics.scored_count`: class
    indices but -100, else samples), exact for a loss whose mean is over those. A 0-dim tensor on the targets'
    device where it is counted from them (no host sync)."""
    if not (_torch_class_mean(loss_fn) and isinstance(targets, torch.Tensor) and not targets.is_floating_point()):
        return scored_count(targets)
    scored = targets != loss_fn.ignore_index
    if loss_fn.weight is None:
        return scored.sum()
    weight = loss_fn.weight.to(targets.device)
    return torch.where(scored, weight[torch.where(scored, targets, 0).long()], 0.0).sum()


def ignored_class(loss_fn: Callable) -> int:
    """The target value that ``loss_fn`` leaves out and that accuracy, top-k and kappa leave out with it: the
    ``ignore_index`` of an ``nn.CrossEntropyLoss`` / ``nn.NLLLoss`` (255 for VOC's void pixels, a padding id),
    else -100 (the default loss's, as torch's). Scored against -100 alone, a void pixel counted as a wrong
    prediction (accuracy 0.18 where the labelled pixels gave 0.225) and kappa refused the label as out of range."""
    if isinstance(loss_fn, (nn.CrossEntropyLoss, nn.NLLLoss)):
        return int(loss_fn.ignore_index)
    return IGNORE_INDEX


def _torch_class_mean(loss_fn: Any) -> bool:
    """Whether ``loss_fn`` is torch's class-index mean (a subclass too, unless it computes its own forward)."""
    return isinstance(loss_fn, (nn.CrossEntropyLoss, nn.NLLLoss)) and loss_fn.reduction == "mean" and \
        type(loss_fn).forward in (nn.CrossEntropyLoss.forward, nn.NLLLoss.forward)


def check_loss_value(loss: Any) -> torch.Tensor:
    """``loss`` when it is a one-value tensor; else a TypeError naming what came (a per-sample loss of
    ``reduction="none"`` failed evaluation with "output with shape [] doesn't match the broadcast shape [40]")."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        got = f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else \
            f"{type(loss).__name__} {loss!r}"
        raise TypeError(f"loss_fn must return the loss as a one-value tensor that autograd runs backward from, got "
                        f"{got}: return the torch expression (a mean), not .item() or float(...)")
    return loss


def forward(model: nn.Module, batch: Any, forward_fn: Callable | None) -> tuple[Any, Any]:
    """``(outputs, targets)`` of a batch: ``forward_fn(model, batch)``, or ``model(inputs)`` for
    ``(inputs, targets)`` batches (``model(*inputs)`` for a tuple, ``model(**inputs)`` for a dict)."""
    if forward_fn is not None:
        out = forward_fn(model, batch)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"forward_fn must return (outputs, targets), got {type(out).__name__}")
        return out[0], out[1]
    inputs, targets = split_batch(batch)
    return call_model(model, inputs), targets


def call_model(model: nn.Module, inputs: Any) -> Any:
    """``model(**inputs)`` for a dict (without the keys its ``forward`` takes no parameter for: an ``idx`` or
    ``text`` column, as Hugging Face's Trainer drops unused columns, said once), ``model(*inputs)`` for a tuple
    or list, else ``model(inputs)``."""
    if isinstance(inputs, dict):
        taken = _forward_keys(model)
        if taken is not None and not inputs.keys() <= taken:
            dropped = sorted(inputs.keys() - taken)
            if type(model) not in _WARNED_DROPS:
                _WARNED_DROPS.add(type(model))
                warnings.warn(f"{type(model).__name__}.forward takes no {', '.join(map(repr, dropped))}: those keys "
                              f"of the batch are left out (it takes {', '.join(sorted(taken))})",
                              stacklevel=user_stacklevel())
            inputs = {k: v for k, v in inputs.items() if k in taken}
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


_FORWARD_KEYS: dict[type, frozenset[str] | None] = {}
_WARNED_DROPS: set[type] = set()


def _forward_keys(model: nn.Module) -> frozenset[str] | None:
    """The keyword names the model's ``forward`` takes (None: any, through ``**kwargs``), per class, once."""
    from zoo.wrappers import unwrap

    inner = unwrap(model)  # DDP's or torch.compile's wrapper: the forward it runs is the module's inside
    cls = type(inner)
    if cls not in _FORWARD_KEYS:
        try:
            params = inspect.signature(inner.forward).parameters.values()
        except (TypeError, ValueError):
            params = None
        _FORWARD_KEYS[cls] = None if params is None or any(p.kind is p.VAR_KEYWORD for p in params) else \
            frozenset(p.name for p in params)
    return _FORWARD_KEYS[cls]
