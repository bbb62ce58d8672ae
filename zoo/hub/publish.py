"""Publishing weights: how a benchmark adds the file it trained to ``weights/`` and the manifest, and how
the release host's folder is gathered (``zoo weights release``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo import fs
from zoo.hub.fetch import sha256_file
from zoo.hub.manifest import (
    WEIGHTS_NAME_RE,
    ManifestError,
    WeightsEntry,
    manifest_lock,
    manifest_path,
    read_manifest,
    weights_dir,
    write_manifest,
)
from zoo.hub.readme import write_readme
from zoo.hub.state import (
    ALIASES_KEY,
    as_state_dict,
    file_format,
    is_safetensors,
    load_state_dict,
    read_metadata,
    save_weights,
)

__all__ = ["RUNTIME_KEYS", "add_weights", "release", "update_manifest"]

# config keys that say how and where the publisher's run computed, not what the weights are (the keys the CLI
# treats as a call's settings, zoo/cli/model_options.py): copied from a file into its entry, everyone building the
# tag got the publisher's amp="bf16" (18x slower on a CPU without native bf16) or device="cuda" (no build without
# one). seed and batch_size stay: they are the recipe's, and change nothing a build computes
RUNTIME_KEYS = ("amp", "device")


def _publish_dir() -> Path:
    folder = weights_dir()
    if folder is None:
        raise ManifestError("publishing weights needs a source checkout (its weights/ folder) or "
                            "ZOO_WEIGHTS_DIR=<folder>; this zoo is an installed package")
    return folder


def _refuse_existing(name: str, entries: Mapping[str, WeightsEntry], force: bool) -> None:
    if name in entries and not force:
        old = entries[name]
        raise ManifestError(
            f"weights {name!r} are already published ({old.url}, sha256 {old.expected_hash[:12]}…); "
            "pass force=True (`zoo weights add --force`) to replace the file and its entry"
        )


def _entry_config(file_or_state_dict: Any, model: str, config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config the entry rebuilds ``model`` with: a file zoo.save wrote carries its own (stem, classes,
    bands...) less its run-time settings (:data:`RUNTIME_KEYS`), which ``config`` overrides key by key (a key of
    ``config`` is kept, run-time or not: the publisher asked for it); a file of another model, an unknown model or
    a misspelt key is refused here, before anything is written."""
    from zoo import registry

    given_file = isinstance(file_or_state_dict, (str, os.PathLike))
    saved = read_metadata(file_or_state_dict).get("zoo.model") if given_file and is_safetensors(
        file_or_state_dict) else None
    if saved is not None and model not in registry.list_models():  # file_config's hint would be how to build it
        raise ManifestError(f"no registered model {model!r} to publish weights of (see `zoo list`); this file holds "
                            f"a {saved!r} model: name its weights {saved}.TAG")
    config = registry.current_config(model, dict(config or {}))  # a renamed key as the entry names it now
    if given_file:
        from_file = registry.file_config(file_or_state_dict, model)
        config = {**{k: v for k, v in from_file.items() if k not in RUNTIME_KEYS}, **config}
    registry.validate_config(model, config)
    return config


