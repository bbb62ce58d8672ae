"""What a Keras or Lightning user meets with their own models: accuracy of a one-output
binary model and of multi-hot targets refused instead of wrong, error metrics monitored for their minimum, the
default monitor beside an eval_fn alone, a LambdaCallback's own keys, ReduceLROnPlateau, top-K checks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import zoo
from zoo.engine import LambdaCallback, fit

X = torch.randn(200, 6, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] > 0.5).long()
QUIET = {"amp": None, "progress": False}


def _bce(outputs, y):
    return F.binary_cross_entropy_with_logits(outputs.squeeze(1), y.float())


def test_accuracy_of_one_output_per_sample_is_refused_at_the_first_batch_not_the_share_of_class_0():
    """train/val accuracy read argmax over one column (always class 0): 0.72, the share of class 0, for a model
    right 0.995 of the time; kappa failed 'targets must lie in [0, 1)'."""
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))
    said = r"the model gives 1 output per sample \(outputs \(32, 1\)\): for a binary classifier with one logit"
    with pytest.raises(ValueError, match=said):
        zoo.train(model, (X, Y), val_data=(X, Y), loss_fn=_bce, metrics=("accuracy",), epochs=1, batch_size=32, **QUIET)
    with pytest.raises(ValueError, match="the model gives 1 output per sample"):
        zoo.evaluate(model, (X, Y), loss_fn=_bce, metrics=("kappa",), batch_size=32)
    assert set(zoo.evaluate(model, (X, Y), loss_fn=_bce, metrics=())) == {"loss"}  # without metrics: fine


def test_accuracy_of_multi_hot_targets_is_refused_and_soft_labels_are_still_taken():
    """Multi-hot targets (multi-label) were scored by the argmax of each row: 0.53 where element-wise accuracy
    was 0.92."""
    model = nn.Linear(6, 4)
    multi_hot = (X[:, :4] > 0).float()
    with pytest.raises(ValueError, match="these targets are multi-hot"):
        zoo.evaluate(model, (X, multi_hot), loss_fn=F.binary_cross_entropy_with_logits, metrics=("accuracy",))
    batches = []
    count = LambdaCallback(on_batch_end=lambda state, logs: batches.append(1))
    with pytest.raises(ValueError, match="these targets are multi-hot"):  # at the first batch, not after an epoch
        fit(model, (X, multi_hot), (X, multi_hot), loss_fn=F.binary_cross_entropy_with_logits, metrics=("accuracy",),
            batch_size=20, epochs=1, callbacks=[count], **QUIET)
    assert not batches
    soft = torch.softmax(torch.randn(200, 4), 1)  # mixup / distillation: rows summing to 1
    assert 0.0 <= zoo.evaluate(model, (X, soft), loss_fn=F.cross_entropy, metrics=("accuracy",))["accuracy"] <= 1.0


def test_an_error_metric_is_monitored_for_its_minimum_by_default():
    """monitor='val_mae' kept the epoch of the largest error in best.pt (mode max for every name without 'loss')."""
    from zoo.engine.monitor import default_mode

    assert [default_mode(k) for k in ("val_loss", "val_mae", "train_error_rate", "val_rmse", "val_perplexity",
                                      "val_accuracy", "val_bleu", "eval_return_mean", "val_kappa")] == \
        ["min"] * 5 + ["max"] * 4
    x = torch.randn(200, 5, generator=torch.Generator().manual_seed(1))
    y = x @ torch.randn(5, 1, generator=torch.Generator().manual_seed(2))

    def mae(model, _):
        with torch.no_grad():
            return {"mae": float((model(x[:50]) - y[:50]).abs().mean())}

    torch.manual_seed(0)
    r = fit(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1)), (x, y), (x[:50], y[:50]), epochs=5,
            loss_fn=F.mse_loss, eval_fn=mae, monitor="val_mae", lr=0.01, **QUIET)
    maes = [row["val_mae"] for row in r.history]
    assert r.best_metric == min(maes) and r.best_epoch == maes.index(min(maes)) + 1


def test_an_eval_fn_without_validation_data_monitors_train_loss_and_a_lambda_callbacks_key_may_be_monitored():
    """fit(eval_fn=...) without val_data failed after the first epoch: "monitor='val_loss' is not in the epoch's
    metrics"; a LambdaCallback adding val_score was refused before training ('this run has no validation data')
    where a Callback subclass doing the same was taken."""
    model = nn.Linear(6, 2)
    r = fit(model, (X, Y), eval_fn=lambda m, d: {"score": 0.5}, epochs=2, **QUIET)
    assert r.monitor == "train_loss" and r.history[-1]["val_score"] == 0.5
    add = LambdaCallback(on_epoch_end=lambda state, row: row.update(val_score=float(state.epoch)))
    r = fit(model, (X, Y), epochs=2, monitor="val_score", callbacks=[add], **QUIET)
    assert r.best_epoch == 2 and r.best_metric == 1.0


def test_reduce_lr_on_plateau_steps_on_the_monitored_value_once_an_epoch():
    """Its step() was called after every batch without a metric: 'missing 1 required positional argument'."""
    torch.manual_seed(0)
    plateau = [None]

    def schedule(optimizer, total_steps, steps_per_epoch):
        plateau[0] = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, factor=0.5)
        return plateau[0]

    r = zoo.train(nn.Linear(6, 2), (X, Y), val_data=(X[:50], Y[:50]), schedule=schedule, epochs=6, lr=1.0, **QUIET)
    losses, lrs = [row["val_loss"] for row in r.history], [row["lr"] for row in r.history]
    expected, lr, best = [], 1.0, float("inf")
    for loss in losses:  # the scheduler's rule, replayed on the rows: halve after an epoch without improvement
        expected.append(lr)
        if loss < best * (1 - 1e-4):
            best = loss
        else:
            lr *= 0.5
    assert lrs == expected and min(lrs) < 1.0  # it did halve in these 6 epochs


def test_top_k_needs_k_of_at_least_one_and_warns_where_k_exceeds_the_classes():
    """'top0' was taken and scored 0.0; 'top5' of a 3-class model was 1.0 without a word."""
    with pytest.raises(ValueError, match="'top0': a top-K accuracy needs K >= 1"):
        zoo.evaluate(nn.Linear(6, 3), (X, Y), metrics=("top0",))
    with pytest.warns(UserWarning, match="top7 of a model with 3 outputs is 1.0 whatever it predicts"):
        assert zoo.evaluate(nn.Linear(6, 3), (X, Y), metrics=("top7",))["top7"] == 1.0


def test_evaluate_with_a_per_sample_loss_says_what_fit_says():
    """zoo.evaluate with loss_fn=CrossEntropyLoss(reduction='none') failed "output with shape [] doesn't match the
    broadcast shape [40]"; fit names the mistake."""
    said = r"loss_fn must return the loss as a one-value tensor .* got a tensor of shape \(40,\)"
    with pytest.raises(TypeError, match=said):
        zoo.evaluate(nn.Linear(6, 2), (X[:40], Y[:40]), loss_fn=nn.CrossEntropyLoss(reduction="none"), batch_size=40)
    with pytest.raises(TypeError, match=said):
        zoo.train(nn.Linear(6, 2), (X[:40], Y[:40]), loss_fn=nn.CrossEntropyLoss(reduction="none"), epochs=1,
                  batch_size=40, **QUIET)


