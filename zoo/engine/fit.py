"""The supervised training loop shared by every family: :func:`fit` and :func:`evaluate`.

One loop for ResNet18, the Seq2Seq models, the hyperspectral CNN and the video models. What it does, in
the order a batch meets it: train mode; batch to device (channels_last if asked); forward + loss under
autocast (``amp="auto"``: bf16 where the hardware runs it fast, else fp32; fp16 with a grad scaler on
CUDA); NaN/inf guard; backward of loss / accumulation window (DDP gradient sync only on the window's
last micro-batch); unscale + clip; optimizer step; per-batch schedule step. Per epoch: per-epoch
schedule step, validation under ``torch.inference_mode()`` in eval mode, callbacks, best/early-stopping
bookkeeping, checkpoint, CSV log.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from zoo.engine import checkpoint as ckpt_mod
from zoo.engine import metrics as metrics_mod
from zoo.engine.callbacks import Callback, GradualUnfreeze, TrainState
from zoo.engine.data import move_batch, prepare_loader, set_loader_epoch, split_batch
from zoo.engine.distributed import (
    DistInfo,
    all_gather_objects,
    all_reduce_mean,
    barrier,
    broadcast_object,
    dist_info,
    init_distributed,
    wrap_ddp,
)
from zoo.engine.precision import model_op_kind, resolve_amp
from zoo.engine.schedules import build_schedule
from zoo.engine.seed import get_rng_state, set_rng_state, set_seed

__all__ = ["NonFiniteLossError", "TrainResult", "evaluate", "fit"]

_OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "adamw": torch.optim.AdamW,
    "adam": torch.optim.Adam,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}
_TOPK = re.compile(r"^top(\d+)$")


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or inf; the message names the epoch, batch, step and last good checkpoint."""


@dataclass
class TrainResult:
    """What a training run returns (``zoo.train`` gives the same for every kind of model).

    ``history``: one dict per epoch (``epoch``, ``train_loss``, ``lr``, ``val_*``, ...);
    ``best_metric`` / ``best_epoch``: the monitored metric's best value and its 1-based epoch;
    ``checkpoint_path``: ``best.pt`` when checkpoints were written (else the last one, else None);
    ``model``: the trained model (its weights after the last epoch).
    """

    history: list[dict[str, Any]]
    best_metric: float | None
    best_epoch: int | None
    checkpoint_path: Path | None
    model: Any
    monitor: str | None = None
    stopped_early: bool = False

    @property
    def last(self) -> dict[str, Any]:
        """The last epoch's row (empty when nothing was trained)."""
        return self.history[-1] if self.history else {}


# ----------------------------------------------------------------------------------------------- helpers
def _autocast(amp: str | None, device: torch.device) -> contextlib.AbstractContextManager:
    if amp is None:
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def _check_amp(amp: Any, device: torch.device, model: nn.Module | None = None) -> str | None:
    # "auto": bf16 only where this device computes the model's kind of op faster in it (zoo.engine.precision)
    op = model_op_kind(model) if model is not None else "matmul"
    amp = resolve_amp(amp, device, op=op)
    if amp == "fp16" and device.type != "cuda":
        raise ValueError(f"amp='fp16' needs a CUDA device (a grad scaler guards fp16 gradients), got "
                         f"device={device}; use amp='bf16' on CPU")
    return amp


def _default_loss(label_smoothing: float) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs, targets, label_smoothing=label_smoothing)

    return loss


def _forward(model: nn.Module, batch: Any, forward_fn: Callable | None) -> tuple[Any, Any]:
    if forward_fn is not None:
        out = forward_fn(model, batch)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"forward_fn must return (outputs, targets), got {type(out).__name__}")
        return out[0], out[1]
    inputs, targets = split_batch(batch)
    if isinstance(inputs, dict):
        return model(**inputs), targets
    if isinstance(inputs, (tuple, list)):
        return model(*inputs), targets
    return model(inputs), targets


