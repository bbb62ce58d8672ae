"""zoo.engine.precision: the CPU kind from cpuinfo flags and ISA caps, and what amp="auto" picks on it."""

from __future__ import annotations

import functools
import json
import time
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from zoo.engine import fit, precision
from zoo.engine.precision import auto_amp, choose_amp, cpu_features, model_op_kind, normalize_amp, resolve_amp


@pytest.fixture(autouse=True)
def _forget_decisions():
    """Each test starts as a new process would: no amp="auto" timing remembered in memory (its own $ZOO_HOME,
    from the conftest, holds no amp.json either)."""
    precision._SPEEDUPS.clear()
    yield
    precision._SPEEDUPS.clear()


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
    assert cost["fp32_ms"] > 0 and cost["bf16_ms"] > 0 and cost["threads"] == precision.PROBE_THREADS
    assert len(cost["ratios"]) == precision._ROUNDS and min(cost["ratios"]) <= cost["ratio"] <= max(cost["ratios"])
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


def _broken_channels_last(conv):
    """``conv`` whose bf16 weight gradient is NaN in channels-last only (a layout-specific kernel bug)."""
    def fn(x, w, **kwargs):
        out = conv(x, w, **kwargs)
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        if x.dtype == torch.bfloat16 and x.is_contiguous(memory_format=fmt) and not x.is_contiguous():
            w.register_hook(lambda g: torch.full_like(g, float("nan")))
        return out
    return fn


@pytest.mark.parametrize("op, conv, x_shape, w_shape", [
    ("conv", torch.nn.functional.conv2d, (2, 8, 5, 5), (8, 8, 3, 3)),
    ("conv3d", torch.nn.functional.conv3d, (2, 8, 3, 5, 5), (8, 8, 3, 3, 3)),
])
def test_bf16_conv_gradients_are_checked_in_the_channels_last_layout_too(monkeypatch, op, conv, x_shape, w_shape):
    # fit trains convolutions channels-last in bf16 (zoo.engine.layout): a kernel wrong there only must count
    case = (_broken_channels_last(conv), x_shape, w_shape, {"padding": 1})
    monkeypatch.setattr(precision, "_GRADIENT_CASES", {**precision._GRADIENT_CASES, op: (case,)})
    precision.bf16_gradients_ok.cache_clear()
    try:
        assert precision.bf16_gradients_ok(op) is False
        monkeypatch.setattr(precision, "_GRADIENT_CASES", {**precision._GRADIENT_CASES, op: ((conv, *case[1:]),)})
        precision.bf16_gradients_ok.cache_clear()
        assert precision.bf16_gradients_ok(op) is True
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


# --- amp="auto" is decided once per machine ----------------------------------------------------------------


def _timed_machine(monkeypatch, ratio: float) -> list[str]:
    """This process on a Zen 5 (a timed kind) whose probe measures ``ratio`` (bf16 time / fp32 time)."""
    here = cpu_features(ZEN5, env={})
    monkeypatch.setattr(precision, "_this_cpu", lambda: here)
    asked: list[str] = []
    # cached per op, as the real one is
    monkeypatch.setattr(precision, "bf16_cost", functools.cache(lambda op: asked.append(op) or {"ratio": ratio}))
    return asked


