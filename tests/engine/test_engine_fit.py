"""The training loop: learning, accumulation, clipping, AMP, NaN guard, early stopping, callbacks, logs."""

from __future__ import annotations

import csv
import math
import warnings

import pytest
import torch
from torch import nn

from zoo.engine import Callback, GradualUnfreeze, LambdaCallback, NonFiniteLossError, evaluate, fit


def xor_data(n: int = 256, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    return x, (x[:, 0] * x[:, 1] > 0).long()


def mlp(seed: int = 0, hidden: int = 32) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 2))


def test_learns_a_toy_problem():
    data = xor_data()
    result = fit(mlp(), data, xor_data(128, seed=1), epochs=25, batch_size=32, lr=1e-2, progress=False,
                 monitor="val_accuracy")
    assert result.history[-1]["val_accuracy"] > 0.9
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert result.best_epoch is not None and result.best_metric == max(r["val_accuracy"] for r in result.history)
    assert evaluate(result.model, data)["accuracy"] > 0.9


class _DictSamples(torch.utils.data.Dataset):
    """Samples as Hugging Face ``datasets`` give them: ``{input_key: x, target_key: y}``."""

    def __init__(self, data: tuple[torch.Tensor, torch.Tensor], input_key: str, target_key: str) -> None:
        self.x, self.y, self.keys = data[0], data[1], (input_key, target_key)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {self.keys[0]: self.x[i], self.keys[1]: self.y[i]}


@pytest.mark.parametrize("keys", [("pixel_values", "labels"), ("image", "label"), ("inputs", "targets")])
def test_dict_samples_with_the_hugging_face_names_train_and_evaluate(keys):
    """{"pixel_values": x, "labels": y} failed with "a dict with a 'targets' key", and a dict's one input went
    to the model as a keyword (model(pixel_values=x)), which a forward(x) refuses."""
    result = fit(mlp(), _DictSamples(xor_data(), *keys), _DictSamples(xor_data(128, seed=1), *keys), epochs=25,
                 batch_size=32, lr=1e-2, progress=False)
    assert result.history[-1]["val_accuracy"] > 0.9
    assert evaluate(result.model, _DictSamples(xor_data(), *keys))["accuracy"] > 0.9


def test_a_dict_batch_with_two_target_keys_is_refused_by_name():
    from zoo.engine.data import split_batch

    with pytest.raises(TypeError, match="holds its targets under one key; this one has labels, label"):
        split_batch({"x": torch.zeros(2), "labels": torch.zeros(2), "label": torch.zeros(2)})
    with pytest.raises(TypeError, match=r"one of the keys 'targets', 'target', 'labels', 'label', got a dict of "
                                        r"length 1 with keys 'x'"):
        split_batch({"x": torch.zeros(2)})


# 12 = two steps, the second one a half window; 6 and 10 end on a short micro-batch (4+2, 4+4 then 2)
@pytest.mark.parametrize("n", [6, 8, 10, 12])
def test_accumulation_equals_the_larger_batch(n):
    data = xor_data(n)
    # amp=None: the equality is an fp32 one (amp="auto" may pick bf16 on this CPU)
    kw = {"epochs": 1, "optimizer": "sgd", "lr": 0.5, "metrics": (), "progress": False, "seed": 3, "amp": None}
    big = fit(mlp(1), data, batch_size=8, **kw).model
    accum = fit(mlp(1), data, batch_size=4, grad_accum_steps=2, **kw).model
    plain = mlp(1)
    changed = False
    for (name, a), b, p0 in zip(big.named_parameters(), accum.parameters(), plain.parameters()):
        assert torch.allclose(a, b, atol=1e-6, rtol=0), name
        changed |= not torch.equal(a, p0)
    assert changed


