"""``with eval_mode(model): ...``: a model in eval mode for one block, safe to share between threads.

Every predict and evaluate runs the model in eval mode and hands it back as it came. Done per call, as
``was = model.training; model.eval(); ...; model.train(was)``, two things go wrong:

- threads serving one model (a web server's pool) switch it back to training under each other: a
  prediction then runs with dropout on and batch statistics, and leaves the model in eval mode;
- ``model.train(was)`` gives every submodule the same flag, so a BN layer the user froze with
  ``bn.eval()`` comes back in training mode.

Here the first block to enter records each submodule's own flag, blocks that overlap it only count, and
the last to leave puts the flags back.

``with training_autograd(): ...``: the other way round, gradients on for a training loop whatever the caller's
context (``torch.no_grad()``, ``torch.inference_mode()``, or ``torch.set_grad_enabled(False)`` at the top of a
script), as Lightning's ``fit`` turns them on. Without it the first backward fails with "element 0 of tensors
does not require grad", which does not say that the caller turned gradients off.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import nn

__all__ = ["eval_mode", "training_autograd"]

_lock = threading.Lock()
_held: dict[int, tuple[nn.Module, int, list[tuple[nn.Module, bool]]]] = {}  # id -> (model, blocks in, flags)


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Run the block with ``model`` (and every submodule) in eval mode; each module's own training flag is
    restored when the last overlapping block, in any thread, leaves."""
    key = id(model)
    with _lock:
        _, inside, flags = _held.get(key, (model, 0, []))
        if inside == 0:
            flags = [(m, m.training) for m in model.modules()]
            model.eval()
        _held[key] = (model, inside + 1, flags)
    try:
        yield model
    finally:
        with _lock:
            _, inside, flags = _held[key]
            if inside == 1:
                del _held[key]
                model.train(flags[0][1])  # a train() the model overrides still runs, as after model.train(was)
                for m, flag in flags:
                    m.training = flag
            else:
                _held[key] = (model, inside - 1, flags)


@contextlib.contextmanager
def training_autograd() -> Iterator[None]:
    """Autograd on for the block, also inside a caller's ``torch.no_grad()`` or ``torch.inference_mode()``."""
    with torch.inference_mode(False), torch.enable_grad():
        yield
