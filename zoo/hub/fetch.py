"""Getting one file into the cache: verified, atomic, resumable, safe against concurrent pulls.

A file is streamed to ``<dest>.part``, hashed, checked, and only then renamed to ``<dest>``; the final
name never holds a partial or unverified file. A per-file lock (:func:`download_lock`, a
:class:`zoo.fs.FileLock`) makes a second process pulling the same file wait and then reuse the first one's
result. An interrupted HTTP transfer is retried with exponential backoff and resumed with a ``Range``
request when the server answers 206. A resume asks for the same version of the file: the ETag (or
Last-Modified) of the response that started the ``.part`` is kept beside it (``<file>.resume``) and sent as
``If-Range``, and the total size a 206 names must be the one first announced; a server whose file changed sends
it whole, from byte 0. Without such a validator only a download whose sha256 will be checked resumes (the hash
catches a join of two versions); a URL with nothing to check it against starts again from byte 0. A server that
stalls (no byte for ``$ZOO_TIMEOUT`` seconds, default 20) fails the pull at once, even after sending some bytes,
keeping the bytes it sent for the next pull to resume from; one that keeps closing the connection early is given
up with how far it got and whether its kept bytes can resume. A 206 for part of the rest (a server that caps its
ranges) is followed by a request for the next part. A server that refuses access (401, 403, 407) is said to, not
to lack the file: zoo sends no credentials, so the way in is another source. A body sent ``Content-Encoding``-coded
though ``identity`` was asked for is refused by name. Local sources (a checkout's
``weights/``, a ``file://`` mirror) are copied straight into place through :mod:`zoo.fs`, without a
progress bar.

Nothing here follows a link it did not create: ``.part`` and ``.lock`` files that are symlinks are
refused with one line naming them. Free space is checked before the first byte; a write that fails
anyway removes the partial file, and stale ``.part`` files of other downloads are reclaimed when the
space they hold is what this one lacks.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import math
import os
import re
import socket
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse, urlsplit
from urllib.request import url2pathname

from typing_extensions import Self

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.inputs import ON_VALUES

__all__ = ["RESUME_SUFFIX", "DownloadError", "HashMismatchError", "OfflineError", "download_lock", "fetch", "offline",
           "sha256_file", "timeout_s"]

CHUNK = 1 << 20
OVERLAP_MIN = 1 << 16
"""Blocks this large or larger are hashed on :class:`_Digest`'s helper thread (smaller ones cost more to hand over)."""
DEFAULT_TIMEOUT_S = 20.0  # no byte for this long (connect or read): the server is stalled
# socket.settimeout refuses about 9.2e9 s (OverflowError, naming neither the variable nor the value); a wait of
# over 31 years is no timeout, which ZOO_TIMEOUT=inf says
MAX_TIMEOUT_S = 1e9
RETRIES = 4  # attempts in a row without progress (a byte more in the .part) before a source is given up
BACKOFF_S = 1.0  # sleeps BACKOFF_S * 2**(attempts without progress - 1) between attempts
LOCK_TIMEOUT_S = 3600.0  # a concurrent puller may be downloading a large file
RESUME_SUFFIX = ".resume"  # <file>.resume: the URL, validator and size of the response that started <file>.part
_OFF = ("", "0", "false", "no", "off")
_REFUSED = (401, 403, 407)  # authentication required, forbidden, proxy authentication required


class DownloadError(OSError):
    """Every source failed (not found, or the network kept failing after retries)."""

    def __str__(self) -> str:
        return str(self.args[-1]) if self.args else ""


class HashMismatchError(ValueError):
    """The bytes a source served are not the file the manifest describes; nothing entered the cache."""


class OfflineError(FileNotFoundError):
    """``ZOO_OFFLINE=1`` (or ``local_files_only``) and the file is not in the cache nor on a local source."""

    def __str__(self) -> str:
        return str(self.args[-1]) if self.args else ""


class _NotFound(Exception):
    pass


class _Refused(Exception):
    """The server refused access (HTTP 401, 403, 407): it may well have the file, for a user it lets in. zoo sends
    no credentials, so asking again cannot help; the next source is tried, and the error says what would."""


class _Unreadable(Exception):
    """A local source that exists but cannot be read (another user's ``0600`` file in a shared ``$TORCH_HOME`` or
    weights folder, an I/O error): that source's failure, not the pull's; the next source is tried. Not an
    OSError, so that :func:`zoo.fs.atomic_write` never reports it as a failure to write the cache."""


class _WriteFailed(Exception):
    """Writing the partial file failed (disk full, I/O error): not the source's fault, no retry."""

    def __init__(self, err: OSError) -> None:
        super().__init__(str(err))
        self.err = err


def offline() -> bool:
    """``$ZOO_OFFLINE``: 1/true/yes/on mean offline; 0/false/no/off/empty mean online; else an error."""
    raw = os.environ.get("ZOO_OFFLINE", "")
    value = raw.strip().lower()
    if value in ON_VALUES:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"ZOO_OFFLINE={raw!r} is not understood: use 1/true/yes/on (never touch the network) "
                     "or 0/false/no/off (online; the same as unset)")


