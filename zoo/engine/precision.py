"""Which precision this machine computes fast, and what ``amp="auto"`` means on it.

bf16 only pays where the hardware multiplies bf16 natively *and* torch's kernels use it. On an x86 CPU
without bf16 instructions torch falls back to reference bf16 kernels, 20-30x slower than fp32. Between
the two, CPUs with AVX512_BF16 but no AMX disagree with each other: on an AMD EPYC of family 26 (Zen 5,
full-width AVX-512) bf16 is 2-4x *faster* than fp32, on a Zen 4 (family 25 model 17, AVX-512 on 256-bit
units) 2.4-3.2x, while the AMX Xeon with oneDNN capped at AVX512_CORE_BF16 ran it 1.25-1.8x *slower*
(there MKL's fp32 GEMM uses AVX-512; on AMD it runs its AVX2 kernels). Measured with
``benchmarks/precision_ops.py`` (1 thread, torch 2.14; bf16 time / fp32 time; "AMX hidden": an Emerald Rapids
VM of family 6 model 207 that shows AVX512_BF16 but not AMX, the probes' own figures of 2026-12-07):

    CPU kind                       matmul 256x400x300   conv2d 3x3, 64 ch   HybridSN conv3d   amp="auto"
    amx (Sapphire Rapids+)         0.29                 0.50                0.28              bf16
    avx512_bf16: AMD EPYC, Zen 5   0.24                 0.28                0.49              timed: bf16
    avx512_bf16: AMD EPYC, Zen 4   0.42                 0.32                0.39              timed: bf16
    avx512_bf16: Xeon capped       1.8                  1.25                1.46              timed: fp32
    avx512_bf16: Xeon, AMX hidden  1.67                 1.30                1.58              timed: fp32
    avx2 only (AMD EPYC, Zen 3)    28                   36                  26                fp32

So the choice is made by capability first and by measurement where capability does not settle it.
:data:`BF16_FASTER` holds, per CPU kind, the kinds of op for which bf16 was measured faster than fp32 on
every CPU of that kind met (AMX); kinds without native bf16 run fp32; on a kind in
:data:`TIMED_KINDS` ``amp="auto"`` times one representative op of each kind in both precisions on this
machine (:func:`bf16_cost`, ~0.1 s per kind) and picks bf16 only when it is at least :data:`MIN_BF16_SPEEDUP`
times faster. The timing is made robust to a busy machine (warm-up, one thread, interleaved rounds, the median
ratio) and is made once per *machine*: the result is kept in ``$ZOO_HOME/amp.json`` (:func:`amp_cache_path`),
keyed by CPU, torch version and op kind, so every process on the machine makes the same choice (a seeded run
repeats in a new process; a resume does not switch precision). ``ZOO_AMP_REMEASURE=1`` or :func:`remeasure`
times again and rewrites the entry; an unreadable file is ignored and rewritten.
On CUDA: bf16 from compute capability 8.0, where tensor cores run it. The CPU kind comes from the
``/proc/cpuinfo`` flags, lowered by the ISA caps a user may set for torch's kernels
(``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``): a cap below AMX takes AMX
away from oneDNN, so it takes it away from the choice too. Detection reads one file once per process
(cached).

Training needs more than a fast forward: ``training=True`` (the engine's ``fit``, TD3) takes bf16 only
where :func:`bf16_gradients_ok` finds this CPU's bf16 gradients of that op kind right, at shapes where a
kernel was found wrong (``_GRADIENT_CASES``; ~10 ms, once per process). On the Zen 5 and the Zen 4
oneDNN's bf16 conv3d backward returns inf/NaN weight gradients for R(2+1)D's temporal convolutions, so 3-D
convolution networks train in fp32 there and infer in bf16.

An explicit ``amp="bf16"`` is honoured, with one warning per process where it is slow (no native bf16: the
warning states the cost measured on this machine) or, when training, where its gradients are wrong here.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import platform
import statistics
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from zoo._stacklevel import user_stacklevel

__all__ = [
    "BF16_FASTER",
    "MIN_BF16_SPEEDUP",
    "OP_KINDS",
    "TIMED_KINDS",
    "CPUFeatures",
    "amp_cache_path",
    "auto_amp",
    "bf16_cost",
    "bf16_gradients_ok",
    "choose_amp",
    "cpu_features",
    "model_amp",
    "model_op_kind",
    "normalize_amp",
    "parse_cpuinfo",
    "precision_record",
    "remeasure",
    "resolve_amp",
    "resumed_precision",
]

log = logging.getLogger(__name__)

OP_KINDS = ("matmul", "conv", "conv3d")
"""What a model spends its time in: dense GEMMs (MLPs, attention, TD3), 2-D convolutions, or 3-D ones
(HybridSN, R(2+1)D: oneDNN runs them with other kernels, timed and checked apart)."""

BF16_FASTER: Mapping[str, frozenset[str]] = {
    # Xeon with AMX tiles: bf16 GEMM 3.5x, convolutions 2-3.6x faster than fp32
    "amx": frozenset({"matmul", "conv", "conv3d"}),
}
"""CPU kind -> op kinds measured faster in bf16 than fp32 on every CPU of that kind met (no timing needed)."""

TIMED_KINDS = frozenset({"avx512_bf16"})
"""Kinds with native bf16 whose CPUs disagree (see above): ``amp="auto"`` times both precisions there."""

MIN_BF16_SPEEDUP = 1.25
"""On a timed kind, bf16 is chosen when fp32 time / bf16 time >= this (Zen 5's probes: matmul 4.2, conv 1.8,
conv3d 4.6)."""

_OFF = (None, False, "none", "fp32", "float32", "no", "off")
_ONEDNN_ORDER = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
                 "AVX512_CORE_BF16", "AVX10_1_512", "AVX512_CORE_FP16", "AVX10_1_512_AMX", "AVX512_CORE_AMX",
                 "AVX10_1_512_AMX_FP16", "AVX512_CORE_AMX_FP16")
_AMX = ("amx_bf16", "amx_tile", "amx_int8", "amx_fp16")
_AVX512 = ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_vnni", "avx512_fp16") + _AMX


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """``/proc/cpuinfo`` text -> (model name, flags of the first processor)."""
    model, flags = "", frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:  # x86 "flags", arm64 "Features"
            flags = frozenset(value.split())
    return model, flags


def _cpu_ident(text: str) -> str:
    """``"AuthenticAMD family 26 model 2 stepping 1"`` from ``/proc/cpuinfo``: a VM's model name can be as
    bare as "AMD EPYC", and the family tells Zen 3 (25) from Zen 5 (26)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("vendor_id", "cpu family", "model", "stepping") and key not in found:
            found[key] = value.strip()
        elif not key and found:  # the first processor's block ended
            break
    parts = [found.get("vendor_id", "")] + [f"{k.removeprefix('cpu ')} {found[k]}"
                                            for k in ("cpu family", "model", "stepping") if k in found]
    return " ".join(p for p in parts if p)