def test_accumulation_weighs_micro_batches_by_scored_targets():
    # Two micro-batches of 4 samples scoring 4 and 1 targets (-100 is ignored, as padding tokens are): the step
    # must equal one batch of 8 whose mean loss is over its 5 scored targets, not the mean of the two means.
    x, y = xor_data(8)
    y = y.clone()
    y[5:] = -100
    kw = {"epochs": 1, "optimizer": "sgd", "lr": 0.5, "metrics": (), "progress": False, "seed": 3, "amp": None}
    big = fit(mlp(1), (x, y), batch_size=8, **kw).model
    accum = fit(mlp(1), (x, y), batch_size=4, grad_accum_steps=2, **kw).model
    for (name, a), b in zip(big.named_parameters(), accum.parameters()):
        assert torch.allclose(a, b, atol=1e-6, rtol=0), name


def test_a_batch_whose_targets_are_all_ignored_adds_nothing():
    # The first micro-batch scores no target (0/0 = NaN mean loss): not a diverged run; the window's step
    # equals the big batch's over its 4 scored targets.
    x, y = xor_data(8)
    y = torch.where(torch.arange(8) < 4, torch.full_like(y, -100), y)
    kw = {"epochs": 1, "optimizer": "sgd", "lr": 0.5, "metrics": (), "progress": False, "seed": 3, "amp": None}
    in_order = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    accum = fit(mlp(1), in_order, grad_accum_steps=2, **kw)
    big = fit(mlp(1), (x, y), batch_size=8, **kw)
    for (name, a), b in zip(big.model.named_parameters(), accum.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6, rtol=0), name
    assert accum.history[-1]["train_loss"] == pytest.approx(big.history[-1]["train_loss"], rel=1e-6)


class _Stream(torch.utils.data.IterableDataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __iter__(self):
        return iter(zip(self.x, self.y))


def test_accumulation_steps_on_a_loader_without_len():
    # 3 batches, windows of 2: the last window holds one batch and must still step (and equal its own batch's).
    x, y = xor_data(6)
    kw = {"epochs": 1, "optimizer": "sgd", "lr": 0.5, "metrics": (), "progress": False, "seed": 3, "amp": None}
    loader = torch.utils.data.DataLoader(_Stream(x, y), batch_size=2)
    result = fit(mlp(1), loader, grad_accum_steps=2, **kw)
    assert result.history[-1]["step"] == 2
    in_order = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=2)  # has a len()
    sized = fit(mlp(1), in_order, grad_accum_steps=2, **kw).model
    for (name, a), b in zip(sized.named_parameters(), result.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6, rtol=0), name


def test_train_loss_is_a_mean_over_samples_like_val_loss():
    # Batches of 4, 4 and 2 at a learning rate too small to move the weights: the epoch's train_loss is the
    # loss over the 10 samples (val_loss on the same data), not the mean of the three batch means.
    data = xor_data(10)
    result = fit(mlp(1), data, data, epochs=1, batch_size=4, optimizer="sgd", lr=1e-12, metrics=(),
                 progress=False, amp=None)
    row = result.history[-1]
    assert row["train_loss"] == pytest.approx(row["val_loss"], rel=1e-6)


def test_gradient_clipping_bounds_the_step():
    data = xor_data(16)
    model = mlp(2)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    fit(model, data, epochs=1, batch_size=16, optimizer="sgd", lr=1.0, clip_grad_norm=1e-3, progress=False)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.linalg.vector_norm(after - before) == pytest.approx(1e-3, rel=1e-4)


class DtypeProbe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(0)
        self.seen: list[torch.dtype] = []

    def forward(self, x):
        out = self.net(x)
        self.seen.append(out.dtype)
        return out


def test_bf16_autocast_on_cpu():
    model = DtypeProbe()
    result = fit(model, xor_data(), epochs=3, batch_size=32, lr=1e-2, amp="bf16", progress=False)
    assert set(model.seen) == {torch.bfloat16}
    assert all(math.isfinite(r["train_loss"]) for r in result.history)
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert next(model.parameters()).dtype == torch.float32  # master weights stay fp32
    with pytest.raises(ValueError, match="fp16.*CUDA"):
        fit(mlp(), xor_data(), amp="fp16", progress=False)


