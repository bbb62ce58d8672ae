"""Every file zoo writes goes through here: one atomic writer, and one file lock.

Why one module: a write can meet a full disk, a symlink another local user planted, a process killed
half-way, or a second run in the same folder. Each of those is handled once, here:

- **atomic**: bytes go to a temp file beside the target, are fsynced, then ``os.replace``d onto it;
  a reader sees the old file or the new one, never a torn one. On any failure the temp file is removed.
- **no planted links**: temp files are created ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a name that exists,
  link or not, is never opened); writers that need a path (matplotlib, spectral) get one inside a
  private ``0700`` temp folder nobody else can plant into. A final name that is a symlink is refused
  by :func:`refuse_symlink` where a caller would read through it (the weights cache).
- **the user's umask**: files are created with mode ``0666`` filtered by the umask, as ``open()`` does
  (``mkstemp``'s ``0600`` made published weights unreadable to the rest of a team); a file written again
  keeps its mode, as ``open()`` keeps it (a ``chmod 600`` file stays private).
- **links**: a target that is a link of the user's own is written through, where it points, as ``open()``
  writes (``os.replace`` on the link would swap it for a copy and leave the linked file old); a link of
  another user is refused (planted, as the kernel's ``protected_symlinks`` judges one).
- **free space**: :func:`check_free` fails before the first byte with the folder, the size needed and
  the size free; ``ENOSPC`` met anyway becomes :class:`NoSpaceError` with the same facts.
- **orphans**: temp names start with :data:`TEMP_PREFIX` and carry the writer's host (its name and PID
  namespace) and pid; :func:`sweep_temps` removes those whose writer is gone (a run killed with ``kill -9``
  leaves them; the next pull, training, save or export in that folder clears them). A temp file of another host
  (a shared folder), or of another PID namespace of this one (a container sharing the host's name), is only
  removed once it is a day old, since its writer may be alive there and its pid means nothing here.
- **write-protected files**: a file the user made read-only is refused, as ``open()`` refuses it
  (``os.replace`` asks only the folder's permission, so an atomic write replaced it);
  :func:`check_writable` tries a folder before a long job that writes there at its end.
- **locks**: :class:`FileLock` is zoo's one file lock (a run's folder, a download, the ``amp.json`` timing
  record): an ``flock`` (released by the kernel when the process dies, so a crash never leaves a stale lock)
  on a lock file that records who holds it and is removed on release. :class:`FolderLock` is one for a
  folder; :func:`own_folders` takes a run's folders, each one once however it is spelled.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from typing_extensions import Self

from zoo._stacklevel import user_stacklevel

__all__ = [
    "TEMP_PREFIX",
    "FileLock",
    "FolderLock",
    "FolderLockedError",
    "ForeignLockError",
    "FsError",
    "NoSpaceError",
    "PrivateTemp",
    "UnsafePathError",
    "atomic_path",
    "atomic_paths",
    "atomic_write",
    "check_free",
    "check_writable",
    "ensure_dir",
    "fsync_file",
    "human_size",
    "open_fd_writer",
    "open_nofollow",
    "own_folders",
    "refuse_symlink",
    "refuse_write_protected",
    "sweep_temps",
    "temp_state",
    "write_bytes",
    "write_error",
    "write_target",
    "write_text",
]

TEMP_PREFIX = ".zoo-tmp-"
LOCK_NAME = ".zoo-lock"
_TEMP_RE = re.compile(r"^" + re.escape(TEMP_PREFIX) + r"([0-9a-f]{8})-(\d+)-[0-9a-f]{8}-")


def _host_key() -> str:
    """The writer's host as temp names carry it: its name and, where the system has them, its PID namespace
    (the inode of ``/proc/self/ns/pid``). Two containers (or ``unshare -p``) can share a host name while their
    pids name other processes: a temp file of another namespace judged by this one's pids was deleted under a
    live writer. Where there is no namespace to read (macOS, Windows) the key is the host name's alone, as it
    always was; on Linux a name written before namespaces were part of it reads as another host's, kept a day."""
    try:
        namespace = f"\0pid:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        namespace = ""
    return hashlib.sha256((socket.gethostname() + namespace).encode()).hexdigest()[:8]


