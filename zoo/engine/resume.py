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
| where and how it reports (``progress``, ``log_dir``, ``keep_last``, ``device``, evaluation) | applied |
| ``num_workers``                           | applied, with a warning: random augmentation draws from the main process's generator with 0 workers and from a seed per worker above 0, so the resumed run does not repeat the uninterrupted one bit for bit |
| ``flush_tiny_moments`` (it changes no parameter, :mod:`zoo.engine.denormals`) | applied from the resumed step on |
| ``flush_tiny_grads`` (:data:`zoo.engine.denormals.OUTPUT_GRAD_FLOOR`) | applied from the resumed step on |
| the family's data recipe (``data.*``: image or clip size, augmentation, split, token budget, direction, tokenizer, a fingerprint of the data source) | refused, except the few the family lists as harmless (evaluation and error-handling settings: seq2seq's ``bleu_sentences`` / ``beam_size``, vision's and video's ``strict``): applied |
| the model's architecture config (``model.*``: dropout, stem, attention, ...) | refused |
| everything else (batch size, optimizer, weight decay, schedule, warm-up, precision, loss, seed, architecture, ...) | refused |

A family's data step consumes its own options (``direction=``, ``image_size=``, ``split=``, ...) before
``fit`` sees them, so it hands what it consumed to ``fit`` with :func:`with_recipe`: the checkpoints record
it beside fit's options (``batch_size`` there is the real one: a DataLoader's own, when ``fit`` is given one)
and a resume compares it the same way. Checkpoints written before runs recorded a recipe still resume: keys
a checkpoint did not record are not compared, except what its model state shows (the network's
``zoo_recorded_in_state``: a seq2seq checkpoint's tokenizer, which the restore would put in the model).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "BATCH_SIZE_FROM",
    "RECIPE_MAY_CHANGE",
    "ResumeError",
    "files_fingerprint",
    "realign_schedule",
    "reconcile",
    "scale_lr",
    "tensors_fingerprint",
    "with_recipe",
]

log = logging.getLogger(__name__)

# keys of a checkpoint's recorded config that are bookkeeping, never compared
RECIPE_MAY_CHANGE = "recipe_may_change"  # the recipe keys (data.*) its family lets a resume change
BATCH_SIZE_FROM = "batch_size_from"  # "loader" (the DataLoader's own) or "options" (fit's); absent: written before


class ResumeError(ValueError):
    """A resume asked for settings the checkpointed run cannot take mid-run; the message lists them."""


MODEL_NAME_KEY = "zoo.model"  # a checkpoint's record of the registered model it trained (with_recipe)


def reconcile(saved: dict[str, Any], current: dict[str, Any], *, applied: Iterable[str],
              ignored: Iterable[str] = (), what: str = "the checkpoint") -> dict[str, tuple[Any, Any]]:
    """``{key: (saved, current)}`` of the settings that changed and may; a :class:`ResumeError` naming every
    key that changed and may not. Keys the checkpoint did not record are not compared."""
    applied, ignored = set(applied), set(ignored)
    changed = {k: (saved[k], v) for k, v in current.items() if k in saved and k not in ignored and saved[k] != v}
    refused = {k: d for k, d in changed.items() if k not in applied}
    if refused:
        listing = "; ".join(_shown_change(k, old, new, what) for k, (old, new) in sorted(refused.items()))
        raise ResumeError(
            f"cannot resume with changed settings that do not apply mid-run ({listing}). Resume with the "
            f"original values, or start a new run in another folder. Settings that may change on resume: "
            f"{', '.join(sorted(applied))}")
    for k, (old, new) in sorted(changed.items()):
        log.info("resume: %s %r -> %r (applied)", k, old, new)
    return changed


