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

:func:`resume_fit` reads a checkpoint back into a :func:`zoo.engine.fit` run under that policy: which file
(the newest loadable one of the folder; none loading is refused), the settings compared, the model, optimizer,
schedule, grad scaler, weight average, monitor and RNG states restored, the later epochs of a run resumed from an
older checkpoint of its folder set aside, and what a resume says it will not repeat (workers, nothing left to
train, a partial epoch it cannot finish). A checkpoint of an epoch that ``request_stop`` ended before its last
batch (its row marked ``batches_trained``) holds the epoch's record (:data:`PARTIAL_EPOCH`): the resumed run
finishes that epoch from the batch after the last one trained, as the uninterrupted run would have
(:class:`zoo.engine.trainer.Trainer`), and the epoch's row replaces the partial one. Where it cannot (a
checkpoint written before partial epochs were recorded, or by another number of processes, whose batches
were shared out otherwise), the run goes on with the next epoch and the resume says which batches it leaves
untrained. What a checkpoint records of the run is :func:`run_record`'s.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.optim.lr_scheduler import MultiplicativeLR
from torch.utils.data import DataLoader, TensorDataset

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.config import current_keys, renamed_fields_of
from zoo.engine import checkpoint as ckpt_mod
from zoo.engine.data import xy_dataset
from zoo.engine.distributed import broadcast_object
from zoo.engine.ema import load_average
from zoo.engine.precision import normalize_amp, resumed_precision
from zoo.engine.seed import set_rng_state
from zoo.wrappers import unwrap

if TYPE_CHECKING:
    from zoo.engine.options import FitConfig
    from zoo.engine.trainer import Trainer

__all__ = [
    "BATCH_SIZE_FROM",
    "PARTIAL_EPOCH",
    "RECIPE_MAY_CHANGE",
    "RESUME_APPLIED",
    "ResumeError",
    "Resumed",
    "files_fingerprint",
    "loader_workers",
    "realign_schedule",
    "reconcile",
    "refuse_a_used_folder",
    "resume_fit",
    "run_record",
    "scale_lr",
    "tensors_fingerprint",
    "with_recipe",
]

log = logging.getLogger(__name__)