_HOST = _host_key()
# the key temp names carried before the PID namespace was part of it: a name this host's zoo wrote then, judged by
# its pid as this host's, as it was (kept a day as another host's, `zoo cache info` listed it as a killed writer's
# while `clean` left it)
_OLD_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
FOREIGN_TEMP_AGE_S = 86400.0  # another host's temp file may still be written; after a day it is not
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_SPACE_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG}


class FsError(OSError):
    """A file or folder zoo reads or writes is unusable; the message names it and says what to do."""

    def __str__(self) -> str:  # OSError prints "[Errno N] ..." before the message; ours is already whole
        return str(self.args[-1]) if self.args else ""


class UnsafePathError(FsError):
    """A path zoo would write or read through is a symbolic link it did not create."""


class NoSpaceError(FsError):
    """Not enough free space for a write: names the folder, the size needed and the size free."""


class FolderLockedError(FsError):
    """Another live process holds the lock (a training run's folder, a download); names it."""


class ForeignLockError(FsError):
    """A lock file another user left that this one may not open: names it, its owner and who may remove it."""


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def refuse_symlink(path: str | os.PathLike, what: str = "file") -> None:
    """Raise :class:`UnsafePathError` (one line naming ``path``) when ``path`` is a symbolic link."""
    if os.path.islink(path):
        raise UnsafePathError(
            errno.ELOOP,
            f"refusing {what} {path}: it is a symbolic link (to {os.readlink(path)}), which zoo never creates "
            "there; someone else put it in place. Remove it and retry.",
        )


def write_target(path: str | os.PathLike) -> Path:
    """The file an atomic write of ``path`` replaces: ``path``, or where it points when it is a link of the
    user's own (see the module's "links"); a link of another user is an :class:`UnsafePathError`."""
    path = Path(path)
    if not os.path.islink(path):
        return path
    owner = os.lstat(path).st_uid
    if hasattr(os, "getuid") and owner != os.getuid():
        raise UnsafePathError(errno.ELOOP, f"refusing to write {path}: it is a symbolic link (to {os.readlink(path)}) "
                                           f"of another user (uid {owner}); remove it, or write to its target")
    return Path(os.path.realpath(path))


def _keep_mode(target: Path, fd: int | None = None, tmp: Path | None = None) -> None:
    """Give the new file the mode of the one it replaces (a new file keeps the umask's)."""
    try:
        st = os.stat(target)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    with contextlib.suppress(OSError):  # a file system without modes (FAT, some shares): the umask's it is
        if fd is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
        elif tmp is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))


def ensure_dir(path: str | os.PathLike, what: str = "folder") -> Path:
    """Create ``path`` (and parents); a file in its place is a clear error, not a raw traceback."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FsError(errno.ENOTDIR, f"{what} {path} exists and is not a folder; give a folder path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # EEXIST: a part that is no folder (mkdir's own check); ENOTDIR: one met on the way
        why = _in_the_way(path) if err.errno in (errno.EEXIST, errno.ENOTDIR) else None
        raise FsError(errno.ENOTDIR if why else err.errno,
                      f"cannot create {what} {path}: {why or err.strerror or err}") from None
    return path


def _in_the_way(path: Path) -> str | None:
    """What stops ``path`` from being a folder: the first part of it that exists and is none, named (None when
    none is found: it changed since). A dangling link (what a link to an unmounted disk is) was called "a parent
    is a file", and a file on the way "Not a directory", which sent users looking for the wrong thing."""
    for part in (*reversed(path.parents), path):
        if not os.path.lexists(part) or part.is_dir():
            continue
        if not part.is_symlink():
            return f"{part} is a file, where a folder was expected"
        target = os.readlink(part)
        if not part.exists():
            return (f"{part} is a symbolic link to {target}, which does not exist (an unmounted disk?); mount or "
                    "create it, or give another folder")
        return f"{part} is a symbolic link to the file {target}, where a folder was expected"
    return None


def refuse_write_protected(path: str | os.PathLike) -> None:
    """Raise :class:`FsError` naming ``path`` when it is a file this process may not write: ``open()`` and
    ``torch.save`` refuse it, and so does zoo (``os.replace`` asks only the folder, so a file a user had
    ``chmod a-w``'d was replaced, and kept its read-only mode)."""
    try:
        st = os.stat(path)
    except OSError:  # nothing there (or nothing readable): the write itself says what is wrong
        return
    if not stat.S_ISDIR(st.st_mode) and not os.access(path, os.W_OK):
        if _read_only_mount(path):  # chmod, which the advice below gives, fails there too
            raise FsError(errno.EROFS, f"cannot write {path}: it is on a file system mounted read-only; expected "
                                       "a place this user may write: write elsewhere")
        raise FsError(errno.EACCES, f"cannot write {path}: it is write-protected ({stat.filemode(st.st_mode)}); "
                                    "expected a file this user may overwrite. Make it writable (chmod u+w) to "
                                    "replace it, or write elsewhere")


