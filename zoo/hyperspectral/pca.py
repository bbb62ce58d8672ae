"""``HyperspectralPCA``: scikit-learn compatible PCA for (H, W, C) scenes, in memory or out of core.

The fit streams the pixel covariance chunk by chunk (sum and shifted scatter matrix in float64, then one
``C x C`` symmetric eigendecomposition), so the same code fits a small cube in one block and a memmapped
ENVI file larger than RAM with memory bounded by ``chunk_bytes`` (plus ``C x C``). It matches
``spectral.principal_components`` (same covariance with the N-1 divisor; eigenvalues equal and
projections equal up to each component's sign, which is fixed here so that the largest loading is
positive, as scikit-learn's ``svd_flip`` does).
"""

from __future__ import annotations

import numbers
import os
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from zoo._progress import ProgressBar
from zoo._stacklevel import user_stacklevel
from zoo.hyperspectral.preprocessing import (
    _all_finite,
    apply_per_pixel,
    as_pixels,
    band_count,
    check_fit_pixels,
    out_dtype,
    pixel_view,
    refuse_non_finite,
)
from zoo.hyperspectral.scene import Scene
from zoo.inputs import whole_number

__all__ = ["CovarianceAccumulator", "HyperspectralPCA"]


# Pixels per block of the projection: about 8 MB of float64 at 200 bands, so an integer cube is converted
# a few thousand pixels at a time instead of into one float64 copy (2-4 ms less for Indian Pines).
_PROJECT_BYTES = 8 << 20
# Bytes of the float64 scratch block the covariance is centred in: one buffer reused for every few thousand
# pixels instead of a centred copy of the whole input (33 MB for Indian Pines, whose pages fault in again
# at every fit), and the mean and column sums read each block once
_SCATTER_BYTES = 8 << 20


