"""HyperspectralPCA: agreement with spectral.principal_components, masks, variance fractions, out of core."""

from __future__ import annotations

import numpy as np
import pytest
import spectral
from spectral.io import envi

from zoo.hyperspectral import HyperspectralPCA, Scene, open_envi
from zoo.hyperspectral import pca as pca_module
from zoo.hyperspectral.preprocessing import (
    BandStandardizer,
    MinMaxNormalizer,
    _all_finite,
    pixel_view,
    remove_water_bands,
    valid_pixel_mask,
    water_band_mask,
)
from zoo.hyperspectral.synthetic import make_scene


def _cube(h=20, w=18, c=12, seed=0):
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(c, c)) * np.linspace(3, 0.1, c)[:, None]  # distinct variances per direction
    return (rng.normal(size=(h, w, c)) @ mix + 50).astype(np.float64)


def test_pca_matches_spectral():
    cube = _cube()
    ours = HyperspectralPCA(n_components=None).fit(cube)
    ref = spectral.principal_components(cube)
    np.testing.assert_allclose(ours.eigenvalues_, np.real(ref.eigenvalues), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.mean_, ref.mean, rtol=1e-12)
    z_ours = ours.transform(cube)  # (H, W, C)
    z_ref = np.asarray(ref.transform(cube))
    for k in range(cube.shape[2]):  # equal up to each component's sign
        sign = np.sign(np.dot(z_ours[..., k].ravel(), z_ref[..., k].ravel()))
        np.testing.assert_allclose(z_ours[..., k], sign * z_ref[..., k], rtol=1e-4, atol=1e-4)
    # reduced to k components, both agree on the retained subspace
    k = 4
    red = HyperspectralPCA(n_components=k).fit(cube)
    ref_k = ref.reduce(num=k)
    assert red.components_.shape == (k, cube.shape[2])
    np.testing.assert_allclose(np.abs(red.components_ @ np.real(ref_k.eigenvectors)), np.eye(k), atol=1e-6)


def test_pca_mask_fraction_whiten_and_sklearn_api():
    cube = _cube()
    mask = np.zeros(cube.shape[:2], bool)
    mask[:10] = True
    pca = HyperspectralPCA(n_components=0.95, whiten=True).fit(cube, mask=mask)
    ratio = np.cumsum(pca.eigenvalues_) / pca.eigenvalues_.sum()
    assert ratio[pca.n_components_ - 1] >= 0.95 > (ratio[pca.n_components_ - 2] if pca.n_components_ > 1 else 0)
    assert pca.n_samples_seen_ == mask.sum()
    z = pca.transform(cube, mask=mask)  # (N_mask, k), unit variance when whitened
    np.testing.assert_allclose(z.var(axis=0, ddof=1), 1.0, rtol=1e-3)
    full = HyperspectralPCA(n_components=None, whiten=True).fit(cube)
    np.testing.assert_allclose(full.inverse_transform(full.transform(cube[:2])), cube[:2], atol=1e-3)
    from sklearn.base import clone

    assert clone(pca).get_params()["n_components"] == 0.95
    # more components than bands keeps every component, and says so (the default 30 on a narrow scene)
    with pytest.warns(UserWarning, match=f"n_components=500 > {cube.shape[-1]} bands"):
        assert HyperspectralPCA(n_components=500).fit(cube).n_components_ == cube.shape[-1]
    with pytest.raises(ValueError, match="n_components"):
        HyperspectralPCA(n_components=0).fit(cube)
    with pytest.raises(ValueError, match="NaN"):
        bad = cube.copy()
        bad[0, 0, 0] = np.nan
        HyperspectralPCA().fit(bad)


