"""The public entry point, :func:`zoo.export`: the format, the family's spec, the dtype and tolerance,
then the write, from a CPU copy in eval mode (every module's training flag given back) with autocast off.
"""

from __future__ import annotations

import contextlib
import copy
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.exporting.dtypes import check_dtype, spec_dtype, tolerance
from zoo.exporting.exporters import spec_for
from zoo.exporting.formats import ALIASES, FORMATS, format_for
from zoo.exporting.spec import ExportError, ExportResult
from zoo.exporting.target import target_path
from zoo.exporting.writing import write_export
from zoo.wrappers import unwrap


def export(model: Any, path: str | os.PathLike, format: str | None = None, *, verify: bool = True,
           **config: Any) -> ExportResult:
    """Export ``model`` (a built model, or a registered name to build with defaults) to ``path``.

    ``format``: ``"onnx"``, ``"torch.export"`` (``.pt2``) or ``"torchscript"`` (``.pt``, vision only); by
    default the one ``path``'s suffix names, else ``"onnx"`` (no suffix: a folder, or the suffix is added).
    The model is exported in its floating dtype (``.half()``, ``.double()``, ``.to(torch.bfloat16)``: the
    sample inputs are built in it, and the tolerance is widened for fp16/bf16). ``config``
    goes to the family's exporter (e.g. ``batch``/``frames``/``size`` of the sample inputs; see the
    family's exporter); a plain ``nn.Module`` takes ``example_inputs=``. Returns an :class:`ExportResult`
    (a path-like: the file, or the folder for seq2seq). The tolerance each family is held to is in its
    exporter's docstring and in the result. Raises :class:`ExportError` when the export is refused for
    this format (with the reason) or disagrees with PyTorch (with the largest difference).
    """
    if not isinstance(verify, bool):  # verify="no" is truthy: the export was checked, never skipped as asked
        raise TypeError(f"verify must be True or False, got {type(verify).__name__} {verify!r}")
    given = os.path.expanduser(os.fspath(path))  # as zoo.save and every --out: '~/p.onnx' made a folder named '~'
    path = Path(given)
    fmt = format_for(path) if format is None else ALIASES.get(format, format)
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; expected one of {', '.join(FORMATS)}")
    if isinstance(model, str):
        from zoo.registry import build

        model = build(model)
    model = unwrap(model)  # torch.compile's or DataParallel's wrapper has none of the family's attributes
    devices = _device_types(model)
    # traced and verified on the CPU (the file runs anywhere): a model on a GPU is exported from a CPU copy
    # and stays where it is (the family's exporter may run it while describing the graphs)
    model = _cpu_copy(model)
    with _restore_training(model) as remember, _without_autocast(devices):
        for m in _modules_of(model):
            # before the family's exporter runs the model to build its samples (a translator's decoder-step
            # inputs): in training mode its dropout drew from the caller's global RNG
            remember(m)
            m.eval()
        spec = spec_for(model, config)
        if fmt in spec.unsupported:
            raise ExportError(f"{type(model).__name__} cannot be exported as {fmt}: {spec.unsupported[fmt]}")
        if fmt == "torchscript" and not spec.torchscript:
            raise ExportError(f"TorchScript export is kept only where it works (vision); export "
                              f"{type(model).__name__} with format='torch.export' (.pt2) or 'onnx'")
        target = target_path(given, fmt, spec)  # as given: Path drops the trailing separator of "out/"
        dtype = spec_dtype(spec)
        check_dtype(model, fmt, dtype)
        spec.atol, spec.rtol = tolerance(spec.atol, spec.rtol, dtype)
        for g in spec.graphs:  # exported and checked in eval mode (dropout off, running BN statistics)
            if g.module is not None:
                remember(g.module)
                g.module = _cpu_copy(g.module)  # a module a non-module model keeps on a GPU (TD3's actor)
                g.module.eval()
        return write_export(spec, target, fmt, verify, dtype)


def _modules_of(model: Any) -> list[nn.Module]:
    """The torch modules a model is made of: itself, or those a non-module model holds (TD3's actor, critics)."""
    if isinstance(model, nn.Module):
        return [model]
    return [v for v in getattr(model, "__dict__", {}).values() if isinstance(v, nn.Module)]


def _device_types(model: Any) -> set[str]:
    """The device types a model computes on: the CPU, where it is exported, and those of its tensors."""
    return {"cpu"} | {t.device.type for m in _modules_of(model) for t in [*m.parameters(), *m.buffers()]}


@contextlib.contextmanager
def _without_autocast(device_types: set[str]):
    """Autocast off for these device types: a caller's ``torch.autocast("cpu", dtype=torch.bfloat16)`` made
    the ONNX tracer record bfloat16 convolutions, which the ONNX checker refused (``tensor(bfloat16)``); the
    graph is exported and checked in the model's own dtype, which a cast (``.half()``) sets."""
    with contextlib.ExitStack() as stack:
        for device_type in sorted(device_types):
            if torch.amp.is_autocast_available(device_type):  # torch.autocast refuses a type it has none for
                stack.enter_context(torch.autocast(device_type, enabled=False))
        yield


@contextlib.contextmanager
def _restore_training(model: Any):
    """Give every module its training flag back afterwards; ``remember(module)`` adds a module (and its
    children) the family's exporter built around the model, before it is switched to eval mode."""
    saved: dict[nn.Module, bool] = {}

    def remember(module: nn.Module) -> None:
        for m in module.modules():
            saved.setdefault(m, m.training)

    if isinstance(model, nn.Module):
        remember(model)
    try:
        yield remember
    finally:
        for m, flag in saved.items():
            m.training = flag


def _cpu_copy(model: Any) -> Any:
    """``model`` itself when it is on the CPU (or no module), else a CPU copy of it."""
    if not isinstance(model, nn.Module):
        return model
    on_cpu = all(t.device.type == "cpu" for t in [*model.parameters(), *model.buffers()])
    return model if on_cpu else copy.deepcopy(model).cpu()
