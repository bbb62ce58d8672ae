"""Callbacks: a small interface for code that runs at fixed points of :func:`zoo.engine.fit`.

Hooks, in the order they are called (every hook gets the live :class:`TrainState`)::

    on_train_start(state)
    for each epoch:
        on_epoch_start(state)
        for each batch:  on_batch_end(state, logs)        # logs = {"loss": float, "lr": float}
        on_epoch_end(state, row)                          # row = this epoch's history dict, after validation
    on_train_end(state)

``on_epoch_end`` may add entries to ``row`` (they are logged, and can be monitored for early stopping and
best checkpoints). Any hook may call ``state.request_stop(reason)``: training stops after the current
batch (from ``on_batch_end``) or at the end of the epoch; the epoch's checkpoint is still written. An epoch
stopped after some of its batches says so in its history row (``batches_trained``): a resume from its
checkpoint finishes that epoch from the next batch, as the uninterrupted run would have (:mod:`zoo.engine.trainer`);
such a partial epoch moves no best checkpoint, early stopping or per-epoch schedule until its resume finishes it.
Callbacks run on every rank under DDP; use ``state.is_main`` to do rank-0-only work.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from zoo._stacklevel import user_stacklevel
from zoo.engine.monitor import missing_key_fix

if TYPE_CHECKING:
    from zoo.engine.evaluation import ClassPredictions

__all__ = ["Callback", "GradualUnfreeze", "LambdaCallback", "RestoreBest", "TrainState"]


@dataclass
class TrainState:
    """What a callback can see and change while ``fit`` runs."""

    model: torch.nn.Module  # the unwrapped model (not the DDP wrapper)
    optimizer: torch.optim.Optimizer
    scheduler: Any
    epochs: int
    epoch: int = 0  # 0-based index of the current epoch; history rows say epoch + 1
    step: int = 0  # optimizer steps taken so far
    batch: int = 0  # index of the current batch inside the epoch
    history: list[dict[str, Any]] = field(default_factory=list)
    rank: int = 0
    world_size: int = 1
    stop_requested: bool = False
    stop_reason: str | None = None
    ema_model: torch.nn.Module | None = None  # with ema_decay: the averaged weights validation scores
    checkpoint_dir: Path | None = None  # where this run's epoch checkpoints are (a resumed run: the resumed one's)
    # the latest validation's predictions (with classification metrics): a report of the weights the run ended
    # with can reuse them instead of scoring the validation set again
    val_predictions: ClassPredictions | None = None

    @property
    def eval_model(self) -> torch.nn.Module:
        """The weights validation scores and training ends with: the average with ``ema_decay``, else the model."""
        return self.ema_model if self.ema_model is not None else self.model

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def request_stop(self, reason: str = "stop requested by a callback") -> None:
        self.stop_requested = True
        self.stop_reason = reason


class Callback:
    """Base class: override the hooks you need; every default does nothing."""

    def on_train_start(self, state: TrainState) -> None:
        pass

    def on_epoch_start(self, state: TrainState) -> None:
        pass

    def on_batch_end(self, state: TrainState, logs: dict[str, float]) -> None:
        pass

    def on_epoch_end(self, state: TrainState, row: dict[str, Any]) -> None:
        pass

    def on_train_end(self, state: TrainState) -> None:
        pass


class LambdaCallback(Callback):
    """A callback from plain functions: ``LambdaCallback(on_epoch_end=lambda state, row: ...)``."""

    _HOOKS = ("on_train_start", "on_epoch_start", "on_batch_end", "on_epoch_end", "on_train_end")

    def __init__(self, **hooks: Any) -> None:
        unknown = set(hooks) - set(self._HOOKS)
        if unknown:
            raise TypeError(f"unknown hooks {sorted(unknown)}; expected some of {self._HOOKS}")
        for name, fn in hooks.items():
            setattr(self, name, fn)


def adds_to_rows(cb: Callback) -> bool:
    """Whether ``cb`` has an ``on_epoch_end`` of its own (a subclass's method, or a LambdaCallback's function set
    on the instance), which may add keys to an epoch's row that ``monitor`` can name."""
    return type(cb).on_epoch_end is not Callback.on_epoch_end or "on_epoch_end" in vars(cb)


class GradualUnfreeze(Callback):
    """Unfreeze modules on a schedule: ``GradualUnfreeze({0: ["fc"], 2: ["layer4"], 4: [""]})``.

    At the start of epoch ``e`` (0-based) every parameter whose name starts with one of the listed
    prefixes gets ``requires_grad=True`` (``""`` means everything). At train start everything not listed
    for epoch 0 is frozen, so the schedule alone says what trains when.

    The optimizer must already hold the frozen parameters (``fit`` builds it over every parameter in
    ``param_groups`` or the model): a frozen parameter gets no gradient, so optimizers skip it, and
    AdamW's weight decay does not touch it either. Under DDP the set of trained parameters is fixed when
    the model is wrapped, so there a schedule that unfreezes later is not supported (train single-process,
    or unfreeze everything from epoch 0).
    """

    def __init__(self, schedule: Mapping[int, Iterable[str]]) -> None:
        self.schedule = {int(e): list(p) for e, p in schedule.items()}
        if not self.schedule:
            raise ValueError("GradualUnfreeze needs a non-empty {epoch: [prefixes]} schedule")

    def _apply(self, model: torch.nn.Module, upto_epoch: int) -> None:
        prefixes = [p for e, ps in self.schedule.items() if e <= upto_epoch for p in ps]
        names = [n for n, _ in model.named_parameters()]
        for prefix in prefixes:
            if prefix and not any(n == prefix or n.startswith(prefix + ".") for n in names):
                raise ValueError(f"GradualUnfreeze: no parameter under {prefix!r}; names start with "
                                 f"{sorted({n.split('.')[0] for n in names})}")
        for name, param in model.named_parameters():
            param.requires_grad_(any(p == "" or name == p or name.startswith(p + ".") for p in prefixes))

    def on_train_start(self, state: TrainState) -> None:
        self._apply(state.model, state.epoch)  # a resumed run starts mid-schedule

    def on_epoch_start(self, state: TrainState) -> None:
        self._apply(state.model, state.epoch)


