"""The registry of family exporters (:func:`register_exporter`), and the spec of a plain ``nn.Module``
no family describes.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from zoo.exporting.spec import ExportError, ExportSpec, Graph
from zoo.exporting.verification import leaves
from zoo.inputs import whole_number

_EXPORTERS: dict[type, Callable[..., ExportSpec]] = {}


def register_exporter(cls: type):
    """Register ``fn(model, **config) -> ExportSpec`` for ``cls`` and its subclasses (the nearest class in
    the model's MRO wins). ``fn``'s keyword arguments are the export config ``zoo.export`` accepts."""

    def decorator(fn: Callable[..., ExportSpec]) -> Callable[..., ExportSpec]:
        if cls in _EXPORTERS:
            prev = _EXPORTERS[cls]
            raise ValueError(f"an exporter for {cls.__qualname__} is already registered by "
                             f"{prev.__module__}.{prev.__qualname__}")
        _EXPORTERS[cls] = fn
        return fn

    return decorator


def _load_family_exporters(model: Any) -> None:
    """Import ``zoo.<family>.export`` for a model of a zoo family, which registers its exporters: families
    stay unimported (no torch) until a model of theirs is exported."""
    for cls in type(model).__mro__:
        parts = cls.__module__.split(".")
        if len(parts) > 2 and parts[0] == "zoo":
            try:
                importlib.import_module(f"zoo.{parts[1]}.export")
            except ModuleNotFoundError as err:
                if err.name != f"zoo.{parts[1]}.export":
                    raise


def _exporter_for(model: Any) -> Callable[..., ExportSpec] | None:
    _load_family_exporters(model)
    for cls in type(model).__mro__:
        if cls in _EXPORTERS:
            return _EXPORTERS[cls]
    return None


def _generic_spec(model: nn.Module, example_inputs: Any = None, atol: float = 1e-4, rtol: float = 1e-4) -> ExportSpec:
    """A module no family describes: its ``forward(*example_inputs)``, axis 0 of every input dynamic. Its
    outputs may be a tensor or tuples, lists and dicts of them; a flat dict's keys name the graph's outputs."""
    if example_inputs is None:
        raise TypeError(f"zoo.export does not know what to export for {type(model).__name__}: pass "
                        f"example_inputs=(tensor, ...) for a plain nn.Module, or a model zoo builds "
                        f"({_zoo_models()})")
    # one array is one input: tuple() of a numpy (B, F) array made B inputs of (F,), refused as "ndarray (F,)"
    single = isinstance(example_inputs, (torch.Tensor, np.ndarray))
    inputs = (example_inputs,) if single else tuple(example_inputs)
    inputs = tuple(torch.from_numpy(x) if isinstance(x, np.ndarray) else x for x in inputs)
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or x.dim() < 1:
            raise ValueError(f"example_inputs[{i}] must be a batched tensor (B, ...), got "
                             f"{type(x).__name__} {tuple(getattr(x, 'shape', ()))}")
    inputs = tuple(x.cpu() for x in inputs)  # where export() put the model
    with torch.no_grad():
        try:
            outputs = model.eval()(*inputs)  # export() gives the model its training flag back
        except Exception as err:  # the tracer would fail on them later, with a far longer message
            raise ValueError(f"example_inputs of shapes {[tuple(x.shape) for x in inputs]} do not run through "
                             f"{type(model).__name__}: {type(err).__name__}: {err}") from err
    n_out = len(leaves(outputs, f"{type(model).__name__}.forward"))
    names = tuple(f"output{i}" for i in range(n_out))
    if isinstance(outputs, Mapping) and all(isinstance(v, torch.Tensor) for v in outputs.values()) \
            and all(isinstance(k, str) and k for k in outputs) and len(set(outputs)) == n_out:
        names = tuple(outputs)  # the graph's outputs are the dict's values, in its order
    # each input its own values: equal ones (one seed for all) could not tell a graph that reads one input
    # for another (example_inputs=(x, x), traced as aliases) from the model
    checks = [tuple(_resized(x, x.shape[0] + 1, i) for i, x in enumerate(inputs))]
    with torch.no_grad():
        try:
            model(*checks[0])
        except Exception as err:  # it failed in the verification, as eager torch's bare error
            raise ExportError(f"{type(model).__name__}.forward takes a batch of {inputs[0].shape[0]} but fails on "
                              f"one of {inputs[0].shape[0] + 1} ({type(err).__name__}: {err}); zoo exports axis 0 of "
                              f"every input as a dynamic batch, so the model must take any batch size (a reshape "
                              f"to a fixed batch, say, should use -1 or x.shape[0])") from err
    return ExportSpec([Graph("model", model, inputs, tuple(f"input{i}" for i in range(len(inputs))), names,
                             {i: {0: "batch"} for i in range(len(inputs))}, checks)], atol=atol, rtol=rtol,
                      torchscript=True)


def check_int(option: str, value: Any, minimum: int = 1) -> int:
    """An integer export option (``batch``, ``size``, ...) as an int (:func:`zoo.inputs.whole_number`)."""
    return whole_number(value, f"export option {option}", minimum=minimum)


def _resized(x: torch.Tensor, batch: int, index: int = 0) -> torch.Tensor:
    """A sample like ``x`` with another batch size (random values of its dtype and range), drawn for input
    ``index``."""
    g = torch.Generator().manual_seed(1000 * index + batch)
    shape = (batch, *x.shape[1:])
    if x.is_floating_point():
        return torch.randn(shape, generator=g).to(x.dtype)
    lo, hi = int(x.min()), int(x.max()) + 1
    return torch.randint(lo, max(hi, lo + 1), shape, generator=g).to(x.dtype)


def _zoo_models() -> str:
    from zoo.registry import list_models

    return ", ".join(list_models())


def spec_for(model: Any, config: dict[str, Any]) -> ExportSpec:
    fn = _exporter_for(model)
    if fn is None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"zoo.export: no exporter for {type(model).__name__}; exportable: an nn.Module "
                            f"(with example_inputs=...) and the models zoo builds ({_zoo_models()})")
        fn = _generic_spec
    params = inspect.signature(fn).parameters
    valid = [n for i, n in enumerate(params) if i > 0]
    unknown = sorted(k for k in config if k not in valid)
    if unknown:
        raise TypeError(f"zoo.export of {type(model).__name__}: unknown option(s) {', '.join(map(repr, unknown))}; "
                        f"valid: {', '.join(valid) or '(none)'}")
    return fn(model, **config)