class CovarianceAccumulator:
    """Streaming mean and covariance of ``(N, C)`` blocks, shifted by the mean of the first pixels seen (any
    value near the mean keeps the scatter matrix's cancellation small; the sums correct for it exactly).

    ``all_finite()`` tells after the pass whether every pixel was finite: a NaN or infinity anywhere makes
    its band's sum non-finite, so the input needs no check of its own beforehand."""

    def __init__(self, n_features: int) -> None:
        self.n = 0
        self.shift: np.ndarray | None = None
        self.sum = np.zeros(n_features)
        self.scatter = np.zeros((n_features, n_features))

    def update(self, block: np.ndarray) -> None:
        """Add ``(n, C)`` pixels of any real dtype and memory order (never written)."""
        n, c = block.shape
        if n == 0:
            return
        rows = max(256, _SCATTER_BYTES // (8 * max(1, c)))
        # the scratch in the pixels' own order: a Fortran-ordered view (a .mat cube's pixels) is read band by band
        order = "F" if block.flags.f_contiguous and not block.flags.c_contiguous else "C"
        scratch = np.empty((min(rows, n), c), order=order)
        # NaN/inf pixels are reported by all_finite() after the pass, not as numpy's warnings in it
        with np.errstate(over="ignore", invalid="ignore"):
            if self.shift is None:
                self.shift = np.asarray(block[:rows], dtype=np.float64).mean(axis=0)
            for i in range(0, n, rows):
                d = scratch[:min(rows, n - i)]
                if block.dtype == np.float64:
                    np.subtract(block[i:i + rows], self.shift, out=d)  # (r, C)
                else:  # converted first: numpy's mixed-dtype subtract casts in small buffers (uint16: 5.7 vs 3.5 ms)
                    np.copyto(d, block[i:i + rows])
                    d -= self.shift
                self.sum += d.sum(axis=0)
                self.scatter += d.T @ d  # BLAS syrk: the whole cost of the fit
        self.n += n

    def all_finite(self) -> bool:
        """Whether every pixel added so far was finite (or, rarely, finite values too large for a float64 sum)."""
        return bool(np.isfinite(self.sum).all())

    def finalize(self) -> tuple[np.ndarray, np.ndarray]:
        if self.n < 2:
            raise ValueError(f"PCA needs at least 2 samples (pixels); got {self.n} sample(s)")
        dm = self.sum / self.n
        cov = (self.scatter - self.n * np.outer(dm, dm)) / (self.n - 1)
        return self.shift + dm, (cov + cov.T) / 2


class HyperspectralPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """PCA over the spectral axis.

    ``n_components``: an int, or a float in (0, 1) = the fraction of variance to keep (smallest k whose
    share exceeds it, as scikit-learn's PCA counts), or None (all there are: min(pixels, bands), as in scikit-learn; a count above the pixels is refused as
    there). ``whiten`` scales each component to unit variance. ``chunk_bytes`` bounds the
    float64 working block. ``fit(X, mask=...)`` accepts ``(N, C)``, ``(H, W, C)`` or a :class:`Scene` (a
    lazily opened ENVI scene is read one row block at a time).

    Its output features are named ``pca0, pca1, ...`` (``get_feature_names_out``), as scikit-learn's PCA
    names them, so ``set_output(transform="pandas")`` gives DataFrames of ``(N, C)`` pixels.
    """

    def __init__(self, n_components: float | None = 30, whiten: bool = False,
                 chunk_bytes: int = 64 << 20, progress: bool = False) -> None:
        self.n_components = n_components
        self.whiten = whiten
        self.chunk_bytes = chunk_bytes
        self.progress = progress

    # -- fitting ---------------------------------------------------------------------------------------
    def _blocks(self, X, mask):
        """Yield ``(n, C)`` pixel blocks in whatever order reads fastest (covariance does not depend on it)."""
        if isinstance(X, Scene) and X.layout is not None:  # a file opened lazily: one row block at a time
            chunks = X.iter_row_chunks(self.chunk_bytes)
            total = -(-X.shape[0] // max(1, int(self.chunk_bytes // max(1, X.shape[1] * X.shape[2] * 8))))
            for sl, block in ProgressBar(chunks, total=total, disable=not self.progress, desc="pca", unit="chunk"):
                yield pixel_view(block)[0] if mask is None else block[np.asarray(mask, dtype=bool)[sl]]
            return
        arr = np.asarray(X.cube if isinstance(X, Scene) else X)
        if arr.ndim == 3 and mask is None:
            P = pixel_view(arr)[0]  # no copy of a C- or Fortran-ordered cube
        else:
            P = as_pixels(arr, mask)
        step = max(1, int(self.chunk_bytes // max(1, P.shape[1] * 8)))
        for i in ProgressBar(range(0, P.shape[0], step), disable=not self.progress, desc="pca", unit="chunk"):
            yield P[i:i + step]  # a view of the caller's pixels (converted by the accumulator)

    def fit(self, X, y=None, mask: np.ndarray | None = None):
        self._fraction_or_count()  # a bad n_components fails before a pass over a large file
        # as scikit-learn's PCA checks its parameters at fit: whiten="no" whitened (a non-empty string is true),
        # chunk_bytes=0 or -1 read one pixel a block without a word, and "64MB" failed in a floor division
        if not isinstance(self.whiten, (bool, np.bool_)):
            raise TypeError(f"whiten must be True or False; got {self.whiten!r}")
        whole_number(self.chunk_bytes, "chunk_bytes", hint="bytes of the float64 working block")
        given, given_mask = X, mask
        # NaN/inf are found by the covariance pass itself (CovarianceAccumulator.all_finite), not by a pass of
        # their own over the pixels first; a Scene (maybe a file read lazily) is checked block by block, so
        # that a bad file fails at its first bad block
        X, mask = check_fit_pixels(self, X, mask, finite=False)
        n_features = X.n_bands if isinstance(X, Scene) else np.shape(X)[-1]
        acc = CovarianceAccumulator(n_features)
        scene = isinstance(X, Scene)
        for block in self._blocks(X, mask):
            if scene and not np.all(np.isfinite(block)):
                raise ValueError("PCA input holds NaN/inf pixels; exclude them with mask=valid_pixel_mask(...)")
            acc.update(block)
        if not acc.all_finite():
            check_fit_pixels(self, given, given_mask)  # names the pixels holding NaN/inf
            raise ValueError("PCA input is too large for a float64 covariance (a band's sum overflowed); "
                             "scale the pixels down first")
        mean, cov = acc.finalize()
        evals, evecs = np.linalg.eigh(cov)  # ascending
        order = np.argsort(evals)[::-1]
        evals, evecs = np.clip(evals[order], 0.0, None), evecs[:, order]
        # deterministic signs: the largest |loading| of each component is positive
        big = np.argmax(np.abs(evecs), axis=0)
        evecs *= np.sign(evecs[big, np.arange(evecs.shape[1])])[None, :]
        k = self._choose_k(evals)
        count = self._fraction_or_count()
        if count is None:  # every component there is: min(pixels, bands), as scikit-learn's PCA keeps for None
            k = min(k, acc.n)
        if isinstance(count, int) and k > acc.n:
            # as scikit-learn's PCA refuses: the components past the pixel count have no variance, and
            # whitening scaled them by 1e6 (noise of 1e7 from 20 pixels and 30 components)
            raise ValueError(f"n_components={count} is more than the {acc.n} pixels fitted: at most "
                             f"min(pixels, bands) = {min(acc.n, n_features)} components; give a smaller "
                             f"n_components, a variance fraction such as 0.99, or more pixels")
        total = evals.sum()
        self.mean_ = mean
        self.covariance_ = cov
        self.eigenvalues_ = evals  # all of them, descending (spectral's PrincipalComponents.eigenvalues)
        self.components_ = evecs[:, :k].T.copy()  # (k, C), as scikit-learn
        self.explained_variance_ = evals[:k]
        self.explained_variance_ratio_ = evals[:k] / total if total > 0 else np.zeros(k)
        self.n_components_ = k
        self.n_features_in_ = n_features
        self.n_samples_seen_ = acc.n
        return self

    def _fraction_or_count(self) -> float | int | None:
        """``n_components`` checked: a variance fraction (float), a count (int) or None, before any work."""
        nc = self.n_components
        if nc is None:
            return None
        # numbers.Real / Integral: numpy scalars (np.float32(0.9) from a config array) count as well
        if isinstance(nc, bool) or not isinstance(nc, numbers.Real):
            raise TypeError(f"n_components must be an int, a float in (0, 1) or None; got {nc!r}")
        if not isinstance(nc, numbers.Integral) and not (float(nc).is_integer() and nc > 1):
            # a float is a variance fraction strictly inside (0, 1), as in scikit-learn's PCA: 1.0 is refused
            # there too (one component, or all of the variance?). Whole floats above 1 stay counts: zoo's
            # config layer has handed this estimator 30.0 for a float-typed 30
            if not 0.0 < nc < 1.0:
                raise ValueError(f"a float n_components is a variance fraction in (0, 1); got {nc!r} (an int "
                                 f"for a number of components, None to keep them all)")
            return float(nc)
        if nc < 1:
            raise ValueError(f"n_components must be >= 1 (or a variance fraction in (0, 1)); got {nc!r}")
        return int(nc)

    def _choose_k(self, evals: np.ndarray) -> int:
        c = evals.size
        nc = self._fraction_or_count()
        if nc is None:
            return c
        if isinstance(nc, float):
            ratio = np.cumsum(evals) / evals.sum()
            # side="right": at an exact tie scikit-learn keeps one more component (its share must exceed nc)
            return int(min(c, np.searchsorted(ratio, nc, side="right") + 1))
        k = nc
        if k > c:  # the default 30 on a narrower scene: keep every component there is
            warnings.warn(f"n_components={k} > {c} bands: keeping all {c} components",
                          stacklevel=user_stacklevel())
        return min(k, c)

    # -- transforming ----------------------------------------------------------------------------------
    def _project(self, P: np.ndarray, dtype: type = np.float32) -> np.ndarray:
        # P @ W - mean @ W rather than (P - mean) @ W: no centred copy of the pixels (scikit-learn's
        # PCA.transform does the same); float64 keeps the offset's cancellation far below float32 output
        W = self.components_.T  # (C, k)
        offset = self.mean_ @ W  # (k,)
        scale = np.sqrt(np.maximum(self.explained_variance_, 1e-12)) if self.whiten else None
        # Fortran-ordered pixels (a .mat cube's pixel_view) are multiplied as (W^T P^T)^T, with P^T
        # row-major: on Indian Pines (Zen 4, 2 cores) 4.6 ms against 10.9 for P @ W with OpenBLAS's
        # AVX-512 kernels, 6.2 against 7.0 with its AVX2 ones (OPENBLAS_CORETYPE=Haswell); the result is
        # Fortran-ordered too, so the map reshapes back without a copy
        fortran = P.flags.f_contiguous and not P.flags.c_contiguous
        out = np.empty((P.shape[0], W.shape[1]), dtype=dtype, order="F" if fortran else "C")
        rows = max(256, _PROJECT_BYTES // (8 * max(1, P.shape[1])))
        # a few pixels at a time, converted into one reused buffer: no float64 copy of the whole input, and
        # no fresh 8 MB block (whose pages fault in) per step; float64 pixels are read where they are
        scratch = None if P.dtype == np.float64 else np.empty((min(rows, P.shape[0]), P.shape[1]),
                                                              order="F" if fortran else "C")
        for i in range(0, P.shape[0], rows):
            B = P[i:i + rows]  # (n, C)
            if scratch is not None:
                np.copyto(scratch[:B.shape[0]], B)
                B = scratch[:B.shape[0]]
            Z = (W.T @ B.T).T if fortran else B @ W  # (n, k)
            Z -= offset
            if scale is not None:
                Z /= scale
            out[i:i + rows] = Z
        return out

    def transform(self, X, mask: np.ndarray | None = None):
        """``(H, W, C) -> (H, W, k)``, ``(N, C) -> (N, k)``; with ``mask`` on a cube: ``(N_mask, k)``.
        float64 input gives float64 output, anything else float32."""
        check_is_fitted(self, "components_")
        # a file read lazily is checked for NaN/inf block by block below, in the one pass that projects it
        lazy = isinstance(X, Scene) and X.layout is not None and mask is None
        X, mask = check_fit_pixels(self, X, mask, reset=False, finite=not lazy)
        dtype = out_dtype(X)
        if isinstance(X, Scene):
            if lazy:
                h, w, _ = X.shape
                out = np.empty((h, w, self.n_components_), dtype=np.float32)
                for sl, block in X.iter_row_chunks(self.chunk_bytes):
                    if not _all_finite(block):
                        bad = np.zeros((h, w), dtype=bool)
                        bad[sl] = ~np.isfinite(block).all(axis=2)
                        refuse_non_finite(bad, None, "mask=valid_pixel_mask(X)")
                    P, order = pixel_view(block)
                    out[sl] = self._project(P).reshape(block.shape[0], w, -1, order=order)
                return out
            X = X.cube
        if mask is not None:
            return self._project(as_pixels(X, mask), dtype)
        return apply_per_pixel(X, lambda P: self._project(P, dtype))

    def inverse_transform(self, Z):
        check_is_fitted(self, "components_")
        if band_count(Z) != self.n_components_:  # numpy's words were a matmul gufunc signature's
            raise ValueError(f"inverse_transform expected (N, {self.n_components_}) components or an (H, W, "
                             f"{self.n_components_}) cube of them (n_components_={self.n_components_}); got shape "
                             f"{np.shape(Z)}")

        def back(P):
            P = np.asarray(P, dtype=np.float64)
            if self.whiten:
                P = P * np.sqrt(self.explained_variance_)
            return P @ self.components_ + self.mean_

        return apply_per_pixel(Z, back)

    def transform_to_envi(self, scene: Scene, path: str | os.PathLike, *, dtype=np.float32) -> Path:
        """Project ``scene`` row block by row block and write the ``(H, W, k)`` result as a BIP ENVI file."""
        from zoo.hyperspectral.readers.envi import EnviWriter

        check_is_fitted(self, "components_")
        if not isinstance(scene, Scene):
            scene = Scene(cube=np.asarray(scene))
        # the band count as transform checks it (numpy's matmul signature was the message), the pixels' values
        # block by block below: a file read lazily is not read twice
        check_fit_pixels(self, scene, None, reset=False, finite=False)
        h, w, _ = scene.shape
        meta = {"description": f"zoo HyperspectralPCA: {self.n_components_} components of {scene.name}",
                "band names": [f"PC{i + 1}" for i in range(self.n_components_)]}
        with EnviWriter(path, (h, w, self.n_components_), dtype, metadata=meta) as writer:
            chunks = scene.iter_row_chunks(self.chunk_bytes)
            for sl, block in ProgressBar(chunks, disable=not self.progress, desc="pca transform", unit="chunk"):
                if not _all_finite(block):
                    # refused as transform refuses them (the writer keeps nothing): they were written as NaN
                    # components, with numpy's "invalid value encountered in matmul" the only word of it
                    bad = np.zeros((h, w), dtype=bool)
                    bad[sl] = ~np.isfinite(block).all(axis=2)
                    refuse_non_finite(bad, None, "transform(scene, mask=valid_pixel_mask(scene)), which gives "
                                      "the other pixels' components as rows; a file holds every pixel of the "
                                      "map, so repair them, or fill them before transform_to_envi "
                                      "(cube[~valid_pixel_mask(cube)] = 0)")
                P, order = pixel_view(block)
                writer.write(self._project(P).reshape(block.shape[0], w, -1, order=order))
        return writer.hdr

    def fit_transform(self, X, y=None, mask: np.ndarray | None = None):
        return self.fit(X, mask=mask).transform(X)

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """``pca0, pca1, ...``, one per component; ``input_features`` is only checked against the names
        ``fit`` saw."""
        # the mixin checks fit and input_features; its prefix is the class name (hyperspectralpca0), while
        # a Pipeline swapping scikit-learn's PCA for this one keeps PCA's column names
        names = super().get_feature_names_out(input_features)
        return np.asarray([f"pca{i}" for i in range(len(names))], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
