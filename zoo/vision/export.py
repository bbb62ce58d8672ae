"""What ``zoo.export`` ships for a vision classifier: the network on normalised images, ``(B, C, H, W) -> logits``.

The graph takes images already resized and normalised as the weights expect (``pretrained_cfg``: input
size, resize, mean, std; stored with the export, together with the class names when the weights have them and
they still name the head's outputs: a head replaced by hand drops them, and the weights' name moves to
``backbone_from``, as ``reset_classifier`` records it). A headless network (``fc = nn.Identity()``) is exported
as a feature extractor, its output named ``features``.
The batch axis is dynamic; the spatial size is the one traced (``image_size``, default the weights' input
size), and the stored ``input_size``/``resize`` are those of that size (the resize scaled with it, as
``zoo.vision.transforms.transforms_for(model, image_size=...)`` and a training at ``image_size`` scale it).
Tolerance: ``atol = rtol = 1e-4`` on the logits. TorchScript
works for ResNet18 (it is scripted, through a plain torchvision ``ResNet`` holding the same layers) and is
kept (``format="torchscript"``); :func:`export_onnx` and :func:`export_torchscript` stay for callers
of these names, as shortcuts for :func:`zoo.export`.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn
from torchvision.models import ResNet

from zoo.exporting import (
    ExportResult,
    ExportSpec,
    Graph,
    check_int,
    dtype_name,
    export,
    fitting_classes,
    floating_dtype,
    head_outputs,
    register_exporter,
)
from zoo.vision.resnet import ResNet18, _fit_channels
from zoo.vision.transforms import with_image_size

__all__ = ["export_onnx", "export_resnet", "export_torchscript"]


def _sample(x: torch.Tensor, batch: int, seed: int) -> torch.Tensor:
    return torch.randn((batch, *x.shape[1:]), generator=torch.Generator().manual_seed(seed)).to(x.dtype)


def _scriptable(model: ResNet) -> nn.Module:
    """A plain torchvision ``ResNet`` holding ``model``'s layers (shared, not copied) when ``model`` computes
    what ResNet computes: zoo's subclass adds Python-only attributes (``pretrained_cfg``, properties) that
    ``torch.jit.script`` cannot compile, though its forward is torchvision's."""
    if type(model).forward is not ResNet.forward or type(model)._forward_impl is not ResNet._forward_impl:
        return model
    plain = ResNet.__new__(ResNet)
    nn.Module.__init__(plain)
    for name, child in model.named_children():
        plain.add_module(name, child)
    plain.train(model.training)
    return plain


def _input_cfg(cfg: dict[str, Any], example_input: torch.Tensor) -> dict[str, Any]:
    """The preprocessing keys of ``cfg`` for the traced input's size: a graph traced at another size than
    the weights' takes images cropped to that size (and resized in proportion, as ``image_size`` does)."""
    c, h, w = (int(n) for n in example_input.shape[1:])
    # the weights' name (or, after a head reset or a fine-tune, the weights it started from): where it came from
    keys = ("mean", "std", "input_size", "resize", "interpolation", "classes", "weights", "backbone_from",
            "finetuned_from")
    out = {k: cfg[k] for k in keys if k in cfg}
    if "input_size" in cfg and [int(n) for n in cfg["input_size"]][1:] != [h, w]:
        if h == w and all(k in cfg for k in ("mean", "std")):
            out.update({k: v for k, v in with_image_size(cfg, h).items() if k in ("input_size", "resize")})
        else:  # a non-square crop has no single resize of the short side that leads to it
            out["input_size"] = [c, h, w]
            out.pop("resize", None)
    return out


def _fit_input_channels(cfg: dict[str, Any], channels: int) -> str | None:
    """Make ``cfg``'s ``input_size`` and ``mean``/``std`` those of a network taking ``channels``, the rule of a
    network built with that ``in_chans`` (:func:`zoo.vision.resnet._fit_channels`: one channel averages RGB
    statistics, other counts get mean 0 and std 1); returns what the metadata should say when the recorded
    statistics did not fit (``conv1`` swapped after the network was built), else ``None``."""
    if cfg.get("input_size"):
        cfg["input_size"] = [channels, *list(cfg["input_size"])[1:]]
    stats = {k: [float(v) for v in cfg[k]] for k in ("mean", "std") if k in cfg}
    if all(len(v) == channels for v in stats.values()):
        return None
    fitted: dict[str, Any] = {"input_size": [channels], **stats}
    _fit_channels(fitted, channels)
    cfg.update({k: fitted[k] for k in stats})
    recorded = ", ".join(f"{k} {v}" for k, v in stats.items())
    how = ("the recorded statistics averaged, as zoo.build('resnet18', in_chans=1, weights=...) does"
           if channels == 1 and all(len(v) > 1 for v in stats.values()) else
           f"mean/std of a network built with in_chans={channels} ({', '.join(f'{k} {fitted[k]}' for k in stats)}): "
           f"no statistics carry over, so normalise the images as the network was trained on them")
    return (f"pretrained_cfg records {recorded} for {len(next(iter(stats.values())))} channels, but the network's "
            f"first convolution takes {channels}; stored: {how}")


