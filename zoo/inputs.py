"""What users pass zoo, checked the same way in every family: whole-number options (one rule and one
wording), the "did you mean" hint for a misspelt name or option, and what ``zoo.predict`` of a classifier
takes and gives (the input files a user names, its ``topk`` / ``batch_size`` options, its result rows)."""

from __future__ import annotations

import difflib
import numbers
import operator
import os
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from zoo._stacklevel import user_stacklevel

__all__ = ["ON_VALUES", "PARTIAL_NAME_CUTOFF", "SPELLING_CUTOFF", "SPLIT_NAMES", "NotAnIntError",
           "UnreadableInputWarning",
           "check_predict_options", "class_folders", "class_rows", "close_matches", "close_names", "collect_files", "did_you_mean",
           "either", "env_on", "expand_home", "split_folder", "unreadable_row", "visible_files", "warn_unreadable",
           "whole_number"]

SPLIT_NAMES = {"train": ("train", "training"), "val": ("val", "valid", "validation", "test", "dev")}
"""The split folders of ``DIR/<split>/<class>/...`` (images, videos), best first, matched in any case."""
ON_VALUES = ("1", "true", "yes", "on")
"""What an on/off environment variable (``ZOO_OFFLINE``, ``ZOO_DEBUG``) reads as on."""


def env_on(name: str) -> bool:
    """Whether the environment variable ``name`` is on (:data:`ON_VALUES`, any case): ``ZOO_DEBUG=0`` is off."""
    return os.environ.get(name, "").strip().lower() in ON_VALUES

SPELLING_CUTOFF = 0.6
"""How alike (difflib's ratio) a misspelt option or key must be to a valid one to be suggested: difflib's own
default, which finds ``epohcs`` -> ``epochs`` and ``lr_sched`` -> ``schedule``."""

PARTIAL_NAME_CUTOFF = 0.4
"""The same for a model or weights name, which users often type in part: ``tsn`` for ``video-tsn`` (0.5),
``seq2seq`` for ``seq2seq-transformer`` (0.54), ``cifar`` for ``resnet18.cifar10`` (0.48)."""


class NotAnIntError(TypeError, ValueError):
    """A value that is no whole number where :func:`whole_number` wants one. A wrong type is a TypeError by
    Python's convention, and a bad option value a ValueError to most code that calls zoo: it is both, so an
    ``except`` written for either catches it."""


class UnreadableInputWarning(UserWarning):
    """An input ``zoo.predict`` could not read: its result row holds ``"error"`` instead of a label (the
    ``zoo predict`` command prints that row and leaves the warning out)."""


def expand_home(value: Any, *, only_existing: bool = False) -> Any:
    """A path written ``"~/..."`` (a str or an ``os.PathLike``) with the home folder put in, as torchvision's
    data sets read their ``root`` and ``zoo.build(weights=)`` its file: Python, unlike a shell, leaves ``~`` as
    it is. Anything else comes back unchanged; so does a str whose expansion does not exist when
    ``only_existing`` (where a str may be text, such as a sentence to translate)."""
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.startswith("~"):
        return value
    expanded = os.path.expanduser(text)
    if isinstance(value, str):
        return expanded if not only_existing or os.path.exists(expanded) else value
    return Path(expanded)


def visible_files(folder: Path, suffixes: Iterable[str] | None = None) -> list[Path]:
    """The files below ``folder`` (of ``suffixes``, lower-case, when given), leaving out hidden ones and those in
    hidden folders (macOS ``._x.jpg`` forks, ``.ipynb_checkpoints/`` copies): no inputs to predict, train or
    evaluate on, in every family (torchvision's ``find_classes`` leaves hidden class folders out). In
    torchvision's ``make_dataset`` order for a class folder, so that sample ``i`` is the same file in both:
    folders sorted by their path as text, the files sorted within each (``a/z.jpg`` before ``a/sub/y.jpg``, where
    sorting whole paths put ``a/sub/`` first). Linked folders are followed, as
    ``make_dataset`` does (each real folder read once: a link to a folder above does not loop)."""
    kept = None if suffixes is None else tuple(suffixes)
    found, seen = [], set()
    for where, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(where)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.append((where, [f for name in sorted(files) if not name.startswith(".") and (f := Path(where, name)).is_file()
                              and (kept is None or f.suffix.lower() in kept)]))
    return [f for _, in_folder in sorted(found, key=lambda entry: entry[0]) for f in in_folder]


