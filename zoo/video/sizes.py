"""Frame sizes as the video family takes them, checked in one place: a crop, a resize, the scale a decoder
converts to, the size of a generated clip.

A size is an int (where it means something: a square crop, a resize's shorter side) or a ``(height, width)``
pair; each number a whole number of at least 1, a NumPy integer included. ``(16.7, 20)`` was read as
``(16, 20)``, ``True`` as 1 and ``0`` / ``-3`` as empty crops without a word; each is refused here naming the
option, what it takes and what came.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from zoo.inputs import NotAnIntError

__all__ = ["size_pair"]


def _whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def size_pair(value: Any, name: str, *, int_means: str | None = "height and width",
              allow_none: bool = False) -> int | tuple[int, int] | None:
    """``value`` checked as a frame size: a Python int where an int is taken (``int_means`` says what it is; None:
    only a pair is taken), else a ``(height, width)`` tuple of Python ints, each >= 1. Anything else is a
    :class:`~zoo.inputs.NotAnIntError` (a number that is not whole, a bool, a pair of the wrong length) or a
    ValueError (a number below 1), saying ``"<name> must be <what it takes> (pixels), got <value>"``."""
    if value is None and allow_none:
        return None
    takes = "a (height, width) pair of ints >= 1"
    if int_means is not None:
        takes = f"an int >= 1 ({int_means}) or {takes}"
    expected = f"{name} must be {takes} (pixels){' or None' if allow_none else ''}, got {value!r}"
    if _whole(value) and int_means is not None:
        if value < 1:
            raise ValueError(expected)
        return int(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) and not _is_array(value):
        raise NotAnIntError(expected)
    pair = list(value)
    if len(pair) != 2 or not all(_whole(v) for v in pair):
        raise NotAnIntError(expected)
    if min(pair) < 1:
        raise ValueError(expected)
    return int(pair[0]), int(pair[1])


def _is_array(value: Any) -> bool:
    """A NumPy array or torch tensor of one dimension (``np.array([112, 112])``), whose items are checked as a
    list's; their scalars are no sequence."""
    shape = getattr(value, "shape", None)
    return shape is not None and len(shape) == 1
