"""``zoo.export``: ship a model as ONNX or as a ``torch.export`` program (``.pt2``), checked against PyTorch.

    import zoo
    agent = zoo.build("td3", weights="pendulum-v1")
    result = zoo.export(agent, "pendulum_policy.onnx")        # observation in, action in the env's units out
    result.max_abs_diff, result.atol                         # how far the export is from PyTorch, and the bound

A family says *what* is exported by registering an exporter for its model class (the family imports this
module, never the reverse)::

    @register_exporter(TD3Agent)
    def _policy(agent) -> ExportSpec:
        return ExportSpec([Graph("policy", module, (obs,), ("observation",), ("action",), {0: {0: "batch"}})],
                          atol=1e-5, rtol=1e-5)

and the spine does the rest for every format: the trace (``torch.export.export``, or ``torch.onnx.export``
with the dynamo exporter), dynamic axes named in the spec, the write (temporary file, then ``os.replace``:
nothing half-written is ever at ``path``), and the check. On export (``verify=True``, the default) the written
file is loaded back (onnxruntime for ONNX, ``torch.export.load`` for ``.pt2``) and run on the spec's sample
inputs, which include other batch sizes and lengths than the traced one; every output must satisfy
``|got - want| <= atol + rtol * |want|`` against the eager module (integer outputs must be equal), or
:class:`ExportError` names the graph, the output, the sample and the largest difference, and ``path`` is
left untouched.

Formats: ``"onnx"`` (opset 18), ``"torch.export"`` (``.pt2``, the modern PyTorch path; load with
``torch.export.load(path).module()``) and ``"torchscript"`` (``.pt``, only where a family says it works:
vision). Without a ``format``, ``path``'s suffix picks it (``.onnx``, ``.pt2``, ``.pt``), else ONNX.
A model cast with ``.half()``, ``.double()`` or ``.to(torch.bfloat16)`` is exported in that dtype (its sample
inputs are built in it; integer token ids stay integers) and checked against PyTorch in it, float16 and
bfloat16 within a few units of their last place; a format that cannot hold the dtype (bfloat16 in ONNX) is
an :class:`ExportError` saying what to do instead.
A model with one graph is written to ``path`` itself (the format's suffix is added when ``path`` has none);
a model with several graphs or extra files (seq2seq: encoder, decoder step, tokenizer) is written to the
folder ``path``, with an ``export.json`` that describes the graphs. Single files carry the same description
inside (ONNX ``metadata_props["zoo"]``, the ``.pt2``/TorchScript extra file ``zoo.json``). A folder export
replaces its folder whole, so an existing folder is taken only when it is empty or an earlier zoo export
(its ``export.json`` and the files listed there, nothing else); any other folder is refused, untouched.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import io
import json
import os
import re
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.inputs import whole_number
from zoo.wrappers import unwrap

__all__ = [
    "FORMATS",
    "ExportError",
    "ExportResult",
    "ExportSpec",
    "Graph",
    "export",
    "read_metadata",
    "register_exporter",
]

FORMATS = ("onnx", "torch.export", "torchscript")
SUFFIX = {"onnx": ".onnx", "torch.export": ".pt2", "torchscript": ".pt"}
_SUFFIX_FORMAT = {suffix: fmt for fmt, suffix in SUFFIX.items()}  # what a path's suffix asks for
_ALIASES = {"pt2": "torch.export", "torch_export": "torch.export", "export": "torch.export", "jit": "torchscript"}
ONNX_OPSET = 18
METADATA_FILE = "zoo.json"
INDEX_FILE = "export.json"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # the tracers colour their messages for a terminal


class ExportError(RuntimeError):
    """The export cannot be made for this model and format, or the exported graph disagrees with PyTorch."""


@dataclass
class Graph:
    """One exported computation.

    ``module(*inputs)`` is what is exported; ``dynamic`` maps an input index to ``{axis: dim name}``
    (inputs sharing a name share the axis, e.g. the batch), with bounds per name in ``min_sizes`` (default
    1) and ``max_sizes`` (default: none, any size). ``checks`` are further sample inputs that the export
    must also reproduce (other batch sizes, lengths). The export is compared with ``reference(*sample)`` when given
    (a family's own eager path, where the traced module is a wrapper of it), else with ``module(*sample)``.
    For a model that is not a torch module (an sklearn pipeline), ``onnx_model`` is a converted
    ``onnx.ModelProto``, the inputs are numpy arrays and ``reference`` is required.
    """

    name: str
    module: nn.Module | None
    inputs: tuple[Any, ...]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic: dict[int, dict[int, str]] = field(default_factory=dict)
    checks: list[tuple[Any, ...]] = field(default_factory=list)
    min_sizes: dict[str, int] = field(default_factory=dict)
    max_sizes: dict[str, int] = field(default_factory=dict)
    onnx_model: Any = None
    reference: Callable[..., Sequence[Any]] | None = None

    def __post_init__(self) -> None:
        if (self.module is None) == (self.onnx_model is None):
            raise ValueError(f"graph {self.name!r}: give exactly one of module and onnx_model")
        if self.module is None and self.reference is None:
            raise ValueError(f"graph {self.name!r}: an onnx_model needs a reference to be checked against")
        if len(self.inputs) != len(self.input_names):
            raise ValueError(f"graph {self.name!r}: {len(self.inputs)} inputs but {len(self.input_names)} names")


@dataclass
class ExportSpec:
    """What a family exports for one model: its graphs, the tolerance the export must meet, a description
    stored with the files (``metadata``: JSON-able; inputs, outputs, units, classes), extra files for a
    folder export, and the formats it refuses, each with its reason."""

    graphs: list[Graph]
    atol: float
    rtol: float
    metadata: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str | bytes] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    torchscript: bool = False

    @property
    def is_folder(self) -> bool:
        return len(self.graphs) > 1 or bool(self.files)


@dataclass(frozen=True)
class ExportResult(os.PathLike):
    """What :func:`export` wrote; usable as a path (``os.fspath(result)``, ``str(result)``).

    ``path`` is the file (one graph) or the folder (several graphs + files); ``files`` lists everything
    written. ``max_abs_diff`` is the largest ``|export - PyTorch|`` over every graph, output and sample
    input (``None`` with ``verify=False``); ``per_graph`` breaks it down; ``atol``/``rtol`` is the bound
    the export was held to.
    """

    path: Path
    format: str
    files: tuple[Path, ...]
    atol: float
    rtol: float
    max_abs_diff: float | None
    verified: bool
    per_graph: dict[str, float] = field(default_factory=dict)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:  # a path-like prints as its path: str(result) can be opened
        return str(self.path)

    def describe(self) -> str:
        """One line: where, which format, and how far from PyTorch."""
        check = (f"max |diff| {self.max_abs_diff:.2e} vs PyTorch (atol {self.atol:g}, rtol {self.rtol:g})"
                 if self.verified else "outputs not verified")
        return f"{self.path} ({self.format}, {check})"


# --- the exporter registry ------------------------------------------------------------------------------

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
    inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
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
    n_out = len(_leaves(outputs, f"{type(model).__name__}.forward"))
    names = tuple(f"output{i}" for i in range(n_out))
    if isinstance(outputs, Mapping) and all(isinstance(v, torch.Tensor) for v in outputs.values()) \
            and all(isinstance(k, str) and k for k in outputs) and len(set(outputs)) == n_out:
        names = tuple(outputs)  # the graph's outputs are the dict's values, in its order
    checks = [tuple(_resized(x, x.shape[0] + 1) for x in inputs)]
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


def _resized(x: torch.Tensor, batch: int) -> torch.Tensor:
    """A sample like ``x`` with another batch size (random values of its dtype and range)."""
    g = torch.Generator().manual_seed(batch)
    shape = (batch, *x.shape[1:])
    if x.is_floating_point():
        return torch.randn(shape, generator=g).to(x.dtype)
    lo, hi = int(x.min()), int(x.max()) + 1
    return torch.randint(lo, max(hi, lo + 1), shape, generator=g).to(x.dtype)


# --- the public entry point -----------------------------------------------------------------------------


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
    path = Path(path).expanduser()  # as zoo.save and every --out: '~/p.onnx' made a folder named '~' here
    fmt = _format_for(path) if format is None else _ALIASES.get(format, format)
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; expected one of {', '.join(FORMATS)}")
    if isinstance(model, str):
        from zoo.registry import build

        model = build(model)
    model = unwrap(model)  # torch.compile's or DataParallel's wrapper has none of the family's attributes
    # traced and verified on the CPU (the file runs anywhere): a model on a GPU is exported from a CPU copy
    # and stays where it is (the family's exporter may run it while describing the graphs)
    model = _cpu_copy(model)
    with _restore_training(model) as remember:
        spec = _spec_for(model, config)
        if fmt in spec.unsupported:
            raise ExportError(f"{type(model).__name__} cannot be exported as {fmt}: {spec.unsupported[fmt]}")
        if fmt == "torchscript" and not spec.torchscript:
            raise ExportError(f"TorchScript export is kept only where it works (vision); export "
                              f"{type(model).__name__} with format='torch.export' (.pt2) or 'onnx'")
        target = _target_path(Path(path), fmt, spec)
        dtype = _spec_dtype(spec)
        _check_dtype(model, fmt, dtype)
        spec.atol, spec.rtol = _tolerance(spec.atol, spec.rtol, dtype)
        for g in spec.graphs:  # exported and checked in eval mode (dropout off, running BN statistics)
            if g.module is not None:
                remember(g.module)
                g.module = _cpu_copy(g.module)  # a module a non-module model keeps on a GPU (TD3's actor)
                g.module.eval()
        return _write(spec, target, fmt, verify, dtype)


def _format_for(path: Path) -> str:
    """The format ``path``'s suffix names (``.onnx``, ``.pt2``, ``.pt``), else ``"onnx"``: a path without one
    (a folder export, or a file whose suffix is added) or with another suffix (refused by :func:`_target_path`)."""
    return _SUFFIX_FORMAT.get(path.suffix, "onnx")


# --- dtypes ---------------------------------------------------------------------------------------------


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


def _spec_dtype(spec: ExportSpec) -> torch.dtype:
    """The least precise floating dtype that a graph's weights hold (float32 when none: an sklearn graph)."""
    dtypes = {t.dtype for g in spec.graphs if g.module is not None
              for t in [*g.module.parameters(), *g.module.buffers()] if t.is_floating_point()}
    return max(dtypes, key=lambda d: torch.finfo(d).eps, default=torch.float32)


def _check_dtype(model: Any, fmt: str, dtype: torch.dtype) -> None:
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


def _tolerance(atol: float, rtol: float, dtype: torch.dtype) -> tuple[float, float]:
    """The family's float32 ``atol``/``rtol``, widened to ``_ULPS`` units of ``dtype``'s precision when that is
    coarser than float32's (float16: 7.8e-3, bfloat16: 6.3e-2)."""
    if torch.finfo(dtype).eps <= torch.finfo(torch.float32).eps:
        return atol, rtol
    floor = _ULPS * torch.finfo(dtype).eps
    return max(atol, floor), max(rtol, floor)


def _zoo_models() -> str:
    from zoo.registry import list_models

    return ", ".join(list_models())


def _spec_for(model: Any, config: dict[str, Any]) -> ExportSpec:
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


def _target_path(path: Path, fmt: str, spec: ExportSpec) -> Path:
    if spec.is_folder:
        if Path(os.path.normpath(path)).name in ("", ".", "..") or not Path(os.path.abspath(path)).name:
            # "." is the current folder: an export replaces its folder whole, so it needs one of its own
            raise ValueError(f"{str(path)!r} names no folder of its own ({os.path.abspath(path)}); this model "
                             f"exports a folder (several graphs and files): give it a new name, e.g. "
                             f"{Path(os.path.abspath(path)) / 'export'}")
        if path.suffix in SUFFIX.values() and not path.is_dir():
            # "s.onnx" became a folder of that name, which no ONNX tool opens as the model it looks like
            raise ValueError(f"this model exports a folder (several graphs and files, {SUFFIX[fmt]} each), not one "
                             f"file: give the folder's name, e.g. {path.with_suffix('')}")
        if path.is_symlink():
            raise FileExistsError(f"{path} is a symbolic link; an export replaces its folder whole, which would "
                                  f"replace the link: give the real folder or a new name")
        if path.exists() and not path.is_dir():
            raise FileExistsError(f"{path} is a file; this model exports a folder (several graphs and files)")
        if path.is_dir():
            _refuse_foreign_folder(path, spec.files)
        return path
    suffix = SUFFIX[fmt]
    if path.is_dir():  # adding the suffix would write a sibling of the folder ("out" -> "out.onnx"), not into it
        raise IsADirectoryError(f"{path} is a folder; this model exports one {suffix} file: give its name "
                                f"(e.g. {path / ('model' + suffix)})")
    if not path.suffix:
        return path.with_suffix(suffix)
    if path.suffix != suffix:
        implied = _SUFFIX_FORMAT.get(path.suffix)
        other = f", or format {implied!r}, the one a {path.suffix} file holds" if implied else ""
        raise ValueError(f"{fmt} export writes a {suffix} file, got path {path} (use {path.with_suffix(suffix)}{other})")
    return path


def _foreign_entries(folder: Path, extra: Any = ()) -> list[str]:
    """What in ``folder`` an earlier zoo export did not write: everything unless its ``export.json`` is
    ours, else the entries that index does not list (nor ``extra``, the files this export adds). An empty
    list means the folder may be replaced whole without losing anyone's files."""
    entries = sorted(os.listdir(folder))
    try:
        index = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))
        ours = {INDEX_FILE, *(str(g["file"]) for g in index["graphs"].values()), *index.get("files", ()), *extra}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # absent, or not an index zoo wrote
        return entries
    return [e for e in entries if e not in ours or (folder / e).is_symlink() or not (folder / e).is_file()]