def _read_only_mount(path: str | os.PathLike) -> bool:
    """Whether ``path`` lies on a file system mounted read-only (``statvfs``'s ST_RDONLY; False where the system
    does not say)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows)
        return False


def check_writable(folder: str | os.PathLike, what: str = "folder", names: Iterable[str] = ()) -> Path:
    """Fail now, not after a long job, when ``folder`` (made if missing) takes no new file or one of the
    ``names`` in it is write-protected (:func:`refuse_write_protected`). A file is created and removed to find
    out: permission bits, ACLs, read-only mounts and root-squashed shares all answer it, where
    ``os.access`` guesses from the bits."""
    folder = ensure_dir(folder, what)
    probe = folder / _temp_name("probe")
    try:
        os.close(open_nofollow(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        os.unlink(probe)
    except OSError as err:
        raise FsError(err.errno, f"{what} {folder} is not writable ({err.strerror or err}); expected a folder "
                                 "this user may create files in: give another folder") from None
    for name in names:
        refuse_write_protected(folder / name)
    return folder


def check_free(folder: str | os.PathLike, need: int, what: str = "the write") -> None:
    """Fail early when ``folder``'s file system has less than ``need`` bytes free."""
    folder = Path(folder)
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need > free:
        raise NoSpaceError(
            errno.ENOSPC,
            f"not enough free space in {folder}: {what} needs {human_size(need)}, {human_size(free)} free. "
            "Free some space (`zoo cache clean` empties the weights cache) or choose another folder.",
        )


def write_error(err: OSError, path: Path, need: int | None) -> OSError:
    """Turn an OS error met while writing ``path`` into zoo's one-line error naming it."""
    if isinstance(err, FsError):
        return err
    if err.errno == errno.EFBIG:  # a file-size limit (ulimit -f, a filesystem's maximum), not a full disk
        return NoSpaceError(err.errno, f"writing {path} passed the largest file this process may write (the shell's "
                                       "`ulimit -f`, or the filesystem's limit); the partial file was removed. "
                                       "Raise the limit or write elsewhere, and retry.")
    if err.errno in _SPACE_ERRNOS:
        try:
            free = human_size(shutil.disk_usage(path.parent).free)
        except OSError:
            free = "unknown"
        wanted = f"{human_size(need)} needed, " if need else ""
        return NoSpaceError(err.errno, f"no space left writing {path} in {path.parent} ({wanted}{free} free); "
                                       "the partial file was removed. Free some space and retry.")
    if err.errno == errno.ELOOP:
        return UnsafePathError(err.errno, f"refusing to write through {err.filename or path}: it is a "
                                          "symbolic link zoo did not create; remove it and retry")
    return FsError(err.errno, f"cannot write {path}: {err.strerror or err}")


# the longest file name most file systems take (ext4, XFS, btrfs, tmpfs: 255 bytes); a temp name is kept
# under it, with room for tempfile.mkdtemp's 9 characters after it
_NAME_MAX = 255 - 9


def _temp_name(target: str) -> str:
    """The writer's temp name for ``target``, beside it: host and pid (see :func:`sweep_temps`), then the
    target's name, or where that would pass the file system's limit (a legal 223-byte target does) a hash of
    it and its suffix (a writer may choose a format by the suffix)."""
    head = f"{TEMP_PREFIX}{_HOST}-{os.getpid()}-{secrets.token_hex(4)}-"
    if len(os.fsencode(head + target)) <= _NAME_MAX:
        return head + target
    suffix = Path(target).suffix if len(os.fsencode(Path(target).suffix)) <= 32 else ""
    return head + hashlib.sha256(os.fsencode(target)).hexdigest()[:16] + suffix


