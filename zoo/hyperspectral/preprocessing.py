"""Preprocessing fitted on training pixels only: per-band standardisation, global min-max, water-band
removal for AVIRIS, and masks of NaN / no-data pixels.

Estimators follow scikit-learn (``fit`` / ``transform``); ``X`` is ``(N, C)`` pixels or an ``(H, W, C)``
cube, and ``mask`` (``(H, W)`` bool) picks the pixels ``fit`` may see, so test pixels never shape the
statistics (fitting on the whole scene is a leak the HybridSN paper's protocol has).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from zoo._stacklevel import user_stacklevel
from zoo.hyperspectral.scene import Scene

__all__ = [
    "AVIRIS_WATER_BANDS",
    "BandStandardizer",
    "MinMaxNormalizer",
    "apply_per_pixel",
    "as_pixels",
    "no_data_to_zero",
    "pixel_view",
    "remove_water_bands",
    "valid_pixel_mask",
    "water_band_mask",
]

# 0-based indices of the 20 water-absorption bands of the 220-band AVIRIS 92AV3C scene (bands 104-108,
# 150-163 and 220, 1-based), the ones Indian_pines_corrected leaves out.
AVIRIS_WATER_BANDS = tuple(range(103, 108)) + tuple(range(149, 163)) + (219,)
# absorption windows (nm) used when a scene has wavelengths: the cores of the H2O bands at 1.38 um and
# 1.87 um and the noisy end beyond 2.49 um, set so that AVIRIS's own band centres (92AV3C.spc) drop
# exactly the 20 bands above
WATER_WINDOWS_NM = ((1355.0, 1405.0), (1815.0, 1935.0), (2490.0, 1e9))


def as_pixels(X, mask: np.ndarray | None = None) -> np.ndarray:
    """``(N, C)`` pixels from ``(N, C)``, an ``(H, W, C)`` cube (rows where ``mask``) or a Scene."""
    if isinstance(X, Scene):
        X = X.cube
    X = np.asarray(X)
    if X.ndim == 3:
        if mask is None:
            return X.reshape(-1, X.shape[2])
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != X.shape[:2]:
            raise ValueError(f"mask must be (H, W) = {X.shape[:2]}; got {mask.shape}")
        return X[mask]
    if X.ndim == 2:
        if mask is not None:
            mask = np.asarray(mask, dtype=bool).reshape(-1)
            if mask.size != X.shape[0]:
                raise ValueError(f"mask must have one entry per pixel ({X.shape[0]}); got {mask.size}")
            return X[mask]
        return X
    raise ValueError(f"expected (N, C) pixels or an (H, W, C) cube; got shape {X.shape}")


def out_dtype(X) -> type:
    """The dtype a transform returns: float64 for float64 input (as scikit-learn's transformers), float32
    otherwise (a uint16 cube becomes float32: half the memory of float64, ample for sensor counts)."""
    return np.float64 if getattr(X, "dtype", None) == np.float64 else np.float32


def check_pixels(est: BaseEstimator, X, *, reset: bool, mask: np.ndarray | None = None,
                 hint: str = "mask=valid_pixel_mask(X)", finite: bool = True):
    """Validate what ``fit``/``transform`` receive, as scikit-learn estimators do: ``(N, C)`` pixels go through
    ``validate_data`` (finite, numeric, 2-D, not sparse, the fitted band count); an ``(H, W, C)`` cube is
    checked the same way without copying it; a :class:`Scene` passes as is (it may be read lazily), its
    pixels checked for NaN/inf one block of rows at a time where it is transformed (``fit`` checks them as it reads).

    ``mask`` (``(H, W)``, for a cube): only the pixels it selects must be finite, since only they are used
    (the NaN no-data pixels it leaves out are the reason it is there). ``hint`` says in the error how to
    leave such pixels out. ``finite=False`` leaves NaN/inf to the caller, whose own pass over the pixels
    finds them (see :class:`zoo.hyperspectral.pca.CovarianceAccumulator`)."""
    if reset and (isinstance(X, Scene) or getattr(X, "ndim", None) == 3):
        # a cube or Scene has no column names: names an earlier DataFrame fit saw would otherwise outlive this
        # fit (12 names for 5 bands from get_feature_names_out, and a warning at every array transform), where
        # scikit-learn's validate_data forgets them at a fit on an array
        with contextlib.suppress(AttributeError):
            del est.feature_names_in_
    if isinstance(X, Scene):
        if not reset and X.n_bands != getattr(est, "n_features_in_", X.n_bands):
            raise ValueError(f"X has {X.n_bands} bands, but {type(est).__name__} is expecting "
                             f"{est.n_features_in_} features as input")
        if finite and not reset:  # fit checks a Scene's pixels itself, as it reads them
            # a Scene's NaN pixels came out of transform as NaN, where the same cube as an array is refused
            bad = _non_finite_rows(X, mask)
            if bad is not None:
                refuse_non_finite(bad, mask, hint)
        return X
    if getattr(X, "ndim", None) == 3 and isinstance(X, np.ndarray):
        if X.dtype.kind not in "biuf":
            raise ValueError(f"a cube must hold real numbers; got dtype {X.dtype}")
        if finite and X.dtype.kind == "f" and not _all_finite(X):
            refuse_non_finite(~np.isfinite(X).all(axis=2), mask, hint)
        if reset:
            est.n_features_in_ = X.shape[2]
        elif X.shape[2] != est.n_features_in_:
            raise ValueError(f"X has {X.shape[2]} bands, but {type(est).__name__} is expecting "
                             f"{est.n_features_in_} features as input")
        return X
    # integer pixels (sensor counts) become float32, as an integer cube does (out_dtype); validate_data's first
    # choice, float64, doubled their memory
    integers = isinstance(getattr(X, "dtype", None), np.dtype) and X.dtype.kind in "biu"
    return validate_data(est, X, reset=reset, dtype=np.float32 if integers else [np.float64, np.float32],
                         ensure_all_finite=finite)


def _non_finite_rows(scene: Scene, mask: np.ndarray | None) -> np.ndarray | None:
    """The ``(H, W)`` map of a float Scene's pixels holding NaN/inf, read one block of rows at a time (a file
    opened lazily never whole); None when there is none (rows ``mask`` selects no pixel of are not read)."""
    if np.dtype(scene.cube.dtype).kind != "f":
        return None
    rows = None
    if mask is not None:
        hit = np.flatnonzero(_mask_of(scene.cube, mask).any(axis=1))
        if not hit.size:
            return None
        rows = slice(int(hit[0]), int(hit[-1]) + 1)
    bad = None
    for sl, block in scene.iter_row_chunks(VALID_CHUNK_BYTES, dtype=None, rows=rows):
        if not _all_finite(block):
            bad = np.zeros(scene.shape[:2], dtype=bool) if bad is None else bad
            bad[sl] = ~np.isfinite(block).all(axis=2)
    return bad


def refuse_non_finite(bad: np.ndarray, mask: np.ndarray | None, hint: str) -> None:
    """The error for the NaN/inf pixels of ``bad`` (an ``(H, W)`` map), those ``mask`` selects if given."""
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != bad.shape:
            raise ValueError(f"mask must be (H, W) = {bad.shape}; got {mask.shape}")
        bad = bad & mask
    if bad.any():
        where = "of the pixels mask selects " if mask is not None else ""
        raise ValueError(f"Input X contains NaN or infinity in {describe_pixels(bad)} {where}"
                         f"(H x W = {bad.shape[0]} x {bad.shape[1]}); exclude those pixels with {hint}")


def _all_finite(X: np.ndarray) -> bool:
    """Whether a float array holds no NaN or infinity, in one pass and without a temporary the size of ``X``
    (``np.isfinite(X).all()`` writes one, whose pages fault in at every call: 1.5-4.7 ms against 1.3-1.5 ms
    for the 145x145x200 Indian Pines cube in float64 on the AMX Xeon): a NaN or an infinity makes the sum non-finite, and only
    a sum of finite values too large for float64 needs the elementwise look."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.sum(X, dtype=np.float64)
    return bool(np.isfinite(total)) or bool(np.isfinite(X).all())


