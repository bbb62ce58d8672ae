"""Metrics against hand-computed values (and scikit-learn where it has the same metric)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.engine import evaluate, metrics


def test_topk_accuracy_by_hand():
    scores = torch.tensor([[0.1, 0.5, 0.4], [0.7, 0.2, 0.1], [0.2, 0.3, 0.5], [0.35, 0.4, 0.25]])
    y = torch.tensor([2, 0, 0, 0])
    # top-1: 1, 0, 2, 1 -> only sample 1 right; top-2 sets {1,2}, {0,1}, {2,1}, {1,0} -> sample 2 missed
    assert metrics.accuracy(scores, y) == 0.25
    assert metrics.topk_accuracy(scores, y, k=1) == 0.25
    assert metrics.topk_accuracy(scores, y, k=2) == 0.75
    assert metrics.topk_accuracy(scores, y, k=3) == 1.0
    with pytest.raises(ValueError, match="k must be in"):
        metrics.topk_accuracy(scores, y, k=4)


def test_confusion_matrix_recall_oa_aa_kappa_by_hand():
    y = [0, 0, 0, 1, 1, 2, 2, 2, 2, -100]
    p = [0, 0, 1, 1, 0, 2, 2, 1, 2, 1]  # the last target is ignored
    cm = metrics.confusion_matrix(p, y, num_classes=4)
    expected = np.array([[2, 1, 0, 0], [1, 1, 0, 0], [0, 1, 3, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(cm, expected)
    recall = metrics.per_class_recall(cm)
    np.testing.assert_allclose(recall[:3], [2 / 3, 1 / 2, 3 / 4])
    assert np.isnan(recall[3])  # class 3 never occurs
    assert metrics.overall_accuracy(cm) == pytest.approx(6 / 9)
    assert metrics.average_accuracy(cm) == pytest.approx((2 / 3 + 1 / 2 + 3 / 4) / 3)
    # kappa by hand: p_o = 6/9; row sums 3,2,4; column sums 3,3,3 -> p_e = (9 + 6 + 12) / 81
    p_e = 27 / 81
    assert metrics.cohen_kappa(cm) == pytest.approx((6 / 9 - p_e) / (1 - p_e))
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    yy, pp = np.array(y[:-1]), np.array(p[:-1])
    np.testing.assert_array_equal(cm[:3, :3], confusion_matrix(yy, pp))
    assert metrics.cohen_kappa(cm) == pytest.approx(cohen_kappa_score(yy, pp))
    report = metrics.classification_report(torch.tensor(p), torch.tensor(y), num_classes=4)
    assert report["kappa"] == pytest.approx(metrics.cohen_kappa(cm))


def test_scores_with_extra_dims_and_bad_input():
    # (B, C, T) scores with (B, T) targets, like CrossEntropyLoss on sequences
    scores = torch.zeros(2, 3, 2)
    scores[0, 1, 0] = scores[0, 2, 1] = scores[1, 0, 0] = scores[1, 0, 1] = 1
    y = torch.tensor([[1, 2], [0, -100]])
    assert metrics.accuracy(scores, y) == 1.0
    with pytest.raises(TypeError, match="integer"):
        metrics.accuracy(scores, y.float())
    with pytest.raises(ValueError, match="do not match"):
        metrics.accuracy(torch.zeros(3, 2), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="square"):
        metrics.per_class_recall(np.zeros((2, 3)))


def test_evaluate_reports_the_same_metrics():
    torch.manual_seed(0)
    x = torch.randn(50, 4)
    y = torch.randint(0, 4, (50,))
    model = torch.nn.Linear(4, 4)
    out = evaluate(model, (x, y), batch_size=16, amp=None,  # fp32, like the reference below
                   metrics=("accuracy", "top2", "kappa", "average_accuracy", "per_class_recall"))
    with torch.no_grad():
        scores = model(x)
    cm = metrics.confusion_matrix(scores, y)
    assert out["accuracy"] == pytest.approx(metrics.accuracy(scores, y))
    assert out["top2"] == pytest.approx(metrics.topk_accuracy(scores, y, k=2))
    assert out["kappa"] == pytest.approx(metrics.cohen_kappa(cm))
    assert out["average_accuracy"] == pytest.approx(metrics.average_accuracy(cm))
    assert out["recall_2"] == pytest.approx(metrics.per_class_recall(cm)[2])
    assert out["loss"] == pytest.approx(torch.nn.functional.cross_entropy(scores, y).item(), rel=1e-5)


def test_plot_confusion_matrix(tmp_path):
    path = metrics.plot_confusion_matrix(np.array([[3, 1], [0, 2]]), tmp_path / "cm.png", class_names=["a", "b"])
    assert path.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("n", [3, 1000])
def test_a_confusion_matrix_of_many_classes_is_drawn_with_index_ticks(tmp_path, monkeypatch, n):
    """A 1000-class model's report drew a tick label per class on both axes (2,000 unreadable labels) and took
    36 s on a slow CPU (zoo finetune's report for a model built with ImageNet's head)."""
    from zoo.engine import logs

    real, drawn = logs.atomic_savefig, {}

    def keep_labels(fig, path):
        fig.canvas.draw()
        ax = fig.axes[0]
        drawn.update(x=[t.get_text() for t in ax.get_xticklabels()], y=[t.get_text() for t in ax.get_yticklabels()],
                     xlabel=ax.get_xlabel())
        return real(fig, path)

    monkeypatch.setattr(logs, "atomic_savefig", keep_labels)
    cm = np.eye(n, dtype=np.int64) * 2
    names = [f"class-{i}" for i in range(n)]
    path = metrics.plot_confusion_matrix(cm, tmp_path / "cm.png", class_names=names)
    assert path.read_bytes().startswith(b"\x89PNG")
    if n <= metrics.MAX_LABELLED_CLASSES:
        assert drawn["x"] == names and drawn["y"] == names and drawn["xlabel"] == "predicted"
    else:
        assert 2 <= len(drawn["y"]) <= 12 and not any(s.startswith("class-") for s in drawn["x"] + drawn["y"])
        assert drawn["xlabel"] == "predicted (class index)"


def test_probabilities_given_as_predictions_are_refused_not_truncated():
    targets = torch.tensor([1, 0, 1])
    # one probability per sample used to become class 0 everywhere (.long() truncates): accuracy 1/3, silently
    with pytest.raises(ValueError, match=r"non-integer values \(e\.g\. 0\.9\).*expected class indices"):
        metrics.accuracy(torch.tensor([0.9, 0.2, 0.7]), targets)
    with pytest.raises(ValueError, match="non-integer"):
        metrics.confusion_matrix(np.array([0.9, 0.2, 0.7]), targets)
    assert metrics.accuracy(torch.tensor([1.0, 0.0, 0.0]), targets) == pytest.approx(2 / 3)  # whole floats: indices


def test_a_batch_with_every_target_ignored_does_not_make_the_loss_nan():
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x, y = torch.randn(8, 3), torch.tensor([0, 1, 0, 1, -100, -100, -100, -100])
    model = torch.nn.Linear(3, 2)
    both = evaluate(model, DataLoader(TensorDataset(x, y), batch_size=4))
    scored = evaluate(model, DataLoader(TensorDataset(x[:4], y[:4]), batch_size=4))
    assert both["loss"] == pytest.approx(scored["loss"]) and both["accuracy"] == scored["accuracy"]


def test_one_metric_named_alone_is_that_metric_not_its_letters():
    """metrics="kappa" (as scikit-learn's scoring=) failed with "unknown metric 'k'"."""
    torch.manual_seed(0)
    x, y = torch.randn(20, 4), torch.randint(0, 3, (20,))
    model = torch.nn.Linear(4, 3)
    alone = evaluate(model, (x, y), amp=None, metrics="kappa")
    assert alone == evaluate(model, (x, y), amp=None, metrics=("kappa",)) and set(alone) == {"loss", "kappa"}


def test_kappa_of_one_class_everywhere_is_nan_as_scikit_learns_and_never_the_best_epoch(tmp_path):
    """Before: cohen_kappa gave 1.0 where every target and prediction is one class (0/0; scikit-learn: NaN), so
    a validation set of one class made the first epoch of a model that predicts it the best one."""
    import warnings

    from sklearn.metrics import cohen_kappa_score
    from torch import nn

    from zoo.engine import fit

    zeros = np.zeros(6, dtype=int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn says it is undefined
        assert np.isnan(cohen_kappa_score(zeros, zeros))
    assert np.isnan(metrics.cohen_kappa(metrics.confusion_matrix(zeros, zeros)))
    net = nn.Linear(4, 3)
    with torch.no_grad():
        net.bias.copy_(torch.tensor([100.0, 0.0, 0.0]))  # predicts class 0, whatever the input
    x, y = torch.randn(8, 4), torch.zeros(8, dtype=torch.long)
    with pytest.warns(UserWarning, match=r"val_kappa is nan at epoch 1: .*kappa where every target and prediction "
                                         r"is one class"):
        result = fit(net, (x, y), (x, y), epochs=2, batch_size=4, lr=0.0, progress=False, metrics=("kappa",),
                     monitor="val_kappa", checkpoint_dir=tmp_path)
    assert result.best_epoch is None and not (tmp_path / "best.pt").exists()
