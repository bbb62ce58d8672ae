"""Writing an export: each graph (and a folder export's files and index) in a private temporary folder,
verified there, then moved into place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from zoo import fs
from zoo.exporting.formats import INDEX_FILE, SUFFIX
from zoo.exporting.onnx_writer import write_onnx
from zoo.exporting.pt2_writer import write_pt2
from zoo.exporting.spec import ExportResult, ExportSpec, Graph
from zoo.exporting.target import aside_path, recover_aside, replace_dir
from zoo.exporting.torchscript_writer import write_torchscript
from zoo.exporting.verification import verify_graph


def write_export(spec: ExportSpec, target: Path, fmt: str, verify: bool, dtype: torch.dtype = torch.float32) -> ExportResult:
    """Write (and verify) in a private temp folder (:class:`zoo.fs.PrivateTemp`), then move into place."""
    if not spec.is_folder:  # a file linked elsewhere is written there, as every zoo write is (zoo.fs.write_target)
        target = fs.write_target(target)
    fs.sweep_temps(target.parent)  # the staging folders of exports killed here (SIGTERM runs no cleanup)
    if spec.is_folder:
        recover_aside(target)
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
                per_graph[g.name] = verify_graph(g, path, fmt, spec.atol, spec.rtol, dtype)
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
            replace_dir(out, target, aside_path(target), spec.files)
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


_WRITERS = {"onnx": write_onnx, "torch.export": write_pt2, "torchscript": write_torchscript}