def _capped(flags: frozenset[str], env: Mapping[str, str]) -> tuple[frozenset[str], dict[str, str]]:
    """Remove what the user's ISA caps forbid torch's kernels to use."""
    caps = {k: env[k] for k in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
                                "MKL_ENABLE_INSTRUCTIONS") if env.get(k)}
    drop: set[str] = set()
    onednn = (caps.get("ONEDNN_MAX_CPU_ISA") or caps.get("DNNL_MAX_CPU_ISA") or "").upper()
    if onednn in _ONEDNN_ORDER:
        rank = _ONEDNN_ORDER.index(onednn)
        if rank < _ONEDNN_ORDER.index("AVX10_1_512_AMX"):
            drop.update(_AMX)
        if rank < _ONEDNN_ORDER.index("AVX512_CORE_BF16"):
            drop.add("avx512_bf16")
        if rank < _ONEDNN_ORDER.index("AVX512_CORE"):
            drop.update(_AVX512)
    aten = caps.get("ATEN_CPU_CAPABILITY", "").lower()
    mkl = caps.get("MKL_ENABLE_INSTRUCTIONS", "").upper()
    if aten in ("avx2", "default") or mkl in ("AVX2", "AVX", "SSE4_2"):
        drop.update(_AVX512)
    if aten == "default" or mkl in ("AVX", "SSE4_2"):
        drop.add("avx2")
    return flags - drop, caps