def timeout_s() -> float:
    """``$ZOO_TIMEOUT``: seconds without a byte before a connection counts as stalled (default 20). ``inf`` is
    no timeout (returned as ``math.inf``: a connection waits for ever); a finite value over
    :data:`MAX_TIMEOUT_S` (1e9 s) is refused, as are zero, negative numbers, NaN and words (ValueError)."""
    raw = os.environ.get("ZOO_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (0 < value <= MAX_TIMEOUT_S or value == math.inf):
        raise ValueError(f"ZOO_TIMEOUT={raw!r}: expected a positive number of seconds, at most {MAX_TIMEOUT_S:g} "
                         "(or inf for no timeout); set it to e.g. 60, or unset it for the default 20")
    return value


def _socket_timeout() -> float | None:
    """:func:`timeout_s` as ``urlopen`` takes it: None (blocking) for no timeout."""
    value = timeout_s()
    return None if value == math.inf else value


def without_query(url: str) -> str:
    """``url`` without its ``?query`` and ``#fragment``: the file it names, whatever the link carries (a signature,
    ``?download=1``, a ``#sha256=`` pin)."""
    return urlsplit(url)._replace(query="", fragment="").geturl()


def is_network(source: str) -> bool:
    return urlparse(source).scheme in ("http", "https")


def local_path(source: str) -> Path:
    """A plain path or a ``file://`` URL as a local path. ``file://~/w`` is the home folder's ``w`` (urlparse
    reads its ``~`` as a host); another host (``file://relative/x``, read as ``/x`` otherwise) is an error."""
    parsed = urlparse(source)
    if parsed.scheme == "file":
        if parsed.netloc.startswith("~"):
            return Path(parsed.netloc + url2pathname(parsed.path)).expanduser()
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"{source}: a file URL names a host ({parsed.netloc!r}) this machine cannot read; "
                             f"write file:///absolute/path (three slashes), or give the folder as a plain path")
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
    a transfer resumes in a state the running hash did not see.

    A block of :data:`OVERLAP_MIN` bytes or more is hashed on a helper thread while the next one is received
    and written (hashlib lets go of the GIL on large blocks), one block in flight: hashing ran at ~1.1 GB/s on
    an AMX Xeon, over half of a local 46.8 MB pull. Interleaved A/B there (15 pulls each, twice): 69.4-70.0 ms
    hashing inline vs 59.4-60.3 ms with the helper on 2 cores; on one core (taskset) 75.2 vs 76.5-76.7 ms, the
    hand-over's cost. Blocks reach the hash in the order given; a block is held until hashed, so it must be
    ``bytes`` (a buffer the caller refills would change under the hash)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        self.reset()

    def reset(self) -> None:
        self._wait()
        self.h, self.n = hashlib.sha256(), 0

    def update(self, block: bytes) -> None:
        self._wait()
        if len(block) >= OVERLAP_MIN:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zoo-sha256")
            self._pending = self._pool.submit(self.h.update, block)
        else:
            self.h.update(block)
        self.n += len(block)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def sync(self, part: Path) -> None:
        size = part.stat().st_size if part.exists() else 0
        if size != self.n:
            self.reset()
            if size:
                with open(part, "rb") as fh:
                    for block in iter(lambda: fh.read(CHUNK), b""):
                        self.update(block)

    def hexdigest(self) -> str:
        self._wait()
        return self.h.hexdigest()

    def close(self) -> None:
        """Finish the block in flight and end the helper thread."""
        self._wait()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bar(total: int | None, initial: int, label: str, progress: bool):
    from zoo._progress import ProgressBar

    # leave=True: a finished download stays on screen at 100 %, never as a bar cleared half-drawn
    return ProgressBar(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024,
                desc=label, disable=not progress, leave=True, dynamic_ncols=True)


def _copy_local(source: str, dest: Path, check: Callable[[str], bool] | None, expected: str,
                size: int | None = None) -> str:
    """Copy a local file straight into ``dest`` through :mod:`zoo.fs` (hashed on the way; a mismatch
    never replaces ``dest``). Returns the sha256. A file of another size than ``size`` is not copied (a
    git-lfs pointer, or a 2 TiB file that would fail the free-space check and stop the pull, blaming the disk)."""
    src = local_path(source)
    if not src.is_file():
        raise _NotFound(f"{src} does not exist")
    have = src.stat().st_size
    if size is not None and have != size:
        raise HashMismatchError(f"{source} is {have} bytes, the file {size}: not this file (not copied); nothing "
                                f"entered the cache ({dest.parent})")
    with _Digest() as digest, _open_source(src, source) as fin, fs.atomic_write(dest, size=have) as fout:
        for block in _blocks(fin, source):
            fout.write(block)
            digest.update(block)
        if check is not None and not check(digest.hexdigest()):
            raise HashMismatchError(
                f"sha256 mismatch for {source}: expected {expected}, got {digest.hexdigest()}; "
                f"nothing entered the cache ({dest.parent})")
    # the bytes an earlier HTTP pull kept for resuming (the caller holds the file's lock): nothing resumes them now
    discard_part(dest.with_name(dest.name + ".part"))
    return digest.hexdigest()


def _open_source(src: Path, source: str):
    """``src`` open for reading; a file this user may not read is the source's failure (:class:`_Unreadable`)."""
    try:
        return open(src, "rb")
    except OSError as err:
        raise _Unreadable(f"{source}: cannot read it ({err.strerror or err})") from None


def _blocks(fin, source: str):
    """``fin``'s blocks; a read that fails is the source's failure (:class:`_Unreadable`)."""
    while True:
        try:
            block = fin.read(CHUNK)
        except OSError as err:
            raise _Unreadable(f"{source}: cannot read it ({err.strerror or err})") from None
        if not block:
            return
        yield block


