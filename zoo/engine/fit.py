"""``fit``: the supervised training loop shared by every family, and ``evaluate``.

One loop for ResNet18, the Seq2Seq models, the hyperspectral CNN and the video models. ``fit`` checks
its options (:class:`~zoo.engine.options.FitConfig`), sets up the process group under ``torchrun``,
locks the run's folders, and hands over to :class:`~zoo.engine.trainer.Trainer`, which reads top to
bottom: set-up, resume, then per epoch train / validate / best and early stopping / checkpoint / log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from torch import nn

from zoo.engine.callbacks import Callback
from zoo.engine.data import say_if_called_directly, with_val
from zoo.engine.devices import run_device
from zoo.engine.distributed import DistInfo, init_distributed
from zoo.engine.evaluation import evaluate
from zoo.engine.modes import training_autograd
from zoo.engine.options import FitConfig
from zoo.engine.result import NonFiniteLossError, TrainResult
from zoo.engine.seed import rng_state_kept
from zoo.engine.trainer import Trainer

__all__ = ["FitConfig", "NonFiniteLossError", "TrainResult", "evaluate", "fit"]


def fit(model: nn.Module, train_data: Any, val_data: Any = None, *, callbacks: Sequence[Callback] = (),
        **options: Any) -> TrainResult:
    """Train ``model`` on ``train_data`` (a Dataset, ``(X, y)`` tensors or NumPy arrays, or a DataLoader; or
    training and validation data together, ``{"train": ..., "val": ...}`` or ``(train, val)``: see
    :func:`zoo.engine.data.train_val`); see module docs.

    Batches are ``(inputs, targets)``: ``model(inputs)`` (``model(*inputs)`` for a tuple,
    ``model(**inputs)`` for a dict); ``forward_fn(model, batch) -> (outputs, targets)`` overrides that.
    The loss defaults to cross entropy (``label_smoothing``, targets == -100 ignored).

    Key options: ``batch_size`` is per process (DDP's global batch is ``batch_size * WORLD_SIZE``);
    ``grad_accum_steps`` sums gradients of that many batches before a step, each batch weighted by what its
    mean divided by (:func:`zoo.engine.forward.mean_denominator`: for an ``nn.CrossEntropyLoss`` /
    ``nn.NLLLoss`` its targets' class weights, its ``ignore_index`` left out; for any other loss its scored
    targets, class targets other than -100, else samples), so the step equals the larger batch's whatever the
    batch sizes for a loss whose mean is over those; a window ends every ``grad_accum_steps`` batches and at the
    epoch's last batch, however many batches the epoch has (a sampler's count may change per epoch);
    ``train_loss`` and evaluation's loss are likewise means over the whole set; ``param_groups`` are torch optimizer groups (their own ``lr`` is kept, or
    ``lr_scale`` runs them at that fraction of ``lr``, as timm's; every schedule scales each group's lr); ``schedule`` is ``"step"`` (per epoch), ``"cosine"``,
    ``"onecycle"``, ``"inverse_sqrt"``, ``"linear"`` (per batch, see :mod:`zoo.engine.schedules`);
    ``weight_decay`` applies to weight matrices and kernels, not to biases and normalisation parameters;
    ``amp`` is ``"auto"`` (bf16 where the device computes it fast, else fp32), ``"bf16"`` or ``"fp16"``
    (CUDA, with a grad scaler); ``channels_last`` is ``"auto"`` (channels-last for a network of 2-D or
    of 3-D convolutions, or of both as HybridSN's, training on a CPU of a kind where it was measured no slower in
    the run's precision,
    :mod:`zoo.engine.layout`), True or False; ``monitor`` is any key
    of a history row (``"val_loss"``, ``"val_accuracy"``, ``"val_bleu"`` from ``eval_fn``; without
    validation data the default becomes ``"train_loss"``), ``monitor_mode`` ``"min"``/``"max"`` (default:
    min for a loss or an error such as "mae": :func:`zoo.engine.monitor.default_mode`, else max); ``checkpoint_dir`` keeps ``epoch-NNNN.pt`` (last
    ``keep_last``) and ``best.pt``; ``resume`` is True (latest in ``checkpoint_dir``) or a checkpoint path
    or folder (``checkpoint_dir`` then defaults to its folder: the run goes on where it was),
    and reproduces the uninterrupted run exactly on CPU, also from an epoch a callback's ``request_stop`` ended
    before its last batch, which it finishes (a changed ``lr``, ``epochs`` or patience is applied
    and reported, any other changed setting is refused: :mod:`zoo.engine.resume`); ``overfit_batches=N`` trains and validates on
    the first N batches only (a sanity check: a model that cannot overfit them has a bug);
    ``log_dir`` (default: ``checkpoint_dir``) receives ``metrics.csv`` and ``learning_curves.png``. Every
    option: :class:`~zoo.engine.options.FitConfig`.
    A DataLoader given keeps its own ``batch_size``, ``num_workers``, ``collate_fn`` and ``drop_last``, but its
    ``generator`` and its sampler's (when they have one) are reseeded from ``(seed, epoch)`` every epoch, and its
    sampler's ``set_epoch`` called (:func:`zoo.engine.data.set_loader_epoch`): ``seed`` fixes its shuffle and worker
    seeds, not the seed its generator was made with, so that a run repeats and resumes exactly. Validation loaders'
    generators are reseeded so before each validation, and the workers of a loader with ``persistent_workers=True``
    start afresh each epoch, as fit's own loaders' do (kept, they carry their random draws from one epoch into
    the next, which a resumed run's new workers cannot repeat).
    Run under ``torchrun --nproc_per_node=N`` for DistributedDataParallel (rank 0 writes files).
    """
    say_if_called_directly(train_data, {**options, "val_data": val_data}, "zoo.engine.fit")
    train_data, val_data = with_val(train_data, val_data)  # {"train": ..., "val": ...} or ((X, y), (X_val, y_val))
    if not isinstance(model, nn.Module):
        raise TypeError(f"fit trains an nn.Module, got {type(model).__name__}")
    cfg = FitConfig.from_options(options)
    callbacks = list(callbacks)
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise TypeError(f"callbacks must be zoo.engine.Callback instances, got {type(cb).__name__}")
    if cfg.device is None:  # where the model is: a model on a GPU trains there (recorded as that device)
        cfg.device = str(run_device(model))
    info, dev, _ = init_distributed(cfg.device)
    with _own_folders(cfg.checkpoint_dir, cfg.log_dir, info), _resume_hint(cfg.checkpoint_dir), training_autograd(), \
            rng_state_kept():  # the run seeds the global generators for itself, not for the caller
        return Trainer(model, train_data, val_data, cfg, callbacks, info, dev).run()


@contextlib.contextmanager
def _resume_hint(checkpoint_dir: Any):
    """Ctrl-C (or the `zoo` command's SIGTERM) says which checkpoint continues the run (the epoch in progress
    is lost: a checkpoint is taken only where a resume can continue exactly, at an epoch's end or where a
    callback's ``request_stop`` ended one, never in the middle of a batch)."""
    try:
        yield
    except KeyboardInterrupt as err:
        from zoo._interrupts import stopped_by
        from zoo.engine.checkpoint import latest_checkpoint

        latest = latest_checkpoint(checkpoint_dir) if checkpoint_dir is not None else None
        by = stopped_by(err)
        if by is not None and checkpoint_dir is None:  # said, as TD3's loop says it: else only "interrupted"
            raise KeyboardInterrupt(f"training stopped by {by}; nothing was saved (no checkpoint_dir): give "
                                    "checkpoint_dir= (on the command line --checkpoint-dir DIR, or --set "
                                    "checkpoint_dir=DIR) to be able to continue a run") from None
        if by is None or latest is None:
            raise
        raise KeyboardInterrupt(f"training stopped by {by}; {latest} continues it from its epoch's end "
                                "(resume=True; on the command line, the same command with --resume)") from None


@contextlib.contextmanager
def _own_folders(checkpoint_dir: Any, log_dir: Any, info: DistInfo):
    """The run's folders, locked for its whole life (a second run there fails at once, naming this one),
    after a sweep of temp files that killed runs left in them; one folder under two names (log_dir given
    as checkpoint_dir's absolute path, or through a symlink) is locked once (:func:`zoo.fs.own_folders`).
    Only the main process writes them."""
    from zoo import fs

    named = (("checkpoint_dir", checkpoint_dir), ("log_dir", log_dir)) if info.is_main else ()
    with fs.own_folders(named, "training run"):
        yield
