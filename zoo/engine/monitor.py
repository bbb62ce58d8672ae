"""The monitored metric of a run: its best value so far, and early stopping when it stops improving."""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zoo._stacklevel import user_stacklevel

__all__ = ["Monitor", "default_mode"]

_LOWER_IS_BETTER = frozenset({"error", "err", "mae", "mse", "rmse", "mape", "nll", "perplexity", "ppl", "wer", "cer",
                              "distance", "crossentropy", "divergence", "hinge", "poisson"})
"""Words of a metric's name that make smaller better (``val_mae``, ``train_error_rate``): with max as the
default mode for every name without "loss", best.pt and early stopping would keep the worst epoch of an error."""


def default_mode(key: str) -> str:
    """``"min"`` for a loss or an error (a name holding "loss" or a word of :data:`_LOWER_IS_BETTER`, Keras'
    ``binary_crossentropy`` too), else ``"max"`` (accuracy, kappa, BLEU, a return, scikit-learn's ``neg_...``)."""
    words = key.lower().split("_")
    if "neg" in words:  # scikit-learn's scorers negate errors (neg_mean_squared_error): larger is better
        return "max"
    return "min" if "loss" in key or _LOWER_IS_BETTER.intersection(words) else "max"


@dataclass
class Monitor:
    """``update(row)`` after every epoch says whether ``key`` improved (by more than ``min_delta``);
    ``stopped`` turns True after ``patience`` epochs without improvement (never with ``patience=None``)."""

    key: str
    mode: str  # "min" or "max"
    patience: int | None = None
    min_delta: float = 0.0
    best: float | None = None
    best_epoch: int | None = None
    bad_epochs: int = 0
    stopped: bool = False
    warned_nonfinite: bool = False
    fallback: str | None = None  # the key monitored instead when the first row lacks ``key``

    @classmethod
    def create(cls, key: str, mode: str | None, patience: int | None, min_delta: float, *, has_val_data: bool,
               has_eval_fn: bool = False, callbacks_may_add: bool = False,
               metrics: Sequence[str] | None = None, train_metrics: Sequence[str] | None = None) -> Monitor:
        """``val_loss`` without validation data means ``train_loss`` (with an ``eval_fn`` alone, once the first
        row shows it gives no ``loss``); another ``val_`` key without either is an error unless callbacks (which
        may add keys to a row) run, and so is one validation alone cannot give (the ``metrics`` it records), or
        a ``train_`` key training cannot give (of ``train_metrics``, the run's: its loss and accuracy); the
        mode defaults to min for losses and errors (:func:`default_mode`)."""
        if key.startswith("train_") and train_metrics is not None and not callbacks_may_add:
            _refuse_what_training_cannot_give(key, train_metrics)
        if key == "val_loss" and not has_val_data and not has_eval_fn:
            key = "train_loss"
        elif key == "val_loss" and not has_val_data:  # the eval_fn may give val_loss: known at the first row
            return cls(key, mode or default_mode(key), patience, min_delta, fallback="train_loss")
        elif key.startswith("val_") and not (has_val_data or has_eval_fn) and not callbacks_may_add:
            # said before the first epoch: found missing at the first epoch's end, that epoch would be lost
            raise ValueError(f"monitor={key!r} is a validation metric, and this run has no validation data: pass "
                             f"val_data= (or eval_fn=), or monitor a training metric ({'train_' + key[4:]!r})")
        elif key.startswith("val_") and metrics is not None and not (has_eval_fn or callbacks_may_add):
            _refuse_what_validation_cannot_give(key, metrics)
        return cls(key, mode or default_mode(key), patience, min_delta)

    def update(self, row: dict[str, Any]) -> bool:
        if self.key not in row and self.fallback in row and self.best is None:
            self.key, self.fallback = self.fallback, None  # fit(eval_fn=...) without val_data, and no val_loss
        if self.key not in row:
            raise ValueError(f"monitor={self.key!r} is not in the epoch's metrics {sorted(row)}: "
                             f"{missing_key_fix(self.key, row)}")
        value = float(row[self.key])
        if not math.isfinite(value) and not self.warned_nonfinite:
            self.warned_nonfinite = True  # once a run: each epoch after would say the same
            # a metric may be undefined on the data rather than broken: kappa (0/0) where every target and
            # prediction is one class, as scikit-learn's
            cause = "a NaN or inf in the validation data (or a diverged model) is the usual cause" if "loss" in \
                self.key else ("a NaN or inf in the data, a diverged model, or a metric undefined on this data (kappa "
                               "where every target and prediction is one class) is the cause")
            warnings.warn(f"{self.key} is {value} at epoch {row.get('epoch')}: not a number that can improve, so no "
                          f"best checkpoint comes from it; {cause}", stacklevel=user_stacklevel())
        improved = math.isfinite(value) and (
            self.best is None
            or (self.mode == "min" and value < self.best - self.min_delta)
            or (self.mode == "max" and value > self.best + self.min_delta))
        if improved:
            self.best, self.best_epoch, self.bad_epochs = value, int(row["epoch"]), 0
        else:
            self.bad_epochs += 1
        if self.patience is not None and self.bad_epochs >= self.patience:
            self.stopped = True
        return improved

    @property
    def stop_reason(self) -> str:
        best = f"best {self.best} at epoch {self.best_epoch}" if self.best is not None else "never a finite value"
        return f"early stopping: {self.key} did not improve for {self.bad_epochs} epochs ({best})"

    def restore(self, best: float | None, best_epoch: int | None, extra: dict[str, Any]) -> None:
        """Continue from a checkpoint's bookkeeping (a changed ``patience`` applies from here on)."""
        if self.fallback is not None and extra.get("monitor") == self.fallback:  # the run had switched to it
            self.key, self.fallback = self.fallback, None
        self.best, self.best_epoch = best, best_epoch
        self.bad_epochs = int(extra.get("bad_epochs", 0))
        self.stopped = bool(extra.get("stopped_early", False)) and (
            self.patience is not None and self.bad_epochs >= self.patience)

    def extra(self) -> dict[str, Any]:
        return {"bad_epochs": self.bad_epochs, "stopped_early": self.stopped, "monitor": self.key,
                "monitor_mode": self.mode}