def split_folder(root: Path, split: str, suffixes: Iterable[str] | None = None) -> Path | None:
    """``root``'s ``split`` folder (``"train"`` / ``"val"``: :data:`SPLIT_NAMES`, in any case: Kaggle's ``Train/``,
    ``TEST/``), or None. With ``suffixes`` (the family's files, lower-case), a folder of that name is a split
    only where it holds no such file itself: one that does is a class of a flat ``root/<class>/...`` (CIFAR-100
    has a class ``train``, as torchvision's ``ImageFolder`` reads it), while Kaggle's ``train/<class>/`` beside an
    unlabelled ``test/*.jpg`` stays a split."""
    root = Path(root)
    folders = {p.name.lower(): p for p in sorted(root.iterdir(), reverse=True) if p.is_dir()} if root.is_dir() else {}
    kept = None if suffixes is None else tuple(suffixes)
    for name in SPLIT_NAMES[split]:
        found = root / name if (root / name).is_dir() else folders.get(name)
        # a split holds class folders; one holding the files itself is a class of a flat root/<class>/...
        if found is not None and (kept is None or not _holds_files(found, kept)):
            return found
    return None


def _holds_files(folder: Path, suffixes: tuple[str, ...]) -> bool:
    """Whether ``folder`` itself (not a sub-folder) holds a visible file of ``suffixes``."""
    with os.scandir(folder) as entries:
        return any(not e.name.startswith(".") and e.is_file() and Path(e.name).suffix.lower() in suffixes
                   for e in entries)


def class_folders(root: Path) -> list[str]:
    """The names of ``root``'s class folders, sorted: its sub-folders but hidden ones (``.ipynb_checkpoints``),
    as torchvision's ``find_classes`` reads an image or video folder, in every family."""
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def collect_files(inputs: str | os.PathLike | Iterable[str | os.PathLike], extensions: Iterable[str],
                  what: str = "file") -> list[Path]:
    """Files from a file, a folder (recursively, sorted; other extensions and hidden entries ignored) or a list
    of both; ``extensions`` are lower-case suffixes (".jpg"). A missing path or finding nothing is an error."""
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    suffixes = tuple(extensions)
    out: list[Path] = []
    for item in items:
        p = Path(item).expanduser()
        if p.is_dir():
            out += visible_files(p, suffixes)
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"no such {what} file or folder: {p}")
    if not out:
        raise ValueError(f"no {what} files found in {[str(i) for i in items]} (extensions: {', '.join(suffixes)})")
    return out


def whole_number(value: Any, name: str, *, minimum: int | None = 1, allow_none: bool = False,
                 hint: str = "") -> int | None:
    """``value`` as a Python int where it is a whole number of at least ``minimum`` (None: any): an ``int`` or
    a NumPy integer (``np.int64(3)`` from an array or a grid search). A bool, a float (``3.0`` too: a count
    given as a float is a mistake somewhere), a str or anything else is a :class:`NotAnIntError`, one below
    ``minimum`` a ValueError, both saying ``"<name> must be an int >= <minimum>[ or None][ (<hint>)], got
    <value>"``. None is returned as it is where ``allow_none``."""
    if value is None and allow_none:
        return None
    bound = "" if minimum is None else f" >= {minimum}"
    expected = f"{name} must be an int{bound}{' or None' if allow_none else ''}{f' ({hint})' if hint else ''}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise NotAnIntError(f"{expected}, got {value!r}")
    number = operator.index(value)
    if minimum is not None and number < minimum:
        raise ValueError(f"{expected}, got {number}")
    return number


def close_matches(word: str, choices: Iterable[str], *, n: int = 1, cutoff: float = SPELLING_CUTOFF) -> list[str]:
    """The (at most ``n``) ``choices`` most like ``word``, best first, of difflib's ratio at least ``cutoff``;
    case and ``-`` vs ``_`` do not count (``TD3`` is ``td3``, ``seq2seq_transformer`` torch.hub's spelling of
    ``seq2seq-transformer``)."""
    by_spelling: dict[str, list[str]] = {}
    for choice in choices:
        by_spelling.setdefault(_spelling(choice), []).append(choice)
    close = difflib.get_close_matches(_spelling(word), list(by_spelling), n=n, cutoff=cutoff)
    return [choice for spelt in close for choice in by_spelling[spelt]][:n]


