"""What an export is made of: a family's :class:`ExportSpec` of :class:`Graph` objects, the
:class:`ExportResult` of :func:`zoo.export`, and :class:`ExportError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn


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