def _open_part(part: Path, append: bool):
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    try:
        # a small buffer: the blocks a fast server sends (up to CHUNK) go to the file without being copied into it
        # first; a slow server's few-kB reads still pool. A/B on the AMX Xeon (46.8 MB, 15 pulls each, twice): the
        # same on 2 cores (the copy hides behind the hash), 76.5-76.7 -> 71.1-72.7 ms on one core
        return fs.open_fd_writer(fs.open_nofollow(part, flags), buffer_size=OVERLAP_MIN)
    except fs.FsError:
        raise
    except OSError as err:
        raise _WriteFailed(err) from None


class _Oversized(Exception):
    """The server sent more bytes than the file has: not the file, however long we wait."""


def _into_cache(part: Path, dest: Path) -> None:
    """A whole, checked download renamed into the cache, its bytes synced first: the ``.verified`` marker written
    next is synced, and must never vouch for bytes a power cut lost."""
    fs.fsync_file(part)
    os.replace(part, dest)
    resume_path(part).unlink(missing_ok=True)


def resume_path(part: Path) -> Path:
    """``<file>.resume`` beside ``<file>.part``: what the response that started the partial file said of it."""
    return part.with_name(part.name.removesuffix(".part") + RESUME_SUFFIX)


def discard_part(part: Path) -> None:
    """Delete a partial download and its resume record (a record left alone could vouch for another download)."""
    part.unlink(missing_ok=True)
    resume_path(part).unlink(missing_ok=True)


def _validator(resp) -> str | None:
    """The response's strong ETag (a weak one, ``W/"..."``, may not be sent in If-Range) or else its
    Last-Modified: what names the version of the file it sends."""
    etag = resp.headers.get("ETag")
    return etag if etag and not etag.startswith("W/") else resp.headers.get("Last-Modified")


def _record_resume(part: Path, url: str, resp, total: int | None) -> None:
    """Keep beside a fresh ``part`` what a resume must match: the URL, the response's validator
    (:func:`_validator`) and the file's size."""
    validator = _validator(resp)
    record = resume_path(part)
    record.unlink(missing_ok=True)  # a planted link is removed, never written through
    with contextlib.suppress(OSError):  # without a record the next attempt restarts (or relies on the hash)
        fs.write_text(record, json.dumps({"url": url, "validator": validator, "total": total}) + "\n")


def read_resume(part: Path) -> dict:
    """The resume record beside ``part`` (:func:`_record_resume`'s URL, validator and size), ``{}`` when there is
    none or it is not one."""
    try:
        fd = fs.open_nofollow(resume_path(part), os.O_RDONLY)
        with os.fdopen(fd, "rb") as fh:
            record = json.loads(fh.read(1 << 16))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) and isinstance(record.get("url"), str) else {}


def _kept_resume(part: Path, url: str) -> dict:
    """The resume record of ``part`` when it was written for ``url`` (another source's validator means
    nothing here), else ``{}``."""
    record = read_resume(part)
    return record if record.get("url") == url else {}


def _stream(resp, part: Path, append: bool, bar, digest: _Digest, limit: int | None = None) -> int:
    """Copy the response body into ``part``; returns the bytes received. Write errors are _WriteFailed; more
    than ``limit`` bytes (the file's size less what ``part`` held) is _Oversized, at the first block past it:
    a wrong server streaming without end would fill the disk before the hash could refuse it."""
    received = 0
    fh = _open_part(part, append)
    try:
        while True:
            block = resp.read1(CHUNK)  # what has arrived (read() would hold a stalled server's bytes hostage)
            if not block:
                break
            if limit is not None and received + len(block) > limit:
                raise _Oversized
            try:
                fh.write(block)
            except OSError as err:
                raise _WriteFailed(err) from None
            digest.update(block)
            received += len(block)
            bar.update(len(block))
    finally:
        try:
            fh.close()
        except OSError as err:  # the buffered tail could not be written
            raise _WriteFailed(err) from None
    return received


class _Stalled(Exception):
    pass


def _resume_offset(url: str, part: Path, size: int | None, hashed: bool) -> tuple[int, dict]:
    """Where to resume ``part`` from (0: start again) and its resume record. Kept bytes resume only where a
    join of two versions would be caught: by If-Range (a validator the first response gave) or, without one,
    by the sha256 checked once the file is whole (``hashed``); a URL with neither starts again."""
    offset = part.stat().st_size if part.exists() else 0
    if size is not None and offset > size:  # not a prefix of this file: start again
        discard_part(part)
        return 0, {}
    kept = _kept_resume(part, url) if offset else {}
    if offset and not hashed and not kept.get("validator"):
        discard_part(part)
        return 0, {}
    return offset, kept