def _refuse_foreign_folder(folder: Path, extra: Any = ()) -> None:
    foreign = _foreign_entries(folder, extra)
    if foreign:
        shown = ", ".join(f + ("/" if (folder / f).is_dir() else "") for f in foreign[:5])
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        raise FileExistsError(
            f"{folder} exists and is not an earlier zoo export: it holds {shown}{more}, which zoo did not write. "
            f"An export replaces its folder whole, so zoo only writes into a new folder, an empty one, or one it "
            f"exported before (its {INDEX_FILE} and the files listed there, nothing else); nothing was written. "
            f"Give another folder name, or move those files out of {folder} first.")


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


# --- writing --------------------------------------------------------------------------------------------


def _write(spec: ExportSpec, target: Path, fmt: str, verify: bool, dtype: torch.dtype = torch.float32) -> ExportResult:
    """Write (and verify) in a private temp folder (:class:`zoo.fs.PrivateTemp`), then move into place."""
    fs.sweep_temps(target.parent)  # the staging folders of exports killed here (SIGTERM runs no cleanup)
    if spec.is_folder:
        _recover_aside(target)
    staging = fs.PrivateTemp(target.parent, target.name)
    try:
        out = staging.path_for(target)  # the file, or the folder of a multi-graph export, being built
        if spec.is_folder:
            out.mkdir()
        per_graph: dict[str, float] = {}
        names = []
        for g in spec.graphs:
            name = f"{g.name}{SUFFIX[fmt]}"
            meta = {**spec.metadata, "graph": g.name, "inputs": list(g.input_names),
                    "outputs": list(g.output_names), "atol": spec.atol, "rtol": spec.rtol}
            path = out / name if spec.is_folder else out
            _write_graph(fmt, g, path, meta, target)
            if verify:
                per_graph[g.name] = _verify(g, path, fmt, spec.atol, spec.rtol, dtype)
            names.append(name)
        if not spec.is_folder:
            staging.commit(target)
            files: tuple[Path, ...] = (target,)
        else:
            for fname, content in spec.files.items():
                data = content if isinstance(content, bytes) else content.encode("utf-8")
                _write_file(out / fname, data, target)
            index = {**spec.metadata, "format": fmt, "atol": spec.atol, "rtol": spec.rtol,
                     "graphs": {g.name: {"file": n, "inputs": list(g.input_names), "outputs": list(g.output_names)}
                                for g, n in zip(spec.graphs, names)},
                     "files": sorted([*names, *spec.files, INDEX_FILE]),  # what a later export may replace
                     "max_abs_diff": per_graph or None}
            _write_file(out / INDEX_FILE, (json.dumps(index, indent=2) + "\n").encode("utf-8"), target)
            _replace_dir(out, target, _aside(target), spec.files)
            files = tuple(sorted(target / n for n in [*names, *spec.files, INDEX_FILE]))
    finally:
        staging.abort()
    worst = max(per_graph.values()) if per_graph else None
    return ExportResult(target, fmt, files, spec.atol, spec.rtol, worst, verify, per_graph)


