"""ENVI round trips (spectral <-> zoo), .mat key discovery, .npy and load_scene."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.io
from spectral.io import envi

from zoo.hyperspectral.readers import (
    find_cube_key,
    find_gt_key,
    load_mat_arrays,
    load_scene,
    open_envi,
    save_envi,
)
from zoo.hyperspectral.readers.envi import EnviWriter
from zoo.hyperspectral.readers.errors import SceneFormatError
from zoo.hyperspectral.scene import Scene

DTYPES = [np.uint8, np.int16, np.uint16, np.int32, np.float32, np.float64]


def _cube(dtype, shape=(5, 7, 4)):
    rng = np.random.default_rng(0)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


@pytest.mark.parametrize("interleave", ["bsq", "bil", "bip"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("byteorder", [0, 1])
def test_envi_written_by_spectral_read_by_zoo(tmp_path, interleave, dtype, byteorder):
    cube = _cube(dtype)
    wl = np.linspace(0.4, 2.5, cube.shape[2])  # micrometres: converted to nm on reading
    envi.save_image(str(tmp_path / "s.hdr"), cube, interleave=interleave, byteorder=byteorder, force=True,
                    metadata={"wavelength": [f"{w:.4f}" for w in wl], "wavelength units": "Micrometers"})
    scene = open_envi(tmp_path / "s.hdr")
    assert isinstance(scene.cube, np.memmap) or isinstance(getattr(scene.cube, "base", None), np.memmap)
    assert scene.layout.interleave == interleave
    assert scene.layout.dtype.byteorder in ("<", ">", "|", "=")
    np.testing.assert_array_equal(np.asarray(scene.cube), cube)
    np.testing.assert_allclose(scene.wavelengths, wl * 1000, rtol=1e-4)
    # the chunked reader (one mapping per block) gives the same pixels
    rows = np.concatenate([b for _, b in scene.iter_row_chunks(max_bytes=7 * 4 * 8 * 2)])
    np.testing.assert_array_equal(rows, cube.astype(np.float64))
    t = scene.to_tensor()
    assert tuple(t.shape) == (4, 5, 7)
    np.testing.assert_array_equal(t.numpy(), cube.transpose(2, 0, 1))


@pytest.mark.parametrize("interleave", ["bsq", "bil", "bip"])
@pytest.mark.parametrize("dtype", [np.int16, np.float32, np.uint16, np.complex64])
def test_envi_written_by_zoo_read_by_spectral(tmp_path, interleave, dtype):
    cube = _cube(np.float32).astype(dtype) if dtype is np.complex64 else _cube(dtype)
    hdr = save_envi(tmp_path / "z.hdr", cube, wavelengths=[400, 500, 600, 700], interleave=interleave, byteorder=1)
    img = envi.open(str(hdr))
    np.testing.assert_array_equal(np.asarray(img.load()), cube)
    assert [float(w) for w in img.metadata["wavelength"]] == [400, 500, 600, 700]
    assert not list(tmp_path.glob(".*"))  # no temp files left behind
    if dtype is np.complex64:  # written (spectral reads it back above), refused as a scene: models take real cubes
        with pytest.raises(SceneFormatError, match=r"data type 6 holds complex numbers \(complex64\).*np.abs"):
            open_envi(hdr)
    else:
        assert open_envi(hdr).cube.dtype == np.dtype(dtype).newbyteorder(">")


def test_envi_streamed_writer_and_bad_files(tmp_path):
    cube = _cube(np.float32, (6, 3, 2))
    with EnviWriter(tmp_path / "w.hdr", cube.shape, np.float32) as w:
        w.write(cube[:4])
        w.write(cube[4:])
    np.testing.assert_array_equal(np.asarray(envi.open(str(tmp_path / "w.hdr")).load()), cube)
    with pytest.raises(ValueError, match="wrote 4 of 6 rows"), EnviWriter(tmp_path / "x.hdr", cube.shape,
                                                                         np.float32) as w:
        w.write(cube[:4])
    assert not (tmp_path / "x.hdr").exists()
    # a data file shorter than its header says is a clear error, not a crash later
    save_envi(tmp_path / "t.hdr", cube)
    (tmp_path / "t.img").write_bytes((tmp_path / "t.img").read_bytes()[:10])
    with pytest.raises(ValueError, match="needs"):
        open_envi(tmp_path / "t.hdr")


def test_mat_key_discovery_v5_and_v73(tmp_path):
    rng = np.random.default_rng(1)
    cube = rng.integers(0, 1000, size=(6, 5, 8)).astype(np.uint16)
    gt = rng.integers(0, 4, size=(6, 5)).astype(np.uint8)
    band = rng.normal(size=(6, 5))  # a 2-D float image: not a label map
    scipy.io.savemat(tmp_path / "scene.mat", {"my_corrected": cube, "some_band": band, "gt_map": gt,
                                              "small": np.ones((2, 2, 2))})
    arrays = load_mat_arrays(tmp_path / "scene.mat")
    assert find_cube_key(arrays) == "my_corrected"
    assert find_gt_key(arrays, cube.shape[:2]) == "gt_map"
    with pytest.warns(UserWarning, match=r"the file also holds the 3-D array\(s\) 'small' \(2, 2, 2\)"):
        scene = load_scene(tmp_path / "scene.mat")
    np.testing.assert_array_equal(scene.cube, cube)
    np.testing.assert_array_equal(scene.labels, gt)
    # separate ground-truth file, integer-valued floats as MATLAB often writes
    scipy.io.savemat(tmp_path / "only_cube.mat", {"X": cube})
    scipy.io.savemat(tmp_path / "labels.mat", {"labels": gt.astype(np.float64)})
    scene2 = load_scene(tmp_path / "only_cube.mat", gt=tmp_path / "labels.mat")
    np.testing.assert_array_equal(scene2.labels, gt)
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "v73.mat", "w") as f:  # MATLAB stores column-major: the file holds the transpose
        f["cube"] = cube.T
        f["cube_gt"] = gt.T
    scene3 = load_scene(tmp_path / "v73.mat")
    np.testing.assert_array_equal(scene3.cube, cube)
    np.testing.assert_array_equal(scene3.labels, gt)
    with pytest.raises(ValueError, match="no 3-D"):
        find_cube_key({"a": gt})


def test_mat_ground_truth_beats_a_mask_and_an_open_choice_warns(tmp_path):
    """Before: a file holding ``gt`` (classes 1..3) and a 0/1 ``train_mask`` loaded the mask as the labels
    (fewest distinct values won among "gt-like" names), with no warning."""
    rng = np.random.default_rng(3)
    cube = rng.normal(size=(8, 6, 5)).astype(np.float32)
    gt = rng.integers(1, 4, size=(8, 6)).astype(np.uint8)
    mask = np.zeros((8, 6), np.uint8)
    mask[:, :3] = 1
    scipy.io.savemat(tmp_path / "two.mat", {"cube": cube, "gt": gt, "train_mask": mask, "train_gt": gt * mask})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ground-truth name against mask names is no open choice
        scene = load_scene(tmp_path / "two.mat")
    assert scene.metadata["gt_key"] == "gt"
    np.testing.assert_array_equal(scene.labels, gt)
    np.testing.assert_array_equal(load_scene(tmp_path / "two.mat", gt_key="train_mask").labels, mask)
    # two maps named alike, or only a mask and an unnamed map: the pick is named, with the way to change it
    scipy.io.savemat(tmp_path / "alike.mat", {"cube": cube, "gt_a": gt, "gt_b": mask})
    scipy.io.savemat(tmp_path / "masks.mat", {"cube": cube, "train_mask": mask, "m2": gt})
    for name, chosen in (("alike.mat", "gt_b"), ("masks.mat", "train_mask")):
        with pytest.warns(UserWarning, match=rf"using '{chosen}' .* pass gt_key=<name>"):
            assert load_scene(tmp_path / name).metadata["gt_key"] == chosen
    # the same ranking for a separate ground-truth file
    scipy.io.savemat(tmp_path / "cube_only.mat", {"cube": cube})
    scipy.io.savemat(tmp_path / "gt_file.mat", {"train_mask": mask, "salinas_gt": gt})
    np.testing.assert_array_equal(load_scene(tmp_path / "cube_only.mat", gt=tmp_path / "gt_file.mat").labels, gt)


def test_real_ground_truth_files(shared_data):
    folder = shared_data / "hyperspectral"
    expected = {"ground_truth_only/paviaU_gt.mat": ((610, 340), 9), "ground_truth_only/salinas_gt.mat": ((512, 217), 16),
                "ground_truth_only/KSC_gt.mat": ((512, 614), 13), "indian_pines/Indian_pines_gt.mat": ((145, 145), 16),
                "salinasA/SalinasA_gt.mat": ((83, 86), 14)}
    for rel, (shape, top) in expected.items():
        path = folder / rel
        if not path.exists():
            pytest.skip(f"data not found: {path}")
        arrays = load_mat_arrays(path)
        key = find_gt_key(arrays)
        assert arrays[key].shape == shape and int(arrays[key].max()) == top, rel
    scene = load_scene(folder / "indian_pines/Indian_pines_corrected.npy", gt=folder / "indian_pines/Indian_pines_gt.mat")
    assert scene.shape == (145, 145, 200) and int((scene.labels > 0).sum()) == 10249


def test_npy_and_errors(tmp_path):
    cube = _cube(np.float32)
    np.save(tmp_path / "c.npy", cube)
    np.save(tmp_path / "g.npy", np.ones(cube.shape[:2], np.uint8))
    scene = load_scene(tmp_path / "c.npy", gt=tmp_path / "g.npy")
    assert isinstance(scene.cube, np.memmap) and scene.labels.sum() == 35
    with pytest.raises(FileNotFoundError):
        load_scene(tmp_path / "missing.npy")
    (tmp_path / "x.tif").write_bytes(b"II*\x00")
    with pytest.raises(ValueError, match="unknown scene format"):
        load_scene(tmp_path / "x.tif")
    np.save(tmp_path / "flat.npy", np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"\(H, W, C\)"):
        load_scene(tmp_path / "flat.npy")


def test_a_truncated_or_foreign_npy_is_said_as_such(tmp_path):
    """A cut file said "mmap length is greater than file size"; a file that is no .npy at all got NumPy's advice
    to unpickle it with allow_pickle (never to be followed for a file of unknown origin)."""
    np.save(tmp_path / "c.npy", _cube(np.float32))
    whole = (tmp_path / "c.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "gt.npy").write_bytes(whole[: len(whole) // 2])
    np.save(tmp_path / "ok.npy", _cube(np.float32))
    with pytest.raises(ValueError, match=rf"cut.npy is truncated: its header says a float32 array of shape .*, the "
                                         rf"file holds {len(whole) // 2:,} bytes"):
        load_scene(tmp_path / "cut.npy")
    with pytest.raises(ValueError, match="gt.npy is truncated"):
        load_scene(tmp_path / "ok.npy", gt=tmp_path / "gt.npy")
    (tmp_path / "junk.npy").write_bytes(b"not numpy at all")
    with pytest.raises(ValueError, match=r"junk.npy is not a .npy file: it does not start with NumPy's header") as err:
        load_scene(tmp_path / "junk.npy")
    assert "allow_pickle" not in str(err.value)


@pytest.mark.parametrize(("units", "values", "warns"), [
    (None, np.linspace(0.4, 2.5, 220), "none given"), ("\u00b5m", np.linspace(0.4, 2.5, 220), None),
    ("Nanometres", np.linspace(400, 2500, 220), None), ("Micrometres", np.linspace(0.4, 2.5, 220), None),
    ("\u03bcm", np.linspace(0.4, 2.5, 220), None), ("Unknown", np.linspace(0.4, 2.5, 220), "no length unit known here"),
    (None, np.linspace(400, 2500, 220), "none given"), ("Wavenumber", 1e7 / np.linspace(400, 2500, 220), None)])
def test_wavelengths_in_micrometres_without_a_known_unit_are_read_as_micrometres(tmp_path, units, values, warns):
    """Wavelengths 0.4-2.5 with no units, or with units spelt with the micro sign, were read as 0.4-2.5 nm, so
    remove_water_bands dropped nothing (220 bands stayed 220; with 'Micrometers' they became 200)."""
    import warnings

    from zoo.hyperspectral import remove_water_bands

    meta = {"wavelength": [f"{w:.6g}" for w in values]} | ({"wavelength units": units} if units else {})
    envi.save_image(str(tmp_path / "s.hdr"), np.ones((2, 2, 220), np.float32), force=True, metadata=meta)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        scene = open_envi(tmp_path / "s.hdr")
    assert [str(w.message) for w in said if warns and warns in str(w.message)] or not warns, said
    assert not warns or "(set 'wavelength units' in the header)" in str(said[0].message)
    np.testing.assert_allclose(scene.wavelengths, np.linspace(400, 2500, 220), rtol=1e-5)
    assert remove_water_bands(scene).n_bands < 220


@pytest.mark.parametrize("units", ["Index", None, "GHz"])
def test_band_numbers_or_a_unit_that_is_no_length_give_no_wavelengths(tmp_path, units):
    """'wavelength units = Index' over 1..60 was read as micrometres (1,000-60,000 nm: remove_water_bands dropped
    58 of 60 bands); band numbers without units read the same way."""
    import warnings

    values = np.arange(1, 61) if units != "GHz" else np.linspace(10, 20, 60)
    meta = {"wavelength": [f"{w:g}" for w in values]} | ({"wavelength units": units} if units else {})
    envi.save_image(str(tmp_path / "s.hdr"), np.ones((2, 2, 60), np.float32), force=True, metadata=meta)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        scene = open_envi(tmp_path / "s.hdr")
    assert scene.wavelengths is None
    assert any("the scene has no wavelengths" in str(w.message) for w in said)


@pytest.mark.parametrize("name, values", [("elevation", np.arange(300) % 300), ("cloud_mask", np.arange(2))])
def test_a_lone_map_not_named_like_ground_truth_beside_the_cube_warns(tmp_path, name, values):
    """Before: a .mat file holding a cube and one other (H, W) array, an elevation or a 0/1 cloud mask, loaded
    that array as the ground truth without a word (only a choice among several candidates warned)."""
    rng = np.random.default_rng(4)
    cube = rng.integers(0, 1000, size=(20, 17, 12)).astype(np.uint16)
    other = rng.choice(values, size=(20, 17)).astype(np.int16 if name == "elevation" else np.uint8)
    scipy.io.savemat(tmp_path / "m2.mat", {"data": cube, name: other})
    with pytest.warns(UserWarning, match=rf"took '{name}' .* as the ground truth.* not named like one.*gt=FILE to "
                                         rf"load_scene.*gt_key=<name>.*load_mat_arrays\(.*m2.mat'\)\['data'\]"):
        assert load_scene(tmp_path / "m2.mat").metadata["gt_key"] == name
    # named like ground truth, or a file given as the ground truth: taken at its word, as before
    scipy.io.savemat(tmp_path / "named.mat", {"data": cube, "scene_gt": other})
    scipy.io.savemat(tmp_path / "cube.mat", {"data": cube})
    scipy.io.savemat(tmp_path / "given.mat", {name: other})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_scene(tmp_path / "named.mat").metadata["gt_key"] == "scene_gt"
        np.testing.assert_array_equal(load_scene(tmp_path / "cube.mat", gt=tmp_path / "given.mat").labels, other)
        np.testing.assert_array_equal(load_mat_arrays(tmp_path / "m2.mat")["data"], cube)


def test_a_band_first_cube_is_named_as_such_beside_its_ground_truth(tmp_path):
    """Before: a (B, H, W) cube, as rasterio and GDAL read one, beside its (H, W) ground truth was refused with
    "ground truth has shape (20, 17); the scene is (H, W) = (12, 20)", nothing saying the cube was band-first."""
    rng = np.random.default_rng(5)
    cube = rng.integers(0, 1000, size=(20, 17, 12)).astype(np.uint16)
    gt = rng.integers(0, 4, size=(20, 17)).astype(np.uint8)
    np.save(tmp_path / "cube_bhw.npy", cube.transpose(2, 0, 1))
    np.save(tmp_path / "lab.npy", gt)
    scipy.io.savemat(tmp_path / "bhw.mat", {"cube": cube.transpose(2, 0, 1), "gt": gt})
    scipy.io.savemat(tmp_path / "gt.mat", {"gt": gt})
    hint = r"the cube \(12, 20, 17\) looks band-first, \(C, H, W\) as rasterio and GDAL read it: pass " \
           r"cube.transpose\(1, 2, 0\)"
    for args in ({"path": tmp_path / "cube_bhw.npy", "gt": tmp_path / "lab.npy"}, {"path": tmp_path / "bhw.mat"},
                 {"path": tmp_path / "bhw.mat", "gt_key": "gt"}, {"path": tmp_path / "cube_bhw.npy", "gt": tmp_path / "gt.mat"},
                 {"path": tmp_path / "cube_bhw.npy", "gt": tmp_path / "gt.mat", "gt_key": "gt"}):
        with pytest.raises(ValueError, match=hint) as err:
            load_scene(**args)
        assert "(20, 17)" in str(err.value) and "(H, W) = (12, 20)" in str(err.value)
    np.save(tmp_path / "cube_hcw.npy", cube.transpose(0, 2, 1))
    with pytest.raises(ValueError, match=r"\(H, W\) = \(20, 12\)$"):  # not band-first: no such hint
        load_scene(tmp_path / "cube_hcw.npy", gt=tmp_path / "lab.npy")


@pytest.mark.parametrize("header, data", [("SCENE.HDR", "SCENE.IMG"), ("SCENE.IMG.HDR", "SCENE.IMG"),
                                          ("scene.img.hdr", "scene.img"), ("scene.HDR", "scene.img")])
def test_envi_data_finds_its_header_in_either_case(tmp_path, header, data):
    """Before: load_scene("SCENE.IMG") beside SCENE.HDR said "unknown scene format '.img' ... expected .hdr
    (ENVI), .mat, .npy or .spe": only a lower-case X.hdr or X.img.hdr was looked for."""
    cube = _cube(np.float32)
    save_envi(tmp_path / "w.hdr", cube)
    (tmp_path / "w.hdr").rename(tmp_path / header)
    (tmp_path / "w.img").rename(tmp_path / data)
    scene = load_scene(tmp_path / data)
    np.testing.assert_array_equal(scene.cube, cube)
    np.testing.assert_array_equal(load_scene(tmp_path / header).cube, cube)


