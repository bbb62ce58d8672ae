"""Hyperspectral family: scene readers (ENVI, .mat, .npy, SPE), preprocessing fitted on training pixels,
PCA in memory or out of core, on-the-fly windows, leak-aware splits, and two classifiers:
``hsi-pca-svm`` (scikit-learn Pipeline) and ``hybridsn`` (3D-2D CNN trained through zoo.engine).

    import zoo
    from zoo.hyperspectral import load_dataset
    scene = load_dataset("indian_pines")                 # ../shared/data copy or the zoo cache
    svm = zoo.build("hsi-pca-svm")
    zoo.train(svm, scene, split="random")                 # 30 % stratified, PCA fitted on train pixels
    zoo.evaluate(svm, scene)                              # OA / AA / kappa on the test pixels
    net = zoo.build("hybridsn", weights="indian-pines")   # scaler + PCA + network in one file
"""

from zoo.hyperspectral import cli as _cli  # noqa: F401  (registers `zoo hsi` and the demo step)
from zoo.hyperspectral import export as _export  # noqa: F401  (what zoo.export ships for both)
from zoo.hyperspectral import models as _models  # noqa: F401  (registers hsi-pca-svm and hybridsn)
from zoo.hyperspectral.datasets import fetch, load_dataset
from zoo.hyperspectral.evaluation import plot_classification_map, resolve_split, score_map
from zoo.hyperspectral.hybridsn import HybridSN, HybridSNConfig
from zoo.hyperspectral.patches import PatchDataset
from zoo.hyperspectral.pca import HyperspectralPCA
from zoo.hyperspectral.preprocessing import (
    BandStandardizer,
    MinMaxNormalizer,
    remove_water_bands,
    valid_pixel_mask,
)
from zoo.hyperspectral.readers import load_scene, open_envi, open_mat, open_npy, open_spe, save_envi
from zoo.hyperspectral.scene import Scene
from zoo.hyperspectral.splits import (
    Split,
    disjoint_mask_split,
    overlap_report,
    random_split,
    spatial_block_split,
)
from zoo.hyperspectral.svm import HSIPipeline, load_pipeline

__all__ = [
    "BandStandardizer", "HSIPipeline", "HybridSN", "HybridSNConfig", "HyperspectralPCA", "MinMaxNormalizer",
    "PatchDataset", "Scene", "Split", "disjoint_mask_split", "fetch", "load_dataset", "load_pipeline",
    "load_scene", "open_envi", "open_mat", "open_npy", "open_spe", "overlap_report", "plot_classification_map",
    "random_split", "remove_water_bands", "resolve_split", "save_envi", "score_map", "spatial_block_split",
    "valid_pixel_mask",
]