def _build_optimizer(
    optimizer: Any, model: nn.Module, param_groups: Sequence[dict[str, Any]] | None, lr: float,
    weight_decay: float, options: dict[str, Any] | None,
) -> torch.optim.Optimizer:
    if isinstance(optimizer, torch.optim.Optimizer):
        if param_groups is not None:
            raise ValueError("param_groups is for optimizers fit builds; a ready optimizer has its own groups")
        owned = {id(p) for p in model.parameters()}
        foreign = [i for i, g in enumerate(optimizer.param_groups) for p in g["params"] if id(p) not in owned]
        if foreign:
            raise ValueError("the optimizer holds parameters that are not the model's (built on another copy?)")
        return optimizer
    if param_groups is None:
        groups: list[dict[str, Any]] = [{"params": list(model.parameters())}]
    else:
        groups = []
        for i, g in enumerate(param_groups):
            if not isinstance(g, dict) or "params" not in g:
                raise TypeError(f"param_groups[{i}] must be a dict with a 'params' key (torch optimizer "
                                f"group), got {type(g).__name__}")
            params = g["params"]
            params = list(params.parameters()) if isinstance(params, nn.Module) else list(params)
            groups.append({**g, "params": params})
    kwargs = {"lr": lr, "weight_decay": weight_decay, **(options or {})}
    if callable(optimizer) and not isinstance(optimizer, str):
        return optimizer(groups, **kwargs)
    if not isinstance(optimizer, str) or optimizer.lower() not in _OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; expected one of {sorted(_OPTIMIZERS)}, a torch "
                         "Optimizer or a callable(param_groups, lr=..., weight_decay=...)")
    return _OPTIMIZERS[optimizer.lower()](groups, **kwargs)


def _metric_keys(metrics: Iterable[str]) -> list[str]:
    known = {"accuracy", "average_accuracy", "balanced_accuracy", "kappa", "per_class_recall"}
    out = list(metrics)
    for m in out:
        if not isinstance(m, str) or (m not in known and not _TOPK.match(m)):
            raise ValueError(f"unknown metric {m!r}; expected some of {sorted(known)} or 'topK' (e.g. 'top5'); "
                             "family metrics (BLEU, OA/AA) go in eval_fn")
    return out


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


# --------------------------------------------------------------------------------------------- evaluate
@torch.inference_mode()
def _evaluate_loader(
    model: nn.Module, loader: Iterable[Any], *, device: torch.device, forward_fn: Callable | None,
    loss_fn: Callable, metrics: list[str], amp: str | None, channels_last: bool, progress: bool,
    desc: str = "eval",
) -> dict[str, float]:
    from tqdm.auto import tqdm

    was_training = model.training
    model.eval()
    kmax = max([1] + [int(m.group(1)) for k in metrics if (m := _TOPK.match(k))])
    loss_sum = torch.zeros((), dtype=torch.float64)
    count = 0
    preds: list[torch.Tensor] = []
    targs: list[torch.Tensor] = []
    num_classes = 0
    try:
        for batch in tqdm(loader, desc=desc, disable=not progress, leave=False, dynamic_ncols=True):
            batch = move_batch(batch, device, channels_last)
            with _autocast(amp, device):
                outputs, targets = _forward(model, batch, forward_fn)
                loss = loss_fn(outputs, targets)
            n = _num_scored(targets)
            loss_sum += loss.detach().double().cpu() * n
            count += n
            if metrics:
                scores, y = _scores_targets(outputs, targets)
                num_classes = max(num_classes, scores.shape[1])
                preds.append(scores.topk(min(kmax, scores.shape[1]), dim=1).indices.cpu())
                targs.append(y.cpu())
    finally:
        model.train(was_training)
    gathered = all_gather_objects((float(loss_sum), count, preds, targs, num_classes))
    loss_total = sum(g[0] for g in gathered)
    count = sum(g[1] for g in gathered)
    out: dict[str, float] = {"loss": loss_total / count if count else float("nan")}
    if metrics:
        p = torch.cat([t for g in gathered for t in g[2]]) if count else torch.zeros((0, 1), dtype=torch.long)
        y = torch.cat([t for g in gathered for t in g[3]]) if count else torch.zeros((0,), dtype=torch.long)
        num_classes = max(g[4] for g in gathered)
        out.update(_metrics_from_topk(p, y, num_classes, metrics))
    return out


