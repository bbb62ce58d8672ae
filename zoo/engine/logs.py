"""Run logs: per-epoch metrics as CSV (and TensorBoard when installed), a learning-curve PNG at the end.

The one plotting module: :func:`plot_learning_curves` draws a run's history (one panel per metric family),
:func:`plot_curves` several runs' evaluation returns on one axis (the RL benchmarks).

matplotlib and TensorBoard are imported lazily, only when a run actually writes a picture or an event
file, so ``import zoo.engine`` stays cheap.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import math
import warnings
from pathlib import Path
from typing import Any

from zoo import fs
from zoo._stacklevel import user_stacklevel

__all__ = ["RunLogger", "atomic_savefig", "plot_curves", "plot_learning_curves", "write_csv"]


def write_csv(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Rewrite the whole CSV atomically: columns are the union of all rows' keys, first-seen order."""
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return fs.write_text(path, buf.getvalue())


def restore_csv(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Rewrite ``path`` with ``rows`` (:func:`write_csv`) when it holds fewer data rows (or none, or is
    missing); a file that holds as many or more is left as it is."""
    path = Path(path)
    try:
        with open(path, newline="") as fh:
            have = sum(1 for _ in csv.reader(fh)) - 1  # less the header
    except (OSError, UnicodeDecodeError, csv.Error):
        have = -1
    if rows and have < len(rows):
        write_csv(rows, path)


def atomic_savefig(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """``fig.savefig`` through :mod:`zoo.fs`, so a crash never leaves a half-written picture."""
    path = Path(path)
    with fs.atomic_write(path) as fh:
        fig.savefig(fh, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    return path


def plot_learning_curves(history: list[dict[str, Any]], path: str | Path, title: str | None = None, *,
                         x_key: str = "epoch") -> Path:
    """One panel per metric family: losses together, then each other ``train_*``/``val_*`` metric, then lr.
    ``x_key``: the row key on the x axis (``"step"`` for an RL run: environment steps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not history:
        raise ValueError("no history to plot")
    xs = [row.get(x_key, i + 1) for i, row in enumerate(history)]
    keys = [k for k in history[-1] if k not in ("epoch", "epoch_time_s", x_key)
            and isinstance(history[-1][k], (int, float)) and not isinstance(history[-1][k], bool)]
    panels: dict[str, list[str]] = {}
    for k in keys:
        base = k.split("_", 1)[1] if k.startswith(("train_", "val_")) else k
        panels.setdefault(base, []).append(k)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (base, names) in zip(axes[0], panels.items()):
        for name in names:
            ys = [row.get(name, math.nan) for row in history]
            ax.plot(xs, [math.nan if y is None else y for y in ys], marker="o", ms=3, label=name)
        ax.set_xlabel(x_key)
        ax.set_title(base)
        if base == "lr":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    try:
        return atomic_savefig(fig, path)
    finally:  # a failed write (RunLogger warns and goes on) must not leave the figure open in pyplot
        plt.close(fig)


def plot_curves(curves: dict[str, tuple[list[dict], list[dict]]], path: str | Path, title: str) -> Path:
    """Several runs on one axis: ``{label: (evaluations, episodes)}``, each evaluation row with ``step``,
    ``eval_return_mean``, ``eval_return_std`` (drawn as mean +- std), each episode row with ``step`` and
    ``return`` (drawn faintly)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (label, (history, episodes)) in enumerate(curves.items()):
        color = f"C{i}"
        if episodes:
            ax.plot([e["step"] for e in episodes], [e["return"] for e in episodes], color=color, alpha=0.25, lw=0.8)
        if history:
            x = [h["step"] for h in history]
            m = [h["eval_return_mean"] for h in history]
            s = [h["eval_return_std"] for h in history]
            ax.plot(x, m, color=color, lw=2, label=f"{label} (eval)")
            ax.fill_between(x, [a - b for a, b in zip(m, s)], [a + b for a, b in zip(m, s)], color=color, alpha=0.15)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    out = atomic_savefig(fig, path, dpi=110)
    plt.close(fig)
    return out


class RunLogger:
    """Writes ``metrics.csv`` after every epoch, TensorBoard scalars when ``tensorboard`` is installed, and
    ``learning_curves.png`` at the end. Only the main process should own one. ``step_key``: the row key
    that numbers the rows (TensorBoard's global step, the plot's x axis): ``"epoch"``, or ``"step"`` for
    an RL run's environment steps.

    ``metrics.csv`` is the run's record: an error writing it is raised. The PNG is a view drawn from those
    rows at the end: an error writing it (a full disk) is a warning, since raising it threw away a finished
    run (its result, and ``zoo train --out``) for a picture the rows can draw again."""

    def __init__(self, log_dir: str | Path, tensorboard: bool | None = None, *, step_key: str = "epoch") -> None:
        self.log_dir, self.step_key = Path(log_dir), step_key
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.log_dir / "metrics.csv"
        self.png_path = self.log_dir / "learning_curves.png"
        use_tb = importlib.util.find_spec("tensorboard") is not None if tensorboard is None else tensorboard
        self._tb = None
        if use_tb:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.log_dir / "tensorboard"))

    def log_epoch(self, history: list[dict[str, Any]]) -> None:
        write_csv(history, self.csv_path)
        if self._tb is not None:
            row = history[-1]
            for k, v in row.items():
                if k not in ("epoch", self.step_key) and isinstance(v, (int, float)) and not isinstance(v, bool):
                    self._tb.add_scalar(k, v, global_step=int(row.get(self.step_key, len(history))))
            self._tb.flush()

    def restore(self, history: list[dict[str, Any]]) -> None:
        """A resumed run's rows, as its checkpoint holds them: ``metrics.csv`` rewritten (atomically) where it
        holds fewer (a kill between the checkpoint and the CSV), before the run goes on. One that holds more (a
        resume from an older checkpoint) is the abandoned run's: the resume copies it beside that run's later
        epochs and rewrites it (``zoo.engine.resume``) when it trains. TensorBoard's event files keep what they
        logged."""
        restore_csv(history, self.csv_path)

    def close(self, history: list[dict[str, Any]], title: str | None = None) -> None:
        if history:
            try:
                plot_learning_curves(history, self.png_path, title=title, x_key=self.step_key)
            except OSError as err:
                warnings.warn(f"the learning curves were not written to {self.png_path}: {err}. The picture only "
                              f"draws the rows of {self.csv_path.name}, which holds them with the checkpoints (the "
                              "run's record), so the run goes on to its result; once the cause is fixed, draw it "
                              f"with zoo.engine.logs.plot_learning_curves(result.history, {str(self.png_path)!r}, "
                              f"x_key={self.step_key!r})", RuntimeWarning, stacklevel=user_stacklevel())
        if self._tb is not None:
            self._tb.close()
            self._tb = None