def _write_graph(fmt: str, g: Graph, path: Path, meta: dict[str, Any], target: Path) -> None:
    """One writer call; a failed write (full disk, file-size limit) is said naming ``target`` and its folder,
    not in the library's words (ONNX's was a bare ``[Errno 28] No space left on device``)."""
    try:
        _WRITERS[fmt](g, path, meta)
    except OSError as err:
        raise fs.write_error(err, target, None) from None


def _write_file(path: Path, data: bytes, target: Path) -> None:
    """A folder export's extra file or index, a failed write said as for its graphs (naming ``target``)."""
    try:
        path.write_bytes(data)
    except OSError as err:
        raise fs.write_error(err, target, len(data)) from None


def _aside(target: Path) -> Path:
    """Where an earlier folder export of ``target`` waits while the new one moves in: beside it, under a name of
    zoo's. It was in the private staging folder, so a kill between the two moves left it where the next sweep
    of temp files (any later save, export or pull in that folder) removed it: neither export was left."""
    return target.with_name(f"{target.name}.zoo-export.previous")


def _recover_aside(target: Path) -> None:
    """What a kill in :func:`_replace_dir` left: the earlier export aside and no ``target`` (put back, with a
    warning), or both (the new one moved in, and the earlier one was not yet removed: removed now)."""
    aside = _aside(target)
    if not aside.is_dir() or aside.is_symlink():
        return
    if target.exists() or target.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
        return
    os.replace(aside, target)
    warnings.warn(f"an export into {target} was stopped while its earlier export waited in {aside.name}: that "
                  "earlier export is put back before this one", stacklevel=user_stacklevel())


