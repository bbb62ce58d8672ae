"""``predict``: classify image files, a folder of them, or PIL images with a model and its weights' transform."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageOps
from torch import nn

from zoo.engine.data import inference_placement, model_dtype, move_batch
from zoo.engine.layout import forward_channels_last
from zoo.engine.modes import eval_mode
from zoo.inputs import (
    check_predict_options,
    class_names,
    class_rows,
    collect_files,
    unreadable_row,
    warn_unreadable,
)
from zoo.vision.data import IMG_EXTENSIONS, open_rgb, to_rgb
from zoo.vision.transforms import transforms_for

__all__ = ["collect_images", "predict"]


def collect_images(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """Image files from a file, a folder (recursively, sorted; non-image files ignored) or a list of both."""
    return collect_files(inputs, IMG_EXTENSIONS, "image")


_ACCEPTED = ("an image file or folder (str or Path), a PIL image, an (H, W) or (H, W, 3|4) uint8 numpy image, a "
             "list mixing those, or a preprocessed (N, C, H, W) float batch (torch tensor or numpy array)")


@torch.no_grad()
def predict(
    model: nn.Module,
    inputs: Any,
    *,
    topk: int = 1,
    classes: Sequence[str] | None = None,
    transform: Any = None,
    batch_size: int = 32,
    device: str | torch.device | None = None,
    amp: str | None = "auto",
    exif_transpose: bool = True,
) -> list[dict[str, Any]]:
    """Classify images; one dict per image: ``{"input", "label", "index", "prob", "topk": [(label, prob), ...]}``.

    ``inputs``: a path (file or folder), a PIL image, an ``(H, W)`` / ``(H, W, 3|4)`` uint8 numpy image, a
    list mixing those, or an already preprocessed ``(N, C, H, W)`` float batch (a tensor or a numpy
    array; an empty one gives ``[]``). Class names
    come from ``classes``, else ``model.pretrained_cfg["classes"]`` (set by the weights or by
    :func:`zoo.finetune`), else the indices. A file that cannot be decoded is reported with an ``error``
    entry instead of a label, so one bad file does not lose the others' predictions; one
    :class:`zoo.inputs.UnreadableInputWarning` names them all (their count and the first five).
    Photos are turned upright per their EXIF orientation (``exif_transpose=False``: classified as stored).
    The model runs where it is; ``device=`` moves it there first (and it stays there, as with
    ``model.to(device)``). ``amp="auto"``: bf16 where this device computes convolutions faster in it, else
    fp32; ``amp=None`` (or ``"fp32"``) is exact fp32, ``"bf16"`` forces bf16 (``"fp16"`` on CUDA only).
    The model's train/eval mode is restored on return.
    """
    check_predict_options(topk, batch_size)
    device, dtype = inference_placement(model, device, amp)
    cfg = getattr(model, "pretrained_cfg", {}) or {}
    names = class_names(classes, cfg.get("classes"))
    if isinstance(inputs, np.ndarray) and inputs.ndim == 4:
        inputs = torch.from_numpy(inputs)
    if isinstance(inputs, torch.Tensor):
        return _predict_tensor(model, inputs, topk, names, batch_size, device, dtype)
    named = _named_images(inputs)
    tf = transform if transform is not None else transforms_for(model, train=False)
    results: list[tuple[int, dict[str, Any]]] = []
    in_dtype = model_dtype(model)  # the float images go to the network in its own dtype (.half(), .double())
    with eval_mode(model):
        for start in range(0, len(named), batch_size):
            chunk = named[start:start + batch_size]
            tensors, ok = [], []
            for pos, (key, src) in enumerate(chunk, start):
                try:
                    if isinstance(src, Image.Image):
                        img = to_rgb(ImageOps.exif_transpose(src) if exif_transpose else src, name=key)
                    else:
                        img = open_rgb(src, exif_transpose=exif_transpose)
                except (OSError, ValueError, SyntaxError) as err:
                    results.append((pos, unreadable_row(key, err)))
                    continue
                tensors.append(tf(img))
                ok.append((pos, key))
            if not tensors:
                continue
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                batch = move_batch(torch.stack(tensors), device, dtype=in_dtype)  # (B, C, H, W)
                logits = forward_channels_last(model, batch, dtype)  # (B, K)
            probs = logits.float().softmax(dim=1).cpu()
            rows = class_rows([key for _, key in ok], probs, topk, names)
            results += [(pos, row) for (pos, _), row in zip(ok, rows)]
    out = [row for _, row in sorted(results, key=lambda r: r[0])]
    warn_unreadable(out, "images")
    return out


def _named_images(inputs: Any) -> list[tuple[str, Any]]:
    """``[(name, PIL image or path)]`` in input order; folders expand to their image files."""
    if isinstance(inputs, (str, os.PathLike, Image.Image, np.ndarray)):
        items = [inputs]
    elif isinstance(inputs, Iterable) and not isinstance(inputs, (bytes, bytearray, Mapping)):
        items = list(inputs)
    else:
        raise TypeError(f"zoo.predict cannot classify {inputs!r:.60} ({type(inputs).__name__}); it takes {_ACCEPTED}")
    if not items:
        raise ValueError(f"no images given (an empty {type(inputs).__name__}); zoo.predict takes {_ACCEPTED}")
    named: list[tuple[str, Any]] = []
    for i, item in enumerate(items):
        if isinstance(item, Image.Image):
            named.append((f"image{i}", item))
        elif isinstance(item, np.ndarray):
            named.append((f"image{i}", _array_image(item, i)))
        elif isinstance(item, (str, os.PathLike)):
            named += [(str(p), p) for p in collect_images(item)]
        else:
            raise TypeError(f"zoo.predict cannot classify item {i}, {item!r:.60} ({type(item).__name__}); it takes "
                            f"{_ACCEPTED}")
    return named


def _array_image(a: np.ndarray, i: int) -> Image.Image:
    if a.dtype == np.uint8 and (a.ndim == 2 or (a.ndim == 3 and a.shape[2] in (1, 3, 4))):
        return Image.fromarray(a[..., 0] if a.ndim == 3 and a.shape[2] == 1 else a)
    raise ValueError(f"numpy input {i} has shape {a.shape} and dtype {a.dtype}: an image is (H, W) or (H, W, 3|4) "
                     "uint8; a preprocessed batch is an (N, C, H, W) float array passed as the whole input")


def _in_channels(model: nn.Module) -> int | None:
    """The channels the network takes: its first conv's, else its ``pretrained_cfg``'s (None: unknown)."""
    conv = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if conv is not None:
        return conv.in_channels
    size = (getattr(model, "pretrained_cfg", None) or {}).get("input_size")
    return int(size[0]) if size else None


def check_image_batch(model: nn.Module, x: torch.Tensor, what: str = "a tensor input") -> None:
    """``x`` must be a preprocessed float ``(N, C, H, W)`` batch of the network's channels; else an error that
    names what came and the fix (channels last, as NumPy and torchvision's CIFAR10.data hold images; uint8)."""
    channels = _in_channels(model)
    last = x.dim() == 4 and channels is not None and x.shape[-1] == channels and x.shape[1] != channels
    hint = (": images of (N, H, W, C) go in as x.permute(0, 3, 1, 2) (NumPy: X.transpose(0, 3, 1, 2))" if last else "") + (
        "; uint8 pixels are scaled and normalised as transforms_for(model) does, ((x / 255) - mean) / std, or "
        "given as PIL images, which get the network's transforms" if not x.is_floating_point() else "")
    if x.dim() != 4 or not x.is_floating_point() or last:
        raise ValueError(f"{what} must be a preprocessed float batch (N, C, H, W), got {x.dtype} {tuple(x.shape)}"
                         f"{hint}")
    if channels is not None and x.shape[1] != channels:
        raise ValueError(f"the batch has {x.shape[1]} channels (shape {tuple(x.shape)}) but the network takes "
                         f"{channels}: pass (N, {channels}, H, W), preprocessed as transforms_for(model) does")


def _predict_tensor(model: nn.Module, x: torch.Tensor, topk: int, names: Sequence[str] | None, batch_size: int,
                    device: torch.device, dtype: torch.dtype | None) -> list[dict[str, Any]]:
    check_image_batch(model, x)
    if len(x) == 0:
        return []
    in_dtype = model_dtype(model)  # a float64 batch from NumPy runs in the network's float32
    with eval_mode(model), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
        logits = [forward_channels_last(model, move_batch(x[i:i + batch_size], device, dtype=in_dtype), dtype).float()
                  for i in range(0, len(x), batch_size)]
    probs = torch.cat(logits).softmax(dim=1).cpu()  # (N, K)
    return class_rows([f"tensor[{i}]" for i in range(len(x))], probs, topk, names)
