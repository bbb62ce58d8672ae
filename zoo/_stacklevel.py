"""Where zoo's warnings point: at the user's line that led to them.

``warnings.warn(..., stacklevel=N)`` with a hand-counted ``N`` points at the right line only on the path it
was counted for. zoo's public calls reach the same code by several paths (``zoo.train`` or the family's
own method, ``zoo.predict`` through a ``torch.no_grad`` decorator), so a fixed ``N`` showed some warnings
as coming from inside zoo or torch (``torch/utils/_contextlib.py``). :func:`user_stacklevel` counts the
frames instead, as Python 3.12's ``skip_file_prefixes`` does (zoo supports 3.10).
"""

from __future__ import annotations

import contextlib
import os
import sys

__all__ = ["user_stacklevel"]

_ZOO = os.path.dirname(os.path.abspath(__file__)) + os.sep
_CONTEXTLIB = contextlib.__file__

def _skipped(filename: str) -> bool:
    if filename.startswith(_ZOO) or filename == _CONTEXTLIB:
        return True
    torch = sys.modules.get("torch")  # zoo code that torch calls back (a decorator, a module's __call__)
    torch_dir = os.path.dirname(torch.__file__) + os.sep if torch is not None and torch.__file__ else None
    return torch_dir is not None and filename.startswith(torch_dir)

def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` in the calling function that names the first frame
    outside zoo (and outside torch and contextlib, which call zoo's code back): the user's line."""
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame.f_back is not None and _skipped(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return level
