"""Registry entries of the hyperspectral family: ``hsi-pca-svm`` and ``hybridsn``."""

from __future__ import annotations

from zoo.hyperspectral.hybridsn import HybridSN, HybridSNConfig
from zoo.hyperspectral.scene_model import load_scene_model
from zoo.hyperspectral.svm import HSIPipeline, load_pipeline, make_pca_svm
from zoo.registry import register

__all__ = ["build_hybridsn", "build_pca_svm"]


def _load_svm(obj: HSIPipeline, path, entry) -> HSIPipeline:
    return load_pipeline(path)


@register(
    "hsi-pca-svm",
    family="hyperspectral",
    summary="standardise + PCA + RBF SVM pixel classifier (scikit-learn Pipeline; Indian Pines defaults)",
    references=("Melgani & Bruzzone 2004, https://doi.org/10.1109/TGRS.2004.831865",
                "HybridSN Table II SVM baseline, https://arxiv.org/abs/1902.06701"),
    load_weights=_load_svm,
)
def build_pca_svm(n_components: float = 30, whiten: bool = False, C: float = 100.0,
                  gamma: float | str = "scale", class_weight: str | None = None) -> HSIPipeline:
    return make_pca_svm(n_components=n_components, whiten=whiten, C=C, gamma=gamma, class_weight=class_weight)


@register(
    "hybridsn",
    family="hyperspectral",
    summary="HybridSN 3D-2D CNN on PCA windows (Roy et al. 2019); Indian Pines shape: 30 bands, 16 classes, 25x25",
    references=("Roy et al., HybridSN, IEEE GRSL 2020, https://arxiv.org/abs/1902.06701",),
    load_weights=load_scene_model,
)
def build_hybridsn(n_bands: int = 30, n_classes: int = 16, window: int = 25, dropout: float = 0.4,
                   padding: str = "constant") -> HybridSN:
    return HybridSN(HybridSNConfig(n_bands=n_bands, n_classes=n_classes, window=window, dropout=dropout),
                    padding=padding)
