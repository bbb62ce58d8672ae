"""Which precision this machine computes fast, and what ``amp="auto"`` means on it.

bf16 only pays where the hardware multiplies bf16 natively *and* torch's kernels use it. On an x86 CPU
without bf16 instructions torch falls back to reference bf16 kernels, 20-30x slower than fp32; on one
with AVX512_BF16 but no AMX, oneDNN's bf16 kernels are slower than fp32 at our shapes. Measured with
``benchmarks/precision_ops.py`` (1 thread, torch 2.14; bf16 time / fp32 time; the two kinds without
AMX emulated on the AMX Xeon by capping torch's kernels, see that script):

    CPU kind                 matmul 256x400x300   conv2d 3x3, 64 ch   HybridSN conv3d   amp="auto"
    amx (Sapphire Rapids+)   0.29                 0.50                0.28              bf16
    avx512_bf16, no AMX      1.8                  1.25                1.46              fp32
    avx2 only                28                   31                  22                fp32

:data:`BF16_FASTER` holds, per CPU kind, the kinds of op for which bf16 was measured faster than fp32
there; ``amp="auto"`` picks bf16 exactly for those, fp32 everywhere else (and on CUDA: bf16 from
compute capability 8.0, where tensor cores run it). The CPU kind comes from the ``/proc/cpuinfo`` flags,
lowered by the ISA caps a user may set for torch's kernels (``ONEDNN_MAX_CPU_ISA``,
``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``): a cap below AMX takes AMX away from oneDNN, so
it takes it away from the choice too. Detection reads one file once per process (cached).

An explicit ``amp="bf16"`` on a CPU without native bf16 is honoured, with one warning per process that
states the cost measured on this machine (a few ms of matmuls, measured when the warning is due).
"""

from __future__ import annotations

import functools
import os
import platform
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "BF16_FASTER",
    "OP_KINDS",
    "CPUFeatures",
    "auto_amp",
    "bf16_cost",
    "cpu_features",
    "model_op_kind",
    "normalize_amp",
    "parse_cpuinfo",
    "resolve_amp",
]

OP_KINDS = ("matmul", "conv")
"""What a model spends its time in: dense GEMMs (MLPs, attention, TD3) or convolutions."""

BF16_FASTER: Mapping[str, frozenset[str]] = {
    # Xeon with AMX tiles: bf16 GEMM 3.5x, convolutions 2-3.6x faster than fp32
    "amx": frozenset({"matmul", "conv"}),
    # AVX512_BF16 without AMX (Cooper Lake, Zen 4; measured with oneDNN capped at AVX512_CORE_BF16):
    # the bf16 GEMM is 1.8x *slower* than MKL's fp32 GEMM, bf16 convolutions 1.25-1.5x slower
    "avx512_bf16": frozenset(),
}
"""CPU kind -> op kinds measured faster in bf16 than fp32 (benchmarks/results/precision_ops_*.json)."""

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
            "cpu": self.model, "cpu_kind": self.kind,
            "cpu_flags": {f: f in self.hardware_flags for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")},
        }
        if self.caps:
            out["isa_caps"] = dict(self.caps)
            out["cpu_kind_note"] = (f"emulated: the hardware is {_kind_of(self.hardware_flags)}, torch's kernels "
                                    f"capped at {self.kind} by {', '.join(f'{k}={v}' for k, v in self.caps.items())}")
        return out


def _kind_of(flags: frozenset[str]) -> str:
    return CPUFeatures("", flags, {}, flags).kind


def _torch_flags() -> frozenset[str]:
    """Flags from torch's cpuinfo where there is no /proc/cpuinfo (macOS, Windows)."""
    probe = {"avx2": "_is_avx2_supported", "avx512f": "_is_avx512_supported",
             "avx512_bf16": "_is_avx512_bf16_supported", "amx_tile": "_is_amx_tile_supported"}
    cpu = getattr(torch._C, "_cpu", None)
    found = {flag for flag, fn in probe.items() if cpu is not None and getattr(cpu, fn, lambda: False)()}
    if "amx_tile" in found:
        found.add("amx_bf16")
    return frozenset(found)