@dataclass(frozen=True)
class CPUFeatures:
    """The CPU as torch's kernels see it: model, effective flags (after ISA caps), the caps set."""

    model: str
    flags: frozenset[str]
    caps: Mapping[str, str]
    hardware_flags: frozenset[str]
    ident: str = ""  # vendor, family, model, stepping (see _cpu_ident)

    @property
    def kind(self) -> str:
        """``"amx"``, ``"avx512_bf16"``, ``"avx512"``, ``"avx2"``, ``"arm64"`` or ``"other"``."""
        f = self.flags
        if "amx_bf16" in f and "amx_tile" in f:
            return "amx"
        if "avx512_bf16" in f:
            return "avx512_bf16"
        if "avx512f" in f:
            return "avx512"
        if "avx2" in f:
            return "avx2"
        if "asimd" in f or platform.machine().lower() in ("arm64", "aarch64"):
            return "arm64"
        return "other"

    @property
    def native_bf16(self) -> bool:
        """Has bf16 arithmetic instructions (AMX tiles or AVX512_BF16 dot products)."""
        return self.kind in ("amx", "avx512_bf16")

    def describe(self) -> dict[str, Any]:
        """What a benchmark result records: model, kind, the relevant flags, any ISA caps."""
        out: dict[str, Any] = {
            "cpu": self.model, "cpu_kind": self.kind, **({"cpu_id": self.ident} if self.ident else {}),
            "cpu_flags": {f: f in self.hardware_flags for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")},
        }
        if self.caps:
            out["isa_caps"] = dict(self.caps)
            out["cpu_kind_note"] = (f"emulated: the hardware is {_kind_of(self.hardware_flags)}, torch's kernels "
                                    f"capped at {self.kind} by {', '.join(f'{k}={v}' for k, v in self.caps.items())}")
        return out


def _kind_of(flags: frozenset[str]) -> str:
    return CPUFeatures("", flags, {}, flags).kind


_TORCH_CAPABILITIES = {"avx2": "avx2", "avx512_f": "avx512f", "avx512_bf16": "avx512_bf16", "amx_tile": "amx_tile",
                       "amx_bf16": "amx_bf16"}
"""``torch.cpu.get_capabilities()``'s keys (recent torch) as /proc/cpuinfo names them."""
_TORCH_PROBES = {"avx2": "_is_avx2_supported", "avx512f": "_is_avx512_supported",
                 "avx512_bf16": "_is_avx512_bf16_supported", "amx_tile": "_is_amx_tile_supported"}
"""The probes older torch has, in ``torch.cpu`` (2.x) and, before that, ``torch._C._cpu``."""


def _torch_flags() -> frozenset[str]:
    """Flags from torch's cpuinfo where there is no /proc/cpuinfo (macOS, Windows)."""
    get = getattr(torch.cpu, "get_capabilities", None)
    if get is not None:
        try:
            caps = get()
        except RuntimeError:  # a CPU cpuinfo cannot read: the probes below, or nothing
            caps = {}
        if caps:
            return frozenset(flag for key, flag in _TORCH_CAPABILITIES.items() if caps.get(key) is True)
    for where in (torch.cpu, getattr(torch._C, "_cpu", None)):
        if where is not None and any(hasattr(where, fn) for fn in _TORCH_PROBES.values()):
            found = {flag for flag, fn in _TORCH_PROBES.items() if getattr(where, fn, lambda: False)()}
            return frozenset(found | ({"amx_bf16"} if "amx_tile" in found else set()))
    return frozenset()


@functools.lru_cache(maxsize=1)
def _this_cpu() -> CPUFeatures:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    model, flags = parse_cpuinfo(text)
    if not flags:
        flags = _torch_flags()
    return _features(model or platform.processor() or platform.machine(), flags, os.environ, _cpu_ident(text))


def _features(model: str, flags: frozenset[str], env: Mapping[str, str], ident: str = "") -> CPUFeatures:
    effective, caps = _capped(frozenset(flags), env)
    return CPUFeatures(model=model, flags=effective, caps=caps, hardware_flags=frozenset(flags), ident=ident)


def cpu_features(cpuinfo: str | None = None, env: Mapping[str, str] | None = None) -> CPUFeatures:
    """This machine's CPU (cached), or the one described by ``cpuinfo`` text / ``env`` caps (tests)."""
    if cpuinfo is None and env is None:
        return _this_cpu()
    if cpuinfo is None:
        base = _this_cpu()
        model, flags, ident = base.model, base.hardware_flags, base.ident
    else:
        (model, flags), ident = parse_cpuinfo(cpuinfo), _cpu_ident(cpuinfo)
    return _features(model, flags, {} if env is None else env, ident)


def model_op_kind(model: torch.nn.Module) -> str:
    """``"conv3d"`` when the model has 3-D convolutions, else ``"conv"`` when it has convolutions (they
    dominate its time), else ``"matmul"``."""
    convs = [m for m in model.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)]
    if any(len(m.kernel_size) == 3 for m in convs):  # kernel_size: also set on lazy and transposed ones
        return "conv3d"
    return "conv" if convs else "matmul"


