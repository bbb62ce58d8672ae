"""``predict``: classify image files, a folder of them, or PIL images with a model and its weights' transform."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageOps
from torch import nn

from zoo._progress import ProgressBar
from zoo.engine.data import model_dtype, move_batch
from zoo.engine.devices import inference_placement
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

__all__ = ["array_image", "collect_images", "is_array_image", "predict"]


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
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Classify images; one dict per image: ``{"input", "label", "index", "prob", "topk": [(label, prob), ...]}``.

    ``inputs``: a path (file or folder), a PIL image, an ``(H, W)`` / ``(H, W, 3|4)`` uint8 numpy image, a
    list mixing those, an already preprocessed ``(N, C, H, W)`` float batch (a tensor or a numpy
    array; an empty one gives ``[]``), or a Dataset or DataLoader of them (each sample's input, the first
    item of an ``(input, label)`` pair; rows named ``dataset[i]``, or ``batch[b][i]`` in a DataLoader's order),
    as ``zoo.evaluate`` takes. Class names
    come from ``classes``, else ``model.pretrained_cfg["classes"]`` (set by the weights or by
    :func:`zoo.finetune`), else the indices. A file that cannot be decoded is reported with an ``error``
    entry instead of a label, so one bad file does not lose the others' predictions; one
    :class:`zoo.inputs.UnreadableInputWarning` names them all (their count and the first five).
    Photos are turned upright per their EXIF orientation (``exif_transpose=False``: classified as stored).
    The model runs where it is; ``device=`` moves it there first (and it stays there, as with
    ``model.to(device)``). ``amp="auto"``: bf16 where this device computes convolutions faster in it, else
    fp32; ``amp=None`` (or ``"fp32"``) is exact fp32, ``"bf16"`` forces bf16 (``"fp16"`` on CUDA only).
    The model's train/eval mode is restored on return. ``progress=True`` shows a bar over the batches.
    """
    topk, batch_size = check_predict_options(topk, batch_size)
    device, dtype = inference_placement(model, device, amp)
    cfg = getattr(model, "pretrained_cfg", {}) or {}
    names = class_names(classes, cfg.get("classes"))
    if isinstance(inputs, np.ndarray) and inputs.ndim == 4:
        inputs = torch.from_numpy(inputs)
    if isinstance(inputs, torch.Tensor):
        return _predict_tensor(model, inputs, topk, names, batch_size, device, dtype)
    tf = transform if transform is not None else transforms_for(model, train=False)
    run = _Run(model, tf, topk, names, device, dtype, exif_transpose)
    if isinstance(inputs, (torch.utils.data.Dataset, torch.utils.data.DataLoader)):
        out = _predict_dataset(run, inputs, batch_size, progress)
    else:
        named = _named_images(inputs)
        chunks = [named[i:i + batch_size] for i in range(0, len(named), batch_size)]
        out = [row for chunk in ProgressBar(chunks, desc="predict", unit="batch", disable=not progress)
               for row in run.images(chunk)]
    warn_unreadable(out, "images")
    return out


@dataclass
class _Run:
    """What classifying one batch needs: the network, its transform and labels, where and how it runs."""

    model: nn.Module
    transform: Any
    topk: int
    names: Sequence[str] | None
    device: torch.device
    dtype: torch.dtype | None
    exif_transpose: bool

    def images(self, chunk: list[tuple[str, Any]]) -> list[dict[str, Any]]:
        """Rows of ``[(name, PIL image or path)]``, in order; an unreadable file gets an ``error`` row."""
        rows: dict[int, dict[str, Any]] = {}
        tensors, ok = [], []
        for pos, (key, src) in enumerate(chunk):
            try:
                if isinstance(src, Image.Image):
                    img = to_rgb(ImageOps.exif_transpose(src) if self.exif_transpose else src, name=key)
                else:
                    img = open_rgb(src, exif_transpose=self.exif_transpose)
            except (OSError, ValueError, SyntaxError) as err:
                rows[pos] = unreadable_row(key, err)
                continue
            tensors.append(self.transform(img))
            ok.append((pos, key))
        if tensors:
            in_dtype = model_dtype(self.model)  # the float images go to the network in its own dtype (.half())
            with eval_mode(self.model), torch.autocast(self.device.type, dtype=self.dtype,
                                                       enabled=self.dtype is not None):
                batch = move_batch(torch.stack(tensors), self.device, dtype=in_dtype)  # (B, C, H, W)
                logits = forward_channels_last(self.model, batch, self.dtype)  # (B, K)
            probs = logits.float().softmax(dim=1).cpu()
            rows.update(zip((pos for pos, _ in ok), class_rows([key for _, key in ok], probs, self.topk, self.names)))
        return [rows[pos] for pos in sorted(rows)]