# keys of a checkpoint's recorded config that are bookkeeping, never compared
RECIPE_MAY_CHANGE = "recipe_may_change"  # the recipe keys (data.*) its family lets a resume change
BATCH_SIZE_FROM = "batch_size_from"  # "loader" (the DataLoader's own) or "options" (fit's); absent: written before
# a checkpoint's ``extra`` key for an epoch request_stop ended before its last batch: one record per rank, what its
# resume needs to finish the epoch (zoo.engine.trainer.Trainer._partial_epoch_record)
PARTIAL_EPOCH = "partial_epoch"


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
    if scheduler is None or isinstance(scheduler, MultiplicativeLR):
        # its get_lr() multiplies the lr it holds by one more step's factor (no closed form): the lr scale_lr left
        # is already the new curve's at this step, and the curve does not depend on the run's length
        return
    _refuse_a_changed_composite(scheduler, what="a new lr or epochs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # get_lr outside step() warns; here it is the closed form we want
        closed = getattr(scheduler, "_get_closed_form_lr", None)
        lrs = closed() if closed is not None else scheduler.get_lr()
    for group, lr in zip(optimizer.param_groups, lrs):
        group["lr"] = lr
    scheduler._last_lr = list(lrs)


def _refuse_a_changed_composite(scheduler: Any, *, what: str) -> None:
    """A :class:`ResumeError` for ``what`` (a changed lr or run length) on a ``SequentialLR`` or
    ``ChainedScheduler``: each scheduler inside keeps the base lrs and length it was built with, and the
    composite has no lr of its own to realign (its ``get_lr()`` is torch's bare ``NotImplementedError``)."""
    if not hasattr(scheduler, "_schedulers"):
        return
    inner = ", ".join(type(s).__name__ for s in scheduler._schedulers)
    raise ResumeError(f"resume: the schedule is a {type(scheduler).__name__} (of {inner}), which cannot take {what} "
                      "mid-run: the schedulers inside it keep the lr and length they were built with. Resume with the "
                      "run's lr and epochs, or give a schedule of one scheduler (a LambdaLR of the whole curve "
                      "takes both)")


# -- reading a checkpoint back into a fit run (zoo.engine.trainer.Trainer) --------------------------------------

# settings a resumed fit run may change; bookkeeping that is never compared
RESUME_APPLIED = ("lr", "epochs", "early_stopping_patience", "early_stopping_min_delta", "keep_last", "progress",
                  "log_dir", "num_workers", "device", "eval_fn", "metrics", "flush_tiny_moments",
                  "flush_tiny_grads", "channels_last")
_NOT_COMPARED = ("resume", "checkpoint_dir", "config", RECIPE_MAY_CHANGE, BATCH_SIZE_FROM)

# an LRScheduler's state that says where it is rather than what curve it follows
_SCHEDULE_PROGRESS = {"last_epoch", "_step_count", "_last_lr", "base_lrs", "_get_lr_called_within_step",
                      "_is_initial", "verbose", "lr_lambdas"}


@dataclass
class Resumed:
    """Where a resumed fit run goes on from: the checkpoint read, the settings it changed (``{key: (saved,
    now)}``), its epoch and optimizer-step counters, the precision the run computes in (None: fp32), and this
    rank's record of the partial epoch it finishes (None: it starts a new epoch)."""

    checkpoint: Path
    changed: dict[str, tuple[Any, Any]]
    epoch: int
    step: int
    amp: str | None
    partial: dict[str, Any] | None = None

    @property
    def next_epoch(self) -> int:
        """The index of the first epoch the resumed run trains: the checkpoint's partial one, else the next."""
        return self.epoch - 1 if self.partial is not None else self.epoch


def run_record(cfg: FitConfig, train_data: Any) -> dict[str, Any]:
    """What the checkpoints record of the run: fit's options with the family's recipe (``cfg.config``), the
    batch size the batches really have (a DataLoader's own: fit's ``batch_size`` does not reach it) and
    where that came from (``batch_size_from``)."""
    record = cfg.recorded()
    record[BATCH_SIZE_FROM] = "options"
    tensors = xy_dataset(train_data) or getattr(train_data, "dataset", train_data)
    if isinstance(tensors, TensorDataset):  # (X, y) arrays: a resume on other arrays is another data set
        record["train_tensors"] = tensors_fingerprint(tensors.tensors)
    if isinstance(train_data, DataLoader):
        batch_sampler = train_data.batch_sampler
        record["batch_size"] = (train_data.batch_size if train_data.batch_size is not None
                                else getattr(batch_sampler, "batch_size", None))
        record[BATCH_SIZE_FROM] = "loader"
    return record


def loader_workers(loader: Any) -> int:
    """The worker processes ``loader`` loads with (``overfit_batches`` makes it a list of batches: none): a
    checkpoint records them, and a resume with others warns (:func:`_warn_other_workers`)."""
    return int(getattr(loader, "num_workers", 0))


def refuse_a_used_folder(folder: Path, resume: Any = None) -> None:
    """A run that does not continue the run of ``folder`` (a new one, or a resume from a checkpoint of another
    folder: a fork) would mix with the checkpoints it holds: the pruning of ``keep_last`` deleted the new run's
    epochs before the old run's later ones, ``best.pt`` was overwritten, and a ``resume`` after it picked the
    old run's last epoch up under the new run's settings."""
    new = "a new run"
    if resume:
        origin = _resumed_folder(resume, folder)
        if origin is None or origin == folder.resolve():  # a missing file: the resume itself says so
            return
        new = f"a run continued from another folder's checkpoint (resume={str(resume)!r})"
    latest = ckpt_mod.latest_checkpoint(folder)
    held = [p.name for p in (latest, folder / "best.pt") if p is not None and p.is_file()]
    if held:
        raise ValueError(f"checkpoint_dir {folder} holds another run's checkpoints ({', '.join(held)}): "
                         f"resume=True continues that run; {new} needs another folder, or those files deleted "
                         "(none is overwritten)")


def _resumed_folder(resume: Any, folder: Path) -> Path | None:
    """The folder (resolved) of the run ``resume`` continues: ``folder`` for ``resume=True``, a folder named as
    itself, a file's own folder; None for a path that does not exist."""
    from zoo.engine.options import resumed_folder

    if resume is True or resume == "true":
        return folder.resolve()
    found = resumed_folder(resume)
    return None if found is None else found.resolve()


def resume_fit(run: Trainer) -> Resumed | None:
    """Load the checkpoint ``run.cfg.resume`` names into ``run`` (rank 0 picks it, so every rank reads the same
    file) under the resume policy: its settings reconciled first, then the model, optimizer, schedule, grad
    scaler, weight average, history, monitor and RNG states restored in place. None: ``resume=True`` on a folder
    with no loadable checkpoint yet (the run starts from scratch)."""
    info, cfg = run.info, run.cfg
    path, state = _resume_path(cfg.resume, run.ckpt_dir) if info.is_main else (None, None)
    path = broadcast_object(path)
    if path is None:
        if info.is_main:
            log.info("resume: no loadable checkpoint in %s yet, starting from scratch", run.ckpt_dir)
        return None
    path = Path(path)
    if state is None:  # a file named by resume=, or another rank: rank 0 read only the one it picked
        # onto the CPU: restore copies each tensor to where its owner lives, and generator states (and
        # the other CPU-only data in the file) must stay there
        state = ckpt_mod.read_checkpoint(path, map_location="cpu")
    extra = state.get("extra") or {}
    changed = _reconcile_run(run, state, path)
    if "lr" in changed or "epochs" in changed:  # refused before anything is loaded
        _refuse_a_changed_composite(run.scheduler, what=", ".join(
            f"{k} {changed[k][1]!r} (it ran with {changed[k][0]!r})" for k in ("lr", "epochs") if k in changed))
    # ReduceLROnPlateau has no curve to keep or realign: its state (best, bad epochs, lr) is all progress
    plateau = run.schedule is not None and run.schedule.interval == "plateau"
    shape = {} if plateau else _schedule_shape(run.scheduler)
    ckpt_mod.restore(state, run.model, run.opt, run.scheduler, run.scaler, path=path)
    if "epochs" in changed and shape:
        # the checkpoint's schedule ends where the old run did (OneCycleLR's total_steps refuses any step
        # past it); the one built for the new length keeps the restored position, on the new curve
        run.scheduler.__dict__.update(shape)
    if run.ema is not None:
        if extra.get("ema") is None:  # reconcile refuses a changed ema_decay; this is a checkpoint of another writer
            raise ValueError(f"{path.name} holds no weight average, but this run has ema_decay={cfg.ema_decay}")
        load_average(run.ema, extra["ema"])
    if "lr" in changed:
        scale_lr(run.opt, run.scheduler, *changed["lr"])
    if ("lr" in changed or "epochs" in changed) and not plateau:
        realign_schedule(run.opt, run.scheduler)
    partial = _partial_epoch(state, info.rank, info.world_size)
    if partial is None and extra.get(PARTIAL_EPOCH) and run.schedule is not None and run.schedule.interval == "epoch":
        # a partial epoch this resume cannot finish (_warn_partial_epoch): its checkpoint left the per-epoch step
        # for the epoch's end, and the run goes on with the next epoch
        run.scheduler.step()
    resumed = Resumed(path, changed, state["epoch"], state["step"],
                      resumed_precision(cfg.amp, extra.get("precision"), run.dev, run.amp, path.name), partial)
    run.history[:] = list(state["history"])
    run.monitor.restore(state["best_metric"], state["best_epoch"], extra)
    _restore_rng(state.get("rng"), info.rank, info.world_size)
    if info.is_main:
        _say_what_the_resume_leaves(run, resumed, extra)
    if resumed.partial is not None and run.cfg.epochs > resumed.next_epoch and not run.monitor.stopped:
        run.history.pop()  # the finished epoch's row takes the partial one's place
    return resumed


def _partial_epoch(state: dict[str, Any], rank: int, world_size: int) -> dict[str, Any] | None:
    """This rank's record of the partial epoch the checkpoint ends with, when the resume can finish that epoch as
    the uninterrupted run would have: None for a checkpoint of a whole epoch, one written before partial epochs
    were recorded, or by another number of processes (each drew its own share of the batches)."""
    records = (state.get("extra") or {}).get(PARTIAL_EPOCH)
    history = state.get("history") or []
    if not records or not history or history[-1].get("batches_trained") is None or len(records) != world_size:
        return None
    return records[rank]


def _say_what_the_resume_leaves(run: Trainer, resumed: Resumed, extra: dict[str, Any]) -> None:
    """The main process's part of a resume once the state is back: ``best.pt`` made the restored best epoch's
    again, and the warnings about what the resumed run will not do as the uninterrupted one would have."""
    if not run.monitor.stopped and run.cfg.epochs > resumed.next_epoch:  # it will write epochs of its own
        _set_aside_a_left_branch(run, resumed)
    _repair_best(run.ckpt_dir, run.monitor.best_epoch, resumed.checkpoint)
    _warn_partial_epoch(run, resumed, extra)
    _warn_other_workers(extra.get("loader_workers"), loader_workers(run.train_loader), resumed.checkpoint)
    epochs = run.cfg.epochs
    if run.monitor.stopped:  # the restored monitor ends the run before its first epoch: the old run's result
        warnings.warn(f"resume: {resumed.checkpoint.name} is of a run that stopped early at epoch {resumed.epoch} "
                      f"({run.monitor.stop_reason}): nothing is trained. To train on, resume with a larger "
                      f"early_stopping_patience than {run.monitor.patience} (or None)", stacklevel=user_stacklevel())
    elif epochs <= resumed.next_epoch:  # it returned the old run's result
        warnings.warn(f"resume: {resumed.checkpoint.name} has {resumed.next_epoch} epochs done and epochs={epochs}:"
                      f" nothing is trained; epochs counts the run's epochs in all, so pass "
                      f"epochs > {resumed.next_epoch} to train on", stacklevel=user_stacklevel())


def _reconcile_run(run: Trainer, state: dict[str, Any], path: Path) -> dict[str, tuple[Any, Any]]:
    """The resume policy (:func:`reconcile`) on what the checkpoint recorded and what this run records:
    fit's options and the family's recipe, whose harmless keys (``recipe_may_change``) are applied."""
    implied = getattr(run.model, "zoo_recorded_in_state", None)
    # a checkpoint written before recipes were recorded: what its model state shows of one (a tokenizer)
    saved = {**(implied(state["model"]) if implied is not None else {}), **(state.get("config") or {})}
    # a checkpoint written before a config field's rename records it by its old name, which would match no
    # key this run records and so escape the comparison
    renamed = renamed_fields_of(type(getattr(unwrap(run.model), "config", None)))
    saved = current_keys(path.name, saved, {f"model.{old}": f"model.{new}" for old, new in renamed.items()},
                         warn=False)
    ignored = set(_NOT_COMPARED)
    if BATCH_SIZE_FROM not in saved and run.record[BATCH_SIZE_FROM] == "loader":
        ignored.add("batch_size")  # it recorded fit's batch_size option, which a DataLoader does not use
    if _same_global_batch(saved, (state.get("extra") or {}).get("world_size"), run.record, run.info.world_size,
                          path):
        ignored.add("batch_size")
    applied = (*RESUME_APPLIED, *run.record.get(RECIPE_MAY_CHANGE, ()))
    return reconcile(_spelled_one_way(saved), _spelled_one_way(_as_recorded_then(saved, run.record)),
                     applied=applied, ignored=ignored, what=path.name)


def _as_recorded_then(saved: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """``current`` with each module the checkpoint recorded by its class's name alone (``'<CrossEntropyLoss>'``:
    written before modules were recorded with their settings, ``zoo.engine.checkpoint._module_settings``) recorded
    so again, where this run's is of that class: such a checkpoint still resumes, compared as it was then."""
    def bare(key: str, value: Any) -> bool:
        old = saved.get(key)
        return isinstance(old, str) and isinstance(value, str) and old.startswith("<") and old.endswith(">") \
            and "(" not in old and value.startswith(old[:-1] + "(")

    return {k: saved[k] if bare(k, v) else v for k, v in current.items()}


def _same_global_batch(saved: dict[str, Any], saved_world: Any, record: dict[str, Any], world: int,
                       path: Path) -> bool:
    """Under another number of processes than the checkpoint's, what must match is the global batch
    (``batch_size * WORLD_SIZE``: the steps and their size); the per-process one compared alone would let a
    2 x 16 run resume as 1 x 16, halving the batch without a word, and refuse 1 x 32. True when the
    world size changed and the global batch did not (``batch_size`` is then not compared); a changed
    global batch is refused, naming the batch_size that keeps it."""
    if saved_world is None or int(saved_world) == world or saved.get("batch_size") is None \
            or record.get("batch_size") is None:
        return False
    before, now = int(saved["batch_size"]) * int(saved_world), int(record["batch_size"]) * world
    if before == now:
        return True
    keep = f"batch_size={before // world}" if before % world == 0 else f"{saved_world} processes"
    raise ResumeError(f"{path.name} was trained by {saved_world} process(es) of batch_size {saved['batch_size']} "
                      f"(a global batch of {before}); this run has {world} of {record['batch_size']} (a "
                      f"global batch of {now}): resume with {keep}, or start a new run in another folder")


def _spelled_one_way(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the settings that have several spellings of one choice in one of them: ``amp``
    (:func:`_amp_spelled_one_way`), a ``monitor_mode`` that is the monitor's default (``"min"`` for a loss:
    :func:`zoo.engine.monitor.default_mode`) as None, an optimizer's name in lower case (``"AdamW"`` builds what
    ``"adamw"`` does); each was refused on resume as a changed setting."""
    from zoo.engine.monitor import default_mode
    from zoo.engine.optim import OPTIMIZERS

    config = _amp_spelled_one_way(config)
    mode, monitor, optimizer = config.get("monitor_mode"), config.get("monitor"), config.get("optimizer")
    if mode is not None and isinstance(monitor, str) and mode == default_mode(monitor):
        config = {**config, "monitor_mode": None}
    if isinstance(optimizer, str) and optimizer.lower() in OPTIMIZERS:
        config = {**config, "optimizer": optimizer.lower()}
    return config


def _amp_spelled_one_way(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its ``amp`` in one spelling (None/"none"/"fp32" -> None, "bfloat16" -> "bf16"): a run
    started with amp="fp32" resumes with amp=None (the CLI's --amp fp32 and the Python default spell it apart)."""
    try:
        return {**config, "amp": normalize_amp(config["amp"])} if "amp" in config else config
    except ValueError:  # a spelling of another version: compared as written
        return config


def _schedule_shape(scheduler: Any) -> dict[str, Any]:
    """What a freshly built scheduler says about its curve (its length and phases), to outlive a restore."""
    if scheduler is None:
        return {}
    import copy

    return {k: copy.deepcopy(v) for k, v in scheduler.state_dict().items() if k not in _SCHEDULE_PROGRESS}


def _restore_rng(rng: Any, rank: int, world_size: int) -> None:
    """The checkpoint's RNG states (one per rank it was written by) back into this rank's generators."""
    if isinstance(rng, list):
        if len(rng) != world_size:
            warnings.warn(f"checkpoint has RNG states of {len(rng)} ranks, this run has {world_size}: "
                          "random streams will differ from the original run", stacklevel=user_stacklevel())
        rng = rng[rank] if rank < len(rng) else rng[0]
    if rng is not None:
        set_rng_state(rng)


def _set_aside_a_left_branch(run: Trainer, resumed: Resumed) -> None:
    """A resume from an older checkpoint of its own folder (``epoch-0003.pt`` beside ``epoch-0005.pt``) branches
    off there: the later files are of the run it leaves. Left in place, ``resume=True`` (the highest epoch)
    continued that run, ``keep_last`` pruned this run's epochs before it, and ``best.pt`` could be an epoch of it.
    They are moved, never deleted, into a sub-folder named for where the branches part, with a copy of
    ``metrics.csv``, which is rewritten to this run's rows: one log does not mix the two runs' later epochs.
    ``best.pt`` goes only when it holds a later epoch: one at or before the resumed epoch is of both runs."""
    from zoo.engine.logs import write_csv

    folder, epoch = run.ckpt_dir, resumed.epoch
    if folder is None or resumed.checkpoint.parent.resolve() != folder.resolve():
        return  # a file of another folder: refuse_a_used_folder let it in only where this one holds no run
    later = ckpt_mod.epochs_after(folder, epoch)
    log = Path(run.cfg.log_dir if run.cfg.log_dir is not None else folder) / "metrics.csv"
    logged_later = _data_rows(log) > len(run.history)
    if not later and not logged_later:
        return
    aside = _new_branch_folder(folder, epoch)
    for path in later:  # the highest first: a kill half-way leaves the kept epochs contiguous for a rerun to finish
        os.replace(path, aside / path.name)
    if logged_later:
        fs.write_bytes(aside / log.name, log.read_bytes())
        write_csv(run.history, log)
    moved = ", ".join([p.name for p in later] + ([f"a copy of {log.name}"] if logged_later else []))
    whose = ("which this run goes on without (its newer checkpoints did not load)"
             if _named_folder(run.cfg.resume, folder) is not None else "of a run this one does not continue")
    warnings.warn(f"resume: {resumed.checkpoint.name} is epoch {epoch}; {folder} held files of later epochs, {whose}: "
                  f"moved them ({moved}) to {aside}, nothing deleted, so that resume=True, keep_last, best.pt and "
                  f"{log.name} follow this run from epoch {epoch} on. To go back to them, move them back (and this "
                  "run's later files aside)", stacklevel=user_stacklevel())


def _data_rows(csv_path: Path) -> int:
    """The rows of a ``metrics.csv`` below its header (0 for a missing or unreadable file)."""
    try:
        with open(csv_path, newline="", encoding="utf-8") as fh:
            return max(0, sum(1 for _ in csv.reader(fh)) - 1)
    except (OSError, UnicodeDecodeError, csv.Error):
        return 0


def _new_branch_folder(folder: Path, epoch: int) -> Path:
    """``folder/abandoned-after-epoch-NNNN`` (``-2``, ``-3`` ... beside an earlier one), made here."""
    base = folder / f"abandoned-after-{ckpt_mod.epoch_checkpoint_name(epoch).removesuffix('.pt')}"
    aside, k = base, 1
    while True:
        try:
            aside.mkdir()
            return aside
        except FileExistsError:
            k += 1
            aside = base.with_name(f"{base.name}-{k}")


def _repair_best(ckpt_dir: Path | None, best_epoch: int | None, resumed: Path) -> None:
    """Make ``best.pt`` the restored best epoch's checkpoint. A run killed between writing ``epoch-N.pt``
    (its new best) and copying it to ``best.pt`` left the previous best there, and no later epoch would
    rewrite it: the resumed monitor already holds epoch N's value, so N never improves on itself."""
    if ckpt_dir is None or best_epoch is None:
        return
    best = ckpt_dir / "best.pt"
    held = ckpt_mod.checkpoint_epoch(best)
    if held == best_epoch:
        return
    # the resumed run's own file only: a checkpoint_dir of another run (refused, refuse_a_used_folder) may hold
    # an epoch-N.pt of the same name that is not this run's epoch N
    source = resumed.parent / ckpt_mod.epoch_checkpoint_name(best_epoch)
    source = source if source.is_file() else None
    if source is None:  # only a resume from an older file of a folder that went on without it gets here
        if held is not None:
            warnings.warn(f"resume: {best} holds epoch {held}, but the best epoch of the run resumed from "
                          f"{resumed.name} is {best_epoch}, whose checkpoint is kept no more; best.pt is "
                          "replaced when the resumed run improves on it", stacklevel=user_stacklevel())
        return
    ckpt_mod.copy_checkpoint(source, best)
    log.info("resume: best.pt held %s, the best epoch is %d: copied %s to it",
             "nothing" if held is None else f"epoch {held}", best_epoch, source.name)


def _warn_partial_epoch(run: Trainer, resumed: Resumed, extra: dict[str, Any]) -> None:
    """A checkpoint of an epoch that ``request_stop`` ended after some of its batches, which this resume cannot
    finish as the uninterrupted run would have (:func:`_partial_epoch`): the run goes on with the next epoch,
    and says why and which batches that leaves untrained."""
    last = run.history[-1] if run.history else {}
    done = last.get("batches_trained")
    if done is None or resumed.partial is not None or run.cfg.epochs <= resumed.epoch:
        return
    records = extra.get(PARTIAL_EPOCH)
    why = (f"it was written by {len(records)} process(es) and this run has {run.info.world_size}, whose batches are "
           "shared out otherwise" if records else "it was written before checkpoints recorded where inside an "
           "epoch a run stopped")
    total = run.n_batches
    rest = f"its other {total - done} of {total} batches" if total and total > done else "its other batches"
    warnings.warn(f"resume: {resumed.checkpoint.name} ends epoch {last['epoch']} after {done} batches (request_stop),"
                  f" and the rest of that epoch cannot be trained as the uninterrupted run would have ({why}): the run "
                  f"goes on with epoch {resumed.epoch + 1}, so {rest} are not trained in this run. To train a whole "
                  f"epoch in their place, pass epochs={run.cfg.epochs + 1}", stacklevel=user_stacklevel())


def _warn_other_workers(recorded: Any, workers: int, resumed: Path) -> None:
    """Other DataLoader workers than the checkpoint's run had are used (results depending on them is what PyTorch
    users expect), but said: random augmentation draws from the main process's torch generator with 0 workers
    and from a seed per worker above 0, so the resumed epochs draw other numbers than the uninterrupted run's
    did, quietly. ``recorded``: the workers the checkpoint's training loader ran (None in a checkpoint from
    before they were recorded); the loaders', not the ``num_workers`` option, which a passed DataLoader and
    seq2seq's loaders do not take."""
    if recorded is None or int(recorded) == workers:
        return
    old, new = int(recorded), workers
    warnings.warn(f"resume: {resumed.name} was trained with num_workers={old}, this run has num_workers={new}: "
                  "random augmentation draws from the main process's generator with 0 workers and from a seed per "
                  "worker above 0, so the resumed run will not repeat the uninterrupted one bit for bit. Resume "
                  f"with num_workers={old} to repeat it", stacklevel=user_stacklevel())


def _resume_path(resume: Any, ckpt_dir: Path | None) -> tuple[Path | None, dict[str, Any] | None]:
    """The checkpoint to resume from: a file as given, else the newest loadable one of the folder (each
    newer one that does not load is skipped with a warning saying why; with none loading, refused), with the
    checkpoint where picking it read it (a folder's; a file as given is read by the caller)."""
    folder = _named_folder(resume, ckpt_dir)
    if folder is not None:
        found, state, skipped = ckpt_mod.newest_loadable_checkpoint(folder, map_location="cpu")
        for reason in skipped:
            warnings.warn(f"resume: skipped {reason}", stacklevel=user_stacklevel())
        if found is None and folder != ckpt_dir:
            raise FileNotFoundError(f"resume={resume}: no loadable epoch-*.pt checkpoint in that folder")
        best = folder / "best.pt"
        if found is None and (skipped or best.is_file()):  # a fresh start would overwrite and prune them
            _refuse_to_start_over(best, skipped)
        if found is not None and skipped:
            log.info("resume: %d newer checkpoint(s) did not load; resuming from %s", len(skipped), found.name)
        return found, state
    path = Path(resume)
    if not path.is_file():
        raise FileNotFoundError(f"resume={resume}: no such checkpoint file")
    return path, None


def _named_folder(resume: Any, ckpt_dir: Path | None) -> Path | None:
    """The folder whose newest loadable checkpoint ``resume`` continues: ``checkpoint_dir`` for True, a folder
    named as itself; None for a file."""
    folder = ckpt_dir if resume is True or resume == "true" else Path(resume)
    return folder if folder is not None and folder.is_dir() else None


def _refuse_to_start_over(best: Path, skipped: list[str]) -> None:
    """``resume=True`` on a folder whose ``epoch-*.pt`` are there but none loads, or gone while ``best.pt`` loads
    (its sha256 checked): a fresh run would overwrite and prune them, as a new run in a used folder would (and is
    refused), so the error says why each was skipped and, where ``best.pt`` loads, how to continue from it. A
    folder that holds only a ``best.pt`` that does not load keeps nothing of value: a fresh start, as when empty."""
    try:
        epoch = ckpt_mod.read_checkpoint(best)["epoch"] if best.is_file() else None
    except ckpt_mod.CheckpointError:
        if not skipped:
            return
        epoch = None
    why = f"none of its {len(skipped)} epoch checkpoint(s) loads ({'; '.join(skipped)})" if skipped \
        else "it holds no epoch-*.pt"
    way = f", but {best.name} (epoch {epoch}) loads: resume=\"{best}\" continues from it" if epoch is not None \
        else f", nor does {best.name}" if best.is_file() else ""
    raise ckpt_mod.CheckpointError(
        f"resume: {best.parent} cannot be continued where it stopped: {why}{way}. The run is not started over on "
        "top of them; to start over, use another checkpoint_dir or remove the folder's files")
