"""The loader of an export's description: :func:`read_metadata`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from zoo.exporting.formats import INDEX_FILE, METADATA_FILE


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
