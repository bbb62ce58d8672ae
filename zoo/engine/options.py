"""``FitConfig``: every option of :func:`zoo.engine.fit`, defined once with its default and meaning.

``fit(model, train_data, val_data, **options)`` builds one from its keyword arguments, so a misspelt or
mistyped option fails before any work with the key named; the checkpoint records it (as a plain dict),
and a resume compares it with the one it was written with (:mod:`zoo.engine.resume`).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from zoo.config import check_value, config_types
from zoo.inputs import did_you_mean

__all__ = ["DEFAULT_METRICS", "FitConfig", "UnknownOptionError", "check_options", "keyword_options",
           "refuse_unknown_options", "resumed_folder"]


class UnknownOptionError(TypeError):
    """Options a call does not take; ``option_keys`` names them (``zoo.train`` then says which of them are
    settings of the model's config, which the model takes when it is built)."""

    def __init__(self, message: str, option_keys: Iterable[str]) -> None:
        super().__init__(message)
        self.option_keys = tuple(option_keys)


DEFAULT_METRICS: tuple[str, ...] = ("accuracy",)
"""fit's and evaluate's metrics when none are named (none when a ``loss_fn`` is given: see ``FitConfig.metrics``)."""


@dataclass
class FitConfig:
    """The options of one training run (see :func:`zoo.engine.fit` for how they combine)."""

    epochs: int = 1
    """Passes over the training data."""
    batch_size: int = 32
    """Samples per batch and process (DDP's global batch is ``batch_size * WORLD_SIZE``)."""
    optimizer: Any = "adamw"
    """``adamw``, ``adam``, ``sgd``, ``rmsprop``, a torch Optimizer, or ``fn(param_groups, lr=, weight_decay=)``."""
    lr: float = 1e-3
    weight_decay: float = 0.0
    """Applied to weight matrices and kernels only; biases and normalisation parameters (1-D) get none."""
    param_groups: Sequence[dict[str, Any]] | None = None
    """Torch optimizer groups (each keeps its own ``lr``); default: the model's parameters."""
    optimizer_options: dict[str, Any] | None = None
    """More keyword arguments for a named optimizer (``momentum``, ``betas``, ...). On the CPU ``adamw``, ``adam``
    and ``sgd`` are built with ``fused=True`` (1.9-4.9x torch's default per-tensor loop a step,
    :data:`zoo.engine.optim.FUSED_ON_CPU`); ``fused`` or ``foreach`` given here choose for themselves."""
    flush_tiny_moments: bool = True
    """Every 32 optimizer steps, zero moments below 1e-30 (first, momentum) and 1e-36 (second) before they turn
    denormal, which Intel CPUs compute many times slower; no parameter changes (:mod:`zoo.engine.denormals`).
    False leaves torch's optimizer state as torch computes it."""
    flush_tiny_grads: bool = False
    """Zero the gradient entries of the model's outputs (logits) at or below 1e-20 in training, before the
    backward pass carries them into the denormal range, which Intel CPUs compute many times slower (CPU only;
    :data:`zoo.engine.denormals.OUTPUT_GRAD_FLOOR`). Off by default: the speed-up holds on one CPU kind only, and
    it changes the parameters in some seeds. HybridSN on Indian Pines (``benchmarks/gradient_denormals.py``): on an
    Intel Xeon, 8 seeds, 1.12x by medians (0.95-1.29x a seed), parameters bit-identical in 5 seeds and test accuracy
    within the seeds' spread in the other 3; on an AMD EPYC (Zen 3), where denormals slowed no epoch, 1.02x over
    2 seeds. False (the default) computes every gradient as torch does."""
    schedule: Any = None
    """``step`` (per epoch), ``cosine``, ``onecycle``, ``inverse_sqrt``, ``linear`` (per batch), or a callable."""
    schedule_options: dict[str, Any] | None = None
    """Of a named schedule (:func:`zoo.engine.schedules.build_schedule`), checked before the run: ``step_size`` (an
    int >= 1) and ``gamma`` (> 0) of ``"step"``, ``min_lr_ratio`` (in [0, 1]) of ``"cosine"`` and ``"linear"``,
    ``div_factor`` / ``final_div_factor`` (> 0) and torch's other OneCycleLR options of ``"onecycle"``;
    ``interval`` (``"batch"`` or ``"epoch"``) of a callable."""
    warmup_steps: int = 0
    """Optimizer steps of linear warmup (the lr times 1/N, 2/N, ..., 1) in front of a named schedule or a constant
    lr; ``"onecycle"`` takes it as its rising phase (in place of ``schedule_options`` ``pct_start``, refused with
    it). A schedule callable builds its scheduler's warmup itself: fit refuses warmup_steps with one."""
    amp: str | None = "auto"
    """``auto``: bf16 where this device computes the model's ops faster in it, else fp32; ``bf16``; ``fp16``
    (CUDA, with a grad scaler); None: fp32."""
    grad_accum_steps: int = 1
    """Batches whose gradients are summed before one optimizer step."""
    clip_grad_norm: float | None = None
    ema_decay: float | None = None
    """Keep an exponential moving average of the weights (and buffers), updated after every optimizer step
    with this decay (0.999: a horizon of about 1,000 steps), bias-corrected as Adam's moments are
    (:mod:`zoo.engine.ema`): validation scores the average and the trained model ends holding it (the raw
    weights stay in the checkpoints for resuming)."""
    loss_fn: Callable[[Any, Any], Any] | None = None
    """``fn(outputs, targets) -> loss``; default: cross entropy (``label_smoothing``, targets -100 ignored)."""
    label_smoothing: float = 0.0
    """Of the default loss, in training and in the history's ``val_loss`` alike (the loss the run optimises);
    :func:`zoo.engine.evaluate` scores plain cross entropy unless given ``label_smoothing=`` too."""
    forward_fn: Callable[[Any, Any], tuple[Any, Any]] | None = None
    """``fn(model, batch) -> (outputs, targets)`` for batches that are not ``(inputs, targets)``."""
    metrics: Sequence[str] = DEFAULT_METRICS
    """Scored on validation data (:func:`zoo.engine.evaluate`); by default accuracy, and none with a ``loss_fn``
    of your own (a regression's or a multi-label loss has no classes to count: accuracy would fail there,
    after a whole epoch), as Keras and Lightning compute no metric nobody asked for. Targets the loss ignores (-100,
    or the ``ignore_index`` of an ``nn.CrossEntropyLoss`` / ``nn.NLLLoss`` given as ``loss_fn``) are left out of them."""
    monitor: str = "val_loss"
    """A key of the history rows; without validation data ``val_loss`` becomes ``train_loss``."""
    monitor_mode: str | None = None
    """``min`` or ``max``; default: min for a loss or an error (a name holding "loss", or a word such as "mae",
    "mse", "rmse", "error", "perplexity", "wer": :func:`zoo.engine.monitor.default_mode`), else max."""
    early_stopping_patience: int | None = None
    early_stopping_min_delta: float = 0.0
    checkpoint_dir: str | Path | None = None
    """Keeps ``epoch-NNNN.pt`` (the last ``keep_last``) and ``best.pt``; the run locks the folder. Default: none,
    or with ``resume`` naming a checkpoint or folder, that folder (the run goes on where it was)."""
    keep_last: int = 2
    resume: Any = None
    """True (the newest loadable checkpoint of ``checkpoint_dir``) or a checkpoint path or folder."""
    seed: int = 0
    deterministic: bool = False
    device: Any = None
    """``cpu``, ``cuda``, ``cuda:1``, ...; default: where the model is (its parameters' device)."""
    channels_last: bool | Literal["auto"] = "auto"
    """Convolutional networks in channels-last memory layout (``channels_last_3d`` for 3-D convolutions).
    ``"auto"``: where the model's kind of network (convolutions all 2-D, all 3-D, or both as HybridSN's) trains on
    a CPU of a kind where it was measured no slower so in the precision it trains in (1.00-1.35x;
    :data:`zoo.engine.layout.CHANNELS_LAST_FASTER`), and its
    forward runs so (the first batch is tried, in eval mode, before training: a ``.view()`` of a convolution's
    output cannot, and trains channels-first with a warning); True/False: always/never (False keeps the layout
    the model has)."""
    progress: bool = True
    log_dir: str | Path | None = None
    """``metrics.csv``, TensorBoard events (when installed) and ``learning_curves.png``; default: checkpoint_dir."""
    overfit_batches: int = 0
    """Sanity mode: train and validate on the first N batches only."""
    num_workers: int = 0
    collate_fn: Any = None
    eval_fn: Callable[[Any, Any], dict[str, float]] | None = None
    """``fn(model, val_data) -> {metric: value}`` added to each epoch's row with a ``val_`` prefix."""
    drop_last: bool = False
    config: dict[str, Any] | None = field(default=None, repr=False)
    """Extra facts to record in the checkpoints (a family's recipe, say)."""

    def __post_init__(self) -> None:
        types = config_types(type(self))
        for f in dataclasses.fields(self):
            setattr(self, f.name, check_value("fit", f.name, getattr(self, f.name), types[f.name]))
        # "~/runs" is the home folder's runs, as zoo.save and weights= read it (not a folder named "~" here)
        for key in ("checkpoint_dir", "log_dir", "resume"):
            value = getattr(self, key)
            if isinstance(value, (str, os.PathLike)) and not isinstance(value, bool) and str(value).startswith("~"):
                setattr(self, key, Path(value).expanduser())
        if self.checkpoint_dir is None and self.resume and self.resume not in (True, "true"):
            # else a resumed run wrote no checkpoint, and its result named the file it resumed from as its own
            self.checkpoint_dir = resumed_folder(self.resume)
        if self.loss_fn is not None and self.metrics is DEFAULT_METRICS:
            self.metrics = ()
        problems = []
        if not self.lr >= 0:  # torch's "Invalid learning rate: -1.0" came from the optimizer, naming no option
            problems.append(f"lr must be >= 0, got {self.lr}")
        elif math.isinf(self.lr):  # taken, it trained the weights to NaN
            problems.append(f"lr must be a finite number, got {self.lr}")
        if self.epochs < 0:
            problems.append(f"epochs must be >= 0, got {self.epochs}")
        if self.grad_accum_steps < 1:
            problems.append(f"grad_accum_steps must be >= 1, got {self.grad_accum_steps}")
        if self.ema_decay is not None and not 0.0 < self.ema_decay < 1.0:
            problems.append(f"ema_decay must be in (0, 1) or None, got {self.ema_decay}")
        if self.clip_grad_norm is not None and not self.clip_grad_norm > 0:
            problems.append(f"clip_grad_norm must be > 0 or None, got {self.clip_grad_norm}")
        if self.keep_last < 1:  # else the first checkpoint write fails, after a whole epoch of training
            problems.append(f"keep_last must be >= 1, got {self.keep_last}")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            problems.append(f"early_stopping_patience must be >= 1 (epochs without improvement) or None, got "
                            f"{self.early_stopping_patience}")
        if not self.early_stopping_min_delta >= 0:  # a negative one would count a worse epoch as an improvement
            problems.append(f"early_stopping_min_delta must be >= 0, got {self.early_stopping_min_delta}")
        if not 0.0 <= self.label_smoothing <= 1.0:
            problems.append(f"label_smoothing must be in [0, 1], got {self.label_smoothing}")
        if self.overfit_batches < 0:
            problems.append(f"overfit_batches must be >= 0, got {self.overfit_batches}")
        if self.monitor_mode not in (None, "min", "max"):
            problems.append(f"monitor_mode must be 'min', 'max' or None, got {self.monitor_mode!r}")
        problems += self._unknown_names()
        if self.resume in (True, "true") and self.checkpoint_dir is None:
            problems.append("resume=True resumes from checkpoint_dir; give checkpoint_dir (or a checkpoint path)")
        if problems:
            raise ValueError("; ".join(problems))

    def _unknown_names(self) -> list[str]:
        """A schedule or optimizer name fit does not know, said with the config (a typo failed only once the
        optimizer and schedule were built, after data set-up, and after zoo.finetune had replaced the head)."""
        from zoo.engine.optim import OPTIMIZERS
        from zoo.engine.schedules import SCHEDULES

        problems = []
        if isinstance(self.schedule, str) and self.schedule not in SCHEDULES:
            problems.append(f"unknown schedule {self.schedule!r}{did_you_mean(self.schedule, SCHEDULES)}; expected "
                            f"one of {SCHEDULES}, None or a callable")
        if isinstance(self.optimizer, str) and self.optimizer.lower() not in OPTIMIZERS:
            problems.append(f"unknown optimizer {self.optimizer!r}{did_you_mean(self.optimizer.lower(), OPTIMIZERS)}; "
                            f"expected one of {sorted(OPTIMIZERS)}, a torch Optimizer or a callable(param_groups, "
                            "lr=..., weight_decay=...)")
        return problems

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> FitConfig:
        """A config from ``fit``'s keyword arguments; an unknown key is a TypeError listing the valid ones."""
        valid = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - valid)
        if unknown:
            hints = [k + did_you_mean(k, valid) for k in unknown]
            raise UnknownOptionError(f"fit: unknown option(s) {', '.join(hints)}; options: {', '.join(sorted(valid))}",
                                     unknown)
        return cls(**options)

    def recorded(self) -> dict[str, Any]:
        """The options as a checkpoint records them (objects by name), with ``config`` merged in."""
        from zoo.engine.checkpoint import plain_config

        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "config"}
        return plain_config({**out, **(self.config or {})})