class NanAfter(nn.Module):
    """Gives a NaN output from its ``n``-th training call on."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.net, self.calls, self.n = mlp(0), 0, n

    def forward(self, x):
        out = self.net(x)
        if self.training:
            self.calls += 1
            if self.calls > self.n:
                out = out * float("nan")
        return out


def test_nan_loss_stops_with_step_and_last_checkpoint(tmp_path):
    # 4 batches per epoch: the 6th training batch is epoch 2, batch 1, after 5 optimizer steps.
    with pytest.raises(NonFiniteLossError) as err:
        fit(NanAfter(5), xor_data(32), epochs=3, batch_size=8, progress=False, checkpoint_dir=tmp_path)
    msg = str(err.value)
    assert "epoch 2, batch 1, optimizer step 5" in msg
    assert str(tmp_path / "epoch-0001.pt") in msg
    with pytest.raises(NonFiniteLossError, match=r"none written \(set checkpoint_dir to keep one\)"):
        fit(NanAfter(0), xor_data(32), epochs=1, batch_size=8, progress=False)
    # checkpoint_dir set, the first epoch not ended: "set checkpoint_dir" misled
    with pytest.raises(NonFiniteLossError, match=r"none written yet in .*fresh \(the first is written at the "
                                                 r"first epoch's end\)"):
        fit(NanAfter(0), xor_data(32), epochs=1, batch_size=8, progress=False, checkpoint_dir=tmp_path / "fresh")


def test_early_stopping_on_a_max_metric():
    # lr=0: nothing improves after epoch 1, so patience 2 stops after epoch 3.
    result = fit(mlp(), xor_data(64), xor_data(64, 1), epochs=10, lr=0.0, progress=False,
                 monitor="val_accuracy", early_stopping_patience=2)
    assert len(result.history) == 3 and result.stopped_early
    assert result.best_epoch == 1 and result.monitor == "val_accuracy"
    with pytest.raises(ValueError, match="monitor='val_bleu' is not in"):
        fit(mlp(), xor_data(64), xor_data(64, 1), epochs=1, progress=False, monitor="val_bleu")


def test_monitor_defaults_to_train_loss_without_validation():
    result = fit(mlp(), xor_data(64), epochs=2, lr=1e-2, progress=False)
    assert result.monitor == "train_loss"
    assert result.best_metric == min(r["train_loss"] for r in result.history)


class Recorder(Callback):
    def __init__(self) -> None:
        self.events: list[str] = []

    def on_train_start(self, state):
        self.events.append("train_start")

    def on_epoch_start(self, state):
        self.events.append(f"epoch_start{state.epoch}")

    def on_batch_end(self, state, logs):
        assert set(logs) == {"loss", "lr"}
        self.events.append(f"batch{state.epoch}.{state.batch}")

    def on_epoch_end(self, state, row):
        assert "val_loss" in row
        self.events.append(f"epoch_end{row['epoch']}")

    def on_train_end(self, state):
        self.events.append("train_end")


def test_callbacks_are_called_in_order_and_may_stop():
    rec = Recorder()
    fit(mlp(), xor_data(16), xor_data(8), epochs=2, batch_size=8, progress=False, callbacks=[rec])
    assert rec.events == ["train_start", "epoch_start0", "batch0.0", "batch0.1", "epoch_end1",
                          "epoch_start1", "batch1.0", "batch1.1", "epoch_end2", "train_end"]

    def stop(state, logs):
        if state.step == 3:
            state.request_stop("enough")

    result = fit(mlp(), xor_data(64), epochs=5, batch_size=8, progress=False,
                 callbacks=[LambdaCallback(on_batch_end=stop)])
    assert len(result.history) == 1  # stopped inside epoch 1, after its 3rd batch
    with pytest.raises(TypeError, match="Callback"):
        fit(mlp(), xor_data(8), progress=False, callbacks=[lambda s: None])


def test_callbacks_see_the_predictions_the_latest_validation_scored():
    seen = []
    val = xor_data(24, seed=1)
    result = fit(mlp(), xor_data(32), val, epochs=2, batch_size=8, progress=False, metrics=["accuracy", "top2"],
                 callbacks=[LambdaCallback(on_epoch_end=lambda state, row: seen.append(state.val_predictions))])
    assert len(seen) == 2 and seen[0] is not seen[1]
    last = seen[-1]
    assert last.top.shape == (24, 2) and last.num_classes == 2 and torch.equal(last.targets, val[1])
    with torch.no_grad():
        assert torch.equal(last.top[:, 0], result.model.eval()(val[0]).argmax(1))  # the weights the run ended with
    assert (last.top[:, 0] == last.targets).double().mean().item() == result.history[-1]["val_accuracy"]
    regression = fit(nn.Linear(2, 1), (val[0], val[1].float()[:, None]), (val[0], val[1].float()[:, None]),
                     epochs=1, progress=False, loss_fn=nn.functional.mse_loss,
                     callbacks=[LambdaCallback(on_train_end=lambda state: seen.append(state.val_predictions))])
    assert regression.history and seen[-1] is None  # no classification metrics: no predictions kept


def test_csv_and_learning_curve_png(tmp_path):
    fit(mlp(), xor_data(64), xor_data(32), epochs=3, batch_size=16, progress=False, log_dir=tmp_path,
        metrics=("accuracy", "top2"))
    with open(tmp_path / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    assert {"train_loss", "lr", "val_loss", "val_accuracy", "val_top2"} <= set(rows[0])
    png = (tmp_path / "learning_curves.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_overfit_batches_uses_a_fixed_subset_and_warns_when_it_cannot():
    seen = []

    class Spy(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(0, hidden=64)

        def forward(self, x):
            seen.append(x[0, 0].item())
            return self.net(x)

    result = fit(Spy(), xor_data(256), epochs=60, batch_size=8, lr=3e-2, overfit_batches=2, progress=False)
    assert result.history[-1]["val_loss"] < 0.1 * result.history[0]["train_loss"]
    assert len(set(seen)) == 2  # the same two batches over and over (train and validation)
    with pytest.warns(UserWarning, match="cannot overfit"):
        fit(mlp(), xor_data(64), epochs=2, batch_size=8, lr=0.0, overfit_batches=2, progress=False)
    with warnings.catch_warnings():  # one epoch cannot tell (the README's seq2seq block warned every time)
        warnings.simplefilter("error")
        fit(mlp(), xor_data(64), epochs=1, batch_size=8, lr=0.0, overfit_batches=2, progress=False)


def test_param_groups_and_gradual_unfreeze():
    model = mlp(4)
    first = model[0].weight.detach().clone()
    groups = [{"params": model[0].parameters(), "lr": 1e-3}, {"params": model[2].parameters(), "lr": 1e-2}]
    lrs: list[tuple[float, float]] = []

    def record(state, logs):
        lrs.append(tuple(g["lr"] for g in state.optimizer.param_groups))

    unfreeze = GradualUnfreeze({0: ["2"], 1: ["0"]})
    snap = {}

    def after_epoch(state, row):
        snap[row["epoch"]] = model[0].weight.detach().clone()

    fit(model, xor_data(32), epochs=2, batch_size=8, param_groups=groups, schedule="onecycle", progress=False,
        callbacks=[unfreeze, LambdaCallback(on_batch_end=record, on_epoch_end=after_epoch)])
    assert torch.equal(snap[1], first)  # frozen in epoch 0
    assert not torch.equal(snap[2], first)  # unfrozen from epoch 1
    assert all(b == pytest.approx(10 * a) for a, b in lrs)  # one-cycle scales each group's own lr
    assert len({a for a, _ in lrs}) > 4


class ModeProbe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(0)
        self.log: list[tuple[bool, bool]] = []

    def forward(self, x):
        self.log.append((self.training, torch.is_inference_mode_enabled()))
        return self.net(x)


def test_train_and_eval_modes():
    model = ModeProbe()
    fit(model, xor_data(16), xor_data(8), epochs=1, batch_size=8, progress=False)
    assert model.log == [(True, False), (True, False), (False, True)]
    model.train()
    evaluate(model, xor_data(8))
    assert model.training and model.log[-1] == (False, True)


def test_dict_inputs_forward_fn_and_bad_batches():
    class DictModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(0)

        def forward(self, *, x, scale):
            return self.net(x) * (scale[:, None] if torch.is_tensor(scale) else scale)

    class DictData(torch.utils.data.Dataset):
        def __init__(self):
            self.x, self.y = xor_data(32)

        def __len__(self):
            return 32

        def __getitem__(self, i):
            return {"x": self.x[i], "scale": torch.tensor(1.0)}, self.y[i]

    result = fit(DictModel(), DictData(), DictData(), epochs=1, batch_size=8, progress=False)
    assert math.isfinite(result.history[0]["val_loss"])

    def forward_fn(model, batch):
        inputs, targets = batch
        return model(x=inputs["x"], scale=2.0), targets

    result = fit(DictModel(), DictData(), epochs=1, batch_size=8, progress=False, forward_fn=forward_fn)
    assert math.isfinite(result.history[0]["train_loss"])

    triples = torch.utils.data.TensorDataset(*xor_data(8), torch.zeros(8))
    with pytest.raises(TypeError, match=r"\(inputs, targets\).*forward_fn"):
        fit(mlp(), triples, epochs=1, batch_size=4, progress=False)
    with pytest.raises(ValueError, match="unknown schedule"):
        fit(mlp(), xor_data(8), schedule="cosin", progress=False)
    with pytest.raises(ValueError, match="unknown optimizer"):
        fit(mlp(), xor_data(8), optimizer="adamx", progress=False)


def test_a_results_repr_is_a_one_line_summary():
    """It printed the model's whole module tree and every row: a notebook cell ending in `result` buried the
    scores under 100+ lines of a ResNet's layers."""
    x = torch.randn(16, 4)
    r = fit(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (x, (x[:, 0] > 0).long()), epochs=3,
            batch_size=8, progress=False)
    text = repr(r)
    assert "\n" not in text and "Linear(" not in text and text.count("'epoch'") == 1
    assert text.startswith("TrainResult(rows=3, monitor='train_loss', best_metric=") and "model=Sequential" in text
    assert f"best_step={r.best_step}" in text and "'step': 6" in text