def test_x_y_and_sample_weights_are_refused_as_what_they_are():
    """(X, y, w), as Keras' fit takes sample weights, was read as a data set of three samples and failed in
    torch's collate ('stack expects each tensor to be equal size')."""
    with pytest.raises(TypeError, match=r"expected \(X, y\); got a tuple of 3 arrays of 200 rows: sample weights"):
        zoo.train(nn.Linear(6, 2), (X, Y, torch.ones(200)), epochs=1, **QUIET)
    with pytest.raises(TypeError, match=r"expected \(X, y\); got a list of 3 arrays"):
        zoo.train(nn.Linear(6, 2), [X, Y, torch.ones(200)], epochs=1, **QUIET)


def test_reduce_lr_on_plateau_resumes_with_more_epochs_and_must_share_the_monitors_mode(tmp_path):
    """A resume with another epochs failed 'NotImplementedError' (realign_schedule called its get_lr()); a
    ReduceLROnPlateau of mode 'min' on val_accuracy cut the lr on every epoch the accuracy improved."""
    def schedule(optimizer, total_steps, steps_per_epoch):
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, factor=0.5)

    run = {"val_data": (X[:50], Y[:50]), "schedule": schedule, "lr": 1.0, **QUIET}
    torch.manual_seed(0)
    model = nn.Linear(6, 2)
    zoo.train(model, (X, Y), epochs=3, checkpoint_dir=str(tmp_path), **run)
    resumed = zoo.train(model, (X, Y), epochs=5, checkpoint_dir=str(tmp_path), resume=True, **run)
    torch.manual_seed(0)
    whole = nn.Linear(6, 2)
    straight = zoo.train(whole, (X, Y), epochs=5, **run)
    assert [r["lr"] for r in resumed.history] == [r["lr"] for r in straight.history]
    assert torch.equal(model.weight, whole.weight)
    with pytest.raises(ValueError, match=r"ReduceLROnPlateau\(mode='min'\) steps on monitor='val_accuracy', which "
                                         r"improves as it goes up: make it with mode='max'"):
        zoo.train(nn.Linear(6, 2), (X, Y), monitor="val_accuracy", epochs=1, **run)


