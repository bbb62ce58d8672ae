"""Where a run runs: the device a caller names, checked once, and the device a model is on.

:func:`usable_device` is the one reading of a ``device=`` argument (``"cpu"``, ``"cuda"``, ``"cuda:1"``,
``torch.device("mps")``, a CUDA index): every entry point (``zoo.build`` / ``train`` / ``evaluate`` /
``predict``, the ``--device`` flag, ``fit`` and ``evaluate``, a family's ``predict``) refuses a name torch
does not know, or a device this machine lacks, with one message before any work. torch's own errors come
late and name no argument: "Found no NVIDIA driver on your system" from the first tensor moved there (after
the model was built, or an epoch in), "invalid device ordinal" from a CUDA index past the last GPU.
Without a ``device``, a run runs where its model is (:func:`run_device`).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

__all__ = ["inference_placement", "model_device", "run_device", "same_device", "usable_device"]

_NAMES = "auto, cpu, cuda, cuda:1, mps, ..."


def usable_device(device: str | torch.device | int, *, name: str = "device") -> torch.device:
    """``device`` as a ``torch.device`` this machine has: a ``RuntimeError`` for a name torch does not know
    (``"gpu"``) or a CUDA / MPS device it lacks (``"cuda"`` without a GPU, ``"cuda:3"`` with one), saying what
    it has; a ``TypeError`` for anything but a name, a ``torch.device`` or an index. ``name``: how the caller
    spells the argument (``"--device"`` on the command line), for the message's way out. Another kind torch
    has a backend for (``xpu``) is checked by that backend's ``is_available``; ``meta`` needs no hardware and
    passes. ``"auto"`` is the GPU where CUDA has one, else the CPU (Stable-Baselines3's default device, which its
    users pass on)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, bool) or not isinstance(device, (str, torch.device, int)):
        raise TypeError(f"{name} must be a device name ({_NAMES}), a torch.device or a CUDA index; got "
                        f"{type(device).__name__}")
    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise RuntimeError(f"{device!r} is not a device: expected {_NAMES}") from None
    shown = device if isinstance(device, str) else str(parsed)
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise RuntimeError(f"device {shown!r} is not available: torch {torch.__version__} finds no CUDA GPU "
                               f"on this machine; leave {name} out to run on the CPU")
        if parsed.index is not None and parsed.index >= count:
            have = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
            raise RuntimeError(f"device {shown!r} is not available: this machine has {count} CUDA "
                               f"device{'s' if count > 1 else ''} ({have}); pass one of those")
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"device {shown!r} is not available: this machine has no MPS device; leave {name} out "
                           "to run on the CPU")
    backend = getattr(torch, parsed.type, None)  # torch.xpu, torch.mtia, ...: each says whether it has one
    if parsed.type not in ("cpu", "cuda", "mps", "meta") and callable(getattr(backend, "is_available", None)) \
            and not backend.is_available():
        raise RuntimeError(f"device {shown!r} is not available: torch {torch.__version__} finds no {parsed.type} "
                           f"device on this machine; leave {name} out to run on the CPU")
    return parsed


def model_device(model: torch.nn.Module) -> torch.device:
    """Where ``model`` lives: its first parameter's device, else its first buffer's, else the CPU."""
    for tensor in itertools.chain(model.parameters(), model.buffers()):  # lazily: the first one decides
        return tensor.device
    return torch.device("cpu")


def same_device(a: str | torch.device, b: str | torch.device) -> bool:
    """Whether ``a`` and ``b`` name one device: ``cuda`` is the current CUDA device (``cuda:0`` unless set
    otherwise), ``cpu`` and ``cpu:0`` are the CPU; ``torch.device``'s ``==`` tells them apart."""
    def index(d: torch.device) -> int:
        if d.index is not None:
            return d.index
        return torch.cuda.current_device() if d.type == "cuda" and torch.cuda.is_available() else 0

    a, b = torch.device(a), torch.device(b)
    return a.type == b.type and index(a) == index(b)


def run_device(model: torch.nn.Module, device: Any = None) -> torch.device:
    """What the engine and the families' ``predict`` run on: the caller's ``device``, checked
    (:func:`usable_device`), or where no ``device`` is given, where the model is (a model on a GPU is scored
    there, never moved to the CPU). A model on the ``meta`` device is an error saying how to give it values: it
    could only fail later, at its first output read (after a whole epoch, in ``fit``), with a message about meta
    tensors or an unsupported dtype."""
    if device is not None:
        return usable_device(device)
    device = model_device(model)
    if device.type == "meta":
        raise ValueError(f"the {type(model).__name__} is on the 'meta' device: its tensors have shapes but no "
                         "values, so it cannot run. Materialize it first: model.to_empty(device='cpu') and then "
                         "load_state_dict(...) (or build it with weights=)")
    return device


def inference_placement(model: torch.nn.Module, device: Any,
                        amp: Any) -> tuple[torch.device, torch.dtype | None]:
    """Where a family's ``predict`` runs and its autocast dtype (None: fp32): the model's own device unless
    ``device`` is given (checked, :func:`usable_device`, and the model is then moved there, as
    ``model.to(device)`` would), and ``amp`` resolved for the model's kind of op there (``"auto"``: bf16 where
    this device computes it faster; ``None`` / ``"none"`` / ``"fp32"``: exact fp32; ``"bf16"``; ``"fp16"`` on
    CUDA only)."""
    from zoo.engine.precision import model_amp, normalize_amp

    target = run_device(model, device)
    # fp16 autocast is offered on CUDA only (inference needs no grad scaler there); checked before the move so
    # that a bad amp moves nothing
    if target.type != "cuda" and normalize_amp(amp) == "fp16":
        raise ValueError(f"amp={amp!r} runs on CUDA only, and this prediction runs on {target}; use amp='bf16', "
                         "'auto' or None (fp32) here, or device='cuda'")
    amp = model_amp(amp, model, target)
    if device is not None:
        model.to(target)
    return target, {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp or "")
