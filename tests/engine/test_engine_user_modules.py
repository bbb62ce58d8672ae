"""fit / evaluate / predict on a user's own modules, as a Lightning or Keras user writes them: each case here
failed late (after an epoch), silently, or in PyTorch's words naming neither the option nor the fix."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from zoo.engine import evaluate, fit
from zoo.engine.evaluation import predict_outputs

KW = {"epochs": 1, "batch_size": 4, "progress": False, "amp": None}


def _xy(n=12, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randint(0, k, (n,), generator=g)


def test_a_second_run_in_a_used_checkpoint_dir_is_refused_not_mixed_with_the_first(tmp_path):
    """keep_last pruned the new run's epoch-0001.pt before the old run's later epochs, and resume=True then
    took up the old run's last epoch under the new run's lr."""
    fit(nn.Linear(4, 3), _xy(), **{**KW, "epochs": 3}, checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match=r"holds another run's checkpoints \(epoch-0003.pt, best.pt\): resume=True"):
        fit(nn.Linear(4, 3), _xy(), **KW, lr=0.05, checkpoint_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["best.pt", "epoch-0002.pt", "epoch-0003.pt"]
    assert fit(nn.Linear(4, 3), _xy(), **{**KW, "epochs": 4}, checkpoint_dir=tmp_path, resume=True).resumed


def test_a_loss_of_your_own_scores_no_accuracy_unless_asked(tmp_path):
    """A regression with loss_fn=mse_loss and val_data failed after its first epoch: accuracy, the default
    metric, needs class targets. Soft labels under the default loss are scored against their top class."""
    x, y = torch.randn(12, 4), torch.randn(12, 1)
    row = fit(nn.Linear(4, 1), (x, y), (x, y), **KW, loss_fn=F.mse_loss).history[-1]
    assert "val_loss" in row and "val_accuracy" not in row
    assert set(evaluate(nn.Linear(4, 1), (x, y), loss_fn=F.mse_loss)) == {"loss"}
    with pytest.raises(TypeError, match="classification metrics need"):  # asked for: still an error
        evaluate(nn.Linear(4, 1), (x, y), loss_fn=F.mse_loss, metrics=("accuracy",))
    soft = torch.softmax(torch.randn(12, 3), 1)
    assert 0.0 <= evaluate(nn.Linear(4, 3), (x, soft))["accuracy"] <= 1.0


def test_keras_style_labels_of_shape_n_by_1_train_and_score():
    """(N, 1) integer labels failed in cross_entropy with "0D or 1D target tensor expected"."""
    x, y = _xy()
    net = nn.Linear(4, 3)
    row = fit(net, (x, y[:, None]), (x, y[:, None]), **KW).history[-1]
    assert "val_accuracy" in row and "train_accuracy" in row  # the training accuracy was dropped without a word
    assert evaluate(net, (x, y[:, None])) == evaluate(net, (x, y))
    torch.manual_seed(0)
    flat = fit(nn.Linear(4, 3), (x, y), (x, y), **KW).history[-1]
    torch.manual_seed(0)
    keras = fit(nn.Linear(4, 3), (x, y[:, None]), (x, y[:, None]), **KW).history[-1]
    assert keras["train_accuracy"] == flat["train_accuracy"]


def test_batchnorm_meeting_a_one_sample_batch_names_drop_last():
    """13 samples at batch_size 4 leave a last batch of 1: torch's "Expected more than 1 value per channel
    when training" named neither the batch nor the fix."""
    x, y = _xy(13)
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    with pytest.raises(ValueError, match=r"one sample reached a BatchNorm layer .*batch_size=4\): pass drop_last=True"):
        fit(net, (x, y), **KW)
    assert fit(net, (x, y), **KW, drop_last=True).history[-1]["step"] == 3


def test_a_loss_that_is_no_tensor_a_frozen_model_and_a_misspelled_option_say_so():
    x, y = _xy()
    with pytest.raises(TypeError, match=r"loss_fn must return the loss as a one-value tensor .*got float"):
        fit(nn.Linear(4, 3), (x, y), **KW, loss_fn=lambda o, t: float(F.cross_entropy(o, t).detach()))
    with pytest.raises(TypeError, match=r"got a tensor of shape \(4,\)"):
        fit(nn.Linear(4, 3), (x, y), **KW, loss_fn=lambda o, t: F.cross_entropy(o, t, reduction="none"))
    with pytest.raises(ValueError, match="the model has no parameter to train"):
        fit(nn.Linear(4, 3).requires_grad_(False), (x, y), **KW)
    with pytest.raises(ValueError, match=r"SGD \(optimizer='sgd'\) takes no 'momentumm' \(did you mean 'momentum'"):
        fit(nn.Linear(4, 3), (x, y), **KW, optimizer="sgd", optimizer_options={"momentumm": 0.9})


