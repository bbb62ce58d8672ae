"""The TorchScript format (``.pt``): scripted, or traced where scripting fails."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import torch

from zoo._stacklevel import user_stacklevel
from zoo.exporting.formats import METADATA_FILE
from zoo.exporting.spec import Graph
from zoo.exporting.tracing import first_line


def _saved(module: torch.jit.ScriptModule, meta: dict[str, Any]) -> io.BytesIO:
    buf = io.BytesIO()  # as write_pt2: no file write inside PyTorch's archive writer
    torch.jit.save(module, buf, _extra_files={METADATA_FILE: json.dumps(meta)})
    return buf


def write_torchscript(g: Graph, path: Path, meta: dict[str, Any]) -> None:
    module = g.module
    try:
        # saved here too: torch.jit.script compiles some modules it cannot serialise (a Tensor parameter
        # defaulting to None: 'strides() called on an undefined Tensor' from torch.jit.save, not an ExportError)
        buf = _saved(torch.jit.script(module), meta)
    except Exception as err:  # noqa: BLE001 - scripting fails on many dynamic models; tracing is the fallback
        # tracing records the ops of the sample: right for a fixed control flow, which the check below tests
        warnings.warn(f"torch.jit.script cannot compile (or save) graph {g.name!r} ({first_line(err)}); "
                      f"exported by torch.jit.trace instead", stacklevel=user_stacklevel())
        buf = _saved(torch.jit.trace(module, tuple(g.inputs), check_trace=False, strict=False), meta)
    path.write_bytes(buf.getbuffer())