def test_a_model_returning_a_dict_or_tuple_is_told_how_to_pick_its_scores():
    """It failed inside the loss with "'dict' object has no attribute ..." / "argument 'input' must be Tensor"."""

    class Logits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            return {"logits": self.lin(x)}

    x = torch.randn(16, 4)
    data = (x, torch.arange(16) % 3)
    with pytest.raises(TypeError, match=r"returns a dict \(keys 'logits'\); the default loss takes a tensor of class "
                                        r"scores: pass forward_fn="):
        fit(Logits(), data, epochs=1, progress=False)
    r = fit(Logits(), data, epochs=1, progress=False, forward_fn=lambda m, b: (m(b[0])["logits"], b[1]))
    assert r.last["train_loss"] > 0


@pytest.mark.parametrize("form", ["pair", "dict", "datasetdict"])
def test_training_and_validation_data_together_as_finetune_takes_them(form):
    """`zoo.train(net, ((X, y), (X_val, y_val)))` read the pair as a data set of two samples ("Expected target
    size [2, 2], got [2, 64]"), and {"train": ..., "val": ...} failed with KeyError 0."""
    import zoo

    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    train, val = (x, (x[:, 0] > 0).long()), (x[:8], (x[:8, 0] > 0).long())
    data = {"pair": (train, val), "dict": {"train": train, "val": val},
            "datasetdict": {"train": train, "validation": val, "test": val}}[form]  # Hugging Face's split names
    r = zoo.train(nn.Linear(4, 2), data, epochs=1, batch_size=8, progress=False)
    assert r.history[-1]["step"] == 4 and "val_loss" in r.history[-1]
    with pytest.raises(ValueError, match="validation data given twice"):
        zoo.train(nn.Linear(4, 2), data, val_data=val, epochs=1, progress=False)
    with pytest.raises(ValueError, match=r"evaluate scores one data set.*such as data\['val'\]"):
        zoo.evaluate(nn.Linear(4, 2), data)