def _check_content_range(resp, part: Path, offset: int, known: int | None,
                         validator: str | None = None) -> tuple[int, int | None]:
    """A 206 must continue at ``offset`` the file whose size was first announced (``known``: the kept record's
    or the manifest's) and, where it names its version, the one the kept bytes came from (``validator``): a
    server (or cache) that ignored If-Range, or none was sent, may answer with another version of the same size.
    Returns the range's end (the byte after its last) and the file's size (None: ``*``, unknown): a server may
    send less than the rest of the file (RFC 9110, 14.2), and the rest is then asked for next."""
    # the same kind of validator as the kept one: an ETag is quoted, a Last-Modified date is not
    sent = resp.headers.get("ETag" if validator and validator.startswith('"') else "Last-Modified")
    if validator and sent and sent != validator:
        discard_part(part)
        raise ConnectionError(f"the server sent the rest of version {sent}, not of the kept bytes' {validator}: the "
                              "file changed; restarting from byte 0")
    content_range = resp.headers.get("Content-Range", "")
    m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", content_range.strip())
    if m is None or int(m[1]) != offset or int(m[2]) < offset or (m[3] != "*" and int(m[2]) >= int(m[3])):
        discard_part(part)
        raise ConnectionError(f"unexpected Content-Range {content_range!r} for a resume at {offset}; restarting")
    if m[3] != "*" and known is not None and int(m[3]) != known:
        discard_part(part)
        raise ConnectionError(f"the file is {m[3]} bytes now (Content-Range {content_range!r}), not the {known} of "
                              f"the kept {offset} bytes' download: it changed; restarting from byte 0")
    return int(m[2]) + 1, None if m[3] == "*" else int(m[3])


class _ResumeRefused(ConnectionError):
    """The server answered a resume with 416 (Range Not Satisfiable): the kept bytes were dropped, to start again."""


class _CutShort(ConnectionError):
    """The connection closed before the body's end: ``got`` bytes of the file's ``total`` are in the partial file.
    ``range_ignored``: the server answered a request for the rest with the whole file (it cannot resume)."""

    def __init__(self, got: int, total: int, range_ignored: bool) -> None:
        super().__init__(f"the connection closed after {got} of the file's {total} bytes")
        self.got, self.total, self.range_ignored = got, total, range_ignored


def _refuse_encoding(resp, url: str) -> None:
    """A body sent compressed (``Content-Encoding: gzip``) though zoo asked for the file as it is (``Accept-Encoding:
    identity``) holds other bytes than the file's: failed by its sha256 as "a mismatch", its cause went unsaid."""
    coding = (resp.headers.get("Content-Encoding") or "identity").strip().lower()
    if coding != "identity":
        raise DownloadError(f"{url}: the server sent the file {coding}-encoded (Content-Encoding: {coding}), though "
                            "zoo asked for its bytes as they are (Accept-Encoding: identity): not the file's bytes. "
                            "Configure the server to send weights files unencoded, or use another source")


