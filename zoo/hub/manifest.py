"""``weights/manifest.json``: the list of weights files users can pull, and its schema.

The file is ``{"schema": 1, "weights": [entry, ...]}``, entries sorted by name. An entry:

========================  ===========================================================================
``name``                  ``"MODEL.TAG"``; ``MODEL`` is a registered model name, ``TAG`` matches
                          ``[A-Za-z0-9][A-Za-z0-9_.-]*`` (``"resnet18.cifar10"``)
``model``                 the registered model name (the part of ``name`` before the first dot)
``url``                   a path relative to the weights folder for the project's own files (resolved
                          against ``$ZOO_WEIGHTS_URL`` when set, else the checkout's ``weights/``), or
                          an ``https://`` URL for upstream files
``sha256``                the full 64-hex sha256 of the file, or ``null`` for an upstream file whose
                          full hash could not be computed where the entry was written
``sha256_prefix``         only with ``"sha256": null``: the hash prefix the publisher put in the file
                          name (torchvision's ``resnet18-f37072fd.pth`` -> ``"f37072fd"``, at least
                          8 hex). The hub checks that the downloaded file's sha256 starts with it;
                          verification is never skipped
``size``                  the size in bytes; required for the project's own files, ``null`` allowed
                          for upstream files not measured here
``format``                ``"safetensors"`` (our files; always) or ``"pth"`` (upstream ``torch.save``
                          files, read with ``torch.load(weights_only=True)``)
``config``                builder keyword arguments the file needs (``{"num_classes": 10}``)
``meta``                  free-form facts: ``dataset``, ``metrics`` (as measured), ``command`` (the
                          benchmark that produced the file), ``license``, ``num_params``, ``dtype``
                          (storage), ``transforms``; types of the known keys are checked
========================  ===========================================================================
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

__all__ = ["ManifestError", "WeightsEntry", "manifest_path", "read_manifest", "weights_dir", "write_manifest"]

SCHEMA_VERSION = 1
FORMATS = ("safetensors", "pth")
_NAME_RE = re.compile(r"^(?P<model>[A-Za-z0-9][A-Za-z0-9_-]*)\.(?P<tag>[A-Za-z0-9][A-Za-z0-9_.-]*)$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_PREFIX = re.compile(r"^[0-9a-f]{8,63}$")
_KEYS = ("name", "model", "url", "sha256", "sha256_prefix", "size", "format", "config", "meta")
_REQUIRED = ("name", "model", "url", "sha256", "size", "format", "config", "meta")
# meta keys whose type is checked (others are free-form)
_META_TYPES: dict[str, type | tuple[type, ...]] = {
    "dataset": str,
    "metrics": dict,
    "command": str,
    "license": str,
    "num_params": int,
    "dtype": str,
    "transforms": dict,
}


class ManifestError(ValueError):
    """The manifest, or an entry for it, does not follow the schema."""


def weights_dir() -> Path:
    """The folder holding ``manifest.json`` and the project's own weights files.

    ``$ZOO_WEIGHTS_DIR`` when set (tests, or an installed package pointing at a checkout), else the
    ``weights/`` folder beside the ``zoo`` package in a source checkout.
    """
    env = os.environ.get("ZOO_WEIGHTS_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parent.parent.parent / "weights"


def manifest_path() -> Path:
    return weights_dir() / "manifest.json"


def is_remote(url: str) -> bool:
    return urlparse(url).scheme in ("http", "https")


@dataclass(frozen=True)
class WeightsEntry:
    """One row of the manifest; construct with :meth:`from_dict` to validate it."""

    name: str
    model: str
    url: str
    sha256: str | None
    size: int | None
    format: str = "safetensors"
    config: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    sha256_prefix: str | None = None

    @property
    def tag(self) -> str:
        return self.name[len(self.model) + 1:]

    @property
    def filename(self) -> str:
        return Path(urlparse(self.url).path).name

    @property
    def upstream(self) -> bool:
        """True for an absolute http(s) URL (a file hosted by someone else)."""
        return is_remote(self.url)

    @property
    def expected_hash(self) -> str:
        """The full sha256, or the published prefix when only that is known."""
        return self.sha256 or self.sha256_prefix or ""

    def hash_matches(self, digest: str) -> bool:
        return digest == self.sha256 if self.sha256 else digest.startswith(self.sha256_prefix or "\0")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        out = {k: d[k] for k in _KEYS if k != "sha256_prefix"}
        if self.sha256 is None:
            out = {**{k: out[k] for k in ("name", "model", "url", "sha256")},
                   "sha256_prefix": self.sha256_prefix,
                   **{k: out[k] for k in ("size", "format", "config", "meta")}}
        return out

    @classmethod
    def from_dict(cls, d: Any) -> WeightsEntry:
        if not isinstance(d, dict):
            raise ManifestError(f"a manifest entry must be a JSON object, got {type(d).__name__}: {d!r}")
        label = d.get("name", "<no name>")
        missing = [k for k in _REQUIRED if k not in d]
        if missing:
            raise ManifestError(f"manifest entry {label!r}: missing required key(s) {', '.join(missing)}")
        extra = [k for k in d if k not in _KEYS]
        if extra:
            raise ManifestError(
                f"manifest entry {label!r}: unknown key(s) {', '.join(extra)}; allowed: {', '.join(_KEYS)}"
            )
        name, model, url = d["name"], d["model"], d["url"]
        m = _NAME_RE.match(name) if isinstance(name, str) else None
        if m is None:
            raise ManifestError(f"manifest entry name must look like 'model.tag', got {name!r}")
        if model != m["model"]:
            raise ManifestError(f"manifest entry {name!r}: model is {model!r} but the name says {m['model']!r}")
        if not isinstance(url, str) or not url:
            raise ManifestError(f"manifest entry {name!r}: url must be a non-empty string, got {url!r}")
        scheme = urlparse(url).scheme
        if scheme and scheme not in ("http", "https"):
            raise ManifestError(f"manifest entry {name!r}: url must be relative or http(s), got {url!r}")
        if not scheme and (url.startswith(("/", "\\")) or ".." in Path(url).parts):
            raise ManifestError(f"manifest entry {name!r}: a relative url must stay inside weights/, got {url!r}")
        sha, prefix = d["sha256"], d.get("sha256_prefix")
        if sha is None:
            if not is_remote(url):
                raise ManifestError(f"manifest entry {name!r}: the project's own files need a full sha256")
            if not isinstance(prefix, str) or not _PREFIX.match(prefix):
                raise ManifestError(
                    f"manifest entry {name!r}: with \"sha256\": null, \"sha256_prefix\" must be the published "
                    f"hash prefix (8-63 lowercase hex), got {prefix!r}"
                )
        else:
            if not isinstance(sha, str) or not _HEX64.match(sha):
                raise ManifestError(f"manifest entry {name!r}: sha256 must be 64 lowercase hex, got {sha!r}")
            if prefix is not None:
                raise ManifestError(f"manifest entry {name!r}: sha256_prefix is only for \"sha256\": null")
        size = d["size"]
        if size is None and not is_remote(url):
            raise ManifestError(f"manifest entry {name!r}: the project's own files need a size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
            raise ManifestError(f"manifest entry {name!r}: size must be a positive int of bytes, got {size!r}")
        if d["format"] not in FORMATS:
            raise ManifestError(f"manifest entry {name!r}: format must be one of {FORMATS}, got {d['format']!r}")
        if d["format"] != "safetensors" and not is_remote(url):
            raise ManifestError(f"manifest entry {name!r}: the project's own files must be safetensors")
        for key in ("config", "meta"):
            if not isinstance(d[key], dict):
                raise ManifestError(f"manifest entry {name!r}: {key} must be an object, got {d[key]!r}")
        for key, typ in _META_TYPES.items():
            v = d["meta"].get(key)
            if v is not None and (not isinstance(v, typ) or isinstance(v, bool)):
                raise ManifestError(
                    f"manifest entry {name!r}: meta.{key} must be {getattr(typ, '__name__', typ)}, got {v!r}"
                )
        return cls(name, model, url, sha, size, d["format"], dict(d["config"]), dict(d["meta"]), prefix)


def read_manifest(path: Path | None = None) -> dict[str, WeightsEntry]:
    """Entries by name; a missing manifest is an empty one. Any schema error names the entry."""
    path = path or manifest_path()
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ManifestError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_VERSION or not isinstance(doc.get("weights"), list):
        raise ManifestError(
            f'{path}: expected {{"schema": {SCHEMA_VERSION}, "weights": [...]}}, '
            f"got keys {list(doc) if isinstance(doc, dict) else type(doc).__name__}"
        )
    entries: dict[str, WeightsEntry] = {}
    for raw in doc["weights"]:
        entry = WeightsEntry.from_dict(raw)
        if entry.name in entries:
            raise ManifestError(f"{path}: duplicate entry {entry.name!r}")
        entries[entry.name] = entry
    return entries


def write_manifest(entries: dict[str, WeightsEntry], path: Path | None = None) -> None:
    """Write atomically (temp + ``os.replace``); callers hold :func:`manifest_lock`."""
    path = path or manifest_path()
    doc = {"schema": SCHEMA_VERSION, "weights": [entries[k].to_dict() for k in sorted(entries)]}
    _atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def manifest_lock(path: Path | None = None):
    from filelock import FileLock

    # The lock file lives in the temp folder, keyed by the manifest's path, so weights/ stays clean.
    path = (path or manifest_path()).resolve()
    key = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return FileLock(os.path.join(tempfile.gettempdir(), f"zoo-manifest-{key}.lock"), timeout=120)


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: its 0600 mode would make the manifest unreadable to other users of a shared checkout.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
