"""The ONNX format: the dynamo exporter at opset :data:`ONNX_OPSET`, the description in
``metadata_props``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch

from zoo.exporting.formats import ONNX_OPSET
from zoo.exporting.spec import ExportError, Graph
from zoo.exporting.tracing import dynamic_shapes, first_line, old_torch_hint, release, trace_inputs

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
    if release(have, 3) < _ONNXSCRIPT_MIN:
        need = ".".join(map(str, _ONNXSCRIPT_MIN))
        raise ImportError(f"ONNX export needs onnxscript >= {need}, this is {have} (torch's exporter imports "
                          f"modules that older releases lack): pip install -U 'zoo[export]'")


def write_onnx(g: Graph, path: Path, meta: dict[str, Any]) -> None:
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
                    g.module, trace_inputs(g), dynamo=True, opset_version=ONNX_OPSET,
                    input_names=list(g.input_names), output_names=list(g.output_names),
                    dynamic_shapes=dynamic_shapes(g), verbose=False)
            except Exception as err:
                raise ExportError(f"ONNX export of graph {g.name!r} failed: {first_line(err)}{old_torch_hint()}") from err
        proto = program.model_proto
    del proto.metadata_props[:]
    entry = proto.metadata_props.add()
    entry.key, entry.value = "zoo", json.dumps(meta)
    onnx.save_model(proto, str(path))
    onnx.checker.check_model(str(path), full_check=True)
