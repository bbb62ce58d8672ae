"""Memory layout of a convolutional network: channels-last where its convolutions were measured faster.

oneDNN's CPU convolutions compute on channels-last data (NHWC, NDHWC); given PyTorch's default channels-first
tensors, every convolution reorders its input, output and their gradients on the way. Measured on the AMX
Xeon, bf16 autocast, fused AdamW: one training step of two copies of a model (one converted) timed
alternately, 20-30 steps each, the median per-step ratio channels-first / channels-last
(``benchmarks/layout_families.py`` and the same steps ad hoc, 2026-12-05, three to five runs each):

* ResNet18 (CIFAR stem, 64 images of 32x32): 1.15-1.21x; whole ``fit`` epochs 1.17x / 1.23x (paired);
  CIFAR training throughput in ``benchmarks/cifar10_resnet18.py``: 203.2 vs 150.6 images/s (1.35x), on the
  Zen 4 93.2 vs 82.0 (1.14x);
* TSN (ResNet18 on 4 clips of 8 frames, 64x64): 1.03-1.09x;
* R(2+1)D-18 (3-D convolutions only, 2 clips of 8 frames): 1.04-1.08x;
* HybridSN (3-D then 2-D convolutions, 64 windows): 0.87-0.96x: its 3-D output, reshaped for the 2-D
  layers, is copied out of the channels-last layout and back.

The forward pass of an evaluation (eval and inference mode, bf16 autocast; same protocol) gains more: ResNet18
(64-256 images of 32x32) 1.30-1.52x, TSN 1.54-1.96x, R(2+1)D-18 1.31-1.35x, HybridSN 1.00-1.06x (left
channels-first with its training).

On the AVX512-BF16 kind (AMD Zen 4, ``layout_families.py``, 2026-12-06, the range over medians and paired ratios
of four runs in the precisions ``amp="auto"`` resolves: bf16, but for HybridSN's and R(2+1)D's training, which
the check of bf16's gradients keeps in fp32 there): a training step of ResNet18 1.08-1.10x (bf16), TSN 0.97-1.04x
(bf16), HybridSN 1.02-1.13x (fp32), R(2+1)D 0.92-0.99x (fp32); an evaluation's forward (bf16) ResNet18
1.04-1.05x, TSN 1.08-1.25x, R(2+1)D 1.05-1.08x, HybridSN 0.91-1.05x; a prediction's ResNet18 1.01-1.04x, TSN
1.03-1.15x, R(2+1)D 0.98-1.05x. In fp32 (``amp=None``; three runs of ``layout_families.py --amp fp32``): training
ResNet18 1.10-1.14x, TSN 1.02-1.06x, HybridSN 1.00-1.06x, R(2+1)D 0.92-0.94x; an evaluation's forward ResNet18
1.03-1.05x, TSN 1.06-1.09x, HybridSN 1.00-1.08x, R(2+1)D 0.95-1.01x; a prediction's ResNet18 1.02-1.04x, TSN
0.96-1.04x, R(2+1)D 0.90-0.93x. Before, in one run each: the Zen 4's ResNet18 CIFAR training 93.2 vs 82.0 images/s
(1.14x, ``cifar10_resnet18.py --measure-throughput``) and the engine benchmark's small CNN 2316 vs 2202 samples/s
(1.05x, ``engine_throughput.py``); the Zen 5 (the same kind) the small CNN 2955 vs 2968 (1.00x).

On an AVX2-only CPU, where ``amp="auto"`` computes in fp32, oneDNN's fp32 convolutions gain too (AMD Zen 3,
``layout_families.py``, 2026-12-06, three runs, the range over medians and paired ratios): a training step of
ResNet18 1.05-1.11x, TSN 1.02-1.04x, R(2+1)D 0.97-0.99x paired (0.98-1.06x by medians), HybridSN 0.86-0.93x; an
evaluation's forward ResNet18 1.27-1.39x, TSN 1.32-1.45x, R(2+1)D 1.17-1.27x, HybridSN 0.96-1.06x; a prediction's
(the input alone laid out; two runs) ResNet18 1.20-1.33x, TSN 1.27-1.35x, R(2+1)D 1.08-1.15x. The CIFAR recipe's
training step (ResNet18, batch 256, ``cifar10_resnet18.py --measure-throughput 30 --rounds 3``) ran 28.0 vs 23.3
images/s (1.20x). Users' torchvision classifiers carry the rule there (``layout_families.py --torchvision``, 16 images
of 96 px, two runs, 2026-12-07; MobileNetV2 and V3-Small, EfficientNet-B0, DenseNet121, SqueezeNet 1.1): training
steps 1.12-1.42x, evaluations 1.04-2.14x, predictions 1.12-2.12x (medians and paired ratios); ConvNeXt-Tiny (its
blocks permute to channels-last themselves, around their LayerNorm and linear layers) gains nothing: training
0.99-1.04x, evaluations 0.99-1.00x, predictions 0.93-1.00x.

So ``channels_last="auto"`` (:func:`use_channels_last`) puts a network in channels-last (``channels_last_3d`` for
3-D convolutions) on a CPU whose kind, in the precision the run computes in, was measured no slower so for that
kind of network (convolutions all 2-D, all 3-D, or both as HybridSN's): for training, :data:`CHANNELS_LAST_FASTER`
(bf16: 2-D on the AMX Xeon and AVX512-BF16 CPUs, 3-D on the AMX Xeon; fp32: 2-D on AVX512-BF16 and AVX2-only CPUs,
and HybridSN's mix on AVX512-BF16 CPUs, where it trains in fp32); for evaluations and predictions,
:data:`CHANNELS_LAST_FASTER_INFERENCE` (2-D and 3-D: the AMX Xeon and AVX512-BF16 CPUs in bf16, AVX2-only CPUs in
fp32; 2-D: AVX512-BF16 CPUs in fp32); the other kinds and precisions (fp32 on the AMX Xeon or the AVX-512 Xeon
without bf16: not measured) and CUDA keep the layout the model has. The check that bf16 computes convolution gradients right on this
CPU (:mod:`zoo.engine.precision`, which keeps R(2+1)D in fp32 on the Zen 4 and Zen 5, where oneDNN's bf16 conv3d
backward gives inf/NaN) runs each case in both layouts, since channels-last runs other kernels.
``channels_last=True`` converts any network. Predictions (``zoo.predict``) leave the model as it is, since threads
may share it, and give the network a channels-last input under the inference rule (:func:`channels_last_input`:
1.25-2.4x on the AMX Xeon, 1.08-1.35x on the Zen 3, most of what converting the model gains; 0.98-1.15x on
the Zen 4). A forward that cannot run channels-last
(a ``.view()`` of a convolution's output) runs channels-first under ``"auto"``, with one warning naming the fix
(:func:`refuses_channels_last`): ``fit`` tries its first batch in eval mode before it trains, evaluations and
predictions retry the batch (:func:`call_laid_out`, :func:`forward_channels_last`).
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

__all__ = [
    "CHANNELS_LAST_FASTER",
    "CHANNELS_LAST_FASTER_INFERENCE",
    "MIXED_2D_3D",
    "ONLY_2D",
    "ONLY_3D",
    "LayoutRule",
    "as_channels_last",
    "call_laid_out",
    "channels_last_input",
    "conv_dims",
    "fall_back_channels_first",
    "forward_channels_last",
    "is_channels_first",
    "is_view_refusal",
    "layout_for",
    "match_state_layout",
    "refuses_channels_last",
    "to_channels_first",
    "to_channels_last",
    "use_channels_last",
]


def conv_dims(model: nn.Module) -> set[int]:
    """The spatial dimensions of ``model``'s convolutions: ``{2}`` for ResNet18, ``{2, 3}`` for HybridSN."""
    return {len(m.kernel_size) for m in model.modules() if isinstance(m, nn.modules.conv._ConvNd)}