def _predict_dataset(run: _Run, data: Any, batch_size: int, progress: bool) -> list[dict[str, Any]]:
    """Rows of a Dataset's samples (``dataset[i]``) or of a DataLoader's batches (``batch[b][i]``: its sampler
    decides the order), ``batch_size`` at a time: preprocessed ``(C, H, W)`` tensors as they are, images (PIL,
    uint8 arrays, paths) through the network's transform."""
    out: list[dict[str, Any]] = []
    items = _sample_inputs(data)
    sized = not isinstance(data, (torch.utils.data.DataLoader, torch.utils.data.IterableDataset))
    with ProgressBar(total=len(data) if sized else None, desc="predict", unit="image", disable=not progress) as bar:
        while chunk := list(itertools.islice(items, batch_size)):
            keys, inputs = [k for k, _ in chunk], [x for _, x in chunk]
            if all(isinstance(x, torch.Tensor) for x in inputs):
                rows = _predict_tensor(run.model, torch.stack(inputs), run.topk, run.names, batch_size, run.device,
                                       run.dtype)
                for row, key in zip(rows, keys):
                    row["input"] = key
            else:
                rows = run.images([(key, array_image(x, len(out) + i) if isinstance(x, np.ndarray) else x)
                                   for i, (key, x) in enumerate(chunk)])
            out += rows
            bar.update(len(chunk))
    return out


def _sample_inputs(data: Any) -> Iterator[tuple[str, Any]]:
    """``(name, input)`` of each sample, one image at a time: the first item of a Dataset's ``(input, label)``
    samples (a sample that is no pair is the input), or each input of a DataLoader's batches."""
    if isinstance(data, torch.utils.data.DataLoader):
        default_collated = data.collate_fn is torch.utils.data.default_collate
        for b, batch in enumerate(data):
            for i, x in enumerate(_batch_inputs(batch, default_collated)):
                yield f"batch[{b}][{i}]", x
        return
    samples = iter(data) if isinstance(data, torch.utils.data.IterableDataset) else (data[i] for i in range(len(data)))
    for i, sample in enumerate(samples):
        yield f"dataset[{i}]", _input_of(sample)


def _input_of(sample: Any) -> Any:
    """The input of a sample or batch: the first item of ``(input, label)``, the one value beside the label of a
    dict (Hugging Face's ``{"img": ..., "label": ...}``, ``{"pixel_values": ..., "labels": ...}``, the forms
    zoo.evaluate reads: :data:`zoo.engine.data.TARGET_KEYS`), else the sample itself."""
    from zoo.engine.data import TARGET_KEYS

    if isinstance(sample, (tuple, list)):
        return sample[0]
    if isinstance(sample, Mapping):
        inputs = [k for k in sample if k not in TARGET_KEYS]
        if len(inputs) != 1:
            raise TypeError(f"zoo.predict reads a dict sample's image under its one key besides the label "
                            f"({', '.join(map(repr, TARGET_KEYS))}); this one has the keys "
                            f"{', '.join(map(repr, sample))}: pass a Dataset whose samples hold one image")
        return sample[inputs[0]]
    return sample


