"""What the torch tracers share: the inputs to trace with, the dynamic axes, the first line of a tracer's
error, and the torch release that handles every zoo graph.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch

from zoo.exporting.spec import Graph

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # the tracers colour their messages for a terminal


_NO_MAX = 2**31 - 1  # the bound of a dynamic axis the family leaves open


def dynamic_shapes(g: Graph) -> dict[str, Any]:
    """The spec's named axes as ``torch.export.Dim`` objects, keyed by ``forward``'s parameter names."""
    dims: dict[str, torch.export.Dim] = {}
    for axes in g.dynamic.values():
        for name in axes.values():
            if name not in dims:
                # a finite bound where the family sets none: torch 2.7 guards sizes against 2**63 - 1
                # (INT64_MAX) and then refuses an unbounded axis ("Constraints violated (batch)")
                dims[name] = torch.export.Dim(name, min=g.min_sizes.get(name, 1), max=g.max_sizes.get(name, _NO_MAX))

    def axes(i: int) -> dict[int, torch.export.Dim] | None:
        return {ax: dims[n] for ax, n in g.dynamic[i].items()} if i in g.dynamic else None

    # torch binds the inputs to forward's signature, so the shapes follow it: one entry per positional
    # parameter, and a tuple of the rest under a ``*args`` parameter (``forward(self, *xs)`` had no names to
    # key its inputs by: IndexError)
    shapes: dict[str, Any] = {}
    i, n = 0, len(g.inputs)
    for p in inspect.signature(g.module.forward).parameters.values():
        if i >= n:
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            shapes[p.name] = axes(i)
            i += 1
        elif p.kind == p.VAR_POSITIONAL:
            shapes[p.name] = tuple(axes(j) for j in range(i, n))
            i = n
    if i < n:
        raise TypeError(f"graph {g.name!r} has {n} inputs but {type(g.module).__name__}.forward takes "
                        f"{i} positional arguments")
    return shapes


def trace_inputs(g: Graph) -> tuple[Any, ...]:
    """The inputs to trace with: a dynamic axis of size 1 is doubled (the sample itself stays a check).

    torch.export specialises every dimension of size 0 or 1 to that constant, so a batch-1 sample
    would make a declared dynamic batch fail its constraint instead of exporting a batch-free graph.

    An input sharing memory with an earlier one (``example_inputs=(x, x)``) is traced on a copy: the tracers
    take aliased inputs for one tensor, and the graph of ``forward(a, b)`` read ``a`` twice and ignored ``b``."""
    inputs = list(g.inputs)
    for i, axes in g.dynamic.items():
        x = inputs[i]
        for axis, name in axes.items():
            if isinstance(x, torch.Tensor) and x.shape[axis] == 1 and g.max_sizes.get(name, 2) >= 2 \
                    and g.min_sizes.get(name, 1) <= 2:
                x = torch.cat([x, x], dim=axis)
        inputs[i] = x
    storages: set[int] = set()
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.numel():
            ptr = x.untyped_storage().data_ptr()
            if ptr in storages:
                inputs[i] = x.clone()
            storages.add(ptr)
    return tuple(inputs)


def first_line(err: BaseException) -> str:
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
def release(version: str, parts: int) -> tuple[int, ...]:
    """``"2.7.1+cu126"`` -> ``(2, 7)`` for ``parts=2``; a part that is not a number (``0rc1``) counts as 0."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("+")[0].split(".")[:parts])


_TORCH_VERSION = release(torch.__version__, 2)


def old_torch_hint() -> str:
    """What a tracer failure on an older torch should add: the release it may need."""
    if _TORCH_VERSION >= _EXPORTS_ALL_FROM:
        return ""
    have = ".".join(map(str, _TORCH_VERSION))
    return (f"; this is torch {have}, and torch.export handles every zoo graph from torch "
            f"{'.'.join(map(str, _EXPORTS_ALL_FROM))} on: upgrading torch may fix it")
