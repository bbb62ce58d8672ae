"""The cache as a whole: what is in it (``zoo cache info``), re-hashing it (``zoo weights verify``) and
freeing it (``zoo cache clean``).

Everything zoo downloads lives under ``$ZOO_HOME``: ``weights/`` (the pull cache, see
:mod:`zoo.hub.store`) and ``hf/`` (files fetched from a Hugging Face Hub repo). Besides finished files
the weights cache can hold ``.part`` files (interrupted downloads, resumed by the next pull), zoo temp
files (``.zoo-tmp-*``, left by a killed writer) and bookkeeping (``.verified`` markers, the ``.lock`` of a
download in progress, the ``.resume`` record of a ``.part``: the version of the file it holds).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from zoo import fs
from zoo.hub.fetch import RESUME_SUFFIX, download_lock, resume_path, sha256_file
from zoo.hub.manifest import read_manifest
from zoo.hub.store import URL_DIR, cache_root, cached_path, zoo_home
from zoo.hub.verified import MARKER_SUFFIX, recorded, stored_sha256

__all__ = ["CacheCheck", "CacheItem", "cache_info", "clean_cache", "verify_cache"]

_BOOKKEEPING = (".lock", MARKER_SUFFIX, ".sha256", RESUME_SUFFIX)


@dataclass(frozen=True)
class CacheItem:
    path: Path
    size: int
    kind: str  # "weights", "partial", "temp", "hf", "link" (a symbolic link where a pulled file goes)
    name: str  # the manifest name, the URL folder, or "-"
    # weights: "verified" (matched its published sha256, unchanged since), "unpublished" (a URL's file: no
    # published hash to check, unchanged since it arrived) or "unchecked"; else what it is
    status: str


_SHA256_KEY = re.compile(r"[0-9a-f]{64}")  # a file's sha256: store.cached_path
_PREFIX_KEY = re.compile(r"[0-9a-f]{8,63}")  # the hash prefix an upstream publisher put in the file's name
_URL_KEY = re.compile(r"[0-9a-f]{16}")  # a hash of a URL not in the manifest: store._pull_url


def _content_key(folder: str, file: str | None = None) -> bool:
    """Whether ``folder`` is one a pull names after a file's hash (:func:`zoo.hub.store.cached_path`): a full
    sha256, or a published prefix (``f37072fd/resnet18-f37072fd.pth``), whose folder holds only files that carry
    it in their names (``file``), or which a manifest entry names (the folder alone). A dated folder
    (``20240131/report.txt``) in a folder given as ``--cache-dir`` is all hex too, and none of zoo's."""
    if _SHA256_KEY.fullmatch(folder):
        return True
    if not _PREFIX_KEY.fullmatch(folder):
        return False
    if file is not None:
        return folder in file
    return any(e.expected_hash == folder for e in read_manifest(missing_ok=True).values())


def _in_cache_layout(rel: Path) -> bool:
    """True for ``<content key>/<file>`` and ``urls/<url key>/<file>``, the only places a pull writes to."""
    parts = rel.parts
    if len(parts) == 2:
        return _content_key(parts[0], parts[1])
    return len(parts) == 3 and parts[0] == URL_DIR and bool(_URL_KEY.fullmatch(parts[1]))


def _cache_folder(rel: Path) -> bool:
    """True for ``<content key>``, ``urls`` and ``urls/<url key>``: the folders a pull writes its files in (a
    link there is refused by pulls, so listed and cleaned as a link file is)."""
    parts = rel.parts
    if len(parts) == 1:
        return _content_key(parts[0]) or parts[0] == URL_DIR
    return len(parts) == 2 and parts[0] == URL_DIR and bool(_URL_KEY.fullmatch(parts[1]))