def _batch_inputs(batch: Any, default_collated: bool = False) -> Any:
    """The inputs of one DataLoader batch: the default collate's ``[x, y]`` or ``{"image": x, "label": y}``
    (``x`` a tensor batch or a list), or a list of ``(input, label)`` or dict samples (``collate_fn=lambda b:
    b``, which keeps PIL images). ``default_collated``: the loader's ``collate_fn`` is torch's
    ``default_collate``, so a batch of two equally long members is its ``[x, y]``."""
    pair = _collated_pair(batch)
    if pair and (default_collated or _image_names_first(batch[0], batch[1])):
        return batch[0]
    if isinstance(batch, (tuple, list)) and batch and all(isinstance(s, (tuple, list, Mapping)) for s in batch):
        if pair and not _image_names_first([s[0] for s in batch], [s[1] for s in batch]):
            raise ValueError(
                f"zoo.predict cannot tell whether this DataLoader batch, {batch!r:.120}, is [inputs, labels] as "
                "torch's default_collate makes it or two (input, label) samples as a collate_fn of its own gives "
                "them; expected one of those read unambiguously: use the default collate_fn, another batch_size "
                "than 2, or image files named with their suffix (.jpg, .png)")
        return [_input_of(sample) for sample in batch]
    batch = _input_of(batch)
    return batch if isinstance(batch, (torch.Tensor, list, tuple)) else [batch]


def _collated_pair(batch: Any) -> bool:
    """Whether ``batch`` has the shape torch's ``default_collate`` gives ``(input, label)`` samples: two
    members of one length, each a tensor or a list of str (it stacks numbers into tensors, and keeps str)."""
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        return False
    lengths = {len(m) if isinstance(m, torch.Tensor) and m.dim() > 0
               or isinstance(m, (tuple, list)) and all(isinstance(v, str) for v in m) else None for m in batch}
    return None not in lengths and len(lengths) == 1


def _image_names_first(inputs: Sequence[Any], labels: Sequence[Any]) -> bool:
    """Whether ``inputs`` all name image files (by their suffix) and none of ``labels`` does."""
    def named(v: Any) -> bool:
        return isinstance(v, (str, os.PathLike)) and Path(v).suffix.lower() in IMG_EXTENSIONS

    return all(map(named, inputs)) and not any(map(named, labels))


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
            named.append((f"image{i}", array_image(item, i)))
        elif isinstance(item, (str, os.PathLike)):
            named += [(str(p), p) for p in collect_images(item)]
        else:
            raise TypeError(f"zoo.predict cannot classify item {i}, {item!r:.60} ({type(item).__name__}); it takes "
                            f"{_ACCEPTED}")
    return named


def is_array_image(a: Any) -> bool:
    """Whether ``a`` is a NumPy image as cv2 / ``np.asarray(pil)`` give one: uint8 ``(H, W)`` or ``(H, W, 1|3|4)``."""
    return isinstance(a, np.ndarray) and a.dtype == np.uint8 and (a.ndim == 2 or a.ndim == 3 and a.shape[2] in (1, 3, 4))


def array_image(a: np.ndarray, i: int, *, sample: bool = False) -> Image.Image:
    """A uint8 NumPy image (:func:`is_array_image`) as a PIL image; else an error naming the layout that came and
    the one expected. ``sample``: ``a`` is a data set's sample ``i`` (the TransformedImages of
    :mod:`zoo.vision.data`), not predict's input ``i``, beside which a whole preprocessed batch may go."""
    if is_array_image(a):
        return Image.fromarray(a[..., 0] if a.ndim == 3 and a.shape[2] == 1 else a)
    hint = ""
    if a.ndim == 3 and a.shape[0] in (1, 3, 4) and a.shape[2] not in (1, 3, 4):  # (C, H, W): torch's order
        hint = (f"; a (C, H, W) image goes in as a.transpose(1, 2, 0), of shape {a.shape[1:] + a.shape[:1]}"
                if a.dtype == np.uint8 else "; one preprocessed (C, H, W) image goes in as a batch of one, a[None]")
    what, batch = (f"sample {i}'s numpy image", "") if sample else (
        f"numpy input {i}", "; a preprocessed batch is an (N, C, H, W) float array passed as the whole input")
    raise ValueError(f"{what} has shape {a.shape} and dtype {a.dtype}: an image is (H, W) or (H, W, 3|4) "
                     f"uint8{batch}{hint}")


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
    one = x.dim() == 3 and channels is not None and x.shape[0] == channels  # torchvision's one image, (C, H, W)
    hint = (": images of (N, H, W, C) go in as x.permute(0, 3, 1, 2) (NumPy: X.transpose(0, 3, 1, 2))" if last else "") + (
        ": one image of (C, H, W) goes in as a batch of one, x.unsqueeze(0)" if one else "") + (
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
