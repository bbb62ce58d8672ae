"""Pretrained weights: the manifest, a verified content-keyed cache, mirrors, a release host, the Hugging
Face Hub, offline use, safetensors I/O.

    import zoo
    zoo.list_weights("resnet18")                      # ["resnet18.cifar10", "resnet18.imagenet1k-v1"]
    path = zoo.pull("resnet18.cifar10")               # downloaded once, sha256-checked, cached
    model = zoo.build("resnet18", weights="cifar10")  # a tag, "model.tag", a path, a URL, "hf-hub:org/repo"

Environment: ``ZOO_HOME`` (cache root, default ``~/.cache/zoo``), ``ZOO_WEIGHTS_URL`` (a mirror of the
release host: http(s), file:// or a folder), ``ZOO_OFFLINE=1`` (never open a connection; 0/false/no/off:
online), ``ZOO_TIMEOUT`` (seconds of silence before a server counts as stalled, default 20),
``ZOO_WEIGHTS_DIR`` (a folder laid out like a release, used instead of the shipped manifest and the
checkout's ``weights/``), ``HF_ENDPOINT`` (the Hub for ``hf-hub:`` weights). The manifest schema is
documented in :mod:`zoo.hub.manifest` and in weights/README.md.

Modules: ``manifest`` (schema, the shipped manifest), ``fetch`` (one verified, resumable, locked download),
``store`` (cache layout, sources, pull/resolve), ``verified`` (hash markers bound to a file's identity),
``cache`` (info / verify / clean), ``state`` (safetensors and safe torch.load, strict loading with head
re-initialisation, corrupt and non-finite files refused), ``publish`` (add_weights, release), ``hf``
(Hugging Face Hub download and export), ``readme`` (weights/README.md).
"""

from __future__ import annotations

from zoo.hub.cache import CacheCheck, CacheItem, cache_info, clean_cache, verify_cache
from zoo.hub.fetch import DownloadError, HashMismatchError, OfflineError, sha256_file
from zoo.hub.manifest import (
    ManifestError,
    WeightsEntry,
    checkout_root,
    manifest_path,
    read_manifest,
    release_url,
    weights_dir,
)
from zoo.hub.publish import add_weights, release, update_manifest
from zoo.hub.readme import render_readme, write_readme
from zoo.hub.state import (
    CorruptWeightsError,
    LoadReport,
    load_into,
    load_state_dict,
    read_metadata,
    save_weights,
)
from zoo.hub.store import (
    CorruptCacheError,
    cache_root,
    cached_path,
    get_entry,
    list_weights,
    pull,
    resolve,
    verify_entry,
    zoo_home,
)

__all__ = [
    "CacheCheck",
    "CacheItem",
    "CorruptCacheError",
    "CorruptWeightsError",
    "DownloadError",
    "HashMismatchError",
    "LoadReport",
    "ManifestError",
    "OfflineError",
    "WeightsEntry",
    "add_weights",
    "cache_info",
    "cache_root",
    "cached_path",
    "checkout_root",
    "clean_cache",
    "get_entry",
    "list_weights",
    "load_into",
    "load_state_dict",
    "manifest_path",
    "pull",
    "read_manifest",
    "read_metadata",
    "release",
    "release_url",
    "render_readme",
    "resolve",
    "save_weights",
    "sha256_file",
    "update_manifest",
    "verify_cache",
    "verify_entry",
    "weights_dir",
    "write_readme",
    "zoo_home",
]
