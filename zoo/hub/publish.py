"""Publishing weights: how a benchmark adds the file it trained to ``weights/`` and the manifest."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.hub.fetch import sha256_file
from zoo.hub.manifest import (
    _NAME_RE,
    ManifestError,
    WeightsEntry,
    manifest_lock,
    read_manifest,
    weights_dir,
    write_manifest,
)
from zoo.hub.readme import write_readme
from zoo.hub.state import (
    ALIASES_KEY,
    _as_state_dict,
    file_format,
    load_state_dict,
    read_metadata,
    save_weights,
)

__all__ = ["add_weights", "update_manifest"]


def add_weights(
    file_or_state_dict: str | os.PathLike | nn.Module | Mapping[str, torch.Tensor],
    name: str,
    config: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    dtype: torch.dtype | None = None,
) -> WeightsEntry:
    """Write ``weights/<name>.safetensors`` and its manifest entry; return the entry.

    ``file_or_state_dict``: a module, a state dict, or a file (safetensors, or a ``torch.save`` state
    dict, read with ``weights_only=True``). A safetensors file's metadata is carried over, so objects
    that are not networks (an agent, a pipeline) publish the file their family's ``save`` wrote. ``dtype=torch.float16`` halves the file (floating tensors
    only; loading copies back into the model's dtype). Before the entry is written, the file is loaded
    into ``zoo.build(model, **config)`` exactly as users will load it, so a file that does not fit its
    model is never published. ``meta`` gets ``dtype`` and ``num_params`` filled in when absent. The
    manifest is updated under a lock (several benchmarks may publish at once) and weights/README.md is
    regenerated.
    """
    from zoo import registry

    m = _NAME_RE.match(name) if isinstance(name, str) else None
    if m is None:
        raise ManifestError(f"weights name must look like 'model.tag' (e.g. 'resnet18.cifar10'), got {name!r}")
    model = m["model"]
    config = dict(config or {})
    registry.validate_config(model, config)  # unknown model or misspelt key: fail before writing anything
    json.dumps(config), json.dumps(dict(meta or {}))  # both must be plain JSON
    carried: dict[str, str] = {}
    if isinstance(file_or_state_dict, (str, os.PathLike)):
        sd = load_state_dict(file_or_state_dict)
        if file_format(file_or_state_dict) == "safetensors":
            # Families that store non-network objects keep their JSON config in the metadata: keep it.
            carried = {k: v for k, v in read_metadata(file_or_state_dict).items() if k != ALIASES_KEY}
    else:
        sd = _as_state_dict(file_or_state_dict)
    floating = [t for t in sd.values() if t.is_floating_point()]
    storage = dtype or (floating[0].dtype if floating else None)

    folder = weights_dir()
    dest = folder / f"{name}.safetensors"
    tmp = folder / f".{name}.staged.safetensors"
    carried.update({"zoo.name": name, "zoo.config": json.dumps(config, sort_keys=True)})
    save_weights(sd, tmp, metadata=carried, dtype=dtype)
    try:
        obj = registry.build(model, weights=str(tmp), **config)  # the check users' loading will pass
        if isinstance(obj, nn.Module):
            num_params = sum(p.numel() for p in obj.parameters())
        else:
            num_params = sum(t.numel() for t in sd.values())
        full_meta = dict(meta or {})
        full_meta.setdefault("num_params", int(num_params))
        if storage is not None:
            full_meta.setdefault("dtype", str(storage).removeprefix("torch."))
        entry = WeightsEntry.from_dict({
            "name": name, "model": model, "url": dest.name, "sha256": sha256_file(tmp),
            "size": tmp.stat().st_size, "format": "safetensors", "config": config, "meta": full_meta,
        })

        def put(entries: dict[str, WeightsEntry]) -> None:
            os.replace(tmp, dest)  # inside the lock: the file and its entry change together
            entries[name] = entry

        update_manifest(put)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return entry


def update_manifest(change: Callable[[dict[str, WeightsEntry]], None]) -> dict[str, WeightsEntry]:
    """Read, ``change(entries)`` in place, write manifest.json and README.md, all under the manifest lock.

    Several benchmark scripts may publish at the same time; the lock makes each read-modify-write whole.
    """
    with manifest_lock():
        entries = read_manifest()
        change(entries)
        write_manifest(entries)
        write_readme(entries)
    return entries