def test_envi_data_without_a_header_says_where_it_looked(tmp_path):
    """Before: a data file with no header beside it was "unknown scene format '.img'"."""
    (tmp_path / "lone.img").write_bytes(bytes(64))
    with pytest.raises(ValueError, match=r"lone.img looks like ENVI data, but no ENVI header found beside it \(looked "
                                         r"for lone.hdr, lone.HDR, lone.img.hdr, lone.img.HDR\)"):
        load_scene(tmp_path / "lone.img")
    with pytest.raises(FileNotFoundError, match=r"no ENVI header found beside it \(looked for lone.hdr"):
        open_envi(tmp_path / "lone.img")


def test_an_envi_classification_ground_truth_names_the_scenes_classes(tmp_path):
    """Before: a ground truth written by spectral's save_classification(..., class_names=[...]) gave its labels
    but Scene.class_names stayed None. ENVI names the values 0..K-1 (0: "Unclassified"); Scene.class_names
    names the classes 1..K."""
    from dataclasses import replace

    from zoo.hyperspectral.readers import with_ground_truth

    rng = np.random.default_rng(6)
    cube = rng.normal(size=(6, 5, 4)).astype(np.float32)
    gt = rng.integers(0, 3, size=(6, 5)).astype(np.uint8)
    envi.save_classification(str(tmp_path / "cls.hdr"), gt, class_names=["Unclassified", "corn", "soy"], force=True)
    np.save(tmp_path / "cube.npy", cube)
    scipy.io.savemat(tmp_path / "cube.mat", {"cube": cube})
    for cube_file in ("cube.npy", "cube.mat"):
        scene = load_scene(tmp_path / cube_file, gt=tmp_path / "cls.hdr")
        np.testing.assert_array_equal(scene.labels, gt)
        assert scene.class_names == ("corn", "soy") and "class_names" not in scene.metadata
    named = replace(load_scene(tmp_path / "cube.npy"), class_names=("a", "b"))  # the scene's own names stay
    assert with_ground_truth(named, tmp_path / "cls.hdr").class_names == ("a", "b")


