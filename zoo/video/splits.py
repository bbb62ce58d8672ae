"""The official UCF101 split files: ``classInd.txt``, ``trainlist0{1,2,3}.txt``, ``testlist0{1,2,3}.txt``.

Quirks handled here rather than in every caller:

- CRLF line endings, as shipped in ``UCF101TrainTestSplits-RecognitionTask.zip``;
- ``classInd.txt`` says ``HandstandPushups`` while the file names say ``v_HandStandPushups_...``
  (the folder is ``HandstandPushups``), so class names are matched case-insensitively;
- trainlist lines carry a 1-based label, testlist lines do not (the class comes from the folder);
  where both exist they must agree.

Reference: Soomro, Zamir, Shah, "UCF101: A Dataset of 101 Human Actions Classes From Videos in The
Wild", https://arxiv.org/abs/1212.0402.
"""

from __future__ import annotations

import numbers
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from zoo._stacklevel import user_stacklevel

__all__ = ["FOLDS", "SplitEntry", "SplitFileError", "read_class_index", "read_split"]

FOLDS = (1, 2, 3)
_NUMBER = re.compile(r"[0-9]{1,9}")  # ASCII digits only: str.isdigit() also accepts "²", which int() refuses


class SplitFileError(ValueError):
    """A UCF101 split file that is not what the official files look like (named with its line)."""


@dataclass(frozen=True)
class SplitEntry:
    path: str  # relative, with "/" separators, exactly as in the split file: "Class/v_Class_gXX_cYY.avi"
    label: int  # 0-based index into classInd order
    class_name: str  # the classInd spelling
    line: int = field(default=0, compare=False)  # 1-based in the split file (blank lines counted); 0: not from one


def _numbered_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of the file's non-blank lines, numbered as an editor numbers them: blank lines
    dropped after numbering, so an error's ``file:line`` points at the line meant."""
    if not path.is_file():
        raise FileNotFoundError(f"UCF101 split file not found: {path}")
    # newline=None turns CRLF into "\n"; strip() removes any stray "\r" or spaces as well.
    try:
        with open(path, encoding="utf-8-sig", newline=None) as fh:  # -sig: drops the BOM Windows Notepad writes
            return [(n, ln.strip()) for n, ln in enumerate(fh, 1) if ln.strip()]
    except UnicodeDecodeError as err:
        raise SplitFileError(f"{path} is not UTF-8 text (byte {err.start}: {err.reason}); expected a UCF101 "
                             "split file") from None


def read_class_index(split_dir: str | os.PathLike) -> list[str]:
    """Class names in label order from ``classInd.txt`` (``"1 ApplyEyeMakeup"`` ...)."""
    path = Path(split_dir) / "classInd.txt"
    names: list[str] = []
    for n, line in _numbered_lines(path):
        parts = line.split()
        if len(parts) != 2 or not _NUMBER.fullmatch(parts[0]):
            raise SplitFileError(f"{path}:{n}: expected '<label> <ClassName>', got {line!r:.80}")
        if int(parts[0]) != len(names) + 1:
            raise SplitFileError(f"{path}:{n}: labels must count up from 1; expected {len(names) + 1}, got {parts[0]}")
        if parts[1].lower() in (c.lower() for c in names):
            raise SplitFileError(f"{path}:{n}: class {parts[1]!r} is listed twice")
        names.append(parts[1])
    if not names:
        raise SplitFileError(f"{path} lists no classes")
    return names


def read_split(split_dir: str | os.PathLike, fold: int = 1, train: bool = True) -> list[SplitEntry]:
    """The entries of ``trainlist0{fold}.txt`` or ``testlist0{fold}.txt`` with 0-based labels."""
    if isinstance(fold, bool) or not isinstance(fold, numbers.Integral) or fold not in FOLDS:  # 1.0 failed in :02d
        raise ValueError(f"fold must be one of {FOLDS} (an int), got {fold!r}")
    fold = int(fold)
    split_dir = Path(split_dir)
    classes = read_class_index(split_dir)
    by_lower = {c.lower(): i for i, c in enumerate(classes)}
    path = split_dir / f"{'train' if train else 'test'}list{fold:02d}.txt"
    entries = []
    seen: dict[str, int] = {}  # path -> the line that listed it first
    repeated: list[str] = []
    for n, line in _numbered_lines(path):
        parts = line.split()
        rel = parts[0].replace("\\", "/")
        folder = rel.split("/")[0]
        if "/" not in rel or folder.lower() not in by_lower or rel.endswith("/"):
            raise SplitFileError(f"{path}:{n}: {rel!r:.80} is not '<Class>/<file>' with a class from classInd.txt")
        if ".." in rel.split("/"):
            # labelled by its first folder, "Biking/../Diving/v.avi" was a Diving video taught as Biking
            raise SplitFileError(f"{path}:{n}: {rel!r:.80} steps out of its class folder ('..'): a video is listed "
                                 "as '<Class>/<file>' and labelled by that folder")
        label = by_lower[folder.lower()]
        if len(parts) > 2 or (len(parts) == 2 and (not _NUMBER.fullmatch(parts[1]) or int(parts[1]) != label + 1)):
            raise SplitFileError(
                f"{path}:{n}: label {' '.join(parts[1:])!r:.40} does not match class {folder!r} (classInd label "
                f"{label + 1})"
            )
        if rel in seen:
            repeated.append(f"{rel} (lines {seen[rel]} and {n})")
            continue
        seen[rel] = n
        entries.append(SplitEntry(rel, label, classes[label], n))
    if not entries:
        raise SplitFileError(f"{path} lists no videos")
    if repeated:
        # each listed twice was read twice an epoch and, in a testlist, scored twice; torchvision's UCF101 takes
        # the file's lines as a set
        warnings.warn(f"{path} lists {len(repeated)} video(s) more than once, e.g. {', '.join(repeated[:3])}: each "
                      "is taken once", UserWarning, stacklevel=user_stacklevel())
    return entries
