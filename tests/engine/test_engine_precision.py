"""zoo.engine.precision: the CPU kind from cpuinfo flags and ISA caps, and what amp="auto" picks on it."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from zoo.engine import fit, precision
from zoo.engine.precision import auto_amp, cpu_features, model_op_kind, normalize_amp, resolve_amp

BASE = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 "
        "ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl pni pclmulqdq ssse3 fma cx16 sse4_1 "
        "sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm bmi1 avx2 smep bmi2")
# the two CPUs of this project's machines, as their /proc/cpuinfo says them (flags abridged)
EPYC = f"processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: {BASE} sha_ni clzero xsaveerptr\n"
XEON = (f"processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: {BASE} avx512f avx512dq "
        "avx512cd avx512bw avx512vl avx_vnni avx512_bf16 avx512_vnni amx_bf16 avx512_fp16 amx_tile amx_int8\n")
COOPER = (f"model name\t: Intel(R) Xeon(R) Gold 6348H\nflags\t\t: {BASE} avx512f avx512dq avx512bw avx512vl "
          "avx512_vnni avx512_bf16\n")
SKYLAKE = f"model name\t: Intel(R) Xeon(R) Gold 6148\nflags\t\t: {BASE} avx512f avx512dq avx512bw avx512vl\n"
ARM = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 bf16 i8mm\n"


@pytest.mark.parametrize(("cpuinfo", "kind", "native"), [
    (XEON, "amx", True), (COOPER, "avx512_bf16", True), (SKYLAKE, "avx512", False), (EPYC, "avx2", False),
])
def test_kind_and_native_bf16_from_flags(cpuinfo, kind, native):
    feats = cpu_features(cpuinfo, env={})
    assert feats.kind == kind and feats.native_bf16 is native
    d = feats.describe()
    assert set(d["cpu_flags"]) == {"avx2", "avx512f", "avx512_bf16", "amx_bf16"} and "isa_caps" not in d


def test_arm_features_line():
    feats = cpu_features(ARM, env={})
    assert "bf16" in feats.flags and feats.kind in ("arm64", "other") and not feats.native_bf16
    assert auto_amp("cpu", "matmul", feats) is None  # not measured there: fp32


@pytest.mark.parametrize("op", ["matmul", "conv"])
def test_auto_is_bf16_only_where_measured_faster(op):
    assert auto_amp("cpu", op, cpu_features(XEON, env={})) == "bf16"
    # avx512_bf16 without AMX: oneDNN's bf16 GEMM measured slower than MKL's fp32 -> fp32
    for info in (COOPER, SKYLAKE, EPYC):
        assert auto_amp("cpu", op, cpu_features(info, env={})) is None
        assert resolve_amp("auto", "cpu", op=op, features=cpu_features(info, env={})) is None


@pytest.mark.parametrize(("cap", "kind"), [
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "avx2"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, "avx512_bf16"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, "amx"),
    ({"ATEN_CPU_CAPABILITY": "avx2"}, "avx2"),
    ({"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, "avx2"),
    ({"ATEN_CPU_CAPABILITY": "default"}, "other"),
])
def test_isa_caps_lower_the_kind(cap, kind):
    feats = cpu_features(XEON, env=cap)
    assert feats.kind == kind
    assert feats.describe()["isa_caps"] == cap and "emulated" in feats.describe()["cpu_kind_note"]
    assert (auto_amp("cpu", "matmul", feats) == "bf16") is (kind == "amx")


def test_normalize_amp_spellings_and_errors():
    assert [normalize_amp(a) for a in (None, False, "none", "fp32", "off")] == [None] * 5
    assert normalize_amp("bfloat16") == "bf16" and normalize_amp("auto") == "auto"
    assert normalize_amp("fp16") == "fp16"
    with pytest.raises(ValueError, match="'auto', 'bf16' or None"):
        normalize_amp("fp16", allow_fp16=False)
    with pytest.raises(ValueError, match="got 'int8'"):
        normalize_amp("int8")
    with pytest.raises(ValueError, match="op must be one of"):
        auto_amp("cpu", "fft")


def test_explicit_bf16_without_native_bf16_warns_once_with_the_measured_cost():
    precision._warn_slow_bf16.cache_clear()
    epyc = cpu_features(EPYC, env={})
    with pytest.warns(RuntimeWarning, match=r"no native bf16.*measured [0-9.]+x the time of fp32.*ms"):
        assert resolve_amp("bf16", "cpu", op="matmul", features=epyc) == "bf16"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_amp("bf16", "cpu", op="matmul", features=epyc) == "bf16"  # said once
        assert resolve_amp("bf16", "cpu", features=cpu_features(XEON, env={})) == "bf16"  # native: silent


def test_bf16_cost_measures_both():
    cost = precision.bf16_cost("matmul")
    assert cost["fp32_ms"] > 0 and cost["bf16_ms"] > 0 and cost["ratio"] == cost["bf16_ms"] / cost["fp32_ms"]


def test_this_machine_is_cached_and_consistent():
    feats = cpu_features()
    assert feats is cpu_features()
    assert auto_amp("cpu", "matmul") == ("bf16" if "matmul" in precision.BF16_FASTER.get(feats.kind, ()) else None)
    assert auto_amp("meta") is None


def test_model_op_kind():
    assert model_op_kind(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten())) == "conv"
    assert model_op_kind(nn.Linear(2, 2)) == "matmul"


class DtypeProbe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(2, 2)
        self.seen: set[torch.dtype] = set()

    def forward(self, x):
        out = self.net(x)
        self.seen.add(out.dtype)
        return out


def test_fit_default_follows_auto():
    x = torch.randn(16, 2)
    model = DtypeProbe()
    result = fit(model, (x, (x[:, 0] > 0).long()), epochs=1, batch_size=8, progress=False)
    want = torch.bfloat16 if auto_amp("cpu", "matmul") == "bf16" else torch.float32
    assert model.seen == {want}
    assert result.history and next(model.parameters()).dtype == torch.float32
