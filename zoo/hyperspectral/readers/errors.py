"""``SceneFormatError``: the one error type of the scene and label readers.

Every reader (ENVI, .mat, .npy, SPE, label maps) turns a file it cannot use -- a lying header, a truncated
or corrupt file, an array of the wrong shape -- into this error, naming the file, what was expected and
what was found. It is a ``ValueError``, so callers that catch ``ValueError`` (the ``zoo`` command does)
keep working.
"""

from __future__ import annotations

__all__ = ["SceneFormatError"]


class SceneFormatError(ValueError):
    """A scene, ground-truth or mask file that cannot be read as what it claims to be."""
