"""Tiny data of every family, for the tests of the contract (API and CLI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


class TinyData:
    """Each method writes (once) a few-item data set of one family under ``root`` and returns it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def image_folder(self) -> Path:
        from PIL import Image

        root = self.root / "images"
        if not root.exists():
            rng = np.random.default_rng(0)
            for split in ("train", "val"):
                for c, cls in enumerate(("cat", "dog")):
                    (root / split / cls).mkdir(parents=True)
                    for i in range(4):
                        arr = (rng.random((32, 32, 3)) * 80 + 120 * c).astype(np.uint8)
                        Image.fromarray(arr).save(root / split / cls / f"{i}.png")
        return root

    def corpus(self) -> Path:
        root = self.root / "corpus"
        if not root.exists():
            de = ["ein hund läuft .", "zwei katzen schlafen .", "ein mann isst .", "eine frau liest ."] * 4
            en = ["a dog runs .", "two cats sleep .", "a man eats .", "a woman reads ."] * 4
            root.mkdir()
            for split in ("train", "val", "test_2016_flickr"):
                (root / f"{split}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
                (root / f"{split}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
        return root

    def video_folder(self) -> Path:
        from zoo.video.synthetic import CLASSES, render_clip, write_video

        root = self.root / "videos"
        if not root.exists():
            rng = np.random.default_rng(0)
            for label in (0, 1):
                (root / CLASSES[label]).mkdir(parents=True)
                for i in range(2):
                    write_video(root / CLASSES[label] / f"v{i}.avi", render_clip(label, rng, 32, 8))
        return root

    def scene(self):
        from zoo.hyperspectral.synthetic import make_scene

        return make_scene(24, 24, 20, 3, block=6, seed=0)

    def scene_file(self) -> Path:
        """The scene as a .mat holding the cube and its ground truth, as public scenes ship."""
        import scipy.io

        path = self.root / "scene.mat"
        if not path.exists():
            scene = self.scene()
            scipy.io.savemat(path, {"cube": np.asarray(scene.cube), "gt": np.asarray(scene.labels)})
        return path


@pytest.fixture
def tiny(tmp_path) -> TinyData:
    return TinyData(tmp_path)