def normalize_amp(amp: Any, *, allow_fp16: bool = True) -> str | None:
    """Spelling -> ``None`` (fp32), ``"bf16"``, ``"fp16"`` or ``"auto"``; anything else is an error."""
    if amp in _OFF:
        return None
    if amp in ("bf16", "bfloat16"):
        return "bf16"
    if amp == "auto":
        return "auto"
    if amp in ("fp16", "float16", "half") and allow_fp16:
        return "fp16"
    choices = "'auto', 'bf16', 'fp16' or None" if allow_fp16 else "'auto', 'bf16' or None"
    raise ValueError(f"amp must be {choices} (None/'none'/'fp32' = full precision), got {amp!r}")


def choose_amp(kind: str, op: str, speedup: float | None = None) -> str | None:
    """The CPU rule behind ``amp="auto"``: ``"bf16"`` or ``None`` (fp32) for ``op`` on a CPU of ``kind``.

    ``speedup`` (fp32 time / bf16 time of ``op`` measured on that CPU) decides on a kind in
    :data:`TIMED_KINDS`; without it such a CPU runs fp32 (it was not measured).
    """
    if op not in OP_KINDS:
        raise ValueError(f"op must be one of {OP_KINDS}, got {op!r}")
    if kind in TIMED_KINDS:
        return "bf16" if speedup is not None and speedup >= MIN_BF16_SPEEDUP else None
    return "bf16" if op in BF16_FASTER.get(kind, frozenset()) else None


def auto_amp(device: str | torch.device = "cpu", op: str = "matmul", features: CPUFeatures | None = None, *,
             training: bool = False) -> str | None:
    """What ``amp="auto"`` resolves to for ``op`` on ``device``: ``"bf16"`` or ``None`` (fp32).

    ``features`` of another CPU (tests) are judged by :func:`choose_amp` without a measurement: this
    machine cannot time that CPU, so a timed kind gets fp32 there. ``training``: gradients are needed,
    so bf16 also needs :func:`bf16_gradients_ok` on this CPU (else the run trains in fp32).
    """
    if op not in OP_KINDS:
        raise ValueError(f"op must be one of {OP_KINDS}, got {op!r}")
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return "bf16" if torch.cuda.get_device_capability(index) >= (8, 0) else None
    if device.type != "cpu":
        return None
    feats = features or cpu_features()
    here = feats == cpu_features()
    speedup = _timed_speedup(feats, op) if feats.kind in TIMED_KINDS and here else None
    choice = choose_amp(feats.kind, op, speedup)
    if choice == "bf16" and training and here and not bf16_gradients_ok(op):
        return None
    return choice


def precision_record(amp: str | None, device: str | torch.device) -> dict[str, str]:
    """What a checkpoint records of the precision it was trained in: ``{"amp", "device"}``, and on a CPU its
    kind (:attr:`CPUFeatures.kind`), which :func:`resumed_precision` compares."""
    device = torch.device(device)
    record = {"amp": amp or "fp32", "device": device.type}
    return {**record, "cpu_kind": cpu_features().kind} if device.type == "cpu" else record


def resumed_precision(amp: Any, recorded: Any, device: str | torch.device, decided: str | None, what: str,
                      *, allowed: tuple[str, ...] = ("bf16", "fp16", "fp32")) -> str | None:
    """The precision a resumed run computes in: with ``amp="auto"`` on the same kind of device, the one the
    checkpoint ``recorded`` (:func:`precision_record`) so that a run does not switch halfway because this
    process decided otherwise (it would also break the exact resume); else ``decided``, the choice made now
    (an explicit ``amp``, another device, an older checkpoint without the record). A run that moves to
    another kind of CPU also gets the choice made now: bf16 kept on a CPU without native bf16 would run
    10-60x slower, and no resume on other hardware repeats the run exactly anyway (its kernels round
    differently). Returns ``"bf16"``, ``"fp16"`` or None (fp32), like :func:`resolve_amp`."""
    if normalize_amp(amp) != "auto" or not isinstance(recorded, dict) \
            or recorded.get("device") != torch.device(device).type or recorded.get("amp") not in allowed:
        return decided
    kept = None if recorded["amp"] == "fp32" else recorded["amp"]
    if torch.device(device).type == "cpu" and kept != decided:
        here = cpu_features()
        moved = recorded.get("cpu_kind") not in (None, here.kind)
        if moved or (kept == "bf16" and not here.native_bf16):  # an older record names no CPU: bf16's speed decides
            log.warning("resume: amp='auto' decides anew: %s was trained in %s on %s, this CPU is %s (%s)",
                        what, recorded["amp"], recorded.get("cpu_kind") or "another CPU", here.kind,
                        "runs bf16 natively" if here.native_bf16 else "no native bf16")
            return decided
    if kept != decided:
        log.info("resume: amp='auto' keeps %s, the precision %s was trained in (decided now: %s)",
                 recorded["amp"], what, decided or "fp32")
    return kept


