"""zoo.engine.precision: the CPU kind from cpuinfo flags and ISA caps, and what amp="auto" picks on it."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from zoo.engine import fit, precision
from zoo.engine.precision import auto_amp, choose_amp, cpu_features, model_op_kind, normalize_amp, resolve_amp

BASE = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 "
        "ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl pni pclmulqdq ssse3 fma cx16 sse4_1 "
        "sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm bmi1 avx2 smep bmi2")
# the CPUs of this project's machines, as their /proc/cpuinfo says them (flags abridged)
EPYC = f"processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: {BASE} sha_ni clzero xsaveerptr\n"
ZEN5 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n"
        f"stepping\t: 1\nflags\t\t: {BASE} avx512f avx512dq avx512bw avx512vl avx_vnni avx512_bf16 avx512_vnni\n\n"
        "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\n")
XEON = (f"processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: {BASE} avx512f avx512dq "
        "avx512cd avx512bw avx512vl avx_vnni avx512_bf16 avx512_vnni amx_bf16 avx512_fp16 amx_tile amx_int8\n")
COOPER = (f"model name\t: Intel(R) Xeon(R) Gold 6348H\nflags\t\t: {BASE} avx512f avx512dq avx512bw avx512vl "
          "avx512_vnni avx512_bf16\n")
SKYLAKE = f"model name\t: Intel(R) Xeon(R) Gold 6148\nflags\t\t: {BASE} avx512f avx512dq avx512bw avx512vl\n"
ARM = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 bf16 i8mm\n"


@pytest.mark.parametrize(("cpuinfo", "kind", "native"), [
    (XEON, "amx", True), (COOPER, "avx512_bf16", True), (ZEN5, "avx512_bf16", True), (SKYLAKE, "avx512", False),
    (EPYC, "avx2", False),
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


def test_cpu_id_names_vendor_family_model():
    feats = cpu_features(ZEN5, env={})
    assert feats.ident == "AuthenticAMD family 26 model 2 stepping 1"
    assert feats.describe()["cpu_id"] == feats.ident and feats.model == "AMD EPYC"
    assert "cpu_id" not in cpu_features(EPYC, env={}).describe()  # no vendor lines: nothing made up


@pytest.mark.parametrize("op", ["matmul", "conv"])
def test_auto_is_bf16_only_where_measured_faster(op):
    assert auto_amp("cpu", op, cpu_features(XEON, env={})) == "bf16"
    # no native bf16 -> fp32; avx512_bf16 CPUs of another machine cannot be timed from here -> fp32
    for info in (COOPER, ZEN5, SKYLAKE, EPYC):
        assert auto_amp("cpu", op, cpu_features(info, env={})) is None
        assert resolve_amp("auto", "cpu", op=op, features=cpu_features(info, env={})) is None


@pytest.mark.parametrize("op", ["matmul", "conv"])
def test_choose_amp_rule(op):
    assert choose_amp("amx", op) == "bf16" and choose_amp("amx", op, 0.5) == "bf16"  # settled by the kind
    for kind in ("avx2", "avx512", "arm64", "other"):  # no native bf16: never, whatever a timing said
        assert choose_amp(kind, op, 10.0) is None
    # avx512_bf16 is timed: Zen 5 measured 4.2x (matmul) / 1.8x (conv probe), the capped Xeon 0.55x
    assert choose_amp("avx512_bf16", op, 4.2) == "bf16" and choose_amp("avx512_bf16", op, 1.8) == "bf16"
    assert choose_amp("avx512_bf16", op, precision.MIN_BF16_SPEEDUP) == "bf16"
    assert choose_amp("avx512_bf16", op, precision.MIN_BF16_SPEEDUP - 0.01) is None  # a margin, not 1.0
    assert choose_amp("avx512_bf16", op, 0.55) is None and choose_amp("avx512_bf16", op) is None
    with pytest.raises(ValueError, match="op must be one of"):
        choose_amp("amx", "fft")


@pytest.mark.parametrize(("info", "ratio", "want"), [(ZEN5, 0.24, "bf16"), (COOPER, 1.8, None), (ZEN5, 0.9, None)])
def test_auto_times_this_machine_when_its_kind_is_timed(monkeypatch, info, ratio, want):
    """On a timed kind, amp="auto" follows bf16_cost on this machine (bf16 time / fp32 time)."""
    here = cpu_features(info, env={})
    asked = []
    monkeypatch.setattr(precision, "_this_cpu", lambda: here)
    monkeypatch.setattr(precision, "bf16_cost", lambda op: asked.append(op) or {"ratio": ratio})
    for op in ("matmul", "conv"):
        assert auto_amp("cpu", op) == want and resolve_amp("auto", "cpu", op=op) == want
    assert set(asked) == {"matmul", "conv"}
    asked.clear()
    assert auto_amp("cpu", "matmul", cpu_features(XEON, env={})) == "bf16" and not asked  # settled: not timed


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


@pytest.mark.parametrize("op", ["matmul", "conv"])
def test_bf16_cost_measures_both(op):
    cost = precision.bf16_cost(op)
    assert cost["fp32_ms"] > 0 and cost["bf16_ms"] > 0 and cost["ratio"] == cost["bf16_ms"] / cost["fp32_ms"]
    assert precision.bf16_cost(op) is cost  # measured once per process


def test_this_machine_is_cached_and_consistent():
    feats = cpu_features()
    assert feats is cpu_features()
    for op in ("matmul", "conv"):
        speedup = 1 / precision.bf16_cost(op)["ratio"] if feats.kind in precision.TIMED_KINDS else None
        assert auto_amp("cpu", op) == choose_amp(feats.kind, op, speedup)
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


def test_model_op_kind_tells_3d_convolutions_apart():
    assert model_op_kind(nn.Sequential(nn.Conv3d(1, 2, 3), nn.Flatten(), nn.LazyLinear(2))) == "conv3d"
    assert model_op_kind(nn.Sequential(nn.Conv3d(1, 2, 3), nn.Conv2d(2, 2, 1))) == "conv3d"  # HybridSN
    assert model_op_kind(nn.Conv1d(1, 2, 3)) == "conv"
    assert model_op_kind(nn.Sequential(nn.LazyConv3d(2, 3), nn.ConvTranspose3d(2, 1, 3))) == "conv3d"  # before init


@pytest.mark.parametrize("op", ["matmul", "conv", "conv3d"])
def test_training_needs_right_bf16_gradients_on_this_machine(op):
    ok = precision.bf16_gradients_ok(op)
    assert isinstance(ok, bool) and precision.bf16_gradients_ok(op) is ok  # checked once per process
    assert auto_amp("cpu", op, training=True) == (auto_amp("cpu", op) if ok else None)


class _BrokenInBf16(torch.autograd.Function):
    """x @ w whose weight gradient is NaN in bf16: what oneDNN's avx512_core_bf16 conv3d backward gave."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gw = x.t() @ g
        return g @ w.t(), gw.fill_(float("nan")) if gw.dtype == torch.bfloat16 else gw


