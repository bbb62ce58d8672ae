"""Verified markers: a cached file's sha256, bound to the exact file it was computed on.

Hashing a weights file on every load costs a read of the whole file; trusting it because its *size* is
right lets a flipped byte through. A marker ``<file>.verified`` records the sha256 seen when the file
arrived together with the file's identity (size, mtime, ctime, inode, device). Any change to the file
— a write, a truncation, a replacement, even one that restores the mtime, since ctime cannot be set
back — invalidates the marker, and the next load hashes the file again before trusting it.

A marker only ever holds a hash that was checked against a trusted expectation (the manifest's sha256,
or the hash a URL download had on arrival). Re-recording whatever a changed file hashes to would turn
a refused file into a trusted one on the next load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from zoo import fs
from zoo.hub.fetch import sha256_file

__all__ = ["MARKER_SUFFIX", "marker_path", "mismatch", "record", "recorded", "stored_sha256", "verified_sha256",
           "zoo_marker"]

MARKER_SUFFIX = ".verified"


def marker_path(path: Path) -> Path:
    return path.with_name(path.name + MARKER_SUFFIX)


def _identity(path: Path) -> dict[str, int]:
    st = os.stat(path, follow_symlinks=False)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino, "dev": st.st_dev}


def record(path: Path, sha256: str) -> None:
    """Bind ``sha256`` to ``path`` as it is now (call right after the file was hashed and put in place)."""
    try:
        fs.write_text(marker_path(path), json.dumps({"sha256": sha256, **_identity(path)}) + "\n")
    except OSError:
        pass  # without a marker the next load hashes the file again: slower, never less safe


def _read(path: Path) -> dict:
    doc = json.loads(marker_path(path).read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("sha256"), str):
        raise TypeError("not a marker")
    return doc


def stored_sha256(path: Path) -> str | None:
    """The sha256 the marker holds, whether or not the file changed since (None: no readable marker)."""
    try:
        return _read(path)["sha256"]
    except (OSError, ValueError, TypeError):
        return None


def zoo_marker(path: Path) -> str | None:
    """The sha256 of ``path``'s marker when it is one :func:`record` wrote (that hash and the file identity it
    binds, nothing else), else None: the evidence that zoo put the file there, whether or not it changed since.
    A folder given to ``zoo cache clean`` may hold anything; only a file with zoo's marker beside it is zoo's."""
    try:
        doc = _read(path)
    except (OSError, ValueError, TypeError):
        return None
    digest = doc["sha256"]
    whole = len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
    return digest if whole and set(doc) == {"sha256", "size", "mtime_ns", "ctime_ns", "ino", "dev"} else None


def recorded(path: Path) -> str | None:
    """The sha256 recorded for ``path`` if the file is unchanged since, else None."""
    try:
        doc = _read(path)
        digest = doc.pop("sha256")
        return digest if doc == _identity(path) else None
    except (OSError, ValueError, TypeError):
        return None


def verified_sha256(path: Path, trusted: Callable[[str], bool]) -> tuple[str, bool]:
    """``(sha256, hashed_now)``: the marker's hash when it still holds, else a fresh hash.

    ``trusted(sha256) -> bool`` is the expectation the caller checks the file against; a fresh hash is
    recorded only when it passes, so a changed file is hashed (and refused) again on every load.
    """
    digest = recorded(path)
    if digest is not None:
        return digest, False
    digest = sha256_file(path)
    if trusted(digest):
        record(path, digest)
    return digest, True


def mismatch(path: Path, expected: str | None = None) -> tuple[str, str] | None:
    """``(sha256 now, sha256 expected)`` when ``path`` no longer has ``expected`` (a pinned hash; by default the
    one its marker recorded on arrival), else None; None too when there is nothing to check it against (no pin,
    no marker). Free while the file is unchanged since its marker was written (see :func:`verified_sha256`)."""
    expected = expected or stored_sha256(path)
    if expected is None:
        return None
    digest, _ = verified_sha256(path, expected.__eq__)
    return None if digest == expected else (digest, expected)