@register_exporter(ResNet18)  # not torchvision's ResNet: a foreign one (a resnet50) is a plain module, exported with
# example_inputs= in any process, not labelled resnet18 once this module happened to be imported
def export_resnet(model: nn.Module, batch: int | None = None, image_size: int | None = None,
                  example_input: torch.Tensor | None = None) -> ExportSpec:
    """The classifier with a dynamic batch axis, traced on ``example_input`` or on random ``(batch, C,
    image_size, image_size)`` images (``batch`` default 2); checked on batch sizes 1 and ``batch + 3`` too. The
    images are in the model's floating dtype (a ``.half()`` model takes float16 images; a float
    ``example_input`` is cast). Class names are stored only when they name the head's outputs (a head replaced
    by hand leaves the weights' names behind); a headless network (``fc = nn.Identity()``) is exported as the
    feature extractor it is, its output named ``features``."""
    outputs = head_outputs(model)
    cfg, dropped = fitting_classes(getattr(model, "pretrained_cfg", None) or {}, outputs)
    # the channels of the network's first convolution, as model.config.in_chans and zoo.predict read them: a
    # conv1 swapped after the build (torchvision's way to take 4-band images) leaves pretrained_cfg at 3
    channels = model.conv1.in_channels
    note = _fit_input_channels(cfg, channels)
    dtype = floating_dtype(model)
    if example_input is None:
        batch = 2 if batch is None else check_int("batch", batch)
        _, h, w = cfg.get("input_size") or (channels, 224, 224)
        if image_size is not None:
            h = w = check_int("image_size", image_size)
        example_input = torch.randn(batch, channels, h, w, generator=torch.Generator().manual_seed(0)).to(dtype)
    elif not isinstance(example_input, torch.Tensor) or example_input.dim() != 4 or not example_input.numel():
        raise ValueError(f"example_input must be a batched tensor (B, C, H, W), got {type(example_input).__name__} "
                         f"{tuple(getattr(example_input, 'shape', ()))}")
    elif batch is not None or image_size is not None:
        # the example's own shape is traced: a batch or image_size beside it was silently ignored
        given = ", ".join(f"{k}={v!r}" for k, v in (("batch", batch), ("image_size", image_size)) if v is not None)
        raise ValueError(f"export options {given} and example_input {tuple(example_input.shape)} both set the traced "
                         f"images; give one of them (the graph is traced on example_input's shape)")
    elif not example_input.is_floating_point():
        # the tracer's own error was 'mean(): could not infer output dtype ... Got: torch.int64', pages down
        raise ValueError(f"example_input must hold float images normalised with mean/std (the network's input), "
                         f"got dtype {example_input.dtype}: convert uint8 pixels first, e.g. "
                         f"(x.float() / 255 - mean) / std")
    elif example_input.shape[1] != channels:
        raise ValueError(f"example_input has {example_input.shape[1]} channels (shape {tuple(example_input.shape)}) "
                         f"but the network's first convolution takes {channels}: pass (B, {channels}, H, W)")
    elif example_input.is_floating_point():
        # float32 images for a .half() model: the graph takes float16; and on the CPU, where zoo.export traces
        # its copy of the model (a GPU example_input met a CPU model in the tracer), as the generic path does
        example_input = example_input.detach().to("cpu", dtype)
    n = example_input.shape[0]
    output = "logits" if outputs is not None else "features"
    graph = Graph("classifier", _scriptable(model), (example_input,), ("input",), (output,), {0: {0: "batch"}},
                  checks=[(_sample(example_input, 1, 1),), (_sample(example_input, n + 3, 2),)])
    meta = {"model": "resnet18", "input": f"(B, {example_input.shape[1]}, {example_input.shape[2]}, "
            f"{example_input.shape[3]}) {dtype_name(example_input.dtype)}, normalised with mean/std",
            output: f"(B, {outputs})" if outputs is not None else
            f"(B, {getattr(model, 'num_features', 'D')}) pooled features: the network has no classifier (its head "
            f"is not an nn.Linear)",
            **_input_cfg(cfg, example_input)}
    if note is not None:
        meta["normalisation"] = note
    if dropped is not None:
        meta["classes_dropped"] = dropped
    return ExportSpec([graph], atol=1e-4, rtol=1e-4, metadata=meta, torchscript=True)


def export_onnx(model: nn.Module, path: str | os.PathLike, example_input: torch.Tensor, **config: Any) -> ExportResult:
    """``zoo.export(model, path, "onnx", example_input=example_input)``."""
    return export(model, path, "onnx", example_input=example_input, **config)


def export_torchscript(model: nn.Module, path: str | os.PathLike, example_input: torch.Tensor,
                       **config: Any) -> ExportResult:
    """``zoo.export(model, path, "torchscript", example_input=example_input)``."""
    return export(model, path, "torchscript", example_input=example_input, **config)
