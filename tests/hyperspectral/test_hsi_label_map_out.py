"""The class map a user looks at: ``zoo predict ... --out`` (its .npy and PNG) and the class colours."""

from __future__ import annotations

import numpy as np
from PIL import Image

import zoo
from zoo.hyperspectral.synthetic import make_scene


def test_class_colours_stay_distinct_past_twenty_classes(tmp_path):
    """tab20 was repeated from class 21 on: in a 22-class map (WHU-Hi-HongHu) classes 21 and 22 were drawn in the
    colours of classes 1 and 2. spectral's spy_colors tell 38 classes apart."""
    import matplotlib

    from zoo.hyperspectral import cli
    from zoo.hyperspectral.evaluation import class_colors

    for n in (22, 38, 75):
        colours = class_colors(n)
        assert colours.shape == (n + 1, 3)
        assert len({tuple(np.round(c, 6)) for c in colours}) == n + 1, n  # black (0) and one per class
    # the first 20 classes keep the colours maps drawn so far had
    assert np.allclose(class_colors(22)[1:21], matplotlib.colormaps["tab20"](np.linspace(0, 1, 20))[:, :3])

    label_map = np.arange(23).reshape(1, 23).repeat(2, axis=0)  # 0 (unlabelled) and classes 1..22
    cli.write_label_map(label_map, tmp_path / "map", quiet=True)
    png = np.asarray(Image.open(tmp_path / "map.png").convert("RGB"))
    assert len({tuple(px) for px in png[0]}) == 23


def test_predict_out_writes_the_map_of_a_one_row_or_one_column_scene(tmp_path, monkeypatch, capsys):
    """A scene of one scan line (1 x W) or one column: ``zoo predict ... --out map`` printed the labels as a nested
    list and wrote neither map.npy nor map.png, with exit status 0."""
    from zoo.cli import main

    scene = make_scene(16, 16, 12, 3, block=4, seed=0)
    svm = zoo.build("hsi-pca-svm", n_components=5)
    zoo.train(svm, scene, split="random")
    weights = zoo.save(svm, tmp_path / "svm.safetensors")
    monkeypatch.chdir(tmp_path)
    for name, cube in (("line", scene.cube[:1]), ("column", scene.cube[:, :1])):
        np.save(tmp_path / f"{name}.npy", cube)
        assert main(["predict", "hsi-pca-svm", "--weights", str(weights), f"{name}.npy", "--out", f"{name}_map"]) == 0
        assert f"written to {name}_map.npy" in capsys.readouterr().out
        expected = zoo.predict(svm, cube)
        assert np.array_equal(np.load(tmp_path / f"{name}_map.npy"), expected)
        assert Image.open(tmp_path / f"{name}_map.png").size == (cube.shape[1], cube.shape[0])