def test_a_wrong_bf16_gradient_keeps_training_in_fp32(monkeypatch):
    monkeypatch.setattr(precision, "_GRADIENT_CASES", {**precision._GRADIENT_CASES,
                                                       "matmul": ((_BrokenInBf16.apply, (8, 16), (16, 4), {}),)})
    precision.bf16_gradients_ok.cache_clear()
    try:
        assert precision.bf16_gradients_ok("matmul") is False
        assert precision.bf16_gradients_ok("conv") is precision.bf16_gradients_ok("conv")  # other kinds: own cases
        here = cpu_features(ZEN5, env={})
        monkeypatch.setattr(precision, "_this_cpu", lambda: here)
        monkeypatch.setattr(precision, "bf16_cost", lambda op: {"ratio": 0.25})
        assert auto_amp("cpu", "matmul") == "bf16"  # inference: the forward is fine and 4x faster
        assert auto_amp("cpu", "matmul", training=True) is None
        assert resolve_amp("auto", "cpu", op="matmul", training=True) is None
        precision._warn_wrong_bf16_gradients.cache_clear()
        with pytest.warns(RuntimeWarning, match="bf16 matmul gradients computed here disagree with fp32"):
            assert resolve_amp("bf16", "cpu", op="matmul", training=True) == "bf16"  # explicit: kept, said
    finally:
        precision.bf16_gradients_ok.cache_clear()


def test_explicit_bf16_where_the_timed_probe_is_slow_warns_once(monkeypatch):
    """An AVX512_BF16 CPU whose bf16 kernels measured slower (the capped Xeon: 1.8x): explicit bf16 is kept and said."""
    here = cpu_features(COOPER, env={})
    monkeypatch.setattr(precision, "_this_cpu", lambda: here)
    monkeypatch.setattr(precision, "bf16_cost", lambda op: {"ratio": 1.8, "bf16_ms": 1.8, "fp32_ms": 1.0,
                                                            "shape": "probe"})
    precision._warn_slow_bf16.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match=r"bf16 kernels measured slow.*1\.8x the time of fp32.*would run fp32"):
            assert resolve_amp("bf16", "cpu", op="conv") == "bf16"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert resolve_amp("bf16", "cpu", op="conv") == "bf16"  # said once
            monkeypatch.setattr(precision, "bf16_cost", lambda op: {"ratio": 0.25})
            assert resolve_amp("bf16", "cpu", op="matmul") == "bf16"  # fast here: silent
    finally:
        precision._warn_slow_bf16.cache_clear()