_GROWING = (2, 3, 5)  # batches per epoch


class _GrowingBatches(torch.utils.data.Sampler):
    """Batches of 2 in order, 2, 3, then 5 of them, with len() the set-up epoch's 2 throughout (a token budget's
    sampler gave the epoch before's count)."""

    def __init__(self) -> None:
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        return iter([[i, i + 1] for i in range(0, 2 * _GROWING[self.epoch], 2)])

    def __len__(self) -> int:
        return 2


def _growing_reference(x, y, accum: int, epochs: int = 3) -> nn.Module:
    """SGD by hand over _GrowingBatches' batches: each window's mean loss over its samples, stepped once."""
    net = mlp(1)
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    for epoch in range(epochs):
        batches = [slice(i, i + 2) for i in range(0, 2 * _GROWING[epoch], 2)]
        for w in range(0, len(batches), accum):
            window = batches[w:w + accum]
            opt.zero_grad()
            n = sum(s.stop - s.start for s in window)
            for s in window:
                (nn.functional.cross_entropy(net(x[s]), y[s], reduction="sum") / n).backward()
            opt.step()
    return net


@pytest.mark.parametrize("accum", [1, 2])
def test_every_batch_of_an_epoch_longer_than_its_len_is_stepped(accum):
    """Before: the batch count read once at set-up (len() 2) decided which batch ended a window, so the
    later epochs' extra batches ran forward and backward but no optimizer step applied them (accum 1: steps
    2 + 2 + 2 of 10 batches, their gradient left on the model after the run; accum 2: the last epoch's batches
    past the second made one window of 3)."""
    x, y = xor_data(10)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_sampler=_GrowingBatches())
    kw = {"optimizer": "sgd", "lr": 0.5, "metrics": (), "progress": False, "amp": None}
    result = fit(mlp(1), loader, epochs=3, grad_accum_steps=accum, **kw)
    assert [row["step"] for row in result.history] == ([2, 5, 10] if accum == 1 else [1, 3, 6])
    assert all(p.grad is None for p in result.model.parameters())  # nothing left un-stepped
    for (name, a), b in zip(result.model.named_parameters(), _growing_reference(x, y, accum).parameters()):
        assert torch.allclose(a, b, atol=1e-6, rtol=0), name