def test_a_band_first_cube_file_with_an_array_ground_truth_is_named_as_such(tmp_path):
    """The band-first hint reached a cube array with labels, and a cube file with a ground-truth file, but not a
    cube file with labels given as an array, nor Scene(cube=..., labels=...)."""
    import numpy as np

    import zoo
    from zoo.hyperspectral import Scene

    cube = np.random.default_rng(0).random((20, 17, 12)).astype(np.float32)
    gt = np.ones((20, 17), dtype=np.int64)
    np.save(tmp_path / "bf.npy", cube.transpose(2, 0, 1))
    hint = r"the cube \(12, 20, 17\) looks band-first.*cube.transpose\(1, 2, 0\)"
    with pytest.raises(ValueError, match=hint):
        Scene(cube=cube.transpose(2, 0, 1), labels=gt)
    with pytest.raises(ValueError, match=hint):
        zoo.train(zoo.build("hsi-pca-svm"), str(tmp_path / "bf.npy"), labels=gt)


def test_predicting_a_mat_scene_reads_its_cube_alone(tmp_path):
    """zoo.predict needs no ground truth, yet reading a .mat scene looked for one: a lone map not named like
    ground truth (an elevation) warned that it was taken as the labels, and a map of another size stopped the
    prediction ("ground truth ... does not match the cube's (H, W)")."""
    import zoo

    rng = np.random.default_rng(6)
    cube = rng.random((20, 17, 12)).astype(np.float32)
    gt = rng.integers(1, 4, size=(20, 17)).astype(np.uint8)
    model = zoo.build("hsi-pca-svm", n_components=4).fit(cube.reshape(-1, 12), gt.ravel())
    scipy.io.savemat(tmp_path / "elev.mat", {"data": cube, "elevation": rng.integers(0, 300, (20, 17)).astype(np.int16)})
    scipy.io.savemat(tmp_path / "other.mat", {"data": cube, "gt": gt[:5]})
    expected = zoo.predict(model, cube)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("elev.mat", "other.mat"):
            np.testing.assert_array_equal(zoo.predict(model, str(tmp_path / name)), expected)
    # reading it for training still checks
    with pytest.raises(Exception, match=r"does not match the \(H, W\) = \(20, 17\) of the cube 'data'"):
        load_scene(tmp_path / "other.mat")


