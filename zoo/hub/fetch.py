"""Getting one file into the cache: verified, atomic, resumable, safe against concurrent pulls.

A file is streamed to ``<dest>.part``, hashed, checked, and only then renamed to ``<dest>``; the final
name never holds a partial or unverified file. A per-file lock (``filelock``) makes a second process
pulling the same file wait and then reuse the first one's result. An interrupted HTTP transfer is
retried with exponential backoff and resumed with a ``Range`` request when the server answers 206.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

__all__ = ["DownloadError", "HashMismatchError", "OfflineError", "fetch", "offline", "sha256_file"]

CHUNK = 1 << 20
TIMEOUT_S = 30.0  # per socket operation (connect, each read)
RETRIES = 4  # attempts per source
BACKOFF_S = 1.0  # sleeps BACKOFF_S * 2**attempt between attempts
LOCK_TIMEOUT_S = 3600.0  # a concurrent puller may be downloading a large file


class DownloadError(OSError):
    """Every source failed (not found, or the network kept failing after retries)."""


class HashMismatchError(ValueError):
    """The bytes a source served are not the file the manifest describes; nothing entered the cache."""


class OfflineError(FileNotFoundError):
    """``ZOO_OFFLINE=1`` and the file is not in the cache (nor on a local source)."""


class _NotFound(Exception):
    pass


def offline() -> bool:
    return os.environ.get("ZOO_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")


def is_network(source: str) -> bool:
    return urlparse(source).scheme in ("http", "https")


def local_path(source: str) -> Path:
    """A plain path or a ``file://`` URL as a local path."""
    parsed = urlparse(source)
    if parsed.scheme == "file":
        return Path(url2pathname(parsed.path))
    return Path(source)


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


class _Digest:
    """sha256 computed while streaming, so a download is read once; re-synced from the .part file when
    a transfer resumes in a state the running hash did not see."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.h, self.n = hashlib.sha256(), 0

    def update(self, block: bytes) -> None:
        self.h.update(block)
        self.n += len(block)

    def sync(self, part: Path) -> None:
        size = part.stat().st_size if part.exists() else 0
        if size != self.n:
            self.reset()
            if size:
                with open(part, "rb") as fh:
                    for block in iter(lambda: fh.read(CHUNK), b""):
                        self.update(block)

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def _bar(total: int | None, initial: int, label: str, progress: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024,
                desc=label, disable=not progress, leave=False)


def _copy_local(source: str, part: Path, label: str, progress: bool, digest: _Digest) -> None:
    src = local_path(source)
    if not src.is_file():
        raise _NotFound(f"{src} does not exist")
    digest.reset()
    with open(src, "rb") as fin, open(part, "wb") as fout, _bar(src.stat().st_size, 0, label, progress) as bar:
        for block in iter(lambda: fin.read(CHUNK), b""):
            fout.write(block)
            digest.update(block)
            bar.update(len(block))


def _http_attempt(url: str, part: Path, label: str, progress: bool, digest: _Digest) -> None:
    """One request; appends to ``part`` from where it stopped when the server honours Range."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "zoo-hub/1", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    req = urllib.request.Request(url, headers=headers)
    try:
        resp = urllib.request.urlopen(req, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # our partial file is not a prefix the server knows: restart
            part.unlink(missing_ok=True)
            raise ConnectionError(f"HTTP 416 for a resume at byte {offset}; restarting") from None
        if err.code in (401, 403, 404, 410):
            raise _NotFound(f"HTTP {err.code} {err.reason}") from None
        raise
    with resp:
        if resp.status == 206:
            content_range = resp.headers.get("Content-Range", "")
            if not content_range.startswith(f"bytes {offset}-"):
                part.unlink(missing_ok=True)
                raise ConnectionError(f"unexpected Content-Range {content_range!r} for a resume at {offset}")
            mode = "ab"
            digest.sync(part)
        else:  # 200: the server sent the whole file (no Range support, or no partial file)
            offset, mode = 0, "wb"
            digest.reset()
        length = resp.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        received = 0
        with open(part, mode) as fh, _bar(total, offset, label, progress) as bar:
            while True:
                block = resp.read(CHUNK)
                if not block:
                    break
                fh.write(block)
                digest.update(block)
                received += len(block)
                bar.update(len(block))
        if length is not None and received < int(length):
            raise http.client.IncompleteRead(b"", int(length) - received)


def _http_download(url: str, part: Path, label: str, progress: bool, digest: _Digest) -> None:
    last: BaseException | None = None
    for attempt in range(RETRIES):
        try:
            _http_attempt(url, part, label, progress, digest)
            return
        except _NotFound:
            raise
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError) as err:
            if isinstance(err, urllib.error.HTTPError) and err.code < 500 and err.code not in (408, 429):
                raise _NotFound(f"HTTP {err.code} {err.reason}") from None
            last = err
            if attempt + 1 < RETRIES:
                time.sleep(BACKOFF_S * 2**attempt)
    raise DownloadError(f"{url}: failed after {RETRIES} attempts ({type(last).__name__}: {last})")