def test_a_class_weighted_loss_accumulates_and_evaluates_as_the_whole_batch():
    """Before: batches were weighed by their count of targets other than -100, not by what a class-weighted
    mean divides by (the weights of its scored targets), so accumulation missed the big batch's step (0.24
    apart at 4 x 2) and evaluate's loss moved with the batch size (1.32 / 1.15 / 0.99 at 8 / 4 / 2)."""
    x, y = xor_data(8)
    y = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1])
    kw = {"epochs": 1, "optimizer": "sgd", "lr": 0.5, "progress": False, "seed": 3, "amp": None}
    weight = torch.tensor([0.1, 5.0])
    for loss_fn in (nn.CrossEntropyLoss(weight=weight), nn.CrossEntropyLoss(weight=weight, ignore_index=0,
                                                                             label_smoothing=0.1)):
        in_order = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=2)
        big = fit(mlp(1), (x, y), batch_size=8, loss_fn=loss_fn, **kw).model
        accum = fit(mlp(1), in_order, grad_accum_steps=4, loss_fn=loss_fn, **kw).model
        for (name, a), b in zip(big.named_parameters(), accum.parameters()):
            assert torch.allclose(a, b, atol=1e-6, rtol=0), name
        whole = loss_fn(big(x), y).item()
        for batch_size in (2, 4, 8):
            assert evaluate(big, (x, y), loss_fn=loss_fn, batch_size=batch_size, amp=None)["loss"] == \
                pytest.approx(whole, rel=1e-5)
    nll = nn.NLLLoss(weight=weight)
    log_probs = lambda m, b: (torch.log_softmax(m(b[0]), 1), b[1])
    net = mlp(1)
    whole = nll(torch.log_softmax(net(x), 1), y).item()
    assert evaluate(net, (x, y), forward_fn=log_probs, loss_fn=nll, batch_size=2, amp=None)["loss"] == \
        pytest.approx(whole, rel=1e-5)