def test_a_non_finite_val_loss_says_so_and_the_stop_reason_says_there_was_no_best():
    x, y = _xy()
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.warns(UserWarning, match=r"val_loss is nan at epoch 1: not a number that can improve"):
        result = fit(nn.Linear(4, 3), (x, y), (bad, y), **{**KW, "epochs": 3}, early_stopping_patience=2)
    assert result.best_metric is None and result.stopped_early


def test_evaluate_on_nothing_is_an_error_not_nan():
    with pytest.raises(ValueError, match="no samples to score"):
        evaluate(nn.Linear(4, 3), TensorDataset(torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)))


class _TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(3, 2), nn.Linear(4, 2)

    def forward(self, xa, xb):
        return self.a(xa) + self.b(xb)


class _Samples(Dataset):
    def __init__(self, form: str) -> None:
        self.form = form

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        xa, xb = torch.randn(3, generator=g), torch.randn(4, generator=g)
        return {"tuple": ((xa, xb), i % 2), "dict": {"xa": xa, "xb": xb, "label": i % 2},
                "inputs": {"xa": xa, "xb": xb}}[self.form]


def test_predict_passes_a_data_sets_inputs_as_fit_does():
    """((xa, xb), y) samples trained, and predict called model((xa, xb)): "missing 1 required positional
    argument"; dict samples were refused ("call the model on them yourself")."""
    net = _TwoInputs()
    fit(net, _Samples("tuple"), **KW)
    out = predict_outputs(net, _Samples("tuple"))
    assert out.shape == (6, 2)
    assert torch.equal(predict_outputs(net, _Samples("dict")), out)
    assert torch.equal(predict_outputs(net, _Samples("inputs")), out)


class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        x, y = _xy()
        return iter(zip(x, y))


def test_a_streaming_data_set_takes_a_warmup_and_onecycle_says_when_the_warmup_is_too_long():
    """warmup_steps alone (or inverse_sqrt) on an IterableDataset was refused, "a schedule needs the number of
    batches per epoch", though neither needs it; onecycle with more warmup than steps failed in OneCycleLR
    ("Expected float between 0 and 1 pct_start, but got 14.28")."""
    for schedule in (None, "inverse_sqrt"):
        assert fit(nn.Linear(4, 3), _Stream(), **KW, warmup_steps=2, schedule=schedule).history[-1]["step"] == 3
    with pytest.raises(ValueError, match=r"schedule='cosine' runs over the run's length, .*has no len\(\)"):
        fit(nn.Linear(4, 3), _Stream(), **KW, schedule="cosine")
    with pytest.raises(ValueError, match=r"warmup_steps=10 is not below the run's 3 optimizer steps"):
        fit(nn.Linear(4, 3), _xy(), **KW, schedule="onecycle", warmup_steps=10)


def test_a_resume_with_no_epochs_left_says_nothing_is_trained(tmp_path):
    """resume=True with epochs not above the checkpoint's returned the old run's history without a word."""
    fit(nn.Linear(4, 3), _xy(), **{**KW, "epochs": 2}, checkpoint_dir=tmp_path)
    with pytest.warns(UserWarning, match=r"epoch-0002.pt has 2 epochs done and epochs=2: nothing is trained; .*"
                                         r"epochs > 2"):
        result = fit(nn.Linear(4, 3), _xy(), **{**KW, "epochs": 2}, checkpoint_dir=tmp_path, resume=True)
    assert len(result.history) == 2


def test_dict_samples_with_a_key_forward_does_not_take_train_and_say_which_once():
    """A dict sample with an "idx" column failed with "forward() got an unexpected keyword argument 'idx'";
    Hugging Face's Trainer drops unused columns."""
    import warnings

    class _WithIdx(_Samples):
        def __getitem__(self, i: int):
            return {**super().__getitem__(i), "idx": i}

    net = _TwoInputs()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fit(net, _WithIdx("dict"), **{**KW, "epochs": 2})
        out = predict_outputs(net, _WithIdx("dict"))
    said = [str(w.message) for w in seen if "takes no 'idx'" in str(w.message)]
    assert len(said) == 1 and "it takes xa, xb" in said[0]
    assert torch.equal(out, predict_outputs(net, _Samples("dict")))


def test_a_ready_optimizer_says_which_given_settings_it_does_not_apply():
    """fit(..., optimizer=torch.optim.SGD(params, lr=0.05), lr=0.01) ran at 0.05 without a word."""
    import warnings

    x, y = _xy()
    net = nn.Linear(4, 3)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    with pytest.warns(UserWarning, match=r"ready SGD, which keeps its own settings: lr=0.01 \(it runs at lr=0.05\)"):
        fit(net, (x, y), **KW, optimizer=opt, lr=0.01)
    assert opt.param_groups[0]["lr"] == 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its own settings and fit's defaults: nothing to say
        fit(net, (x, y), **KW, optimizer=opt)
        fit(net, (x, y), **KW, optimizer=opt, lr=0.05)