def check_fit_pixels(est: BaseEstimator, X, mask: np.ndarray | None, *, reset: bool = True,
                     hint: str = "mask=valid_pixel_mask(X)", finite: bool = True):
    """``(X, mask)`` for a method taking ``mask=``: :func:`check_pixels` on the pixels ``mask`` selects.

    ``(N, C)`` pixels come back as their selected rows (and ``mask`` as None): scikit-learn's checks see
    only those rows, so a NaN row the mask leaves out is no error."""
    if mask is not None and not isinstance(X, Scene) and np.ndim(X) == 2:
        # a DataFrame's rows stay a DataFrame: as an array its column names were lost, and a later transform of
        # the columns in another order was taken without a word
        rows = _frame_rows(X, mask) if hasattr(X, "iloc") and hasattr(X, "columns") else as_pixels(X, mask)
        return check_pixels(est, rows, reset=reset, hint=hint, finite=finite), None
    return check_pixels(est, X, reset=reset, mask=mask, hint=hint, finite=finite), mask


def _frame_rows(frame: Any, mask: Any) -> Any:
    """The rows of a DataFrame of ``(N, C)`` pixels where ``mask`` (one entry per row), as a DataFrame."""
    mask = np.asarray(mask, dtype=bool).reshape(-1)
    if mask.size != len(frame):
        raise ValueError(f"mask must have one entry per pixel ({len(frame)}); got {mask.size}")
    return frame.iloc[np.flatnonzero(mask)]