def close_names(name: str, names: Iterable[str]) -> list[str]:
    """The (at most 3) ``names`` of models or weights most like ``name``, by :data:`PARTIAL_NAME_CUTOFF`."""
    return close_matches(name, names, n=3, cutoff=PARTIAL_NAME_CUTOFF)


def did_you_mean(word: str, choices: Iterable[str], *, n: int = 1) -> str:
    """``" (did you mean 'x'?)"`` (``'x', 'y' or 'z'`` for several) for the :func:`close_matches` of ``word``,
    to follow it in a message; ``""`` where none is close."""
    close = close_matches(word, choices, n=n)
    return f" (did you mean {either(close)}?)" if close else ""


def either(names: Sequence[str]) -> str:
    """``names`` as a choice in a sentence: ``'a', 'b' or 'c'``."""
    return " or ".join(", ".join(map(repr, names)).rsplit(", ", 1))


def _spelling(word: str) -> str:
    return word.casefold().replace("_", "-")


def check_predict_options(topk: Any, batch_size: Any) -> tuple[int, int]:
    """``(topk, batch_size)`` as Python ints, each a whole number >= 1 (:func:`whole_number`)."""
    return whole_number(topk, "topk", hint="how many classes to list per input"), whole_number(batch_size, "batch_size")


def class_names(classes: Any, recorded: Any) -> list[str] | None:
    """The names ``predict`` labels outputs with: ``classes`` given to it (one name per output), else the
    names the model records (``recorded``), else None (the indices)."""
    if isinstance(classes, str):  # list("cat") would name three outputs c, a, t
        raise TypeError(f"classes is a list of names, one per output; got the str {classes!r}")
    if classes is not None:
        return list(classes)
    return list(recorded) if recorded else None


def class_rows(keys: Sequence[str], probs: Any, topk: int, names: Sequence[str] | None) -> list[dict[str, Any]]:
    """One row per input of ``probs`` ``(N, K)``: ``{"input", "label", "index", "prob", "topk": [(label, prob)]}``;
    labels are ``names[i]``, else (no names) the index as text. Names of another count than the ``K`` outputs
    are an error: some labels would be names and others indices, or names of other outputs."""
    if names is not None and len(names) != probs.shape[1]:
        raise ValueError(f"{len(names)} class names for a model with {probs.shape[1]} outputs: give one name per "
                         f"output (classes=[...] of length {probs.shape[1]}), or leave classes out")
    top_p, top_i = probs.topk(min(topk, probs.shape[1]), dim=1)

    def label(i: int) -> str:
        return names[i] if names is not None else str(i)

    return [{"input": key, "label": label(idx[0]), "index": idx[0], "prob": ps[0],
             "topk": [(label(i), p) for i, p in zip(idx, ps)]}
            for key, ps, idx in zip(keys, top_p.tolist(), top_i.tolist())]


def unreadable_row(key: str, err: BaseException) -> dict[str, Any]:
    """The result row of an input that could not be read: ``{"input", "error"}`` (:func:`warn_unreadable`
    says them all at once)."""
    return {"input": key, "error": str(err)}


def warn_unreadable(rows: list[dict[str, Any]], noun: str) -> None:
    """One warning for the rows of ``rows`` that hold ``"error"`` (inputs that could not be decoded; ``noun``:
    what they are, ``"images"``): a folder of 1000 broken files would otherwise give 1000 warnings, where training
    on it says so in one line. One file keeps its own message."""
    bad = [row for row in rows if "error" in row]
    if not bad:
        return
    if len(bad) == 1:
        message = f"cannot decode {bad[0]['input']}: {bad[0]['error']}"
    else:
        more = " ..." if len(bad) > 5 else ""
        message = (f"cannot decode {len(bad)} of the {len(rows)} {noun} (their rows hold 'error' instead of a "
                   f"label): {[row['input'] for row in bad[:5]]}{more}; the first: {bad[0]['error']}")
    warnings.warn(message, UnreadableInputWarning, stacklevel=user_stacklevel())