def _replace_dir(built: Path, target: Path, aside: Path, extra: Any) -> None:
    """Move the finished folder onto ``target``. An earlier export there is first moved to ``aside``
    (:func:`_aside`), checked again (files may have appeared since the export began) and put back when it
    holds anything zoo did not write; once the new export is in place it is removed."""
    if not (target.exists() or target.is_symlink()):
        os.replace(built, target)
        return
    os.replace(target, aside)
    try:
        _refuse_foreign_folder(aside, extra)
    except FileExistsError:
        os.replace(aside, target)
        _refuse_foreign_folder(target, extra)  # the same error, naming the user's folder
        raise
    except BaseException:  # a Ctrl-C here: the earlier export goes back before the staging folder is removed
        os.replace(aside, target)
        raise
    try:
        os.replace(built, target)
    except BaseException:
        os.replace(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)


_NO_MAX = 2**31 - 1  # the bound of a dynamic axis the family leaves open


def _dynamic_shapes(g: Graph) -> dict[str, Any]:
    """The spec's named axes as ``torch.export.Dim`` objects, keyed by ``forward``'s parameter names."""
    dims: dict[str, torch.export.Dim] = {}
    for axes in g.dynamic.values():
        for name in axes.values():
            if name not in dims:
                # a finite bound where the family sets none: torch 2.7 guards sizes against 2**63 - 1
                # (INT64_MAX) and then refuses an unbounded axis ("Constraints violated (batch)")
                dims[name] = torch.export.Dim(name, min=g.min_sizes.get(name, 1), max=g.max_sizes.get(name, _NO_MAX))
    params = [p.name for p in inspect.signature(g.module.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return {params[i]: ({ax: dims[n] for ax, n in g.dynamic[i].items()} if i in g.dynamic else None)
            for i in range(len(g.inputs))}


def _cpu_copy(model: Any) -> Any:
    """``model`` itself when it is on the CPU (or no module), else a CPU copy of it."""
    if not isinstance(model, nn.Module):
        return model
    on_cpu = all(t.device.type == "cpu" for t in [*model.parameters(), *model.buffers()])
    return model if on_cpu else copy.deepcopy(model).cpu()


def _trace_inputs(g: Graph) -> tuple[Any, ...]:
    """The inputs to trace with: a dynamic axis of size 1 is doubled (the sample itself stays a check).

    torch.export specialises every dimension of size 0 or 1 to that constant, so a batch-1 sample
    would make a declared dynamic batch fail its constraint instead of exporting a batch-free graph."""
    inputs = list(g.inputs)
    for i, axes in g.dynamic.items():
        x = inputs[i]
        for axis, name in axes.items():
            if isinstance(x, torch.Tensor) and x.shape[axis] == 1 and g.max_sizes.get(name, 2) >= 2 \
                    and g.min_sizes.get(name, 1) <= 2:
                x = torch.cat([x, x], dim=axis)
        inputs[i] = x
    return tuple(inputs)


def _first_line(err: BaseException) -> str:
    """``Type: first line`` of a tracer's error (they run to pages), without its terminal colour codes, and
    that of its root cause (the ONNX exporter's own first line only says which step failed); the rest stays
    in the chained traceback."""

    def line(e: BaseException) -> str:
        text = _ANSI.sub("", str(e)).strip()
        return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"

    root, seen = err, {id(err)}
    while root.__cause__ is not None and id(root.__cause__) not in seen:
        root = root.__cause__
        seen.add(id(root))
    return line(err) if root is err else f"{line(err)} (cause: {line(root)})"


# torch.export handles every zoo graph from this release on (measured: 2.10.0 and 2.14.1; the seq2seq graphs
# failed inside torch.export on 2.7.1, 2.8.0 and 2.9.1)
_EXPORTS_ALL_FROM = (2, 10)
def _release(version: str, parts: int) -> tuple[int, ...]:
    """``"2.7.1+cu126"`` -> ``(2, 7)`` for ``parts=2``; a part that is not a number (``0rc1``) counts as 0."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("+")[0].split(".")[:parts])


_TORCH_VERSION = _release(torch.__version__, 2)


def _old_torch_hint() -> str:
    """What a tracer failure on an older torch should add: the release it may need."""
    if _TORCH_VERSION >= _EXPORTS_ALL_FROM:
        return ""
    have = ".".join(map(str, _TORCH_VERSION))
    return (f"; this is torch {have}, and torch.export handles every zoo graph from torch "
            f"{'.'.join(map(str, _EXPORTS_ALL_FROM))} on: upgrading torch may fix it")


def _torch_program(g: Graph) -> torch.export.ExportedProgram:
    try:
        with torch.no_grad():
            return torch.export.export(g.module, _trace_inputs(g), dynamic_shapes=_dynamic_shapes(g), strict=False)
    except Exception as err:  # the tracer's errors are long; keep their first line and the cause
        raise ExportError(f"torch.export could not trace graph {g.name!r}: {_first_line(err)}{_old_torch_hint()}") from err


def _write_pt2(g: Graph, path: Path, meta: dict[str, Any]) -> None:
    if g.module is None:
        raise ExportError(f"graph {g.name!r} is not a torch module")
    program = _torch_program(g)
    with warnings.catch_warnings():
        # raised for tensors that share storage (a model's tied weights); harmless on CPU, where we export
        warnings.filterwarnings("ignore", message="No complete tensor found in the group")
        # into memory, then one Python write: a write that fails inside PyTorch's archive writer leaves an
        # object whose destructor throws again and aborts the process (terminate called after c10::Error)
        buf = io.BytesIO()
        try:
            torch.export.save(program, buf, extra_files={METADATA_FILE: json.dumps(meta)})
        except Exception as err:  # torch 2.7's serializer refused the GRU cell's graph that its tracer made
            raise ExportError(f"saving graph {g.name!r} as .pt2 failed: {_first_line(err)}{_old_torch_hint()}") from err
    path.write_bytes(buf.getbuffer())


# pyproject's floor: torch's exporter imports onnxscript._framework_apis.torch_2_<its version>, a module that
# older releases lack (0.6.0 also failed the video model's version-conversion pass)
_ONNXSCRIPT_MIN = (0, 6, 2)


def _check_onnx_exporter() -> None:
    """onnx and an onnxscript recent enough for torch's exporter, or an ImportError that says what to install."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        import onnx  # noqa: F401
        have = version("onnxscript")
    except (ImportError, PackageNotFoundError) as err:
        raise ImportError("ONNX export needs onnx and onnxscript: pip install 'zoo[export]'") from err
    if _release(have, 3) < _ONNXSCRIPT_MIN:
        need = ".".join(map(str, _ONNXSCRIPT_MIN))
        raise ImportError(f"ONNX export needs onnxscript >= {need}, this is {have} (torch's exporter imports "
                          f"modules that older releases lack): pip install -U 'zoo[export]'")


def _write_onnx(g: Graph, path: Path, meta: dict[str, Any]) -> None:
    _check_onnx_exporter()
    import onnx

    if g.onnx_model is not None:
        proto = g.onnx_model
    else:
        with warnings.catch_warnings(), torch.no_grad():
            # the exporter narrates its passes through warnings (deprecations of its own internals)
            warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning, UserWarning))
            try:
                program = torch.onnx.export(
                    g.module, _trace_inputs(g), dynamo=True, opset_version=ONNX_OPSET,
                    input_names=list(g.input_names), output_names=list(g.output_names),
                    dynamic_shapes=_dynamic_shapes(g), verbose=False)
            except Exception as err:
                raise ExportError(f"ONNX export of graph {g.name!r} failed: {_first_line(err)}{_old_torch_hint()}") from err
        proto = program.model_proto
    del proto.metadata_props[:]
    entry = proto.metadata_props.add()
    entry.key, entry.value = "zoo", json.dumps(meta)
    onnx.save_model(proto, str(path))
    onnx.checker.check_model(str(path), full_check=True)


