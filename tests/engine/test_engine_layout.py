"""fit's memory layout: channels-last for convolutional networks where it was measured faster (zoo.engine.layout)."""

from __future__ import annotations

import warnings

import pytest
import safetensors.torch
import torch
from torch import nn

from zoo.engine import LambdaCallback, evaluate, fit, layout
from zoo.engine.layout import (
    channels_last_input,
    layout_for,
    match_state_layout,
    to_channels_first,
    to_channels_last,
    use_channels_last,
)

CL, CL3D = torch.channels_last, torch.channels_last_3d


@pytest.fixture
def amx(monkeypatch):
    """The CPU kind where channels-last was measured for 2-D and 3-D networks, whatever this machine is."""
    monkeypatch.setattr(layout, "_cpu_kind", lambda: "amx")


def convnet() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))


class Mixed(nn.Module):
    """3-D then 2-D convolutions, as HybridSN: ``(B, 1, D, H, W) -> (B, 3)``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv3d = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv3d(4, 4, 3, padding=1), nn.ReLU())
        self.conv2d = nn.Sequential(nn.Conv2d(4 * 4, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv3d(x)  # (B, 4, D, H, W)
        b, c, d, h, w = x.shape
        return self.head(self.conv2d(x.reshape(b, c * d, h, w)))


def images(n: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def cubes(n: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    return torch.randn(n, 1, 4, 6, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def layouts(model: nn.Module) -> set[str]:
    """The layouts of the 4-D and 5-D parameters (one input channel is both layouts at once: left out)."""
    out = set()
    for p in model.parameters():
        if p.dim() in (4, 5):
            last = p.is_contiguous(memory_format=CL if p.dim() == 4 else CL3D)
            if last != p.is_contiguous():
                out.add(("cl" if last else "nchw") if p.dim() == 4 else ("cl3d" if last else "ncdhw"))
    return out


def test_auto_is_channels_last_for_2d_or_3d_convolutions_in_bf16_on_a_cpu_only(amx):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert use_channels_last("auto", convnet(), cpu, "bf16")
    assert not use_channels_last("auto", Mixed(), cpu, "bf16")  # 3-D then 2-D, as HybridSN: measured slower
    assert use_channels_last("auto", Mixed().conv3d, cpu, "bf16")  # 3-D only, as R(2+1)D
    assert not use_channels_last("auto", convnet(), cpu, None)  # fp32 on the AMX Xeon: not measured
    assert not use_channels_last("auto", nn.Linear(4, 2), cpu, "bf16")  # nothing to lay out
    assert not use_channels_last("auto", nn.Conv1d(2, 2, 3), cpu, "bf16")
    assert not use_channels_last("auto", convnet(), cuda, "bf16")  # not measured there
    assert use_channels_last(True, nn.Linear(4, 2), cpu, None) and not use_channels_last(False, convnet(), cpu, "bf16")


@pytest.mark.parametrize("kind, amp, train, infer", [
    ("amx", "bf16", {"2d", "3d"}, {"2d", "3d"}),
    ("amx", None, set(), set()),  # fp32 on the AMX Xeon: not measured
    ("avx512_bf16", "bf16", {"2d"}, {"2d", "3d"}),  # Zen 4: 3-D networks train in fp32 there (the gradient check)
    ("avx512_bf16", None, {"2d", "mixed"}, {"2d"}),  # Zen 4 fp32: HybridSN trained 1.00-1.13x, R(2+1)D 0.92-0.99x
    ("avx2", None, {"2d"}, {"2d", "3d"}),  # Zen 3, fp32: R(2+1)D trained 0.97-0.99x channels-last, inferred 1.17-1.27x
    ("avx2", "bf16", set(), set()),  # bf16 asked for where it is slow: not measured
    ("avx512", None, set(), set()),
    ("avx512", "bf16", set(), set()),  # no native bf16 there either: not measured
    ("avx512_bf16-intel", None, set(), set()),  # an Emerald Rapids Xeon hiding AMX: TSN 0.79-0.91x channels-last
])
def test_auto_takes_channels_last_only_for_the_cpu_kind_and_precision_it_was_measured_in(
        monkeypatch, kind, amp, train, infer):
    # a speed-up measured on one CPU kind in one precision is the default there only; training follows the
    # training figures, evaluations (the model converted) and predictions (the input laid out) the inference ones
    monkeypatch.setattr(layout, "_cpu_kind", lambda: kind)
    cpu, dtype = torch.device("cpu"), torch.bfloat16 if amp == "bf16" else None
    for net_kind, net, x in (("2d", convnet(), torch.randn(2, 3, 8, 8)),
                             ("3d", Mixed().conv3d, torch.randn(2, 2, 4, 6, 6)),
                             ("mixed", Mixed(), torch.randn(2, 1, 4, 6, 6))):  # 3-D then 2-D, as HybridSN
        assert use_channels_last("auto", net, cpu, amp) is (net_kind in train)
        assert use_channels_last("auto", net, cpu, amp, inference=True) is (net_kind in infer)
        assert (channels_last_input(x, net, dtype) is not x) is (net_kind in infer)
        assert use_channels_last(True, net, cpu, amp)  # asked for: any kind
    for net in (nn.Linear(4, 2), nn.Conv1d(2, 2, 3)):  # nothing to lay out, or no entry for 1-D convolutions
        assert not use_channels_last("auto", net, cpu, amp) and not use_channels_last("auto", net, cpu, amp,
                                                                                      inference=True)


def test_a_prediction_input_takes_the_layout_auto_would_give_the_model(amx, monkeypatch):
    # zoo.predict leaves a shared model as it is and lays out its input instead, under fit's rule
    bf16 = torch.bfloat16
    x4, x5 = torch.randn(2, 3, 8, 8), torch.randn(2, 2, 4, 6, 6)
    assert channels_last_input(x4, convnet(), bf16).is_contiguous(memory_format=CL)
    assert channels_last_input(x5, Mixed().conv3d, bf16).is_contiguous(memory_format=CL3D)  # as R(2+1)D
    assert channels_last_input(x4, convnet(), None) is x4  # fp32
    assert channels_last_input(x5, Mixed(), bf16) is x5  # 3-D then 2-D, as HybridSN
    assert channels_last_input(torch.randn(2, 4), nn.Linear(4, 2), bf16).dim() == 2
    # a (B, C, T, H, W) clip for a 2-D network (TSN): its per-frame (B*T, C, H, W) reshape is a channels-last view
    clip = channels_last_input(torch.randn(2, 3, 4, 8, 8), convnet(), bf16)
    frames = clip.transpose(1, 2).reshape(8, 3, 8, 8)
    assert frames.is_contiguous(memory_format=CL) and frames.data_ptr() == clip.data_ptr()
    monkeypatch.setattr(layout, "_cpu_kind", lambda: "avx2")  # a kind it was not measured on
    assert channels_last_input(x4, convnet(), bf16) is x4


def test_to_channels_last_lays_out_2d_and_3d_convolutions_of_one_model():
    model = Mixed()
    with pytest.raises(RuntimeError, match="rank 4"):  # why the engine converts tensor by tensor
        Mixed().to(memory_format=CL)
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    assert to_channels_last(model) is model
    assert layouts(model) == {"cl", "cl3d"}
    assert all(a is b for a, b in zip(params, model.parameters(), strict=True))  # the optimizer's objects
    for p, q in zip(model.parameters(), before, strict=True):
        assert torch.equal(p, q)


def test_a_one_by_one_kernel_takes_the_strides_its_gradient_comes_back_in():
    """A (C_out, C_in, 1, 1) kernel counts as channels-last already: contiguous() kept its strides (C_in, 1, 1, 1)
    while its gradient comes back (C_in, 1, C_in, C_in), and DDP warned 'Grad strides do not match bucket view
    strides' (and copied every such gradient each step) under the README's torchrun command. On one thread a
    rank, torchrun's default: oneDNN on several threads gives a 1x1x1 kernel's gradient other strides (size-1
    dimensions' strides are free), so this test ran alone on 2 threads failed where CI's 1-thread workers passed."""
    model = nn.Sequential(nn.Conv2d(8, 16, 1), nn.Conv2d(16, 4, 3), nn.Conv3d(4, 2, 1))
    to_channels_last(model)
    x = torch.randn(2, 8, 5, 5).contiguous(memory_format=CL)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model[1](model[0](x)).sum().backward()
        model[2](torch.randn(2, 4, 3, 5, 5).contiguous(memory_format=torch.channels_last_3d)).sum().backward()
    finally:
        torch.set_num_threads(threads)
    for conv in model:
        assert conv.weight.grad.stride() == conv.weight.stride()
    assert model[0].weight.stride() == (8, 1, 8, 8)


def test_fit_with_channels_last_trains_a_model_with_3d_convolutions():
    # before zoo.engine.layout, channels_last=True failed on any model holding a Conv3d ("required rank 4 tensor")
    model = Mixed()
    result = fit(model, cubes(), epochs=1, batch_size=8, amp=None, channels_last=True, progress=False)
    assert layouts(model) == {"cl", "cl3d"} and len(result.history) == 1


@pytest.mark.parametrize("kind, amp, expected", [("amx", "bf16", {"cl"}), ("amx", None, {"nchw"}),
                                                  ("avx2", None, {"cl"}), ("avx2", "bf16", {"nchw"}),
                                                  ("avx512_bf16", "bf16", {"cl"}), ("avx512_bf16", None, {"cl"})])
def test_fit_auto_layout_follows_the_cpu_and_precision_and_gives_the_model_back_as_it_came(monkeypatch, kind, amp,
                                                                                           expected):
    # the AMX Xeon trains channels-last in bf16, an AVX2-only CPU in fp32 (the precision "auto" picks on each)
    monkeypatch.setattr(layout, "_cpu_kind", lambda: kind)
    model = convnet()
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # amp="bf16" on a CPU without native bf16 warns
        fit(model, images(), epochs=1, batch_size=16, amp=amp, progress=False, ema_decay=0.9,
            callbacks=[LambdaCallback(on_epoch_end=lambda state, row: seen.append(layouts(state.model)))])
    assert seen == [expected]
    assert layouts(model) == {"nchw"}  # "auto" restores the layout it came in (safetensors refuses non-contiguous)
    safetensors.torch.save(model.state_dict())


@pytest.mark.parametrize("kind, expected", [("avx512_bf16", {"cl", "cl3d"}), ("avx2", {"nchw", "ncdhw"}),
                                             ("amx", {"nchw", "ncdhw"})])
def test_fit_auto_trains_a_3d_then_2d_network_channels_last_only_where_measured_so_in_fp32(monkeypatch, kind,
                                                                                          expected):
    # HybridSN trains in fp32 on the AVX512-BF16 EPYCs (bf16's gradient check fails there), 1.00-1.13x faster
    # channels-last on the Zen 4; on the Zen 3 in fp32 (0.86-0.93x) and on the AMX Xeon it keeps channels-first
    monkeypatch.setattr(layout, "_cpu_kind", lambda: kind)
    model = Mixed()
    seen = []
    fit(model, cubes(), epochs=1, batch_size=8, amp=None, progress=False,
        callbacks=[LambdaCallback(on_epoch_end=lambda state, row: seen.append(layouts(state.model)))])
    assert seen == [expected]
    assert layouts(model) == {"nchw", "ncdhw"}


def test_evaluate_runs_convolutions_channels_last_where_measured_and_restores_the_layout(amx, monkeypatch):
    model = convnet()
    seen = []
    model[0].register_forward_pre_hook(lambda m, args: seen.append(layouts(m)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        evaluate(model, images(16), amp="bf16")
        evaluate(model, images(16), amp=None)
        monkeypatch.setattr(layout, "_cpu_kind", lambda: "avx2")  # measured faster there in fp32
        evaluate(model, images(16), amp=None)
        evaluate(model, images(16), amp="bf16")
    assert seen == [{"cl"}, {"nchw"}, {"cl"}, {"nchw"}] and layouts(model) == {"nchw"}
    evaluate(model, images(16), amp=None, channels_last=True)  # asked for: kept
    assert layouts(model) == {"cl"}


def test_optimizer_state_takes_its_parameters_layout():
    model = convnet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    model(images()[0]).sum().backward()
    opt.step()
    moments = {id(p): opt.state[p]["exp_avg"].clone() for p in model.parameters()}
    to_channels_last(model)
    match_state_layout(opt)
    for p in model.parameters():
        m = opt.state[p]["exp_avg"]
        assert m.stride() == p.stride() and torch.equal(m, moments[id(p)])


def test_a_run_resumed_in_channels_last_steps_its_moments_right(tmp_path):
    """A checkpoint of a channels-first run resumed in channels-last (channels_last is applied on resume): the fused
    Adam walks the restored moments in the parameters' new layout, so they are laid out again; read in the
    old one they are scrambled (the weights then end ~0.1 from the uninterrupted run's)."""
    x, y = images()
    kw = {"batch_size": 16, "optimizer": "adamw", "lr": 1e-2, "amp": None, "seed": 0, "progress": False}
    straight = convnet()
    fit(straight, (x, y), epochs=2, channels_last=True, **kw)
    part = convnet()
    fit(part, (x, y), epochs=1, channels_last=False, checkpoint_dir=tmp_path, **kw)
    resumed = convnet()
    fit(resumed, (x, y), epochs=2, channels_last=True, checkpoint_dir=tmp_path, resume=True, **kw)
    assert layouts(resumed) == {"cl"}
    for a, b in zip(resumed.parameters(), straight.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)  # channels-first vs -last epoch 1: rounding apart


def test_a_3d_network_is_scored_channels_last_3d_with_the_same_outputs(amx):
    model = nn.Sequential(Mixed().conv3d, nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(4, 3)).eval()
    x, y = cubes()
    seen = []
    model[0][2].register_forward_pre_hook(lambda m, args: seen.append(layouts(m)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            ref = model(x).float()
        auto = evaluate(model, (x, y), amp="bf16", metrics=())["loss"]
        assert auto == pytest.approx(evaluate(model, (x, y), amp="bf16", metrics=(), channels_last=False)["loss"],
                                     rel=0.02)
        with layout_for(model, "auto", torch.device("cpu"), "bf16") as last, torch.inference_mode(), \
                torch.autocast("cpu", dtype=torch.bfloat16):
            got = model(x).float()
    assert last and seen[0] == {"ncdhw"} and seen[1] == {"cl3d"} and layouts(model) == {"ncdhw"}
    torch.testing.assert_close(got, ref, rtol=0.02, atol=0.02)  # bf16: other kernels, other rounding


def test_a_model_laid_out_inside_inference_mode_still_trains():
    # the video evaluation converts under torch.inference_mode(): its copies must stay ordinary tensors
    model = convnet()
    with torch.inference_mode():
        to_channels_last(model)
        with layout_for(model, True, torch.device("cpu"), "bf16"):
            pass
        to_channels_first(model)
    assert not any(p.is_inference() for p in model.parameters())
    x, y = images(8)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    assert all(p.grad is not None for p in model.parameters())


# --- a forward that cannot run channels-last -------------------------------------------------------------


class ViewFlatten(nn.Module):
    """Flattens a convolution's output with ``.view``, as older tutorials do (LeNet's ``x.view(-1, 16 * 5 * 5)``):
    PyTorch refuses that on channels-last activations."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)  # (B, 4, 6, 6)
        return self.fc(self.drop(h.view(h.shape[0], -1)))


def bf16_quietly(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # amp="bf16" on a CPU without native bf16 warns
        return fn(*args, **kwargs)


def state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_fit_under_auto_trains_a_forward_that_views_its_activations_channels_first(amx):
    # the "auto" default crashed such models ("view size is not compatible") on the CPU kinds it takes
    # channels-last on; now the first batch's forward is tried channels-last in eval mode first
    model = ViewFlatten()
    with pytest.warns(RuntimeWarning, match=r"ViewFlatten's forward cannot run on channels-last.*torch.flatten"):
        fit(model, images(), epochs=2, batch_size=16, amp="bf16", progress=False)
    plain = ViewFlatten()
    bf16_quietly(fit, plain, images(), epochs=2, batch_size=16, amp="bf16", channels_last=False, progress=False)
    # the try moved no BatchNorm statistics and drew no dropout mask: the run channels_last=False makes
    for key, value in state(plain).items():
        assert torch.equal(model.state_dict()[key], value), key
    assert layouts(model) == {"nchw"}
    with pytest.raises(RuntimeError, match=r"view size.*trains channels-last \(channels_last=True\).*torch.flatten"):
        bf16_quietly(fit, ViewFlatten(), images(), epochs=1, batch_size=16, amp="bf16", channels_last=True,
                     progress=False)  # asked for: PyTorch's error, with the layout and the fix


def test_a_forward_that_views_only_in_training_is_told_the_fix(amx):
    # the first batch's try runs eval mode, so a .view() in the training branch alone is met by the step
    class TrainingView(ViewFlatten):
        def forward(self, x):
            h = self.conv(x)
            return self.fc(h.view(h.shape[0], -1) if self.training else torch.flatten(h, 1))

    with pytest.raises(RuntimeError, match=r"trains channels-last \(channels_last='auto'\).*channels_last=False"):
        bf16_quietly(fit, TrainingView(), images(), epochs=1, batch_size=16, amp="bf16", progress=False)


def test_the_first_batch_try_leaves_a_channels_last_run_as_it_was(amx):
    # the same network flattening with torch.flatten runs channels-last: "auto" trains exactly as True does
    class Flatten(ViewFlatten):
        def forward(self, x):
            return self.fc(self.drop(torch.flatten(self.conv(x), 1)))

    tried, forced = Flatten(), Flatten()
    bf16_quietly(fit, tried, images(), epochs=2, batch_size=16, amp="bf16", progress=False)
    bf16_quietly(fit, forced, images(), epochs=2, batch_size=16, amp="bf16", channels_last=True, progress=False)
    for key, value in state(forced).items():
        assert torch.equal(tried.state_dict()[key], value), key
    assert layouts(tried) == {"nchw"} and layouts(forced) == {"cl"}


def test_a_forward_error_that_is_not_the_layout_is_raised_by_the_training_step(amx):
    class Broken(ViewFlatten):
        def forward(self, x):
            if self.training:
                raise RuntimeError("the model's own error")
            return super().forward(x)

    with pytest.raises(RuntimeError, match="the model's own error"):
        bf16_quietly(fit, Broken(), images(), epochs=1, batch_size=16, amp="bf16", progress=False)


def test_evaluate_and_predict_score_a_forward_that_views_its_activations_channels_first(amx):
    from zoo.vision.evaluate import predict_dataset
    from zoo.vision.predict import predict

    x, y = images(16)
    model = ViewFlatten().eval()
    with torch.no_grad():
        expected = model(x)
    with pytest.warns(RuntimeWarning, match="cannot run on channels-last"):
        scored = evaluate(model, (x, y), amp="bf16", metrics=())
    assert layouts(model) == {"nchw"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # said once per model; "auto" keeps it channels-first now
        assert layout.use_channels_last("auto", model, torch.device("cpu"), "bf16") is False
        assert evaluate(model, (x, y), amp=None, metrics=())["loss"] == pytest.approx(scored["loss"], abs=0.05)
    # each of the families' evaluations and predictions, on a model of its own
    with pytest.warns(RuntimeWarning, match="cannot run on channels-last"):
        logits, _ = predict_dataset(ViewFlatten(), torch.utils.data.TensorDataset(x, y), amp="bf16", batch_size=8)
    torch.testing.assert_close(logits, expected, atol=0.05, rtol=0.05)
    with pytest.warns(RuntimeWarning, match="cannot run on channels-last"):
        rows = predict(ViewFlatten(), x, amp="bf16", topk=3)
    assert [r["prob"] for r in rows] == pytest.approx(expected.softmax(1).max(1).values.tolist(), abs=0.02)
    with pytest.raises(RuntimeError, match="view size"):  # asked for: PyTorch's error
        bf16_quietly(evaluate, ViewFlatten(), (x, y), amp="bf16", metrics=(), channels_last=True)


_EMR = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) "
        "Processor\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx_vnni avx512_bf16 "
        "avx512_vnni avx512_fp16\n\n")
_ZEN4 = _EMR.replace("GenuineIntel", "AuthenticAMD").replace("family\t: 6", "family\t: 25").replace(
    "207", "17").replace("Intel(R) Xeon(R) Processor", "AMD EPYC 9R14")


def test_an_intel_cpu_of_the_zen_kind_keeps_channels_first(monkeypatch):
    """The avx512_bf16 rules were measured on AMD EPYCs; an Emerald Rapids Xeon whose VM hides AMX is that kind
    too, and "auto" laid TSN out channels-last there for training, evaluation and prediction, 9-21 % slower."""
    from zoo.engine import precision

    real = precision.cpu_features
    cpu, net, x = torch.device("cpu"), convnet(), torch.randn(2, 3, 8, 8)
    for text, laid_out in ((_ZEN4, True), (_EMR, False)):
        monkeypatch.setattr(precision, "cpu_features", lambda text=text: real(text, env={}))
        assert precision.cpu_features().kind == "avx512_bf16"
        assert use_channels_last("auto", net, cpu, None) is laid_out
        assert use_channels_last("auto", net, cpu, None, inference=True) is laid_out
        assert (channels_last_input(x, net, None) is not x) is laid_out
