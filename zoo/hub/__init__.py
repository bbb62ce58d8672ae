"""Pretrained weights: the manifest, a verified cache, mirrors and offline use, safetensors I/O.

    import zoo
    zoo.list_weights("resnet18")                      # ["resnet18.imagenet1k-v1", ...]
    path = zoo.pull("resnet18.imagenet1k-v1")          # downloaded once, sha256-checked, cached
    model = zoo.build("resnet18", weights="imagenet1k-v1")

Environment: ``ZOO_HOME`` (cache root, default ``~/.cache/zoo``), ``ZOO_WEIGHTS_URL`` (a mirror: http(s),
file:// or a folder), ``ZOO_OFFLINE=1`` (never open a connection), ``ZOO_WEIGHTS_DIR`` (the folder with
``manifest.json``; default: the checkout's ``weights/``). The manifest schema is documented in
:mod:`zoo.hub.manifest` and in weights/README.md.

Modules: ``manifest`` (schema, atomic locked writes), ``fetch`` (one verified, resumable, locked download),
``store`` (cache layout, sources, pull/resolve/verify), ``state`` (safetensors and safe torch.load,
strict loading with head re-initialisation), ``publish`` (add_weights), ``readme`` (weights/README.md).
"""

from __future__ import annotations

from zoo.hub.fetch import DownloadError, HashMismatchError, OfflineError, sha256_file
from zoo.hub.manifest import ManifestError, WeightsEntry, manifest_path, read_manifest, weights_dir
from zoo.hub.publish import add_weights, update_manifest
from zoo.hub.readme import render_readme, write_readme
from zoo.hub.state import LoadReport, load_into, load_state_dict, read_metadata, save_weights
from zoo.hub.store import (
    CacheCheck,
    cache_root,
    cached_path,
    get_entry,
    list_weights,
    pull,
    resolve,
    verify_cache,
    zoo_home,
)

__all__ = [
    "CacheCheck",
    "DownloadError",
    "HashMismatchError",
    "LoadReport",
    "ManifestError",
    "OfflineError",
    "WeightsEntry",
    "add_weights",
    "cache_root",
    "cached_path",
    "get_entry",
    "list_weights",
    "load_into",
    "load_state_dict",
    "manifest_path",
    "pull",
    "read_manifest",
    "read_metadata",
    "render_readme",
    "resolve",
    "save_weights",
    "sha256_file",
    "update_manifest",
    "verify_cache",
    "weights_dir",
    "write_readme",
    "zoo_home",
]
