"""eval_mode: every layer gets its own flag back, and overlapping blocks in threads leave the model in eval
mode until the last one ends."""

from __future__ import annotations

import threading

import torch
from torch import nn

import zoo
from zoo.engine.modes import eval_mode


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
