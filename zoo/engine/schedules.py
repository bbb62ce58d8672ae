"""Learning-rate schedules, each stepped at its own cadence.

=============  ==========  =====================================================================
schedule       stepped     shape (a factor on each parameter group's own lr)
=============  ==========  =====================================================================
``None``       per batch   constant (after the optional linear warmup)
``"step"``     per epoch   ``gamma ** (epoch // step_size)`` (``torch.optim.lr_scheduler.StepLR``);
                           with ``warmup_steps`` it becomes a per-batch schedule so the warmup is smooth
``"cosine"``   per batch   linear warmup, then cosine from 1 to ``min_lr_ratio`` (SGDR without restarts,
                           https://arxiv.org/abs/1608.03983)
``"onecycle"`` per batch   ``torch.optim.lr_scheduler.OneCycleLR`` with ``max_lr`` = each group's lr
                           (https://arxiv.org/abs/1708.07120); ``warmup_steps`` sets its rising phase
``"inverse_sqrt"`` per batch  linear warmup, then ``sqrt(warmup / step)`` (Transformer schedule,
                           https://arxiv.org/abs/1706.03762)
``"linear"``   per batch   linear warmup, then linear decay to ``min_lr_ratio``
=============  ==========  =====================================================================

Every schedule is a multiplicative factor on each group's base lr, so parameter groups with their own
learning rates (a fine-tuning head at 10x the backbone) keep their ratio throughout.
A callable ``schedule(optimizer, total_steps, steps_per_epoch) -> LRScheduler`` is also accepted; it is
stepped per batch unless ``interval="epoch"`` is given in the options; a ``ReduceLROnPlateau`` is stepped once
an epoch is scored, on the monitored value (``monitor``), as Keras' and Lightning's are. Its scheduler sets the
lr alone, so ``warmup_steps`` with a callable is refused (a ``SequentialLR`` of a ``LinearLR`` and the scheduler
builds it in). ``total_steps`` counts the run's optimizer steps from the batch count at set-up; a run whose
later epochs have more batches (a token-budget sampler) holds onecycle's last lr past its end (fit's trainer).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.optim.lr_scheduler import LambdaLR, LRScheduler, OneCycleLR, ReduceLROnPlateau, StepLR

__all__ = ["SCHEDULES", "ScheduleSpec", "build_schedule"]

SCHEDULES = ("step", "cosine", "onecycle", "inverse_sqrt", "linear")


@dataclass
class ScheduleSpec:
    """A scheduler and when to step it: ``"batch"`` (after every optimizer step), ``"epoch"``, or ``"plateau"``
    (after the epoch's scores, on the monitored value: ``ReduceLROnPlateau``)."""

    scheduler: LRScheduler
    interval: str


def _warmup(step: int, warmup_steps: int) -> float:
    # step counts optimizer steps already taken; the first step uses 1/warmup, not 0, so no step is wasted.
    if warmup_steps <= 0 or step >= warmup_steps:
        return 1.0
    return (step + 1) / warmup_steps


def build_schedule(
    optimizer: torch.optim.Optimizer,
    schedule: str | Callable[..., LRScheduler] | None,
    *,
    total_steps: int,
    steps_per_epoch: int,
    warmup_steps: int = 0,
    options: dict[str, Any] | None = None,
) -> ScheduleSpec | None:
    """Build the scheduler for ``schedule``; ``None`` when there is neither a schedule nor a warmup.

    ``total_steps`` and ``steps_per_epoch`` count optimizer steps (batches / grad_accum_steps).
    ``options``: ``step_size`` (epochs, default 30) and ``gamma`` (0.1) for ``"step"``; ``min_lr_ratio``
    (0.0) for ``"cosine"``/``"linear"``; ``div_factor``, ``final_div_factor``, ``pct_start``,
    ``three_phase``, ``anneal_strategy`` for ``"onecycle"``; ``interval`` for a callable.
    """
    opts = dict(options or {})
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if total_steps < 1:
        raise ValueError(f"a schedule needs at least one optimizer step, got total_steps={total_steps}")
    if callable(schedule) and not isinstance(schedule, str):
        interval = opts.pop("interval", "batch")
        if interval not in ("batch", "epoch"):
            raise ValueError(f"interval must be 'batch' or 'epoch', got {interval!r}")
        sched = schedule(optimizer, total_steps, steps_per_epoch)
        if not isinstance(sched, LRScheduler):
            raise TypeError(f"schedule callable must return a torch LRScheduler, got {type(sched).__name__}")
        if warmup_steps:
            _refuse_a_warmup_before(sched, warmup_steps)
        if isinstance(sched, ReduceLROnPlateau):  # steps on the monitored value, once an epoch is scored (its
            # step() without one failed after the first batch: "missing 1 required positional argument: 'metrics'")
            return ScheduleSpec(sched, "plateau")
        return ScheduleSpec(sched, interval)
    if schedule is None:
        if warmup_steps == 0:
            if opts:
                raise ValueError(f"schedule_options {sorted(opts)} given without a schedule")
            return None
        return ScheduleSpec(LambdaLR(optimizer, lambda s: _warmup(s, warmup_steps)), "batch")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; expected one of {SCHEDULES}, None or a callable")
    return _named_schedule(optimizer, schedule, total_steps, steps_per_epoch, warmup_steps, opts)


def _refuse_a_warmup_before(sched: LRScheduler, warmup_steps: int) -> None:
    """``warmup_steps`` with a schedule callable, which fit cannot apply: the scheduler the callable returns sets
    the lr alone (the warmup went unused, without a word)."""
    name = type(sched).__name__
    if isinstance(sched, ReduceLROnPlateau):
        fix = ("a ReduceLROnPlateau cannot follow a warmup in one scheduler: pass warmup_steps=0, or warm up with a "
               "named schedule (schedule='linear' or 'cosine' with warmup_steps)")
    else:
        # fit's own warmup, spelt in torch's schedulers: 1/N, 2/N, ..., N/N over the first N steps
        fix = (f"build the warmup into the scheduler the callable returns, e.g. SequentialLR(optimizer, "
               f"[LinearLR(optimizer, start_factor=1 / {warmup_steps}, total_iters={max(1, warmup_steps - 1)}), "
               f"{name}(...)], milestones=[{warmup_steps}]) (torch.optim.lr_scheduler), and pass warmup_steps=0")
    raise ValueError(f"warmup_steps={warmup_steps} is not applied with a schedule callable (this one returned "
                     f"{name}), whose scheduler alone sets the lr: expected warmup_steps=0 with a "
                     f"callable; {fix}")


def _named_schedule(optimizer: torch.optim.Optimizer, schedule: str, total_steps: int, steps_per_epoch: int,
                    warmup_steps: int, opts: dict[str, Any]) -> ScheduleSpec:
    _check_options(schedule, opts)
    if schedule == "step":
        step_size, gamma = int(opts.pop("step_size", 30)), float(opts.pop("gamma", 0.1))
        _no_leftovers(schedule, opts)
        if warmup_steps == 0:
            return ScheduleSpec(StepLR(optimizer, step_size=step_size, gamma=gamma), "epoch")
        spe = max(1, steps_per_epoch)
        return ScheduleSpec(
            LambdaLR(optimizer, lambda s: _warmup(s, warmup_steps) * gamma ** ((s // spe) // step_size)), "batch"
        )
    if schedule == "onecycle":
        if warmup_steps >= total_steps:  # else OneCycleLR's "Expected float between 0 and 1 pct_start"
            raise ValueError(f"warmup_steps={warmup_steps} is not below the run's {total_steps} optimizer steps: "
                             "onecycle warms up over a share of the run; give fewer warmup_steps or more epochs")
        if warmup_steps and "pct_start" in opts:  # pct_start won, and warmup_steps went unused
            raise ValueError(f"schedule='onecycle' with warmup_steps={warmup_steps} and schedule_options "
                             f"pct_start={opts['pct_start']}: both set the length of its rising phase (warmup_steps="
                             f"{warmup_steps} is pct_start={warmup_steps / total_steps:.4g} of this run's "
                             f"{total_steps} steps); give one of them")
        pct = opts.pop("pct_start", warmup_steps / total_steps if warmup_steps else 0.3)
        kwargs = {k: opts.pop(k) for k in ("div_factor", "final_div_factor", "three_phase", "anneal_strategy",
                                             "cycle_momentum", "base_momentum", "max_momentum") if k in opts}
        _no_leftovers(schedule, opts)
        max_lr = [group["lr"] for group in optimizer.param_groups]
        return ScheduleSpec(OneCycleLR(optimizer, max_lr=max_lr, total_steps=total_steps, pct_start=pct,
                                       **kwargs), "batch")
    if schedule == "inverse_sqrt":
        _no_leftovers(schedule, opts)
        w = max(1, warmup_steps)
        return ScheduleSpec(LambdaLR(optimizer, lambda s: _warmup(s, warmup_steps) * min(1.0, math.sqrt(w / (s + 1)))),
                            "batch")
    min_ratio = float(opts.pop("min_lr_ratio", 0.0))
    _no_leftovers(schedule, opts)
    decay_steps = max(1, total_steps - warmup_steps)

    def factor(s: int) -> float:  # cosine or linear decay to min_ratio after the warm-up
        if s < warmup_steps:
            return _warmup(s, warmup_steps)
        t = min(1.0, (s - warmup_steps) / decay_steps)
        shape = 0.5 * (1 + math.cos(math.pi * t)) if schedule == "cosine" else 1 - t
        return min_ratio + (1 - min_ratio) * shape

    return ScheduleSpec(LambdaLR(optimizer, factor), "batch")


_POSITIVE = ("gamma", "div_factor", "final_div_factor")
"""Schedule options that divide or multiply the lr: zero or below drives it to zero or below zero."""


def _check_options(schedule: str, opts: dict[str, Any]) -> None:
    """The values of the options ``schedule`` uses (others are refused as unused, :func:`_no_leftovers`), refused
    before the run where they would make the lr negative, or fail late (StepLR's ``step_size=0``: a
    ZeroDivisionError after the first epoch), naming the option and what it takes."""
    used = {"step": ("step_size", "gamma"), "onecycle": ("div_factor", "final_div_factor"),
            "cosine": ("min_lr_ratio",), "linear": ("min_lr_ratio",)}.get(schedule, ())
    opts = {k: v for k, v in opts.items() if k in used}
    problems = []
    if "step_size" in opts:
        step_size = opts["step_size"]
        if isinstance(step_size, bool) or not isinstance(step_size, numbers.Integral) or step_size < 1:
            problems.append(f"step_size must be an int >= 1 (epochs between lr cuts), got {step_size!r}")
    for key in _POSITIVE:
        if key in opts and not (_is_number(opts[key]) and 0 < opts[key] < math.inf):
            problems.append(f"{key} must be a finite number > 0 (a factor on the lr), got {opts[key]!r}")
    if "min_lr_ratio" in opts and not (_is_number(opts["min_lr_ratio"]) and 0 <= opts["min_lr_ratio"] <= 1):
        problems.append(f"min_lr_ratio must be in [0, 1] (the lr's end as a share of its peak), got "
                        f"{opts['min_lr_ratio']!r}")
    if problems:
        raise ValueError(f"schedule={schedule!r}: " + "; ".join(problems) + ": fix it in schedule_options")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _no_leftovers(schedule: str, opts: dict[str, Any]) -> None:
    if opts:
        raise ValueError(f"schedule_options {sorted(opts)} are not used by schedule {schedule!r}")