ONLY_2D, ONLY_3D, MIXED_2D_3D = frozenset({2}), frozenset({3}), frozenset({2, 3})
"""Networks by the dimensions of their convolutions (:func:`conv_dims`): ResNet18 and TSN, R(2+1)D, HybridSN."""

LayoutRule = Mapping[tuple[str, str], frozenset[frozenset[int]]]
"""``(CPU kind, precision) -> the networks`` (:data:`ONLY_2D`, :data:`ONLY_3D`, :data:`MIXED_2D_3D`) measured no slower
channels-last: the kind is :attr:`zoo.engine.precision.CPUFeatures.kind`, the precision ``"bf16"`` or ``"fp32"``
as the run resolved ``amp``."""

CHANNELS_LAST_FASTER: LayoutRule = {
    # ResNet18 1.15-1.35x, TSN 1.03-1.09x, R(2+1)D 1.04-1.08x; HybridSN 0.87-0.96x
    ("amx", "bf16"): frozenset({ONLY_2D, ONLY_3D}),
    # Zen 4 ResNet18 1.08-1.14x, TSN 0.97-1.04x, small CNN 1.05x; Zen 5 small CNN 1.00x (R(2+1)D and HybridSN
    # train in fp32 there: the bf16 gradient check)
    ("avx512_bf16", "bf16"): frozenset({ONLY_2D}),
    # Zen 4 ResNet18 1.10-1.14x, TSN 1.02-1.06x, HybridSN 1.00-1.13x (seven runs); R(2+1)D 0.92-0.99x
    ("avx512_bf16", "fp32"): frozenset({ONLY_2D, MIXED_2D_3D}),
    # Zen 3 ResNet18 1.05-1.11x, TSN 1.02-1.04x; R(2+1)D 0.97-0.99x (paired), HybridSN 0.86-0.93x
    ("avx2", "fp32"): frozenset({ONLY_2D}),
}
"""The networks measured no slower channels-last in training, by CPU kind and the precision they trained in (the
module's figures); any other pair keeps channels-first."""

