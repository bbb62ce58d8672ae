"""The weights cache: where files live, which sources feed them, pull / resolve / verify.

Layout: ``$ZOO_HOME/weights/<model.tag>/<file name>`` for manifest entries (``$ZOO_HOME`` defaults to
``~/.cache/zoo``), ``$ZOO_HOME/weights/urls/<sha256(url)[:16]>/<file name>`` for weights a user gave
by URL. Next to each file, ``<file>.sha256`` records the full hash seen when it entered the cache.

Sources of a manifest entry, tried in order (``ZOO_OFFLINE=1`` drops the http(s) ones):

- the project's own files (relative ``url``): ``$ZOO_WEIGHTS_URL/<url>`` when the mirror is set, then
  the checkout's ``weights/<url>``;
- upstream files (https ``url``): ``$ZOO_WEIGHTS_URL/<file name>`` when the mirror is set, then the
  official URL. A mirror may be ``http(s)://...``, ``file:///...`` or a plain folder; a file mirror
  works offline.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlparse

from zoo.hub.fetch import fetch, local_path, sha256_file
from zoo.hub.manifest import WeightsEntry, read_manifest, weights_dir

__all__ = [
    "CacheCheck",
    "cache_root",
    "cached_path",
    "get_entry",
    "list_weights",
    "pull",
    "resolve",
    "sources",
    "verify_cache",
    "zoo_home",
]

_URL_DIR = "urls"


def zoo_home() -> Path:
    return Path(os.environ.get("ZOO_HOME") or "~/.cache/zoo").expanduser()


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir`` when given, else ``$ZOO_HOME/weights``."""
    return Path(cache_dir).expanduser() if cache_dir is not None else zoo_home() / "weights"


def cached_path(entry: WeightsEntry, cache_dir: str | os.PathLike | None = None) -> Path:
    return cache_root(cache_dir) / entry.name / entry.filename


def _join(base: str, rel: str) -> str:
    if urlparse(base).scheme in ("http", "https", "file"):
        return base.rstrip("/") + "/" + quote(rel)
    return str(Path(base).expanduser() / rel)


def sources(entry: WeightsEntry) -> list[str]:
    mirror = os.environ.get("ZOO_WEIGHTS_URL", "").strip()
    out: list[str] = []
    if entry.upstream:
        if mirror:
            out.append(_join(mirror, entry.filename))
        out.append(entry.url)
    else:
        if mirror:
            out.append(_join(mirror, entry.url))
        out.append(str(weights_dir() / entry.url))
    return out


