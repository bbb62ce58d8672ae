"""What a training run returns (``TrainResult``, the same for every kind of model) and how it can fail."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["NonFiniteLossError", "TrainResult"]


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or inf; the message names the epoch, batch, step and last good checkpoint."""


@dataclass
class TrainResult:
    """What a training run returns; ``zoo.train`` gives the same for every kind of model.

    ``history``: one row per epoch for networks, per evaluation for agents, one row for an estimator's
      fit. Every row has ``epoch`` (1-based row number) and ``step``: optimizer steps taken so far for
      networks, environment steps (transitions collected, all envs) for agents, 1 for an estimator.
    ``monitor`` / ``best_metric`` / ``best_epoch``: the monitored key of the rows, its best value and the
      1-based row it came from (``best_step`` is that row's ``step``); None when nothing was trained.
    ``checkpoint_path``: the best checkpoint when checkpoints were written (else the last one, else None), a Path;
    ``model``: the trained model (its weights after the last row).
    """

    history: list[dict[str, Any]]
    best_metric: float | None
    best_epoch: int | None
    checkpoint_path: Path | None
    model: Any
    monitor: str | None = None
    stopped_early: bool = False
    resumed: dict[str, Any] | None = None
    """When the run resumed: ``{"checkpoint": Path, "changed": {setting: (before, now)}}`` (what it applied)."""

    @property
    def best_step(self) -> int | None:
        """The ``step`` of the best row (optimizer steps for networks, environment steps for agents)."""
        if self.best_epoch is None or not 0 < self.best_epoch <= len(self.history):
            return None
        return self.history[self.best_epoch - 1].get("step")

    @property
    def last(self) -> dict[str, Any]:
        """The last epoch's row (empty when nothing was trained)."""
        return self.history[-1] if self.history else {}

    def __repr__(self) -> str:
        # a summary: the model's own repr (a ResNet's is 100+ lines) and every row of a long run would bury it
        # in a notebook's output; both stay one attribute away (result.model, result.history)
        last = {k: round(v, 4) if isinstance(v, float) else v for k, v in self.last.items()}
        parts = [f"rows={len(self.history)}", f"monitor={self.monitor!r}", f"best_metric={self.best_metric!r}",
                 f"best_epoch={self.best_epoch!r}", f"best_step={self.best_step!r}", f"last={last!r}",
                 f"checkpoint_path={self.checkpoint_path!r}", f"model={type(self.model).__name__}"]
        if self.stopped_early:
            parts.append("stopped_early=True")
        if self.resumed is not None:
            parts.append(f"resumed={self.resumed!r}")
        return f"TrainResult({', '.join(parts)})"
