"""eval_mode: every layer gets its own flag back, and overlapping blocks in threads leave the model in eval
mode until the last one ends. training_autograd: training works inside a caller's no_grad / inference_mode."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import zoo
from zoo.engine.modes import eval_mode, training_autograd


def _net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.Flatten(), nn.LazyLinear(2))


def test_each_layer_gets_its_own_mode_back():
    net = _net().train()
    net[1].eval()  # a BN layer the user froze
    with eval_mode(net):
        assert not any(m.training for m in net.modules())
    assert [m.training for m in net.modules()] == [True, True, False, True, True, True]


def test_a_frozen_bn_layer_stays_frozen_through_evaluate_and_predict():
    net = _net()
    x, y = torch.randn(8, 3, 6, 6), torch.randint(0, 2, (8,))
    net(x)  # the lazy layer takes its shape
    net.train()[1].eval()
    zoo.evaluate(net, (x, y))
    zoo.predict(net, x)
    assert net.training and not net[1].training, "model.train(was) used to put the frozen layer back in training"


def test_the_model_stays_in_eval_mode_until_the_last_overlapping_block_ends():
    net = _net().train()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with eval_mode(net):
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with eval_mode(net):
            second_in.set()
            first_out.wait(10)
            seen.append(net.training)  # the first block has ended; this one still runs in eval mode

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == [False]
    assert all(m.training for m in net.modules()), "the last block out restores the training mode"


def test_nested_blocks_and_errors_restore_the_mode():
    net = _net().train()
    try:
        with eval_mode(net), eval_mode(net):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert all(m.training for m in net.modules())
    with eval_mode(net):
        pass
    assert net.training


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode, lambda: torch.set_grad_enabled(False)])
def test_training_inside_a_callers_gradient_free_block_trains(context):
    """It failed at the first backward with "element 0 of tensors does not require grad"."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(32, 4)
    before = [p.detach().clone() for p in net.parameters()]
    with context():
        r = zoo.train(net, (x, (x[:, 0] > 0).long()), epochs=2, batch_size=8, amp=None, progress=False)
        assert not torch.is_grad_enabled()  # the caller's mode is back once the run ends
    assert r.history[-1]["step"] == 8
    assert all(not torch.equal(a, b) for a, b in zip(before, net.parameters()))


def test_training_autograd_restores_the_callers_mode():
    with torch.inference_mode():
        with training_autograd():
            assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        assert torch.is_inference_mode_enabled() and not torch.is_grad_enabled()
