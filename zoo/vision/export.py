"""Export a (fine-tuned) network to TorchScript and ONNX, and check that the export computes the same thing.

Both writers go through a temporary file and ``os.replace``; each export is loaded back and run on the
example input and on a second batch size (the batch axis is dynamic), and the largest absolute
difference from the eager model is reported. ONNX outputs are checked with ONNX Runtime
(``pip install onnxruntime``; the ``dev`` extra has it); without it only ``onnx.checker`` runs and the
result says ``verified=False``.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from zoo import fs

__all__ = ["ExportResult", "export_onnx", "export_torchscript"]


@dataclass(frozen=True)
class ExportResult:
    path: Path
    max_abs_diff: float | None  # vs the eager model, over the checked inputs; None when not verified
    verified: bool

    def __str__(self) -> str:
        check = f"max |diff| {self.max_abs_diff:.2e}" if self.verified else "outputs not verified"
        return f"{self.path} ({check})"


def _check_inputs(example: torch.Tensor) -> list[torch.Tensor]:
    if not isinstance(example, torch.Tensor) or example.dim() < 2:
        raise ValueError(f"example_input must be a batched tensor (B, ...), got {type(example).__name__} "
                         f"{tuple(getattr(example, 'shape', ()))}")
    other = torch.randn((example.shape[0] + 1, *example.shape[1:]), generator=torch.Generator().manual_seed(0))
    return [example, other.to(example.dtype)]


def _staging(path: Path) -> fs.PrivateTemp:
    """Exports are written, loaded back and checked in a private temp folder, then moved into place."""
    return fs.PrivateTemp(path.parent, path.name)


@torch.no_grad()
def _reference(model: nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [model(x).float() for x in inputs]


def _compare(got: list[torch.Tensor], want: list[torch.Tensor], atol: float, what: str) -> float:
    diff = max(float((g.float() - w).abs().max()) for g, w in zip(got, want))
    if diff > atol:
        raise RuntimeError(f"{what} export differs from the eager model: max |diff| {diff:.3e} > atol {atol:g}")
    return diff


def export_torchscript(model: nn.Module, path: str | os.PathLike, example_input: torch.Tensor, *,
                       atol: float = 1e-4) -> ExportResult:
    """``torch.jit.script`` (falling back to ``torch.jit.trace`` for models scripting cannot compile) in
    eval mode; loaded back and compared with the eager model."""
    path = Path(path)
    model = model.eval()
    inputs = _check_inputs(example_input)
    try:
        scripted = torch.jit.script(model)
    except Exception as err:  # noqa: BLE001 - scripting fails on many dynamic models; tracing is the fallback
        warnings.warn(f"torch.jit.script failed ({type(err).__name__}); tracing instead", stacklevel=2)
        scripted = torch.jit.trace(model, example_input, check_trace=False)
    staging = _staging(path)
    tmp = staging.path_for(path)
    try:
        scripted.save(str(tmp))
        loaded = torch.jit.load(str(tmp))
        with torch.no_grad():
            diff = _compare([loaded(x) for x in inputs], _reference(model, inputs), atol, "TorchScript")
        staging.commit(path)
    finally:
        staging.abort()
    return ExportResult(path, diff, True)


def export_onnx(model: nn.Module, path: str | os.PathLike, example_input: torch.Tensor, *, opset: int = 18,
                atol: float = 1e-4, input_name: str = "input", output_name: str = "logits") -> ExportResult:
    """ONNX with a dynamic batch axis (``torch.onnx.export``), checked by ``onnx.checker`` and, when
    ONNX Runtime is installed, by running it against the eager model."""
    try:
        import onnx
    except ImportError as err:
        raise ImportError("ONNX export needs the onnx and onnxscript packages: pip install onnx onnxscript") from err
    path = Path(path)
    model = model.eval()
    inputs = _check_inputs(example_input)
    staging = _staging(path)
    tmp = staging.path_for(path)
    try:
        batch = torch.export.Dim("batch", min=1, max=1 << 16)
        program = torch.onnx.export(
            model, (example_input,), dynamo=True, opset_version=opset, input_names=[input_name],
            output_names=[output_name], dynamic_shapes=({0: batch},), verbose=False,
        )
        program.save(str(tmp), external_data=False)
        onnx.checker.check_model(onnx.load(str(tmp)), full_check=True)
        try:
            import onnxruntime as ort
        except ImportError:
            warnings.warn("onnxruntime is not installed: the ONNX file passed onnx.checker but its outputs "
                          "were not compared with the eager model", stacklevel=2)
            staging.commit(path)
            return ExportResult(path, None, False)
        session = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
        got = [torch.from_numpy(session.run(None, {input_name: x.numpy()})[0]) for x in inputs]
        diff = _compare(got, _reference(model, inputs), atol, "ONNX")
        staging.commit(path)
    finally:
        staging.abort()
    return ExportResult(path, diff, True)