def _open(url: str, part: Path, offset: int, validator: str | None):
    """The response to one GET of ``url`` (from ``offset`` when resuming), HTTP errors turned into what the retry
    loop acts on."""
    headers = {"User-Agent": "zoo-hub/1", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:  # the same version, or a 200 with the whole current file
            headers["If-Range"] = validator
    req = urllib.request.Request(url, headers=headers)
    try:
        return urllib.request.urlopen(req, timeout=_socket_timeout())
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # our partial file is not a prefix the server knows: restart
            discard_part(part)
            raise _ResumeRefused(f"HTTP 416 for a resume at byte {offset}; restarting") from None
        if err.code == 407:
            raise _Refused(f"HTTP 407 {err.reason}: the proxy refused access; give it its credentials in the proxy "
                           "variable (https_proxy=http://user:password@host:port)") from None
        if err.code in _REFUSED:
            raise _Refused(f"HTTP {err.code} {err.reason} (access refused)") from None
        if err.code in (404, 410):
            raise _NotFound(f"HTTP {err.code} {err.reason}") from None
        if 300 <= err.code < 400:  # the redirects urllib gave up on (a loop, too many, no place named): no
            # answer of the server's about the file, and urllib's reason runs over three lines
            reason = (str(err.reason).splitlines() or [""])[0].rstrip(".")
            raise DownloadError(f"{url}: HTTP {err.code}: the server's redirects never reach a file ({reason}): a "
                                "misconfigured server or URL; check where the URL leads (curl -IL), or use another "
                                "source") from None
        raise
    except (TimeoutError, urllib.error.URLError) as err:
        if isinstance(err, TimeoutError) or isinstance(getattr(err, "reason", None), TimeoutError):
            raise _Stalled(f"no answer within {timeout_s():g} s") from None
        raise


def _content_length(resp) -> int | None:
    """The body's length as the response states it, None where it states none that can be read. A list of one
    value (``300000, 300000``: a proxy that folded two equal headers) is that value, as RFC 9110 lets a recipient
    read it; a body without one, or one that gives different or non-numeric values, is read to its end, as
    http.client reads it (``int()`` of the header failed the pull with a raw ValueError, no source after it tried).
    A chunked body has no length whatever the header says (RFC 9112, 6.3): http.client reads the chunks, and a stale
    Content-Length beside them refused the right file as "not this file"."""
    raw = resp.headers.get("Content-Length")
    if raw is None or "chunked" in (resp.headers.get("Transfer-Encoding") or "").lower():
        return None
    values = {v.strip() for v in raw.split(",")}
    if len(values) != 1 or not (value := values.pop()).isascii() or not value.isdigit():
        return None
    return int(value)


def _http_attempt(url: str, part: Path, label: str, progress: bool, digest: _Digest, size: int | None = None,
                  hashed: bool = True) -> bool:
    """One request; appends to ``part`` from where it stopped when the server honours Range for the same version
    of the file (see :func:`_resume_offset`). ``size``: the file's size in bytes where the manifest gives it; a
    server that sends more is given up (DownloadError). ``hashed``: the whole file's sha256 will be checked.
    Returns False when the server sent a part of the file whole (a 206 of less than the rest): ask for the rest."""
    offset, kept = _resume_offset(url, part, size, hashed)
    if offset and hashed and offset == (kept.get("total") or size):
        # every byte is kept already (a pull killed while it hashed the last block or synced the file, before the
        # rename): the sha256 checked next decides, and a kept file that fails it is downloaded again, whole. Asked
        # for the bytes past its end, the server answered 416 and the whole file came again, as wget -c and
        # curl -C - never do
        return True
    resp = _open(url, part, offset, kept.get("validator"))
    asked = offset
    with resp:
        _refuse_encoding(resp, url)
        if resp.status == 206:
            end, whole = _check_content_range(resp, part, offset, kept.get("total") or size, kept.get("validator"))
            append = True
            digest.sync(part)
        else:  # 200: the server sent the whole file (no Range support, no partial file, or If-Range said changed)
            offset, append, end = 0, False, None
            digest.reset()
        length = _content_length(resp)
        total = offset + length if length is not None else None
        if end is None:
            whole = total
        if size is not None and total is not None and total > size:
            discard_part(part)
            raise DownloadError(f"{url}: the server announced {total} bytes for a file of {size}: not this file "
                                "(a wrong mirror, or a server's page); nothing was downloaded")
        if not append:
            # the kept bytes are of no use once the whole file comes, and the record written next must never stand
            # beside them: rewritten for this response before a refusal for space (or a kill) left them there, it
            # vouched for them with the new version's validator, and the next pull joined the old version's head to
            # the new one's tail, which entered the cache of a URL that has no hash to catch it
            discard_part(part)
        if length is not None:  # before the record: a refused download leaves no record of bytes never written
            fs.check_free(part.parent, length, f"downloading {label}")
        if offset == 0:  # a fresh start, a 206 to a first request too: a resume must find the record
            _record_resume(part, url, resp, whole)
        with _bar(total, offset, label, progress) as bar:
            try:
                received = _stream(resp, part, append, bar, digest, None if size is None else size - offset)
            except _Oversized:
                discard_part(part)
                raise DownloadError(f"{url}: the server sent more than the file's {size} bytes: not this file (a "
                                    "wrong mirror, or a server's page); the download was stopped there and nothing "
                                    "was kept") from None
            except TimeoutError:
                got = part.stat().st_size if part.exists() else 0
                raise _Stalled(f"no data for {timeout_s():g} s after {fs.human_size(got)}"
                               + (f" of {fs.human_size(total)}" if total else "")) from None
        ignored = asked > 0 and not append
        if length is not None and received < length:
            raise _CutShort(offset + received, whole or total or offset + length, ignored)
        if length is None and (end is not None or size is not None) and offset + received < (end or size):
            # no Content-Length: only the range's end or the file's size tells a dropped connection from the end of
            # the body; retried, resumed from the bytes kept
            raise _CutShort(offset + received, whole or end or size, ignored)
    if end is None:
        return True
    limit = whole or size
    return limit is None or end >= limit


def _unknown_host(err: BaseException) -> bool:
    """The resolver said the host does not exist (EAI_NONAME), as opposed to a temporary failure (EAI_AGAIN)."""
    reason = getattr(err, "reason", None)
    return isinstance(err, urllib.error.URLError) and isinstance(reason, socket.gaierror) \
        and reason.errno == socket.EAI_NONAME


def _http_download(url: str, part: Path, label: str, progress: bool, digest: _Digest, size: int | None = None,
                   hashed: bool = True) -> None:
    """Attempts until the file is whole; :data:`RETRIES` failed in a row without ``part`` growing past the most
    it has held give up. An attempt that brought bytes starts the count again, as wget and pip do: a link that drops every few
    hundred kilobytes still finishes a 20 MB file, resuming each time (a plain limit of 4 attempts would give it up).
    A stall (no byte for ``$ZOO_TIMEOUT`` seconds) is no dropped link: it fails the pull at once, whatever bytes
    came before it, keeping them for the next pull (resumed, a server that sent a few bytes before each silence
    was asked again without end). ``hashed``: see :func:`_http_attempt`."""
    last: BaseException | None = None
    attempts = barren = 0
    refused_resume = False  # a resume was answered with 416 (a server whose file is shorter than the kept bytes)
    most = part.stat().st_size if part.exists() else 0  # the most bytes ``part`` has held
    while True:
        attempts += 1
        try:
            if _http_attempt(url, part, label, progress, digest, size, hashed):
                return
            now = part.stat().st_size if part.exists() else 0
            if now > most:  # a range whole, short of the file's end: the next one is asked for at once
                barren, most = 0, now
                continue
            last = ConnectionError(f"the server sends the file in parts, and the {now} bytes kept cannot be resumed "
                                   "(it names no version of the file, ETag or Last-Modified, to join them safely)")
        except (_NotFound, _Refused, _WriteFailed, fs.FsError, DownloadError):
            raise
        except _Stalled as err:
            got = part.stat().st_size if part.exists() else 0
            amount = f"{got} bytes" + (f" ({fs.human_size(got)})" if got >= 1024 else "")
            kept = (f"; the {amount} received are kept in {part} and the next pull resumes from there" if got
                    else "; no byte was received")
            raise DownloadError(f"{url}: the server stalled ({err}; ZOO_TIMEOUT={timeout_s():g}){kept}. Set "
                                "ZOO_TIMEOUT=<seconds> for a slower server, or retry later") from None
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, OSError) as err:
            if isinstance(err, urllib.error.HTTPError) and err.code < 500 and err.code not in (408, 429):
                raise _NotFound(f"HTTP {err.code} {err.reason}") from None
            if _unknown_host(err):  # the resolver's final answer (offline, or a mistyped host): asking again waits for nothing
                raise DownloadError(f"{url}: cannot resolve host {urlparse(url).hostname!r} ({err.reason})") from None
            last = err
            refused_resume = refused_resume or isinstance(err, _ResumeRefused)
        # progress is more bytes than ever, not than before this attempt: a server whose file is shorter than
        # this one answers the resume with 416, the partial file restarts from 0, and its next whole body would
        # count as progress forever
        now = part.stat().st_size if part.exists() else 0
        barren = 0 if now > most else barren + 1
        most = max(most, now)
        if barren >= RETRIES:
            if isinstance(last, _CutShort):
                raise DownloadError(_cut_short(url, part, last, attempts, hashed, refused_resume))
            raise DownloadError(f"{url}: failed after {attempts} attempts, the last {RETRIES} without progress "
                                f"({type(last).__name__}: {last})")
        time.sleep(BACKOFF_S * 2**max(barren - 1, 0))