def test_the_fixes_the_messages_name_run_as_written():
    """Each hint applied as written: a ready Adagrad's warning named optimizer='adagrad' (refused: 'unknown
    optimizer'); the 1-output hint named binary_cross_entropy_with_logits, which fails on (N,) int labels
    against (N, 1) outputs ('Target size ... must be the same as input size')."""
    x, y = _xy()
    net = nn.Linear(4, 3)
    opt = torch.optim.Adagrad(net.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match=r"or pass optimizer=torch\.optim\.Adagrad \(the class, not an instance\)"):
        fit(net, (x, y), **KW, optimizer=opt, lr=0.01)
    assert fit(nn.Linear(4, 3), (x, y), **KW, optimizer=torch.optim.Adagrad, lr=0.01).history[0]["lr"] == 0.01

    binary = (y > 0).long()
    with pytest.raises(ValueError, match="1 output per sample") as err:
        fit(nn.Linear(4, 1), (x, binary), **KW)
    hint = str(err.value).split("(or loss_fn=", 1)[1].rsplit(")", 1)[0]
    assert fit(nn.Linear(4, 1), (x, binary), **KW, loss_fn=eval(hint, {"torch": torch})).history


def test_a_validation_metric_to_monitor_without_validation_data_is_refused_before_training(tmp_path):
    """monitor='val_accuracy' without val_data failed at the first epoch's end, that epoch lost."""
    trained = []
    with pytest.raises(ValueError, match=r"monitor='val_accuracy' is a validation metric, and this run has no "
                                         r"validation data: pass val_data= .*'train_accuracy'"):
        fit(nn.Linear(4, 3), _xy(), **KW, monitor="val_accuracy",
            forward_fn=lambda m, b: trained.append(1) or (m(b[0]), b[1]))
    assert not trained
    x, y = _xy()
    assert fit(nn.Linear(4, 3), (x, y), (x, y), **KW, monitor="val_accuracy").monitor == "val_accuracy"


def test_a_validation_metric_not_asked_for_names_metrics_and_overall_accuracy_is_one():
    """monitor='val_kappa' with validation data said "there is no validation data"-like hints (RestoreBest:
    "give validation data"), where validation ran and records only the metrics named; HybridSN's evaluate
    reports overall_accuracy, a name metrics= refused."""
    from zoo.engine.callbacks import RestoreBest

    x, y = _xy()
    fix = r"validation records the metrics named in metrics= \(metrics=\('accuracy', 'kappa'\) records 'val_kappa'\)"
    with pytest.raises(ValueError, match=r"monitor='val_kappa' is not in the epoch's metrics .*" + fix):
        fit(nn.Linear(4, 3), (x, y), (x, y), **KW, monitor="val_kappa")
    with pytest.raises(KeyError, match=fix):
        fit(nn.Linear(4, 3), (x, y), (x, y), **KW, callbacks=[RestoreBest("val_kappa")])
    row = fit(nn.Linear(4, 3), (x, y), (x, y), **KW, monitor="val_overall_accuracy",
              metrics=("overall_accuracy", "kappa")).history[-1]
    assert "val_kappa" in row and 0.0 <= row["val_overall_accuracy"] <= 1.0
    assert 0.0 <= row["train_overall_accuracy"] <= 1.0  # counted in training as accuracy is
    with pytest.raises(ValueError, match=r"unknown metric 'f1'.*or monitor a key the row has"):  # none fit knows
        fit(nn.Linear(4, 3), (x, y), (x, y), **KW, monitor="val_f1")
    net = nn.Linear(4, 3)
    scores = evaluate(net, (x, y), metrics=("accuracy", "overall_accuracy"))
    assert scores["overall_accuracy"] == scores["accuracy"]


def test_weight_decay_or_lr_in_optimizer_options_is_refused_naming_fits_own_option():
    """optimizer_options={'weight_decay': 0.1} made one group decayed whole, biases and norms too (fit groups
    weight_decay=), and beside weight_decay= it replaced that value without a word."""
    x, y = _xy()
    for options in ({"weight_decay": 0.1}, {"lr": 0.5, "betas": (0.9, 0.99)}):
        with pytest.raises(ValueError, match=r"optimizer_options holds (weight_decay|lr), which are fit's own options: "
                                             r"pass (weight_decay=0\.1|lr=0\.5) to fit"):
            fit(nn.Linear(4, 3), (x, y), **KW, optimizer_options=options)


