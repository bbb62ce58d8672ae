"""One resume policy for every kind of run: what a resumed run may change, and what it may not.

A run resumes with the settings it was started with, except those that can change mid-run without making
the rest of it a different experiment: those are applied and reported (logged, and listed in the result).
Any other difference is refused before anything is loaded, with the differing keys listed, because
continuing would silently mix two runs (another batch size, schedule, seed or architecture).

| setting                                   | on resume |
|-------------------------------------------|-----------|
| learning rate (``lr``, TD3's ``actor_lr``/``critic_lr``) | applied: the optimizer's lr (and the schedule's base) scaled to it |
| ``epochs`` / ``total_steps``              | applied: the run continues to the new end (a schedule stretches with it) |
| TD3's ``exploration_noise``               | applied: the noise's scale from the resumed step on |
| early stopping patience and min delta     | applied from the resumed epoch on |
| where and how it reports (``progress``, ``log_dir``, ``keep_last``, ``num_workers``, ``device``, evaluation) | applied |
| everything else (batch size, optimizer, weight decay, schedule, warm-up, precision, loss, seed, architecture, ...) | refused |
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

__all__ = ["ResumeError", "realign_schedule", "reconcile", "scale_lr"]

log = logging.getLogger(__name__)


class ResumeError(ValueError):
    """A resume asked for settings the checkpointed run cannot take mid-run; the message lists them."""


def reconcile(saved: dict[str, Any], current: dict[str, Any], *, applied: Iterable[str],
              ignored: Iterable[str] = (), what: str = "the checkpoint") -> dict[str, tuple[Any, Any]]:
    """``{key: (saved, current)}`` of the settings that changed and may; a :class:`ResumeError` naming every
    key that changed and may not. Keys the checkpoint did not record are not compared."""
    applied, ignored = set(applied), set(ignored)
    changed = {k: (saved[k], v) for k, v in current.items() if k in saved and k not in ignored and saved[k] != v}
    refused = {k: d for k, d in changed.items() if k not in applied}
    if refused:
        listing = "; ".join(f"{k}: {old!r} in {what}, {new!r} now" for k, (old, new) in sorted(refused.items()))
        raise ResumeError(
            f"cannot resume with changed settings that do not apply mid-run ({listing}). Resume with the "
            f"original values, or start a new run in another folder. Settings that may change on resume: "
            f"{', '.join(sorted(applied))}")
    for k, (old, new) in sorted(changed.items()):
        log.info("resume: %s %r -> %r (applied)", k, old, new)
    return changed


def scale_lr(optimizer: Any, scheduler: Any, old: float, new: float) -> None:
    """Make a restored optimizer (and its schedule) run at ``new`` where it ran at ``old``: every group's
    current and initial lr, and the schedule's base lrs, are scaled by ``new / old``."""
    if not old:
        raise ResumeError(f"cannot rescale a learning rate of {old!r} to {new!r}")
    ratio = float(new) / float(old)
    for group in optimizer.param_groups:
        group["lr"] *= ratio
        # OneCycleLR computes every lr from the group's initial/max/min lr, not from base_lrs
        for key in ("initial_lr", "max_lr", "min_lr"):
            if key in group:
                group[key] *= ratio
    if scheduler is not None and hasattr(scheduler, "base_lrs"):
        scheduler.base_lrs = [b * ratio for b in scheduler.base_lrs]


def realign_schedule(optimizer: Any, scheduler: Any) -> None:
    """Set each group's lr to what the (rebuilt) schedule gives at the restored step: a resume with another
    ``lr`` or ``epochs`` continues on the new curve from where the run stopped, not from the old curve's value."""
    if scheduler is None:
        return
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # get_lr outside step() warns; here it is the closed form we want
        closed = getattr(scheduler, "_get_closed_form_lr", None)
        lrs = closed() if closed is not None else scheduler.get_lr()
    for group, lr in zip(optimizer.param_groups, lrs):
        group["lr"] = lr
    scheduler._last_lr = list(lrs)