def _write_torchscript(g: Graph, path: Path, meta: dict[str, Any]) -> None:
    module = g.module
    try:
        scripted = torch.jit.script(module)
    except Exception as err:  # noqa: BLE001 - scripting fails on many dynamic models; tracing is the fallback
        # tracing records the ops of the sample: right for a fixed control flow, which the check below tests
        warnings.warn(f"torch.jit.script cannot compile graph {g.name!r} ({_first_line(err)}); exported by "
                      f"torch.jit.trace instead", stacklevel=user_stacklevel())
        scripted = torch.jit.trace(module, tuple(g.inputs), check_trace=False, strict=False)
    buf = io.BytesIO()  # as _write_pt2: no file write inside PyTorch's archive writer
    torch.jit.save(scripted, buf, _extra_files={METADATA_FILE: json.dumps(meta)})
    path.write_bytes(buf.getbuffer())


_WRITERS = {"onnx": _write_onnx, "torch.export": _write_pt2, "torchscript": _write_torchscript}


# --- checking -------------------------------------------------------------------------------------------


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
            # onnxruntime's CPU kernels are float32 first: float64 has no Conv (NOT_IMPLEMENTED: Could not find
            # an implementation for Conv(11)), and the file cannot be checked here
            raise ExportError(f"onnxruntime cannot run the {dtype_name(dtype)} ONNX graph {graph!r} to verify it "
                              f"({_first_line(err)}); nothing was written. Cast the model to float32 first "
                              f"(model.float()), export format='torch.export' (.pt2), which keeps "
                              f"{dtype_name(dtype)}, or pass verify=False to write it unchecked") from err
        names = [i.name for i in session.get_inputs()]
        return lambda *xs: session.run(None, dict(zip(names, (_numpy(x) for x in xs))))
    module = torch.export.load(str(path)).module() if fmt == "torch.export" else torch.jit.load(str(path))

    def run(*xs: Any) -> list[np.ndarray]:
        with torch.no_grad():
            return [_numpy(t) for t in _leaves(module(*(torch.as_tensor(x) for x in xs)))]

    return run


