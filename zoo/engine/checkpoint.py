"""Training checkpoints: one file per checkpoint, atomic, loadable with ``torch.load(weights_only=True)``.

A checkpoint holds everything an exact resume needs: model, optimizer, scheduler and grad-scaler states,
the epoch and optimizer-step counters, the best monitored metric, the per-epoch history, early-stopping
state, the RNG states of every generator (per rank under DDP), and the run's config as a plain dict (fit's
options, the real batch size, and the family's data recipe and architecture: :mod:`zoo.engine.resume`). The
checkpoint of an epoch that ``request_stop`` ended before its last batch also holds, per rank, where inside the
epoch it stopped (``extra["partial_epoch"]``: :mod:`zoo.engine.trainer`), which its resume finishes.
Only tensors, numbers, strings, ``None`` and lists/tuples/dicts of those are stored; never pickled objects.

Files in a checkpoint folder: ``epoch-0007.pt`` (the last ``keep_last`` are kept) and ``best.pt``.
Writes go through :mod:`zoo.fs` (atomic, free space checked against the serialised size before the
first byte, the user's umask). A resume from a folder falls back to the newest *loadable* checkpoint
and says which ones it skipped (where none loads it refuses to start over on top of them; a file the system
will not read is its ``OSError``, not a skipped one). Each checkpoint carries a sha256 of its tensors
(``digest``, checked on every read): bytes flipped inside tensor data unpickle without complaint, so without
it a resume went on from corrupt weights (files written before the digest load as they are).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import pickle
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.engine.layout import match_state_layout
from zoo.wrappers import strip_wrapper_prefixes, unwrap

__all__ = [
    "FORMAT",
    "CheckpointError",
    "check_digest",
    "checkpoint_epoch",
    "copy_checkpoint",
    "epoch_checkpoint_name",
    "epochs_after",
    "latest_checkpoint",
    "load_checkpoint",
    "newest_loadable_checkpoint",
    "plain_config",
    "prune_checkpoints",
    "read_checkpoint",
    "refuse_unstorable_model_state",
    "restore",
    "resumable_checkpoint",
    "save_checkpoint",
    "save_with_digest",
    "tensors_digest",
]

FORMAT = "zoo.checkpoint/1"
_EPOCH_RE = re.compile(r"^epoch-(\d+)\.pt$")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable (empty, truncated, corrupt), not a zoo checkpoint,
    or made for another network (the mismatched keys and shapes are listed)."""


def epoch_checkpoint_name(epoch: int) -> str:
    return f"epoch-{epoch:04d}.pt"


def _plain(v: Any, tensors: bool = True) -> Any:
    """``v`` as data ``weights_only`` loads. NumPy scalars (``np.float64`` is a float subclass) and other
    subclasses of the builtins pickle as their own class, which ``weights_only`` refuses: the whole checkpoint
    would then fail to load, so they become the builtin; an object that is not data becomes its name. With
    ``tensors=False`` (configs, compared with ``!=`` on resume) tensors and arrays become their name too."""
    if v is None:
        return v
    if isinstance(v, np.generic):
        v = v.item()
    for kind in (bool, int, float, str):  # bool first: it is an int
        if isinstance(v, kind):
            return kind(v)
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if tensors and isinstance(v, torch.Tensor):
        return v
    if tensors and isinstance(v, np.ndarray) and v.dtype != object:
        return torch.from_numpy(np.ascontiguousarray(v))
    if isinstance(v, (list, tuple)):
        return [_plain(x, tensors) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x, tensors) for k, x in v.items()}
    if not tensors and isinstance(v, torch.nn.Module):
        return _module_settings(v)
    name = getattr(v, "__qualname__", None) or type(v).__qualname__
    return f"<{name}>"


