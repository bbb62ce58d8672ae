"""Data in the dtypes users have: float64 arrays from NumPy, int32/uint8 labels, and networks cast with
``.half()`` / ``.double()`` / ``.to(torch.bfloat16)``. The engine casts float inputs to the network's dtype
and runs a cast network in its own dtype, where autocast would mix bf16 activations with its weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import zoo
from zoo.engine.data import model_dtype, move_batch
from zoo.engine.precision import model_amp


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))


def _arrays(n: int = 48, label_dtype=np.int64):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 4))  # float64, as NumPy makes it
    return x, (x[:, 0] > 0).astype(label_dtype)


# uint16/32/64 (PNG masks, hyperspectral ground truth): training's accuracy count compared them with a long and
# torch refused ("Promotion for uint16, uint32, uint64 types is not supported") after the first step
@pytest.mark.parametrize("label_dtype", [np.int64, np.int32, np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("as_tensors", [False, True])
def test_float64_arrays_and_any_integer_labels_train_and_evaluate(label_dtype, as_tensors):
    x, y = _arrays(label_dtype=label_dtype)
    data = (torch.from_numpy(x), torch.from_numpy(y)) if as_tensors else (x, y)
    model = _mlp()
    r = zoo.train(model, data, epochs=8, batch_size=16, lr=0.05, amp=None, progress=False)
    assert r.history[-1]["train_loss"] < r.history[0]["train_loss"]
    assert r.history[-1]["train_accuracy"] > 0.8
    scores = zoo.evaluate(model, data, amp=None)
    assert scores["accuracy"] > 0.8
    assert next(model.parameters()).dtype == torch.float32  # the data was cast, never the network


def test_the_float64_data_gives_what_the_same_data_in_float32_gives():
    x, y = _arrays()
    a, b = _mlp(), _mlp()
    ra = zoo.train(a, (x, y), epochs=2, batch_size=16, amp=None, progress=False)
    rb = zoo.train(b, (x.astype(np.float32), y), epochs=2, batch_size=16, amp=None, progress=False)
    assert ra.history[-1]["train_loss"] == rb.history[-1]["train_loss"]
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_float64_regression_targets_meet_float32_outputs():
    x, _ = _arrays()
    target = x[:, :1] * 2.0  # (N, 1) float64
    model = nn.Linear(4, 1)
    r = zoo.train(model, (x, target), epochs=30, batch_size=16, lr=0.05, loss_fn=F.mse_loss, metrics=(),
                  amp=None, progress=False)
    assert r.history[-1]["train_loss"] < 0.1 * r.history[0]["train_loss"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_a_network_cast_by_the_user_runs_in_its_dtype_under_amp_auto(dtype):
    x, y = _arrays()
    model = _mlp().to(dtype)
    assert model_dtype(model) == dtype
    assert model_amp("auto", model) is None  # no autocast: the user chose the precision by casting
    scores = zoo.evaluate(model, (x, y))  # amp="auto", the default
    assert 0.0 <= scores["accuracy"] <= 1.0
    out = zoo.predict(model, x[:3])  # a NumPy batch in float64
    assert out.dtype == dtype and out.shape == (3, 2)
    zoo.train(model, (x, y), epochs=1, batch_size=16, progress=False)
    assert all(p.dtype == dtype for p in model.parameters())


def test_an_explicit_amp_is_kept_for_a_cast_network():
    assert model_amp("bf16", _mlp().double()) == "bf16"
    assert model_amp(None, _mlp().double()) is None


def test_move_batch_casts_floats_only():
    batch = {"x": torch.zeros(2, dtype=torch.float64), "ids": torch.zeros(2, dtype=torch.int32),
             "mask": torch.zeros(2, dtype=torch.bool)}
    out = move_batch(batch, torch.device("cpu"), dtype=torch.float32)
    assert out["x"].dtype == torch.float32 and out["ids"].dtype == torch.int32 and out["mask"].dtype == torch.bool
    same = torch.zeros(2)
    assert move_batch(same, torch.device("cpu"), dtype=torch.float32) is same  # nothing to do: no copy


def test_a_plain_network_predicts_from_a_numpy_batch_a_dataset_or_a_loader_and_refuses_a_list():
    """A Dataset or DataLoader (Keras' predict(dataset)) was refused: "takes a tensor batch"."""
    from torch.utils.data import DataLoader, TensorDataset

    model = _mlp()
    x, y = _arrays(100)
    want = model(torch.from_numpy(x).float()).detach()
    torch.testing.assert_close(zoo.predict(model, x), want)
    samples = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))  # (inputs, targets): the inputs are run
    torch.testing.assert_close(zoo.predict(model, samples), want)
    torch.testing.assert_close(zoo.predict(model, DataLoader(TensorDataset(torch.from_numpy(x)), batch_size=7)), want)
    with pytest.raises(TypeError, match="takes a tensor batch, a NumPy array, a Dataset or a DataLoader, got list"):
        zoo.predict(model, x.tolist())