def _leaves(out: Any, what: str = "the graph") -> list[Any]:
    """The tensors (or arrays) of an output structure, in order: tuples and lists as they are, a dict by its
    values (its keys are names, not outputs). Anything else cannot be an exported output."""
    if isinstance(out, (torch.Tensor, np.ndarray)):
        return [out]
    if isinstance(out, Mapping):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in _leaves(o, what)]
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
        outs = _leaves(g.reference(*sample) if g.reference is not None else g.module(*sample), f"graph {g.name!r}")
    return [_numpy(o.float() if isinstance(o, torch.Tensor) and o.is_floating_point() else o) for o in outs]


def _verify(g: Graph, path: Path, fmt: str, atol: float, rtol: float, dtype: torch.dtype = torch.float32) -> float:
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


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The description zoo stored with an export: ``export.json`` of a folder, ONNX ``metadata_props``,
    or the ``zoo.json`` extra file of a ``.pt2``/TorchScript file."""
    path = Path(path).expanduser()
    if path.is_dir():
        return json.loads((path / INDEX_FILE).read_text(encoding="utf-8"))
    if path.suffix == ".onnx":
        import onnx

        props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
        if "zoo" not in props:
            raise ValueError(f"{path} has no zoo metadata (was it written by zoo.export?)")
        return json.loads(props["zoo"])
    if path.suffix not in (".pt2", ".pt"):  # torch.jit.load read any other file as TorchScript: a zip error
        raise ValueError(f"{path} is no export (read_metadata reads an export folder, .onnx, .pt2 or .pt)"
                         + ("; a weights file's metadata: zoo.hub.read_metadata(path)"
                            if path.suffix == ".safetensors" else ""))
    extra = {METADATA_FILE: ""}
    if path.suffix == ".pt2":
        torch.export.load(str(path), extra_files=extra)
    else:
        torch.jit.load(str(path), _extra_files=extra)
    if not extra[METADATA_FILE]:
        raise ValueError(f"{path} has no zoo metadata (was it written by zoo.export?)")
    return json.loads(extra[METADATA_FILE])
