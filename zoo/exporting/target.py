"""Where an export is written: the path a format and spec need, and a folder export's replacement of its
folder, which never takes a folder holding files zoo did not write.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from zoo._stacklevel import user_stacklevel
from zoo.exporting.formats import INDEX_FILE, SUFFIX, SUFFIX_FORMAT
from zoo.exporting.spec import ExportSpec


def target_path(given: str | os.PathLike, fmt: str, spec: ExportSpec) -> Path:
    """Where the export of ``spec`` in ``fmt`` goes for the caller's ``given`` path (as given: a trailing
    separator, which ``Path`` drops, names a folder)."""
    path = Path(given)
    if spec.is_folder:
        if Path(os.path.normpath(path)).name in ("", ".", "..") or not Path(os.path.abspath(path)).name:
            # "." is the current folder: an export replaces its folder whole, so it needs one of its own
            raise ValueError(f"{str(path)!r} names no folder of its own ({os.path.abspath(path)}); this model "
                             f"exports a folder (several graphs and files): give it a new name, e.g. "
                             f"{Path(os.path.abspath(path)) / 'export'}")
        if path.suffix in SUFFIX.values() and not path.is_dir():
            # "s.onnx" became a folder of that name, which no ONNX tool opens as the model it looks like; the
            # hint names the format too: a folder name without a suffix exports ONNX, so "s.pt2" -> "s" lost .pt2
            keep = "" if fmt == "onnx" else f" with format={fmt!r} (--format {fmt})"
            raise ValueError(f"this model exports a folder (several graphs and files, {SUFFIX[fmt]} each), not one "
                             f"file: give the folder's name, e.g. {path.with_suffix('')}{keep}")
        if path.is_symlink():
            raise FileExistsError(f"{path} is a symbolic link; an export replaces its folder whole, which would "
                                  f"replace the link: give the real folder or a new name")
        if path.exists() and not path.is_dir():
            raise FileExistsError(f"{path} is a file; this model exports a folder (several graphs and files)")
        if path.is_dir():
            _refuse_foreign_folder(path, spec.files)
        return path
    suffix = SUFFIX[fmt]
    if path.is_dir():  # adding the suffix would write a sibling of the folder ("out" -> "out.onnx"), not into it
        raise IsADirectoryError(f"{path} is a folder; this model exports one {suffix} file: give its name "
                                f"(e.g. {path / ('model' + suffix)})")
    if _names_a_folder(given):  # "out/" became the file out.onnx beside the folder the caller meant
        raise IsADirectoryError(f"{os.fspath(given)!r} ends in a path separator, so it names a folder; this model "
                                f"exports one {suffix} file: give its name (e.g. {path / ('model' + suffix)})")
    if path.suffix == suffix:
        return path
    if path.suffix.lower() not in SUFFIX_FORMAT:
        # no export suffix: it is added, and a dotted name keeps its tag ("td3.pendulum-v1" -> td3.pendulum-v1.onnx;
        # the tag was taken for a wrong suffix, and the name refused with "use td3.onnx")
        return path.with_name(path.name + suffix)
    implied = SUFFIX_FORMAT.get(path.suffix)
    other = f", or format {implied!r}, the one a {path.suffix} file holds" if implied else ""
    raise ValueError(f"{fmt} export writes a {suffix} file, got path {path} (use {path.with_suffix(suffix)}{other})")


def _names_a_folder(given: str | os.PathLike) -> bool:
    """Whether the path as the caller wrote it ends in a separator (``"out/"``)."""
    raw = os.fspath(given)
    seps = tuple(s for s in (os.sep, os.altsep) if s)
    return isinstance(raw, str) and raw.endswith(seps) and bool(raw.strip("".join(seps)))


def _foreign_entries(folder: Path, extra: Any = ()) -> list[str]:
    """What in ``folder`` an earlier zoo export did not write: everything unless its ``export.json`` is
    ours, else the entries that index does not list (nor ``extra``, the files this export adds). An empty
    list means the folder may be replaced whole without losing anyone's files."""
    entries = sorted(os.listdir(folder))
    try:
        index = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))
        ours = {INDEX_FILE, *(str(g["file"]) for g in index["graphs"].values()), *index.get("files", ()), *extra}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # absent, or not an index zoo wrote
        return entries
    return [e for e in entries if e not in ours or (folder / e).is_symlink() or not (folder / e).is_file()]


def _refuse_foreign_folder(folder: Path, extra: Any = ()) -> None:
    foreign = _foreign_entries(folder, extra)
    if foreign:
        shown = ", ".join(f + ("/" if (folder / f).is_dir() else "") for f in foreign[:5])
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        raise FileExistsError(
            f"{folder} exists and is not an earlier zoo export: it holds {shown}{more}, which zoo did not write. "
            f"An export replaces its folder whole, so zoo only writes into a new folder, an empty one, or one it "
            f"exported before (its {INDEX_FILE} and the files listed there, nothing else); nothing was written. "
            f"Give another folder name, or move those files out of {folder} first.")


def aside_path(target: Path) -> Path:
    """Where an earlier folder export of ``target`` waits while the new one moves in: beside it, under a name of
    zoo's. It was in the private staging folder, so a kill between the two moves left it where the next sweep
    of temp files (any later save, export or pull in that folder) removed it: neither export was left."""
    name = f"{target.name}.zoo-export.previous"
    if len(os.fsencode(name)) > 255:  # a legal 236-255-byte folder name: its aside is named by a hash of it
        name = f"{hashlib.sha256(os.fsencode(target.name)).hexdigest()[:16]}.zoo-export.previous"
    return target.with_name(name)


def recover_aside(target: Path) -> None:
    """What a kill in :func:`replace_dir` left: the earlier export aside and no ``target`` (put back, with a
    warning), or both (the new one moved in, and the earlier one was not yet removed: removed now)."""
    aside = aside_path(target)
    if not aside.is_dir() or aside.is_symlink():
        return
    if target.exists() or target.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
        return
    os.replace(aside, target)
    warnings.warn(f"an export into {target} was stopped while its earlier export waited in {aside.name}: that "
                  "earlier export is put back before this one", stacklevel=user_stacklevel())


def replace_dir(built: Path, target: Path, aside: Path, extra: Any) -> None:
    """Move the finished folder onto ``target``. An earlier export there is first moved to ``aside``
    (:func:`aside_path`), checked again (files may have appeared since the export began) and put back when it
    holds anything zoo did not write; once the new export is in place it is removed."""
    if not (target.exists() or target.is_symlink()):
        os.replace(built, target)
        return
    os.replace(target, aside)
    try:
        _refuse_foreign_folder(aside, extra)
    except FileExistsError:
        os.replace(aside, target)
        _refuse_foreign_folder(target, extra)  # the same error, naming the user's folder
        raise
    except BaseException:  # a Ctrl-C here: the earlier export goes back before the staging folder is removed
        os.replace(aside, target)
        raise
    try:
        os.replace(built, target)
    except BaseException:
        os.replace(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)