def test_an_eval_fn_that_gives_a_loss_is_monitored_on_it_and_a_run_that_fell_back_resumes(tmp_path):
    """The fallback to train_loss for an eval_fn without val_data took over an eval_fn that returns 'loss' too."""
    def with_loss(model, _):
        with torch.no_grad():
            return {"loss": float(F.cross_entropy(model(X), Y))}

    assert fit(nn.Linear(6, 2), (X, Y), eval_fn=with_loss, epochs=2, **QUIET).monitor == "val_loss"
    model = nn.Linear(6, 2)
    fit(model, (X, Y), eval_fn=lambda m, d: {"score": 0.5}, epochs=2, checkpoint_dir=str(tmp_path), **QUIET)
    again = fit(model, (X, Y), eval_fn=lambda m, d: {"score": 0.5}, epochs=3, checkpoint_dir=str(tmp_path),
                resume=True, **QUIET)
    assert again.monitor == "train_loss" and len(again.history) == 3


def test_keras_and_scikit_learn_metric_names_get_their_direction():
    from zoo.engine.monitor import default_mode

    assert [default_mode(k) for k in ("val_binary_crossentropy", "val_kl_divergence", "val_hinge",
                                      "val_neg_mean_squared_error", "val_terror_rate")] == \
        ["min", "min", "min", "max", "max"]


def test_a_tuple_of_sample_tensors_stays_a_data_set():
    """The (X, y, w) refusal took a tuple of five 8-value samples for weights (it trained before)."""
    r = fit(nn.Linear(8, 8), tuple(torch.randn(8) for _ in range(5)), forward_fn=lambda m, b: (m(b), b),
            loss_fn=F.mse_loss, epochs=1, **QUIET)
    assert len(r.history) == 1


def test_one_hot_integer_labels_train_and_score_as_their_classes():
    """Keras' categorical labels (to_categorical, OneHotEncoder: integer one-hot rows) failed the default loss with
    torch's 'Expected floating point type for target with class probabilities, got Long'."""
    labels = (X[:, 0] > 0.3).long() + (X[:, 1] > 0).long()
    one_hot = F.one_hot(labels, 3)
    torch.manual_seed(0)
    by_index = nn.Linear(6, 3)
    a = zoo.train(by_index, (X, labels), val_data=(X, labels), epochs=2, **QUIET)
    torch.manual_seed(0)
    by_one_hot = nn.Linear(6, 3)
    b = zoo.train(by_one_hot, (X, one_hot), val_data=(X, one_hot), epochs=2, **QUIET)
    assert torch.equal(by_index.weight, by_one_hot.weight)
    for key in ("train_accuracy", "val_accuracy"):
        assert a.history[-1][key] == b.history[-1][key]
    assert b.history[-1]["val_loss"] == pytest.approx(a.history[-1]["val_loss"], rel=1e-6)
    assert zoo.evaluate(by_one_hot, (X, one_hot))["accuracy"] == zoo.evaluate(by_index, (X, labels))["accuracy"]