def _weights_items(root: Path) -> list[CacheItem]:
    by_path = {cached_path(e, root): e for e in read_manifest(missing_ok=True).values()}
    items: list[CacheItem] = []
    for p in sorted(root.rglob("*")) if root.is_dir() else []:
        if p.name.startswith(fs.TEMP_PREFIX) and not any(q.name.startswith(fs.TEMP_PREFIX) for q in p.parents):
            size = sum(f.lstat().st_size for f in p.rglob("*")) if p.is_dir() else p.lstat().st_size
            items.append(CacheItem(p, size, "temp", "-", "left by a killed writer"))
            continue
        if p.is_symlink() and not p.name.endswith(_BOOKKEEPING) and (
                p in by_path or _in_cache_layout(p.relative_to(root)) or _cache_folder(p.relative_to(root))):
            # where a pulled file goes, a link was put (pulls refuse to read through it): listed, so that
            # verify reports it and clean removes the link (never what it points to)
            items.append(CacheItem(p, 0, "link", by_path[p].name if p in by_path else "-",
                                   f"a symbolic link to {os.readlink(p)}: pulls refuse it; zoo cache clean removes it"))
            continue
        if p.is_symlink() or not p.is_file() or p.name.endswith(_BOOKKEEPING) or fs.TEMP_PREFIX in str(p):
            continue
        if p not in by_path and not _in_cache_layout(p.relative_to(root)):
            continue  # not a file zoo put there (--cache-dir may name any folder): never listed, never deleted
        size = p.stat().st_size
        if p.suffix == ".part":
            items.append(CacheItem(p, size, "partial", "-", "interrupted download; the next pull resumes it"))
            continue
        entry = by_path.get(p)
        name = entry.name if entry else str(p.parent.relative_to(root))  # an older manifest's file, or a URL's
        digest = recorded(p)
        # a marker written by an older zoo may hold the hash of a file it refused: trust it only if it
        # also matches the manifest
        ok = digest is not None and (entry is None or entry.hash_matches(digest))
        status = ("verified" if entry is not None else "unpublished") if ok else "unchecked"
        items.append(CacheItem(p, size, "weights", name, status))
    return items


def cache_info(cache_dir: str | os.PathLike | None = None) -> list[CacheItem]:
    """Every file in the weights cache (and the Hub cache under ``$ZOO_HOME/hf``), with sizes."""
    items = _weights_items(cache_root(cache_dir))
    hf = zoo_home() / "hf"
    if cache_dir is None and hf.is_dir():
        size = sum(p.lstat().st_size for p in hf.rglob("*") if p.is_file() and not p.is_symlink())
        items.append(CacheItem(hf, size, "hf", "-", "Hugging Face Hub downloads"))
    return items


def _unlink(path: Path) -> list[str]:
    try:
        path.unlink()
    except OSError as err:
        return [f"{path}: {err.strerror}"]
    return []


def _remove_tree(path: Path) -> list[str]:
    """``shutil.rmtree(path)``; returns what could not be removed (``path: reason``) instead of raising. A
    linked folder (a cache kept on another disk) is emptied and the link kept."""
    if path.is_symlink():
        return [f for child in path.iterdir()
                for f in (_remove_tree(child) if child.is_dir() and not child.is_symlink() else _unlink(child))]
    failed: list[str] = []
    if sys.version_info >= (3, 12):  # onerror is deprecated there
        shutil.rmtree(path, onexc=lambda _f, p, err: failed.append(f"{p}: {err}"))
    else:
        shutil.rmtree(path, onerror=lambda _f, p, info: failed.append(f"{p}: {info[1]}"))
    return failed


def clean_cache(cache_dir: str | os.PathLike | None = None, *, stale_only: bool = False) -> tuple[int, int]:
    """Delete the cache (``stale_only``: only partial downloads and temp files); returns (files, bytes).

    Files whose download is in progress (their lock is held) are left alone. Free lock files (an older zoo
    left one beside each file it pulled) are removed in either case, uncounted: they are not listed either.
    """
    removed, freed = 0, 0
    for item in cache_info(cache_dir):
        if stale_only and item.kind not in ("partial", "temp", "link"):
            continue
        if item.kind == "temp":
            if item.path in fs.sweep_temps(item.path.parent) or not item.path.exists():
                removed, freed = removed + 1, freed + item.size
            continue
        if item.kind == "hf":
            failed = _remove_tree(item.path)
            if failed:  # not counted as freed: every file that failed is still there
                raise fs.FsError(errno.EACCES, f"cannot remove the Hugging Face downloads in {item.path}: "
                                               f"{failed[0]}{f' (and {len(failed) - 1} more)' if len(failed) > 1 else ''}"
                                               f" ({removed} other item(s) removed)")
            removed, freed = removed + 1, freed + item.size
            continue
        if _remove_unless_downloading(item):
            removed, freed = removed + 1, freed + item.size
    _sweep_free_locks(cache_root(cache_dir))
    return removed, freed


