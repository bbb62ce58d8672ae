"""Pretrained weights: the manifest, a verified content-keyed cache, mirrors, a release host, the Hugging
Face Hub, offline use, safetensors I/O.

    import zoo
    zoo.list_weights("resnet18")                      # ["resnet18.cifar10", "resnet18.imagenet1k-v1"]
    path = zoo.pull("resnet18.cifar10")               # downloaded once, sha256-checked, cached
    model = zoo.build("resnet18", weights="cifar10")  # a tag, "model.tag", a path, a URL, "hf-hub:org/repo"

Environment: ``ZOO_HOME`` (cache root, default ``$XDG_CACHE_HOME/zoo``, else ``~/.cache/zoo``),
``ZOO_WEIGHTS_URL`` (a mirror of the release host: http(s), file:// or a folder, a signed URL's query kept),
``ZOO_OFFLINE=1`` (never open a connection; 0/false/no/off: online), ``ZOO_TIMEOUT`` (seconds of silence
before a server counts as stalled and the pull fails, default 20; ``inf``: never; at most 1e9),
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

from zoo._lazy import lazy_exports

# names import their module on first use: listing weights reads JSON only; loading a file imports torch
_EXPORTS = {
    "CacheCheck": "zoo.hub.cache",
    "CacheItem": "zoo.hub.cache",
    "CorruptCacheError": "zoo.hub.store",
    "CorruptWeightsError": "zoo.hub.state",
    "DownloadError": "zoo.hub.fetch",
    "HashMismatchError": "zoo.hub.fetch",
    "LoadReport": "zoo.hub.state",
    "ManifestError": "zoo.hub.manifest",
    "OfflineError": "zoo.hub.fetch",
    "WeightsEntry": "zoo.hub.manifest",
    "add_weights": "zoo.hub.publish",
    "cache_info": "zoo.hub.cache",
    "cache_root": "zoo.hub.store",
    "cached_path": "zoo.hub.store",
    "checkout_root": "zoo.hub.manifest",
    "clean_cache": "zoo.hub.cache",
    "get_entry": "zoo.hub.store",
    "list_weights": "zoo.hub.store",
    "load_into": "zoo.hub.state",
    "load_state_dict": "zoo.hub.state",
    "manifest_path": "zoo.hub.manifest",
    "pull": "zoo.hub.store",
    "read_manifest": "zoo.hub.manifest",
    "read_metadata": "zoo.hub.state",
    "release": "zoo.hub.publish",
    "release_url": "zoo.hub.manifest",
    "render_readme": "zoo.hub.readme",
    "resolve": "zoo.hub.store",
    "save_weights": "zoo.hub.state",
    "sha256_file": "zoo.hub.fetch",
    "training_config": "zoo.hub.state",
    "update_manifest": "zoo.hub.publish",
    "verify_cache": "zoo.hub.cache",
    "verify_entry": "zoo.hub.store",
    "weights_dir": "zoo.hub.manifest",
    "write_readme": "zoo.hub.readme",
    "shared_data_root": "zoo.hub.store",
    "zoo_home": "zoo.hub.store",
}
_SUBMODULES = ("cache", "fetch", "hf", "manifest", "publish", "readme", "state", "store", "verified")
_export, _dir = lazy_exports(__name__, _EXPORTS)


def __getattr__(name: str):
    # `hub.state.file_format(...)` must not depend on whether something else imported zoo.hub.state first
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    return _export(name)


def __dir__() -> list[str]:
    return sorted(set(_dir()) | set(_SUBMODULES))


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
    "shared_data_root",
    "update_manifest",
    "verify_cache",
    "verify_entry",
    "weights_dir",
    "write_readme",
    "zoo_home",
]