def _refuse_what_validation_cannot_give(key: str, metrics: Sequence[str]) -> None:
    """A ``val_`` key that neither the validation loss nor a metric of ``metrics`` is, refused before the first
    epoch: found missing at its end, a whole epoch would have trained for nothing."""
    gives = ["val_loss", *(f"val_{m}" for m in metrics if m != "per_class_recall")]
    if key in gives or ("per_class_recall" in metrics and re.fullmatch(r"val_recall_\d+", key)):
        return
    shown = gives + (["val_recall_0", "val_recall_1", "..."] if "per_class_recall" in metrics else [])
    raise ValueError(f"monitor={key!r} is not in the epoch's metrics validation records ({', '.join(shown)}): "
                     f"{missing_key_fix(key, dict.fromkeys(gives), metrics)}")


def _refuse_what_training_cannot_give(key: str, metrics: Sequence[str]) -> None:
    """A ``train_`` key that neither the training loss nor an accuracy of ``metrics`` is, refused before the
    first epoch: found missing at its end (a ``loss_fn`` of your own records no accuracy unless asked), a whole
    epoch would have trained for nothing."""
    from zoo.engine.evaluation import ACCURACY_NAMES

    gives = ["train_loss", *(f"train_{m}" for m in metrics if m in ACCURACY_NAMES)]
    if key in gives:
        return
    name = key.removeprefix("train_")
    if name in ACCURACY_NAMES:
        fix = (f"training counts it when metrics= names it (metrics={(*metrics, name)!r} records {key!r}), or "
               "monitor a key it has")
    else:
        fix = (f"training records its loss and the accuracy metrics= names ({', '.join(sorted(ACCURACY_NAMES))}); "
               f"for another metric monitor the validation's ('val_{name}', with val_data=)")
    raise ValueError(f"monitor={key!r} is not in the epoch's metrics training records ({', '.join(gives)}): {fix}")


def missing_key_fix(key: str, row: dict[str, Any], metrics: Sequence[str] = ("accuracy",)) -> str:
    """How a monitored ``key`` the epoch's ``row`` lacks gets there: a metric validation records when it is
    named in ``metrics=`` (the run's ``metrics``, which the fix adds it to; HybridSN's val_kappa: "give validation
    data" would mislead where validation has run)."""
    name = key.removeprefix("val_")
    if key.startswith("val_") and any(k.startswith("val_") for k in row):
        from zoo.engine.evaluation import metric_keys

        metric = "per_class_recall" if re.fullmatch(r"recall_\d+", name) else name
        try:
            metric_keys([metric])
        except ValueError as err:  # no metric fit computes: said so, with the ones it does
            return f"{err}; or monitor a key the row has"
        asked = tuple(dict.fromkeys([*metrics, metric]))
        return (f"validation records the metrics named in metrics= (metrics={asked!r} records {key!r}), or "
                "monitor a key it has")
    if key.startswith("val_"):
        return "there is no validation data (val_data=) or eval_fn"
    return "monitor a key it has"