def open_nofollow(path: str | os.PathLike, flags: int, mode: int = 0o666, *, what: str = "file") -> int:
    """``os.open`` that never follows a symlink at ``path`` (raises :class:`UnsafePathError` instead, naming
    the ``what``)."""
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC | _BINARY, mode)
    except OSError as err:
        if err.errno == errno.ELOOP or (err.errno == errno.EEXIST and os.path.islink(path)):
            refuse_symlink(path, what)
        raise


class _FdWriter(io.RawIOBase):
    """A raw file over an fd that writes through ``os.write`` (partial writes retried), so that the OS
    boundary is one function: what a full disk, a quota, or a test simulating them acts on."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        view = memoryview(b).cast("B")
        done = 0
        while done < len(view):
            done += os.write(self.fd, view[done:])
        return done

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self.fd)
            finally:
                super().close()


def open_fd_writer(fd: int, buffer_size: int = 1 << 20) -> io.BufferedWriter:
    """A buffered binary file object over ``fd`` whose bytes reach the disk through ``os.write``. A write
    larger than ``buffer_size`` goes to ``os.write`` without being copied into the buffer first."""
    return io.BufferedWriter(_FdWriter(fd), buffer_size=buffer_size)


def fsync_file(path: str | os.PathLike) -> None:
    """Make a file written by another writer (a download's ``.part``, a library's output) durable before it is
    renamed into place: a rename made durable first could name a file whose bytes a power cut lost."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _BINARY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # makes the rename durable; not every file system allows it
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, *, size: int | None = None, text: bool = False,
                 encoding: str = "utf-8", newline: str | None = None) -> Iterator[IO[Any]]:
    """Yield a file object; on success its bytes replace ``path`` atomically (fsync + ``os.replace``).

    ``size``: bytes about to be written, checked against the free space before anything is created.
    The temp file is created ``O_EXCL | O_NOFOLLOW`` with the umask's permissions; on an exception it
    is removed and ``path`` is left as it was.
    """
    path = write_target(path)
    ensure_dir(path.parent)
    refuse_write_protected(path)
    if size is not None:
        check_free(path.parent, size, f"writing {path.name}")
    tmp = path.with_name(_temp_name(path.name))
    try:
        fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError as err:
        raise write_error(err, path, size) from None
    raw = open_fd_writer(fd)
    fh: IO[Any] = io.TextIOWrapper(raw, encoding=encoding, newline=newline) if text else raw
    try:
        try:
            yield fh
            fh.flush()
            _keep_mode(path, fd=fd)
            os.fsync(fd)
        finally:
            with contextlib.suppress(OSError):
                fh.close()
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise write_error(err, path, size) from None
        raise
    _fsync_dir(path.parent)