def _module_settings(module: torch.nn.Module) -> str:
    """A module in a config (a ``loss_fn``) as its class and settings: ``<CrossEntropyLoss(ignore_index=-100,
    reduction='mean', label_smoothing=0.1, weight=[1.0, 9.0])>``, its own plain attributes and buffers (class
    weights: the values up to 16 of them, else shape, dtype and a hash of the bytes). Recorded by name alone, a
    resume with another ``label_smoothing``, class weights or ``reduction`` went on unseen, a different loss
    for the rest of the run. Its submodules' and parameters' states are left out: a loss that holds the network
    (a regulariser) would differ between any two starts of one run."""
    parts = [f"{k}={v!r}" for k, v in vars(module).items()
             if not k.startswith("_") and k != "training" and (v is None or isinstance(v, (bool, int, float, str)))]
    for k, t in module.named_buffers(recurse=False):
        t = t.detach().cpu()
        if t.numel() <= 16:
            parts.append(f"{k}={t.tolist()!r}")
        else:
            digest = hashlib.sha256(t.contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest()[:12]
            parts.append(f"{k}={tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} {digest}")
    return f"<{type(module).__qualname__}({', '.join(parts)})>"


_KEPT = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)
_DROPPED = object()


def _storable(v: Any, where: str, dropped: list[str]) -> Any:
    """An optimizer's or scheduler's state as data ``weights_only`` loads: NumPy scalars (an ``lr=np.float64(...)``
    from a sweep) and subclasses of the builtins (an ``IntEnum``) as builtin values, containers kept as they are
    (``betas`` stays a tuple). A value of any other class (a config object that a ``LambdaLR``'s callable-object
    lambda holds: torch saves its ``__dict__``) is left out, its dict entry with it, and its place added to
    ``dropped``: written, it made every checkpoint of the run one that no resume could load."""
    if isinstance(v, np.generic):
        v = v.item()
    if type(v) in _KEPT or isinstance(v, torch.Tensor):
        return v
    for kind in (bool, int, float, complex, str, bytes):  # bool first: it is an int
        if isinstance(v, kind):
            return kind(v)
    if isinstance(v, (list, tuple, set, frozenset)):
        items = [_storable(x, f"{where}[{i}]", dropped) for i, x in enumerate(v)]
        if any(x is _DROPPED for x in items):
            return _DROPPED  # its entry goes: a list with a hole would load as another list
        return items if isinstance(v, list) else tuple(items) if isinstance(v, tuple) else set(items)
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            place = f"{where}.{k}" if where else str(k)
            if type(k) not in _KEPT:
                dropped.append(f"{place} (a key of type {type(k).__qualname__})")
                continue
            kept = _storable(x, place, dropped)
            if kept is not _DROPPED:
                out[k] = kept
        return out
    dropped.append(f"{where} ({type(v).__qualname__})")
    return _DROPPED


def _storable_state(obj: Any, what: str) -> dict[str, Any]:
    """``obj.state_dict()`` as :func:`_storable` keeps it, with a warning naming what it left out: a resume then
    takes those values from the object the resumed run builds (the same recipe builds the same ones)."""
    dropped: list[str] = []
    state = _storable(obj.state_dict(), "", dropped)
    if dropped:
        warnings.warn(f"checkpoint: the {what}'s state ({type(obj).__name__}) holds objects a checkpoint does not "
                      f"keep (only tensors, numbers, strings and containers of them load with weights_only=True): "
                      f"{', '.join(dropped[:6])}{' ...' if len(dropped) > 6 else ''}. Saved without them; a resume "
                      f"keeps the ones its own {what} is built with. To checkpoint them, hold them as plain values "
                      "(numbers, strings, lists, dicts)", RuntimeWarning,
                      stacklevel=user_stacklevel())
    return state


def refuse_unstorable_model_state(model: torch.nn.Module, state: dict[str, Any] | None = None) -> None:
    """A :class:`CheckpointError` naming the entries of ``model``'s state dict that a checkpoint cannot keep (a
    module's ``get_extra_state`` returning an object of its own class): ``torch.save`` pickles it, and every
    checkpoint of the run then failed ``torch.load(weights_only=True)``, found only at the resume, as 'corrupt'.
    A model's entries cannot be left out (``load_state_dict`` needs them), so the run is refused before it trains."""
    dropped: list[str] = []
    _storable(unwrap(model).state_dict() if state is None else state, "", dropped)
    if dropped:
        raise CheckpointError(
            f"{type(unwrap(model)).__name__}'s state dict holds what a checkpoint cannot keep: {', '.join(dropped[:6])}"
            f"{' ...' if len(dropped) > 6 else ''}. A checkpoint holds tensors, numbers, strings and lists/dicts of "
            "them (torch.load(weights_only=True) refuses other objects, so no resume could read it back): return "
            "plain data from get_extra_state (a dict of numbers and strings: dataclasses.asdict(...)), or train "
            "without checkpoint_dir")