def add_weights(
    file_or_state_dict: str | os.PathLike | nn.Module | Mapping[str, torch.Tensor],
    name: str,
    config: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    dtype: torch.dtype | None = None,
    force: bool = False,
) -> WeightsEntry:
    """Write ``weights/<name>.safetensors`` and its manifest entry; return the entry.

    A name that is already published is refused unless ``force=True`` (a shipped file and its entry
    are never replaced by accident).

    ``file_or_state_dict``: a module, a state dict, or a file (safetensors, or a ``torch.save`` state
    dict, read with ``weights_only=True``). A safetensors file's metadata is carried over, so objects
    that are not networks (an agent, a pipeline) publish the file their family's ``save`` wrote. ``dtype=torch.float16`` halves the file (floating tensors
    only; loading copies back into the model's dtype). Before the entry is written, the file is loaded
    into ``zoo.build(model, **config)`` exactly as users will load it, so a file that does not fit its
    model is never published; a file :func:`zoo.save` wrote brings its own config (``config`` overrides
    keys of it), less the settings of the run that wrote it (:data:`RUNTIME_KEYS`: ``amp``, ``device``), which the
    entry would impose on everyone who builds the tag. ``meta`` gets ``dtype`` and ``num_params`` filled in when absent. The
    manifest is updated under a lock (several benchmarks may publish at once) and weights/README.md is
    regenerated.
    """
    m = WEIGHTS_NAME_RE.match(name) if isinstance(name, str) else None
    if m is None:
        raise ManifestError(f"weights name must look like 'model.tag' (e.g. 'resnet18.cifar10'), got {name!r}")
    model = m["model"]
    config = _entry_config(file_or_state_dict, model, config)
    _refuse_existing(name, read_manifest(missing_ok=True), force)
    json.dumps(config), json.dumps(dict(meta or {}))  # both must be plain JSON
    carried: dict[str, str] = {}
    if isinstance(file_or_state_dict, (str, os.PathLike)):
        sd = load_state_dict(file_or_state_dict)
        if file_format(file_or_state_dict) == "safetensors":
            # Families that store non-network objects keep their JSON config in the metadata: keep it.
            carried = {k: v for k, v in read_metadata(file_or_state_dict).items() if k != ALIASES_KEY}
    else:
        sd = as_state_dict(file_or_state_dict)
    # the dtype most of the floating values are stored in (a network in fp16 beside small fp32 arrays is fp16)
    by_dtype: dict[torch.dtype, int] = {}
    for t in sd.values():
        if t.is_floating_point():
            by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + t.numel()
    storage = dtype or (max(by_dtype, key=by_dtype.__getitem__) if by_dtype else None)

    folder = _publish_dir()
    fs.sweep_temps(folder)  # temp files of publishers killed in this folder
    dest = folder / f"{name}.safetensors"
    staging = fs.PrivateTemp(folder, dest.name)
    tmp = staging.path_for(dest)
    carried.update({"zoo.name": name, "zoo.config": json.dumps(config, sort_keys=True)})
    try:
        save_weights(sd, tmp, metadata=carried, dtype=dtype)
        obj = _check_build(model, tmp, config, file_or_state_dict)  # the check users' loading will pass
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

        _commit_with_entry(staging, dest, entry, force)
    finally:
        staging.abort()
    return entry


def _check_build(model: str, staged: Path, config: dict[str, Any], given: Any) -> Any:
    """``zoo.build(model, weights=staged, **config)``, as users will load the published file. The staged copy is
    gone once add_weights returns: an error that names it names the file the publisher gave (``given``) instead."""
    from zoo import registry

    try:
        return registry.build(model, weights=str(staged), **config)
    except Exception as err:
        if not isinstance(given, (str, os.PathLike)) or str(staged) not in str(err):
            raise
        try:
            renamed = type(err)(str(err).replace(str(staged), os.fspath(given)))
        except Exception:  # noqa: BLE001  (an error type built from other arguments: said as it came)
            raise err from None
        raise renamed.with_traceback(err.__traceback__) from None


def _commit_with_entry(staging: fs.PrivateTemp, dest: Path, entry: WeightsEntry, force: bool) -> None:
    """Move the staged file onto ``dest`` and write its manifest entry, under the manifest lock: both change, or
    neither. A file replaced (``force``) is kept aside until the manifest names the new one: a manifest write
    that failed (the new file took the disk's last bytes) left the new file under the old entry's hash, which
    every load then refused, and the good file gone."""
    keep = fs.PrivateTemp(dest.parent, f"{dest.name}.previous")
    old, committed = keep.path_for(dest), False

    def put(entries: dict[str, WeightsEntry]) -> None:
        nonlocal committed
        _refuse_existing(entry.name, entries, force)  # another publisher may have added it meanwhile
        if dest.is_file():
            try:
                os.link(dest, old)
            except OSError:  # a file system without hard links
                shutil.copy2(dest, old)
        staging.commit(dest)
        committed = True
        entries[entry.name] = entry

    try:
        update_manifest(put)
    except BaseException:
        named = read_manifest(missing_ok=True).get(entry.name)
        if committed and (named is None or named.sha256 != entry.sha256):  # the file the manifest names goes back
            if old.is_file():
                os.replace(old, dest)
            else:
                dest.unlink(missing_ok=True)
        raise
    finally:
        keep.abort()