def resolve_amp(amp: Any, device: str | torch.device = "cpu", *, op: str = "matmul",
                features: CPUFeatures | None = None, allow_fp16: bool = True, training: bool = False) -> str | None:
    """The precision to run: ``None`` (fp32), ``"bf16"`` or ``"fp16"``.

    ``"auto"`` follows :func:`auto_amp`; an explicit ``"bf16"`` is kept, but warns once per process on a
    CPU without native bf16 (with the cost measured here, :func:`bf16_cost`) and, when ``training``, on a
    CPU whose bf16 gradients of ``op`` are wrong (:func:`bf16_gradients_ok`).
    """
    choice = normalize_amp(amp, allow_fp16=allow_fp16)
    device = torch.device(device)
    if choice == "auto":
        return auto_amp(device, op, features, training=training)
    if choice == "bf16" and device.type == "cpu":
        feats = features or cpu_features()
        here = feats == cpu_features()  # another CPU's features (tests) cannot be timed from here
        # say why where "auto" would not have chosen bf16 (the same rule, so the two cannot disagree)
        if not feats.native_bf16:
            _warn_slow_bf16(feats.kind, feats.model, op, native=False)
        elif here and auto_amp(device, op, feats) is None:
            _warn_slow_bf16(feats.kind, feats.model, op, native=True)
        elif here and training and auto_amp(device, op, feats, training=True) is None:
            _warn_wrong_bf16_gradients(feats.model, op)
    return choice


def model_amp(amp: Any, model: torch.nn.Module, device: str | torch.device = "cpu", *, allow_fp16: bool = True,
              training: bool = False) -> str | None:
    """:func:`resolve_amp` for the kind of op ``model`` spends its time in (:func:`model_op_kind`).

    A model the user cast away from float32 (``.half()``, ``.double()``, ``.to(torch.bfloat16)``) computes in
    the dtype it was given: ``"auto"`` is then None, no autocast (its inputs are cast to that dtype instead,
    ``zoo.engine.data.move_batch``). Autocast would mix bf16 activations with float16 or float64 weights and
    fail; an explicit ``amp`` is kept as asked."""
    from zoo.engine.data import model_dtype

    if normalize_amp(amp, allow_fp16=allow_fp16) == "auto" and model_dtype(model) not in (None, torch.float32):
        return None
    return resolve_amp(amp, device, op=model_op_kind(model), allow_fp16=allow_fp16, training=training)


@functools.cache
def _warn_slow_bf16(kind: str, model: str, op: str, native: bool = False) -> None:
    # functools.cache makes this run once per (CPU, op) and process: the warning is said once
    cost = bf16_cost(op)
    why = "its bf16 kernels measured slow" if native else "no native bf16 arithmetic"
    warnings.warn(
        f"amp='bf16' on {model or 'this CPU'} ({kind}: {why}): a bf16 {op} measured "
        f"{cost['ratio']:.1f}x the time of fp32 here ({cost['bf16_ms']:.2f} ms vs {cost['fp32_ms']:.2f} ms, "
        f"{cost['shape']}); amp='auto' would run fp32 on this CPU", RuntimeWarning,
        stacklevel=user_stacklevel())


@functools.cache
def _warn_wrong_bf16_gradients(model: str, op: str) -> None:
    warnings.warn(
        f"amp='bf16' on {model or 'this CPU'}: bf16 {op} gradients computed here disagree with fp32 (non-finite "
        f"or > {_GRADIENT_RTOL:.0%} off at a checked shape: a kernel bug of this CPU's bf16 path); amp='auto' "
        f"would train in fp32 here", RuntimeWarning, stacklevel=user_stacklevel())