def _mask_of(cube: np.ndarray, mask) -> np.ndarray:
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != cube.shape[:2]:
        raise ValueError(f"mask must be (H, W) = {cube.shape[:2]}; got {mask.shape}")
    return mask


def describe_pixels(where: np.ndarray, limit: int = 3) -> str:
    """``"2 pixels (at (row, col) (0, 3), (5, 1))"``: how many of an ``(H, W)`` mask, and where the first are."""
    where = np.asarray(where, dtype=bool)
    n = int(where.sum())
    first = ", ".join(f"({r}, {c})" for r, c in np.argwhere(where)[:limit])
    more = ", ..." if n > limit else ""
    return f"{n} pixel{'s' if n != 1 else ''} (at (row, col) {first}{more})"


def pixel_view(cube: np.ndarray) -> tuple[np.ndarray, str]:
    """``(P, order)``: the ``(N, C)`` pixels of an ``(H, W, C)`` cube and the reshape order that maps rows of
    ``P`` (or of anything computed per row of it) back to ``(H, W, ...)``.

    A view, not a copy, for C- and Fortran-ordered cubes. MATLAB files hold their cubes in Fortran order
    (Indian Pines from ``.mat`` is one), and ``cube.reshape(-1, C)`` copies such a cube pixel by pixel:
    12 ms of a 145x145x200 float64 scene, repeated by every step of a pipeline. Rows come in Fortran
    order then (pixel ``h + H * w``), which per-band statistics and per-pixel maps do not care about;
    :func:`as_pixels` keeps the C order (pixel ``h * W + w``) for callers that index pixels.
    """
    h, w, c = cube.shape
    if cube.flags.f_contiguous and not cube.flags.c_contiguous:
        return cube.reshape(h * w, c, order="F"), "F"
    return cube.reshape(h * w, c), "C"


def band_count(X: Any) -> int | None:
    """The last axis's length of ``(N, C)`` pixels, an ``(H, W, C)`` cube or a Scene (None for a scalar)."""
    if isinstance(X, Scene):
        return X.n_bands
    return int(np.shape(X)[-1]) if np.ndim(X) else None


