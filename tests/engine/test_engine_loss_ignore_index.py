"""A loss of the user's own with an ``ignore_index`` other than -100 (VOC's 255 for void pixels, a padding id):
the targets it leaves out of the loss are left out of accuracy and kappa too, in ``fit`` and ``evaluate``, as a
PyTorch loop that scores ``pred[y != 255] == y[y != 255]`` counts them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from zoo.engine import evaluate, fit

VOID = 255


def _segmentation() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    net = nn.Conv2d(3, 4, 1)  # per-pixel scores of 4 classes
    x = torch.randn(10, 3, 5, 5)
    y = torch.randint(0, 4, (10, 5, 5))
    y[:, 0, :] = VOID  # a void border, as VOC's masks have
    return net, x, y


def _labelled(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        pred = net(x).argmax(1)
    keep = y != VOID
    return y[keep].numpy(), pred[keep].numpy()


def test_evaluate_leaves_the_losss_ignore_index_out_of_accuracy_and_kappa():
    from sklearn.metrics import accuracy_score, cohen_kappa_score

    net, x, y = _segmentation()
    loss_fn = nn.CrossEntropyLoss(ignore_index=VOID)
    out = evaluate(net, (x, y), loss_fn=loss_fn, metrics=("accuracy", "kappa"), amp=None, batch_size=4)
    truth, pred = _labelled(net, x, y)
    assert out["accuracy"] == pytest.approx(accuracy_score(truth, pred))  # was 0.18: void counted as wrong
    assert out["kappa"] == pytest.approx(cohen_kappa_score(truth, pred))  # was refused: "targets must lie in [0, 4)"
    with torch.no_grad():
        assert out["loss"] == pytest.approx(loss_fn(net(x), y).item(), rel=1e-6)


def test_fit_leaves_the_losss_ignore_index_out_of_train_and_val_accuracy():
    from sklearn.metrics import accuracy_score

    net, x, y = _segmentation()
    r = fit(net, (x, y), (x, y), epochs=1, batch_size=4, optimizer="sgd", lr=0.0, amp=None, channels_last=False,
            loss_fn=nn.NLLLoss(ignore_index=VOID), forward_fn=lambda m, b: (m(b[0]).log_softmax(1), b[1]),
            metrics=("accuracy",), progress=False)
    expected = accuracy_score(*_labelled(net, x, y))  # lr=0: the weights the training batches were scored with
    assert r.history[0]["train_accuracy"] == pytest.approx(expected)
    assert r.history[0]["val_accuracy"] == pytest.approx(expected)
