"""zoo.export of plain modules whose forward torch's tracers bind in their own way (``*args``, a Tensor
parameter defaulting to None, one tensor given for two inputs), and the hint of a folder export given a file
name in a format other than ONNX."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import zoo
from zoo.exporting import read_metadata

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")


class _Sum(nn.Module):
    """``forward(self, *xs)``: the inputs arrive as one ``*args`` parameter."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 2)

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.linear(xs[0] + 2 * xs[1])


class _Scaled(nn.Module):
    """``scale`` unannotated, defaulting to None: torch.jit.script takes it for a Tensor and compiles the module,
    which torch.jit.save then fails on (annotated ``Tensor | None`` it saves)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 2)

    def forward(self, x, scale=None):  # unannotated on purpose (see the docstring)
        return self.linear(x) if scale is None else self.linear(x) * scale


def _runs_as_eager(model: nn.Module, res, fmt: str, a: torch.Tensor, b: torch.Tensor) -> None:
    """The exported file (onnxruntime or torch.export.load) computes what ``model(a, b)`` does."""
    with torch.no_grad():
        want = model(a, b).numpy()
    if fmt == "onnx":
        (got,) = ort.InferenceSession(str(res)).run(None, {"input0": a.numpy(), "input1": b.numpy()})
    else:
        with torch.no_grad():
            got = torch.export.load(str(res)).module()(a, b).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("fmt", ["onnx", "torch.export"])
def test_a_forward_of_star_args_exports_with_a_dynamic_batch(tmp_path, fmt):
    """Before: the dynamic axes were keyed by forward's named positional parameters, of which ``*xs`` has
    none: ExportError 'could not trace graph 'model': IndexError: list index out of range'."""
    model = _Sum()
    res = zoo.export(model, tmp_path / "sum", fmt, example_inputs=(torch.randn(2, 4), torch.randn(2, 4)))
    assert res.verified and read_metadata(res)["inputs"] == ["input0", "input1"]
    a, b = torch.randn(5, 4), torch.randn(5, 4)  # another batch size than the traced one
    _runs_as_eager(model, res, fmt, a, b)


class _Difference(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 2)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.linear(a - b)


@pytest.mark.parametrize("fmt", ["onnx", "torch.export"])
def test_one_tensor_given_for_two_inputs_still_exports_two_inputs(tmp_path, fmt):
    """Before: with example_inputs=(x, x) the tracers took the two inputs for aliases of one tensor, so the
    graph computed linear(a - a) and ignored b (off by 1.02 on other inputs), and the check passed (max |diff|
    0.00e+00): its samples drew every input from one seed, so they were equal too."""
    from zoo.exporting.exporters import spec_for

    model, x = _Difference(), torch.randn(2, 4)
    (sample,) = spec_for(model, {"example_inputs": (x, x)}).graphs[0].checks
    assert not torch.equal(sample[0], sample[1])  # the check can tell the inputs apart
    res = zoo.export(model, tmp_path / "difference", fmt, example_inputs=(x, x))
    a, b = torch.randn(5, 4), torch.randn(5, 4)
    _runs_as_eager(model, res, fmt, a, b)


def test_a_module_torchscript_compiles_but_cannot_save_is_traced(tmp_path):
    """Before: torch.jit.script compiled ``_Scaled``, and torch.jit.save then raised a bare RuntimeError
    ('strides() called on an undefined Tensor'); the documented fallback, tracing, never ran."""
    model = _Scaled()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = zoo.export(model, tmp_path / "scaled.pt", example_inputs=torch.randn(2, 4))
    assert res.format == "torchscript" and res.verified
    assert any("exported by torch.jit.trace instead" in str(w.message) for w in caught)
    x = torch.randn(7, 4)
    with torch.no_grad():
        np.testing.assert_allclose(torch.jit.load(str(res))(x).numpy(), model(x).numpy(), atol=1e-6)
    assert read_metadata(res)["inputs"] == ["input0"]


def test_a_folder_export_given_a_pt2_file_name_says_which_format_to_keep(tmp_path):
    """Before: 'give the folder's name, e.g. s', and a folder name without a suffix exports ONNX, so the
    hint followed gave no .pt2 graphs at all."""
    gru = zoo.build("seq2seq-gru", src_vocab=300, tgt_vocab=300, hidden=16, emb_dim=8)
    with pytest.raises(ValueError, match=r"give the folder's name, e\.g\. .*/s with format='torch\.export'"):
        zoo.export(gru, tmp_path / "s.pt2")
    assert not (tmp_path / "s.pt2").exists()