CHANNELS_LAST_FASTER_INFERENCE: LayoutRule = {
    # forward: ResNet18 1.30-1.52x, TSN 1.54-1.96x, R(2+1)D 1.31-1.35x; HybridSN 1.00-1.06x
    ("amx", "bf16"): frozenset({ONLY_2D, ONLY_3D}),
    # Zen 4 forward: ResNet18 1.04-1.05x, TSN 1.08-1.25x, R(2+1)D 1.05-1.08x; HybridSN 0.91-1.05x
    ("avx512_bf16", "bf16"): frozenset({ONLY_2D, ONLY_3D}),
    # Zen 4 forward: ResNet18 1.03-1.05x, TSN 1.06-1.09x (its prediction 0.96-1.04x); R(2+1)D 0.95-1.01x
    # (prediction 0.90-0.93x); HybridSN 1.00-1.08x, left out: "auto" scores it in bf16 there
    ("avx512_bf16", "fp32"): frozenset({ONLY_2D}),
    # Zen 3 forward: ResNet18 1.27-1.39x, TSN 1.32-1.45x, R(2+1)D 1.17-1.27x; HybridSN 0.96-1.06x
    ("avx2", "fp32"): frozenset({ONLY_2D, ONLY_3D}),
}
"""The same for evaluations (the model converted) and predictions (the input laid out, :func:`channels_last_input`)."""


