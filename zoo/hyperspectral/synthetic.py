"""Generated scenes for tests and the offline demo: blocky class regions with class-specific spectra."""

from __future__ import annotations

import numpy as np

from zoo.hyperspectral.scene import Scene

__all__ = ["make_scene"]


def make_scene(height: int = 48, width: int = 48, n_bands: int = 60, n_classes: int = 4, *, block: int = 8,
               noise: float = 0.08, unlabelled: float = 0.1, seed: int = 0) -> Scene:
    """A scene whose classes occupy ``block``-sized tiles; each class has a smooth random spectrum.

    Spectra differ in shape (not only brightness) so that PCA + a classifier can separate them; pixels
    get multiplicative illumination and additive noise; ``unlabelled`` of the tiles are left class 0.
    """
    rng = np.random.default_rng(seed)
    wl = np.linspace(400.0, 2500.0, n_bands)
    t = np.linspace(0, 1, n_bands)
    signatures = []
    for _ in range(n_classes):
        coeff = rng.normal(size=4)
        sig = 1.0 + 0.3 * sum(c * np.sin((i + 1) * np.pi * t + rng.uniform(0, np.pi)) for i, c in enumerate(coeff))
        signatures.append(sig)
    sig = np.stack(signatures)  # (K, C)
    bh, bw = -(-height // block), -(-width // block)
    tiles = rng.integers(1, n_classes + 1, size=(bh, bw))
    tiles[rng.random((bh, bw)) < unlabelled] = 0
    labels = np.kron(tiles, np.ones((block, block), dtype=np.int64))[:height, :width]
    cls = np.where(labels > 0, labels, rng.integers(1, n_classes + 1, size=labels.shape))
    illum = rng.uniform(0.8, 1.2, size=(height, width, 1))
    cube = sig[cls - 1] * illum + noise * rng.normal(size=(height, width, n_bands))
    cube = (1000 * cube).astype(np.float32)
    return Scene(cube=cube, wavelengths=wl, labels=labels, name=f"synthetic-{seed}",
                 class_names=tuple(f"class {i + 1}" for i in range(n_classes)))