# --- what this machine does: timed once per machine, kept in $ZOO_HOME/amp.json ---------------------------
_PROBES = {
    "matmul": "256x400x300 matmul",  # a TD3 layer
    "conv": "3x3 conv 64->64 on 1x64x32x32",  # a ResNet18 stage-1 layer (32 channels understated the gain: 1.3x)
    # HybridSN's second spectral-spatial layer on a batch of windows. Not one window: torch runs a single small
    # fp32 3-D convolution on its native im2col kernel (oneDNN from a batch of 2 or a larger input, and always
    # in bf16), 5x slower than the oneDNN path every batch of windows or scene pass takes. On an Emerald Rapids
    # VM without AMX one window timed bf16 at 0.20x fp32's time and chose it; at batch 4 it is 2.2x, and
    # HybridSN's scene and window predictions were slower in bf16 there.
    "conv3d": "5x3x3 conv3d 8->16 on 4x8x12x23x23",
}
"""Each op kind's probe as :func:`_probe` makes it: part of a recorded decision's key (:func:`_decision_key`)."""


def _probe(op: str, g: torch.Generator) -> tuple[str, Any, tuple[torch.Tensor, ...]]:
    """``op`` kind -> (description, function, fp32 operands) of its representative product (:data:`_PROBES`)."""
    F = torch.nn.functional
    if op == "matmul":
        return _PROBES[op], torch.mm, (torch.randn(256, 400, generator=g), torch.randn(400, 300, generator=g))
    if op == "conv":
        return (_PROBES[op], lambda x, w: F.conv2d(x, w, padding=1),
                (torch.randn(1, 64, 32, 32, generator=g), torch.randn(64, 64, 3, 3, generator=g)))
    if op == "conv3d":
        return _PROBES[op], F.conv3d, (torch.randn(4, 8, 12, 23, 23, generator=g), torch.randn(16, 8, 5, 3, 3, generator=g))
    raise ValueError(f"op must be one of {OP_KINDS}, got {op!r}")


PROBE_THREADS = 1
"""The probe runs single-threaded. On a machine other processes keep busy, a multi-threaded op waits for any
of its threads that was descheduled: measured on a loaded 2-core Zen 4, two-thread samples of one probe ranged
from 0.03x to 106x, one-thread samples within 15 % of their median. The ratio is a property of the kernels
(bf16 instructions vs fp32 ones), which one core shows as well as two."""
_WARMUP_CALLS = 3  # the first calls of each dtype create oneDNN's kernels, pack weights, fault in fresh memory
_ROUNDS = 9  # interleaved fp32/bf16 rounds; odd, so the median is one round's ratio
_SAMPLE_S = 2e-3  # each timed sample spans several calls, so the clock's resolution and jitter stay small


@functools.cache
def bf16_cost(op: str = "matmul", threads: int | None = PROBE_THREADS) -> dict[str, Any]:
    """Time one representative ``op`` in fp32 and bf16 on this CPU (~0.1 s on a Zen 4; cached per process).

    After a warm-up of both dtypes, :data:`_ROUNDS` rounds each time fp32 and bf16 back to back, the order
    flipped every round (a clock or load drift falls on both), and ``ratio`` (bf16 time / fp32 time) is the
    median of the rounds' ratios: a round in which another process took the core is an outlier, not the
    answer. ``fp32_ms`` / ``bf16_ms`` are the median times of one call; ``ratios`` every round's ratio.
    ``threads``: :data:`PROBE_THREADS` (None: the process's own count).

    ``matmul``: 256x400 @ 400x300 (a TD3 layer); ``conv``: 3x3 conv, 64->64 channels, 1x64x32x32;
    ``conv3d``: HybridSN's 5x3x3 conv3d, 8->16 channels, on four 12x23x23 windows.
    """
    shape, fn, operands = _probe(op, torch.Generator().manual_seed(0))
    args = {dt: [t.to(dt) for t in operands] for dt in (torch.float32, torch.bfloat16)}

    def sample(dt: torch.dtype, calls: int) -> float:
        operands_dt = args[dt]
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*operands_dt)
        return (time.perf_counter() - t0) / calls

    prev = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    times: dict[torch.dtype, list[float]] = {torch.float32: [], torch.bfloat16: []}
    try:
        with torch.inference_mode():
            for _ in range(_WARMUP_CALLS):
                for dt in args:
                    sample(dt, 1)
            calls = max(1, min(64, math.ceil(_SAMPLE_S / max(min(sample(dt, 1) for dt in args), 1e-6))))
            for i in range(_ROUNDS):
                for dt in (torch.float32, torch.bfloat16) if i % 2 == 0 else (torch.bfloat16, torch.float32):
                    times[dt].append(sample(dt, calls))
    finally:
        torch.set_num_threads(prev)
    fp32, bf16 = times[torch.float32], times[torch.bfloat16]
    ratios = [b / f for f, b in zip(fp32, bf16)]
    return {"op": op, "shape": shape, "fp32_ms": statistics.median(fp32) * 1e3,
            "bf16_ms": statistics.median(bf16) * 1e3, "ratio": statistics.median(ratios),
            "ratios": [round(r, 4) for r in ratios], "threads": threads or prev, "calls_per_sample": calls}


