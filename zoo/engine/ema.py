"""The weight average behind ``fit(..., ema_decay=d)``: an exponential moving average, bias-corrected.

``torch.optim.swa_utils.AveragedModel`` starts the average as a copy of the first step's weights and
then moves it by ``1 - d`` per step, so after ``n`` steps the first step still weighs ``d ** (n - 1)``:
a quarter of the average after 720 steps at ``d = 0.998``, a run's worth of barely trained weights. Here
step ``t`` (1, 2, ...) moves it by ``(1 - d) / (1 - d ** t)`` instead, Adam's bias correction written
as a recursion: the average is then exactly ``sum_k (1 - d) d ** (t - k) w_k / (1 - d ** t)``, a plain
mean while ``t`` is small against ``1 / (1 - d)`` and the usual EMA once it is large.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["averaged_model", "debiased_ema_fn", "load_average"]


def debiased_ema_fn(decay: float) -> Callable[[list[torch.Tensor], list[torch.Tensor], torch.Tensor], None]:
    """A ``multi_avg_fn`` for ``AveragedModel``: called with the ``n_averaged`` updates before this one
    (>= 1: the first update copies the weights), it lerps the average by ``(1 - decay) / (1 - decay ** (n + 1))``."""
    if not 0.0 < decay < 1.0:
        raise ValueError(f"ema_decay must be in (0, 1), got {decay}")

    @torch.no_grad()
    def update(averaged: list[torch.Tensor], current: list[torch.Tensor], n_averaged: torch.Tensor) -> None:
        weight = (1.0 - decay) / (1.0 - decay ** (int(n_averaged) + 1))
        if torch.is_floating_point(averaged[0]) or torch.is_complex(averaged[0]):
            torch._foreach_lerp_(averaged, current, weight)
        else:  # integer buffers (BatchNorm's num_batches_tracked): follow the model
            for a, c in zip(averaged, current, strict=True):
                a.copy_(c)

    return update


def load_average(average: torch.optim.swa_utils.AveragedModel, state: dict[str, Any]) -> None:
    """``average.load_state_dict(state)``, where ``state`` may come from an average of a wrapped model
    (``module.module.``, ``module._orig_mod.``: written before :func:`averaged_model` unwrapped it)."""
    from zoo.wrappers import strip_wrapper_prefixes

    inner = {k[len("module."):]: v for k, v in state.items() if k.startswith("module.")}
    inner = dict(strip_wrapper_prefixes(inner, average.module.state_dict()))
    average.load_state_dict({**{k: v for k, v in state.items() if not k.startswith("module.")},
                             **{f"module.{k}": v for k, v in inner.items()}})


def averaged_model(model: torch.nn.Module, decay: float) -> torch.optim.swa_utils.AveragedModel:
    """A copy of ``model`` whose weights and buffers follow the bias-corrected EMA of its updates. A copy of the
    network inside a ``torch.compile`` wrapper: its state, in a checkpoint, loads into the plain network."""
    from torch.optim.swa_utils import AveragedModel

    from zoo.wrappers import unwrap

    return AveragedModel(unwrap(model), multi_avg_fn=debiased_ema_fn(decay), use_buffers=True)