def test_fortran_ordered_and_integer_cubes_give_the_same_pca_and_maps():
    # MATLAB files hold cubes in Fortran order (Indian Pines from .mat); their pixels are read in place
    cube = _cube(21, 13, 9)
    fortran = np.asfortranarray(cube)
    view, order = pixel_view(fortran)
    assert order == "F" and np.shares_memory(view, fortran) and pixel_view(cube)[1] == "C"
    np.testing.assert_array_equal(view.reshape(21, 13, 9, order="F"), cube)
    ref = HyperspectralPCA(n_components=4).fit(cube)
    kept = fortran.copy()
    got = HyperspectralPCA(n_components=4).fit(fortran)
    np.testing.assert_array_equal(fortran, kept)  # centred in a copy, never in the caller's array
    np.testing.assert_allclose(got.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(got.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(got.transform(fortran), ref.transform(cube), rtol=1e-10, atol=1e-10)
    full = HyperspectralPCA(n_components=None).fit(fortran)
    np.testing.assert_allclose(full.inverse_transform(full.transform(fortran)), cube, atol=1e-8)
    # integers (a uint16 radiance cube) are converted a block at a time, to the same fit
    ints = np.asfortranarray(np.round(cube * 100).astype(np.uint16))
    as_float = HyperspectralPCA(n_components=4).fit(ints.astype(np.float64))
    np.testing.assert_allclose(HyperspectralPCA(n_components=4).fit(ints).eigenvalues_, as_float.eigenvalues_,
                               rtol=1e-10)
    np.testing.assert_allclose(HyperspectralPCA(n_components=4).fit(ints).transform(ints),
                               as_float.transform(ints.astype(np.float64)), rtol=1e-5, atol=1e-4)
    # integer pixels (N, C) come out float32 as the integer cube does (they were float64), from the same fit
    pixels = ints.reshape(-1, ints.shape[2])
    fitted = HyperspectralPCA(n_components=4).fit(pixels)
    assert fitted.transform(pixels).dtype == np.float32 and BandStandardizer().fit(pixels).transform(pixels).dtype \
        == np.float32
    np.testing.assert_allclose(fitted.eigenvalues_, as_float.eigenvalues_, rtol=1e-10)
    # blocks of a few pixels (chunk_bytes) and the per-band standardiser on a Fortran cube agree too
    small = HyperspectralPCA(n_components=4, chunk_bytes=9 * 8 * 7).fit(fortran)
    np.testing.assert_allclose(small.eigenvalues_, ref.eigenvalues_, rtol=1e-9)
    std = BandStandardizer().fit(cube)
    np.testing.assert_allclose(std.transform(fortran), std.transform(cube), rtol=1e-12)


def test_a_constant_float64_band_is_centred_not_blown_up_as_scikit_learn_does():
    """The float64 mean of a band of 123.456 leaves a std of 4e-11 (rounding), over the fixed 1e-12: the band was
    divided by it, its pixels standardised to 1 and a new pixel 0.001 higher to 2.5e7."""
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    pixels = np.column_stack([rng.normal(size=200), np.full(200, 123.456), np.zeros(200), rng.normal(5, 1e-3, 200)])
    ours, theirs = BandStandardizer().fit(pixels), StandardScaler().fit(pixels)
    np.testing.assert_allclose(ours.scale_, theirs.scale_, rtol=1e-12)
    new = pixels[:3] + 0.001
    np.testing.assert_allclose(ours.transform(new), theirs.transform(new), rtol=1e-9, atol=1e-9)
    assert np.abs(ours.transform(pixels)[:, 1:3]).max() < 1e-9


@pytest.mark.parametrize("layout", ["C", "F", "uint16", "pixels"])
def test_covariance_centred_a_few_pixels_at_a_time_equals_numpy(monkeypatch, layout):
    # the scatter is centred in one reused scratch block (zoo.hyperspectral.pca._SCATTER_BYTES); 7 pixels a
    # block here, so a 21x13 cube takes 39 blocks, the last one short
    monkeypatch.setattr(pca_module, "_SCATTER_BYTES", 9 * 8 * 7)
    cube = _cube(21, 13, 9)
    X = {"C": cube, "F": np.asfortranarray(cube), "uint16": np.asfortranarray(np.round(cube * 100).astype(np.uint16)),
         "pixels": cube.reshape(-1, 9)}[layout]
    kept = X.copy()
    got = HyperspectralPCA(n_components=None).fit(X)
    np.testing.assert_array_equal(X, kept)  # the caller's pixels are read, never written
    P = X.reshape(-1, 9).astype(np.float64)
    np.testing.assert_allclose(got.mean_, P.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(got.covariance_, np.cov(P.T), rtol=1e-10, atol=1e-10 * np.abs(np.cov(P.T)).max())
    assert got.n_samples_seen_ == P.shape[0]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_found_by_the_covariance_pass_names_the_pixel(monkeypatch, bad):
    # fit checks NaN/inf in its one pass over the pixels (CovarianceAccumulator.all_finite), not beforehand: a
    # bad value in a late block (and not in the block the shift comes from) is still refused, saying where
    monkeypatch.setattr(pca_module, "_SCATTER_BYTES", 9 * 8 * 7)
    cube = _cube(21, 13, 9)
    cube[17, 11, 5] = bad
    for X in (cube, np.asfortranarray(cube)):
        with pytest.raises(ValueError, match=r"NaN or infinity in 1 pixel \(at \(row, col\) \(17, 11\)\)"):
            HyperspectralPCA().fit(X)
    with pytest.raises(ValueError, match="Input X contains (NaN|infinity)"):  # (N, C) pixels: scikit-learn's words
        HyperspectralPCA().fit(cube.reshape(-1, 9))
    mask = np.ones(cube.shape[:2], bool)
    mask[17, 11] = False  # the pixel the mask leaves out may hold anything
    assert np.isfinite(HyperspectralPCA(n_components=3).fit(cube, mask=mask).components_).all()
    assert np.isfinite(HyperspectralPCA(n_components=3).fit(cube.reshape(-1, 9), mask=mask.ravel()).components_).all()


def test_finite_pixels_too_large_for_a_float64_sum_are_not_called_nan():
    huge = np.full((4, 5, 3), 1e307)
    huge[..., 1] = -1e307
    with np.errstate(over="ignore"):
        assert not np.isfinite(huge.sum())
    assert _all_finite(huge) and not _all_finite(np.where(np.eye(4, 5, dtype=bool)[..., None], np.nan, huge))
    with pytest.raises(ValueError, match="too large for a float64 covariance"):
        HyperspectralPCA().fit(huge)
    with np.errstate(over="ignore"):
        BandStandardizer(with_std=False).fit(huge)  # checked as finite: no NaN/inf error


def test_out_of_core_pca_equals_in_memory(tmp_path):
    cube = _cube(33, 17, 10).astype(np.float32)
    envi.save_image(str(tmp_path / "big.hdr"), cube, interleave="bsq", byteorder=1, force=True)
    scene = open_envi(tmp_path / "big.hdr")
    tiny = 17 * 10 * 8 * 3  # three rows per chunk: 11 chunks, each mapped and unmapped on its own
    ooc = HyperspectralPCA(n_components=5, chunk_bytes=tiny).fit(scene)
    mem = HyperspectralPCA(n_components=5).fit(cube.astype(np.float64))
    np.testing.assert_allclose(ooc.eigenvalues_, mem.eigenvalues_, rtol=1e-9)
    np.testing.assert_allclose(ooc.components_, mem.components_, atol=1e-9)
    hdr = ooc.transform_to_envi(scene, tmp_path / "reduced.hdr")
    out = open_envi(hdr)
    assert out.shape == (33, 17, 5) and out.layout.interleave == "bip"
    np.testing.assert_allclose(np.asarray(out.cube), mem.transform(cube), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(ooc.transform(scene), mem.transform(cube), rtol=1e-5, atol=1e-4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.hdr", "big.img", "reduced.hdr", "reduced.img"]


def test_transform_to_envi_refuses_nan_pixels_as_transform_does(tmp_path):
    """Before: transform refused a scene holding NaN/inf pixels, and transform_to_envi wrote their components as NaN,
    with numpy's "invalid value encountered in matmul" the only word of it; a scene of other bands failed in
    numpy's matmul signature."""
    cube = _cube(9, 7, 6).astype(np.float32)
    pca = HyperspectralPCA(n_components=3).fit(cube)
    bad = cube.copy()
    bad[2, 3, 4], bad[0, 0, :] = np.nan, np.inf
    envi.save_image(str(tmp_path / "bad.hdr"), bad, interleave="bsq", force=True)
    said = r"NaN or infinity in 2 pixels \(at \(row, col\) \(0, 0\), \(2, 3\)\)"
    with pytest.raises(ValueError, match=said):
        pca.transform(Scene(cube=bad))
    lazy = HyperspectralPCA(n_components=3, chunk_bytes=7 * 6 * 8).fit(cube)  # a row a block
    for est, scene in ((pca, Scene(cube=bad)), (lazy, open_envi(tmp_path / "bad.hdr"))):
        out = tmp_path / "out.hdr"
        with pytest.raises(ValueError, match=said if est is pca else r"NaN or infinity in 1 pixel \(at \(row, col\) "
                                                                     r"\(0, 0\)\).*fill them before transform_to_envi"):
            est.transform_to_envi(scene, out)
        assert not out.exists() and not out.with_suffix(".img").exists()  # nothing half written
    with pytest.raises(ValueError, match="X has 5 bands, but HyperspectralPCA is expecting 6 features"):
        pca.transform_to_envi(Scene(cube=cube[..., :5]), tmp_path / "five.hdr")
    bad[~valid_pixel_mask(bad)] = 0  # the way out it names
    hdr = pca.transform_to_envi(Scene(cube=bad), tmp_path / "filled.hdr")
    assert np.isfinite(np.asarray(open_envi(hdr).cube)).all()


def test_preprocessing_fitted_on_training_pixels_only():
    scene = make_scene(16, 16, 20, 3, seed=2)
    mask = np.zeros((16, 16), bool)
    mask[:8] = True
    std = BandStandardizer().fit(scene.cube, mask=mask)
    np.testing.assert_allclose(std.mean_, scene.cube[:8].reshape(-1, 20).mean(0), rtol=1e-6)
    z = std.transform(scene.cube)
    np.testing.assert_allclose(z[:8].reshape(-1, 20).mean(0), 0, atol=1e-4)
    mm = MinMaxNormalizer().fit(scene.cube, mask=mask)
    assert mm.transform(scene.cube[:8]).min() == pytest.approx(0) and mm.transform(scene.cube[:8]).max() == pytest.approx(1)
    keep = water_band_mask(220)
    assert keep.sum() == 200 and not keep[[103, 107, 149, 162, 219]].any() and keep[[102, 108, 148, 163]].all()
    wl_scene = Scene(cube=np.zeros((2, 2, 5), np.float32), wavelengths=[500, 1380, 1600, 1900, 2200])
    assert remove_water_bands(wl_scene).wavelengths.tolist() == [500, 1600, 2200]
    with pytest.raises(ValueError, match="water"):
        water_band_mask(100)
    cube = np.ones((3, 3, 2), np.float32)
    cube[0, 0, 1] = np.nan
    cube[1, 1] = -9999
    assert valid_pixel_mask(cube, nodata=-9999).sum() == 7


def test_aviris_band_table_water_windows(shared_data):
    """The 92AV3C band table's centres, with the wavelength rule, drop the same bands as the index list."""
    spc = shared_data / "hyperspectral" / "indian_pines" / "92AV3C.spc"
    if not spc.exists():
        pytest.skip(f"data not found: {spc}")
    rows = [line.split() for line in spc.read_text().splitlines()[2:] if line.strip()]
    centres = np.array([float(r[0]) for r in rows])
    assert centres.size == 220
    by_wl = water_band_mask(wavelengths=centres)
    by_index = water_band_mask(220)
    np.testing.assert_array_equal(by_wl, by_index)


def test_more_components_than_pixels_is_refused_as_scikit_learn_refuses_it():
    """A whitened PCA of 30 components fitted on 20 pixels scaled its ten components without variance by 1e6
    (transformed values up to 1e7, and HybridSN trained on them with a loss of 1075), without a word."""
    from sklearn.decomposition import PCA

    X = np.random.default_rng(0).random((20, 50))
    with pytest.raises(ValueError, match="n_components=30 is more than the 20 pixels fitted"):
        HyperspectralPCA(30, whiten=True).fit(X)
    with pytest.raises(ValueError):
        PCA(30).fit(X)  # the peer refuses it too
    assert HyperspectralPCA(20).fit(X).n_components_ == PCA(20).fit(X).n_components_ == 20
    assert HyperspectralPCA(0.9).fit(X).n_components_ < 20  # a variance fraction is never more than there is
    assert HyperspectralPCA(None, whiten=True).fit(X).n_components_ == PCA(None).fit(X).n_components_ == 20


def test_a_variance_fraction_at_an_exact_tie_keeps_the_components_scikit_learns_pca_keeps():
    """Before: two components of equal variance and n_components=0.5 kept 1 (the share reaching 0.5), where
    scikit-learn keeps 2 (its share must exceed the fraction)."""
    from sklearn.decomposition import PCA

    from zoo.hyperspectral import HyperspectralPCA

    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])  # variance 0.5 along each axis
    assert HyperspectralPCA(n_components=0.5).fit(X).components_.shape[0] == PCA(n_components=0.5).fit(X).n_components_


@pytest.mark.parametrize("estimator", [HyperspectralPCA, BandStandardizer, MinMaxNormalizer])
@pytest.mark.parametrize("refit_on", ["cube", "scene"])
def test_a_fit_on_a_cube_forgets_the_column_names_of_an_earlier_dataframe_fit(estimator, refit_on):
    """Before: a refit on a 5-band cube kept the 12 column names of an earlier DataFrame fit: BandStandardizer's
    get_feature_names_out gave 12 names for 5 bands, and every transform of an array warned that the estimator
    was fitted with feature names (scikit-learn's validate_data forgets them at a fit on an array)."""
    import warnings

    pd = pytest.importorskip("pandas")
    cube = _cube(6, 5, 12)
    frame = pd.DataFrame(cube.reshape(-1, 12), columns=[f"band{i}" for i in range(12)])
    est = estimator().fit(frame) if estimator is not HyperspectralPCA else estimator(3).fit(frame)
    assert list(est.feature_names_in_) == list(frame.columns)
    narrow = cube[..., :5]
    est.fit(narrow if refit_on == "cube" else Scene(narrow))
    assert not hasattr(est, "feature_names_in_") and est.n_features_in_ == 5
    assert len(est.get_feature_names_out()) == (3 if estimator is HyperspectralPCA else 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "X does not have valid feature names, but ... was fitted with" before
        est.transform(narrow.reshape(-1, 5))


@pytest.mark.parametrize("estimator", [HyperspectralPCA, BandStandardizer, MinMaxNormalizer])
def test_a_masked_fit_on_a_dataframe_keeps_its_column_names_and_checks_them(estimator):
    """Before: fit(frame, mask=...) took the rows as a bare array: no feature_names_in_, and a transform of the
    same columns in another order was taken without a word (each band scaled by another band's statistics)."""
    pd = pytest.importorskip("pandas")
    pixels = _cube(8, 5, 6).reshape(-1, 6)
    frame = pd.DataFrame(pixels, columns=list("abcdef"))
    mask = np.arange(len(frame)) % 2 == 0
    est = estimator(3).fit(frame, mask=mask) if estimator is HyperspectralPCA else estimator().fit(frame, mask=mask)
    assert list(est.feature_names_in_) == list("abcdef")
    plain = estimator(3) if estimator is HyperspectralPCA else estimator()
    np.testing.assert_allclose(est.transform(frame), plain.fit(pixels[mask]).transform(pixels), rtol=1e-10)
    with pytest.raises(ValueError, match="feature names"):
        est.transform(frame[list("fedcba")])
    with pytest.raises(ValueError, match="one entry per pixel"):
        estimator().fit(frame, mask=mask[:-1])


def test_inverse_transform_of_the_wrong_width_says_what_it_expected():
    """Before: numpy's "matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature
    (n?,k),(k,m?)->(n?,m?)" (PCA) and "operands could not be broadcast together" (BandStandardizer)."""
    cube = _cube(6, 5, 12)
    pca = HyperspectralPCA(3).fit(cube)
    with pytest.raises(ValueError, match=r"expected \(N, 3\) components or an \(H, W, 3\) cube .* got shape \(2, 5\)"):
        pca.inverse_transform(np.zeros((2, 5)))
    assert pca.inverse_transform(pca.transform(cube)).shape == cube.shape
    std = BandStandardizer().fit(cube)
    with pytest.raises(ValueError, match=r"expected \(N, 12\) pixels .* got shape \(6, 5, 4\)"):
        std.inverse_transform(cube[..., :4])
    np.testing.assert_allclose(std.inverse_transform(std.transform(cube)), cube, rtol=1e-10)


@pytest.mark.parametrize("estimator", [HyperspectralPCA, BandStandardizer, MinMaxNormalizer])
def test_a_scene_with_nan_pixels_is_refused_by_transform_as_its_cube_is(tmp_path, estimator):
    """Before: transform(Scene(cube)) and a lazily opened file gave NaN rows for a NaN pixel, where
    transform(cube) refuses the same pixels and says where they are."""
    cube = _cube(8, 7, 6).astype(np.float32)
    est = estimator(3).fit(cube) if estimator is HyperspectralPCA else estimator().fit(cube)
    cube[5, 2, 1] = np.nan
    envi.save_image(str(tmp_path / "nan.hdr"), cube, interleave="bsq", byteorder=1, force=True)
    for scene in (Scene(cube), open_envi(tmp_path / "nan.hdr")):
        with pytest.raises(ValueError, match=r"NaN or infinity in 1 pixel \(at \(row, col\) \(5, 2\)\)"):
            est.transform(scene)
    if estimator is HyperspectralPCA:  # a mask that leaves the pixel out is the way round it, as for a cube
        keep = np.ones(cube.shape[:2], bool)
        keep[5, 2] = False
        for scene in (Scene(cube), open_envi(tmp_path / "nan.hdr")):
            assert np.isfinite(est.transform(scene, mask=keep)).all()
            with pytest.raises(ValueError, match="of the pixels mask selects"):
                est.transform(scene, mask=~keep)


@pytest.mark.parametrize(("option", "value", "error"), [
    ("whiten", "no", TypeError), ("chunk_bytes", 0, ValueError), ("chunk_bytes", -1, ValueError),
    ("chunk_bytes", "64MB", TypeError)])
def test_pca_parameters_are_checked_at_fit_as_scikit_learn_checks_them(option, value, error):
    """Before: whiten="no" whitened (a non-empty string is true), chunk_bytes=0 or -1 read the pixels one at a
    time without a word, and "64MB" failed in a floor division ("unsupported operand type(s) for //")."""
    with pytest.raises(error, match=option):
        HyperspectralPCA(3, **{option: value}).fit(_cube(6, 5, 4))
