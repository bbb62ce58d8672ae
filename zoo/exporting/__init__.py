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
vision). Without a ``format``, ``path``'s suffix picks it (``.onnx``, ``.pt2``, ``.pt``), else ONNX. The
model is exported in eval mode (before the family's exporter runs it to build samples) and with any active
``torch.autocast`` turned off, so the graph computes in the model's own dtype.
A model cast with ``.half()``, ``.double()`` or ``.to(torch.bfloat16)`` is exported in that dtype (its sample
inputs are built in it; integer token ids stay integers) and checked against PyTorch in it, float16 and
bfloat16 within a few units of their last place; a format that cannot hold the dtype (bfloat16 in ONNX) is
an :class:`ExportError` saying what to do instead.
A model with one graph is written to ``path`` itself (the format's suffix is added when ``path`` has none of
``.onnx``, ``.pt2``, ``.pt``: ``td3.pendulum-v1`` becomes ``td3.pendulum-v1.onnx``; a ``path`` ending in a
separator names a folder and is refused);
a model with several graphs or extra files (seq2seq: encoder, decoder step, tokenizer) is written to the
folder ``path``, with an ``export.json`` that describes the graphs. Single files carry the same description
inside (ONNX ``metadata_props["zoo"]``, the ``.pt2``/TorchScript extra file ``zoo.json``). A folder export
replaces its folder whole, so an existing folder is taken only when it is empty or an earlier zoo export
(its ``export.json`` and the files listed there, nothing else); any other folder is refused, untouched.

One module per concept: ``spec`` (ExportSpec, Graph, ExportResult, ExportError), ``exporters`` (the registry and
a plain module's spec), ``formats``, ``dtypes``, ``target`` (the path, and a folder export's replacement),
``heads`` (a classifier's outputs, and the class names that still name them),
``tracing``, one writer per format (``onnx_writer``, ``pt2_writer``, ``torchscript_writer``), ``writing``,
``verification``, ``entry`` (:func:`export`) and ``metadata`` (:func:`read_metadata`, the loader).
"""

from __future__ import annotations

from zoo.exporting.dtypes import dtype_name, floating_dtype
from zoo.exporting.entry import export
from zoo.exporting.exporters import check_int, register_exporter
from zoo.exporting.formats import FORMATS, INDEX_FILE, METADATA_FILE, ONNX_OPSET, SUFFIX
from zoo.exporting.heads import fitting_classes, head_outputs
from zoo.exporting.metadata import read_metadata
from zoo.exporting.spec import ExportError, ExportResult, ExportSpec, Graph

__all__ = [
    "FORMATS",
    "INDEX_FILE",
    "METADATA_FILE",
    "ONNX_OPSET",
    "SUFFIX",
    "ExportError",
    "ExportResult",
    "ExportSpec",
    "Graph",
    "check_int",
    "dtype_name",
    "export",
    "fitting_classes",
    "floating_dtype",
    "head_outputs",
    "read_metadata",
    "register_exporter",
]