_CACHE_FORMAT = "zoo.amp/1"
REMEASURE_ENV = "ZOO_AMP_REMEASURE"
_SPEEDUPS: dict[str, float] = {}  # this process's decisions, by _decision_key (the file is read once per key)


def amp_cache_path() -> Path:
    """``$ZOO_HOME/amp.json``: the speedups ``amp="auto"`` measured on this machine, by CPU, torch and op."""
    from zoo.hub.store import zoo_home

    return zoo_home() / "amp.json"


def _decision_key(feats: CPUFeatures, op: str) -> str:
    """What a measurement holds for: this CPU (model, vendor/family, kind and effective flags, ISA caps), this
    torch (its kernels), the probe's thread count and the op kind with its probe's shape (a decision timed on
    another probe is made again)."""
    flags = hashlib.sha256(" ".join(sorted(feats.flags)).encode()).hexdigest()[:12]
    caps = ",".join(f"{k}={v}" for k, v in sorted(feats.caps.items()))
    parts = (feats.model or "cpu", feats.ident, f"{feats.kind} flags:{flags}", caps, f"torch {torch.__version__}",
             f"probe threads {PROBE_THREADS}", f"{op} ({_PROBES[op]})")
    return " | ".join(p for p in parts if p)


def _read_cache(path: Path) -> dict[str, Any]:
    """The file's entries; a missing, unreadable or foreign file counts as empty (it is rewritten)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != _CACHE_FORMAT or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def _entry_speedup(entry: Any) -> float | None:
    speedup = entry.get("speedup") if isinstance(entry, dict) else None
    ok = isinstance(speedup, (int, float)) and not isinstance(speedup, bool) and math.isfinite(speedup) and speedup > 0
    return float(speedup) if ok else None


_DECIDING = threading.Lock()  # the threads of one process, where the file lock cannot be had


@contextlib.contextmanager
def _cache_lock(path: Path):
    """Exclusive while one process decides, so that processes starting together measure once and agree.
    Where the lock cannot be had (a read-only home, a file system without locks) the process decides on its
    own. Its threads always take turns: two probes at once would time each other, and each sets torch's
    thread count."""
    from zoo import fs

    with _DECIDING:
        lock = fs.FileLock(path.with_name(path.name + ".lock"), "amp='auto' timing", wait=math.inf,
                           warn_unlocked=False)
        with contextlib.suppress(OSError):
            lock.acquire()
        try:
            yield
        finally:
            lock.release()


def _measure_and_store(path: Path, key: str, op: str) -> float:
    """Time ``op`` now and record it under ``key`` (other entries kept; written atomically)."""
    cost = bf16_cost(op)
    speedup = 1.0 / cost["ratio"]
    entry = {**{k: v for k, v in cost.items() if k != "ratio"}, "speedup": round(speedup, 4),
             "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    entries = {**_read_cache(path), key: entry}
    try:
        from zoo import fs

        fs.write_text(path, json.dumps({"format": _CACHE_FORMAT, "entries": entries}, indent=1, sort_keys=True))
    except OSError as err:  # a read-only or full home: this process still decides, the next one measures again
        _warn_unrecorded(str(path), str(err))
    return speedup


_UNRECORDED: set[str] = set()  # amp.json files this process could not write: each is said once


def _warn_unrecorded(path: str, err: str) -> None:
    # once per process and file, not once per op kind (the error text names each attempt's temp file)
    if path in _UNRECORDED:
        return
    _UNRECORDED.add(path)
    warnings.warn(f"amp='auto': could not record this machine's bf16 timing in {path} ({err}); other processes "
                  "will time it again and may choose differently", RuntimeWarning,
                  stacklevel=user_stacklevel())


def _timed_speedup(feats: CPUFeatures, op: str) -> float:
    """fp32 time / bf16 time of ``op`` on this machine: from this process's memory, else ``amp.json``, else
    measured now and recorded there (``ZOO_AMP_REMEASURE=1``: measured again, once per process)."""
    key = _decision_key(feats, op)
    if key in _SPEEDUPS:
        return _SPEEDUPS[key]
    path = amp_cache_path()
    with _cache_lock(path):
        if key not in _SPEEDUPS:  # another thread may have decided while this one waited
            again = os.environ.get(REMEASURE_ENV, "") not in ("", "0")
            known = None if again else _entry_speedup(_read_cache(path).get(key))
            _SPEEDUPS[key] = known if known is not None else _measure_and_store(path, key, op)
    return _SPEEDUPS[key]


def remeasure(ops: tuple[str, ...] = OP_KINDS) -> dict[str, float]:
    """Time ``ops`` again on this machine and record them in ``amp.json`` (after a hardware, BIOS or VM-host
    change the old entry no longer holds); returns ``{op: speedup}`` (fp32 time / bf16 time)."""
    feats = cpu_features()
    bf16_cost.cache_clear()
    path = amp_cache_path()
    out = {}
    for op in ops:
        key = _decision_key(feats, op)
        with _cache_lock(path):
            _SPEEDUPS[key] = out[op] = _measure_and_store(path, key, op)
    return out


# Gradient shapes where a bf16 kernel was found wrong on a CPU of this project. oneDNN 3.x's
# jit_bf16:avx512_core_bf16 conv3d backward-weights (AMD EPYC, Zen 5; torch 2.14) returns inf/NaN weight
# gradients when the kernel's depth exceeds the input's (depth 2, kernel 3, padding 1: R(2+1)D's temporal
# convolutions in its last stages on short clips), while the forward and the input gradient are right.
# Each case: (function, input shape, weight shape, keyword arguments).
_GRADIENT_CASES: Mapping[str, tuple] = {
    "matmul": ((torch.mm, (64, 96), (96, 48), {}),),
    "conv": ((torch.nn.functional.conv2d, (2, 32, 2, 2), (32, 32, 3, 3), {"padding": 1}),
             (torch.nn.functional.conv2d, (2, 16, 9, 9), (32, 16, 3, 3), {"padding": 1, "stride": 2})),
    "conv3d": ((torch.nn.functional.conv3d, (2, 64, 2, 8, 8), (64, 64, 3, 1, 1), {"padding": (1, 0, 0)}),
               (torch.nn.functional.conv3d, (2, 32, 2, 4, 4), (32, 32, 3, 3, 3), {"padding": 1}),
               (torch.nn.functional.conv3d, (2, 1, 12, 9, 9), (8, 1, 7, 3, 3), {})),
}
_GRADIENT_RTOL = 0.05  # bf16's own rounding gives ~0.003 relative error on these; a broken kernel gives inf/NaN


@functools.cache
def bf16_gradients_ok(op: str = "matmul") -> bool:
    """True when bf16 gradients of ``op`` agree with fp32 on this CPU at the shapes in ``_GRADIENT_CASES``
    (every output and gradient finite, each within 5 % relative error; ~10 ms, cached per process).
    Convolutions are checked channels-first and channels-last (``channels_last_3d`` for 3-D ones): ``fit``
    trains them channels-last in bf16 (:mod:`zoo.engine.layout`), where oneDNN runs other kernels."""
    if op not in OP_KINDS:
        raise ValueError(f"op must be one of {OP_KINDS}, got {op!r}")
    g = torch.Generator().manual_seed(0)
    for fn, x_shape, w_shape, kwargs in _GRADIENT_CASES[op]:
        x, w = torch.randn(x_shape, generator=g), torch.randn(w_shape, generator=g) * 0.1
        grad_out = None
        results = []
        runs = [(torch.float32, torch.contiguous_format), (torch.bfloat16, torch.contiguous_format)]
        if len(x_shape) in (4, 5):
            runs.append((torch.bfloat16, torch.channels_last if len(x_shape) == 4 else torch.channels_last_3d))
        for dt, fmt in runs:
            xx = x.to(dt).contiguous(memory_format=fmt).detach().requires_grad_()
            ww = w.to(dt).contiguous(memory_format=fmt).detach().requires_grad_()
            with torch.enable_grad():
                out = fn(xx, ww, **kwargs)
                if grad_out is None:
                    grad_out = torch.randn(out.shape, generator=g)
                out.backward(grad_out.to(dt))
            results.append([t.detach().float() for t in (out, xx.grad, ww.grad)])
        for low_run in results[1:]:
            for ref, low in zip(results[0], low_run):
                if not bool(low.isfinite().all()) or float((ref - low).norm()) > _GRADIENT_RTOL * float(ref.norm()):
                    return False
    return True
