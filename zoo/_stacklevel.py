"""Where zoo's warnings point: at the user's line that led to them.

``warnings.warn(..., stacklevel=N)`` with a hand-counted ``N`` points at the right line only on the path it
was counted for. zoo's public calls reach the same code by several paths (``zoo.train`` or the family's
own method, ``zoo.predict`` through a ``torch.no_grad`` decorator), so a fixed ``N`` would show some warnings
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

# libraries that call zoo's code back: torch (a decorator, a module's __call__), scikit-learn (a Pipeline's
# fit, the set_output wrapper around every transform of an estimator)
_CALLERS = ("torch", "sklearn")


def _skipped(filename: str) -> bool:
    if filename.startswith(_ZOO) or filename == _CONTEXTLIB:
        return True
    for name in _CALLERS:
        module = sys.modules.get(name)
        if module is not None and module.__file__ and filename.startswith(os.path.dirname(module.__file__) + os.sep):
            return True
    return False

def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` in the calling function that names the first frame
    outside zoo (and outside torch, scikit-learn and contextlib, which call zoo's code back): the user's line."""
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame.f_back is not None and _skipped(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return level
