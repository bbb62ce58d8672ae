"""``Trainer``: one run of :func:`zoo.engine.fit`, in the order a run meets its parts.

Set-up (seed, device, loaders, optimizer and schedule, the monitored metric), resume, then per epoch:
train the batches (forward + loss under autocast, NaN/inf guard, backward over the accumulation window
with DDP syncing only on its last micro-batch, clip, step, per-batch schedule), validate, callbacks,
best/early stopping, checkpoint, log. Each part is a method short enough to read at once; the ones it
calls live in their own modules (``resume``, ``monitor``, ``checkpoint``, ``evaluation``, ``optim``).

An epoch that ``request_stop`` ends before its last batch is checkpointed with what its resume needs to finish
it as the uninterrupted run would have (:meth:`Trainer._partial_epoch_record`): the RNG states as they were when
the epoch's batch iterator was made (the sampler's order and the workers' base seed are drawn then), the batches
trained, the RNG states at the stop, the epoch's running sums and a pending accumulation window's gradients. The
resumed run makes the iterator again from those states, loads and discards the batches trained (so that
augmentation in the main process or in workers advances as it did), puts the stop's states back and trains the
rest (:meth:`Trainer._skip_trained`). A partial epoch moves no epoch-wise state (monitor, best checkpoint, early
stopping, per-epoch and plateau schedules): its resume finishes the epoch and moves them once, as the
uninterrupted run did, and its row replaces the partial one.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import OneCycleLR

from zoo._stacklevel import user_stacklevel
from zoo.engine import checkpoint as ckpt_mod
from zoo.engine.callbacks import Callback, GradualUnfreeze, TrainState, adds_to_rows
from zoo.engine.data import model_dtype, move_batch, prepare_loader, set_eval_loader_epoch, set_loader_epoch
from zoo.engine.denormals import FLUSH_EVERY, floor_output_grad, flush_tiny_moments
from zoo.engine.distributed import (
    DistInfo,
    all_gather_objects,
    all_reduce_mean,
    barrier,
    broadcast_buffers,
    broadcast_object,
    wrap_ddp,
)
from zoo.engine.evaluation import (
    ACCURACY_NAMES,
    call_eval_fn,
    check_class_scores,
    check_not_multi_hot,
    metric_keys,
    score_loader,
)
from zoo.engine.forward import (
    autocast,
    check_amp,
    check_loss_value,
    default_loss,
    forward,
    ignored_class,
    mean_denominator,
)
from zoo.engine.layout import (
    is_channels_first,
    is_view_refusal,
    match_state_layout,
    refuses_channels_last,
    to_channels_first,
    to_channels_last,
    use_channels_last,
)
from zoo.engine.modes import eval_mode
from zoo.engine.monitor import Monitor
from zoo.engine.optim import build_optimizer
from zoo.engine.options import FitConfig
from zoo.engine.precision import precision_record
from zoo.engine.result import NonFiniteLossError, TrainResult
from zoo.engine.resume import PARTIAL_EPOCH, loader_workers, refuse_a_used_folder, resume_fit, run_record
from zoo.engine.schedules import build_schedule
from zoo.engine.seed import get_rng_state, set_rng_state, set_seed
from zoo.wrappers import unwrap

__all__ = ["Trainer"]


class Trainer:
    """Everything one ``fit`` call holds; :meth:`run` trains and returns the :class:`TrainResult`."""

    def __init__(self, model: nn.Module, train_data: Any, val_data: Any, cfg: FitConfig,
                 callbacks: list[Callback], info: DistInfo, dev: torch.device) -> None:
        self.model, self.val_data, self.cfg, self.callbacks, self.info, self.dev = (
            model, val_data, cfg, callbacks, info, dev)
        # every rank runs rank 0's choice: "auto" is decided per machine, and the ranks of a job may span machines
        self.amp = broadcast_object(check_amp(cfg.amp, dev, model, training=True))
        self.metric_keys = metric_keys(cfg.metrics)
        set_seed(cfg.seed + info.rank, cfg.deterministic)
        self.loss_fn = cfg.loss_fn or default_loss(cfg.label_smoothing)
        self.ignored = ignored_class(self.loss_fn)  # targets train_accuracy leaves out, as the loss does
        if cfg.loss_fn is not None and cfg.label_smoothing:  # an option of the default loss: dropped unseen
            warnings.warn(f"fit: label_smoothing={cfg.label_smoothing} is not applied: it is the default loss's "
                          "option and loss_fn is given; pass it to your loss (torch.nn.CrossEntropyLoss("
                          f"label_smoothing={cfg.label_smoothing}))", stacklevel=user_stacklevel())
        model.to(dev)
        self.in_dtype = model_dtype(model)  # float inputs are cast to it: float64 from NumPy feeds a float32 net
        self._setup_data(train_data)
        self._setup_optimization()
        self.monitor = Monitor.create(cfg.monitor, cfg.monitor_mode, cfg.early_stopping_patience,
                                      cfg.early_stopping_min_delta, has_val_data=self.val_loader is not None,
                                      has_eval_fn=cfg.eval_fn is not None,
                                      callbacks_may_add=any(adds_to_rows(cb) for cb in callbacks),
                                      metrics=self.metric_keys if self.val_loader is not None else None,
                                      train_metrics=self.metric_keys)
        if self.schedule is not None and self.schedule.interval == "plateau" and \
                self.scheduler.mode != self.monitor.mode:  # it cut the lr on every epoch accuracy improved
            raise ValueError(f"ReduceLROnPlateau(mode={self.scheduler.mode!r}) steps on monitor={self.monitor.key!r}, "
                             f"which improves as it goes {'down' if self.monitor.mode == 'min' else 'up'}: make it "
                             f"with mode={self.monitor.mode!r}")
        self.history: list[dict[str, Any]] = []
        self.partial: dict[str, Any] | None = None  # a resumed partial epoch: this rank's record of it
        self.targets_checked = False  # targets shaped like the outputs: checked for multi-hot rows once
        self.start_epoch, self.step = 0, 0
        self.ckpt_dir = Path(cfg.checkpoint_dir) if cfg.checkpoint_dir is not None else None
        if self.ckpt_dir is not None:
            refuse_a_used_folder(self.ckpt_dir, cfg.resume)
            ckpt_mod.refuse_unstorable_model_state(model)  # before an epoch trains for checkpoints none can read
        self.last_ckpt: Path | None = None
        self.record = run_record(cfg, train_data)
        self.resumed = self._resume() if cfg.resume else None
        # decided once the precision is (a resume keeps the one its checkpoint was trained in), so that a resumed
        # run computes in the layout the run it continues did
        self.channels_last = use_channels_last(cfg.channels_last, model, dev, self.amp)
        # "auto" gives the caller's model back in the layout it came in (zoo.engine.layout.layout_for)
        self.restore_layout = self.channels_last and cfg.channels_last == "auto" and is_channels_first(model)
        if self.channels_last:
            for module in self._layout_modules():
                to_channels_last(module)
            match_state_layout(self.opt)
        self.probe_layout = self.channels_last and cfg.channels_last == "auto"  # _probe_layout, first batch
        if info.enabled and any(isinstance(cb, GradualUnfreeze) and max(cb.schedule) > 0 for cb in callbacks):
            raise ValueError("GradualUnfreeze with later epochs is not supported under DDP (DDP fixes the trained "
                             "parameters when it wraps the model); unfreeze at epoch 0 or train in one process")
        self.net: nn.Module = wrap_ddp(model, dev) if info.enabled else model
        self.logger = self._run_logger()
        if self.resumed and self.logger is not None:
            # metrics.csv is written after the epoch's checkpoint: a kill between the two leaves it an epoch
            # short of the run it continues, and a resume with nothing left to train never writes that row
            self.logger.restore(self.history)
        self.state = TrainState(model=model, optimizer=self.opt, scheduler=self.scheduler, epochs=cfg.epochs,
                                epoch=self.start_epoch, step=self.step, history=self.history, rank=info.rank,
                                world_size=info.world_size, ema_model=None if self.ema is None else self.ema.module,
                                checkpoint_dir=Path(self.resumed["checkpoint"]).parent if self.resumed else self.ckpt_dir)
        self.params = [p for g in self.opt.param_groups for p in g["params"]]
        self.first_loss: float | None = None

    # -- set-up ---------------------------------------------------------------------------------------------
    def _setup_data(self, train_data: Any) -> None:
        cfg, info = self.cfg, self.info
        pin = self.dev.type == "cuda"  # page-locked batches: move_batch's non_blocking copies then overlap
        self.train_loader: Any = prepare_loader(
            train_data, batch_size=cfg.batch_size, shuffle=cfg.overfit_batches == 0, seed=cfg.seed,
            num_workers=cfg.num_workers, collate_fn=cfg.collate_fn, drop_last=cfg.drop_last, dist=info,
            pin_memory=pin, train=True)
        self.val_loader: Any = None
        if cfg.overfit_batches:
            fixed = list(itertools.islice(iter(self.train_loader), cfg.overfit_batches))
            if len(fixed) < cfg.overfit_batches:
                warnings.warn(f"overfit_batches={cfg.overfit_batches} but the data has only {len(fixed)} batches",
                              stacklevel=user_stacklevel())
            self.train_loader = self.val_loader = fixed
        elif self.val_data is not None:
            self.val_loader = prepare_loader(self.val_data, batch_size=cfg.batch_size, shuffle=False,
                                             num_workers=cfg.num_workers, collate_fn=cfg.collate_fn, dist=info,
                                             pin_memory=pin)
        # the set-up count sizes the schedule; each epoch reads it again (_train_epoch): a sampler's may change
        self.n_batches: int | None = _batch_count(self.train_loader)
        if self.n_batches == 0:
            raise ValueError("the training data gave no batches (empty dataset, or drop_last with too few samples)")
        if self.val_loader is not None and not cfg.overfit_batches:
            _refuse_an_empty_validation_set(self.val_loader)

    def _setup_optimization(self) -> None:
        cfg = self.cfg
        self.opt = build_optimizer(cfg.optimizer, self.model, cfg.param_groups, cfg.lr, cfg.weight_decay,
                                   cfg.optimizer_options)
        steps_per_epoch = math.ceil(self.n_batches / cfg.grad_accum_steps) if self.n_batches else 0
        self.schedule = None
        if cfg.schedule is not None or cfg.warmup_steps:
            if not self.n_batches and cfg.schedule not in (None, "inverse_sqrt"):  # those two need no run length
                raise ValueError(f"schedule={cfg.schedule!r} runs over the run's length, which needs the number of "
                                 "batches per epoch, and this DataLoader has no len() (a streaming data set): use "
                                 "warmup_steps alone or schedule='inverse_sqrt', or give the data set a __len__")
            self.schedule = build_schedule(self.opt, cfg.schedule, total_steps=max(1, steps_per_epoch * cfg.epochs),
                                           steps_per_epoch=steps_per_epoch, warmup_steps=cfg.warmup_steps,
                                           options=cfg.schedule_options)
        elif cfg.schedule_options:
            raise ValueError("schedule_options given without a schedule")
        self.scheduler = self.schedule.scheduler if self.schedule else None
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp == "fp16")
        self.ema = None
        if cfg.ema_decay is not None:
            from zoo.engine.ema import averaged_model

            self.ema = averaged_model(self.model, cfg.ema_decay)

    def _run_logger(self) -> Any:
        out_dir = Path(self.cfg.log_dir) if self.cfg.log_dir is not None else self.ckpt_dir
        if out_dir is None or not self.info.is_main:
            return None
        from zoo.engine.logs import RunLogger

        return RunLogger(out_dir)

    # -- resume ---------------------------------------------------------------------------------------------
    def _resume(self) -> dict[str, Any] | None:
        """The checkpoint ``resume`` names, read back into this run (:func:`zoo.engine.resume.resume_fit`): the
        run goes on from its epoch and step, in the precision it was trained in."""
        resumed = resume_fit(self)
        if resumed is None:
            return None
        self.start_epoch, self.step, self.amp = resumed.next_epoch, resumed.step, resumed.amp
        self.partial = resumed.partial  # the epoch to finish (its batches trained skipped), or None
        self.last_ckpt = resumed.checkpoint
        return {"checkpoint": resumed.checkpoint, "changed": resumed.changed}

    # -- the run --------------------------------------------------------------------------------------------
    def _layout_modules(self) -> list[nn.Module]:
        return [self.model] + ([self.ema.module] if self.ema is not None else [])

    def run(self) -> TrainResult:
        try:
            return self._run()
        finally:
            if self.restore_layout:
                for module in self._layout_modules():
                    to_channels_first(module)

    def _run(self) -> TrainResult:
        for cb in self.callbacks:
            cb.on_train_start(self.state)
        if self.cfg.epochs > self.start_epoch and not any(p.requires_grad for p in self.model.parameters()):
            # (callbacks such as GradualUnfreeze have set what trains) else the first backward fails, saying
            # "element 0 of tensors does not require grad"
            raise ValueError("the model has no parameter to train (none with requires_grad=True): unfreeze the "
                             "ones to train (p.requires_grad_(True)); to score a frozen model, zoo.evaluate it")
        try:
            last = self.start_epoch if self.monitor.stopped else self.cfg.epochs
            for epoch in range(self.start_epoch, last):
                row = self._train_epoch(epoch)
                self._end_epoch(epoch, row)
                if self.state.stop_requested:
                    if self.info.is_main and self.cfg.progress and self.state.stop_reason:
                        _write(self.state.stop_reason)
                    break
        finally:
            self._close_logger()
        if self.ema is not None:  # the run ends holding the average (RestoreBest, below, may pick an epoch of it)
            unwrap(self.model).load_state_dict(self.ema.module.state_dict())
        for cb in self.callbacks:
            cb.on_train_end(self.state)
        return self._result()

    def _train_epoch(self, epoch: int) -> dict[str, Any]:
        """One pass over the training batches; the row's ``train_*`` values, ``lr`` and ``step``."""
        from zoo._progress import ProgressBar

        cfg, st = self.cfg, self.state
        st.epoch = epoch
        self.t0 = time.perf_counter()
        self.net.train()
        set_loader_epoch(self.train_loader, epoch, cfg.seed)
        self.n_batches = _batch_count(self.train_loader)  # after set_epoch: this epoch's own (a token budget's)
        self.epoch_lr = self.opt.param_groups[0]["lr"]  # the lr the epoch starts with (after warmup's first factor)
        for cb in self.callbacks:
            cb.on_epoch_start(st)
        # sums stay on the device (no per-batch sync) and are reduced over ranks once, at the epoch's end
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.dev)
        self.n_seen = torch.zeros((), dtype=torch.float64, device=self.dev)
        self.window_scored = torch.zeros((), dtype=torch.float64, device=self.dev)
        self.window_pending = 0
        self.correct = torch.zeros((), dtype=torch.long, device=self.dev)
        self.n_scored = torch.zeros((), dtype=torch.long, device=self.dev)
        bar = ProgressBar(self.train_loader, total=self.n_batches, desc=f"epoch {epoch + 1}/{cfg.epochs}", leave=False,
                   disable=not (cfg.progress and self.info.is_main), dynamic_ncols=True)
        self.opt.zero_grad(set_to_none=True)
        self.batches_done: int | None = None  # set where request_stop ends the epoch before its last batch
        partial, self.partial = self.partial, None  # a resumed partial epoch is finished once
        if partial is not None:  # the iterator drawn from the states the interrupted run drew it from
            set_rng_state(partial["epoch_rng"])
        self.epoch_rng = get_rng_state()  # the sampler's order and workers' base seed are drawn as the iterator is made
        # only a callback's request_stop ends an epoch early, and only then is a held batch's draw state needed: a
        # loader without len() looks ahead at every batch, and the snapshot costs ~50 us
        batches = _LookAhead(bar, keep_rng=bool(self.callbacks))
        first = self._skip_trained(batches, partial) if partial is not None else 0
        for i, batch in enumerate(batches, first):
            st.batch = i
            loss_val = self._train_batch(epoch, i, batch, self._ends_window(i, batches))
            if self.callbacks:
                logs = {"loss": loss_val, "lr": self.opt.param_groups[0]["lr"]}
                for cb in self.callbacks:
                    cb.on_batch_end(st, logs)
                self._agree_on_stop()
            if cfg.progress and i % 10 == 0:
                bar.set_postfix(loss=f"{loss_val:.4g}", refresh=False)
            if st.stop_requested:
                # the states the next batch is drawn with (before the look-ahead below draws it), and those it
                # was drawn with where the look-ahead already held it
                self.stop_rng, held = get_rng_state(), batches.ahead is not None
                if not self._ends_epoch(i, batches):
                    self.batches_done = i + 1
                    self.ahead_rng = batches.ahead_rng if held else None
                break
        else:
            if self.window_pending:  # a loader that ended before the len() it gave, inside an accumulation window
                self._finish_window_sync()
                self._optimizer_step()
        bar.close()
        # every rank's sums together: each rank must see the same train_loss (the monitor may stop on it)
        sums = all_reduce_mean(torch.stack([self.loss_sum, self.n_seen, self.correct.double(),
                                            self.n_scored.double()])).tolist()
        # a mean over what the batches' means divided by (class weights may sum below 1); 0.0 where nothing scored
        train_loss = sums[0] / sums[1] if sums[1] else 0.0
        row: dict[str, Any] = {"epoch": epoch + 1, "step": self.step, "train_loss": train_loss}
        if self.batches_done is not None:  # request_stop from on_batch_end, batches before the epoch's end
            row["batches_trained"] = self.batches_done  # its resume finishes the epoch and replaces this row
        for name in ACCURACY_NAMES:  # each name asked for: monitor="train_overall_accuracy" works too
            if name in self.metric_keys and sums[3] > 0:
                row[f"train_{name}"] = sums[2] / sums[3]
        row["lr"] = self.epoch_lr
        if self.schedule is not None and self.schedule.interval == "epoch" and self.batches_done is None:
            self.scheduler.step()  # once per epoch: a partial one's steps where its resume finishes it
        return row

    def _skip_trained(self, batches: _LookAhead, partial: dict[str, Any]) -> int:
        """The resumed part of an epoch that ``request_stop`` ended after ``partial["batches"]``: those batches
        loaded and discarded (each load draws what it drew then: augmentation in the main process or in the
        workers), the batch the look-ahead then held fetched from the states it was fetched with, the states of
        the stop put back, and the epoch's sums, lr and pending window restored. The index of the next batch."""
        done = int(partial["batches"])
        for n in range(done):
            if next(batches, _END) is _END:
                raise RuntimeError(f"resume: the checkpoint's epoch {self.state.epoch + 1} had trained {done} batches "
                                   f"before request_stop, and this run's training data gives only {n}: expected the "
                                   "data the checkpoint was trained on (the resumed part of the epoch is its rest)")
        if partial.get("ahead_rng") is not None:
            set_rng_state(partial["ahead_rng"])
            batches.ends_after_this()
        set_rng_state(partial["stop_rng"])
        self.epoch_lr = partial["lr"]
        self.loss_sum, self.n_seen, self.correct, self.n_scored = (
            partial["sums"][name].to(self.dev) for name in ("loss_sum", "n_seen", "correct", "n_scored"))
        window = partial.get("window")
        if window is not None:  # the gradients of an accumulation window the stop fell inside
            self.window_pending, self.window_scored = int(window["pending"]), window["scored"].to(self.dev)
            for p, grad in zip(self.params, window["grads"]):
                p.grad = None if grad is None else torch.empty_like(p).copy_(grad)
        return done

    def _partial_epoch_record(self) -> dict[str, Any]:
        """This rank's part of a partial epoch's checkpoint (:meth:`_skip_trained` reads it back): plain data
        and CPU tensors, as ``weights_only`` loading takes them."""
        window = None
        if self.window_pending:
            window = {"pending": self.window_pending, "scored": self.window_scored.detach().cpu(),
                      "grads": [None if p.grad is None else p.grad.detach().cpu() for p in self.params]}
        return {"epoch": self.state.epoch, "batches": self.batches_done, "lr": self.epoch_lr,
                "epoch_rng": self.epoch_rng, "stop_rng": self.stop_rng, "ahead_rng": self.ahead_rng,
                "sums": {"loss_sum": self.loss_sum.detach().cpu(), "n_seen": self.n_seen.detach().cpu(),
                         "correct": self.correct.detach().cpu(), "n_scored": self.n_scored.detach().cpu()},
                "window": window}

    def _ends_epoch(self, i: int, batches: _LookAhead) -> bool:
        """Whether batch ``i`` is the epoch's last: before the count len() gave, no; at or past it, or for a
        loader without len() (a streaming data set, whose stop inside an epoch went unmarked, and its resume
        skipped the rest of that epoch without a word), the next batch is fetched to see."""
        if self.n_batches is not None and i + 1 < self.n_batches:
            return False
        return batches.ends_after_this()

    def _ends_window(self, i: int, batches: _LookAhead) -> bool:
        """Whether batch ``i`` is its accumulation window's last: every ``grad_accum_steps``-th, and the epoch's
        last. That one is found by fetching the next batch early wherever len() cannot say it: a loader without
        len(), or batch ``i`` at or past the count len() gave, which a sampler whose batch count changes per
        epoch may exceed (a batch past it was trained but never stepped). Before that count no batch is fetched
        early, so a loader's random draws interleave with the model's as they always did."""
        accum = self.cfg.grad_accum_steps
        if (i + 1) % accum == 0:
            return True
        if self.n_batches is not None and i + 1 < self.n_batches:
            return False
        return batches.ends_after_this()

    def _train_batch(self, epoch: int, i: int, batch: Any, last_micro: bool) -> float:
        """Forward, loss, NaN guard and backward of one micro-batch; the optimizer step on a window's last."""
        cfg, info = self.cfg, self.info
        accum = cfg.grad_accum_steps
        if self.probe_layout:
            self._probe_layout(batch)
        batch = move_batch(batch, self.dev, self.channels_last, self.in_dtype)
        sync = contextlib.nullcontext() if (last_micro or not info.enabled) else self.net.no_sync()
        with sync:
            with autocast(self.amp, self.dev):
                outputs, targets, loss = self._forward_loss(batch)
            # One host sync per batch (two under DDP): the NaN guard must see the value (all ranks together).
            loss_val = loss.item()
            n = mean_denominator(self.loss_fn, targets)
            if not math.isfinite(loss_val) and float(n) == 0 and (zero := _tied_zero(outputs)) is not None:
                # every target ignored (-100: padding, masked labels) or of class weight 0: 0/0, not a diverged
                # run; the batch adds nothing, through a zero still tied to the outputs so that DDP's ranks all
                # reduce gradients
                loss, loss_val = zero, 0.0
            if info.enabled:
                loss_val = float(all_reduce_mean(loss.detach()).item())
            if not math.isfinite(loss_val):
                raise NonFiniteLossError(
                    f"non-finite loss ({loss_val}) at epoch {epoch + 1}, batch {i}, optimizer step {self.step}: "
                    f"last good checkpoint: {self.last_ckpt or self._no_checkpoint_yet()}. "
                    "Lower lr, add clip_grad_norm, or check the data/targets.")
            self.scaler.scale(self._window_share(loss, n) if accum > 1 else loss).backward()
        if self.first_loss is None:
            self.first_loss = loss_val
        with torch.no_grad():  # the epoch's train_loss is a mean over scored targets, as val_loss
            self.loss_sum += loss.detach().double() * n
            self.n_seen += n
        self._count_correct(outputs, targets)
        if last_micro:
            self._optimizer_step()
        return loss_val

    def _probe_layout(self, batch: Any) -> None:
        """Under ``channels_last="auto"``, before the first step: the forward of its batch channels-last, in eval
        mode without gradients (no BatchNorm statistics moved, no dropout draws, so the run trains as it would
        have). A forward that cannot run so (a ``.view()`` of a convolution's output:
        :func:`zoo.engine.layout.refuses_channels_last`) trains channels-first; any other error is left to the
        training step itself, which raises it in training mode, as without the probe."""
        self.probe_layout = False
        try:
            with eval_mode(self.model), torch.no_grad(), autocast(self.amp, self.dev):
                forward(self.model, move_batch(batch, self.dev, True, self.in_dtype), self.cfg.forward_fn)
        except Exception as err:  # noqa: BLE001 - only the layout's refusal is the probe's business
            if refuses_channels_last(self.model, err):
                self.channels_last = False
                for module in self._layout_modules():
                    to_channels_first(module)
                match_state_layout(self.opt)

    def _forward_loss(self, batch: Any) -> tuple[Any, Any, torch.Tensor]:
        """``(outputs, targets, loss)`` of a training batch; what PyTorch says in its own words about a batch
        BatchNorm cannot normalise, or a loss autograd cannot run backward from, is said with the fix."""
        try:
            outputs, targets = forward(self.net, batch, self.cfg.forward_fn)
        except RuntimeError as err:
            if not (self.channels_last and is_view_refusal(err)):
                raise
            # channels_last=True, or a forward whose training branch alone .view()s (the first batch's try
            # runs eval mode): PyTorch's words name neither the layout nor the fix
            raise RuntimeError(f"{err}: the model trains channels-last (channels_last={self.cfg.channels_last!r}), "
                               "where a convolution's output cannot be .view()ed: flatten it with torch.flatten() or "
                               ".reshape() in the forward, or pass channels_last=False") from err
        except ValueError as err:
            if "Expected more than 1 value per channel when training" not in str(err):
                raise
            raise ValueError(f"{err}: a training batch of one sample reached a BatchNorm layer (an epoch's last "
                             f"batch, when the data size leaves 1 over batch_size={self.cfg.batch_size}): pass "
                             "drop_last=True, or another batch_size") from err
        if self.cfg.flush_tiny_grads:
            floor_output_grad(outputs)
        loss = check_loss_value(self.loss_fn(outputs, targets))
        return outputs, targets, loss

    def _no_checkpoint_yet(self) -> str:
        """What the NaN guard says when no checkpoint precedes the bad step: "set checkpoint_dir" where it is
        set would mislead (the first epoch's end, where the first one is written, has not come)."""
        if self.cfg.checkpoint_dir is None:
            return "none written (set checkpoint_dir to keep one)"
        return f"none written yet in {self.cfg.checkpoint_dir} (the first is written at the first epoch's end)"

    def _window_share(self, loss: torch.Tensor, n: int | torch.Tensor) -> torch.Tensor:
        """``loss`` (a mean over its ``n``: scored targets, or their class weights summed,
        :func:`zoo.engine.forward.mean_denominator`) weighted for an accumulation window: each micro-batch
        by ``n / batch_size``, divided by ``grad_accum_steps``; ``_optimizer_step`` then rescales by the window's
        real total over every rank, so the step equals the one big batch's mean-loss step whatever the
        micro-batch sizes (a short last batch, token counts) or window length. ``batch_size`` is only a
        reference every rank shares (no collective needed); a full batch of samples weighs exactly 1."""
        self.window_pending += 1
        self.window_scored += n
        return loss * (n / self.cfg.batch_size) / self.cfg.grad_accum_steps

    def _finish_window_sync(self) -> None:
        """Average gradients over ranks by hand for a window cut short where DDP's own reduce was skipped
        (``no_sync`` on micro-batches that were not known to be a window's last)."""
        if self.info.enabled:
            for p in self.params:
                if p.grad is not None:
                    p.grad.copy_(all_reduce_mean(p.grad))

    def _rescale_window(self) -> None:
        """Gradients of a finished accumulation window times ``accum * batch_size / scored`` (``scored``: the
        ranks' mean; see ``_window_share``), on the device: exactly 1.0 for full windows of full batches."""
        total = all_reduce_mean(self.window_scored) if self.info.enabled else self.window_scored
        # a window of nothing scored has zero gradients (0 / 1); class weights below 1 are no such window
        factor = self.cfg.grad_accum_steps * self.cfg.batch_size / torch.where(total > 0, total, 1.0)
        grads = [p.grad for p in self.params if p.grad is not None]
        if grads:
            torch._foreach_mul_(grads, factor.to(grads[0].dtype))
        self.window_scored.zero_()
        self.window_pending = 0

    def _count_correct(self, outputs: Any, targets: Any) -> None:
        if ACCURACY_NAMES.isdisjoint(self.metric_keys):
            return
        if isinstance(targets, torch.Tensor) and isinstance(outputs, torch.Tensor):
            if outputs.dim() == 2 and targets.shape == (len(outputs), 1):
                targets = targets.squeeze(1)  # (N, 1) labels, as the default loss reads them (Keras' sparse labels)
            if targets.shape == outputs.shape and outputs.dim() >= 2 and outputs.shape[1] > 1:
                if not self.targets_checked:  # once, at the first batch (not after an epoch, at the first validation)
                    self.targets_checked = True
                    check_not_multi_hot(targets)
                if targets.is_floating_point() or outputs.dim() == 2:
                    # soft labels (mixup, distillation): the class they weigh most, as validation scores them;
                    # one-hot integer labels (Keras' categorical ones): their class
                    targets = targets.argmax(1)
            if not targets.is_floating_point() and outputs.dim() == targets.dim() + 1:
                check_class_scores(outputs)  # at the first batch: a one-output model's argmax is always class 0
                with torch.no_grad():
                    targets = targets.long()  # as the loss reads them: torch compares no uint16/32/64 with a long
                    valid = targets != self.ignored
                    self.correct += ((outputs.argmax(1) == targets) & valid).sum()
                    self.n_scored += valid.sum()
                return
        if self.monitor.key.removeprefix("train_") in ACCURACY_NAMES:  # else the epoch's end finds it missing
            raise ValueError(f"monitor={self.monitor.key!r}: training counts accuracy of class scores (N, C, ...) "
                             "against class indices (N, ...) or class probabilities shaped like the scores, and this "
                             f"batch has outputs {_described(outputs)} and targets {_described(targets)}; monitor "
                             "'train_loss', or a metric of your own from an eval_fn ('val_<name>')")

    def _optimizer_step(self) -> None:
        if self.window_pending:
            self._rescale_window()
        if self.cfg.clip_grad_norm is not None:
            self.scaler.unscale_(self.opt)
            torch.nn.utils.clip_grad_norm_(self.params, self.cfg.clip_grad_norm)
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.update_parameters(self.model)
            if self.info.enabled:  # each rank averaged its own BatchNorm statistics; only rank 0's are saved, so
                broadcast_buffers(self.ema.module)  # a resume (and the other ranks' validation) had other ones
        self.step += 1
        self.state.step = self.step
        if self.cfg.flush_tiny_moments and self.step % FLUSH_EVERY == 0:
            flush_tiny_moments(self.opt)
        if self.schedule is not None and self.schedule.interval == "batch":
            _step_schedule(self.scheduler)

    def _agree_on_stop(self) -> None:
        """Under DDP, a stop that callbacks requested on some ranks only (a time budget each rank measures, a
        callback acting on rank 0) stops every rank, with the reason given: a rank that ran on alone met
        collectives the stopped ones never joined (gloo aborted the job on the mismatch)."""
        if not self.info.enabled:
            return
        st = self.state
        if all_reduce_mean(torch.tensor(float(st.stop_requested), device=self.dev)).item() == 0:
            return
        reasons = all_gather_objects(st.stop_reason if st.stop_requested else None)
        if not st.stop_requested:
            st.request_stop(next((r for r in reasons if r is not None), "stop requested on another rank"))

    def _end_epoch(self, epoch: int, row: dict[str, Any]) -> None:
        """Validation, callbacks, best / early stopping, checkpoint and logs of a finished epoch."""
        cfg = self.cfg
        if self.info.enabled:
            # DDP broadcasts buffers only as a training forward starts, so each rank ended the epoch with the
            # BatchNorm statistics of its own last batches: validated on its shard with another model than the
            # rank 0 one that is saved. Rank 0's, as DDP itself would hand out at the next forward.
            broadcast_buffers(self.model)
        scored = self.state.eval_model
        if self.val_loader is not None:
            # its workers' seeds (and persistent workers) as a function of (seed, epoch): each pass drew the next
            # number of the loader's generator, which a resumed run's fresh loader drew at its first
            set_eval_loader_epoch(self.val_loader, epoch, cfg.seed)
            val, self.state.val_predictions = score_loader(
                scored, self.val_loader, device=self.dev, forward_fn=cfg.forward_fn, loss_fn=self.loss_fn,
                metrics=self.metric_keys, amp=self.amp, channels_last=self.channels_last, progress=False)
            row.update({f"val_{k}": v for k, v in val.items()})
        if cfg.eval_fn is not None:
            row.update({f"val_{k}": v for k, v in call_eval_fn(cfg.eval_fn, scored, self.val_data).items()})
        row["epoch_time_s"] = time.perf_counter() - self.t0
        self.history.append(row)
        for cb in self.callbacks:
            cb.on_epoch_end(self.state, row)
        if self.callbacks:
            self._agree_on_stop()
        # a partial epoch (batches_trained) is no epoch's end to judge: its resume finishes it and judges that
        whole = self.batches_done is None
        improved = self.monitor.update(row) if whole else False
        if whole and self.schedule is not None and self.schedule.interval == "plateau":
            self.scheduler.step(float(row[self.monitor.key]))  # ReduceLROnPlateau: on what this run monitors
        if self.monitor.stopped:
            self.state.request_stop(self.monitor.stop_reason)
        if self.ckpt_dir is not None:
            self._checkpoint(epoch, improved)
        if self.logger is not None:
            self.logger.log_epoch(self.history)
        if cfg.progress and self.info.is_main:
            shown = ", ".join(f"{k} {v:.4g}" for k, v in row.items()
                              if k not in ("epoch", "epoch_time_s") and isinstance(v, float))
            _write(f"epoch {epoch + 1}/{cfg.epochs}: {shown} ({row['epoch_time_s']:.1f}s)")

    def _checkpoint(self, epoch: int, improved: bool) -> None:
        """``epoch-NNNN.pt`` (RNG states of every rank; rank 0 writes), ``best.pt`` when improved, pruning."""
        rng = all_gather_objects(get_rng_state())
        # every rank's: each drew its own batches, dropout and augmentation, and holds its own window's gradients
        partial = all_gather_objects(self._partial_epoch_record()) if self.batches_done is not None else None
        name = ckpt_mod.epoch_checkpoint_name(epoch + 1)
        if self.info.is_main:
            self.last_ckpt = ckpt_mod.save_checkpoint(
                self.ckpt_dir / name, model=self.model, optimizer=self.opt, scheduler=self.scheduler,
                scaler=self.scaler, epoch=epoch + 1, step=self.step, best_metric=self.monitor.best,
                best_epoch=self.monitor.best_epoch, history=self.history, config=self.record, rng=rng,
                extra={**self.monitor.extra(), "world_size": self.info.world_size,
                       "precision": precision_record(self.amp, self.dev),
                       "loader_workers": loader_workers(self.train_loader),  # a resume with others warns
                       **({PARTIAL_EPOCH: partial} if partial is not None else {}),
                       **({"ema": self.ema.state_dict()} if self.ema is not None else {})})
            if improved:
                ckpt_mod.copy_checkpoint(self.last_ckpt, self.ckpt_dir / "best.pt")
            ckpt_mod.prune_checkpoints(self.ckpt_dir, self.cfg.keep_last)
        else:
            self.last_ckpt = self.ckpt_dir / name
        barrier()  # the file exists for every rank before any rank can look for it

    def _close_logger(self) -> None:
        if self.logger is None:
            return
        # a failure that stopped the run matters more than closing its logs (a PNG that cannot be written is
        # only a warning either way: RunLogger.close)
        failing = sys.exc_info()[1]
        try:
            self.logger.close(self.history, title=type(self.model).__name__)
        except OSError:
            if failing is None:
                raise

    def _result(self) -> TrainResult:
        cfg, hist = self.cfg, self.history
        # one epoch's mean against its own first batch says nothing (and warm-up holds the lr near 0 there)
        if cfg.overfit_batches and len(hist) > 1 and self.first_loss is not None and \
                hist[-1]["train_loss"] > 0.5 * self.first_loss:
            warnings.warn(f"overfit_batches={cfg.overfit_batches}: train loss went from {self.first_loss:.4g} to "
                          f"{hist[-1]['train_loss']:.4g} only; a model that cannot overfit a few batches usually has "
                          "a bug (or needs more epochs / a higher lr)", stacklevel=user_stacklevel())
        best_file = self.ckpt_dir / "best.pt" if self.ckpt_dir is not None else None
        path = best_file if best_file is not None and best_file.exists() else self.last_ckpt
        return TrainResult(history=hist, best_metric=self.monitor.best, best_epoch=self.monitor.best_epoch,
                           checkpoint_path=path, model=self.model, monitor=self.monitor.key,
                           stopped_early=self.monitor.stopped, resumed=self.resumed)


