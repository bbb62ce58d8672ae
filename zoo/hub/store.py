"""The weights cache and its sources: pull / resolve a weights name, a path, a URL or a Hub repo.

Layout, keyed by content: ``$ZOO_HOME/weights/<sha256>/<file name>`` for manifest entries
(``<sha256 prefix>/`` for upstream files known only by their published prefix), so a tag re-published
with new bytes gets a new place and can never be confused with the file it replaced;
``$ZOO_HOME/weights/urls/<sha256(url)[:16]>/<file name>`` for weights a user gave by URL. Beside each
file, ``<file>.verified`` binds the hash checked on arrival to the file as it is (:mod:`zoo.hub.verified`);
a load re-hashes any file that changed since. ``$ZOO_HOME`` defaults to ``$XDG_CACHE_HOME/zoo`` (``~/.cache/zoo``
where ``XDG_CACHE_HOME`` is unset), beside torch.hub's and huggingface_hub's caches.

Sources of a manifest entry, tried in order (``ZOO_OFFLINE=1`` or ``local_files_only=True`` drop the
http(s) ones):

- the project's own files (relative ``url``): a source checkout's ``weights/<url>`` (or
  ``$ZOO_WEIGHTS_DIR``), then ``$ZOO_WEIGHTS_URL/<url>`` (a mirror), then the manifest's
  ``release_url/<url>`` (the release host);
- upstream files (https ``url``): ``$ZOO_WEIGHTS_URL/<file name>`` when the mirror is set, then torch.hub's
  own cache (``$TORCH_HOME/hub/checkpoints/<file name>``, where torchvision's ``weights=`` put it), then the
  official URL. A mirror may be ``http(s)://...``, ``file:///...`` or a plain folder; a file mirror
  works offline.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse, urlsplit

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.hub import verified
from zoo.hub.fetch import HashMismatchError, OfflineError, fetch, local_path, sha256_file, without_query
from zoo.hub.manifest import WeightsEntry, manifest_path, read_manifest, release_url, weights_dir
from zoo.inputs import close_names, either

__all__ = [
    "CorruptCacheError",
    "cache_root",
    "cached_path",
    "datasets_root",
    "get_entry",
    "list_weights",
    "pull",
    "resolve",
    "shared_data_root",
    "sources",
    "verify_entry",
    "zoo_home",
]

URL_DIR = "urls"


class CorruptCacheError(HashMismatchError):
    """A cached file no longer matches the sha256 it was verified with; the message says how to re-pull."""


def zoo_home() -> Path:
    """``$ZOO_HOME``, else ``$XDG_CACHE_HOME/zoo``, else ``~/.cache/zoo`` (where torch.hub and huggingface_hub put
    theirs: a user who moved the caches with XDG_CACHE_HOME, off a small home, moves zoo's too), as an absolute
    path: a relative one is taken from the working directory of the call, and the paths pull returns stay valid
    after a ``chdir`` (relative ones would not)."""
    home = os.environ.get("ZOO_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "zoo")
    try:
        return Path(home).expanduser().absolute()
    except RuntimeError:  # pathlib's "Could not determine home directory.", which named neither the folder nor a fix
        uid = f"user id {os.getuid()}" if hasattr(os, "getuid") else "this user"
        raise fs.FsError(errno.ENOENT, f"the zoo cache {home} is in the home folder, and there is none: HOME is "
                                       f"unset and {uid} has no home in the password database (a container run "
                                       "under an arbitrary user id); set ZOO_HOME to a folder this user can write "
                                       "(a path without ~), or HOME") from None


def shared_data_root() -> Path:
    """Where the project's read-only data sets live: ``$ZOO_SHARED_DATA``, else ``../shared/data`` from the
    working directory (what the README's relative paths mean), else beside a source checkout. The first
    candidate is returned when none exists, so that a message can name it."""
    env = os.environ.get("ZOO_SHARED_DATA")
    if env:
        return Path(env).expanduser()
    candidates = [Path.cwd().parent / "shared" / "data",
                  Path(__file__).resolve().parents[2].parent / "shared" / "data"]
    return next((c for c in candidates if c.is_dir()), candidates[0])


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir`` when given, else ``$ZOO_HOME/weights``, as an absolute path (see :func:`zoo_home`).

    An empty ``cache_dir`` is refused: ``Path("")`` is the working directory, so ``--cache-dir "$UNSET"`` pulled
    into it and cleaned it. An empty ``ZOO_HOME`` is the default home, as an unset one is (the XDG variables'
    rule), but an empty cache_dir names no folder at all, and taking the default cache for it would let
    ``zoo cache clean`` empty a cache the user did not name."""
    if cache_dir is None:
        return zoo_home() / "weights"
    if not os.fspath(cache_dir).strip():
        raise ValueError(f"cache_dir (--cache-dir) must name a folder, got {os.fspath(cache_dir)!r} (an unset shell "
                         "variable?); leave it out for the default cache, $ZOO_HOME/weights")
    return Path(cache_dir).expanduser().absolute()


def datasets_root() -> Path:
    """``$ZOO_HOME/datasets``: where a family's data set downloads go (``zoo hsi-fetch``), one folder per data set."""
    return zoo_home() / "datasets"


def cached_path(entry: WeightsEntry, cache_dir: str | os.PathLike | None = None) -> Path:
    return cache_root(cache_dir) / entry.expected_hash / entry.filename


def _refuse_links_under(root: Path, dest: Path) -> None:
    """``dest`` and every folder between it and the cache ``root`` must be no symbolic link: a linked
    ``<sha256>/`` folder sent the download, its lock and its verified marker outside the cache. The root itself
    may be one (``$ZOO_HOME`` on another disk)."""
    fs.refuse_symlink(dest, "cached weights")
    folder = dest.parent
    while folder != root and root in folder.parents:
        fs.refuse_symlink(folder, "cache folder")
        folder = folder.parent


_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR)


@contextlib.contextmanager
def _writable_cache(cache_dir: str | os.PathLike | None):
    """A cache that cannot be written (a read-only or missing home, as in a container) says how to move it."""
    try:
        yield
    except fs.ForeignLockError as err:  # the cache is writable; one file in it is another user's
        how = "or pass a cache_dir of your own" if cache_dir is not None else "or set ZOO_HOME to a cache of your own"
        raise type(err)(err.errno, f"{err}; {how}") from None
    except fs.FsError as err:
        if err.errno not in _UNWRITABLE:
            raise
        how = ("pass a cache_dir you can write" if cache_dir is not None else
               f"the weights cache is $ZOO_HOME/weights ({cache_root()}): set ZOO_HOME to a folder you can write")
        raise type(err)(err.errno, f"{err}; {how}") from None


def _join(base: str, rel: str) -> str:
    """``rel`` inside the mirror ``base``: a URL's path gets it, its query stays after it (a signed URL's
    ``?sig=...`` signs the folder; appended to the query, the file name named no file)."""
    parts = urlsplit(base)
    if parts.scheme in ("http", "https", "file"):
        return parts._replace(path=parts.path.rstrip("/") + "/" + quote(rel)).geturl()
    return str(Path(base).expanduser() / rel)


def torch_hub_checkpoints() -> Path:
    """Where ``torch.hub.load_state_dict_from_url`` keeps its downloads (torchvision's ``weights=``):
    ``$TORCH_HOME/hub/checkpoints``, ``$TORCH_HOME`` defaulting to ``$XDG_CACHE_HOME/torch`` or
    ``~/.cache/torch``, as torch.hub resolves it (without importing torch)."""
    home = os.environ.get("TORCH_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "torch")
    # os.path's expanduser, as torch.hub's own: without a home folder it leaves "~" as it is (where torch.hub then
    # puts its files, below the working directory), where pathlib's raised and failed every pull of an upstream file
    # before its first source, whatever ZOO_HOME said
    return Path(os.path.expanduser(home)) / "hub" / "checkpoints"


def sources(entry: WeightsEntry) -> list[str]:
    mirror = os.environ.get("ZOO_WEIGHTS_URL", "").strip()
    out: list[str] = []
    if entry.upstream:
        if mirror:
            out.append(_join(mirror, entry.filename))
        # a torchvision user has it already (offline too): checked by its hash on the way in, as any source
        out.append(str(torch_hub_checkpoints() / entry.filename))
        out.append(entry.url)
        return out
    local = weights_dir()
    if local is not None:
        out.append(str(local / entry.url))
    if mirror:
        out.append(_join(mirror, entry.url))
    release = release_url()
    if release:
        out.append(_join(release, entry.url))
    return out


def get_entry(name: str) -> WeightsEntry:
    """The manifest entry ``"model.tag"``; unknown names fail with the closest published ones."""
    entries = read_manifest()
    try:
        return entries[name]
    except KeyError:
        close = close_names(name, entries)
        of_model = sorted(n for n in entries if n.split(".", 1)[0] == name)  # a model's name: its weights
        hint = (f" {name!r} is a model; its weights: {', '.join(of_model)} (zoo.pull({of_model[0]!r}))." if of_model
                else f" Did you mean {either(close)}?" if close else "")
        raise KeyError(
            f"no weights named {name!r} in {manifest_path()}.{hint} See `zoo weights list`."
        ) from None


def list_weights(model: str | None = None) -> list[str]:
    """Published ``"model.tag"`` names, sorted; only ``model``'s when given."""
    return sorted(n for n, e in read_manifest().items() if model is None or e.model == model)


def _offline_hint(entry: WeightsEntry, dest: Path, local_files_only: bool) -> str:
    why = "local_files_only=True" if local_files_only else "ZOO_OFFLINE=1"
    return (
        f"weights {entry.name!r} ({entry.filename}) are not in the cache at {dest}, and {why} "
        f"forbids downloading: run `zoo pull {entry.name}` on a connected machine and copy the file into {dest.parent}, "
        f"or set ZOO_WEIGHTS_URL to a mirror that holds {entry.filename} (a file:// folder works offline)"
        + (f"; torch.hub's copy is taken too, from {torch_hub_checkpoints()}" if entry.upstream else "")
    )


def verify_entry(entry: WeightsEntry, path: Path) -> tuple[str, bool]:
    """Check a cached file against its entry: ``(sha256, hashed_now)``. The verified marker saves the
    hash when the file is unchanged since it arrived; a file that no longer matches is an error."""
    fs.refuse_symlink(path, "cached weights")
    digest, hashed_now = verified.verified_sha256(path, entry.hash_matches)
    if not entry.hash_matches(digest):
        raise CorruptCacheError(
            f"cached weights {path} do not match {entry.name}'s sha256 (expected {entry.expected_hash}, got "
            f"{digest}): the file changed on disk after it was verified. Re-pull it with "
            f"`zoo pull {entry.name}` (or zoo.pull({entry.name!r}))"
        )
    return digest, hashed_now


def not_a_weights_file(path: Path, given: str = "") -> OSError:
    """The error for a weights path that is not a file: a folder is said as such (it exists: "not found" misled)."""
    source = f" (from {given})" if given else ""
    if path.is_dir():
        return IsADirectoryError(f"weights {path}{source} is a folder, not a weights file: name the .safetensors "
                                 "(or .pt/.pth) file inside it")
    return FileNotFoundError(f"weights file not found: {path}{source}")


def pull(weights_name: str, *, cache_dir: str | os.PathLike | None = None, force: bool = False,
         progress: bool = True, local_files_only: bool = False) -> Path:
    """Put the weights ``weights_name`` ("model.tag") in the cache, verified by sha256; return the cached path.

    A cached file is reused once its verified marker (or a fresh hash) matches the manifest;
    ``force=True`` downloads again. A cached file that no longer matches is fetched again with a warning:
    pull is the command that mends the cache (``zoo.build`` refuses such a file, naming it and this command).
    ``local_files_only=True`` never opens a network connection (as ``ZOO_OFFLINE=1`` does for the whole
    process).
    """
    entry = get_entry(weights_name)
    return _pull_mending(entry, cache_dir=cache_dir, force=force, progress=progress,
                         local_files_only=local_files_only)


def _pull_mending(entry: WeightsEntry, **options: Any) -> Path:
    """:func:`_pull_entry`, fetching again a cached file that no longer matches (with a warning once it is
    replaced). Where that is not allowed (offline, no local source) the error says the file is corrupt,
    not that it is missing."""
    try:
        return _pull_entry(entry, **options)
    except CorruptCacheError as err:
        what = err.args[0].split(": the file changed")[0]
        try:
            path = _pull_entry(entry, **{**options, "force": True})
        except OfflineError:
            why = "local_files_only=True" if options.get("local_files_only") else "ZOO_OFFLINE=1"
            dest = cached_path(entry, options.get("cache_dir"))
            raise CorruptCacheError(
                f"{what}: the file changed on disk after it was verified, and {why} forbids fetching it again: "
                f"run `zoo pull {entry.name} --force` on a connected machine and copy the file into {dest.parent}, "
                f"or set ZOO_WEIGHTS_URL to a mirror that holds {entry.filename} (a file:// folder works offline)"
            ) from None
        warnings.warn(f"{what}: it changed on disk after it was verified; fetched it again",
                      stacklevel=user_stacklevel())
        return path


def pull_entry_reporting(entry: WeightsEntry, *, cache_dir=None, force=False, progress=True,
                         local_files_only=False) -> tuple[Path, str]:
    """:func:`pull` of ``entry`` that also says where the file came from: ``"cached"`` (in the cache
    before the call, its verified marker still matching), ``"re-hashed"`` (in the cache, hashed again now),
    ``"fetched"`` (this call downloaded or copied it) or ``"arrived"`` (another process fetched it while
    this one waited on the download lock)."""
    how: list[str] = []
    path = _pull_mending(entry, cache_dir=cache_dir, force=force, progress=progress,
                         local_files_only=local_files_only, report=how)
    return path, how[0] if how else "arrived"


def _pull_entry(entry: WeightsEntry, *, cache_dir=None, force=False, progress=True,
                local_files_only=False, report: list[str] | None = None) -> Path:
    """:func:`pull`; ``report`` gets how the file came (see :func:`pull_entry_reporting`)."""
    report = [] if report is None else report
    root = cache_root(cache_dir)
    dest = cached_path(entry, cache_dir)
    _refuse_links_under(root, dest)
    fs.sweep_temps(dest.parent)  # temp files of writers killed in this folder
    if dest.is_file() and not force:
        _, hashed_now = verify_entry(entry, dest)
        report.append("re-hashed" if hashed_now else "cached")
        return dest

    def arrival(path: Path, digest: str) -> None:
        verified.record(path, digest)
        report.append("fetched")

    with _writable_cache(cache_dir):
        return fetch(
            sources(entry), dest, check=entry.hash_matches, expected=entry.expected_hash, force=force,
            progress=progress, offline_hint=_offline_hint(entry, dest, local_files_only), size=entry.size,
            local_only=local_files_only, reclaim_root=root, on_arrival=arrival,
        )


def _entry_for_url(url: str) -> WeightsEntry | None:
    """The manifest entry a URL designates: its official URL, or its file on the mirror / checkout, whatever
    query or fragment the link carries (``?download=1``, a signature, a ``#sha256=`` pin: the caller checks it)."""
    bare = without_query(url)
    for entry in read_manifest(missing_ok=True).values():  # no manifest: no URL can be one of its files
        candidates = set(sources(entry))
        candidates |= {Path(s).resolve().as_uri() for s in candidates if not urlparse(s).scheme}
        if bare in {without_query(c) if urlparse(c).scheme else c for c in candidates}:
            return entry
    return None


def _entry_for_cached(path: Path, entries: dict[str, WeightsEntry]) -> WeightsEntry | None:
    """The manifest entry whose cache file ``path`` is (``<sha256>/<file name>``, the path `zoo pull` printed),
    in the default cache or one given as ``cache_dir``."""
    path = path.resolve()
    for entry in entries.values():
        if path.name == entry.filename and path.parent.name == entry.expected_hash:
            return entry
    return None


def _by_content(path: Path, model: str | None, digest: str | None = None) -> tuple[Path, WeightsEntry | None]:
    """``(path, the manifest entry whose file path holds byte for byte)``: a shipped file copied elsewhere (a
    release or mirror folder, a manual download, an HF export, a URL) carries no recipe of its own, and loaded
    without its entry lost its class names and preprocessing (resnet18.cifar10: ImageNet's statistics). Found
    by size, then by the full sha256 (``digest`` where a pin gave it); an upstream entry known only by its hash
    prefix (no size either: torchvision's ``resnet18-f37072fd.pth``) by its file name, then that prefix.
    ``(path, None)`` for any other file."""
    entries = read_manifest(missing_ok=True)
    by_prefix = [e for e in entries.values() if not e.sha256 and e.sha256_prefix and e.filename == path.name]
    if digest is None:
        size = path.stat().st_size
        if not by_prefix and not any(e.sha256 and e.size == size for e in entries.values()):
            return path, None
        digest = sha256_file(path)
    entry = next((e for e in entries.values() if e.sha256 == digest), None)
    entry = entry or next((e for e in by_prefix if e.hash_matches(digest)), None)
    if entry is not None:
        _check_model(entry, model)
    return path, entry


def _looks_like_path(s: str) -> bool:
    return os.sep in s or "/" in s or Path(s).suffix in (".safetensors", ".pth", ".pt", ".bin", ".ckpt")


def _pinned_sha256(url: str) -> tuple[str, str | None]:
    """``(url, sha256)`` of a URL that pins its bytes as pip's do, ``...#sha256=<64 hex digits>``; ``(url,
    None)`` without a fragment. Another fragment is an error (a typo would else download unchecked)."""
    parsed = urlparse(url)
    if not parsed.fragment:
        return url, None
    pin = re.fullmatch(r"sha256=([0-9a-fA-F]{64})", parsed.fragment)
    if pin is None:
        raise ValueError(f"{url}: a weights URL pins its file as #sha256=<64 hex digits> (the file's full sha256, "
                         f"as `sha256sum` prints it), got #{parsed.fragment}")
    return parsed._replace(fragment="").geturl(), pin.group(1).lower()


def _pull_url(url: str, local_files_only: bool) -> Path:
    """A URL not in the manifest: cached under a hash of the URL; reused while unchanged since arrival.

    The only trusted hash of such a file is the one it had on arrival (its marker), unless the URL pins one
    (``#sha256=...``): then a download must have it, and so must the cached file. A file whose bytes changed
    since arrival is refused on every load; a file without a marker has nothing to be checked against, so it
    is downloaded again (replaced atomically once the new bytes are in).
    """
    url, pinned = _pinned_sha256(url)
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    name = Path(urlparse(url).path).name or "weights"
    dest = cache_root() / URL_DIR / key / name
    _refuse_links_under(cache_root(), dest)
    why = "local_files_only=True" if local_files_only else "ZOO_OFFLINE=1"
    hint = (f"{url} is not in the cache ({dest}) and {why} forbids downloading it; download it on a "
            "connected machine and pass the local path")
    force = False
    if dest.is_file():
        arrived = verified.stored_sha256(dest)
        if arrived is not None:
            digest, _ = verified.verified_sha256(dest, lambda d: d == arrived)
            if digest != arrived:
                raise CorruptCacheError(
                    f"cached weights {dest} (from {url}) changed on disk since they arrived (sha256 {arrived} "
                    f"then, {digest} now); delete {dest} to download it again")
            if pinned is None or arrived == pinned:
                return dest
        force = True
        hint = (f"cached weights {dest} (from {url}) have no record of the sha256 they arrived with, so they "
                f"cannot be verified, and {why} forbids downloading them again; delete the file and download "
                "it on a connected machine, or pass a local path")
    from zoo.hub.state import check_complete  # imports torch: not at listing time

    def get(force: bool) -> Path:
        return fetch([url], dest, check=None if pinned is None else pinned.__eq__,
                     expected=pinned or "(none: not in the manifest)", offline_hint=hint,
                     force=force, local_only=local_files_only, on_arrival=verified.record, validate=check_complete,
                     mirror_var=None)

    with _writable_cache(None):
        path = get(force)
        # fetch returns a file that a concurrent pull of the same URL brought while this one waited, checked
        # against that pull's pin, or none (an unpinned pull takes whatever the server sends): this one's pin
        # must hold too, else the server's bytes are fetched again and checked (or refused) against it
        if pinned is not None and verified.verified_sha256(path, pinned.__eq__)[0] != pinned:
            path = get(True)
        return path


def resolve(weights: str | os.PathLike, model: str | None = None, *,
            local_files_only: bool = False) -> tuple[Path, WeightsEntry | None]:
    """Turn what a user passed as ``weights=`` into a local file, and its manifest entry when known.

    ``weights``: a tag of ``model`` ("cifar10"), a full "model.tag", a local path, a ``file://`` URL, an
    ``http(s)://`` URL, or ``hf-hub:org/repo[@revision]`` (a Hugging Face Hub repo written by
    ``zoo weights export-hf``). Manifest weights are pulled into the cache (verified); a URL that
    matches a manifest entry is verified against it; another URL is cached under a hash of the URL.
    """
    if isinstance(weights, os.PathLike):  # ~ is the home folder here too, as in the str form
        weights = os.fspath(Path(weights).expanduser())
        if not Path(weights).is_file():
            raise not_a_weights_file(Path(weights))
    if not isinstance(weights, str) or not weights:
        raise TypeError(f"weights must be a tag, 'model.tag', a path, a URL or 'hf-hub:org/repo'; got {weights!r}")
    if weights.startswith("hf-hub:"):
        from zoo.hub.hf import resolve_hf

        path, entry = resolve_hf(weights, local_files_only=local_files_only)
        _check_model(entry, model)
        return path, entry
    scheme = urlparse(weights).scheme
    if scheme in ("http", "https", "file"):
        url, pinned = _pinned_sha256(weights)
        entry = _entry_for_url(weights)
        if entry is not None:
            _check_model(entry, model)
            path = _pull_entry(entry, local_files_only=local_files_only)
            _check_pin(path, entry, weights, pinned)
            return path, entry
        if scheme == "file":
            path = local_path(url)
            if not path.is_file():
                raise not_a_weights_file(path, weights)
            if pinned is not None and (digest := sha256_file(path)) != pinned:
                raise HashMismatchError(f"{path} is not the file {weights} pins: sha256 {digest}, expected {pinned}")
            return _by_content(path, model, pinned)
        return _by_content(_pull_url(weights, local_files_only), model, pinned)
    path = Path(weights).expanduser()
    entries = read_manifest(missing_ok=path.is_file())  # a file given by path needs no manifest
    for name in (weights, f"{model}.{weights}" if model else None):
        if name and name in entries:
            _check_model(entries[name], model)
            return _pull_entry(entries[name], local_files_only=local_files_only), entries[name]
    if path.is_file():
        entry = _entry_for_url(path.resolve().as_uri())  # a shipped file given by its checkout path
        if entry is not None:
            _check_model(entry, model)
            return _pull_entry(entry, local_files_only=local_files_only), entry
        entry = _entry_for_cached(path, entries)
        if entry is not None:
            _check_model(entry, model)
            verify_entry(entry, path)
            return path, entry
        return _by_content(path, model)
    if _looks_like_path(weights) or path.is_dir():
        raise not_a_weights_file(path)
    tags = [entries[n].tag for n in list_weights(model)] if model else list(entries)
    close = close_names(weights, tags)
    hint = f" Did you mean {either(close)}?" if close else ""
    raise KeyError(
        f"unknown weights {weights!r}{f' for model {model!r}' if model else ''}.{hint} Published: "
        f"{', '.join(tags) or '(none)'}; or pass a local path, a URL or 'hf-hub:org/repo' (see `zoo weights list`)."
    )


def _check_pin(path: Path, entry: WeightsEntry, weights: str, pinned: str | None) -> None:
    """A ``#sha256=`` pin on a URL of a manifest entry's file holds as on any URL: the entry's file must have it."""
    if pinned is None:
        return
    digest = entry.sha256 or verified.verified_sha256(path, entry.hash_matches)[0]
    if digest != pinned:
        raise HashMismatchError(f"{weights} pins sha256 {pinned}, but it is the file of {entry.name}, whose sha256 is "
                                f"{digest}: fix the pin (or the URL); the cached file {path} was kept")


def _check_model(entry: WeightsEntry, model: str | None) -> None:
    if model is not None and entry.model != model:
        raise ValueError(f"weights {entry.name!r} are for model {entry.model!r}, not {model!r}: build it with "
                         f"zoo.build({entry.model!r}, weights={entry.name!r})")