def _cpu_kind() -> str:
    """The CPU kind the rules are keyed by: :attr:`~zoo.engine.precision.CPUFeatures.kind`, an Intel CPU of kind
    ``avx512_bf16`` told apart as ``avx512_bf16-intel``: the rule's figures come from AMD EPYCs (Zen 4, Zen 5),
    while on an Emerald Rapids Xeon whose VM hides AMX channels-last was slower in fp32 for TSN (training
    0.83-0.97x, evaluation 0.88-0.99x, prediction 0.79-0.92x), HybridSN (training 0.91-0.99x) and ResNet18's
    evaluation and prediction (0.91-1.02x), three runs of ``benchmarks/layout_families.py`` on 2026-12-07; it
    trained ResNet18 1.04-1.08x faster so, the only gain, smaller than TSN's loss under the same 2-D rule. Nothing
    is listed for that kind: everything stays channels-first there."""
    from zoo.engine.precision import cpu_features

    feats = cpu_features()
    if feats.kind == "avx512_bf16" and (feats.ident.startswith("GenuineIntel") or "Intel" in (feats.model or "")):
        return "avx512_bf16-intel"
    return feats.kind


def use_channels_last(option: Any, model: nn.Module, device: torch.device, amp: str | None, *,
                      inference: bool = False) -> bool:
    """Whether a run puts ``model`` in channels-last: ``option`` True/False as given; ``"auto"``: on a CPU, when
    the rule for this CPU's kind and the run's precision (``amp`` as resolved: ``"bf16"``, or None for fp32) lists
    the model's convolutions (all 2-D, all 3-D, or both as HybridSN's; :func:`conv_dims`): :data:`CHANNELS_LAST_FASTER`
    (training) or :data:`CHANNELS_LAST_FASTER_INFERENCE` (``inference``: evaluations, predictions), unless its
    forward was found unable to run so (:func:`refuses_channels_last`)."""
    if option == "auto":
        if device.type != "cpu" or amp not in ("bf16", None) or model in _REFUSED:
            return False
        table = CHANNELS_LAST_FASTER_INFERENCE if inference else CHANNELS_LAST_FASTER
        return frozenset(conv_dims(model)) in table.get((_cpu_kind(), amp or "fp32"), frozenset())
    return bool(option)


_REFUSED: weakref.WeakSet[nn.Module] = weakref.WeakSet()
"""Models whose forward failed on channels-last activations: ``"auto"`` keeps them channels-first."""

_VIEW_REFUSAL = "view size is not compatible with input tensor's size and stride"


def is_view_refusal(err: BaseException) -> bool:
    """Whether ``err`` is PyTorch refusing to ``.view()`` a tensor whose strides do not allow it (a channels-last
    activation flattened with ``.view``)."""
    return isinstance(err, RuntimeError) and _VIEW_REFUSAL in str(err)


def refuses_channels_last(model: nn.Module, err: BaseException) -> bool:
    """Whether ``err``, raised by ``model``'s forward on channels-last data, is PyTorch refusing to ``.view()`` a
    channels-last activation (``x.view(-1, 16 * 5 * 5)`` after a convolution, as older tutorials flatten). If so
    ``model`` is recorded, so that ``"auto"`` keeps it channels-first from then on, and a warning says once what
    it costs and how to fix the forward; the caller then runs it channels-first."""
    if not is_view_refusal(err):
        return False
    if model not in _REFUSED:
        _REFUSED.add(model)
        from zoo._stacklevel import user_stacklevel

        warnings.warn(f"channels_last='auto': {type(model).__name__}'s forward cannot run on channels-last "
                      f"activations ({str(err).splitlines()[0]}), so it runs channels-first, without the 1.04-2x "
                      "channels-last gives convolutions on this CPU (zoo.engine.layout). Where the forward "
                      "calls .view() on a convolution's output, torch.flatten() or .reshape() runs in either "
                      "layout; channels_last=False skips the attempt.", RuntimeWarning, stacklevel=user_stacklevel())
    return True