@pytest.mark.parametrize("write", ["save_envi", "EnviWriter", "transform_to_envi"])
def test_writing_to_a_name_with_another_suffix_keeps_the_scene_of_its_stem(tmp_path, write):
    """Before: every writer took ``with_suffix(".hdr")``: writing the PCA of scene.hdr to "scene.pca" replaced
    scene.hdr and scene.img with the 3 components (spectral refuses such a name; zoo appends .hdr)."""
    from zoo.hyperspectral.pca import HyperspectralPCA

    cube = _cube(np.float32, (6, 5, 4))
    save_envi(tmp_path / "scene.hdr", cube)
    small = cube[:, :, :2].copy()
    if write == "save_envi":
        hdr = save_envi(tmp_path / "scene.pca", small)
    elif write == "EnviWriter":
        with EnviWriter(tmp_path / "scene.pca", small.shape, np.float32) as w:
            w.write(small)
        hdr = w.hdr
    else:
        hdr = HyperspectralPCA(n_components=2).fit(cube).transform_to_envi(Scene(cube=cube), tmp_path / "scene.pca")
    assert hdr == tmp_path / "scene.pca.hdr"
    np.testing.assert_array_equal(np.asarray(open_envi(tmp_path / "scene.hdr").cube), cube)
    assert open_envi(hdr).n_bands == 2
    assert save_envi(tmp_path / "x.img", small) == tmp_path / "x.hdr"  # an ENVI data name still means its header


