"""What ``zoo.export`` ships for a video model: the clip classifier, ``clips (B, C, T, H, W) -> logits``.

Clips are float frames already preprocessed as the model's input recipe says (``video_cfg``: frames resized
to ``resize``, antialiased unless ``antialias`` is False, centre-cropped to ``size``, normalised with
``mean``/``std``; ``num_segments`` sparse frames for TSN, ``frames_per_clip`` consecutive ones for
R(2+1)D), the clips ``zoo.predict`` builds. The defaults
of ``frames`` and ``size`` are that recipe's, and the recipe is stored with the export (with the class
names when the weights have them), as the vision family stores ``pretrained_cfg``. The batch axis is
dynamic for both models; TSN's time axis is dynamic too (any number of segments, at least 2, or 3 with
``modality="rgbdiff"``, whose frame differences must not collapse to one), while R(2+1)D's is fixed at the
traced ``frames`` (its temporal strides make the shapes of later layers depend on T by rounding). The
spatial size is the traced ``size``; a ``size`` other than the recipe's scales the stored ``resize`` with
it. Tolerance: ``atol = rtol = 1e-4`` on the logits. Class names that no longer name the head's outputs (a
``model.fc`` replaced by hand) are not stored.
"""

from __future__ import annotations

from typing import Any

import torch
from torchvision.models.video import VideoResNet

from zoo.exporting import (
    ExportSpec,
    Graph,
    check_int,
    dtype_name,
    fitting_classes,
    floating_dtype,
    head_outputs,
    register_exporter,
)
from zoo.video.classifier import clip_recipe, recipe_sizes
from zoo.video.r2plus1d import R2Plus1D18
from zoo.video.tsn import VideoTSN

__all__ = ["export_r2plus1d", "export_tsn"]


def _clips(batch: int, frames: int, size: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Random clips in the model's floating dtype (a ``.half()`` model refuses float32 clips)."""
    return torch.randn(batch, 3, frames, size, size, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _recipe(model: torch.nn.Module, frames: int | None, size: int | None,
            default_t: int) -> tuple[dict[str, Any], int, int]:
    """The stored input recipe, and the ``frames``/``size`` to trace (the recipe's unless given)."""
    cfg = dict(getattr(model, "video_cfg", None) or {})
    key, t = clip_recipe(cfg) if cfg else ("frames_per_clip", default_t)
    frames = t if frames is None else check_int("frames", frames)
    # checked: int() exported a recipe of size 16.7 as 16, which the stored recipe then claimed
    trained, resize = recipe_sizes(cfg) if cfg else (112, 112)  # resize: the shorter side, or [height, width]
    size = trained if size is None else check_int("size", size)
    recipe = {k: cfg[k] for k in ("mean", "std", "classes") if k in cfg}
    if cfg:

        def follow(r: int) -> int:  # another crop than the recipe's scales the resize (as image_size does)
            return r if size == trained else max(size, round(r * size / trained))

        recipe.update(size=size, resize=[follow(r) for r in resize] if isinstance(resize, list) else follow(resize))
        if not cfg.get("antialias", True):  # torchvision's Kinetics weights: frames resized without it
            recipe["antialias"] = False
        recipe[key] = t
    return recipe, frames, size


def _spec(model: torch.nn.Module, name: str, sample: torch.Tensor, checks: list[torch.Tensor],
          time_axis: dict[int, str], min_frames: int, recipe: dict[str, Any]) -> ExportSpec:
    graph = Graph("classifier", model, (sample,), ("clips",), ("logits",), {0: {0: "batch", **time_axis}},
                  checks=[(c,) for c in checks], min_sizes={"frames": min_frames})
    t = "T" if time_axis else str(sample.shape[2])
    # the recipe's class names only while they name the head's outputs (model.fc replaced by hand keeps them)
    outputs = head_outputs(model)
    recipe, dropped = fitting_classes(recipe, outputs)
    meta = {"model": name, "clips": f"(B, 3, {t}, {sample.shape[3]}, {sample.shape[4]}) {dtype_name(sample.dtype)}, "
            "normalised", "logits": f"(B, {outputs if outputs is not None else 'D'})",
            **recipe}
    if dropped is not None:
        meta["classes_dropped"] = dropped
    return ExportSpec([graph], atol=1e-4, rtol=1e-4, metadata=meta)


@register_exporter(VideoTSN)
def export_tsn(model: VideoTSN, batch: int = 2, frames: int | None = None, size: int | None = None) -> ExportSpec:
    """TSN with dynamic batch and segment count, traced on ``batch`` clips of ``frames`` segments (default
    the recipe's ``num_segments``) of ``size`` pixels (default its ``size``); checked on (1, frames + 2) and
    (batch + 1, frames - 1) too (frames + 1 where frames - 1 is under the least TSN takes)."""
    batch = check_int("batch", batch)
    recipe, frames, size = _recipe(model, frames, size, 8)
    min_frames = 3 if model.modality == "rgbdiff" else 2
    if frames < min_frames:
        raise ValueError(f"export option frames must be at least {min_frames} for this TSN ({model.modality}), got "
                         f"{frames} (zoo export video-tsn --set frames={min_frames})")
    # another segment count on each side where the recipe's is above the least (a 2-segment recipe: above only)
    other = frames - 1 if frames - 1 >= min_frames else frames + 1
    dtype = floating_dtype(model)
    checks = [_clips(1, frames + 2, size, 1, dtype), _clips(batch + 1, other, size, 2, dtype)]
    return _spec(model, "video-tsn", _clips(batch, frames, size, 0, dtype), checks, {2: "frames"}, min_frames, recipe)


@register_exporter(R2Plus1D18)  # zoo's: torchvision's other VideoResNets (r3d_18, mc3_18) are plain modules here
def export_r2plus1d(model: VideoResNet, batch: int = 2, frames: int | None = None,
                    size: int | None = None) -> ExportSpec:
    """R(2+1)D with a dynamic batch; ``frames`` (default the recipe's ``frames_per_clip``) and ``size``
    (default its ``size``) are fixed at export, and the stored recipe says the graph's T; checked on batch
    1 too."""
    batch = check_int("batch", batch)
    recipe, frames, size = _recipe(model, frames, size, 16)
    key = next((k for k in ("num_segments", "frames_per_clip") if k in recipe), "frames_per_clip")
    recipe[key] = frames  # the graph takes exactly this T, whatever the recipe trained with
    dtype = floating_dtype(model)
    return _spec(model, "r2plus1d_18", _clips(batch, frames, size, 0, dtype), [_clips(1, frames, size, 1, dtype)], {},
                 1, recipe)
