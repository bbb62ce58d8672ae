"""What ``zoo.export`` ships for a vision classifier: the network on normalised images, ``(B, C, H, W) -> logits``.

The graph takes images already resized and normalised as the weights expect (``pretrained_cfg``: input
size, mean, std; stored with the export, together with the class names when the weights have them). The
batch axis is dynamic; the spatial size is the one traced (``image_size``, default the weights' input size).
Tolerance: ``atol = rtol = 1e-4`` on the logits. TorchScript works for ResNet18 and is kept
(``format="torchscript"``); :func:`export_onnx` and :func:`export_torchscript` are the earlier entry
points, now shortcuts for :func:`zoo.export`.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn
from torchvision.models import ResNet

from zoo.exporting import ExportResult, ExportSpec, Graph, export, register_exporter

__all__ = ["export_onnx", "export_resnet", "export_torchscript"]


def _sample(x: torch.Tensor, batch: int, seed: int) -> torch.Tensor:
    return torch.randn((batch, *x.shape[1:]), generator=torch.Generator().manual_seed(seed)).to(x.dtype)


@register_exporter(ResNet)
def export_resnet(model: nn.Module, batch: int = 2, image_size: int | None = None,
                  example_input: torch.Tensor | None = None) -> ExportSpec:
    """The classifier with a dynamic batch axis, traced on ``example_input`` or on random ``(batch, C,
    image_size, image_size)`` images; checked on batch sizes 1 and ``batch + 3`` too."""
    cfg = dict(getattr(model, "pretrained_cfg", None) or {})
    if example_input is None:
        c, h, w = cfg.get("input_size") or (model.conv1.in_channels, 224, 224)
        if image_size is not None:
            h = w = int(image_size)
        example_input = torch.randn(batch, c, h, w, generator=torch.Generator().manual_seed(0))
    elif not isinstance(example_input, torch.Tensor) or example_input.dim() != 4:
        raise ValueError(f"example_input must be a batched tensor (B, C, H, W), got {type(example_input).__name__} "
                         f"{tuple(getattr(example_input, 'shape', ()))}")
    n = example_input.shape[0]
    graph = Graph("classifier", model, (example_input,), ("input",), ("logits",), {0: {0: "batch"}},
                  checks=[(_sample(example_input, 1, 1),), (_sample(example_input, n + 3, 2),)])
    meta = {"model": "resnet18", "input": f"(B, {example_input.shape[1]}, {example_input.shape[2]}, "
            f"{example_input.shape[3]}) float32, normalised with mean/std",
            **{k: cfg[k] for k in ("mean", "std", "input_size", "resize", "interpolation", "classes", "weights")
               if k in cfg}}
    return ExportSpec([graph], atol=1e-4, rtol=1e-4, metadata=meta, torchscript=True)


def export_onnx(model: nn.Module, path: str | os.PathLike, example_input: torch.Tensor, **config: Any) -> ExportResult:
    """``zoo.export(model, path, "onnx", example_input=example_input)``."""
    return export(model, path, "onnx", example_input=example_input, **config)


def export_torchscript(model: nn.Module, path: str | os.PathLike, example_input: torch.Tensor,
                       **config: Any) -> ExportResult:
    """``zoo.export(model, path, "torchscript", example_input=example_input)``."""
    return export(model, path, "torchscript", example_input=example_input, **config)