def _cut_short(url: str, part: Path, cut: _CutShort, attempts: int, hashed: bool, refused_resume: bool) -> str:
    """The error of a download the server kept cutting short: how far it got, and what the next pull does with the
    bytes kept."""
    kept = part.stat().st_size if part.exists() else 0
    amount = f"{kept} bytes" + (f" ({fs.human_size(kept)})" if kept >= 1024 else "")
    if not kept:
        then = "nothing was kept"
    elif cut.range_ignored or refused_resume:
        how = "416, Range Not Satisfiable" if refused_resume else "the whole file"
        then = (f"the {amount} received are kept in {part}, but this server does not resume (it answered a request "
                f"for the rest with {how}): the next pull starts from byte 0 again")
    elif hashed or _kept_resume(part, url).get("validator"):
        then = f"the {amount} received are kept in {part} and the next pull resumes from there"
    else:
        then = ("the server names no version of the file (no ETag or Last-Modified) to check a resume against, so "
                "the next pull starts from byte 0 again")
    return (f"{url}: the download was cut short, failed after {attempts} attempts, the last {RETRIES} without a byte "
            f"more: {cut}; {then}. Retry later, or "
            "use another source")


def download_lock(dest: Path, *, wait: float | None = None, warn_unlocked: bool = True) -> fs.FileLock:
    """The lock a pull of ``dest`` holds, on ``<dest>.lock`` (removed when released): a second pull of the
    file waits for the first (``wait`` seconds, :data:`LOCK_TIMEOUT_S` by default), and whatever would delete
    the file or its ``.part`` takes it first."""
    return fs.FileLock(dest.with_name(dest.name + ".lock"), "download", subject=dest,
                       wait=LOCK_TIMEOUT_S if wait is None else wait, warn_unlocked=warn_unlocked)


def reclaim_stale_parts(root: Path, keep: Path) -> int:
    """Delete the partial downloads under the weights cache ``root`` that no live download holds (their lock is
    free); return the bytes freed. A stale partial download of one file must never block the pull of another.
    Only zoo's own (:func:`zoo.hub.cache.partial_downloads`): ``root`` may be any folder (``--cache-dir``), and
    a ``.part`` file there with no evidence of a pull is the user's."""
    from zoo.hub.cache import partial_downloads  # the cache module reads this one's records

    freed = 0
    for part in partial_downloads(root):
        if part == keep:
            continue
        try:
            with download_lock(part.with_suffix(""), wait=0, warn_unlocked=False) as lock:
                if lock.locked:  # without locks a live download's .part looks like a stale one
                    size = part.stat().st_size
                    discard_part(part)
                    freed += size
        except OSError:  # held by a live download, or a lock file zoo cannot use (a link, a read-only folder)
            continue
    return freed


def _ensure_space(dest: Path, part: Path, size: int | None, reclaim_root: Path | None) -> None:
    if size is None:
        return
    have = part.stat().st_size if part.is_file() else 0
    try:
        fs.check_free(dest.parent, max(0, size - have), f"downloading {dest.name}")
    except fs.NoSpaceError:
        if reclaim_root is None or not reclaim_stale_parts(reclaim_root, keep=part):
            raise
        fs.check_free(dest.parent, max(0, size - have), f"downloading {dest.name}")


