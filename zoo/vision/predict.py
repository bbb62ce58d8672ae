"""``predict``: classify image files, a folder of them, or PIL images with a model and its weights' transform."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image, ImageOps
from torch import nn

from zoo.vision.data import IMG_EXTENSIONS, open_rgb, to_rgb
from zoo.vision.transforms import transforms_for

__all__ = ["collect_images", "predict"]


def collect_images(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """Image files from a file, a folder (recursively, sorted; non-image files ignored) or a list of both."""
    from zoo.inputs import collect_files

    return collect_files(inputs, IMG_EXTENSIONS, "image")


@torch.no_grad()
def predict(
    model: nn.Module,
    inputs: Any,
    *,
    topk: int = 1,
    classes: Sequence[str] | None = None,
    transform: Any = None,
    batch_size: int = 32,
    device: str = "cpu",
    exif_transpose: bool = True,
) -> list[dict[str, Any]]:
    """Classify images; one dict per image: ``{"input", "label", "index", "prob", "topk": [(label, prob), ...]}``.

    ``inputs``: a path (file or folder), a list of paths, a PIL image, a list of PIL images, or an already
    preprocessed ``(N, C, H, W)`` float tensor. Class names
    come from ``classes``, else ``model.pretrained_cfg["classes"]`` (set by the weights or by
    :func:`zoo.finetune`), else the indices. A file that cannot be decoded is reported with an ``error``
    entry instead of a label (and a warning), so one bad file does not lose the others' predictions.
    Photos are turned upright per their EXIF orientation (``exif_transpose=False``: classified as stored).
    """
    cfg = getattr(model, "pretrained_cfg", {}) or {}
    names = list(classes) if classes is not None else cfg.get("classes")
    if isinstance(inputs, torch.Tensor):
        return _predict_tensor(model, inputs, topk, names, batch_size, device)
    if isinstance(inputs, Image.Image):
        inputs = [inputs]
    if isinstance(inputs, list) and inputs and all(isinstance(i, Image.Image) for i in inputs):
        named: list[tuple[str, Any]] = [(f"image{i}", img) for i, img in enumerate(inputs)]
    else:
        named = [(str(p), p) for p in collect_images(inputs)]
    tf = transform if transform is not None else transforms_for(model, train=False)
    model.eval().to(device)
    results: list[dict[str, Any]] = []
    for start in range(0, len(named), batch_size):
        chunk = named[start:start + batch_size]
        tensors, ok = [], []
        for key, src in chunk:
            try:
                if isinstance(src, Image.Image):
                    img = to_rgb(ImageOps.exif_transpose(src) if exif_transpose else src, name=key)
                else:
                    img = open_rgb(src, exif_transpose=exif_transpose)
            except (OSError, ValueError, SyntaxError) as err:
                warnings.warn(f"cannot decode {key}: {err}", stacklevel=2)
                results.append({"input": key, "error": str(err)})
                continue
            tensors.append(tf(img))
            ok.append(key)
        if not tensors:
            continue
        probs = model(torch.stack(tensors).to(device)).float().softmax(dim=1).cpu()  # (B, K)
        results += _rows(ok, probs, topk, names)
    order = {key: i for i, (key, _) in enumerate(named)}
    results.sort(key=lambda r: order[r["input"]])
    return results


def _rows(keys: Sequence[str], probs: torch.Tensor, topk: int, names: Sequence[str] | None) -> list[dict[str, Any]]:
    top_p, top_i = probs.topk(min(topk, probs.shape[1]), dim=1)

    def label(i: int) -> str:
        return names[i] if names is not None and i < len(names) else str(i)

    return [{"input": key, "label": label(idx[0]), "index": idx[0], "prob": ps[0],
             "topk": [(label(i), p) for i, p in zip(idx, ps)]}
            for key, ps, idx in zip(keys, top_p.tolist(), top_i.tolist())]


def _predict_tensor(model: nn.Module, x: torch.Tensor, topk: int, names: Sequence[str] | None, batch_size: int,
                    device: str) -> list[dict[str, Any]]:
    if x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"a tensor input must be a preprocessed float batch (N, C, H, W), got {x.dtype} "
                         f"{tuple(x.shape)}")
    was_training = model.training
    model.eval().to(device)
    try:
        probs = torch.cat([model(x[i:i + batch_size].to(device)).float().softmax(dim=1).cpu()
                           for i in range(0, len(x), batch_size)])  # (N, K)
    finally:
        model.train(was_training)
    return _rows([f"tensor[{i}]" for i in range(len(x))], probs, topk, names)
