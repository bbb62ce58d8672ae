"""The cache as a whole: what is in it (``zoo cache info``), re-hashing it (``zoo weights verify``) and
freeing it (``zoo cache clean``).

Everything zoo downloads lives under ``$ZOO_HOME``: ``weights/`` (the pull cache, see :mod:`zoo.hub.store`),
``hf/`` (files fetched from a Hugging Face Hub repo, in huggingface_hub's own layout) and ``datasets/`` (the data
sets a family downloads, ``zoo hsi-fetch``: ``datasets/<name>/<file>``). Besides finished files these can hold
``.part`` files (interrupted downloads, resumed by the next one), zoo temp files (``.zoo-tmp-*``, left by a killed
writer) and bookkeeping (``.verified`` markers, the ``.lock`` of a download in progress, the ``.resume`` record of a
``.part``: the version of the file it holds).

A file is zoo's to list and to delete only where a download puts it and with zoo's own evidence, since a folder
given as ``--cache-dir`` may hold anything (and so may ``$ZOO_HOME``): a manifest entry's file in its content
folder (``<sha256>/`` or the published prefix), a file with the ``.verified`` marker zoo writes on arrival (its
hash the folder's content key, where the folder is named by one), a ``.part`` of an entry's file or with the
``.resume`` record its download wrote. Folder names alone prove nothing: ``20240131/report-20240131.txt`` is all
hex too. Under ``hf/`` only huggingface_hub's layout (``models--*`` repo folders, ``.locks``) is zoo's, and never
through a linked ``hf/`` (a Hub cache shared with other tools: its target is left alone).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.hub.fetch import RESUME_SUFFIX, download_lock, read_resume, resume_path, sha256_file
from zoo.hub.manifest import WeightsEntry, read_manifest
from zoo.hub.store import URL_DIR, cache_root, cached_path, datasets_root, zoo_home
from zoo.hub.verified import MARKER_SUFFIX, recorded, stored_sha256, zoo_marker

__all__ = ["CacheCheck", "CacheItem", "cache_info", "cache_places", "clean_cache", "partial_downloads", "verify_cache"]

_BOOKKEEPING = (".lock", MARKER_SUFFIX, ".sha256", RESUME_SUFFIX)


@dataclass(frozen=True)
class CacheItem:
    path: Path
    size: int
    # "weights", "partial", "temp", "link" (a symbolic link where a pulled file goes), "dataset" (a data set's file),
    # "hf" (a Hugging Face Hub repo's downloads; or a linked hf/ folder, which clean leaves alone)
    kind: str
    name: str  # the manifest name, the URL folder, the data set, the Hub repo, or "-"
    # weights: "verified" (matched its published sha256, unchanged since), "unpublished" (a URL's file: no
    # published hash to check, unchanged since it arrived) or "unchecked"; a data set's file: "recorded" (unchanged
    # since it arrived, its hash recorded) or "unchecked"; else what it is
    status: str


_CONTENT_KEY = re.compile(r"[0-9a-f]{8,64}")  # a file's sha256, or the prefix an upstream publisher put in its name
_URL_KEY = re.compile(r"[0-9a-f]{16}")  # a hash of a URL not in the manifest: store._pull_url
_TEMP_STATES = {  # fs.temp_state's verdicts as cache info says them; clean removes the stale ones only
    "stale": "left by a killed writer",
    "live": "being written now (kept)",
    "foreign": f"another host's or PID namespace's writer's (kept until {fs.FOREIGN_TEMP_AGE_S / 3600:g} h old)",
}
_HF_REPO = "models--"  # huggingface_hub's folder of a model repo (zoo downloads models only)
_HF_LOCKS = ".locks"  # huggingface_hub's lock files, one folder per repo


def _folder_key(root: Path, folder: Path, datasets: bool) -> str | None:
    """The content key ``folder`` names its files by, ``""`` for a download folder keyed otherwise (a URL's, a data
    set's); None for a folder no download writes in."""
    parts = folder.relative_to(root).parts
    if datasets:
        return "" if len(parts) == 1 else None
    if len(parts) == 1 and _CONTENT_KEY.fullmatch(parts[0]):
        return parts[0]
    return "" if len(parts) == 2 and parts[0] == URL_DIR and _URL_KEY.fullmatch(parts[1]) else None


def _zoo_file(p: Path, root: Path, entries: dict[Path, WeightsEntry], datasets: bool) -> bool:
    """Whether ``p`` is a file a download put there (see the module's docstring)."""
    if p in entries:
        return True
    key = _folder_key(root, p.parent, datasets)
    if key is None:
        return False
    if p.suffix == ".part":
        return p.with_suffix("") in entries or bool(read_resume(p))
    digest = zoo_marker(p)
    return digest is not None and digest.startswith(key)


def _zoo_link(p: Path, root: Path, entries: dict[Path, WeightsEntry], urls: bool) -> bool:
    """Whether the link ``p`` stands where a pull writes (pulls refuse it): a manifest entry's file or folder, a
    file of zoo's (its marker beside it), or, in the cache URL pulls write to, ``urls/`` and its key folders."""
    if p.name.endswith(_BOOKKEEPING):
        return False
    if p in entries or p in {e.parent for e in entries} or _zoo_file(p, root, entries, datasets=False):
        return True
    parts = p.relative_to(root).parts
    return urls and parts[0] == URL_DIR and (len(parts) == 1 or len(parts) == 2 and bool(_URL_KEY.fullmatch(parts[1])))


def _file_item(p: Path, root: Path, entries: dict[Path, WeightsEntry], datasets: bool) -> CacheItem:
    size = p.stat().st_size
    if p.suffix == ".part":
        return CacheItem(p, size, "partial", "-", "interrupted download; the next "
                         + ("fetch of its data set" if datasets else "pull") + " resumes it")
    folder = str(p.parent.relative_to(root))
    if datasets:
        return CacheItem(p, size, "dataset", folder, "recorded" if recorded(p) is not None else "unchecked")
    entry = entries.get(p)
    name = entry.name if entry else folder  # an older manifest's file, or a URL's
    digest = recorded(p)
    # a marker written by an older zoo may hold the hash of a file it refused: trust it only if it
    # also matches the manifest
    ok = digest is not None and (entry is None or entry.hash_matches(digest))
    status = ("verified" if entry is not None else "unpublished") if ok else "unchecked"
    return CacheItem(p, size, "weights", name, status)


def _download_items(root: Path, entries: dict[Path, WeightsEntry], *, datasets: bool = False,
                    urls: bool = False) -> list[CacheItem]:
    """The files downloads put under ``root`` (a weights cache, or the datasets folder), temp files of killed
    writers and links planted where a pull writes; ``entries``: the manifest entries' files in ``root``."""
    items: list[CacheItem] = []
    for p in sorted(root.rglob("*")) if root.is_dir() else []:
        rel = p.relative_to(root).parts
        if (state := fs.temp_state(p)) is not None and not any(q.startswith(fs.TEMP_PREFIX) for q in rel[:-1]):
            size = sum(f.lstat().st_size for f in p.rglob("*")) if p.is_dir() else p.lstat().st_size
            items.append(CacheItem(p, size, "temp", "-", _TEMP_STATES[state]))
        elif p.is_symlink():
            if not datasets and _zoo_link(p, root, entries, urls):
                # where a pulled file goes, a link was put (pulls refuse to read through it): listed, so that
                # verify reports it and clean removes the link (never what it points to)
                items.append(CacheItem(p, 0, "link", entries[p].name if p in entries else "-",
                                       f"a symbolic link to {os.readlink(p)}: pulls refuse it; zoo cache clean removes it"))
        elif (p.is_file() and not p.name.endswith(_BOOKKEEPING) and not any(q.startswith(fs.TEMP_PREFIX) for q in rel)
              and _zoo_file(p, root, entries, datasets)):
            items.append(_file_item(p, root, entries, datasets))
    return items


def _weights_items(root: Path) -> list[CacheItem]:
    entries = {cached_path(e, root): e for e in read_manifest(missing_ok=True).values()}
    return _download_items(root, entries, urls=root == cache_root())  # URL pulls write to the default cache only


def partial_downloads(root: Path) -> list[Path]:
    """The ``.part`` files of zoo's interrupted pulls in the weights cache ``root`` (by the evidence the module's
    docstring names), which a pull short of room may reclaim."""
    return [item.path for item in _weights_items(root) if item.kind == "partial"]


def _hf_items() -> list[CacheItem]:
    """One item per model repo huggingface_hub keeps under ``$ZOO_HOME/hf``; a linked ``hf/`` is one item,
    which clean leaves alone (its target may be the Hub cache other tools use)."""
    hf = zoo_home() / "hf"
    if hf.is_symlink():
        return [CacheItem(hf, 0, "hf", "-", f"a symbolic link to {os.readlink(hf)}: zoo cache clean leaves it and "
                                            "what it points to alone")]
    repos = sorted(p for p in hf.iterdir() if p.name.startswith(_HF_REPO) and p.is_dir() and not p.is_symlink()) \
        if hf.is_dir() else []
    # the blobs hold the bytes; the snapshots' links to them take none
    return [CacheItem(repo, sum(f.lstat().st_size for f in repo.rglob("*") if f.is_file() and not f.is_symlink()),
                      "hf", repo.name.removeprefix(_HF_REPO).replace("--", "/"), "Hugging Face Hub downloads")
            for repo in repos]


def cache_places(cache_dir: str | os.PathLike | None = None) -> list[Path]:
    """The folders :func:`cache_info` and :func:`clean_cache` look in: ``cache_dir`` alone, else the weights
    cache, and ``$ZOO_HOME/hf`` and ``$ZOO_HOME/datasets`` where they exist."""
    if cache_dir is not None:
        return [cache_root(cache_dir)]
    hf = zoo_home() / "hf"
    return [cache_root()] + [p for p in (hf, datasets_root()) if p.is_dir() or p.is_symlink()]


def cache_info(cache_dir: str | os.PathLike | None = None) -> list[CacheItem]:
    """What zoo downloaded, with sizes: the files of the weights cache (``cache_dir``, else ``$ZOO_HOME/weights``)
    and, for the default cache, those of the data sets (``$ZOO_HOME/datasets``) and the Hub's repos
    (``$ZOO_HOME/hf``). Only what a download put there is listed (see the module's docstring)."""
    items = _weights_items(cache_root(cache_dir))
    if cache_dir is None:
        items += _download_items(datasets_root(), {}, datasets=True)
        items += _hf_items()
    return items


def _unlink(path: Path) -> list[str]:
    try:
        path.unlink()
    except OSError as err:
        return [f"{path}: {err.strerror}"]
    return []


def _remove_tree(path: Path) -> list[str]:
    """``shutil.rmtree(path)`` (which removes links inside, never what they point to); returns what could not be
    removed (``path: reason``) instead of raising."""
    failed: list[str] = []
    if sys.version_info >= (3, 12):  # onerror is deprecated there
        shutil.rmtree(path, onexc=lambda _f, p, err: failed.append(f"{p}: {err}"))
    else:
        shutil.rmtree(path, onerror=lambda _f, p, info: failed.append(f"{p}: {info[1]}"))
    return failed


def _remove_hf(item: CacheItem, removed: int) -> bool:
    """Remove a Hub repo's folder; a linked ``hf/`` is left as it is, with a warning saying so."""
    if item.path.is_symlink():
        warnings.warn(f"{item.path} is a symbolic link to {os.readlink(item.path)}: zoo cache clean leaves it and what "
                      "it points to alone (a Hub cache other tools may share); remove zoo's repos there with "
                      "huggingface_hub's `hf cache` commands", stacklevel=user_stacklevel())
        return False
    failed = _remove_tree(item.path)
    if failed:  # not counted as freed: every file that failed is still there
        raise fs.FsError(errno.EACCES, f"cannot remove the Hugging Face downloads in {item.path}: "
                                       f"{failed[0]}{f' (and {len(failed) - 1} more)' if len(failed) > 1 else ''}"
                                       f" ({removed} other item(s) removed)")
    return True


def clean_cache(cache_dir: str | os.PathLike | None = None, *, stale_only: bool = False) -> tuple[int, int]:
    """Delete what :func:`cache_info` lists (``stale_only``: only partial downloads, temp files and planted links);
    returns (files, bytes).

    Files whose download is in progress (their lock is held) are left alone, and so is a linked ``$ZOO_HOME/hf``
    (with a warning). Free lock files of zoo's downloads (an older zoo left one beside each file it pulled) are
    removed in either case, uncounted: they are not listed either.
    """
    removed, freed = 0, 0
    items = cache_info(cache_dir)
    for item in items:
        if stale_only and item.kind not in ("partial", "temp", "link"):
            continue
        if item.kind == "temp":
            gone = _remove_temp(item)
        elif item.kind == "hf":
            gone = _remove_hf(item, removed)
        else:
            gone = _remove_unless_downloading(item)
        if gone:
            removed, freed = removed + 1, freed + item.size
    hf = zoo_home() / "hf"
    if cache_dir is None and not stale_only and not hf.is_symlink() and (hf / _HF_LOCKS).is_dir() \
            and not (hf / _HF_LOCKS).is_symlink():
        _remove_tree(hf / _HF_LOCKS)  # huggingface_hub's lock files, made again by its next download
    owned = {i.path.with_suffix("") if i.kind == "partial" else i.path for i in items}
    for root in [cache_root(cache_dir)] + ([datasets_root()] if cache_dir is None else []):
        _sweep_free_locks(root, owned)
    return removed, freed


def _remove_temp(item: CacheItem) -> bool:
    """Remove a temp item of a killed writer (:func:`zoo.fs.sweep_temps`); False while its writer may run. One that
    stays (sweeping leaves what it may not remove: a cache read-only to this user) is said as the other items are."""
    if item.path in fs.sweep_temps(item.path.parent) or not os.path.lexists(item.path):
        return True
    if fs.temp_state(item.path) != "stale":
        return False
    try:
        if item.path.is_dir() and not item.path.is_symlink():
            shutil.rmtree(item.path)
        else:
            item.path.unlink()
    except OSError as err:
        raise fs.FsError(err.errno, f"cannot remove {item.path}: {err.strerror or err}; zoo cache clean needs a "
                                    "cache it can write: run it where the cache is writable, or point ZOO_HOME at "
                                    "another cache") from None
    return True


def _remove_unless_downloading(item: CacheItem) -> bool:
    """Remove a weights, dataset, partial or link item (and its marker or resume record) under its download's lock;
    False while a download holds it. Where the file system keeps no locks the item is removed: it was asked for."""
    dest = item.path.with_suffix("") if item.kind == "partial" else item.path
    try:
        with download_lock(dest, wait=0, warn_unlocked=False):
            for p in (item.path, item.path.with_name(item.path.name + MARKER_SUFFIX), resume_path(item.path)):
                p.unlink(missing_ok=True)
    except fs.FolderLockedError:
        return False
    except fs.UnsafePathError:  # a planted lock link: its own one-line error says what to remove
        raise
    except fs.ForeignLockError as err:  # the cache is writable: one lock file in it is another user's, said with its fix
        raise fs.ForeignLockError(err.errno, f"cannot remove {item.path}: {err}") from None
    except OSError as err:  # a read-only cache (a container's image): say so, not a raw errno on a lock
        why = str(err) if isinstance(err, fs.FsError) else f"{err.strerror} ({err.filename})"
        raise fs.FsError(err.errno, f"cannot remove {item.path}: {why}; zoo cache clean needs a cache it can "
                                    "write: run it where the cache is writable, or point ZOO_HOME at another "
                                    "cache") from None
    return True


def _sweep_free_locks(root: Path, owned: set[Path]) -> None:
    """Remove the lock files of downloads that none holds (the lock removes its file on release): beside a file
    zoo owns (``owned``, or a manifest entry's place), or recording the download that held it (one a killed pull
    left) in a folder downloads write in. Any other ``.lock`` is not zoo's (``--cache-dir`` may name any folder)."""
    datasets = root == datasets_root()
    entries = set() if datasets else {cached_path(e, root) for e in read_manifest(missing_ok=True).values()}
    for lock_file in list(root.rglob("*.lock")) if root.is_dir() else []:
        dest = lock_file.with_suffix("")
        if lock_file.is_symlink() or not lock_file.is_file():
            continue  # a link is never removed (nor followed)
        holder = fs.FileLock(lock_file).holder()
        killed = isinstance(holder, dict) and "pid" in holder and _folder_key(root, dest.parent, datasets) is not None
        if not (dest in owned or dest in entries or killed):
            continue
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
