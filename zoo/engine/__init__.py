"""The shared supervised training engine: one loop for every supervised family.

    from zoo.engine import fit, evaluate
    result = fit(model, train_ds, val_ds, epochs=10, lr=3e-4, schedule="cosine", warmup_steps=100,
                 checkpoint_dir="runs/a", early_stopping_patience=3)   # amp="auto": bf16 only where fast
    result.history[-1], result.best_metric, result.checkpoint_path

Modules: ``fit`` (the entry point), ``options`` (its options, defined once), ``trainer`` (the loop, step by
step), ``forward`` (one batch: precision, forward, loss), ``optim`` (optimizer, decay groups), ``denormals``
(optimizer moments, and on request tiny output gradients, zeroed before they turn denormal, which Intel CPUs
compute many times slower), ``evaluation``, ``modes`` (eval mode for a block, shared by threads; autograd on
for a training loop), ``monitor`` (best metric, early stopping), ``resume`` (what a resume may change, and
reading a checkpoint back into a run), ``checkpoint`` (atomic save, exact resume), ``result``
(``TrainResult``), ``distributed`` (torchrun/DDP), ``metrics`` (top-k, confusion matrix, OA/AA/kappa),
``callbacks``, ``schedules``, ``seed``, ``data`` (loaders), ``devices`` (a ``device=`` argument checked once,
the device a model is on), ``heap`` (DataLoader workers keep the memory a batch frees), ``logs`` (CSV,
TensorBoard, learning curves), ``network`` (the mixin families' networks use).
matplotlib and TensorBoard load only when used.
"""

from zoo.engine import metrics
from zoo.engine.callbacks import Callback, GradualUnfreeze, LambdaCallback, RestoreBest, TrainState
from zoo.engine.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from zoo.engine.data import prepare_loader
from zoo.engine.denormals import flush_tiny_moments
from zoo.engine.evaluation import evaluate
from zoo.engine.fit import fit
from zoo.engine.metrics import (
    accuracy,
    average_accuracy,
    classification_report,
    cohen_kappa,
    confusion_matrix,
    overall_accuracy,
    per_class_recall,
    plot_confusion_matrix,
    topk_accuracy,
)
from zoo.engine.options import FitConfig
from zoo.engine.result import NonFiniteLossError, TrainResult
from zoo.engine.resume import ResumeError
from zoo.engine.schedules import build_schedule
from zoo.engine.seed import get_rng_state, set_rng_state, set_seed

__all__ = [
    "Callback",
    "FitConfig",
    "GradualUnfreeze",
    "LambdaCallback",
    "NonFiniteLossError",
    "RestoreBest",
    "ResumeError",
    "TrainResult",
    "TrainState",
    "accuracy",
    "average_accuracy",
    "build_schedule",
    "classification_report",
    "cohen_kappa",
    "confusion_matrix",
    "evaluate",
    "fit",
    "flush_tiny_moments",
    "get_rng_state",
    "latest_checkpoint",
    "load_checkpoint",
    "metrics",
    "overall_accuracy",
    "per_class_recall",
    "plot_confusion_matrix",
    "prepare_loader",
    "save_checkpoint",
    "set_rng_state",
    "set_seed",
    "topk_accuracy",
]
