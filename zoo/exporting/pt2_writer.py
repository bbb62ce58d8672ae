"""The ``torch.export`` format: a ``.pt2`` program with its description as the extra file ``zoo.json``."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import torch

from zoo.exporting.formats import METADATA_FILE
from zoo.exporting.spec import ExportError, Graph
from zoo.exporting.tracing import dynamic_shapes, first_line, old_torch_hint, trace_inputs


def _torch_program(g: Graph) -> torch.export.ExportedProgram:
    try:
        with torch.no_grad():
            return torch.export.export(g.module, trace_inputs(g), dynamic_shapes=dynamic_shapes(g), strict=False)
    except Exception as err:  # the tracer's errors are long; keep their first line and the cause
        raise ExportError(f"torch.export could not trace graph {g.name!r}: {first_line(err)}{old_torch_hint()}") from err


def write_pt2(g: Graph, path: Path, meta: dict[str, Any]) -> None:
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
            raise ExportError(f"saving graph {g.name!r} as .pt2 failed: {first_line(err)}{old_torch_hint()}") from err
    path.write_bytes(buf.getbuffer())


# pyproject's floor: torch's exporter imports onnxscript._framework_apis.torch_2_<its version>, a module that