def plain_config(config: dict[str, Any]) -> dict[str, Any]:
    """Keep what ``weights_only`` can load; anything else (a callable, a dataset) becomes its repr string."""
    return {str(k): _plain(v, tensors=False) for k, v in config.items()}


def save_checkpoint(
    path: str | os.PathLike,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    scaler: Any = None,
    epoch: int = 0,
    step: int = 0,
    best_metric: float | None = None,
    best_epoch: int | None = None,
    history: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
    rng: Any = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint atomically through :mod:`zoo.fs` (temp file, fsync, ``os.replace``).

    ``epoch`` is the number of *completed* epochs (with a partial epoch's record in ``extra``, of epochs begun: the
    last one is that partial epoch), ``step`` the number of optimizer steps taken.
    ``rng`` is a :func:`zoo.engine.seed.get_rng_state` dict, or a list of them (one per rank).
    A crash at any point of the write leaves the previous file at ``path`` (if any) intact. The payload
    is serialised in memory first, so a folder without room for it fails before the first byte
    (:class:`zoo.fs.NoSpaceError` naming the folder, the size needed and the size free).
    """
    # the network inside DataParallel / DDP / torch.compile: no wrapper's prefix on its keys (a compiled
    # model's are all '_orig_mod.', which a plain model's load_state_dict refuses)
    weights = unwrap(model).state_dict()
    refuse_unstorable_model_state(model, weights)
    payload: dict[str, Any] = {
        "format": FORMAT,
        "model": weights,
        "optimizer": _storable_state(optimizer, "optimizer") if optimizer is not None else None,
        "scheduler": _storable_state(scheduler, "schedule") if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None and scaler.is_enabled() else None,
        "epoch": int(epoch),
        "step": int(step),
        "best_metric": None if best_metric is None else float(best_metric),
        "best_epoch": best_epoch,
        "history": [_plain(row) for row in history or []],  # callbacks may add NumPy values to rows
        "config": plain_config(config or {}),
        "rng": rng,
        "extra": _plain(extra or {}),
    }
    return save_with_digest(payload, path)


def save_with_digest(obj: dict[str, Any], path: str | os.PathLike) -> Path:
    """``torch.save`` of ``obj`` with its :func:`tensors_digest` (checked when read back), written atomically
    through :func:`zoo.fs.write_bytes` (free space checked first, the user's umask)."""
    buf = io.BytesIO()
    torch.save({**obj, "digest": tensors_digest(obj)}, buf)
    return fs.write_bytes(path, buf.getbuffer())


def tensors_digest(obj: Any) -> str:
    """sha256 of every tensor in ``obj`` (nested dicts, lists, tuples; a top-level ``digest`` key is left
    out): its place, dtype, shape and bytes, wherever it lives (a checkpoint read onto a GPU hashes the same)."""
    h = hashlib.sha256()

    def walk(o: Any, where: str) -> None:
        if isinstance(o, torch.Tensor):
            h.update(f"{where}|{o.dtype}|{tuple(o.shape)}\n".encode())
            if o.numel():
                with contextlib.suppress(RuntimeError, TypeError):  # an exotic layout (sparse): its place, dtype, shape
                    h.update(o.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
        elif isinstance(o, dict):
            for k in sorted(o, key=str):  # optimizer states are keyed by ints
                if not (where == "" and k == "digest"):
                    walk(o[k], f"{where}/{k}")
        elif isinstance(o, (list, tuple)):
            for i, x in enumerate(o):
                walk(x, f"{where}/{i}")

    walk(obj, "")
    return h.hexdigest()


def load_checkpoint(
    path: str | os.PathLike,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    scaler: Any = None,
    *,
    map_location: str | torch.device = "cpu",
    strict: bool = True,
    use_ema: bool = False,
) -> dict[str, Any]:
    """Read a checkpoint (``torch.load(weights_only=True)``) and load the given objects from it.

    Returns the whole checkpoint dict (``epoch``, ``step``, ``best_metric``, ``history``, ``rng``, ...).
    RNG states are *not* restored here; :func:`zoo.engine.seed.set_rng_state` does that when wanted.

    A run with ``ema_decay`` checkpoints the raw weights (what a resume continues from) and their
    average (what validation scored and the run returned); ``use_ema=True`` loads the average into
    ``model``, as timm's ``load_checkpoint(..., use_ema=True)``.
    """
    path = Path(path)
    if path.is_dir():
        found = latest_checkpoint(path)
        if found is None:
            raise FileNotFoundError(f"no epoch-*.pt checkpoint in {path}")
        path = found
    ckpt = read_checkpoint(path, map_location)
    if use_ema:
        if optimizer is not None or scheduler is not None or scaler is not None:
            raise ValueError("use_ema=True loads the weight average for inference; a resume continues from the "
                             "raw weights: pass the optimizer, scheduler and scaler without use_ema")
        restore({**ckpt, "model": ema_weights(ckpt, path)}, model, path=path, strict=strict)
        ckpt["path"] = str(path)
    else:
        restore(ckpt, model, optimizer, scheduler, scaler, path=path, strict=strict)
    return ckpt


def ema_weights(ckpt: dict[str, Any], path: str | os.PathLike = "checkpoint") -> dict[str, torch.Tensor]:
    """The weight average a run with ``ema_decay`` checkpointed, as the model's own state dict."""
    ema = (ckpt.get("extra") or {}).get("ema")
    if ema is None:
        raise CheckpointError(f"{path} holds no weight average: it was written by a run without ema_decay "
                              "(load it with use_ema=False)")
    # AveragedModel's state: the model's under "module." plus its own update counter
    return {k.removeprefix("module."): v for k, v in ema.items() if k.startswith("module.")}


# How an optimizer computes, not what it computes: they belong to the machine and the optimizer built for
# it (fit builds fused ones on a CPU, torch's foreach on a GPU), not to the run the checkpoint recorded.
_IMPLEMENTATION = ("fused", "foreach", "capturable", "differentiable")


def _load_optimizer(optimizer: Any, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)``, keeping the optimizer's own implementation flags: torch's
    would take the saved ones, so a run written on a GPU (foreach) would resume on a CPU on the per-tensor
    loop, 3-5x slower than the fused step fit chose there."""
    kept = [{k: group[k] for k in _IMPLEMENTATION if k in group} for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    match_state_layout(optimizer)  # moments saved in another memory layout than the parameters have now
    for group, flags in zip(optimizer.param_groups, kept):
        group.update(flags)
        on_device = bool(group.get("fused") or group.get("capturable"))
        for p in group["params"]:
            # the fused and capturable kernels read the step count on the parameters' device, the others on
            # the host (there a count on a GPU would cost a device sync per parameter a step)
            step = optimizer.state.get(p, {}).get("step")
            where = p.device if on_device else torch.device("cpu")
            if isinstance(step, torch.Tensor) and step.device != where:
                optimizer.state[p]["step"] = step.to(where)


def restore(ckpt: dict[str, Any], model: torch.nn.Module | None = None, optimizer: Any = None, scheduler: Any = None,
            scaler: Any = None, *, path: str | os.PathLike = "checkpoint", strict: bool = True) -> None:
    """Load the given objects from a checkpoint dict already read (:func:`read_checkpoint`)."""
    path = Path(path)
    if model is not None:
        _load_model(unwrap(model), ckpt["model"], path, strict)
    if optimizer is not None:
        if ckpt["optimizer"] is None:
            raise ValueError(f"{path} holds no optimizer state")
        _load_optimizer(optimizer, ckpt["optimizer"])
    if scheduler is not None and ckpt["scheduler"] is not None:
        scheduler.load_state_dict(ckpt["scheduler"])
    if scaler is not None and ckpt["scaler"] is not None:
        scaler.load_state_dict(ckpt["scaler"])
    ckpt["path"] = str(path)


def load_plain(path: str | os.PathLike, map_location: str | torch.device = "cpu", *, what: str = "checkpoint",
               how: str = "") -> Any:
    """``torch.load(path, weights_only=True)``; an empty, truncated or corrupt file is one
    :class:`CheckpointError` naming it (and ``how`` to go on): torch's own errors name no file, and its advice
    (load with ``weights_only=False``) would run whatever code a tampered file names. A whole pickle that holds a
    type ``weights_only`` loading refuses (``torch.save`` of an object of a class of its own) is one too, naming
    that type, not called corrupt: its bytes are fine, it is not a file of plain data. A file the system will not
    read (``EACCES``, ``EIO``) raises that ``OSError`` itself, naming the file: it says nothing of the bytes, and
    calling it corrupt had a resume skip it and start over on top of it."""
    from zoo.hub.state import load_error_reason

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}")
    tail = f"; {how}" if how else ""
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty (0 bytes): not a loadable {what}{tail}")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError, OSError, ...
        # torch's reader seeks before the start of a truncated file (EINVAL): that one is the bytes' fault
        if isinstance(err, OSError) and err.errno not in (None, errno.EINVAL):
            if err.filename is None:  # a failed read names no file
                raise OSError(err.errno, err.strerror or str(err), str(path)) from err
            raise
        refused = _refused_global(err)
        if refused is not None:
            raise CheckpointError(f"{path} is not a loadable {what}: it reads as a pickle, but holds {refused}, a "
                                  "type that loading with weights_only=True refuses (it reads only tensors, numbers, "
                                  "strings and plain containers, so that no code a file names is run; none was): not "
                                  f"a file of plain data, as this package writes them{tail}") from None
        raise CheckpointError(f"{path} is not a loadable {what} (truncated or corrupt; "
                              f"{type(err).__name__}: {load_error_reason(err)}){tail}") from None


# how torch's weights-only unpickler names what it refuses: a global it does not allow (or whose module it blocks),
# a function it will not call, a class it will not make or build
_REFUSALS = (re.compile(r"Unsupported global: GLOBAL ([A-Za-z_][\w.]*) was not an allowed global"),
             re.compile(r"Trying to load unsupported GLOBAL ([A-Za-z_][\w.]*) whose module"),
             re.compile(r"Trying to call reduce for unrecognized function (\S+)"),
             re.compile(r"Can only (?:create new object|build) .* but got <class '([A-Za-z_][\w.]*)'>"))


def _refused_global(err: BaseException) -> str | None:
    """The type or function (``module.Name``) whose refusal by ``weights_only`` loading ``err`` is; None for any
    other failure (bytes the unpickler cannot read: a truncated or corrupt file)."""
    if not isinstance(err, pickle.UnpicklingError):
        return None
    for pattern in _REFUSALS:
        found = pattern.search(str(err))
        if found is not None:
            return found.group(1)
    return None


def read_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The checkpoint dict at ``path``; an empty, truncated or foreign file is a :class:`CheckpointError`."""
    path = Path(path)
    ckpt = load_plain(path, map_location)
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT or not isinstance(ckpt.get("model"), dict):
        raise CheckpointError(f"{path} is not a zoo training checkpoint (expected format {FORMAT!r}, got "
                              f"{ckpt.get('format') if isinstance(ckpt, dict) else type(ckpt).__name__!r})")
    check_digest(ckpt, path)
    return ckpt


def check_digest(state: dict[str, Any], path: str | os.PathLike, what: str = "checkpoint") -> None:
    """Refuse a dict whose tensors no longer match the ``digest`` :func:`tensors_digest` wrote with them
    (one without a digest, written before there was one, passes)."""
    if "digest" in state and state["digest"] != tensors_digest(state):
        raise CheckpointError(f"{path} is corrupt: its tensors no longer match the sha256 written with them "
                              f"(bytes changed on disk after the {what} was written)")


def _load_model(model: torch.nn.Module, sd: dict[str, torch.Tensor], path: Path, strict: bool) -> None:
    """``model.load_state_dict`` with a mismatch named key by key, both shapes, before anything is copied."""
    from zoo.hub.state import shape_text, state_diff

    own = model.state_dict()
    sd = dict(strip_wrapper_prefixes(sd, own))  # written from a wrapped model before checkpoints unwrapped it
    bad = [(k, src, dst) for k, src, dst in state_diff(own, sd)
           if src != dst and (strict or (src is not None and dst is not None))
           and not k.endswith("_extra_state")]  # a module's own extra state (a tokenizer's bytes) has no fixed shape
    if bad:
        shown = "; ".join(f"{k}: checkpoint {shape_text(s)} vs model {shape_text(d)}"
                          for k, s, d in bad[:8]) + (f"; and {len(bad) - 8} more" if len(bad) > 8 else "")
        raise CheckpointError(
            f"{path} was written by a different network than {type(model).__name__}: {shown}. A resume "
            "needs the same architecture and head; to start a new head from these weights, load the model "
            "state with zoo.hub.load_into(model, state, reinit=(...)) or use zoo.finetune")
    model.load_state_dict(sd, strict=strict)


def resumable_checkpoint(folder: str | os.PathLike, map_location: str | torch.device = "cpu"
                         ) -> tuple[Path | None, list[str]]:
    """The newest ``epoch-NNNN.pt`` in ``folder`` that loads, and why each newer one was skipped."""
    path, _, skipped = newest_loadable_checkpoint(folder, map_location)
    return path, skipped


def newest_loadable_checkpoint(folder: str | os.PathLike, map_location: str | torch.device = "cpu"
                               ) -> tuple[Path | None, dict[str, Any] | None, list[str]]:
    """:func:`resumable_checkpoint` with the checkpoint it read (``read_checkpoint``'s dict, digest checked):
    a resume loads and hashes the file it picks once, not once to pick it and again to load it."""
    folder = Path(folder)
    found = sorted(((int(m.group(1)), p) for p in folder.iterdir() if (m := _EPOCH_RE.match(p.name))),
                   reverse=True) if folder.is_dir() else []
    skipped: list[str] = []
    for _, path in found:
        try:
            ckpt = read_checkpoint(path, map_location)
        except CheckpointError as err:
            skipped.append(str(err))
            continue
        return path, ckpt, skipped
    return None, None, skipped


def epochs_after(folder: str | os.PathLike, epoch: int) -> list[Path]:
    """The files of ``folder`` that hold epochs after ``epoch``: its ``epoch-NNNN.pt`` numbered past it, newest
    first, after ``best.pt`` when that holds a later epoch (:func:`checkpoint_epoch`)."""
    folder = Path(folder)
    later = sorted(((int(m.group(1)), p) for p in folder.iterdir() if (m := _EPOCH_RE.match(p.name))
                    and int(m.group(1)) > epoch), reverse=True)
    best = folder / "best.pt"
    held = checkpoint_epoch(best) if best.is_file() else None
    return ([best] if held is not None and held > epoch else []) + [p for _, p in later]


def checkpoint_epoch(path: str | os.PathLike) -> int | None:
    """The ``epoch`` a checkpoint file holds, read without loading its tensors (memory-mapped); None for a
    missing, unreadable or foreign file."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001  (missing, torn, corrupt or not a zip file: none holds a usable epoch)
        return None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT or not isinstance(ckpt.get("epoch"), int):
        return None
    return int(ckpt["epoch"])


def latest_checkpoint(folder: str | os.PathLike) -> Path | None:
    """The ``epoch-NNNN.pt`` with the highest epoch in ``folder`` (temp files of torn writes are ignored)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _EPOCH_RE.match(p.name))]
    return max(found)[1] if found else None


def prune_checkpoints(folder: str | os.PathLike, keep_last: int) -> None:
    """Delete all but the ``keep_last`` newest ``epoch-*.pt`` (``best.pt`` is separate and kept)."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1, got {keep_last}")
    folder = Path(folder)
    found = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _EPOCH_RE.match(p.name)))
    for _, p in found[:-keep_last]:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def copy_checkpoint(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Atomically copy ``src`` onto ``dst`` (used for ``best.pt``), free space checked first."""
    with open(src, "rb") as fin, fs.atomic_write(dst, size=os.fstat(fin.fileno()).st_size) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return Path(dst)