class PrivateTemp:
    """A private ``0700`` temp folder beside the targets, for writers that only take a path.

    Nobody else can plant a link inside it, so a writer may open ``path_for(target)`` however it
    likes; :meth:`commit` fsyncs each file and ``os.replace``s it onto its target, in the order given
    (data before the header that points at it); :meth:`abort` (or a failed commit) removes everything.
    """

    def __init__(self, folder: str | os.PathLike, label: str = "tmp", size: int | None = None) -> None:
        import tempfile

        self.folder = ensure_dir(folder)
        if size is not None:
            check_free(self.folder, size, f"writing {label}")
        try:
            self.dir = Path(tempfile.mkdtemp(prefix=_temp_name(label) + ".", dir=self.folder))
        except OSError as err:
            raise write_error(err, self.folder / label, size) from None

    def path_for(self, target: str | os.PathLike) -> Path:
        return self.dir / Path(target).name

    def commit(self, *targets: str | os.PathLike) -> None:
        try:
            _commit([(self.path_for(t), Path(t)) for t in targets])
        finally:
            self.abort()

    def abort(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _commit(staged: list[tuple[Path, Path]]) -> None:
    """``os.replace`` each ``(temp file, target)`` pair, in order, once every temp file is checked and synced: a
    check that fails replaces no target."""
    target = staged[0][1]
    try:
        for tmp, target in staged:
            if tmp.is_symlink() or not tmp.is_file():
                raise FsError(errno.ENOENT, f"the writer of {target} did not produce a file")
            if target.is_dir() and not target.is_symlink():  # found before any target is replaced
                raise FsError(errno.EISDIR, f"cannot write {target}: a folder of that name is in the way")
            refuse_write_protected(target)
            _keep_mode(target, tmp=tmp)
            fsync_file(tmp)
        for tmp, target in staged:
            os.replace(tmp, target)
    except OSError as err:
        raise write_error(err, target, None) from None
    for folder in dict.fromkeys(t.parent for _, t in staged):
        _fsync_dir(folder)


@contextlib.contextmanager
def atomic_paths(*targets: str | os.PathLike, size: int | None = None) -> Iterator[tuple[Path, ...]]:
    """Yield temp paths (one per target, same names) in a :class:`PrivateTemp` beside each target; on success each
    replaces its target, in order. Writers that take a file object should use :func:`atomic_write` instead."""
    targets = tuple(write_target(t) for t in targets)
    for target in targets:  # before the writer works, as well as at the commit
        refuse_write_protected(target)
    first = targets[0]
    # one temp folder per folder written to: a target may be a link of the user's own to another file system
    # (written where it points), and os.replace crosses none; staged beside the first target only, an ENVI pair
    # whose header was such a link got the new data file and kept the old header ("Invalid cross-device link")
    temps: dict[Path, PrivateTemp] = {}
    try:
        for target in targets:
            if target.parent not in temps:
                temps[target.parent] = PrivateTemp(target.parent, target.name, None if temps else size)
        staged = [(temps[t.parent].path_for(t), t) for t in targets]
        try:
            yield tuple(tmp for tmp, _ in staged)
        except OSError as err:
            raise write_error(err, first, size) from None
        _commit(staged)
    finally:
        for tmp in temps.values():
            tmp.abort()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, size: int | None = None) -> Iterator[Path]:
    """:func:`atomic_paths` for one target: yields a temp path with ``path``'s own name."""
    with atomic_paths(path, size=size) as (tmp,):
        yield tmp


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, after checking the free space for it."""
    with atomic_write(path, size=len(data)) as fh:
        fh.write(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (encoded with ``encoding``)."""
    return write_bytes(path, text.encode(encoding))


# --- orphans -------------------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else
    return True


def temp_state(path: str | os.PathLike) -> str | None:
    """What :func:`sweep_temps` makes of the zoo temp entry ``path``: ``"stale"`` (its writer is gone: removed),
    ``"live"`` (its writer, on this host, runs), ``"foreign"`` (another host's or PID namespace's, under
    :data:`FOREIGN_TEMP_AGE_S` old: kept, its writer may run there); None for a name that is no zoo temp name, or
    an entry that is gone."""
    m = _TEMP_RE.match(Path(path).name)
    if m is None:
        return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if m.group(1) in (_HOST, _OLD_HOST):
        return "live" if _alive(int(m.group(2))) else "stale"
    return "foreign" if time.time() - st.st_mtime < FOREIGN_TEMP_AGE_S else "stale"


