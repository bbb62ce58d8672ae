"""The size a network is trained at travels with it; finetune reads data as train does; in_chans and image
files; predict's input forms and its errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import zoo
from zoo.vision.predict import predict
from zoo.vision.transforms import transforms_for

FAST = {"epochs": 1, "batch_size": 4, "amp": None, "progress": False}


def _folder(root, size=(20, 18)):
    for split, n in (("train", 3), ("val", 2)):
        for cls, color in (("red", (220, 20, 20)), ("blue", (20, 20, 220))):
            (root / split / cls).mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", size, tuple(c + 9 * i for c in color)).save(root / split / cls / f"{i}.png")
    return root


def _net(**config):
    torch.manual_seed(0)
    return zoo.build("resnet18", stem="cifar", num_classes=2, **config)


# --- the training image size is recorded -----------------------------------------------------------------

@pytest.mark.parametrize("augment", [True, False])
def test_finetune_at_an_image_size_is_what_evaluate_and_a_saved_file_use(tmp_path, augment):
    data = _folder(tmp_path / "data")
    model = _net()
    assert model.pretrained_cfg["input_size"] == [3, 32, 32]
    result = zoo.finetune(model, str(data), strategy="full", image_size=16, augment=augment, **FAST)
    cfg = result.model.pretrained_cfg
    assert cfg["input_size"] == [3, 16, 16] and cfg["resize"] == 16 and cfg["classes"] == ["blue", "red"]
    path = zoo.save(result.model, tmp_path / "tuned.safetensors")
    reloaded = zoo.build("resnet18", weights=path)
    assert reloaded.pretrained_cfg["input_size"] == [3, 16, 16] and reloaded.pretrained_cfg["resize"] == 16
    assert transforms_for(reloaded)(Image.new("RGB", (40, 30))).shape == (3, 16, 16)
    at16 = zoo.evaluate(reloaded, str(data), image_size=16)
    assert zoo.evaluate(reloaded, str(data)) == at16  # the recorded size is the default
    assert zoo.evaluate(reloaded, str(data), image_size=32)["loss"] != at16["loss"]  # an explicit size still wins
    assert predict(reloaded, str(data / "val"))[0]["prob"] == pytest.approx(
        predict(reloaded, str(data / "val"), transform=transforms_for(reloaded, image_size=16))[0]["prob"])


def test_train_on_a_folder_at_an_image_size_records_it(tmp_path):
    data = _folder(tmp_path / "data")
    model = _net()
    zoo.train(model, str(data), image_size=16, **FAST)
    assert model.pretrained_cfg["input_size"] == [3, 16, 16] and model.pretrained_cfg["resize"] == 16
    zoo.evaluate(model, str(data), image_size=24)  # evaluating at another size does not change the network's
    assert model.pretrained_cfg["input_size"] == [3, 16, 16]


@pytest.mark.parametrize("size", ["32", 0, 2.5, True])
def test_an_image_size_that_is_no_positive_int_is_named(tmp_path, size):
    """image_size="32" (a config file's string) failed "'<' not supported between instances of 'str' and 'int'"."""
    data = _folder(tmp_path / "data")
    with pytest.raises(ValueError, match=rf"image_size must be an int >= 1 \(pixels on a side\), got {size!r}"):
        zoo.train(_net(), str(data), image_size=size, **FAST)
    assert transforms_for(_net(), image_size=np.int64(16)) is not None  # numpy's ints are ints


# --- finetune takes the data forms train takes -------------------------------------------------------------

class _PILImages(torch.utils.data.Dataset):
    """(PIL image, label) samples, a Dataset that names no classes."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        return Image.new("RGB", (20, 18), (220, 20, 20) if i % 2 else (20, 20, 220)), i % 2


def _first_conv_sizes(model):
    sizes = set()
    model.conv1.register_forward_hook(lambda mod, inp, out: sizes.add(tuple(inp[0].shape[-2:])))
    return sizes


def test_training_at_an_image_size_on_a_dataset_without_classes_records_it(tmp_path):
    """The size was recorded only for data sets that name their classes: a Dataset of PIL images trained at
    16 px was evaluated, predicted, saved and exported at the weights' 32 px."""
    image = Image.new("RGB", (20, 18), (220, 20, 20))
    for train in (lambda m: zoo.train(m, _PILImages(), image_size=16, **FAST).model,
                  lambda m: zoo.finetune(m, _PILImages(), strategy="full", image_size=16, **FAST).model):
        model = train(_net())
        assert model.pretrained_cfg["input_size"] == [3, 16, 16]
        sizes = _first_conv_sizes(model)
        zoo.predict(model, image)
        zoo.evaluate(model, _PILImages())
        assert sizes == {(16, 16)}
        reloaded = zoo.build("resnet18", weights=zoo.save(model, tmp_path / "m.safetensors"))
        assert reloaded.pretrained_cfg["input_size"] == [3, 16, 16]
    # a new head of another size drops the class names that no longer describe it; one that fits keeps them
    tuned = zoo.finetune(zoo.build("resnet18.cifar10"), _PILImages(), num_classes=2, image_size=16, **FAST).model
    assert "classes" not in tuned.pretrained_cfg and tuned.pretrained_cfg["input_size"] == [3, 16, 16]
    assert zoo.predict(tuned, image)[0]["label"] in ("0", "1")  # was a CIFAR name for a 2-class head
    kept = zoo.finetune(zoo.build("resnet18.cifar10"), _PILImages(), **FAST).model
    assert len(kept.pretrained_cfg["classes"]) == 10


@pytest.mark.parametrize("cache_features", [False, True])
def test_finetune_reads_x_y_tensors_as_train_does(cache_features):
    torch.manual_seed(0)
    X, y = torch.randn(8, 3, 16, 16), torch.randint(0, 2, (8,))
    result = zoo.finetune(_net(), (X, y), strategy="head", cache_features=cache_features, **FAST)
    assert len(result.history) == 1 and "val_accuracy" not in result.history[0]
    with_val = zoo.finetune(_net(), ((X, y), (X[:4], y[:4])), strategy="head", cache_features=cache_features, **FAST)
    assert "val_accuracy" in with_val.history[0]
    assert "val_accuracy" in zoo.finetune(_net(), (X, y), val_data=(X[:4], y[:4]), **FAST).history[0]
    with pytest.raises(ValueError, match=r"\(X, y\) must have the same length, got 8 and 7"):
        zoo.finetune(_net(), (X, y[:7]), **FAST)
    as_numpy = (X.double().numpy(), y.numpy().astype(np.int32))  # float64 images and int32 labels, as NumPy has them
    assert zoo.finetune(_net(), as_numpy, strategy="head", cache_features=cache_features, **FAST).history


# --- in_chans and image files ------------------------------------------------------------------------------

def test_in_chans_one_reads_image_folders_as_greyscale(tmp_path):
    data = _folder(tmp_path / "data")
    model = _net(in_chans=1)
    assert transforms_for(model, image_size=16)(Image.new("RGB", (20, 18), (200, 10, 10))).shape == (1, 16, 16)
    assert transforms_for(model, train=True, image_size=16)(Image.new("RGB", (20, 18))).shape == (1, 16, 16)
    result = zoo.train(model, str(data), image_size=16, **FAST)
    assert len(result.history) == 1 and "val_accuracy" in result.history[0]
    assert {"accuracy", "loss"} <= set(zoo.evaluate(model, str(data)))
    assert [r["label"] in ("blue", "red") for r in predict(model, str(data / "val"))] == [True] * 4


def test_in_chans_one_with_rgb_weights_normalises_with_their_average_statistics(tmp_path):
    rgb = _net()
    rgb.pretrained_cfg.update(mean=[0.3, 0.4, 0.5], std=[0.2, 0.3, 0.4])
    path = zoo.save(rgb, tmp_path / "rgb.safetensors")
    grey = zoo.build("resnet18", weights=path, in_chans=1)
    cfg = grey.pretrained_cfg
    assert cfg["input_size"][0] == 1 and cfg["mean"] == pytest.approx([0.4]) and cfg["std"] == pytest.approx([0.3])
    assert transforms_for(grey)(Image.new("RGB", (32, 32), (102, 102, 102))).shape == (1, 32, 32)


def test_other_channel_counts_say_image_files_are_rgb_or_grey(tmp_path):
    data = _folder(tmp_path / "data")
    model = _net(in_chans=5)
    msg = r"5 input channels cannot read image files: images load as RGB \(3 channels\) or.*greyscale"
    with pytest.raises(ValueError, match=msg):
        zoo.train(model, str(data), **FAST)
    with pytest.raises(ValueError, match=msg):
        zoo.finetune(model, str(data), **FAST)
    with pytest.raises(ValueError, match=r"pass tensors: \(X, y\) with X of shape \(N, 5, H, W\)"):
        predict(model, str(data / "val"))
    assert len(predict(model, torch.randn(2, 5, 16, 16))) == 2  # tensors are the way in


# --- predict --------------------------------------------------------------------------------------------

@pytest.fixture
def red_or_blue(tmp_path):
    data = _folder(tmp_path / "data")
    model = _net()
    zoo.train(model, str(data), image_size=16, **FAST)
    return model, data


def test_predict_refuses_a_topk_below_one(red_or_blue):
    model, data = red_or_blue
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match=f"topk must be an int >= 1 .*got {bad}"):
            predict(model, str(data / "val"), topk=bad)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        predict(model, str(data / "val"), batch_size=0)
    # counts from an array, refused before; a tensor batch is cut with them as well
    x = torch.rand(3, 3, 16, 16)
    assert predict(model, x, topk=np.int64(2), batch_size=np.int32(2)) == predict(model, x, topk=2, batch_size=2)