def _shown_change(key: str, old: Any, new: Any, what: str, most: int = 6) -> str:
    """One refused change as the error lists it; lists of dicts of the same length (``param_groups``) by the
    entries that differ (``param_groups[0].lr: 0.001 in ..., 0.002 now``), not as two reprs of every
    parameter."""
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new) and \
            all(isinstance(x, dict) for x in (*old, *new)):
        parts = [f"{key}[{i}].{k}: {a.get(k)!r} in {what}, {b.get(k)!r} now" for i, (a, b) in enumerate(zip(old, new))
                 for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        if parts:
            more = f"; and {len(parts) - most} more in {key}" if len(parts) > most else ""
            return "; ".join(parts[:most]) + more
    return f"{key}: {old!r} in {what}, {new!r} now"


def with_recipe(options: dict[str, Any], *, data: Mapping[str, Any] | None = None,
                model: Mapping[str, Any] | None = None, may_change: Iterable[str] = (),
                name: str | None = None) -> dict[str, Any]:
    """``options`` for :func:`zoo.engine.fit` with a family's recipe added to what its checkpoints record
    (``FitConfig.config``): ``data`` what its data step consumed (recorded as ``data.<key>``: the data recipe,
    the split, a cheap fingerprint of the source), ``model`` the architecture config (``model.<key>``),
    ``name`` the registered model's name (``zoo.model``, as :func:`zoo.save` writes it: ``zoo.build`` of
    another model's checkpoint names the model it holds). A resume compares them as fit's own options
    (:func:`reconcile`): a changed ``may_change`` data key is applied and reported, any other change is refused."""
    record = dict(options.get("config") or {})
    if name:
        record[MODEL_NAME_KEY] = name
    record.update({f"data.{k}": v for k, v in (data or {}).items()})
    record.update({f"model.{k}": v for k, v in (model or {}).items()})
    if may_change:
        record[RECIPE_MAY_CHANGE] = sorted({*record.get(RECIPE_MAY_CHANGE, ()), *(f"data.{k}" for k in may_change)})
    return {**options, "config": record}


def files_fingerprint(paths: Iterable[str | os.PathLike], root: str | os.PathLike | None = None, *,
                      sample: int = 16, head: int = 1 << 16) -> str:
    """``"N files, B bytes, <hash>"``: a hash of the files' names (relative to ``root``) and sizes, and of the
    first ``head`` bytes of ``sample`` of them (evenly spaced in name order). A ``stat`` per file and at most
    1 MiB read: cheap on any data set, the same after the folder moved, and different for another data set
    (other files, other sizes, or as many files of the same sizes with other contents)."""
    files = sorted(Path(p) for p in paths)
    n = len(files)
    picked = set(range(n)) if n <= sample else {round(i * (n - 1) / max(1, sample - 1)) for i in range(sample)}
    digest, total = hashlib.sha256(), 0
    for i, path in enumerate(files):
        size = path.stat().st_size
        # relpath of both made absolute: a relative root with absolute paths (or a path outside root) is fine
        name = Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix() if root is not None \
            else path.name
        digest.update(f"{name}\0{size}\n".encode())
        if i in picked:
            with open(path, "rb") as f:
                digest.update(f.read(head))
        total += size
    return f"{n} files, {total} bytes, {digest.hexdigest()[:16]}"


def tensors_fingerprint(tensors: Sequence[Any], *, rows: int = 64) -> str:
    """``"N rows; (N, 4) float32, (N,) int64; <hash>"``: the shapes and dtypes of in-memory arrays (an ``(X, y)``
    pair) and a hash of their bytes, all of them up to 16 MiB, else of ``rows`` evenly spaced rows: cheap,
    and different for other arrays (``X[:100]``, ``X * 2``, another split)."""
    digest = hashlib.sha256()
    n = len(tensors[0]) if len(tensors) else 0
    small = sum(t.numel() * t.element_size() for t in tensors) <= 16 << 20
    picked = slice(None) if small or n <= rows else [round(i * (n - 1) / (rows - 1)) for i in range(rows)]
    for t in tensors:
        part = t.detach()[picked].cpu().contiguous()
        digest.update(part.view(-1).view(torch.uint8).numpy().tobytes() if part.numel() else b"")
    shapes = ", ".join(f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" for t in tensors)
    return f"{n} rows; {shapes}; {digest.hexdigest()[:16]}"


def scale_lr(optimizer: Any, scheduler: Any, old: float, new: float) -> None:
    """Make a restored optimizer (and its schedule) run at ``new`` where it ran at ``old``: every group's
    current and initial lr, and the schedule's base lrs, are scaled by ``new / old``; a group that set its own
    lr (``param_groups``, marked :data:`zoo.engine.optim.OWN_LR`) keeps it, as a fresh run gives it."""
    from zoo.engine.optim import OWN_LR

    if not old:
        raise ResumeError(f"cannot rescale a learning rate of {old!r} to {new!r}")
    ratio = float(new) / float(old)
    ratios = [1.0 if group.get(OWN_LR) else ratio for group in optimizer.param_groups]
    for group, r in zip(optimizer.param_groups, ratios):
        group["lr"] *= r
        # OneCycleLR computes every lr from the group's initial/max/min lr, not from base_lrs
        for key in ("initial_lr", "max_lr", "min_lr"):
            if key in group:
                group[key] *= r
    if scheduler is not None and hasattr(scheduler, "base_lrs"):
        scheduler.base_lrs = [b * r for b, r in zip(scheduler.base_lrs, ratios)]


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