def sweep_temps(folder: str | os.PathLike, *, recursive: bool = False) -> list[Path]:
    """Remove zoo temp files/folders in ``folder`` left by dead writers; return what was removed.

    A temp entry of this host (its name and PID namespace: :func:`_host_key`) is removed when its writer's pid
    is not alive; one of another host or namespace only when it is older than :data:`FOREIGN_TEMP_AGE_S`
    (:func:`temp_state`). One this process may not remove (a team's cache, read-only to this user, or a read-only
    mount) is left where it is, unlisted: sweeping is housekeeping before a read or a write, and it failed the pull
    of a file that was cached and verified with a raw ``PermissionError`` on the orphan.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed: list[Path] = []
    entries = folder.rglob(f"{TEMP_PREFIX}*") if recursive else folder.glob(f"{TEMP_PREFIX}*")
    for p in list(entries):
        if temp_state(p) != "stale":
            continue
        with contextlib.suppress(OSError):  # gone already, or not ours to remove (EACCES, EPERM, EROFS)
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
    return removed


# --- locks: one run per folder, one writer per file ------------------------------------------------------

_POLL_S = 0.05  # how often a waiting lock tries again


class FileLock:
    """An exclusive lock held through the lock file ``path`` (``with FileLock(path, "download"): ...``).

    A second process (or a second lock in this one) asking for it waits up to ``wait`` seconds (0: not at
    all, ``math.inf``: for as long as it takes), then gets :class:`FolderLockedError` naming the holder's pid,
    host, start time and command, which the holder records in the file. The lock is an ``flock`` (``msvcrt``
    on Windows): the kernel releases it when its process dies, so a crash never leaves a stale lock. A lock
    file that is a symbolic link is refused, never opened.

    The file is removed on release, so no lock leaves a file behind. That is safe because a holder removes it
    while still holding it, and an acquirer checks, once it holds a lock, that ``path`` still names the file
    it locked: one that waited on a removed file tries again on the new one, so two never hold one name.

    Where the file system keeps no locks (NFS without its lock daemon, some FUSE file systems) the lock is
    taken anyway, with ``locked`` False, and a warning unless ``warn_unlocked`` is False: a caller that
    cannot act without the lock (deleting what another process may be writing) checks ``locked``.
    ``what`` is the kind of holder ("training run", "download") and ``subject`` what the lock guards (the
    path by default), for the messages.
    """

    way_out = "Wait for it to finish or stop it."

    def __init__(self, path: str | os.PathLike, what: str = "process", *, subject: str | os.PathLike | None = None,
                 wait: float = 0.0, warn_unlocked: bool = True) -> None:
        self.path = Path(path)
        self.what = what
        self.subject = Path(subject) if subject is not None else self.path
        self.wait = wait
        self.warn_unlocked = warn_unlocked
        self.locked = False  # True while held against other processes
        self._fd: int | None = None

    def holder(self) -> dict[str, Any]:
        """What the last holder recorded (pid, host, started, command); empty if unreadable."""
        try:
            return json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}

    def acquire(self) -> Self:
        ensure_dir(self.path.parent)
        deadline = time.monotonic() + self.wait
        while True:
            fd = self._open()
            if fd is None:  # the file was removed between our two opens: a new one goes in its place
                continue
            try:
                _lock_fd(fd)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() < deadline:
                    time.sleep(_POLL_S)
                    continue
                raise FolderLockedError(errno.EBUSY, self._busy_message()) from None
            except OSError as err:
                if err.errno not in _NO_LOCKS:
                    os.close(fd)
                    if err.errno == errno.EBADF:  # NFS takes flock as a write lock, which a read-only file cannot hold
                        raise self._foreign(err) from None
                    raise FsError(err.errno, f"cannot lock {self.path}: {err.strerror or err}") from None
                if self.warn_unlocked:
                    self._warn_unlocked(err)  # work refused for want of a lock would protect nothing
                break
            if self._names(fd):
                self.locked = True
                break
            os.close(fd)  # the holder before us removed the file we waited on: lock the one now at path
        self._fd = fd
        self._record(fd)
        return self

    def _open(self) -> int | None:
        """The lock file open, created if need be; None when it vanished between the two tries below.

        A lock file another user left (their umask's 0644, in a cache shared by a group) cannot be opened for
        writing: read-only it locks all the same (flock needs no write access), so a pull goes on where that
        user's download is over, and waits for it while it runs. One this user may not read either is an error
        naming its owner, never a hint that the folder is read-only (it is not)."""
        try:
            return open_nofollow(self.path, os.O_RDWR | os.O_CREAT, what="lock file")
        except OSError as err:
            if err.errno not in (errno.EACCES, errno.EPERM) or not os.path.lexists(self.path):
                raise write_error(err, self.path, None) from None  # a read-only folder: said before any work
            first = err
        try:
            return open_nofollow(self.path, os.O_RDONLY, what="lock file")
        except FileNotFoundError:
            return None
        except OSError:
            raise self._foreign(first) from None

    def _foreign(self, err: OSError) -> ForeignLockError:
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return ForeignLockError(err.errno, f"cannot use the lock file {self.path}: {err.strerror or err}")
        owner = f"uid {st.st_uid}"
        with contextlib.suppress(ImportError, KeyError):
            import pwd

            owner = f"{pwd.getpwuid(st.st_uid).pw_name} ({owner})"
        mine = hasattr(os, "geteuid") and st.st_uid == os.geteuid()
        who = "yours" if mine else f"another user's, {owner}"
        fix = (f"make it readable (chmod u+rw {self.path}) or remove it" if mine else
               f"ask {owner.split(' ')[0]} or an administrator to remove it (rm {self.path}) once no {self.what} of "
               "theirs is running")
        return ForeignLockError(err.errno or errno.EACCES,
                                f"cannot use the lock file {self.path}: it is {who}, mode "
                                f"{stat.S_IMODE(st.st_mode):o}, and this user may not open it "
                                f"({err.strerror or err}); {fix}")

    def _names(self, fd: int) -> bool:
        """Whether ``path`` is still the file open as ``fd``."""
        try:
            return os.fstat(fd).st_ino == os.stat(self.path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            return False

    def _record(self, fd: int) -> None:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                "command": " ".join(sys.argv)[:300]}
        with contextlib.suppress(OSError):  # only the busy message of another process reads it
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, json.dumps(info).encode())

    def _warn_unlocked(self, err: OSError) -> None:
        warnings.warn(f"cannot lock {self.path}: its file system has no locks ({err.strerror or err}); the "
                      f"{self.what} goes on, but nothing stops another process from using {self.subject} at the "
                      "same time", RuntimeWarning, stacklevel=user_stacklevel())

    def _busy_message(self) -> str:
        h = self.holder()
        started = h.get("started")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "unknown time"
        waited = f" (waited {self.wait:g} s)" if self.wait > 0 else ""
        return (f"{self.subject} is in use by another {self.what}{waited}: pid {h.get('pid', '?')} on "
                f"{h.get('host', '?')}, started {when} ({h.get('command', '?')}). {self.way_out}")

    def release(self) -> None:
        """Remove the lock file, then drop the lock (a waiter that opened the removed file notices and retries)."""
        if self._fd is None:
            return
        if self._names(self._fd):  # never another holder's file, put in place after ours was removed by hand
            with contextlib.suppress(OSError):  # Windows removes no open file: below, once closed
                os.unlink(self.path)
        _unlock_fd(self._fd)
        os.close(self._fd)  # closing drops the lock
        self._fd, self.locked = None, False
        if sys.platform == "win32":  # a waiter's open handle makes this fail, so it never pulls a held file away
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class FolderLock(FileLock):
    """An exclusive lock on ``folder`` for the life of a run (``with FolderLock(dir): ...``): a
    :class:`FileLock` on the file ``name`` in it, so that separate things in one folder lock apart.

    A second process (or a second run in this one) asking for the folder gets :class:`FolderLockedError`
    (after ``wait`` seconds), naming the holder.
    """

    way_out = "Wait for it to finish, stop it, or use another folder."

    def __init__(self, folder: str | os.PathLike, what: str = "run", *, name: str = LOCK_NAME,
                 wait: float = 0.0) -> None:
        self.folder = Path(folder)
        self.name = name
        super().__init__(self.folder / name, what, subject=self.folder, wait=wait)


@contextlib.contextmanager
def own_folders(named: Iterable[tuple[str, str | os.PathLike | None]], what: str = "run") -> Iterator[list[Path]]:
    """A run's folders (``(what it is, path)`` pairs, e.g. ``("log_dir", ...)``; None skipped), created,
    locked for the ``with`` block (:class:`FolderLock`) and swept of dead writers' temp files; yields them.

    Each folder is taken once, however it is spelled: names of one folder (a relative and an absolute
    path, a symlinked alias) are told apart by what they are on disk (device and inode), not by their text.
    Two locks on one folder are two ``flock`` s of its one lock file, and the second would fail against the
    first, so the run would lock itself out ("in use by another training run: pid <its own pid>"). Locks are
    taken in the order of the folders' real paths, as any other run takes them."""
    folders: dict[tuple[int, int], Path] = {}
    for label, path in named:
        if path is None:
            continue
        folder = ensure_dir(path, label)
        st = folder.stat()
        folders.setdefault((st.st_dev, st.st_ino), folder)
    with contextlib.ExitStack() as stack:
        ordered = sorted(folders.values(), key=os.path.realpath)
        for folder in ordered:
            stack.enter_context(FolderLock(folder, what))
            sweep_temps(folder)
        yield ordered


# flock's answers where the file system keeps no locks: NFS without its lock daemon (ENOLCK), some FUSE and
# network file systems (EOPNOTSUPP, ENOSYS)
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}


def _lock_fd(fd: int) -> None:
    """Lock ``fd`` without waiting; a lock held elsewhere raises :class:`BlockingIOError`."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            raise BlockingIOError(errno.EAGAIN, "locked") from None
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _unlock_fd(fd: int) -> None:
    if sys.platform == "win32":  # flock's lock goes with the file's close; msvcrt's byte lock is dropped first
        import msvcrt

        with contextlib.suppress(OSError):
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