def test_predict_refuses_class_names_of_another_count(red_or_blue):
    """``classes=["a"]`` on a two-output model returned label '1' for one input and 'a' for another, without a
    word; a str was read letter by letter."""
    model, data = red_or_blue
    assert [r["label"] for r in predict(model, torch.randn(2, 3, 16, 16), classes=["x", "y"])] != []
    for bad in (["a"], ["a", "b", "c"]):
        with pytest.raises(ValueError, match=rf"{len(bad)} class names for a model with 2 outputs"):
            predict(model, str(data / "val"), classes=bad)
        with pytest.raises(ValueError, match=rf"{len(bad)} class names for a model with 2 outputs"):
            predict(model, torch.randn(2, 3, 16, 16), classes=bad)
    with pytest.raises(TypeError, match="classes is a list of names, one per output; got the str 'ab'"):
        predict(model, str(data / "val"), classes="ab")


def test_train_on_image_arrays_says_what_layout_and_scale_it_takes():
    """(X, y) of uint8 (N, H, W, C) pixels (torchvision's CIFAR10.data) failed inside the first conv with
    "expected input[4, 32, 32, 3] to have 3 channels, but got 32", and uint8 (N, C, H, W) with "expected scalar
    type Byte but found BFloat16"; out-of-range labels with a bare "Target 4 is out of bounds"."""
    net = zoo.build("resnet18", num_classes=3, stem="cifar")
    pixels = np.random.default_rng(0).integers(0, 255, (4, 8, 8, 3), dtype=np.uint8)
    y = np.array([0, 1, 2, 0])
    kw = {"epochs": 1, "batch_size": 4, "progress": False, "amp": None}
    with pytest.raises(ValueError, match=r"got torch.uint8 \(4, 8, 8, 3\): images of \(N, H, W, C\) go in as "
                                         r"x.permute\(0, 3, 1, 2\).*uint8 pixels are scaled"):
        zoo.train(net, (pixels, y), **kw)
    with pytest.raises(ValueError, match=r"got torch.float32 \(4, 8, 8, 3\): images of \(N, H, W, C\)"):
        zoo.train(net, (pixels.astype(np.float32) / 255, y), **kw)
    with pytest.raises(ValueError, match=r"uint8 \(4, 3, 8, 8\); uint8 pixels are scaled and normalised"):
        zoo.train(net, (torch.from_numpy(pixels).permute(0, 3, 1, 2), torch.from_numpy(y)), **kw)
    floats = pixels.transpose(0, 3, 1, 2).astype(np.float32) / 255
    with pytest.raises(ValueError, match=r"label 5 for a model with 3 outputs \(class indices 0..2\)"):
        zoo.train(net, (floats, np.array([0, 1, 5, 0])), **kw)
    assert "train_loss" in zoo.train(net, (floats, y), **kw).history[-1]


