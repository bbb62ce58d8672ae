"""The export formats: their names and aliases, file suffixes, and the files that describe an export."""

from __future__ import annotations

from pathlib import Path

FORMATS = ("onnx", "torch.export", "torchscript")
SUFFIX = {"onnx": ".onnx", "torch.export": ".pt2", "torchscript": ".pt"}
SUFFIX_FORMAT = {suffix: fmt for fmt, suffix in SUFFIX.items()}  # what a path's suffix asks for
ALIASES = {"pt2": "torch.export", "torch_export": "torch.export", "export": "torch.export", "jit": "torchscript"}
ONNX_OPSET = 18
METADATA_FILE = "zoo.json"
INDEX_FILE = "export.json"


def format_for(path: Path) -> str:
    """The format ``path``'s suffix names (``.onnx``, ``.pt2``, ``.pt``), else ``"onnx"``: a path without one
    (a folder export, or a file whose suffix is added) or with another suffix (refused by :func:`target_path`)."""
    return SUFFIX_FORMAT.get(path.suffix, "onnx")