def forward_channels_last(model: nn.Module, x: torch.Tensor, dtype: torch.dtype | None) -> Any:
    """``model(x)``, with ``x`` laid out by :func:`channels_last_input`; a model whose forward cannot run on
    channels-last activations (:func:`refuses_channels_last`) gets ``x`` as it came."""
    laid_out = channels_last_input(x, model, dtype)
    if laid_out is x:
        return model(x)
    try:
        return model(laid_out)
    except RuntimeError as err:
        if not refuses_channels_last(model, err):
            raise
    return model(x)


def to_channels_last(model: nn.Module) -> nn.Module:
    """``model`` with its 4-D parameters and buffers in ``channels_last`` and its 5-D ones in
    ``channels_last_3d``, in place (the same Parameter objects, as ``Module.to`` keeps them).

    ``model.to(memory_format=torch.channels_last)`` refuses a model holding 3-D convolutions ("required rank
    4 tensor"), and ``channels_last_3d`` one holding 2-D ones; HybridSN holds both."""
    # 4-D: clone, not contiguous(): a 1x1 kernel (C_out, C_in, 1, 1) counts as channels-last already and keeps its
    # strides (C_in, 1, 1, 1), while its gradient comes back (C_in, 1, C_in, C_in): DDP would warn "Grad strides
    # do not match bucket view strides" and copy every such gradient, each step. (A 1x1x1 kernel's gradient comes
    # back (C_in, 1, 1, 1, 1), the strides contiguous() keeps, on one thread a rank, torchrun's default; oneDNN
    # on several threads returns (C_in, 1, C_in, C_in, C_in), which then costs DDP that tiny copy.)
    def convert(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 4:
            return t.clone(memory_format=torch.channels_last)
        if t.dim() == 5:
            return t.contiguous(memory_format=torch.channels_last_3d)
        return t

    return _convert(model, convert)


def _convert(model: nn.Module, fn: Any) -> nn.Module:
    # outside inference mode even when called inside it (an evaluation): a parameter copied there would become
    # an inference tensor, and the model could not be trained afterwards ("Inference tensors cannot be saved
    # for backward")
    with torch.inference_mode(False):
        return model._apply(fn)


def is_channels_first(model: nn.Module) -> bool:
    """Whether every 4-D and 5-D parameter and buffer of ``model`` has PyTorch's default (contiguous) layout."""
    return all(t.is_contiguous() for t in (*model.parameters(), *model.buffers()) if t.dim() in (4, 5))


def to_channels_first(model: nn.Module) -> nn.Module:
    """``model`` with its 4-D and 5-D parameters and buffers back in the default contiguous layout, in place."""
    return _convert(model, lambda t: t.contiguous() if t.dim() in (4, 5) else t)


@contextlib.contextmanager
def layout_for(model: nn.Module, option: Any, device: torch.device, amp: str | None) -> Iterator[bool]:
    """``model`` in the layout ``option`` decides for inference (:func:`use_channels_last`) inside the block,
    which gets whether that is channels-last. Under ``"auto"`` a model that came channels-first leaves channels-first
    again (the caller's model keeps the layout it had: ``safetensors.torch.save_file`` of its state_dict, say,
    refuses non-contiguous tensors); ``True`` leaves it channels-last, as asked. The conversion swaps the
    model's tensors in place, so it is for calls that have the model to themselves (an evaluation over a data
    set); ``zoo.predict``, which the threads of a server may share, keeps the model's layout and lays out its
    input instead (:func:`channels_last_input`)."""
    last = use_channels_last(option, model, device, amp, inference=True)
    restore = last and option == "auto" and is_channels_first(model)
    if last:
        to_channels_last(model)
    try:
        yield last
    finally:
        if restore:
            to_channels_first(model)


def channels_last_input(x: torch.Tensor, model: nn.Module, dtype: torch.dtype | None) -> torch.Tensor:
    """``x`` in channels-last (4-D) or ``channels_last_3d`` (5-D) where :data:`CHANNELS_LAST_FASTER_INFERENCE`
    lists ``model``'s convolutions for this CPU and precision (``dtype``: the autocast dtype, None for fp32) on ``x``'s
    device; else ``x`` itself.

    For a forward that leaves the model as it is (``zoo.predict``, which the threads of a server may share):
    PyTorch runs a convolution channels-last when its input *or* its weight is, so a channels-last input alone
    takes oneDNN's channels-last kernels through the whole network (each layer's output keeps the layout),
    with the weights reordered per call. A 5-D ``(B, C, T, H, W)`` clip in ``channels_last_3d`` is
    ``(B, T, H, W, C)`` in memory, so TSN's per-frame reshape to ``(B*T, C, H, W)`` is a channels-last view.
    Measured on the AMX Xeon, bf16, eval and inference mode, the model channels-first, one input laid out
    against the same input as it came (medians of 7-9 alternated calls, ad hoc, 2026-12-05): ResNet18 at
    224 px 1.25x (1 image), 1.40x (4), 2.03x (16), CIFAR stem 256 images 1.29x; R(2+1)D-18 16 frames of 112 px
    1.76x (1 clip), 2.36x (2); TSN 2 clips of 8 frames 1.70x; outputs identical (max difference 0). In
    ``benchmarks/layout_families.py`` (its smaller inputs, 30 alternated calls): ResNet18 1.38x, TSN 1.52x,
    R(2+1)D 1.12x, against 1.42x / 1.72x / 1.31x with the model converted as well (what :func:`layout_for`
    does for an evaluation)."""
    if x.dim() not in (4, 5) or not use_channels_last("auto", model, x.device,
                                                      "bf16" if dtype == torch.bfloat16 else None, inference=True):
        return x
    return as_channels_last(x)


def as_channels_last(x: torch.Tensor) -> torch.Tensor:
    """A 4-D ``x`` in ``channels_last``, a 5-D one in ``channels_last_3d``, whatever the rule says."""
    return x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)