def test_a_scenes_metadata_written_again_keeps_its_wavelengths_in_nanometres(tmp_path):
    """Before: ``wavelength units`` of the source's metadata (Micrometers) labelled the nanometre values written
    from ``wavelengths=``: read back 1000x; a band subset kept the source's 5-entry lists, and zoo then refused
    its own file ("lists 5 wavelengths for 2 bands")."""
    cube = _cube(np.float32, (4, 3, 5))
    envi.save_image(str(tmp_path / "src.hdr"), cube, force=True,
                    metadata={"wavelength": ["0.4", "0.5", "0.6", "0.7", "0.8"], "wavelength units": "Micrometers",
                              "fwhm": ["0.01"] * 5, "map info": "{UTM, 1, 1, 0, 0, 30, 30, 13, North}"})
    src = open_envi(tmp_path / "src.hdr")
    np.testing.assert_allclose(src.wavelengths, [400, 500, 600, 700, 800])
    again = save_envi(tmp_path / "again.hdr", np.asarray(src.cube), wavelengths=src.wavelengths, metadata=src.metadata)
    np.testing.assert_allclose(open_envi(again).wavelengths, [400, 500, 600, 700, 800])
    with pytest.warns(UserWarning, match=r"'wavelength', 'fwhm' list entries for another number of bands"):
        sub = save_envi(tmp_path / "sub.hdr", np.asarray(src.cube)[:, :, :2], metadata=src.metadata)
    scene = open_envi(sub)
    assert scene.wavelengths is None and "fwhm" not in scene.metadata and "map info" in scene.metadata
    sub_wl = save_envi(tmp_path / "sub_wl.hdr", np.asarray(src.cube)[:, :, :2], wavelengths=src.wavelengths[:2],
                       metadata={k: v for k, v in src.metadata.items() if k != "fwhm"})
    np.testing.assert_allclose(open_envi(sub_wl).wavelengths, [400, 500])