def _num_scored(targets: Any) -> int:
    if isinstance(targets, torch.Tensor):
        if not targets.is_floating_point():
            return int((targets != metrics_mod.IGNORE_INDEX).sum())
        return int(targets.shape[0]) if targets.dim() else 1
    return len(targets)


def _scores_targets(outputs: Any, targets: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs ``(N, C)`` / ``(N, C, *)`` and integer targets -> scores ``(M, C)``, targets ``(M,)``."""
    if not isinstance(outputs, torch.Tensor) or not isinstance(targets, torch.Tensor) \
            or targets.is_floating_point():
        raise TypeError("classification metrics need tensor outputs and integer class targets; for other tasks "
                        "pass metrics=() (and eval_fn for your own metrics)")
    if outputs.dim() != targets.dim() + 1:
        raise ValueError(f"outputs of shape {tuple(outputs.shape)} do not match targets {tuple(targets.shape)}: "
                         "expected (N, C) scores for (N,) targets, or (N, C, ...) for (N, ...)")
    scores = outputs.movedim(1, -1).reshape(-1, outputs.shape[1]) if outputs.dim() > 2 else outputs
    y = targets.reshape(-1)
    keep = y != metrics_mod.IGNORE_INDEX
    return scores[keep].float(), y[keep].long()


def _metrics_from_topk(top: torch.Tensor, y: torch.Tensor, num_classes: int, metrics: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    cm = None
    for name in metrics:
        m = _TOPK.match(name)
        if name == "accuracy":
            out[name] = float((top[:, 0] == y).double().mean()) if len(y) else float("nan")
        elif m:
            k = int(m.group(1))
            out[name] = float((top[:, :k] == y[:, None]).any(1).double().mean()) if len(y) else float("nan")
        else:
            if cm is None:
                cm = metrics_mod.confusion_matrix(top[:, 0], y, num_classes=num_classes)
            if name in ("average_accuracy", "balanced_accuracy"):
                out[name] = metrics_mod.average_accuracy(cm)
            elif name == "kappa":
                out[name] = metrics_mod.cohen_kappa(cm)
            elif name == "per_class_recall":
                out.update({f"recall_{i}": float(r) for i, r in enumerate(metrics_mod.per_class_recall(cm))})
    return out


def evaluate(
    model: nn.Module,
    data: Any,
    *,
    batch_size: int = 64,
    forward_fn: Callable[[nn.Module, Any], tuple[Any, Any]] | None = None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    label_smoothing: float = 0.0,
    metrics: Sequence[str] = ("accuracy",),
    amp: str | None = "auto",
    device: str | torch.device = "cpu",
    channels_last: bool = False,
    num_workers: int = 0,
    collate_fn: Any = None,
    eval_fn: Callable[[nn.Module, Any], dict[str, float]] | None = None,
    progress: bool = False,
) -> dict[str, float]:
    """Loss and metrics of ``model`` on ``data``, in eval mode under ``torch.inference_mode()``.

    ``metrics``: ``"accuracy"``, ``"topK"`` (``"top5"``), ``"average_accuracy"`` (= balanced accuracy),
    ``"kappa"``, ``"per_class_recall"`` (-> ``recall_0``, ``recall_1``, ...). ``eval_fn(model, data)``
    adds family metrics. Under DDP each rank scores its shard and the results are gathered.
    The model's train/eval mode is restored afterwards.
    """
    device = torch.device(device)
    amp = _check_amp(amp, device, model)
    keys = _metric_keys(metrics)
    loader = prepare_loader(data, batch_size=batch_size, shuffle=False, num_workers=num_workers,
                            collate_fn=collate_fn, dist=dist_info())
    model.to(device)
    out = _evaluate_loader(model, loader, device=device, forward_fn=forward_fn,
                           loss_fn=loss_fn or _default_loss(label_smoothing), metrics=keys, amp=amp,
                           channels_last=channels_last, progress=progress)
    if eval_fn is not None:
        out.update(_call_eval_fn(eval_fn, model, data))
    return out


def _call_eval_fn(eval_fn: Callable, model: nn.Module, data: Any) -> dict[str, float]:
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            extra = eval_fn(model, data)
    finally:
        model.train(was_training)
    if not isinstance(extra, dict):
        raise TypeError(f"eval_fn must return a dict of metrics, got {type(extra).__name__}")
    return {str(k): float(v) for k, v in extra.items()}


# -------------------------------------------------------------------------------------------------- fit
def fit(
    model: nn.Module,
    train_data: Any,
    val_data: Any = None,
    *,
    epochs: int = 1,
    batch_size: int = 32,
    optimizer: str | torch.optim.Optimizer | Callable[..., torch.optim.Optimizer] = "adamw",
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    param_groups: Sequence[dict[str, Any]] | None = None,
    optimizer_options: dict[str, Any] | None = None,
    schedule: str | Callable[..., Any] | None = None,
    schedule_options: dict[str, Any] | None = None,
    warmup_steps: int = 0,
    amp: str | None = "auto",
    grad_accum_steps: int = 1,
    clip_grad_norm: float | None = None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    label_smoothing: float = 0.0,
    forward_fn: Callable[[nn.Module, Any], tuple[Any, Any]] | None = None,
    metrics: Sequence[str] = ("accuracy",),
    monitor: str = "val_loss",
    monitor_mode: str | None = None,
    early_stopping_patience: int | None = None,
    early_stopping_min_delta: float = 0.0,
    checkpoint_dir: str | Path | None = None,
    keep_last: int = 2,
    resume: bool | str | Path | None = None,
    seed: int = 0,
    deterministic: bool = False,
    device: str | torch.device = "cpu",
    channels_last: bool = False,
    callbacks: Sequence[Callback] = (),
    progress: bool = True,
    log_dir: str | Path | None = None,
    overfit_batches: int = 0,
    num_workers: int = 0,
    collate_fn: Any = None,
    eval_fn: Callable[[nn.Module, Any], dict[str, float]] | None = None,
    drop_last: bool = False,
    config: dict[str, Any] | None = None,
) -> TrainResult:
    """Train ``model`` on ``train_data`` (a Dataset, ``(X, y)`` tensors or a DataLoader); see module docs.

    Batches are ``(inputs, targets)``: ``model(inputs)`` (``model(*inputs)`` for a tuple,
    ``model(**inputs)`` for a dict); ``forward_fn(model, batch) -> (outputs, targets)`` overrides that.
    The loss defaults to cross entropy (``label_smoothing``, targets == -100 ignored).

    Key options: ``batch_size`` is per process (DDP's global batch is ``batch_size * WORLD_SIZE``);
    ``grad_accum_steps`` sums gradients of that many batches before a step (equal to the larger batch for
    mean-reduced losses); ``param_groups`` are torch optimizer groups (their own ``lr`` is kept, every
    schedule scales each group's lr); ``schedule`` is ``"step"`` (per epoch), ``"cosine"``,
    ``"onecycle"``, ``"inverse_sqrt"``, ``"linear"`` (per batch, see :mod:`zoo.engine.schedules`);
    ``amp`` is ``"auto"`` (default: bf16 where this device computes it fast, else fp32; see
    :mod:`zoo.engine.precision`), ``"bf16"``, ``"fp16"`` (CUDA, with a grad scaler) or None; ``monitor`` is
    any key of a history row (``"val_loss"``, ``"val_accuracy"``, ``"val_bleu"`` from ``eval_fn``; without
    validation data the default becomes ``"train_loss"``), ``monitor_mode`` ``"min"``/``"max"`` (default:
    min for names containing "loss", else max); ``checkpoint_dir`` keeps ``epoch-NNNN.pt`` (last
    ``keep_last``) and ``best.pt``; ``resume`` is True (latest in ``checkpoint_dir``) or a checkpoint path,
    and reproduces the uninterrupted run exactly on CPU; ``overfit_batches=N`` trains and validates on
    the first N batches only (a sanity check: a model that cannot overfit them has a bug);
    ``log_dir`` (default: ``checkpoint_dir``) receives ``metrics.csv`` and ``learning_curves.png``.
    Run under ``torchrun --nproc_per_node=N`` for DistributedDataParallel (rank 0 writes files).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"fit trains an nn.Module, got {type(model).__name__}")
    if not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be an int >= 0, got {epochs!r}")
    if not isinstance(grad_accum_steps, int) or grad_accum_steps < 1:
        raise ValueError(f"grad_accum_steps must be an int >= 1, got {grad_accum_steps!r}")
    if clip_grad_norm is not None and not clip_grad_norm > 0:
        raise ValueError(f"clip_grad_norm must be > 0 or None, got {clip_grad_norm!r}")
    if overfit_batches < 0:
        raise ValueError(f"overfit_batches must be >= 0, got {overfit_batches}")
    if monitor_mode not in (None, "min", "max"):
        raise ValueError(f"monitor_mode must be 'min', 'max' or None, got {monitor_mode!r}")
    if resume and checkpoint_dir is None and (resume is True or resume == "true"):
        raise ValueError("resume=True resumes from checkpoint_dir; give checkpoint_dir (or a checkpoint path)")
    metric_keys = _metric_keys(metrics)
    callbacks = list(callbacks)
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise TypeError(f"callbacks must be zoo.engine.Callback instances, got {type(cb).__name__}")
    args = dict(locals())
    args.pop("cb", None)
    run_config = {k: v for k, v in args.items()
                  if k not in ("model", "train_data", "val_data", "callbacks", "config", "metric_keys")}
    run_config.update(config or {})

    info, dev, _ = init_distributed(device)
    args.pop("device")
    return _fit(**args, run_config=run_config, info=info, dev=dev)


def _fit(
    *, model: nn.Module, train_data: Any, val_data: Any, epochs: int, batch_size: int, optimizer: Any,
    lr: float, weight_decay: float, param_groups: Any, optimizer_options: Any, schedule: Any,
    schedule_options: Any, warmup_steps: int, amp: Any, grad_accum_steps: int, clip_grad_norm: float | None,
    loss_fn: Any, label_smoothing: float, forward_fn: Any, metrics: Any, monitor: str, monitor_mode: str | None,
    early_stopping_patience: int | None, early_stopping_min_delta: float, checkpoint_dir: Any,
    keep_last: int, resume: Any, seed: int, deterministic: bool, channels_last: bool,
    callbacks: list[Callback], progress: bool, log_dir: Any, overfit_batches: int, num_workers: int,
    collate_fn: Any, eval_fn: Any, drop_last: bool, config: Any, metric_keys: list[str],
    run_config: dict[str, Any], info: DistInfo, dev: torch.device,
) -> TrainResult:
    from tqdm.auto import tqdm

    amp = _check_amp(amp, dev, model)
    run_config["precision"] = amp or "fp32"  # what "auto" became on this machine
    set_seed(seed + info.rank, deterministic)
    loss_fn = loss_fn or _default_loss(label_smoothing)
    model.to(dev)
    if channels_last:
        model.to(memory_format=torch.channels_last)

    # ---- data
    train_loader: Any = prepare_loader(train_data, batch_size=batch_size, shuffle=overfit_batches == 0,
                                       seed=seed, num_workers=num_workers, collate_fn=collate_fn,
                                       drop_last=drop_last, dist=info)
    val_loader: Any = None
    if overfit_batches:
        fixed = list(itertools.islice(iter(train_loader), overfit_batches))
        if len(fixed) < overfit_batches:
            warnings.warn(f"overfit_batches={overfit_batches} but the data has only {len(fixed)} batches",
                          stacklevel=3)
        train_loader = val_loader = fixed
    elif val_data is not None:
        val_loader = prepare_loader(val_data, batch_size=batch_size, shuffle=False, num_workers=num_workers,
                                    collate_fn=collate_fn, dist=info)
    try:
        n_batches: int | None = len(train_loader)
    except TypeError:
        n_batches = None
    if n_batches == 0:
        raise ValueError("the training data gave no batches (empty dataset, or drop_last with too few samples)")

    # ---- optimisation
    opt = _build_optimizer(optimizer, model, param_groups, lr, weight_decay, optimizer_options)
    steps_per_epoch = math.ceil(n_batches / grad_accum_steps) if n_batches else 0
    spec = None
    if schedule is not None or warmup_steps:
        if not n_batches:
            raise ValueError("a schedule needs the number of batches per epoch; this DataLoader has no len()")
        spec = build_schedule(opt, schedule, total_steps=max(1, steps_per_epoch * epochs),
                              steps_per_epoch=steps_per_epoch, warmup_steps=warmup_steps,
                              options=schedule_options)
    elif schedule_options:
        raise ValueError("schedule_options given without a schedule")
    scheduler = spec.scheduler if spec else None
    scaler = torch.amp.GradScaler("cuda", enabled=amp == "fp16")

    # ---- monitoring
    has_val = val_loader is not None or eval_fn is not None
    if monitor == "val_loss" and not has_val:
        monitor = "train_loss"
    mode = monitor_mode or ("min" if "loss" in monitor else "max")
    best_metric: float | None = None
    best_epoch: int | None = None
    bad_epochs = 0
    history: list[dict[str, Any]] = []
    start_epoch = 0
    step = 0
    stopped_early = False
    ckpt_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
    last_ckpt: Path | None = None

    # ---- resume (before DDP wraps the model; every rank reads the same file)
    if resume:
        # Rank 0 picks the file so that every rank resumes from the same one.
        path = broadcast_object(_resume_path(resume, ckpt_dir) if info.is_main else None)
        if path is None:
            if info.is_main:
                print(f"resume: no checkpoint in {ckpt_dir} yet, starting from scratch")
        else:
            state = ckpt_mod.load_checkpoint(path, model, opt, scheduler, scaler, map_location=dev)
            start_epoch, step = state["epoch"], state["step"]
            best_metric, best_epoch = state["best_metric"], state["best_epoch"]
            history = list(state["history"])
            extra = state.get("extra") or {}
            bad_epochs = int(extra.get("bad_epochs", 0))
            stopped_early = bool(extra.get("stopped_early", False))
            last_ckpt = Path(path)
            rng = state.get("rng")
            if isinstance(rng, list):
                if len(rng) != info.world_size:
                    warnings.warn(f"checkpoint has RNG states of {len(rng)} ranks, this run has "
                                  f"{info.world_size}: random streams will differ from the original run",
                                  stacklevel=3)
                rng = rng[info.rank] if info.rank < len(rng) else rng[0]
            if rng is not None:
                set_rng_state(rng)

    if info.enabled and any(isinstance(cb, GradualUnfreeze) and max(cb.schedule) > 0 for cb in callbacks):
        raise ValueError("GradualUnfreeze with later epochs is not supported under DDP (DDP fixes the trained "
                         "parameters when it wraps the model); unfreeze at epoch 0 or train in one process")
    net: nn.Module = wrap_ddp(model, dev) if info.enabled else model
    out_dir = Path(log_dir) if log_dir is not None else ckpt_dir
    logger = None
    if out_dir is not None and info.is_main:
        from zoo.engine.logs import RunLogger

        logger = RunLogger(out_dir)
    tstate = TrainState(model=model, optimizer=opt, scheduler=scheduler, epochs=epochs, epoch=start_epoch,
                        step=step, history=history, rank=info.rank, world_size=info.world_size)
    params = [p for g in opt.param_groups for p in g["params"]]
    track_acc = "accuracy" in metric_keys
    first_loss: float | None = None

    for cb in callbacks:
        cb.on_train_start(tstate)
    try:
        for epoch in range(start_epoch, epochs if not stopped_early else start_epoch):
            tstate.epoch = epoch
            t0 = time.perf_counter()
            net.train()
            set_loader_epoch(train_loader, epoch, seed)
            epoch_lr = opt.param_groups[0]["lr"]  # the lr the epoch starts with (after warmup's first factor)
            for cb in callbacks:
                cb.on_epoch_start(tstate)
            loss_sum = 0.0
            n_seen = 0
            correct = torch.zeros((), dtype=torch.long, device=dev)  # stays on device: no per-batch sync
            n_scored = torch.zeros((), dtype=torch.long, device=dev)
            bar = tqdm(train_loader, total=n_batches, desc=f"epoch {epoch + 1}/{epochs}", leave=False,
                       disable=not (progress and info.is_main), dynamic_ncols=True)
            opt.zero_grad(set_to_none=True)
            for i, batch in enumerate(bar):
                tstate.batch = i
                window_start = i - i % grad_accum_steps
                window = min(grad_accum_steps, n_batches - window_start) if n_batches else grad_accum_steps
                last_micro = i - window_start == window - 1
                batch = move_batch(batch, dev, channels_last)
                sync = contextlib.nullcontext() if (last_micro or not info.enabled) else net.no_sync()
                with sync:
                    with _autocast(amp, dev):
                        outputs, targets = _forward(net, batch, forward_fn)
                        loss = loss_fn(outputs, targets)
                    # One host sync per batch: the NaN guard must see the value (all ranks together).
                    loss_val = float(all_reduce_mean(loss.detach()).item()) if info.enabled else loss.item()
                    if not math.isfinite(loss_val):
                        raise NonFiniteLossError(
                            f"non-finite loss ({loss_val}) at epoch {epoch + 1}, batch {i}, optimizer step "
                            f"{step}: last good checkpoint: "
                            f"{last_ckpt if last_ckpt else 'none written (set checkpoint_dir to keep one)'}. "
                            "Lower lr, add clip_grad_norm, or check the data/targets.")
                    scaled = loss / window if window > 1 else loss
                    scaler.scale(scaled).backward()
                if first_loss is None:
                    first_loss = loss_val
                loss_sum += loss_val
                n_seen += 1
                if track_acc and isinstance(targets, torch.Tensor) and not targets.is_floating_point() \
                        and isinstance(outputs, torch.Tensor) and outputs.dim() == targets.dim() + 1:
                    with torch.no_grad():
                        valid = targets != metrics_mod.IGNORE_INDEX
                        correct += ((outputs.argmax(1) == targets) & valid).sum()
                        n_scored += valid.sum()
                if last_micro:
                    if clip_grad_norm is not None:
                        scaler.unscale_(opt)
                        torch.nn.utils.clip_grad_norm_(params, clip_grad_norm)
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad(set_to_none=True)
                    step += 1
                    tstate.step = step
                    if spec is not None and spec.interval == "batch":
                        scheduler.step()
                if callbacks:
                    logs = {"loss": loss_val, "lr": opt.param_groups[0]["lr"]}
                    for cb in callbacks:
                        cb.on_batch_end(tstate, logs)
                if progress and i % 10 == 0:
                    bar.set_postfix(loss=f"{loss_val:.4g}", refresh=False)
                if tstate.stop_requested:
                    break
            bar.close()

            row: dict[str, Any] = {"epoch": epoch + 1, "train_loss": loss_sum / max(1, n_seen)}
            acc = all_reduce_mean(torch.stack([correct, n_scored]).double())
            if track_acc and float(acc[1]) > 0:
                row["train_accuracy"] = float(acc[0] / acc[1])
            row["lr"] = epoch_lr
            if spec is not None and spec.interval == "epoch":
                scheduler.step()
            if val_loader is not None:
                val = _evaluate_loader(model, val_loader, device=dev, forward_fn=forward_fn, loss_fn=loss_fn,
                                       metrics=metric_keys, amp=amp, channels_last=channels_last,
                                       progress=False)
                row.update({f"val_{k}": v for k, v in val.items()})
            if eval_fn is not None:
                row.update({f"val_{k}": v for k, v in _call_eval_fn(eval_fn, model, val_data).items()})
            row["epoch_time_s"] = time.perf_counter() - t0
            history.append(row)
            for cb in callbacks:
                cb.on_epoch_end(tstate, row)

            # ---- best / early stopping
            if monitor not in row:
                raise ValueError(f"monitor={monitor!r} is not in the epoch's metrics {sorted(row)}")
            value = float(row[monitor])
            improved = math.isfinite(value) and (
                best_metric is None
                or (mode == "min" and value < best_metric - early_stopping_min_delta)
                or (mode == "max" and value > best_metric + early_stopping_min_delta))
            if improved:
                best_metric, best_epoch, bad_epochs = value, epoch + 1, 0
            else:
                bad_epochs += 1
            if early_stopping_patience is not None and bad_epochs >= early_stopping_patience:
                stopped_early = True
                tstate.request_stop(f"early stopping: {monitor} did not improve for {bad_epochs} epochs "
                                    f"(best {best_metric} at epoch {best_epoch})")

            # ---- checkpoint (RNG states of every rank; rank 0 writes)
            if ckpt_dir is not None:
                rng = all_gather_objects(get_rng_state())
                if info.is_main:
                    last_ckpt = ckpt_mod.save_checkpoint(
                        ckpt_dir / ckpt_mod.epoch_checkpoint_name(epoch + 1), model=model, optimizer=opt,
                        scheduler=scheduler, scaler=scaler, epoch=epoch + 1, step=step, best_metric=best_metric,
                        best_epoch=best_epoch, history=history, config=run_config, rng=rng,
                        extra={"bad_epochs": bad_epochs, "stopped_early": stopped_early, "monitor": monitor,
                               "monitor_mode": mode, "world_size": info.world_size})
                    if improved:
                        ckpt_mod.copy_checkpoint(last_ckpt, ckpt_dir / "best.pt")
                    ckpt_mod.prune_checkpoints(ckpt_dir, keep_last)
                else:
                    last_ckpt = ckpt_dir / ckpt_mod.epoch_checkpoint_name(epoch + 1)
                barrier()  # the file exists for every rank before any rank can look for it
            if logger is not None:
                logger.log_epoch(history)
            if progress and info.is_main:
                shown = ", ".join(f"{k} {v:.4g}" for k, v in row.items()
                                  if k not in ("epoch", "epoch_time_s") and isinstance(v, float))
                tqdm.write(f"epoch {epoch + 1}/{epochs}: {shown} ({row['epoch_time_s']:.1f}s)")
            if tstate.stop_requested:
                if info.is_main and progress and tstate.stop_reason:
                    tqdm.write(tstate.stop_reason)
                break
    finally:
        if logger is not None:
            logger.close(history, title=type(model).__name__)

    for cb in callbacks:
        cb.on_train_end(tstate)
    if overfit_batches and history and first_loss is not None and history[-1]["train_loss"] > 0.5 * first_loss:
        warnings.warn(f"overfit_batches={overfit_batches}: train loss went from {first_loss:.4g} to "
                      f"{history[-1]['train_loss']:.4g} only; a model that cannot overfit a few batches "
                      "usually has a bug (or needs more epochs / a higher lr)", stacklevel=3)
    best_file = ckpt_dir / "best.pt" if ckpt_dir is not None else None
    result_path = best_file if best_file is not None and best_file.exists() else last_ckpt
    return TrainResult(history=history, best_metric=best_metric, best_epoch=best_epoch,
                       checkpoint_path=result_path, model=model, monitor=monitor, stopped_early=stopped_early)


def _resume_path(resume: Any, ckpt_dir: Path | None) -> Path | None:
    if resume is True or resume == "true":
        return ckpt_mod.latest_checkpoint(ckpt_dir) if ckpt_dir is not None else None
    path = Path(resume)
    if path.is_dir():
        found = ckpt_mod.latest_checkpoint(path)
        if found is None:
            raise FileNotFoundError(f"resume={resume}: no epoch-*.pt checkpoint in that folder")
        return found
    if not path.is_file():
        raise FileNotFoundError(f"resume={resume}: no such checkpoint file")
    return path