def update_manifest(change: Callable[[dict[str, WeightsEntry]], None]) -> dict[str, WeightsEntry]:
    """Read, ``change(entries)`` in place, write manifest.json and README.md, all under the manifest lock.

    Several benchmark scripts may publish at the same time; the lock makes each read-modify-write whole.
    """
    with manifest_lock():
        entries = read_manifest(missing_ok=True)
        change(entries)
        write_manifest(entries)
        write_readme(entries)
    return entries


def release(out_dir: str | os.PathLike, *, progress: bool = True) -> list[Path]:
    """Gather the project's own weights files and the manifest into ``out_dir``, exactly as the release
    host serves them (``release_url/<url>`` for each file, ``release_url/manifest.json``), each file
    checked against its manifest hash on the way. Upstream files are not ours to host and are left out.
    Returns the paths written."""
    from zoo._progress import ProgressBar
    from zoo.hub.store import cached_path, sources

    entries = read_manifest()
    own = [e for e in entries.values() if not e.upstream]
    # every file found before the folder is made: a release that cannot be whole (an installed zoo with an
    # empty cache) left an empty release folder behind, or one with some of the files
    found: list[tuple[WeightsEntry, Path]] = []
    for entry in own:
        local = [Path(s) for s in sources(entry) if "://" not in s] + [cached_path(entry)]
        src = next((p for p in local if p.is_file()), None)
        if src is None:
            where = f"neither in {weights_dir()} nor" if weights_dir() is not None else "not"
            raise FileNotFoundError(f"{entry.name}: {entry.url} is {where} in the cache; `zoo pull {entry.name}` "
                                    "first (`zoo pull --all`: every file), or release from the checkout that "
                                    f"published it ({out_dir} was not written)")
        found.append((entry, src))
    out = fs.ensure_dir(out_dir, "release folder")
    written: list[Path] = []
    for entry, src in ProgressBar(found, desc="release", unit="file", disable=not progress, leave=False):
        dest = out / entry.url
        have = src.stat().st_size
        if entry.size is not None and have != entry.size:  # a git-lfs pointer, say: not worth copying
            raise ManifestError(f"{src} does not match its manifest entry {entry.name}: {have} bytes, the entry "
                                f"{entry.size}; fix weights/ before releasing ({dest} was left as it was)")
        # hashed on the way, checked before the copy replaces dest: a bad source never costs the release
        # folder the good file an earlier release put there
        digest = hashlib.sha256()
        with open(src, "rb") as fin, fs.atomic_write(dest, size=have) as fout:
            for block in iter(lambda: fin.read(1 << 20), b""):
                fout.write(block)
                digest.update(block)
            if not entry.hash_matches(digest.hexdigest()):
                raise ManifestError(f"{src} does not match its manifest entry {entry.name}: sha256 "
                                    f"{digest.hexdigest()}, the entry {entry.sha256}; fix weights/ before "
                                    f"releasing ({dest} was left as it was)")
        written.append(dest)
    written.append(fs.write_bytes(out / "manifest.json", manifest_path().read_bytes()))
    sums = "".join(f"{e.sha256}  {e.url}\n" for e in sorted(own, key=lambda e: e.url))
    written.append(fs.write_text(out / "SHA256SUMS", sums))
    return written