@pytest.mark.parametrize("dtype", [np.float16, np.bool_, np.int8])
def test_an_envi_writer_of_a_type_envi_lacks_names_the_types_and_leaves_nothing(tmp_path, dtype):
    """Before: a bare ``KeyError: 'e'`` after the temp folder was made, which stayed beside the target."""
    with pytest.raises(ValueError, match=rf"ENVI has no data type for {np.dtype(dtype).name}; use one of .*float32"):
        EnviWriter(tmp_path / "w.hdr", (2, 2, 2), dtype)
    assert list(tmp_path.iterdir()) == []


def test_a_complex_cube_is_no_scene():
    with pytest.raises(ValueError, match=r"must hold real numbers; got dtype complex64: keep np.abs"):
        Scene(cube=np.ones((2, 2, 2), np.complex64))


def test_an_object_npy_is_called_a_pickle_not_truncated(tmp_path):
    """Before: "is truncated: its header says a object array ... the file holds 11,286 bytes" of a whole file."""
    arr = np.empty((4, 4, 3), dtype=object)
    arr[...] = 1.5
    np.save(tmp_path / "cube.npy", arr, allow_pickle=True)
    with pytest.raises(SceneFormatError, match=r"holds Python objects .* which zoo never loads") as err:
        load_scene(tmp_path / "cube.npy")
    assert "truncated" not in str(err.value)


def test_an_envi_writer_on_a_full_disk_names_the_file_and_keeps_the_old_scene(tmp_path):
    """Before: a bare "[Errno 28] No space left on device" naming no file, where save_envi names it and the size."""
    import errno

    from zoo import fs

    cube = _cube(np.float32, (6, 3, 2))
    save_envi(tmp_path / "w.hdr", cube)

    class _Full:
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            pass

    w = EnviWriter(tmp_path / "w.hdr", (6, 3, 2), np.float32)
    w._fh.close()
    w._fh = _Full()
    with pytest.raises(fs.NoSpaceError, match=r"no space left writing .*w\.img .*144 B needed"):
        w.write(cube[:2])
    np.testing.assert_array_equal(np.asarray(open_envi(tmp_path / "w.hdr").cube), cube)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.hdr", "w.img"]
