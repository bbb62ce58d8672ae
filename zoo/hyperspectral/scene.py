"""``Scene``: the one type every reader returns (a cube, its wavelengths, its labels when there are any)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RawLayout", "Scene", "band_first_hint"]


def band_first_hint(shape: tuple[int, ...], bands: int | None = None, *,
                    labels: tuple[int, ...] | None = None) -> str:
    """A hint for a cube of ``shape`` that reads as band-first, ``(C, H, W)`` as rasterio and GDAL read it (zoo
    reads ``(H, W, C)``): its first axis is the ``bands`` a model was fitted on, or ``labels``, the shape of its
    ground truth, is its last two axes; else ""."""
    if len(shape) != 3:
        return ""
    if labels is not None:
        first = tuple(labels) == tuple(shape[1:]) != tuple(shape[:2])
    else:
        first = shape[0] == bands and shape[2] != bands
    if not first:
        return ""
    return f"; the cube {tuple(shape)} looks band-first, (C, H, W) as rasterio and GDAL read it: pass " \
           "cube.transpose(1, 2, 0)"


def _dtype_kind(dtype: Any) -> str:
    """NumPy's kind letter of a cube's dtype, a torch dtype's included (torch's have no ``kind``, and a complex
    tensor would otherwise pass as real and lose its imaginary part in every float copy made of it)."""
    kind = getattr(dtype, "kind", None)
    if isinstance(kind, str):
        return kind
    # torch's bool, integer and float types are real numbers, as NumPy's are; so are duck-typed arrays' values
    return "c" if getattr(dtype, "is_complex", False) else "f"


@dataclass(frozen=True)
class RawLayout:
    """Where a scene's samples lie in a raw file, so that chunks can be mapped and unmapped one at a time.

    A memmap keeps every page it touched resident (they count in the process's RSS), so streaming a cube
    larger than RAM through one long-lived memmap is not bounded; mapping each chunk afresh is.
    """

    path: Path
    offset: int
    dtype: np.dtype  # with its byte order
    interleave: str  # "bsq" | "bil" | "bip"
    shape: tuple[int, int, int]  # (H, W, C)

    def memmap(self) -> np.ndarray:
        """The whole file as an (H, W, C) view (a fresh mapping; drop it to release its pages)."""
        h, w, c = self.shape
        order = {"bsq": (c, h, w), "bil": (h, c, w), "bip": (h, w, c)}[self.interleave]
        mm = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=order)
        return {"bsq": lambda a: a.transpose(1, 2, 0), "bil": lambda a: a.transpose(0, 2, 1),
                "bip": lambda a: a}[self.interleave](mm)


@dataclass(frozen=True)
class Scene:
    """A hyperspectral scene.

    ``cube`` is ``(H, W, C)`` (an ndarray, or a read-only memmap view for files opened lazily);
    ``wavelengths`` has ``C`` entries (nanometres) or is ``None``; ``labels`` is an ``(H, W)`` integer map
    with 0 for unlabelled pixels, or ``None``.
    """

    cube: np.ndarray
    wavelengths: np.ndarray | None = None
    labels: np.ndarray | None = None
    name: str = "scene"
    class_names: tuple[str, ...] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    layout: RawLayout | None = None  # set by readers that open a raw file lazily (ENVI)

    def __post_init__(self) -> None:
        cube = self.cube
        if not hasattr(cube, "ndim") or cube.ndim != 3:
            raise ValueError(f"Scene cube must be (H, W, C); got shape {getattr(cube, 'shape', type(cube))}")
        h, w, c = cube.shape
        if min(h, w, c) < 1:
            raise ValueError(f"Scene cube has an empty axis: shape {cube.shape}")
        kind = _dtype_kind(getattr(cube, "dtype", None))
        if kind not in "biuf":
            raise ValueError(f"Scene cube must hold real numbers; got dtype {cube.dtype}"
                             + (": keep np.abs(cube), cube.real or cube.imag" if kind == "c" else ""))
        if self.wavelengths is not None:
            wl = np.asarray(self.wavelengths, dtype=np.float64).reshape(-1)
            if wl.size != c:
                raise ValueError(f"{c} bands but {wl.size} wavelengths")
            object.__setattr__(self, "wavelengths", wl)
        if self.labels is not None:
            lab = np.asarray(self.labels)
            if lab.shape != (h, w):
                raise ValueError(f"labels must be (H, W) = {(h, w)}; got {lab.shape}"
                                 + band_first_hint(cube.shape, labels=lab.shape))
            if not np.issubdtype(lab.dtype, np.integer):
                if not np.all(np.isfinite(lab)) or np.any(lab != np.round(lab)):
                    raise ValueError("labels must be integers (0 = unlabelled)")
                lab = lab.astype(np.int64)
            if lab.size and lab.min() < 0:
                raise ValueError(f"labels must be >= 0 (0 = unlabelled); found {lab.min()}")
            object.__setattr__(self, "labels", lab)

    # (H, W, C)
    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.cube.shape)  # type: ignore[return-value]

    @property
    def n_bands(self) -> int:
        return int(self.cube.shape[2])

    @property
    def n_classes(self) -> int:
        """Largest class id (classes are 1..n; 0 is unlabelled)."""
        if self.labels is None:
            raise ValueError(f"scene {self.name!r} has no labels")
        return int(self.labels.max())

    def to_tensor(self, dtype: Any = None):
        """The cube as a ``(C, H, W)`` tensor (copied into memory)."""
        import torch

        cube = np.asarray(self.cube)
        # a copy in native byte order: memmaps are read-only and may be big-endian
        arr = np.array(cube.transpose(2, 0, 1), dtype=cube.dtype.newbyteorder("="), order="C", copy=True)
        t = torch.from_numpy(arr)
        return t if dtype is None else t.to(dtype)

    def with_cube(self, cube: np.ndarray, wavelengths: np.ndarray | None = None) -> Scene:
        return replace(self, cube=cube, wavelengths=wavelengths, layout=None)

    def iter_row_chunks(self, max_bytes: int = 64 << 20, dtype: Any = np.float64,
                        rows: slice | None = None) -> Iterator[tuple[slice, np.ndarray]]:
        """Yield ``(row_slice, block)`` with ``block`` an in-memory float64 ``(h, W, C)`` copy of those rows
        (``dtype=None``: the rows as stored, a view of an in-memory cube), over all rows or those of ``rows``.

        Blocks are sized so that one of them is about ``max_bytes``; for a lazily opened file each
        block is read through its own short-lived mapping, so peak memory stays near ``max_bytes``
        whatever the file size.
        """
        h, w, c = self.shape
        start, stop, _ = (rows or slice(0, h)).indices(h)
        itemsize = np.dtype(self.cube.dtype if dtype is None else dtype).itemsize
        step = max(1, int(max_bytes // max(1, w * c * itemsize)))
        for r0 in range(start, stop, step):
            sl = slice(r0, min(stop, r0 + step))
            if self.layout is not None:
                view = self.layout.memmap()
                block = np.array(view[sl], dtype=dtype)
                del view  # unmap: the pages this block touched leave the RSS
            else:
                block = np.asarray(self.cube[sl], dtype=dtype)
            yield sl, block

    def pixels(self, mask: np.ndarray | None = None) -> np.ndarray:
        """``(N, C)`` spectra of the pixels where ``mask`` is true (all pixels without a mask)."""
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != self.shape[:2]:
                raise ValueError(f"mask must be (H, W) = {self.shape[:2]}; got {mask.shape}")
        if self.layout is not None and (mask is not None or self.layout.interleave != "bip"):
            # (N, C) of a BSQ/BIL file is a copy whatever is done: filled block by block through short-lived
            # mappings, the file's pages do not stay resident beside it (a BIP file's is a view: below)
            out = np.empty((self.shape[0] * self.shape[1] if mask is None else int(mask.sum()), self.shape[2]),
                           dtype=self.cube.dtype)
            n, span = 0, None
            if mask is not None:  # only the rows the mask reaches are read
                hit = np.flatnonzero(mask.any(axis=1))
                span = slice(int(hit[0]), int(hit[-1]) + 1) if hit.size else slice(0, 0)
            for sl, block in self.iter_row_chunks(dtype=None, rows=span):
                part = block.reshape(-1, block.shape[2]) if mask is None else block[mask[sl]]
                out[n:n + len(part)] = part
                n += len(part)
            return out
        cube = np.asarray(self.cube)
        return cube.reshape(-1, cube.shape[2]) if mask is None else cube[mask]

    def __repr__(self) -> str:
        h, w, c = self.shape
        lab = "no labels" if self.labels is None else f"{int((self.labels > 0).sum())} labelled px"
        wl = "" if self.wavelengths is None else f", {self.wavelengths[0]:.0f}-{self.wavelengths[-1]:.0f} nm"
        return f"Scene({self.name!r}, {h}x{w}x{c} {self.cube.dtype}{wl}, {lab})"