@pytest.mark.parametrize("op", ["conv", "conv3d"])
def test_the_probe_times_the_fp32_kernel_that_real_calls_take(op):
    """torch runs one small fp32 conv3d on its native slow_conv3d, 5x slower than the oneDNN kernel a batch of
    windows or a scene pass takes (bf16 always goes to oneDNN): a one-window probe timed bf16 5x faster on an
    Emerald Rapids VM without AMX, where HybridSN's predictions ran slower in bf16."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    _, fn, operands = precision._probe(op, torch.Generator().manual_seed(0))
    with torch.profiler.profile() as prof:
        fn(*operands)
    names = {e.name for e in prof.events()}
    assert "aten::mkldnn_convolution" in names and not any("slow_conv" in n for n in names), names


def test_a_decision_timed_on_an_older_probe_is_made_again(monkeypatch, tmp_path):
    """amp.json entries of the one-window conv3d probe (keys without the probe's shape) are not this probe's."""
    monkeypatch.setenv("ZOO_HOME", str(tmp_path))
    key = precision._decision_key(cpu_features(ZEN5, env={}), "conv3d")
    old = key.replace(f" ({precision._PROBES['conv3d']})", "")
    assert old != key
    (tmp_path / "amp.json").write_text(json.dumps({"format": "zoo.amp/1", "entries": {old: {"speedup": 5.0}}}))
    asked = _timed_machine(monkeypatch, 2.2)
    assert auto_amp("cpu", "conv3d") is None and asked == ["conv3d"]


def test_the_timed_choice_is_kept_for_every_later_process(monkeypatch, tmp_path):
    """A probe that measures 4x now and 0.9x in the next process (a busy machine) must not flip the choice:
    the first measurement is recorded in $ZOO_HOME/amp.json and the next process reads it."""
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    asked = _timed_machine(monkeypatch, 0.25)
    assert auto_amp("cpu", "conv") == "bf16" and asked == ["conv"]
    path = precision.amp_cache_path()
    assert path == tmp_path / "home" / "amp.json"  # under $ZOO_HOME (the tests' own), never ~/.cache
    saved = json.loads(path.read_text())
    (key, entry), = saved["entries"].items()
    assert entry["speedup"] == 4.0 and "conv" in key and torch.__version__ in key and "family 26" in key

    precision._SPEEDUPS.clear()  # a new process
    asked = _timed_machine(monkeypatch, 0.9)
    assert auto_amp("cpu", "conv") == "bf16" and asked == []  # read, not timed again
    assert auto_amp("cpu", "matmul") is None and asked == ["matmul"]  # another op kind: its own measurement

    precision._SPEEDUPS.clear()
    monkeypatch.setenv("ZOO_AMP_REMEASURE", "1")  # asked for: timed again, and recorded
    assert auto_amp("cpu", "conv") is None and asked == ["matmul", "conv"]
    monkeypatch.delenv("ZOO_AMP_REMEASURE")
    precision._SPEEDUPS.clear()
    assert auto_amp("cpu", "conv") is None and asked == ["matmul", "conv"]


def test_deciding_leaves_no_lock_file_in_the_home(monkeypatch, tmp_path):
    """The lock that makes processes starting together measure once left amp.json.lock in $ZOO_HOME."""
    monkeypatch.setenv("ZOO_HOME", str(tmp_path))
    _timed_machine(monkeypatch, 0.25)
    assert auto_amp("cpu", "conv") == "bf16"
    assert precision.remeasure(("matmul",)) == {"matmul": 4.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["amp.json"]


def test_remeasure_times_again_and_records(monkeypatch, tmp_path):
    monkeypatch.setenv("ZOO_HOME", str(tmp_path))
    _timed_machine(monkeypatch, 0.25)
    assert auto_amp("cpu", "matmul") == "bf16"
    _timed_machine(monkeypatch, 2.0)
    assert precision.remeasure(("matmul",)) == {"matmul": 0.5}
    assert auto_amp("cpu", "matmul") is None
    precision._SPEEDUPS.clear()
    assert auto_amp("cpu", "matmul") is None  # the file says so too


@pytest.mark.parametrize("content", ["{not json", '{"format": "zoo.amp/1", "entries": []}', "[]",
                                     '{"format": "zoo.amp/1", "entries": {"K": {"speedup": "fast"}}}'])
def test_an_unreadable_record_is_ignored_and_rewritten(monkeypatch, tmp_path, content):
    monkeypatch.setenv("ZOO_HOME", str(tmp_path))
    (tmp_path / "amp.json").write_text(content.replace("K", precision._decision_key(cpu_features(ZEN5, env={}),
                                                                                     "conv")))
    asked = _timed_machine(monkeypatch, 0.25)
    assert auto_amp("cpu", "conv") == "bf16" and asked == ["conv"]
    assert next(iter(json.loads((tmp_path / "amp.json").read_text())["entries"].values()))["speedup"] == 4.0


def test_an_unwritable_home_still_decides_and_says_why_it_cannot_record(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("ZOO_HOME", str(blocker / "home"))  # a folder cannot be made under a file
    _timed_machine(monkeypatch, 0.25)
    with pytest.warns(RuntimeWarning, match="could not record this machine's bf16 timing"):
        assert auto_amp("cpu", "conv") == "bf16"



def test_threads_deciding_at_once_measure_once_and_leave_the_thread_count(monkeypatch, tmp_path):
    """Threads' first predictions at once, with no lock file to be had (a home that cannot be made): the
    probes used to run side by side, each set torch's thread count and put back what another had set, and
    each thread decided on its own timing."""
    import threading

    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("ZOO_HOME", str(blocker / "home"))
    precision.bf16_cost.cache_clear()
    threads_before = torch.get_num_threads()
    start, speedups = threading.Barrier(4), []

    def decide() -> None:
        start.wait(10)
        speedups.append(precision._timed_speedup(cpu_features(), "matmul"))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # could not record the timing: said by another test
        workers = [threading.Thread(target=decide) for _ in range(4)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(60)
    precision.bf16_cost.cache_clear()
    assert len(speedups) == 4 and len(set(speedups)) == 1, speedups
    assert torch.get_num_threads() == threads_before


def test_a_read_only_home_is_said_once_per_process(monkeypatch, tmp_path):
    """A read-only ZOO_HOME warned once per op kind: each write's error names its own temp file."""
    import errno

    from zoo import fs

    attempts = []

    def read_only(path, text):
        attempts.append(path)
        raise OSError(errno.EROFS, "Read-only file system", f"{path}.tmp-{len(attempts)}")

    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(fs, "write_text", read_only)
    _timed_machine(monkeypatch, 0.25)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert auto_amp("cpu", "conv") == "bf16" and auto_amp("cpu", "matmul") == "bf16"
    assert len(attempts) == 2 and len([w for w in said if "could not record" in str(w.message)]) == 1


def test_the_probe_ignores_warm_up_and_a_busy_spell(monkeypatch):
    """bf16 twice as fast as fp32, but the first call of each dtype is slow (kernel creation) and for a while
    another process makes every call 10x slower: rounds that alternate the two dtypes, and their median
    ratio, still say 2x. (Timing all fp32 calls, then all bf16 ones, and comparing the best of each said
    anything from 0.93x to 221x on a busy machine: a busy spell fell on one dtype's calls only.)"""
    calls = {torch.float32: 0, torch.bfloat16: 0}
    # the n-th call of a dtype: 3 warm-up calls, 1 to size the samples (one call each here), then the rounds,
    # fp32 first in even rounds: the spell spans the end of round 1, round 2 and the start of round 3
    busy = {(torch.float32, 6), (torch.float32, 7), (torch.bfloat16, 7), (torch.bfloat16, 8)}

    def fake(x, w):
        calls[x.dtype] += 1
        seconds = 0.004 if x.dtype == torch.float32 else 0.002
        if calls[x.dtype] == 1:
            seconds = 0.03  # the first call: kernel creation, weight packing
        elif (x.dtype, calls[x.dtype]) in busy:
            seconds *= 10  # another process holds the core
        time.sleep(seconds)

    monkeypatch.setattr(precision, "_probe", lambda op, g: ("fake", fake, (torch.ones(1), torch.ones(1))))
    precision.bf16_cost.cache_clear()
    try:
        cost = precision.bf16_cost("matmul")
    finally:
        precision.bf16_cost.cache_clear()
    assert 0.4 < cost["ratio"] < 0.65, cost
    assert max(cost["ratios"]) > 0.65 or min(cost["ratios"]) < 0.4, cost  # the spell was measured, and outvoted


@pytest.mark.parametrize(("here", "recorded", "decided", "kept"), [
    (ZEN5, {"amp": "bf16", "device": "cpu", "cpu_kind": "avx512_bf16"}, None, "bf16"),  # the same kind: kept
    (ZEN5, {"amp": "bf16", "device": "cpu", "cpu_kind": "amx"}, None, None),  # moved to another kind: decided now
    (XEON, {"amp": "fp32", "device": "cpu", "cpu_kind": "avx2"}, "bf16", "bf16"),  # to AMX: its bf16
    (EPYC, {"amp": "bf16", "device": "cpu"}, None, None),  # an older record, no native bf16 here: fp32
    (XEON, {"amp": "bf16", "device": "cpu"}, None, "bf16"),  # an older record, native bf16 here: kept
    (EPYC, {"amp": "fp32", "device": "cpu"}, None, None),
])
def test_a_run_resumed_on_another_kind_of_cpu_decides_its_precision_there(monkeypatch, here, recorded, decided,
                                                                          kept):
    """A run trained in bf16 on an AMX Xeon and resumed on an AVX2-only EPYC kept bf16 there: 10-60x slower
    than fp32. The record now names the CPU kind, and a run that moved decides anew (a resume on other
    hardware repeats nothing exactly anyway); on the same kind the recorded precision stays."""
    monkeypatch.setattr(precision, "_this_cpu", lambda: cpu_features(here, env={}))
    assert precision.resumed_precision("auto", recorded, "cpu", decided, "epoch-0003.pt") == kept
    assert precision.precision_record("bf16", "cpu") == {"amp": "bf16", "device": "cpu",
                                                        "cpu_kind": cpu_features(here, env={}).kind}
    assert precision.precision_record(None, "meta") == {"amp": "fp32", "device": "meta"}


def test_without_proc_cpuinfo_the_cpus_flags_come_from_torch(monkeypatch):
    """Before: the fallback asked torch._C._cpu for probes that torch 2.14 keeps in torch.cpu: it found nothing,
    so a machine without /proc/cpuinfo (Windows, macOS) was kind "other", and amx ones lost bf16."""
    from zoo.engine import precision

    relevant = {"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}
    if Path("/proc/cpuinfo").is_file():  # both sources on this machine: they agree
        assert precision._torch_flags() == precision.cpu_features().hardware_flags & relevant
    amx = {"avx2": True, "avx512_f": True, "avx512_bf16": True, "amx_tile": True, "amx_bf16": True, "sse": True}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: amx, raising=False)
    assert precision._torch_flags() == relevant
    assert precision._kind_of(precision._torch_flags()) == "amx"
    monkeypatch.delattr(torch.cpu, "get_capabilities", raising=False)  # an older torch: its probes
    for fn, value in (("_is_avx2_supported", True), ("_is_avx512_supported", False),
                      ("_is_avx512_bf16_supported", False), ("_is_amx_tile_supported", False)):
        monkeypatch.setattr(torch.cpu, fn, lambda v=value: v, raising=False)
    assert precision._torch_flags() == {"avx2"}