def _remove_unless_downloading(item: CacheItem) -> bool:
    """Remove a weights, partial or link item (and its marker or resume record) under its download's lock; False
    while a download holds it. Where the file system keeps no locks the item is removed: it was asked for."""
    dest = item.path.with_suffix("") if item.kind == "partial" else item.path
    try:
        with download_lock(dest, wait=0, warn_unlocked=False):
            for p in (item.path, item.path.with_name(item.path.name + MARKER_SUFFIX), resume_path(item.path)):
                p.unlink(missing_ok=True)
    except fs.FolderLockedError:
        return False
    except fs.UnsafePathError:  # a planted lock link: its own one-line error says what to remove
        raise
    except OSError as err:  # a read-only cache (a container's image): say so, not a raw errno on a lock
        why = str(err) if isinstance(err, fs.FsError) else f"{err.strerror} ({err.filename})"
        raise fs.FsError(err.errno, f"cannot remove {item.path}: {why}; zoo cache clean needs a cache it can "
                                    "write: run it where the cache is writable, or point ZOO_HOME at another "
                                    "cache") from None
    return True


def _sweep_free_locks(root: Path) -> None:
    """Remove the lock files of pulls that no download holds (the lock removes its file on release)."""
    for lock_file in list(root.rglob("*.lock")) if root.is_dir() else []:
        dest = lock_file.with_suffix("")
        rel = dest.relative_to(root)
        if lock_file.is_symlink() or not (_in_cache_layout(rel) or _cache_folder(rel)):
            continue  # not where a pull locks (--cache-dir may name any folder), or a link: never removed
        with contextlib.suppress(OSError):  # held by a download in progress, or not removable: left
            download_lock(dest, wait=0, warn_unlocked=False).acquire().release()


@dataclass(frozen=True)
class CacheCheck:
    path: Path
    status: str  # "ok", "prefix-verified", "recorded", "unverifiable", "partial", "MISMATCH", "LINK"
    detail: str

    @property
    def failed(self) -> bool:
        return self.status in ("MISMATCH", "LINK")


def verify_cache(cache_dir: str | os.PathLike | None = None, progress: bool = True) -> list[CacheCheck]:
    """Re-hash every file in the cache against the manifest (or the hash recorded when it arrived)."""
    by_path = {cached_path(e, cache_dir): e for e in read_manifest().values()}
    items = [i for i in _weights_items(cache_root(cache_dir)) if i.kind in ("weights", "partial", "link")]
    from zoo._progress import ProgressBar

    out: list[CacheCheck] = []
    for item in ProgressBar(items, desc="verify", unit="file", disable=not progress or not items, leave=False):
        path = item.path
        if item.kind == "partial":
            out.append(CacheCheck(path, "partial", "interrupted download; the next pull resumes it"))
            continue
        if item.kind == "link":
            out.append(CacheCheck(path, "LINK", item.status))
            continue
        digest = sha256_file(path)
        entry = by_path.get(path)
        arrived = stored_sha256(path)
        if entry is not None:
            if not entry.hash_matches(digest):
                out.append(CacheCheck(path, "MISMATCH", f"{entry.name}: expected {entry.expected_hash}, got {digest}"))
            elif entry.sha256:
                out.append(CacheCheck(path, "ok", f"{entry.name}: sha256 {digest[:12]}…"))
            else:
                out.append(CacheCheck(path, "prefix-verified",
                                      f"{entry.name}: sha256 starts with the published {entry.sha256_prefix}"))
        elif arrived is not None:
            status = "recorded" if arrived == digest else "MISMATCH"
            out.append(CacheCheck(path, status, f"hash recorded at download {arrived[:12]}…, now {digest[:12]}…"))
        else:
            out.append(CacheCheck(path, "unverifiable", "not in the manifest and no recorded hash"))
    return out