def test_label_smoothing_beside_a_loss_fn_is_said_not_applied_and_a_negative_lr_names_the_option():
    """label_smoothing is the default loss's: with loss_fn it was dropped without a word; lr=-1 gave torch's
    "Invalid learning rate: -1.0", naming no option."""
    x, y = _xy()
    with pytest.warns(UserWarning, match=r"label_smoothing=0.1 is not applied: .*loss_fn is given; pass it to your "
                                         r"loss \(torch.nn.CrossEntropyLoss\(label_smoothing=0.1\)\)"):
        fit(nn.Linear(4, 3), (x, y), loss_fn=nn.CrossEntropyLoss(), label_smoothing=0.1, **KW)
    with pytest.raises(ValueError, match=r"lr must be >= 0, got -1.0"):
        fit(nn.Linear(4, 3), (x, y), lr=-1.0, **KW)


def test_a_validation_metric_not_asked_for_is_refused_before_training():
    """Before: monitor='val_kappa' with metrics=('accuracy',) was refused at the first epoch's end, after that
    whole epoch had trained, though nothing but validation (which records only the metrics named) adds keys."""
    trained = []
    x, y = _xy()
    with pytest.raises(ValueError, match=r"monitor='val_kappa' is not in the epoch's metrics validation records "
                                         r"\(val_loss, val_accuracy\): validation records the metrics named"):
        fit(nn.Linear(4, 3), (x, y), (x, y), **KW, monitor="val_kappa", metrics=("accuracy",),
            forward_fn=lambda m, b: trained.append(1) or (m(b[0]), b[1]))
    assert not trained
    row = fit(nn.Linear(4, 3), (x, y), (x, y), **KW, monitor="val_recall_2", metrics=("per_class_recall",),
              forward_fn=lambda m, b: (m(b[0]), b[1])).history[-1]  # recall_K: one per class, not refused
    assert "val_recall_2" in row


def test_an_empty_validation_set_is_refused_before_training(tmp_path):
    """Before: fit took val_data=Subset(ds, []): every val_loss and val_accuracy was NaN, the warning blamed NaN
    data or a diverged model, and early stopping ended the run after `patience` epochs, where evaluate refused
    the same set."""
    from torch.utils.data import Subset

    trained = []
    x, y = _xy()
    with pytest.raises(ValueError, match=r"val_data has no samples to score \(an empty Subset\): expected a "
                                         r"validation set of at least one sample; .*leave val_data out"):
        fit(nn.Linear(4, 3), (x, y), Subset(TensorDataset(x, y), []), **KW, early_stopping_patience=2,
            checkpoint_dir=tmp_path, forward_fn=lambda m, b: trained.append(1) or (m(b[0]), b[1]))
    assert not trained and list(tmp_path.iterdir()) == []


def test_train_accuracy_is_counted_for_soft_labels_and_refused_up_front_where_it_is_not():
    """Before: soft-label (class probability) targets got val_accuracy (their argmax) but no train_accuracy, so
    monitor='train_accuracy' failed after the first epoch, as it did with a loss_fn of your own (which records
    no accuracy unless asked); the refusal of val_accuracy there suggested metrics=('accuracy', 'accuracy')."""
    trained = []
    x, y = _xy(16)
    soft = F.one_hot(y, 3).float() * 0.8 + 0.2 / 3
    row = fit(nn.Linear(4, 3), (x, soft), (x, soft), **KW, monitor="train_accuracy", lr=0.0).history[-1]
    assert row["train_accuracy"] == pytest.approx(row["val_accuracy"])  # lr 0: the same weights scored both
    count = lambda m, b: trained.append(1) or (m(b[0]), b[1])
    with pytest.raises(ValueError, match=r"monitor='train_accuracy' is not in the epoch's metrics training records "
                                         r"\(train_loss\): training counts it when metrics= names it "
                                         r"\(metrics=\('accuracy',\) records 'train_accuracy'\)"):
        fit(nn.Linear(4, 3), (x, y), **KW, monitor="train_accuracy", loss_fn=nn.CrossEntropyLoss(), forward_fn=count)
    with pytest.raises(ValueError, match=r"monitor='train_kappa' is not in the epoch's metrics training records "
                                         r"\(train_loss, train_accuracy\): .*monitor the validation's \('val_kappa'"):
        fit(nn.Linear(4, 3), (x, y), **KW, monitor="train_kappa", forward_fn=count)
    with pytest.raises(ValueError, match=r"\(metrics=\('accuracy',\) records 'val_accuracy'\)"):
        fit(nn.Linear(4, 3), (x, y), (x, y), **KW, monitor="val_accuracy", loss_fn=nn.CrossEntropyLoss(),
            forward_fn=count)
    assert not trained