def _described(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    return f"of type {type(value).__name__}"


def _batch_count(loader: Any) -> int | None:
    """``len(loader)``; None for a loader without one (an IterableDataset's)."""
    try:
        return len(loader)
    except TypeError:
        return None


_END = object()


class _LookAhead:
    """The batches of an epoch, one of them fetched ahead only when :meth:`ends_after_this` asks."""

    def __init__(self, batches: Any, keep_rng: bool = True) -> None:
        self.batches = iter(batches)
        self.ahead: Any = None  # the next batch (or _END) once fetched early
        # the RNG states it was fetched with (where keep_rng): a stop while it is held checkpoints them
        # (Trainer._skip_trained)
        self.ahead_rng: dict[str, Any] | None = None
        self.keep_rng = keep_rng

    def __iter__(self) -> _LookAhead:
        return self

    def __next__(self) -> Any:
        if self.ahead is None:
            return next(self.batches)
        batch, self.ahead = self.ahead, None
        if batch is _END:
            raise StopIteration
        return batch

    def ends_after_this(self) -> bool:
        """Whether the batch last given is the epoch's last."""
        if self.ahead is None:
            self.ahead_rng = get_rng_state() if self.keep_rng else None
            self.ahead = next(self.batches, _END)
        return self.ahead is _END


def _refuse_an_empty_validation_set(loader: Any) -> None:
    """A validation set of no samples, refused before training as :func:`zoo.engine.evaluate` refuses it: each
    epoch scored it NaN, the warning blamed NaN data or a diverged model, and early stopping cut the run short."""
    dataset = getattr(loader, "dataset", None)
    with contextlib.suppress(TypeError, AttributeError):  # no len(): an IterableDataset, scored as it comes
        if len(dataset) == 0:
            raise ValueError(f"fit: val_data has no samples to score (an empty {type(dataset).__name__}): expected a "
                             "validation set of at least one sample; pass one (a split that came out empty takes a "
                             "larger share or data set), or leave val_data out to monitor train_loss")


def _step_schedule(scheduler: Any) -> None:
    """One optimizer step's step of a per-batch schedule. OneCycleLR is sized in steps from the batch count
    at set-up and refuses a step past its ``total_steps`` ("Tried to step 89 times"), which a run whose
    batch count grows in later epochs (a token-budget sampler) takes: past its end the lr holds there, at its
    last phase's end (each group's ``min_lr``; torch's own value at ``total_steps`` is past that end, below zero
    for ``anneal_strategy="linear"``)."""
    if not isinstance(scheduler, OneCycleLR):
        scheduler.step()
        return
    if scheduler.last_epoch < scheduler.total_steps:
        scheduler.step()
    if scheduler.last_epoch >= scheduler.total_steps:
        for group in scheduler.optimizer.param_groups:
            group["lr"] = group["min_lr"]
        scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]


def _tied_zero(outputs: Any) -> torch.Tensor | None:
    """A zero loss whose backward reaches every parameter the outputs came from (zero gradients), or None
    when the outputs hold no differentiable tensor."""
    if isinstance(outputs, torch.Tensor):
        return outputs.sum() * 0.0 if outputs.requires_grad and outputs.is_floating_point() else None
    parts = outputs.values() if isinstance(outputs, dict) else outputs if isinstance(outputs, (list, tuple)) else ()
    zeros = [z for z in map(_tied_zero, parts) if z is not None]
    return sum(zeros[1:], zeros[0]) if zeros else None


def _write(text: str) -> None:
    from zoo._progress import ProgressBar

    ProgressBar.write(text)
