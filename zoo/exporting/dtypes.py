"""The floating dtype of an export: what a model takes its inputs in, the formats that cannot hold it,
and the tolerance widened for fp16 / bf16.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from zoo.exporting.formats import ONNX_OPSET
from zoo.exporting.spec import ExportError, ExportSpec


def floating_dtype(module: nn.Module) -> torch.dtype:
    """The floating dtype ``module`` takes its input in: that of its first floating parameter (the layer that
    reads the input), else of its first floating buffer, else float32. A model cast with ``.half()``,
    ``.double()`` or ``.to(torch.bfloat16)`` refuses float32 inputs, so a family builds its samples in this."""
    for t in [*module.parameters(), *module.buffers()]:
        if t.is_floating_point():
            return t.dtype
    return torch.float32


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float16`` -> ``"float16"``: how an export's metadata names its inputs' dtype."""
    return str(dtype).removeprefix("torch.")


def spec_dtype(spec: ExportSpec) -> torch.dtype:
    """The dtype an export is made in: the least precise floating dtype that a graph's weights hold when it is
    coarser than float32 (float16, bfloat16: the tolerance is widened for it), else float64 where any weight
    is float64, else float32 (also when there are none: an sklearn graph).

    float64 counts beside float32: a ``.double()`` HybridSN keeps its fitted preprocessing buffers in float32,
    and the least precise dtype, float32, hid the float64 network from the check that turns onnxruntime's
    refusal of it (``NOT_IMPLEMENTED: Could not find an implementation for Conv(11)``) into an ExportError
    with the ways out."""
    dtypes = {t.dtype for g in spec.graphs if g.module is not None
              for t in [*g.module.parameters(), *g.module.buffers()] if t.is_floating_point()}
    coarsest = max(dtypes, key=lambda d: torch.finfo(d).eps, default=torch.float32)
    if torch.finfo(coarsest).eps > torch.finfo(torch.float32).eps:
        return coarsest
    return torch.float64 if torch.float64 in dtypes else torch.float32


def check_dtype(model: Any, fmt: str, dtype: torch.dtype) -> None:
    """Refuse a format that cannot hold the model's dtype before tracing (the tracer's own error was the ONNX
    checker's ``W typestr: T, has unsupported type: tensor(bfloat16)``)."""
    if fmt == "onnx" and dtype == torch.bfloat16:
        raise ExportError(f"{type(model).__name__} holds bfloat16 weights, which ONNX cannot hold as zoo exports "
                          f"it: opset {ONNX_OPSET} has no bfloat16 convolution, onnxruntime's CPU provider runs no "
                          f"bfloat16 matmul and numpy, its input type, has no bfloat16. Cast the model first "
                          f"(model.float() or model.half()), or export format='torch.export' (.pt2), which keeps "
                          f"bfloat16")


# a float32 tolerance is met by float32 arithmetic; in a less precise dtype every stored intermediate is
# rounded to its own precision, so two correct implementations differ by some units in its last place
# (ResNet18's logits in float16: onnxruntime vs PyTorch 1 ulp, 2e-3). float64 keeps the family's bound.
_ULPS = 8


def tolerance(atol: float, rtol: float, dtype: torch.dtype) -> tuple[float, float]:
    """The family's float32 ``atol``/``rtol``, widened to ``_ULPS`` units of ``dtype``'s precision when that is
    coarser than float32's (float16: 7.8e-3, bfloat16: 6.3e-2)."""
    if torch.finfo(dtype).eps <= torch.finfo(torch.float32).eps:
        return atol, rtol
    floor = _ULPS * torch.finfo(dtype).eps
    return max(atol, floor), max(rtol, floor)