class RestoreBest(Callback):
    """Keep the weights of the best epoch (by ``monitor`` of the history rows) in memory and load them back
    when training ends, so that early stopping or a fixed epoch budget leaves the model at its best
    validation score rather than at its last epoch. ``mode``: ``"min"``/``"max"`` (default: min for a loss
    or an error such as "mae", else max, as ``fit``'s monitor). ``min_delta``: an epoch is better only by more than
    that, as ``fit``'s ``early_stopping_min_delta`` counts it: give the run's, and the epoch kept is the one ``fit``
    reports as ``best_epoch`` and copies to ``best.pt`` (with a smaller one it may be a later epoch, whose
    checkpoint ``keep_last`` prunes: a run resumed after that cannot read it back). ``best_epoch`` / ``best_value``
    say what was kept."""

    def __init__(self, monitor: str = "val_loss", mode: str | None = None, min_delta: float = 0.0) -> None:
        from zoo.engine.monitor import default_mode

        mode = mode or default_mode(monitor)
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max'; got {mode!r}")
        if isinstance(min_delta, bool) or not isinstance(min_delta, numbers.Real) or not 0 <= min_delta < math.inf:
            raise ValueError(f"RestoreBest: min_delta (as fit's early_stopping_min_delta) must be a finite number >= 0, "
                             f"the least change that counts as better; got {min_delta!r}")
        self.monitor, self.mode, self.min_delta = monitor, mode, float(min_delta)
        self.best_value: float | None = None
        self.best_epoch: int | None = None
        self._state: dict[str, torch.Tensor] | None = None

    def _better(self, value: float) -> bool:
        # a NaN never compares better, so a NaN first epoch would otherwise be kept as the best for good
        return math.isfinite(value) and (
            self.best_value is None or (value < self.best_value - self.min_delta if self.mode == "min"
                                        else value > self.best_value + self.min_delta))

    def on_train_start(self, state: TrainState) -> None:
        """A resumed run's best epoch may lie before the resume: its weights are in memory no more, so they are
        read back from that epoch's checkpoint (or ``best.pt``); without either, the best after the resume is
        kept, with a warning."""
        self.best_value, self.best_epoch, self._state = None, None, None
        best_row = None
        for row in state.history:
            if self.monitor in row and self._better(float(row[self.monitor])):
                self.best_value, best_row = float(row[self.monitor]), row
        if best_row is None:
            return
        epoch = int(best_row["epoch"])
        weights = self._checkpointed_weights(state, epoch)
        if weights is None:
            warnings.warn(f"RestoreBest: the best {self.monitor} ({self.best_value:.6g}) was at epoch {epoch}, before "
                          f"the resume, and no checkpoint of that epoch is left in {state.checkpoint_dir}; the best "
                          "epoch from the resume on will be restored instead", stacklevel=user_stacklevel())
            self.best_value = None
            return
        self.best_epoch, self._state = epoch, weights

    @staticmethod
    def _checkpointed_weights(state: TrainState, epoch: int) -> dict[str, torch.Tensor] | None:
        from zoo.engine import checkpoint as ckpt_mod

        if state.checkpoint_dir is None:
            return None
        for path in (state.checkpoint_dir / ckpt_mod.epoch_checkpoint_name(epoch), state.checkpoint_dir / "best.pt"):
            if not path.is_file():
                continue
            try:
                ckpt = ckpt_mod.read_checkpoint(path)
            except ckpt_mod.CheckpointError:
                continue
            if ckpt["epoch"] != epoch:
                continue
            # on_epoch_end keeps the weights validation scored: the average when the run has one
            return ckpt_mod.ema_weights(ckpt, path) if state.ema_model is not None else ckpt["model"]
        return None

    def on_epoch_end(self, state: TrainState, row: dict[str, Any]) -> None:
        if self.monitor not in row:
            raise KeyError(f"RestoreBest monitors {self.monitor!r}, which the history row lacks (it has "
                           f"{sorted(row)}); {missing_key_fix(self.monitor, row)}")
        value = float(row[self.monitor])
        if self._better(value):
            self.best_value, self.best_epoch = value, state.epoch + 1
            self._state = {k: v.detach().clone() for k, v in state.eval_model.state_dict().items()}

    def on_train_end(self, state: TrainState) -> None:
        if self._state is not None:
            state.model.load_state_dict(self._state)
