"""The input files a user names on the command line or in ``zoo.predict``: a file, a folder, or a list of both."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["collect_files"]


def collect_files(inputs: str | os.PathLike | Iterable[str | os.PathLike], extensions: Iterable[str],
                  what: str = "file") -> list[Path]:
    """Files from a file, a folder (recursively, sorted; other extensions and hidden entries ignored) or a list
    of both; ``extensions`` are lower-case suffixes (".jpg"). A missing path or finding nothing is an error."""
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    suffixes = tuple(extensions)
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            # hidden entries below the folder (macOS "._x.jpg" forks, .ipynb_checkpoints/) are no inputs, as
            # the data sets that train and evaluate skip them
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in suffixes
                          and not any(part.startswith(".") for part in f.relative_to(p).parts))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"no such {what} file or folder: {p}")
    if not out:
        raise ValueError(f"no {what} files found in {[str(i) for i in items]} (extensions: {', '.join(suffixes)})")
    return out
