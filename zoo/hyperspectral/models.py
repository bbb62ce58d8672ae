"""Registry entries of the hyperspectral family: ``hsi-pca-svm`` and ``hybridsn``."""

from __future__ import annotations

from typing import Any

from zoo.hyperspectral.hybridsn import HybridSN, HybridSNConfig
from zoo.hyperspectral.scene_model import load_scene_model
from zoo.hyperspectral.svm import HSIPipeline, PCASVMConfig, load_pipeline, make_pca_svm
from zoo.registry import register

__all__ = ["build_hybridsn", "build_pca_svm"]


# build keys -> the fitted pipeline's parameters (what the file's fit was made with)
_SVM_PARAMS = {"n_components": "pca__n_components", "whiten": "pca__whiten", "C": "svm__C", "gamma": "svm__gamma",
               "class_weight": "svm__class_weight"}


def _load_svm(obj: HSIPipeline, path, entry, requested: dict[str, Any] | None = None) -> HSIPipeline:
    """The file's fitted pipeline. A setting asked for beside the weights that the fit was not made with is
    refused (ignored, ``n_components=5`` would give the file's 70 components, and a refit would keep them)."""
    pipe = load_pipeline(path)
    params = pipe.get_params()
    differ = {k: v for k, v in (requested or {}).items() if k in _SVM_PARAMS and params[_SVM_PARAMS[k]] != v}
    if differ:
        found = ", ".join(f"{k}={params[_SVM_PARAMS[k]]!r}" for k in differ)
        wanted = ", ".join(f"{k}={v!r}" for k, v in differ.items())
        raise ValueError(f"{entry.name if entry is not None else path} was fitted with {found}, but {wanted} was "
                         "asked for: a fitted pipeline keeps the settings of its fit; leave them out to use the "
                         "file's, or build without weights= and train with them")
    return pipe


def _classes_in(data: Any, labels: Any = None, gt_key: str | None = None, cube_key: str | None = None) -> dict[str, Any]:
    """A labelled scene implies ``num_classes`` (its largest class id); ``labels``: the ground-truth file a
    cube without one is trained with (``zoo.train("hybridsn", "cube.npy", labels="gt.npy")``); ``gt_key`` /
    ``cube_key``: the arrays of a .mat file that zoo.train will read."""
    from zoo.hyperspectral.evaluation import as_scene

    try:
        scene = as_scene(data, labels=labels, gt_key=gt_key, cube_key=cube_key)
    except (TypeError, FileNotFoundError):
        return {}
    return {"num_classes": int(scene.labels.max())} if scene.labels is not None and scene.labels.max() > 1 else {}


@register(
    "hsi-pca-svm",
    config=PCASVMConfig,
    references=("Melgani & Bruzzone 2004, https://doi.org/10.1109/TGRS.2004.831865",
                "HybridSN Table II SVM baseline, https://arxiv.org/abs/1902.06701"),
    load_weights=_load_svm,
)
def build_pca_svm(**config: Any) -> HSIPipeline:
    """Per-band standardisation + PCA + RBF SVM; ``config``: :class:`PCASVMConfig` fields."""
    return make_pca_svm(**config)


@register(
    "hybridsn",
    config=HybridSNConfig,
    references=("Roy et al., HybridSN, IEEE GRSL 2020, https://arxiv.org/abs/1902.06701",),
    load_weights=load_scene_model,
    infer_config=_classes_in,
)
def build_hybridsn(**config: Any) -> HybridSN:
    """HybridSN; ``config``: :class:`HybridSNConfig` fields."""
    return HybridSN(HybridSNConfig(**config))