def apply_per_pixel(X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Apply a per-pixel ``fn((N, C)) -> (N, K)`` keeping the input's layout (a Fortran-ordered cube gives
    a Fortran-ordered result)."""
    if isinstance(X, Scene):
        X = X.cube
    X = np.asarray(X)
    if X.ndim == 3:
        h, w, _ = X.shape
        P, order = pixel_view(X)
        return fn(P).reshape(h, w, -1, order=order)
    if X.ndim == 2:
        return fn(X)
    raise ValueError(f"expected (N, C) pixels or an (H, W, C) cube; got shape {X.shape}")


class BandStandardizer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Zero mean, unit variance per band, from the pixels ``fit`` sees (``with_std=False``: centring only).

    Its output features are its input bands (``get_feature_names_out``), so ``set_output(transform="pandas")``
    works on it and on a Pipeline holding it, as on scikit-learn's ``StandardScaler``."""

    def __init__(self, with_std: bool = True, eps: float = 1e-12) -> None:
        self.with_std = with_std
        self.eps = eps

    def fit(self, X, y=None, mask: np.ndarray | None = None):
        X, mask = check_fit_pixels(self, X, mask)
        P = as_pixels(X, mask).astype(np.float64)
        if P.shape[0] < 1:
            raise ValueError("BandStandardizer.fit: no pixels to fit on (empty mask?)")
        if isinstance(X, Scene) and not np.isfinite(P).all():  # arrays were checked; a Scene passes unread
            raise ValueError(f"BandStandardizer.fit: {int((~np.isfinite(P).all(axis=1)).sum())} of the pixels to fit "
                             f"on hold NaN/inf; exclude them with mask=valid_pixel_mask(scene)")
        self.mean_ = P.mean(axis=0)
        var = P.var(axis=0) if self.with_std else np.ones(P.shape[1])
        # a constant band is centred, not blown up. Its variance is the rounding error of its mean (4e-11 for a
        # float64 band of 123.456, over eps): constant where within that error's bound, as StandardScaler judges
        n, e = P.shape[0], np.finfo(np.float64).eps
        constant = var <= n * e * var + (n * self.mean_ * e) ** 2
        std = np.sqrt(var)
        self.scale_ = np.where(constant | (std <= self.eps), 1.0, std)
        self.n_features_in_ = P.shape[1]
        return self

    def transform(self, X):
        check_is_fitted(self, "mean_")
        X = check_pixels(self, X, reset=False, hint="X[valid_pixel_mask(X)] (transform the valid pixels only)")
        dtype = out_dtype(X)
        return apply_per_pixel(X, lambda P: ((P - self.mean_) / self.scale_).astype(dtype))

    def inverse_transform(self, X):
        check_is_fitted(self, "mean_")
        if band_count(X) != self.n_features_in_:  # numpy said "operands could not be broadcast together"
            raise ValueError(f"inverse_transform expected (N, {self.n_features_in_}) pixels or an (H, W, "
                             f"{self.n_features_in_}) cube (the {self.n_features_in_} bands fit saw); got shape "
                             f"{np.shape(X)}")
        return apply_per_pixel(X, lambda P: P * self.scale_ + self.mean_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class MinMaxNormalizer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """One global min-max to ``[0, 1]`` over all bands (keeps the spectral shape, unlike per-band scaling).

    Its input is checked as :class:`BandStandardizer`'s: ``transform`` refuses another band count than
    ``fit`` saw, and NaN/inf pixels are an error (leave them out with ``mask=valid_pixel_mask(X)``)."""

    def fit(self, X, y=None, mask: np.ndarray | None = None):
        X, mask = check_fit_pixels(self, X, mask)
        P = as_pixels(X, mask)
        if P.size == 0:
            raise ValueError("MinMaxNormalizer.fit: no pixels to fit on (empty mask?)")
        if isinstance(X, Scene) and not np.isfinite(P).all():  # arrays were checked; a Scene passes unread
            raise ValueError(f"MinMaxNormalizer.fit: {int((~np.isfinite(P).all(axis=1)).sum())} of the pixels to fit "
                             f"on hold NaN/inf; exclude them with mask=valid_pixel_mask(scene)")
        self.min_ = float(P.min())
        self.max_ = float(P.max())
        self.n_features_in_ = P.shape[1]
        return self

    def transform(self, X):
        check_is_fitted(self, "min_")
        X = check_pixels(self, X, reset=False, hint="X[valid_pixel_mask(X)] (transform the valid pixels only)")
        span = self.max_ - self.min_ or 1.0
        dtype = out_dtype(X)
        return apply_per_pixel(X, lambda P: ((P - self.min_) / span).astype(dtype))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def water_band_mask(n_bands: int | None = None, wavelengths: np.ndarray | None = None) -> np.ndarray:
    """Bool ``(C,)``: True for bands to keep.

    With wavelengths (nm) the absorption windows decide; without, only the 220-band AVIRIS layout is known.
    """
    if wavelengths is not None:
        wl = np.asarray(wavelengths, dtype=np.float64)
        keep = np.ones(wl.size, dtype=bool)
        for lo, hi in WATER_WINDOWS_NM:
            keep &= ~((wl >= lo) & (wl < hi))
        return keep
    if n_bands == 220:
        keep = np.ones(220, dtype=bool)
        keep[list(AVIRIS_WATER_BANDS)] = False
        return keep
    raise ValueError(
        f"cannot locate water-absorption bands for a {n_bands}-band scene without wavelengths; "
        "give wavelengths (nm) or a 220-band AVIRIS cube"
    )


def remove_water_bands(scene: Scene) -> Scene:
    """The scene without its water-absorption bands (a copy of the kept bands)."""
    keep = water_band_mask(scene.n_bands, scene.wavelengths)
    wl = None if scene.wavelengths is None else scene.wavelengths[keep]
    return scene.with_cube(np.asarray(scene.cube)[:, :, keep], wl)


# rows of a cube checked at once: the bool temporaries of a block stay small whatever the scene's size
VALID_CHUNK_BYTES = 16 << 20


def scene_nodata(scene, nodata: float | None = None) -> float | None:
    """``nodata``, else a Scene's ENVI ``data ignore value`` (None when it has none)."""
    if nodata is None and isinstance(scene, Scene) and "data ignore value" in scene.metadata:
        return float(scene.metadata["data ignore value"])
    return nodata


def valid_pixel_mask(cube, nodata: float | None = None, rows: slice | None = None) -> np.ndarray:
    """``(H, W)`` bool: False where any band is NaN/inf, or where every band equals ``nodata``; with ``rows``
    (a slice), the ``(len(rows), W)`` mask of those rows only.

    Read one block of rows at a time (a lazily opened file through short-lived mappings), so memory stays
    near :data:`VALID_CHUNK_BYTES` whatever the scene's size."""
    nodata = scene_nodata(cube, nodata)
    if not isinstance(cube, Scene):
        cube = np.asarray(cube)
        if cube.ndim != 3:
            raise ValueError(f"expected an (H, W, C) cube; got shape {cube.shape}")
    h, w, _ = cube.shape
    start, stop, _ = (rows or slice(0, h)).indices(h)
    ok = np.ones((max(0, stop - start), w), dtype=bool)
    if ok.size == 0 or min(cube.shape) == 0:
        return ok
    scene = cube if isinstance(cube, Scene) else Scene(cube)
    for sl, block in scene.iter_row_chunks(VALID_CHUNK_BYTES, dtype=None, rows=slice(start, stop)):
        ok[sl.start - start:sl.stop - start] = _valid_block(block, nodata)
    return ok


def _valid_block(block: np.ndarray, nodata: float | None) -> np.ndarray:
    """:func:`valid_pixel_mask` of one ``(h, W, C)`` block, compared in its stored dtype."""
    ok = np.ones(block.shape[:2], dtype=bool)
    if block.dtype.kind in "fc":
        ok &= np.isfinite(block).all(axis=2)
    if nodata is not None:
        ok &= ~(block == nodata).all(axis=2)
    return ok


def nan_bands(scene: Scene | np.ndarray, pixels: np.ndarray, share: float = 0.5
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(bands, counts, rest)``: the bands NaN/inf in more than ``share`` of the pixels of ``pixels`` (an
    ``(H, W)`` mask), how many of those pixels each of them spoils, and the ``(H, W)`` mask of the pixels
    still holding NaN/inf in some other band.

    A band that is NaN everywhere (a water-absorption band blanked by a processing chain) takes every
    pixel's spectrum with it: the cube needs that band dropped, not every pixel unlabelled. Read one block
    of rows at a time, as :func:`valid_pixel_mask`."""
    scene = scene if isinstance(scene, Scene) else Scene(np.asarray(scene))
    pixels = np.asarray(pixels, dtype=bool)
    counts = np.zeros(scene.n_bands, dtype=np.int64)
    hit = np.flatnonzero(pixels.any(axis=1))
    if scene.cube.dtype.kind not in "fc" or not hit.size:
        return np.zeros(0, dtype=np.int64), counts[:0], np.zeros_like(pixels)
    span = slice(int(hit[0]), int(hit[-1]) + 1)
    for sl, block in scene.iter_row_chunks(VALID_CHUNK_BYTES, dtype=None, rows=span):
        counts += (~np.isfinite(block[pixels[sl]])).sum(axis=0)
    bands = np.flatnonzero(counts > share * pixels.sum())
    rest = np.zeros_like(pixels)
    if bands.size:
        others = np.setdiff1d(np.arange(scene.n_bands), bands)
        for sl, block in scene.iter_row_chunks(VALID_CHUNK_BYTES, dtype=None, rows=span):
            rest[sl] = pixels[sl] & ~np.isfinite(block[:, :, others]).all(axis=2)
    return bands, counts[bands], rest


def describe_nan_bands(scene: Scene | np.ndarray, pixels: np.ndarray, what: str) -> str:
    """A sentence naming the bands NaN/inf in most of ``what`` (the pixels of ``pixels``, e.g. "labelled
    pixels") and how to drop them (see :func:`nan_bands`); "" when the NaN/inf are not in whole bands."""
    bands, counts, rest = nan_bands(scene, pixels)
    if not bands.size:
        return ""
    c, n, many = (scene.shape if isinstance(scene, Scene) else np.shape(scene))[2], int(np.sum(pixels)), bands.size > 1
    listed = ", ".join(str(b) for b in bands[:20]) + (", ..." if bands.size > 20 else "")
    drop = f"[{', '.join(str(b) for b in bands)}]" if bands.size <= 20 else "bad_bands"
    spoilt = f"{counts.min()}-{counts.max()}" if counts.min() != counts.max() else str(counts[0])
    text = (f"band{'s' if many else ''} {listed} (0-based, of {c}) {'are' if many else 'is'} NaN/inf in {spoilt} of "
            f"the {n} {what}: {'bad bands' if many else 'a bad band'} (water absorption, a dead detector), not bad "
            f"pixels. Drop {'them' if many else 'it'} from the cube: cube[..., keep] with "
            f"keep = np.setdiff1d(np.arange({c}), {drop}) (scene.with_cube(scene.cube[..., keep]) for a Scene), or "
            f"zoo.hyperspectral.remove_water_bands(scene) for AVIRIS water bands")
    if rest.any():
        one = rest.sum() == 1
        text += (f"; without {'them' if many else 'it'} {describe_pixels(rest)} still hold{'s' if one else ''} "
                 f"NaN/inf: give {'it' if one else 'them'} label 0 or repair {'it' if one else 'them'}")
    return text


def no_data_to_zero(scene: Scene | np.ndarray, sel: np.ndarray) -> np.ndarray:
    """``sel`` without the pixels that have no spectrum (see :func:`valid_pixel_mask`), with a warning that
    counts them: a label map gives them 0, the label of no data, as ENVI leaves pixels equal to its
    ``data ignore value`` unclassified. A classifier would otherwise fail on the whole map (NaN), or
    give such a pixel a made-up class."""
    import warnings

    sel = np.asarray(sel, dtype=bool)
    hw = tuple((scene.shape if isinstance(scene, Scene) else np.shape(scene))[:2])
    if sel.shape != hw:
        raise ValueError(f"the pixels to classify must be an (H, W) = {hw} mask; got shape {sel.shape}")
    bad = np.zeros_like(sel)
    hit = np.flatnonzero(sel.any(axis=1))
    if hit.size:  # only the rows holding selected pixels are read: a few windows of a large file stay cheap
        span = slice(int(hit[0]), int(hit[-1]) + 1)
        bad[span] = sel[span] & ~valid_pixel_mask(scene, rows=span)
    if bad.any():
        bands = describe_nan_bands(scene, sel, "pixels to classify")
        warnings.warn(f"{int(bad.sum())} of the {int(sel.sum())} pixels to classify have no spectrum (NaN/inf, or "
                      f"the no-data value in every band): they get label 0 (no data) in the map"
                      + (f". {bands[0].upper()}{bands[1:]}" if bands else ""), stacklevel=user_stacklevel())
        return sel & ~bad
    return sel
