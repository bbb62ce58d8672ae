"""Hyperspectral family: scene readers (ENVI, .mat, .npy, SPE), preprocessing fitted on training pixels,
PCA in memory or out of core, on-the-fly windows, leak-aware splits, and two classifiers:
``hsi-pca-svm`` (scikit-learn Pipeline) and ``hybridsn`` (3D-2D CNN trained through zoo.engine).

    import zoo
    from zoo.hyperspectral import load_dataset
    scene = load_dataset("indian_pines")                 # ../shared/data copy or the zoo cache
    svm = zoo.build("hsi-pca-svm")
    zoo.train(svm, scene, split="random")                 # 30 % stratified, PCA fitted on train pixels
    zoo.evaluate(svm, scene)                              # OA / AA / kappa on the test pixels (fractions)
    net = zoo.build("hybridsn", weights="indian-pines")   # scaler + PCA + network in one file
"""

from zoo._lazy import lazy_exports
from zoo.hyperspectral import cli as _cli  # noqa: F401  (registers `zoo hsi-fetch` and the demo step; no torch)
from zoo.registry import declare

declare("hsi-pca-svm", family="hyperspectral", module="zoo.hyperspectral.models",
        summary="standardise + PCA + RBF SVM pixel classifier (scikit-learn Pipeline; Indian Pines defaults)")
declare("hybridsn", family="hyperspectral", module="zoo.hyperspectral.models",
        summary="HybridSN 3D-2D CNN on PCA windows (Roy et al. 2019); Indian Pines shape: 30 bands, 16 classes, 25x25")

_EXPORTS = {
    "fetch": "zoo.hyperspectral.datasets",
    "load_dataset": "zoo.hyperspectral.datasets",
    "as_scene": "zoo.hyperspectral.evaluation",
    "plot_classification_map": "zoo.hyperspectral.evaluation",
    "resolve_split": "zoo.hyperspectral.evaluation",
    "score_map": "zoo.hyperspectral.evaluation",
    "HybridSN": "zoo.hyperspectral.hybridsn",
    "HybridSNConfig": "zoo.hyperspectral.hybridsn",
    "PatchDataset": "zoo.hyperspectral.patches",
    "HyperspectralPCA": "zoo.hyperspectral.pca",
    "BandStandardizer": "zoo.hyperspectral.preprocessing",
    "MinMaxNormalizer": "zoo.hyperspectral.preprocessing",
    "remove_water_bands": "zoo.hyperspectral.preprocessing",
    "valid_pixel_mask": "zoo.hyperspectral.preprocessing",
    "load_scene": "zoo.hyperspectral.readers",
    "open_envi": "zoo.hyperspectral.readers",
    "open_mat": "zoo.hyperspectral.readers",
    "open_npy": "zoo.hyperspectral.readers",
    "open_spe": "zoo.hyperspectral.readers",
    "save_envi": "zoo.hyperspectral.readers",
    "Scene": "zoo.hyperspectral.scene",
    "Split": "zoo.hyperspectral.splits",
    "disjoint_mask_split": "zoo.hyperspectral.splits",
    "overlap_report": "zoo.hyperspectral.splits",
    "random_split": "zoo.hyperspectral.splits",
    "spatial_block_split": "zoo.hyperspectral.splits",
    "HSIPipeline": "zoo.hyperspectral.svm",
    "PCASVMConfig": "zoo.hyperspectral.svm",
    "load_pipeline": "zoo.hyperspectral.svm",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "BandStandardizer",
    "HSIPipeline",
    "HybridSN",
    "HybridSNConfig",
    "HyperspectralPCA",
    "MinMaxNormalizer",
    "PCASVMConfig",
    "PatchDataset",
    "Scene",
    "Split",
    "as_scene",
    "disjoint_mask_split",
    "fetch",
    "load_dataset",
    "load_pipeline",
    "load_scene",
    "open_envi",
    "open_mat",
    "open_npy",
    "open_spe",
    "overlap_report",
    "plot_classification_map",
    "random_split",
    "remove_water_bands",
    "resolve_split",
    "save_envi",
    "score_map",
    "spatial_block_split",
    "valid_pixel_mask",
]
