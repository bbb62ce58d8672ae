"""The optimizer fit builds: fused kernels on the CPU where torch has them, the caller's choice otherwise."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, fit
from zoo.engine.optim import build_optimizer


def convnet() -> nn.Module:
    torch.manual_seed(0)
    # no bias before the BatchNorm: its gradient is rounding noise, which Adam scales up to lr-sized steps
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))


def images(n: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def implementation(opt: torch.optim.Optimizer) -> str:
    return "fused" if opt.defaults.get("fused") else "foreach" if opt.defaults.get("foreach") else "default"


@pytest.mark.parametrize("name", ["adamw", "adam", "sgd"])
def test_named_optimizers_run_fused_on_cpu(name):
    opt = build_optimizer(name, convnet(), None, 1e-3, 0.01, None)
    assert implementation(opt) == "fused"


@pytest.mark.parametrize("options", [{"foreach": False}, {"foreach": True}, {"fused": False}])
def test_the_callers_implementation_stands(options):
    opt = build_optimizer("adamw", convnet(), None, 1e-3, 0.0, options)
    assert implementation(opt) == ("foreach" if options.get("foreach") else "default")


def test_no_fused_where_it_does_not_apply():
    assert implementation(build_optimizer("rmsprop", convnet(), None, 1e-3, 0.0, None)) == "default"  # no kernel
    sparse = nn.Sequential(nn.Embedding(10, 4, sparse=True), nn.Linear(4, 2))
    assert implementation(build_optimizer("sgd", sparse, None, 0.1, 0.0, None)) == "default"  # dense grads only
    meta = nn.Linear(4, 2, device="meta")  # not a CPU tensor: torch's own choice
    assert implementation(build_optimizer("adamw", meta, None, 1e-3, 0.0, None)) == "default"
    factory = build_optimizer(torch.optim.AdamW, convnet(), None, 1e-3, 0.0, None)  # the caller's own builder
    assert implementation(factory) == "default"


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("name", ["adamw", "sgd"])
def test_fit_with_the_fused_kernel_trains_as_torchs_default(name, channels_last):
    """The fused CPU kernels walk a gradient in its parameter's memory layout: channels_last weights must
    get channels_last gradients from backward, or the step would scramble them (the fused step of a
    channels_last weight with a contiguous gradient is off by 0.1 after 5 steps of lr 1e-2)."""
    x, y = images()
    runs = {}
    for who, options in (("zoo", {}), ("torch", {"foreach": False})):
        model = convnet()
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        seen = []
        fit(model, (x, y), epochs=2, batch_size=16, optimizer=name, lr=1e-2, weight_decay=0.05, amp=None, seed=0,
            optimizer_options={**options, **({"momentum": 0.9} if name == "sgd" else {})}, progress=False,
            callbacks=[LambdaCallback(on_train_start=lambda state, seen=seen: seen.append(implementation(state.optimizer)))])
        runs[who] = (seen, [p.detach().clone() for p in model.parameters()])
    assert runs["zoo"][0] == ["fused"] and runs["torch"][0] == ["default"]
    for ours, theirs in zip(runs["zoo"][1], runs["torch"][1], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