def test_x_and_y_arrays_of_different_lengths_or_label_names_are_refused():
    x, y = _arrays()
    with pytest.raises(ValueError, match="same length, got 48 and 47"):
        zoo.train(_mlp(), (x, y[:-1]), epochs=1, progress=False)
    names = np.array(["cat", "dog"])[y]  # scikit-learn takes these; torch's message listed the dtypes it takes
    with pytest.raises(TypeError, match=r"y holds <U3 values \(\['(cat|dog)', .*LabelEncoder\(\)\.fit_transform\(y\)"):
        zoo.train(_mlp(), (x, names), epochs=1, progress=False)


def test_a_regression_run_without_its_loss_is_refused_not_trained_at_zero_loss():
    """Cross-entropy over one output is 0 whatever the weights: `zoo.train(nn.Linear(4, 1), (X, y))` reported a
    loss of 0.0 and trained nothing."""
    x, _ = _arrays()
    with pytest.raises(ValueError, match=r"1 output per sample \(outputs \(16, 1\)\), where it is always 0: for "
                                         r"regression pass loss_fn=torch\.nn\.functional\.mse_loss and metrics=\(\)"):
        zoo.train(nn.Linear(4, 1), (x, x[:, :1]), epochs=1, batch_size=16, progress=False)
    with pytest.raises(ValueError, match=r"float targets \(48, 2\) for outputs \(48, 3\)"):
        zoo.evaluate(nn.Linear(4, 3), (x, x[:, :2]), batch_size=48)
    whole = (np.arange(48) % 3).astype(np.float64)  # labels a CSV reader gave as floats
    with pytest.raises(ValueError, match=r"float targets \(16,\) for outputs \(16, 3\).*y\.astype\(np\.int64\)"):
        zoo.train(nn.Linear(4, 3), (x, whole), epochs=1, batch_size=16, progress=False)
    soft = np.eye(3)[np.arange(48) % 3]  # class probabilities shaped like the outputs still train
    assert zoo.train(nn.Linear(4, 3), (x, soft), epochs=1, batch_size=16, progress=False).last["train_loss"] > 0


def test_x_and_y_as_lists_of_numbers_train_and_score_as_arrays_do():
    """Lists, as scikit-learn takes them (y.tolist(), X.tolist()): the pair was read as a data set of two
    samples and failed in torch's collate ('stack expects each tensor to be equal size')."""
    from zoo.engine.data import xy_dataset

    x, y = _arrays()
    expected = zoo.evaluate(_mlp(), (x, y))
    for pair in ((x, y.tolist()), (x, list(y)), (x.tolist(), y.tolist()), (torch.as_tensor(x), y.tolist())):
        assert zoo.evaluate(_mlp(), pair) == expected
        ds = xy_dataset(pair)
        assert len(ds) == 48 and ds.tensors[1].dtype == torch.int64
        assert "train_accuracy" in zoo.train(_mlp(), pair, epochs=1, progress=False).history[-1]
    # lists that are not numbers stay what they were: samples, or two data sets
    assert xy_dataset(([x[0], 0], [x[1], 1])) is None
    assert xy_dataset(([1.0, 2.0], [0, 1])) is None  # two flat lists: as likely two samples
    assert xy_dataset(([[1.0], [2.0, 3.0]], [0, 1])) is None  # ragged


def test_x_as_a_list_of_equally_shaped_arrays_is_x():
    """``(images, labels)`` with the images a list of arrays (as a loop over files gathers them) was read as a
    data set of two samples: torch's 'stack expects each tensor to be equal size ... at entry 0 and [] at entry 1'."""
    from zoo.engine.data import xy_dataset

    x, y = _arrays()
    expected = zoo.evaluate(_mlp(), (x, y))
    for rows in (list(x), [torch.as_tensor(r) for r in x]):
        assert zoo.evaluate(_mlp(), (rows, y.tolist())) == expected
    assert xy_dataset(([x[0], x[1][:2]], [0, 1])) is None  # of other shapes: samples, as before
    assert xy_dataset(([x[0], np.array(["a"] * 4)], [0, 1])) is None


@pytest.mark.parametrize("call", ["train", "evaluate"])
def test_a_dict_of_splits_without_train_is_refused_naming_its_keys(call):
    """Before: zoo.evaluate(net, {"val": (x, y)}) (a DatasetDict without "train") failed with KeyError: 0 from
    inside the DataLoader, which read the dict as a data set of samples data[0], data[1], ..."""
    x, y = _arrays()
    with pytest.raises(TypeError, match=r"got a dict with keys 'val', 'test', which is not a data set .*data\['val'\]"):
        getattr(zoo, call)(_mlp(), {"val": (x, y), "test": (x, y)}, progress=False)
