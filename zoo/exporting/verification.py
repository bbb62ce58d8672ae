"""The check of a written export: loaded back as a user would and run on every sample, each output
compared with PyTorch's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zoo.exporting.dtypes import dtype_name
from zoo.exporting.spec import ExportError, Graph
from zoo.exporting.tracing import first_line


def _runner(path: Path, fmt: str, dtype: torch.dtype = torch.float32,
            graph: str = "model") -> Callable[..., list[np.ndarray]]:
    """``run(*inputs) -> list of numpy outputs`` for a written file, loaded as a user would: ONNX is fed
    numpy arrays, the torch formats the sample's tensors (numpy has no bfloat16)."""
    if fmt == "onnx":
        try:
            import onnxruntime as ort
        except ImportError as err:
            raise ImportError("verifying an ONNX export needs onnxruntime: pip install onnxruntime "
                              "(or pass verify=False)") from err
        try:
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        except Exception as err:
            if dtype == torch.float32:
                raise
            raise _unrunnable(err, dtype, graph) from err
        names = [i.name for i in session.get_inputs()]

        def run_onnx(*xs: Any) -> list[np.ndarray]:
            try:
                return session.run(None, dict(zip(names, (_numpy(x) for x in xs))))
            except Exception as err:
                if dtype == torch.float32:
                    raise
                raise _unrunnable(err, dtype, graph) from err

        return run_onnx
    module = torch.export.load(str(path)).module() if fmt == "torch.export" else torch.jit.load(str(path))

    def run(*xs: Any) -> list[np.ndarray]:
        with torch.no_grad():
            return [_numpy(t) for t in leaves(module(*(torch.as_tensor(x) for x in xs)))]

    return run


def _unrunnable(err: Exception, dtype: torch.dtype, graph: str) -> ExportError:
    """The error for onnxruntime's failure to load or run a graph of a dtype other than float32, with the ways
    out. Its CPU kernels are float32 first, and some refuse another dtype when the session loads (float64 Conv:
    NOT_IMPLEMENTED, Could not find an implementation for Conv(11)), others only when they run (float64 GRU:
    RUNTIME_EXCEPTION, GRU operator does not support double yet); either way the file cannot be checked here."""
    return ExportError(f"onnxruntime cannot run the {dtype_name(dtype)} ONNX graph {graph!r} to verify it "
                       f"({first_line(err)}); nothing was written. Cast the model to float32 first "
                       f"(model.float()), export format='torch.export' (.pt2), which keeps "
                       f"{dtype_name(dtype)}, or pass verify=False to write it unchecked")


def leaves(out: Any, what: str = "the graph") -> list[Any]:
    """The tensors (or arrays) of an output structure, in order: tuples and lists as they are, a dict by its
    values (its keys are names, not outputs). Anything else cannot be an exported output."""
    if isinstance(out, (torch.Tensor, np.ndarray)):
        return [out]
    if isinstance(out, Mapping):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in leaves(o, what)]
    raise TypeError(f"{what} returns a {type(out).__name__} among its outputs; an exported graph returns "
                    f"tensors (alone, or in tuples, lists or dicts)")


def _numpy(x: Any) -> np.ndarray:
    """``x`` as a numpy array; bfloat16, which numpy lacks, as float32 (every bfloat16 value is one)."""
    if isinstance(x, torch.Tensor):
        return (x.float() if x.dtype == torch.bfloat16 else x).detach().cpu().numpy()
    return np.asarray(x)


def _expected(g: Graph, sample: tuple[Any, ...]) -> list[np.ndarray]:
    """PyTorch's outputs: ``reference`` when the family gives one (its own eager path), else the module."""
    with torch.no_grad():
        outs = leaves(g.reference(*sample) if g.reference is not None else g.module(*sample), f"graph {g.name!r}")
    return [_numpy(o.float() if isinstance(o, torch.Tensor) and o.is_floating_point() else o) for o in outs]


def verify_graph(g: Graph, path: Path, fmt: str, atol: float, rtol: float, dtype: torch.dtype = torch.float32) -> float:
    """Run the written file on every sample of ``g`` and compare with PyTorch; returns the largest
    ``|diff|`` or raises :class:`ExportError` naming it."""
    run = _runner(path, fmt, dtype, g.name)
    worst = 0.0
    for i, sample in enumerate([tuple(g.inputs), *g.checks]):
        want = _expected(g, sample)
        got = run(*sample)
        if len(got) != len(want):
            raise ExportError(f"{fmt} export of {g.name!r} gives {len(got)} outputs, PyTorch {len(want)}")
        for name, a, b in zip(g.output_names, got, want):
            worst = max(worst, _compare(np.asarray(a), b, atol, rtol, f"{fmt} export of {g.name!r}, output "
                                        f"{name!r}, sample {i} (input shapes {[tuple(np.shape(x)) for x in sample]})"))
    return worst


def _compare(got: np.ndarray, want: np.ndarray, atol: float, rtol: float, what: str) -> float:
    if got.shape != want.shape:
        raise ExportError(f"{what}: shape {got.shape}, PyTorch {want.shape}")
    if got.size == 0:
        return 0.0
    if not np.issubdtype(want.dtype, np.floating):
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        if bad.size:
            j = np.unravel_index(bad[0], want.shape)
            raise ExportError(f"{what}: {bad.size} of {want.size} values differ (first at {tuple(map(int, j))}: "
                              f"{got[j]} vs PyTorch {want[j]}); integer outputs must be equal")
        return 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    diff = np.abs(g - w)
    if not np.isfinite(g).all() or not np.isfinite(w).all():
        # NaN never equals NaN, so a NaN PyTorch also gives must be matched by isnan, not ==
        same = (np.isnan(g) == np.isnan(w)) & ((g == w) | (np.isnan(g) & np.isnan(w)) | np.isfinite(g) & np.isfinite(w))
        if not same.all():
            raise ExportError(f"{what}: non-finite values differ from PyTorch's")
        diff = np.where(np.isfinite(w), diff, 0.0)
    excess = diff - (atol + rtol * np.abs(w))
    j = np.unravel_index(int(np.argmax(excess)), w.shape)
    if excess[j] > 0:
        raise ExportError(f"{what} differs from PyTorch: max |diff| {float(diff.max()):.3e}; worst at "
                          f"{tuple(map(int, j))}: {g[j]:.6g} vs {w[j]:.6g} (bound atol {atol:g} + rtol {rtol:g} * |want|)")
    return float(diff.max())