def fall_back_channels_first(model: nn.Module, err: BaseException, option: Any) -> bool:
    """For a call that :func:`layout_for` put in channels-last with ``option``, which then raised ``err``: under
    ``"auto"``, when ``err`` is the forward's refusal (:func:`refuses_channels_last`), put ``model`` back
    channels-first for the caller to run again so, and say True; else False (the caller raises ``err``)."""
    if option != "auto" or not refuses_channels_last(model, err):
        return False
    to_channels_first(model)
    # autocast keeps the bf16 copies of the weights it made in the block it is in, channels-last ones: without
    # clearing them a retry inside that block would run channels-last again
    torch.clear_autocast_cache()
    return True


def call_laid_out(model: nn.Module, x: torch.Tensor, last: bool, option: Any) -> tuple[Any, bool]:
    """``(model(x), last)`` for a batch of an evaluation that :func:`layout_for` laid out (``last``: it chose
    channels-last, ``option``: what it was given); a forward that cannot run channels-last runs the batch
    channels-first (:func:`fall_back_channels_first`), and the caller goes on with the ``last`` returned."""
    if not last:
        return model(x), False
    try:
        return model(x), True
    except RuntimeError as err:
        if not fall_back_channels_first(model, err, option):
            raise
    return model(x.contiguous()), False


def match_state_layout(optimizer: torch.optim.Optimizer) -> None:
    """Give every per-parameter state tensor of ``optimizer`` (Adam's moments, SGD's momentum) its parameter's
    memory layout, in place. The fused CPU kernels walk a parameter and its state in the parameter's layout:
    moments in another layout (restored from a run that kept channels-first, or made before the parameters
    were converted) would be read scrambled."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p)
            for key, value in (state or {}).items():
                if isinstance(value, torch.Tensor) and value.shape == p.shape and value.stride() != p.stride():
                    state[key] = torch.empty_like(p, dtype=value.dtype).copy_(value)