@functools.lru_cache(maxsize=1)
def _this_cpu() -> CPUFeatures:
    try:
        model, flags = parse_cpuinfo(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        model, flags = "", frozenset()
    if not flags:
        flags = _torch_flags()
    return _features(model or platform.processor() or platform.machine(), flags, os.environ)


def _features(model: str, flags: frozenset[str], env: Mapping[str, str]) -> CPUFeatures:
    effective, caps = _capped(frozenset(flags), env)
    return CPUFeatures(model=model, flags=effective, caps=caps, hardware_flags=frozenset(flags))


def cpu_features(cpuinfo: str | None = None, env: Mapping[str, str] | None = None) -> CPUFeatures:
    """This machine's CPU (cached), or the one described by ``cpuinfo`` text / ``env`` caps (tests)."""
    if cpuinfo is None and env is None:
        return _this_cpu()
    if cpuinfo is None:
        base = _this_cpu()
        model, flags = base.model, base.hardware_flags
    else:
        model, flags = parse_cpuinfo(cpuinfo)
    return _features(model, flags, {} if env is None else env)


def model_op_kind(model: torch.nn.Module) -> str:
    """``"conv"`` when the model has convolutions (they dominate its time), else ``"matmul"``."""
    conv = (torch.nn.modules.conv._ConvNd,)
    return "conv" if any(isinstance(m, conv) for m in model.modules()) else "matmul"


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


def auto_amp(device: str | torch.device = "cpu", op: str = "matmul", features: CPUFeatures | None = None) -> str | None:
    """What ``amp="auto"`` resolves to for ``op`` on ``device``: ``"bf16"`` or ``None`` (fp32)."""
    if op not in OP_KINDS:
        raise ValueError(f"op must be one of {OP_KINDS}, got {op!r}")
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return "bf16" if torch.cuda.get_device_capability(index) >= (8, 0) else None
    if device.type != "cpu":
        return None
    feats = features or cpu_features()
    return "bf16" if op in BF16_FASTER.get(feats.kind, frozenset()) else None


def resolve_amp(amp: Any, device: str | torch.device = "cpu", *, op: str = "matmul",
                features: CPUFeatures | None = None, allow_fp16: bool = True) -> str | None:
    """The precision to run: ``None`` (fp32), ``"bf16"`` or ``"fp16"``.

    ``"auto"`` follows :func:`auto_amp`; an explicit ``"bf16"`` on a CPU without native bf16 is kept
    but warns once per process with the cost measured here (:func:`bf16_cost`).
    """
    choice = normalize_amp(amp, allow_fp16=allow_fp16)
    device = torch.device(device)
    if choice == "auto":
        return auto_amp(device, op, features)
    if choice == "bf16" and device.type == "cpu":
        feats = features or cpu_features()
        if not feats.native_bf16:
            _warn_slow_bf16(feats.kind, feats.model, op)
    return choice


@functools.cache
def _warn_slow_bf16(kind: str, model: str, op: str) -> None:
    # lru_cache makes this run once per (CPU, op) and process: the warning is said once
    cost = bf16_cost(op)
    warnings.warn(
        f"amp='bf16' on {model or 'this CPU'} ({kind}: no native bf16 arithmetic): a bf16 {op} measured "
        f"{cost['ratio']:.1f}x the time of fp32 here ({cost['bf16_ms']:.2f} ms vs {cost['fp32_ms']:.2f} ms, "
        f"{cost['shape']}); amp='auto' would run fp32 on this CPU", RuntimeWarning, stacklevel=4)


@functools.cache
def bf16_cost(op: str = "matmul", threads: int | None = None) -> dict[str, Any]:
    """Time one representative ``op`` in fp32 and bf16 on this CPU (best of 3, a few ms in all).

    ``matmul``: 256x400 @ 400x300 (a TD3 layer); ``conv``: 3x3 conv, 32->32 channels, 1x32x32x32.
    """
    if op not in OP_KINDS:
        raise ValueError(f"op must be one of {OP_KINDS}, got {op!r}")
    g = torch.Generator().manual_seed(0)
    if op == "matmul":
        a, b = torch.randn(256, 400, generator=g), torch.randn(400, 300, generator=g)
        shape = "256x400x300 matmul"

        def run(dt: torch.dtype):
            x, y = a.to(dt), b.to(dt)
            return lambda: x @ y
    else:
        a, b = torch.randn(1, 32, 32, 32, generator=g), torch.randn(32, 32, 3, 3, generator=g)
        shape = "3x3 conv 32->32 on 32x32"

        def run(dt: torch.dtype):
            x, w = a.to(dt), b.to(dt)
            return lambda: torch.nn.functional.conv2d(x, w, padding=1)

    def best(fn) -> float:
        fn()  # first call: lazy init, weight packing
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    prev = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            fp32, bf16 = best(run(torch.float32)), best(run(torch.bfloat16))
    finally:
        torch.set_num_threads(prev)
    return {"op": op, "shape": shape, "fp32_ms": fp32 * 1e3, "bf16_ms": bf16 * 1e3, "ratio": bf16 / fp32}
