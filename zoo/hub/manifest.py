"""The weights manifest: the list of weights files users can pull, and its schema.

It ships inside the package (``zoo/hub/manifest.json``, package data), so an installed zoo knows every
file it can pull. The file is ``{"schema": 2, "release_url": BASE, "weights": [entry, ...]}``, entries
sorted by name. ``release_url`` is the one place the project's own files are hosted (the release
assets that ``zoo weights release`` prepares): an entry's file is ``BASE/<url>``. An entry:

========================  ===========================================================================
``name``                  ``"MODEL.TAG"``; ``MODEL`` is a registered model name, ``TAG`` matches
                          ``[A-Za-z0-9][A-Za-z0-9_.-]*`` (``"resnet18.cifar10"``)
``model``                 the registered model name (the part of ``name`` before the first dot)
``url``                   a path relative to the release (the project's own files: a source checkout's
                          ``weights/<url>``, ``$ZOO_WEIGHTS_URL/<url>``, then ``release_url/<url>``), or
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

``$ZOO_WEIGHTS_DIR`` replaces both the manifest and the files with a folder laid out like a release
(``manifest.json`` + files): a publishing workspace, a test, or a downloaded release.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from zoo.inputs import whole_number

if TYPE_CHECKING:
    from zoo.fs import FolderLock

__all__ = [
    "WEIGHTS_NAME_RE",
    "ManifestError",
    "WeightsEntry",
    "checkout_root",
    "manifest_path",
    "parse_manifest",
    "read_manifest",
    "release_url",
    "weights_dir",
    "write_manifest",
]

SCHEMA_VERSION = 2
PACKAGE_MANIFEST = Path(__file__).resolve().with_name("manifest.json")
FORMATS = ("safetensors", "pth")
# MODEL.TAG, as timm names weights: the model before the first dot, so a tag may hold dots of its own
WEIGHTS_NAME_RE = re.compile(r"^(?P<model>[A-Za-z0-9][A-Za-z0-9_-]*)\.(?P<tag>[A-Za-z0-9][A-Za-z0-9_.-]*)$")
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


def checkout_root() -> Path | None:
    """The source checkout this package runs from (with its ``weights/`` folder), or None when installed."""
    root = PACKAGE_MANIFEST.parents[2]
    if (root / "pyproject.toml").is_file() and (root / "weights").is_dir():
        return root
    return None


def weights_dir() -> Path | None:
    """The folder holding the project's own weights files, used before any download.

    ``$ZOO_WEIGHTS_DIR`` when set (a folder laid out like a release, with its ``manifest.json``), else
    a source checkout's ``weights/``; ``None`` for an installed package (files come from the release host).
    """
    env = os.environ.get("ZOO_WEIGHTS_DIR")
    if env:
        return Path(env).expanduser().resolve()
    root = checkout_root()
    return root / "weights" if root is not None else None


def manifest_path() -> Path:
    """``$ZOO_WEIGHTS_DIR/manifest.json`` when set, else the manifest shipped in the package. Resolved: the
    checkout's ``weights/manifest.json`` links to the package's, and an atomic write through the link would
    replace the link with a copy (leaving the package's, which the wheel ships, out of date)."""
    env = os.environ.get("ZOO_WEIGHTS_DIR")
    if env:
        return (Path(env).expanduser() / "manifest.json").resolve()
    return PACKAGE_MANIFEST


def _scheme(url: str) -> str | None:
    try:
        return urlparse(url).scheme
    except ValueError:
        return None


def is_remote(url: str) -> bool:
    return _scheme(url) in ("http", "https")


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

    @property
    def classes(self) -> list[str] | None:
        """The class names of the outputs: ``meta["classes"]``, else the categories of the torchvision weights
        ``meta["source"]`` names (``torchvision.models.ResNet18_Weights.IMAGENET1K_V1``: its
        ``meta["categories"]``, as torchvision users read them), else None."""
        if self.meta.get("classes"):
            return list(self.meta["classes"])
        module, _, rest = str(self.meta.get("source") or "").partition("_Weights.")
        if not module.startswith("torchvision.models") or not rest:
            return None
        import importlib

        holder, _, enum_name = module.rpartition(".")
        try:
            weights = getattr(getattr(importlib.import_module(holder), f"{enum_name}_Weights"), rest)
        except (ImportError, AttributeError):  # a torchvision without them: outputs are named by index
            return None
        categories = weights.meta.get("categories")
        return list(categories) if categories else None

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
        m = WEIGHTS_NAME_RE.match(name) if isinstance(name, str) else None
        if m is None:
            raise ManifestError(f"manifest entry name must look like 'model.tag', got {name!r}")
        if model != m["model"]:
            raise ManifestError(f"manifest entry {name!r}: model is {model!r} but the name says {m['model']!r}")
        if not isinstance(url, str) or not url:
            raise ManifestError(f"manifest entry {name!r}: url must be a non-empty string, got {url!r}")
        try:
            scheme = urlparse(url).scheme
        except ValueError as err:  # e.g. "http://[::1" (an unclosed IPv6 host)
            raise ManifestError(f"manifest entry {name!r}: url {url!r} does not parse ({err})") from None
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
        try:
            whole_number(size, "size", allow_none=True, hint="bytes")
        except ValueError as err:
            raise ManifestError(f"manifest entry {name!r}: {err}") from None
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


# path -> ((mtime_ns, size, inode), entries, release_url): a pull reads the manifest several times
_CACHE: dict[Path, tuple[tuple[int, int, int], dict[str, WeightsEntry], str | None]] = {}


def _load(path: Path, missing_ok: bool) -> tuple[dict[str, WeightsEntry], str | None]:
    try:
        st = path.stat()
    except FileNotFoundError:
        # a publishing workspace ($ZOO_WEIGHTS_DIR) where nothing is published yet is empty; the
        # manifest shipped in the package never is: its absence means a broken installation
        workspace = os.environ.get("ZOO_WEIGHTS_DIR") and path.parent.is_dir()
        if missing_ok or workspace:
            return {}, None
        hint = ("ZOO_WEIGHTS_DIR names a folder that does not exist" if os.environ.get("ZOO_WEIGHTS_DIR")
                else "the zoo installation is incomplete; reinstall the package")
        raise ManifestError(f"the weights manifest {path} is missing ({hint})") from None
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == stamp:
        return dict(hit[1]), hit[2]
    entries, release = parse_manifest(path.read_bytes(), path)
    _CACHE[path] = (stamp, entries, release)
    return dict(entries), release


def parse_manifest(raw: bytes, path: Path | str = "<manifest>") -> tuple[dict[str, WeightsEntry], str | None]:
    """``(entries by name, release_url)`` from the bytes of a manifest; any defect is a ManifestError."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # bad UTF-8 or JSON, a huge number, absurd nesting
        raise ManifestError(f"{path}: not valid UTF-8 JSON ({type(err).__name__}: {str(err)[:200]})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_VERSION or not isinstance(doc.get("weights"), list):
        raise ManifestError(
            f'{path}: expected {{"schema": {SCHEMA_VERSION}, "release_url": ..., "weights": [...]}}, '
            f"got {f'keys {list(doc)}' if isinstance(doc, dict) else type(doc).__name__}"
        )
    extra = [k for k in doc if k not in ("schema", "release_url", "weights")]
    if extra:
        raise ManifestError(f"{path}: unknown top-level key(s) {', '.join(map(str, extra))}")
    release = doc.get("release_url")
    if release is not None and not _is_http_url(release):
        raise ManifestError(f"{path}: release_url must be an http(s) URL with a host (https://host/path) or "
                            f"null, got {release!r}")
    entries: dict[str, WeightsEntry] = {}
    for raw_entry in doc["weights"]:
        entry = WeightsEntry.from_dict(raw_entry)
        if entry.name in entries:
            raise ManifestError(f"{path}: duplicate entry {entry.name!r}")
        entries[entry.name] = entry
    return entries, release


def read_manifest(path: Path | None = None, *, missing_ok: bool = False) -> dict[str, WeightsEntry]:
    """Entries by name. A missing manifest is an error (``missing_ok``: empty, for a first publish);
    any schema error names the file and the entry."""
    return _load(path or manifest_path(), missing_ok)[0]


def _is_http_url(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parts = urlparse(value)
    except ValueError:  # e.g. "http://[" (an unclosed IPv6 host)
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc) and value.startswith(f"{parts.scheme}://")


def release_url(path: Path | None = None) -> str | None:
    """The manifest's ``release_url`` (base URL of the project's own files), or None."""
    return _load(path or manifest_path(), True)[1]


def write_manifest(entries: dict[str, WeightsEntry], path: Path | None = None,
                   release: str | None = None) -> None:
    """Write atomically; callers hold :func:`manifest_lock`. ``release`` defaults to the current one."""
    from zoo import fs

    path = path or manifest_path()
    release = release if release is not None else release_url(path)
    doc = {"schema": SCHEMA_VERSION, "release_url": release,
           "weights": [entries[k].to_dict() for k in sorted(entries)]}
    fs.write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def manifest_lock(path: Path | None = None) -> FolderLock:
    """The lock every read-modify-write of the manifest at ``path`` holds (``with manifest_lock(): ...``).

    Its file, ``.manifest.json.lock``, sits beside the manifest, in the folder a writer must be able to
    write to anyway, and is removed on release. (Not the system temp folder: there a manifest path would leave
    one file for good, under a name any other user of the machine could take first or plant a link at.)
    A second publisher waits up to two minutes, then is told which process holds it."""
    from zoo.fs import FolderLock

    path = (path or manifest_path()).resolve()
    return FolderLock(path.parent, "manifest update", name=f".{path.name}.lock", wait=120.0)