def test_predict_checks_a_tensor_batch(red_or_blue):
    model, _ = red_or_blue
    with pytest.raises(ValueError, match=r"the batch has 1 channels \(shape \(2, 1, 16, 16\)\) but the network takes 3"):
        predict(model, torch.randn(2, 1, 16, 16))
    assert predict(model, torch.zeros(0, 3, 16, 16)) == []
    batch = torch.randn(3, 3, 16, 16)
    from_numpy = predict(model, batch.numpy())
    assert [r["prob"] for r in from_numpy] == pytest.approx([r["prob"] for r in predict(model, batch)])
    as_float64 = predict(model, batch.double().numpy(), amp=None)  # NumPy's default dtype: run in the net's fp32
    assert [r["prob"] for r in as_float64] == [r["prob"] for r in predict(model, batch, amp=None)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_network_cast_by_the_user_predicts_and_scores_in_its_dtype(red_or_blue, dtype):
    model, data = red_or_blue
    want = predict(model, str(data / "val"), amp=None)
    cast = model.to(dtype)  # amp="auto": no autocast, inputs cast to the network's dtype
    got = predict(cast, str(data / "val"))
    assert [r["input"] for r in got] == [r["input"] for r in want]
    assert [r["prob"] for r in got] == pytest.approx([r["prob"] for r in want], abs=0.05)
    assert predict(cast, torch.randn(2, 3, 16, 16))[0]["label"] in ("blue", "red")
    assert 0.0 <= zoo.evaluate(cast, str(data))["accuracy"] <= 1.0


def test_predict_takes_mixed_lists_and_numpy_images_and_names_what_it_cannot_read(red_or_blue):
    model, data = red_or_blue
    path = data / "val" / "red" / "0.png"
    pil = Image.open(path).convert("RGB")
    out = predict(model, [str(path), pil, np.asarray(pil), data / "val" / "blue"])
    assert [r["input"] for r in out] == [str(path), "image1", "image2", str(data / "val" / "blue" / "0.png"),
                                         str(data / "val" / "blue" / "1.png")]
    assert out[0]["prob"] == pytest.approx(out[1]["prob"]) == pytest.approx(out[2]["prob"])
    assert predict(model, np.asarray(pil))[0]["prob"] == pytest.approx(out[0]["prob"])
    for bad, name in ((5, "int"), ([str(path), 3.0], "float"), (b"x.png", "bytes")):
        with pytest.raises(TypeError, match=rf"cannot classify .*\({name}\); it takes an image file or folder"):
            predict(model, bad)
    with pytest.raises(ValueError, match=r"numpy input 0 has shape \(16, 16, 3\) and dtype float32"):
        predict(model, np.zeros((16, 16, 3), np.float32))
    with pytest.raises(ValueError, match="no images given"):
        predict(model, [])


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_predict_on_paths_restores_the_model_mode(red_or_blue, mode):
    model, data = red_or_blue
    model.train(mode == "train")
    predict(model, str(data / "val"))
    assert model.training == (mode == "train")
    predict(model, torch.randn(1, 3, 16, 16))
    assert model.training == (mode == "train")


def _probs(rows):
    return [r["prob"] for r in rows]


def test_predict_runs_at_the_precision_amp_asks_for(red_or_blue, top_probs_fp32_bf16):
    from zoo.engine.precision import auto_amp

    model, _ = red_or_blue
    x = torch.randn(3, 3, 16, 16)
    fp32, bf16 = top_probs_fp32_bf16(model.eval(), x)
    for off in (None, "fp32", "none"):
        assert _probs(predict(model, x, amp=off)) == fp32  # exact fp32
    assert _probs(predict(model, x, amp="bf16")) == bf16
    auto = bf16 if auto_amp("cpu", "conv") == "bf16" else fp32  # resolved for convolutions on this CPU
    assert _probs(predict(model, x)) == _probs(predict(model, x, amp="auto")) == auto
    assert _probs(zoo.predict(model, x, amp=None)) == fp32  # zoo.predict takes it too
    with pytest.raises(ValueError, match=r"amp='fp16' runs on CUDA only, and this prediction runs on cpu; use "
                                         r"amp='bf16', 'auto' or None"):
        predict(model, x, amp="fp16")  # fp16 autocast: CUDA only, and the message says so


def test_predict_runs_where_the_model_is_unless_device_is_given(red_or_blue, monkeypatch):
    model, data = red_or_blue
    moved, to = [], model.to
    monkeypatch.setattr(model, "to", lambda *a, **k: moved.append(a) or to(*a, **k))
    predict(model, torch.randn(1, 3, 16, 16))
    zoo.predict(model, str(data / "val"))
    assert moved == []  # a model on another device would have been moved to the CPU
    predict(model, str(data / "val"), device="cpu")
    assert moved == [(torch.device("cpu"),)]


def test_predict_on_a_model_on_the_meta_device_says_how_to_materialize_it():
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 2, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    with pytest.raises(ValueError, match=r"'meta' device.*model.to_empty\(device='cpu'\)"):
        predict(model, torch.randn(1, 3, 8, 8))  # was torch's "unsupported scalarType" from autocast