def fetch(
    sources: list[str],
    dest: Path,
    *,
    check: Callable[[str], bool] | None,
    expected: str,
    force: bool = False,
    progress: bool = True,
    offline_hint: str = "",
) -> Path:
    """Bring ``dest`` into the cache from the first source that has it.

    ``check(sha256_hex) -> bool`` accepts the downloaded bytes (``None``: nothing to check against, the
    hash is only recorded). A rejected file raises :class:`HashMismatchError` and is deleted. With
    ``ZOO_OFFLINE=1`` network sources are never contacted.
    """
    from filelock import FileLock

    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with FileLock(str(dest) + ".lock", timeout=LOCK_TIMEOUT_S):
        if dest.exists() and not force:
            return dest  # a concurrent puller finished it while we waited; it was verified then
        # with force, the old file stays until the new one is verified and replaces it atomically
        usable = [s for s in sources if not (offline() and is_network(s))]
        if not usable:
            raise OfflineError(offline_hint or f"ZOO_OFFLINE=1: not downloading {dest.name}")
        failures: list[str] = []
        for source in usable:
            label = dest.name
            try:
                if not is_network(source) and not local_path(source).is_file():
                    raise _NotFound(f"{local_path(source)} does not exist")  # before touching a kept .part
                for fresh in (False, True):
                    if fresh or not is_network(source):
                        part.unlink(missing_ok=True)
                    resumed = part.exists() and part.stat().st_size > 0
                    running = _Digest()
                    if is_network(source):
                        _http_download(source, part, label, progress, running)
                    else:
                        _copy_local(source, part, label, progress, running)
                    running.sync(part)  # a no-op unless the file changed behind the running hash
                    digest = running.hexdigest()
                    if check is None or check(digest):
                        break
                    if resumed and not fresh:
                        continue  # the kept partial file may be stale: one clean download before failing
                    part.unlink(missing_ok=True)
                    raise HashMismatchError(
                        f"sha256 mismatch for {source}: expected {expected}, got {digest}; "
                        f"the file was discarded and nothing entered the cache ({dest.parent})"
                    )
            except _NotFound as err:
                failures.append(f"{source}: {err}")
                continue
            except DownloadError as err:
                failures.append(str(err))
                continue
            os.replace(part, dest)
            try:
                dest.with_name(dest.name + ".sha256").write_text(digest + "\n")
            except OSError:
                pass  # the record only helps `zoo weights verify` for files without a manifest hash
            return dest
        if len(usable) < len(sources):  # offline, and the local sources did not have it
            raise OfflineError(offline_hint or f"ZOO_OFFLINE=1: not downloading {dest.name}")
        raise DownloadError(
            f"could not get {dest.name}: " + "; ".join(failures)
            + ". Without a network, set ZOO_WEIGHTS_URL to a mirror (http(s)://, file:// or a folder)"
        )