def resumed_folder(resume: Any) -> Path | None:
    """The folder of the checkpoint (or the folder) ``resume`` names; None for a path that does not exist (the
    resume says so, and no folder is made for it)."""
    path = Path(resume)
    return path if path.is_dir() else path.parent if path.is_file() else None


def check_options(unknown: Mapping[str, Any] | Iterable[str], call: str, accepted: Iterable[str]) -> None:
    """One TypeError for the options ``call`` does not take, with the ones it does (a typo is named, never
    passed on to an inner function whose name means nothing to the caller)."""
    if unknown:
        accepted = sorted(set(accepted))
        hints = [repr(k) + did_you_mean(k, accepted) for k in sorted(unknown)]
        raise UnknownOptionError(f"{call}: unknown option(s) {', '.join(hints)}; it takes {', '.join(accepted)}",
                                 sorted(unknown))


def keyword_options(fn: Callable[..., Any], skip: int = 1) -> list[str] | None:
    """The keyword options ``fn`` names after its first ``skip`` parameters (what the call is about: data,
    inputs); None when it also takes ``**options`` (it then decides itself what it takes)."""
    params = list(inspect.signature(fn).parameters.values())[skip:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def refuse_unknown_options(options: Mapping[str, Any], call: str, *receivers: Callable[..., Any],
                           skip: int = 1, also: Iterable[str] = ()) -> None:
    """Refuse, naming the valid ones, the ``options`` that none of the ``receivers`` (the functions a call
    hands its keyword options on to) nor ``also`` names: Python's bare "unexpected keyword argument" from an
    inner function would neither name the call the user made nor what it takes. A receiver that takes
    ``**options`` checks its own, so none is refused here."""
    accepted = set(also)
    for fn in receivers:
        named = keyword_options(fn, skip)
        if named is None:
            return
        accepted.update(named)
    check_options([k for k in options if k not in accepted], call, accepted)