def get_entry(name: str) -> WeightsEntry:
    """The manifest entry ``"model.tag"``; unknown names fail with the closest published ones."""
    entries = read_manifest()
    try:
        return entries[name]
    except KeyError:
        close = difflib.get_close_matches(name, entries, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise KeyError(
            f"no weights named {name!r} in {weights_dir() / 'manifest.json'}.{hint} "
            f"See `zoo weights list`."
        ) from None


def list_weights(model: str | None = None) -> list[str]:
    """Published ``"model.tag"`` names, sorted; only ``model``'s when given."""
    return sorted(n for n, e in read_manifest().items() if model is None or e.model == model)


def _offline_hint(entry: WeightsEntry, dest: Path) -> str:
    return (
        f"weights {entry.name!r} ({entry.filename}) are not in the cache at {dest}, and ZOO_OFFLINE=1 "
        f"forbids downloading: run `zoo pull {entry.name}` on a connected machine and copy the file into {dest.parent}, "
        f"or set ZOO_WEIGHTS_URL to a mirror that holds {entry.filename} (a file:// folder works offline)"
    )


def _check_for(entry: WeightsEntry):
    def check(digest: str) -> bool:
        return entry.hash_matches(digest)

    return check


def pull(name: str, *, cache_dir: str | os.PathLike | None = None, force: bool = False,
         progress: bool = True) -> Path:
    """Put the weights ``name`` ("model.tag") in the cache, verified by sha256; return the cached path.

    A cached file is reused (its size is checked; ``zoo weights verify`` re-hashes); ``force=True``
    downloads again.
    """
    entry = get_entry(name)
    return _pull_entry(entry, cache_dir=cache_dir, force=force, progress=progress)


def _pull_entry(entry: WeightsEntry, *, cache_dir=None, force=False, progress=True) -> Path:
    dest = cached_path(entry, cache_dir)
    if dest.is_file() and not force:
        if entry.size is None or dest.stat().st_size == entry.size:
            return dest
        force = True  # truncated or replaced behind our back: fetch again
    return fetch(
        sources(entry), dest, check=_check_for(entry), expected=entry.expected_hash, force=force,
        progress=progress, offline_hint=_offline_hint(entry, dest),
    )


def _entry_for_url(url: str) -> WeightsEntry | None:
    """The manifest entry a URL designates: its official URL, or its file on the mirror / checkout."""
    for entry in read_manifest().values():
        candidates = set(sources(entry))
        candidates |= {Path(s).resolve().as_uri() for s in candidates if not urlparse(s).scheme}
        if url in candidates:
            return entry
    return None


def _looks_like_path(s: str) -> bool:
    return os.sep in s or "/" in s or Path(s).suffix in (".safetensors", ".pth", ".pt", ".bin", ".ckpt")


def resolve(weights: str | os.PathLike, model: str | None = None) -> tuple[Path, WeightsEntry | None]:
    """Turn what a user passed as ``weights=`` into a local file, and its manifest entry when known.

    ``weights``: a tag of ``model`` ("cifar10"), a full "model.tag", a local path, a ``file://`` URL or
    an ``http(s)://`` URL. Manifest weights are pulled into the cache (verified); a URL that matches a
    manifest entry is verified against it; another URL is cached under a hash of the URL.
    """
    if isinstance(weights, os.PathLike):
        weights = os.fspath(weights)
        if not Path(weights).is_file():
            raise FileNotFoundError(f"weights file not found: {weights}")
    if not isinstance(weights, str) or not weights:
        raise TypeError(f"weights must be a tag, 'model.tag', a path or a URL; got {weights!r}")
    scheme = urlparse(weights).scheme
    if scheme in ("http", "https", "file"):
        entry = _entry_for_url(weights)
        if entry is not None:
            _check_model(entry, model)
            return _pull_entry(entry), entry
        if scheme == "file":
            path = local_path(weights)
            if not path.is_file():
                raise FileNotFoundError(f"weights file not found: {path} (from {weights})")
            return path, None
        key = hashlib.sha256(weights.encode()).hexdigest()[:16]
        name = Path(urlparse(weights).path).name or "weights"
        dest = cache_root() / _URL_DIR / key / name
        if dest.is_file():
            return dest, None
        hint = (f"{weights} is not in the cache ({dest}) and ZOO_OFFLINE=1 forbids downloading it; "
                "download it on a connected machine and pass the local path")
        return fetch([weights], dest, check=None, expected="(none: not in the manifest)",
                     offline_hint=hint), None
    entries = read_manifest()
    for name in (weights, f"{model}.{weights}" if model else None):
        if name and name in entries:
            _check_model(entries[name], model)
            return _pull_entry(entries[name]), entries[name]
    path = Path(weights).expanduser()
    if path.is_file():
        entry = _entry_for_url(path.resolve().as_uri())  # a shipped file given by its checkout path
        if entry is not None:
            _check_model(entry, model)
            return _pull_entry(entry), entry
        return path, None
    if _looks_like_path(weights):
        raise FileNotFoundError(f"weights file not found: {path}")
    tags = [entries[n].tag for n in list_weights(model)] if model else list(entries)
    close = difflib.get_close_matches(weights, tags, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise KeyError(
        f"unknown weights {weights!r}{f' for model {model!r}' if model else ''}.{hint} Published: "
        f"{', '.join(tags) or '(none)'}; or pass a local path or a URL (see `zoo weights list`)."
    )


def _check_model(entry: WeightsEntry, model: str | None) -> None:
    if model is not None and entry.model != model:
        raise ValueError(f"weights {entry.name!r} are for model {entry.model!r}, not {model!r}")


@dataclass(frozen=True)
class CacheCheck:
    path: Path
    status: str  # "ok", "prefix-verified", "recorded", "unverifiable", "partial", "MISMATCH"
    detail: str

    @property
    def failed(self) -> bool:
        return self.status == "MISMATCH"


def verify_cache(cache_dir: str | os.PathLike | None = None, progress: bool = True) -> list[CacheCheck]:
    """Re-hash every file in the cache against the manifest (or the hash recorded when it arrived)."""
    root = cache_root(cache_dir)
    by_path = {cached_path(e, cache_dir): e for e in read_manifest().values()}
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".lock", ".sha256"))
    from tqdm.auto import tqdm

    out: list[CacheCheck] = []
    for path in tqdm(files, desc="verify", unit="file", disable=not progress or not files, leave=False):
        if path.suffix == ".part":
            out.append(CacheCheck(path, "partial", "interrupted download; the next pull resumes it"))
            continue
        digest = sha256_file(path)
        record = path.with_name(path.name + ".sha256")
        recorded = record.read_text().strip() if record.is_file() else None
        entry = by_path.get(path)
        if entry is not None:
            if not entry.hash_matches(digest):
                out.append(CacheCheck(path, "MISMATCH", f"{entry.name}: expected {entry.expected_hash}, got {digest}"))
            elif entry.sha256:
                out.append(CacheCheck(path, "ok", f"{entry.name}: sha256 {digest[:12]}…"))
            else:
                out.append(CacheCheck(path, "prefix-verified",
                                      f"{entry.name}: sha256 starts with the published {entry.sha256_prefix}"))
        elif recorded is not None:
            status = "recorded" if recorded == digest else "MISMATCH"
            out.append(CacheCheck(path, status, f"hash recorded at download {recorded[:12]}…, now {digest[:12]}…"))
        else:
            out.append(CacheCheck(path, "unverifiable", "not in the manifest and no recorded hash"))
    return out