def fetch(
    sources: list[str],
    dest: Path,
    *,
    check: Callable[[str], bool] | None,
    expected: str,
    force: bool = False,
    progress: bool = True,
    offline_hint: str = "",
    size: int | None = None,
    local_only: bool = False,
    reclaim_root: Path | None = None,
    on_arrival: Callable[[Path, str], None] | None = None,
    validate: Callable[[Path], None] | None = None,
    mirror_var: str | None = "ZOO_WEIGHTS_URL",
) -> Path:
    """Bring ``dest`` into place from the first source that has it.

    ``check(sha256_hex) -> bool`` accepts the downloaded bytes (``None``: nothing to check against, the hash is
    only recorded). A source whose bytes ``check`` rejects is discarded with a warning naming it and the next
    source is tried (a stale copy or a git-lfs pointer in a local folder must not hide a good mirror); when
    every source fails and one of them served wrong bytes, :class:`HashMismatchError` lists each source and
    why. With ``ZOO_OFFLINE=1`` or ``local_only`` network sources are never contacted. ``size`` (when known) is
    checked against the free space first, and a body without a Content-Length that ends short of it is resumed;
    ``reclaim_root`` is where stale ``.part`` files of other downloads may be reclaimed. ``on_arrival(dest,
    sha256)`` runs under the lock once the file is in place. ``validate(part)`` raises ``ValueError`` for a
    downloaded file that is not whole (with neither a sha256 nor a size to check against, a connection dropped
    by a server that sent no Content-Length looks like a complete download): such bytes never enter the cache,
    and the next source is tried. ``mirror_var``: the environment variable that names a mirror of these files
    (the weights' or the data sets', ``ZOO_DATA_URL``), for the errors.
    """
    dest = Path(dest)
    fs.ensure_dir(dest.parent)
    fs.refuse_symlink(dest, "cached file")
    part = dest.with_name(dest.name + ".part")
    fs.refuse_symlink(part, "partial download")
    with download_lock(dest):
        fs.refuse_symlink(dest, "cached file")
        if dest.exists() and not force:
            return dest  # a concurrent puller finished it while we waited; verified then, by its own check
        # with force, the old file stays until the new one is verified and replaces it atomically
        no_network = local_only or offline()
        usable = [s for s in sources if not (no_network and is_network(s))]
        if not usable:
            raise OfflineError(offline_hint or f"ZOO_OFFLINE=1: not downloading {dest.name}")
        failures, not_found = [], []  # why each source failed; the sources that said they lack the file
        refused: list[str] = []  # the sources that refused access
        wrong: list[str] = []  # the sources that served other bytes than the file's
        for i, source in enumerate(usable):
            try:
                digest = _from_source(source, dest, part, check, expected, progress, size, reclaim_root, validate)
            except (_NotFound, _Refused) as err:
                failures.append(f"{source}: {err}")
                if isinstance(err, _NotFound):
                    not_found.append(source)
                else:  # it may well have the file, for a user it lets in: say why the next source is tried
                    refused.append(source)
                    _warn_next(f"{source}: {err}", usable[i + 1:])
                continue
            except (DownloadError, _Unreadable) as err:
                failures.append(str(err))
                if isinstance(err, _Unreadable):  # a copy this user may not read must not hide the sources after it
                    _warn_next(err, usable[i + 1:])
                continue
            except HashMismatchError as err:
                wrong.append(source)
                failures.append(str(err))
                _warn_next(err, usable[i + 1:])
                continue
            except _WriteFailed as err:
                discard_part(part)
                raise fs.write_error(err.err, part, size) from None
            if on_arrival is not None:
                on_arrival(dest, digest)
            return dest
        raise _no_source_error(dest.name, expected, failures, bool(wrong), [s for s in wrong if not is_network(s)],
                               untried=len(sources) - len(usable), offline_hint=offline_hint,
                               mirror_var=mirror_var, not_found=not_found, refused=refused)


def _from_source(source: str, dest: Path, part: Path, check: Callable[[str], bool] | None, expected: str,
                 progress: bool, size: int | None, reclaim_root: Path | None,
                 validate: Callable[[Path], None] | None) -> str:
    """``dest`` brought into place from one source (see :func:`fetch`); its sha256."""
    if not is_network(source):
        return _copy_local(source, dest, check, expected, size)
    _ensure_space(dest, part, size, reclaim_root)
    digest = _fetch_http(source, part, check, expected, progress, size)
    _validate(validate, part, source)
    _into_cache(part, dest)
    return digest


def _warn_next(err: Exception | str, rest: Sequence[str]) -> None:
    """Say why a source was passed over, when another is tried next."""
    if rest:
        warnings.warn(f"{err}; trying the next source ({rest[0]})", stacklevel=user_stacklevel())


def _validate(validate: Callable[[Path], None] | None, part: Path, source: str) -> None:
    if validate is None:
        return
    try:
        validate(part)
    except ValueError as err:
        discard_part(part)  # a resumed download would only append to the broken bytes
        raise DownloadError(f"{source}: the downloaded bytes are not a whole weights file ({err}): a truncated "
                            "download, or not a weights file at all (a server's web page); they were discarded") from None


_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def _is_lfs_pointer(source: str) -> bool:
    """``source`` is a git-lfs pointer: what a clone made without git-lfs holds in place of a large file."""
    try:
        with open(local_path(source), "rb") as fh:
            return fh.read(len(_LFS_POINTER)) == _LFS_POINTER
    except (OSError, ValueError):
        return False


def _in_mirror(source: str, mirror: str) -> bool:
    """``source`` is a file of the mirror ``mirror`` (a URL, a ``file://`` URL or a folder, as the environment
    variable gives it), compared without a signed mirror's ``?query``, which follows the file's path."""
    if not mirror:
        return False
    roots = tuple(root.rstrip("/") + "/" for root in (without_query(mirror), str(Path(mirror).expanduser())))
    return source.startswith(roots) or without_query(source).startswith(roots)


def _wrong_local_hint(wrong_local: Sequence[str], mirror_var: str | None) -> str:
    """What to do about the local sources that held other bytes, by where each is: a git-lfs pointer (a clone
    without git-lfs), a file of the mirror the environment names, or another local copy (torch.hub's, a weights
    folder's). A git-lfs hint for a mirror or torch.hub's file sent users of the installed package to a checkout
    they do not have, and "set ZOO_WEIGHTS_URL to a mirror" to the variable that named the wrong one."""
    mirror = os.environ.get(mirror_var, "").strip() if mirror_var else ""
    pointers = [s for s in wrong_local if _is_lfs_pointer(s)]
    in_mirror = [s for s in wrong_local if s not in pointers and _in_mirror(s, mirror)]
    others = [s for s in wrong_local if s not in pointers and s not in in_mirror]
    hints = []
    if pointers:
        hints.append(f"{', '.join(pointers)}: a git-lfs pointer, not the file; run `git lfs pull` in the clone "
                     "that holds it")
    if in_mirror:
        writes = " (zoo weights release writes a mirror's files)" if mirror_var == "ZOO_WEIGHTS_URL" else ""
        hints.append(f"the mirror {mirror_var}={mirror} holds another file under this name (a stale or damaged "
                     f"copy): replace it there{writes}")
    if others:
        hints.append(f"the local copy {', '.join(others)} is another file (stale or damaged): replace or delete it"
                     + (f", or set {mirror_var} to a mirror that holds the right one" if mirror_var and not mirror
                        else ""))
    return "".join(f". {h[0].upper()}{h[1:]}" for h in hints)


def _no_source_error(name: str, expected: str, failures: list[str], mismatched: bool, wrong_local: Sequence[str],
                     untried: int, offline_hint: str, mirror_var: str | None = "ZOO_WEIGHTS_URL",
                     not_found: list[str] = (), refused: Sequence[str] = ()) -> Exception:
    """What to raise when no source delivered ``name``: wrong bytes first (the most actionable), then
    offline, then the download failures. ``wrong_local``: the local sources whose bytes were wrong (each gets
    its own hint); ``not_found``: the sources that said they lack the file; the mirror's hint (add the file
    there) is given only when the mirror is one of them, not when its transfer failed; ``refused``: the sources that
    refused access (401/403/407), which may have it for a user they let in."""
    if mismatched:
        skipped = f" ({untried} network source(s) not tried: offline)" if untried else ""
        return HashMismatchError(
            f"no source of {name} has the expected bytes (sha256 {expected}){skipped}: "
            + "; ".join(f"[{n}] {f}" for n, f in enumerate(failures, 1))
            + _wrong_local_hint(wrong_local, mirror_var))
    if untried:  # offline, and the local sources (a file:// mirror too) did not have it
        tried = f" (tried: {'; '.join(failures)})" if failures else ""
        return OfflineError((offline_hint or f"ZOO_OFFLINE=1: not downloading {name}") + tried)
    access = _refused_hint(refused, mirror_var)
    if mirror_var is None:  # a URL of the user's own: no mirror serves it
        return DownloadError(f"could not get {name}: " + "; ".join(failures) + access)
    mirror = os.environ.get(mirror_var, "").strip()
    writes = " (zoo weights release writes a mirror's files)" if mirror_var == "ZOO_WEIGHTS_URL" else ""
    if not mirror:
        hint = f". Without a network, set {mirror_var} to a mirror (http(s)://, file:// or a folder)"
    elif any(_in_mirror(s, mirror) for s in not_found):
        hint = f". The mirror {mirror_var}={mirror} does not have it: add the file there{writes}"
    else:  # the mirror has it (or did not say otherwise): what went wrong is its failure above
        hint = ""
    return DownloadError(f"could not get {name}: " + "; ".join(failures) + access + hint)


def _refused_hint(refused: Sequence[str], mirror_var: str | None) -> str:
    """What to do about sources that refused access: zoo sends no token or credentials, so the way in is a source
    that needs none, or a download made with them."""
    if not refused:
        return ""
    mirror = os.environ.get(mirror_var, "").strip() if mirror_var else ""
    who = (f"The mirror {mirror_var}={mirror}" if mirror and any(_in_mirror(s, mirror) for s in refused)
           else "The server")
    other = f", or set {mirror_var} to another mirror that holds it" if mirror_var else ""
    return (f". {who} refused access: it wants credentials (a token, a login, or a signed URL whose signature is "
            f"still valid), and zoo sends none; use a URL that carries its access (a fresh signed link){other}, or "
            "download the file with your credentials and pass its local path")


def _fetch_http(source: str, part: Path, check, expected: str, progress: bool, size: int | None = None) -> str:
    """Download into ``part`` (resuming a kept one) and return its sha256 once ``check`` accepts it."""
    label = part.name[: -len(".part")]
    for fresh in (False, True):
        if fresh:
            discard_part(part)
        resumed = part.exists() and part.stat().st_size > 0
        with _Digest() as running:
            _http_download(source, part, label, progress, running, size, hashed=check is not None)
            running.sync(part)  # a no-op unless the file changed behind the running hash
            digest = running.hexdigest()
        if check is None or check(digest):
            return digest
        if resumed and not fresh:
            continue  # the kept partial file may be stale: one clean download before failing
        break
    discard_part(part)
    raise HashMismatchError(
        f"sha256 mismatch for {source}: expected {expected}, got {digest}; "
        f"the file was discarded and nothing entered the cache ({part.parent})"
    )
