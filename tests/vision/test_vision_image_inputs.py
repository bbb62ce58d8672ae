"""Images as users have them: 16-bit and float files scaled (not clipped), phone photos turned upright by
their EXIF tag, val classes train does not know, and decompression bombs -- each a clear, counted decision."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from zoo.vision.data import ImageFolderDataset, load_image_folders, open_rgb
from zoo.vision.predict import predict


def test_16bit_png_is_scaled_not_clipped(tmp_path):
    """Before: values clipped at 255, 65,440 levels of a gradient became 5."""
    ramp = np.linspace(0, 65535, 256 * 64).astype(np.uint16).reshape(64, 256)
    Image.fromarray(ramp).save(tmp_path / "deep.png")  # a real 16-bit greyscale PNG
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    rgb = np.asarray(open_rgb(tmp_path / "deep.png"))
    assert rgb.shape == (64, 256, 3) and (rgb[..., 0] == rgb[..., 2]).all()
    assert len(np.unique(rgb)) == 256  # every 8-bit level is used
    np.testing.assert_array_equal(rgb[..., 0], np.rint(ramp / 257.0).astype(np.uint8))


def test_32bit_and_float_images_are_scaled_over_their_range(tmp_path):
    f = np.linspace(0, 1, 100, dtype=np.float32).reshape(10, 10)
    Image.fromarray(f, mode="F").save(tmp_path / "unit.tif")
    np.testing.assert_array_equal(np.asarray(open_rgb(tmp_path / "unit.tif"))[..., 1], np.rint(f * 255).astype(np.uint8))
    wide = (np.arange(100, dtype=np.int32) * 100_000).reshape(10, 10)  # 32-bit values beyond 16 bits
    Image.fromarray(wide, mode="I").save(tmp_path / "wide.tif")
    with pytest.warns(UserWarning, match=r"wide.tif: I values span \[0, 9.9e\+06\].*scaled that span to 0..255"):
        out = np.asarray(open_rgb(tmp_path / "wide.tif"))[..., 0]
    assert out.min() == 0 and out.max() == 255 and len(np.unique(out)) == 100
    Image.fromarray(f * 1000 - 5, mode="F").save(tmp_path / "radiance.tif")
    with pytest.warns(UserWarning, match="radiance.tif: F values span"):
        assert np.asarray(open_rgb(tmp_path / "radiance.tif")).max() == 255


def _sideways_jpeg(path, orientation=6):
    """A 40x20 photo stored sideways: red on the left, blue on the right, EXIF says 'rotate 90 CW'."""
    img = Image.new("RGB", (40, 20), (0, 0, 255))
    img.paste((255, 0, 0), (0, 0, 20, 20))
    exif = Image.Exif()
    exif[0x0112] = orientation  # Orientation
    img.save(path, quality=95, exif=exif)
    return path


class _RedOnTop(nn.Module):
    """Logits [red in the top half, red in the left half]: says which way up it was shown the photo."""

    def __init__(self) -> None:
        super().__init__()
        self.pretrained_cfg = {"input_size": (3, 16, 16), "resize": 16, "mean": (0.0, 0.0, 0.0),
                               "std": (1.0, 1.0, 1.0), "classes": ["upright", "as stored"]}

    def forward(self, x):  # (B, 3, 16, 16)
        red = x[:, 0]
        return torch.stack([red[:, :8].mean((1, 2)), red[:, :, :8].mean((1, 2))], dim=1) * 20


def test_exif_orientation_is_applied_with_an_option_to_keep_it(tmp_path):
    """Before: phone photos were classified as stored (sideways)."""
    path = _sideways_jpeg(tmp_path / "phone.jpg")
    upright = open_rgb(path)
    assert upright.size == (20, 40)  # turned: tall
    top = np.asarray(upright)[:10].mean((0, 1))
    assert top[0] > 200 and top[2] < 50  # red on top after the 90 degree turn
    assert open_rgb(path, exif_transpose=False).size == (40, 20)
    model = _RedOnTop()
    assert predict(model, path)[0]["label"] == "upright"
    assert predict(model, path, exif_transpose=False)[0]["label"] == "as stored"
    with Image.open(path) as pil:  # a PIL image opened by the caller is turned the same way
        assert predict(model, pil)[0]["label"] == "upright"
    (tmp_path / "cls" / "a").mkdir(parents=True)
    _sideways_jpeg(tmp_path / "cls" / "a" / "p.jpg")
    assert ImageFolderDataset(tmp_path / "cls")[0][0].size == (20, 40)
    assert ImageFolderDataset(tmp_path / "cls", exif_transpose=False)[0][0].size == (40, 20)


def _folders(root, train=("ants", "bees"), val=("ants", "bees", "wasps")):
    for split, classes in (("train", train), ("val", val)):
        for cls in classes:
            (root / split / cls).mkdir(parents=True)
            Image.new("RGB", (8, 8), (9, 9, 9)).save(root / split / cls / f"{cls}.png")
    return root


def test_val_class_unknown_to_train_is_an_error_or_a_counted_skip(tmp_path):
    """Before: the wasps folder was silently not scored."""
    root = _folders(tmp_path)
    with pytest.raises(ValueError, match=r"class folder\(s\) 'wasps' \(1 images\) are not among the 2 classes"):
        load_image_folders(root)
    with pytest.warns(UserWarning, match=r"skipped class folder\(s\) unknown to the given classes: 'wasps'"):
        _, val = load_image_folders(root, unknown_classes="skip")
    assert len(val) == 2 and val.skipped["unknown_class"] == [str(root / "val" / "wasps")]
    assert "1 unknown class" in repr(val)
    with pytest.raises(ValueError, match="unknown_classes must be"):
        ImageFolderDataset(root / "val", unknown_classes="ignore")


def test_the_skip_the_error_suggests_is_taken_by_train_finetune_and_evaluate(tmp_path):
    """The error says "pass unknown_classes='skip'", but zoo.train, zoo.finetune and zoo.evaluate repeated it
    (or refused the option): only ImageFolderDataset took it."""
    import zoo

    root = _folders(tmp_path)
    net = zoo.build("resnet18", num_classes=2, stem="cifar")
    kw = {"epochs": 1, "batch_size": 2, "image_size": 8, "amp": None, "progress": False}
    with pytest.raises(ValueError, match="pass unknown_classes='skip'"):
        zoo.train(net, root, **kw)
    with pytest.warns(UserWarning, match="'wasps'"):
        assert "val_accuracy" in zoo.train(net, root, unknown_classes="skip", **kw).history[-1]
    with pytest.warns(UserWarning, match="'wasps'"):
        assert "val_accuracy" in zoo.finetune(net, root, unknown_classes="skip", **kw).history[-1]
    with pytest.raises(ValueError, match="pass unknown_classes='skip'"):
        zoo.evaluate(net, root / "val", image_size=8, progress=False)
    with pytest.warns(UserWarning, match="'wasps'"):
        assert 0.0 <= zoo.evaluate(net, root / "val", image_size=8, unknown_classes="skip")["accuracy"] <= 1.0


def _png_header(path, width, height):
    """A PNG whose header says ``width x height`` (8-bit grey) with one tiny data chunk: a decompression bomb."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
                     + chunk(b"IEND", b""))
    return path


def test_20000px_png_is_skipped_and_counted_or_named_with_the_limit(tmp_path):
    """Before: PIL's DecompressionBombError escaped the folder scan."""
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        Image.new("RGB", (8, 8)).save(tmp_path / cls / "ok.png")
    bomb = _png_header(tmp_path / "a" / "huge.png", 20000, 20000)
    with pytest.warns(UserWarning, match=r"skipped 1 image\(s\) above Pillow's decompression-bomb limit.*huge.png"):
        ds = ImageFolderDataset(tmp_path)
    assert len(ds) == 2 and ds.skipped["too_large"] == [str(bomb)] and ds.skipped["corrupt"] == []
    with pytest.raises(ValueError, match=r"huge.png is above Pillow's decompression-bomb limit .*MAX_IMAGE_PIXELS = "
                                         rf"{Image.MAX_IMAGE_PIXELS}"):
        ImageFolderDataset(tmp_path, strict=True)
    with pytest.raises(ValueError, match=r"huge.png is above Pillow's decompression-bomb limit"):
        open_rgb(bomb)
    with pytest.warns(UserWarning, match="huge.png"):
        out = predict(_RedOnTop(), [bomb, tmp_path / "b" / "ok.png"])
    assert "decompression-bomb limit" in out[0]["error"] and out[1]["label"] in ("upright", "as stored")



def test_scoring_a_data_set_in_bf16_runs_channels_last_and_gives_the_model_back(monkeypatch):
    # zoo.engine.layout: an evaluation runs bf16 convolutions channels-last on a CPU; the caller's model leaves
    # as it came, and still trains. zoo.predict keeps the model's layout: threads may share the model there,
    # and a conversion under another thread's prediction would change which kernels (and bf16 roundings) it gets
    import warnings

    import zoo
    from zoo.engine import layout
    from zoo.vision.evaluate import predict_dataset

    monkeypatch.setattr(layout, "_cpu_kind", lambda: "amx")  # a kind where channels-last was measured faster
    model = zoo.build("resnet18", stem="cifar", num_classes=3)
    seen = []
    model.conv1.register_forward_pre_hook(lambda m, args: seen.append(m.weight.is_contiguous()))
    x, y = torch.randn(8, 3, 32, 32), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    data = torch.utils.data.TensorDataset(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # bf16 on a CPU without native bf16 warns
        predict_dataset(model, data, amp="bf16", batch_size=4)
        predict(model, x, amp="bf16")
    predict_dataset(model, data, amp=None, batch_size=8)
    assert seen == [False, False, True, True]  # channels-last; predict and fp32 as the model is
    assert all(p.is_contiguous() and not p.is_inference() for p in model.parameters())
    nn.functional.cross_entropy(model(x), y).backward()


def test_predict_gives_a_bf16_network_a_channels_last_input_and_leaves_the_model_as_it_is(monkeypatch):
    # zoo.engine.layout.channels_last_input: a channels-last input takes oneDNN's channels-last kernels (ResNet18
    # 1.25-2x on the AMX Xeon) without converting the model, which the threads of a server may share
    import warnings

    import zoo
    from zoo.engine import layout

    monkeypatch.setattr(layout, "_cpu_kind", lambda: "amx")  # a kind where channels-last was measured faster
    model = zoo.build("resnet18", stem="cifar", num_classes=3)
    seen = []
    model.conv1.register_forward_pre_hook(
        lambda m, args: seen.append((args[0].is_contiguous(memory_format=torch.channels_last), m.weight.is_contiguous())))
    x = torch.randn(5, 3, 32, 32)
    pictures = [Image.fromarray(np.full((32, 32, 3), 40 * i, np.uint8)) for i in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # bf16 on a CPU without native bf16 warns
        last = predict(model, x, amp="bf16", topk=3)
        predict(model, pictures, amp="bf16")
        predict(model, x, amp=None)
        monkeypatch.setattr(layout, "_cpu_kind", lambda: "avx2")  # a kind where it was not: the input as it came
        first = predict(model, x, amp="bf16", topk=3)
    assert seen == [(True, True), (True, True), (False, True), (False, True)]
    for a, b in zip(last, first):  # the same probabilities, within bf16 rounding
        assert [p for _, p in a["topk"]] == pytest.approx([p for _, p in b["topk"]], abs=1e-2)


def test_predict_takes_the_datasets_and_dataloaders_evaluate_takes(tmp_path, pil_folder, capsys):
    """zoo.predict(resnet18, Subset(ImageFolder(...))) was "cannot classify", where zoo.evaluate scored it and a
    plain nn.Module predicted it batch by batch; progress= was an unknown option."""
    import torchvision
    from torch.utils.data import DataLoader, Subset, TensorDataset

    import zoo
    from zoo.vision.transforms import transforms_for

    root = pil_folder(tmp_path / "imgs")
    model = zoo.build("resnet18", num_classes=2, stem="cifar").eval()
    files = torchvision.datasets.ImageFolder(root)
    by_path = predict(model, [p for p, _ in files.samples], topk=2)
    rows = zoo.predict(model, Subset(files, range(len(files))), topk=2, batch_size=3, progress=True)
    assert [r["input"] for r in rows] == [f"dataset[{i}]" for i in range(8)]
    assert [(r["index"], r["topk"]) for r in rows] == [(r["index"], r["topk"]) for r in by_path]
    assert "predict" in capsys.readouterr().err  # the bar
    tensors = torchvision.datasets.ImageFolder(root, transform=transforms_for(model))
    loaded = zoo.predict(model, DataLoader(tensors, batch_size=3), topk=2)
    assert [r["input"] for r in loaded] == [f"batch[{b}][{i}]" for b, n in enumerate((3, 3, 2)) for i in range(n)]
    for a, b in zip(loaded, by_path):
        assert a["index"] == b["index"] and a["prob"] == pytest.approx(b["prob"], abs=1e-5)
    # a loader's own order and batches (shuffled, drop_last) are named as they come, not as dataset indices;
    # collate_fn=lambda b: b (PIL images kept) gives (image, label) samples, whose labels were read as images
    order = [5, 2, 7, 0, 3, 1, 6]  # a sampler's order; drop_last leaves the 7th out
    shuffled = zoo.predict(model, DataLoader(files, batch_size=3, sampler=order, drop_last=True,
                                             collate_fn=lambda b: b))
    assert [r["input"] for r in shuffled] == [f"batch[{b}][{i}]" for b in range(2) for i in range(3)]
    assert [r["prob"] for r in shuffled] == pytest.approx([by_path[j]["prob"] for j in order[:6]], abs=1e-6)
    x = torch.stack([tensors[i][0] for i in range(8)])
    pairs = zoo.predict(model, TensorDataset(x, torch.zeros(8, dtype=torch.long)), batch_size=5)
    assert [r["index"] for r in pairs] == [r["index"] for r in zoo.predict(model, x)]


def test_predict_takes_datasets_of_dict_samples_as_evaluate_does(tmp_path, pil_folder):
    """Before: a Dataset of Hugging Face-style samples ({"img": PIL, "label": i}, {"pixel_values": x, "labels": y}),
    which zoo.evaluate scores, failed zoo.predict with "'dict' object has no attribute 'read'"."""
    import torchvision
    from torch.utils.data import DataLoader, Dataset

    import zoo
    from zoo.vision.transforms import transforms_for

    class Dicts(Dataset):
        def __init__(self, base, key: str) -> None:
            self.base, self.key = base, key

        def __len__(self) -> int:
            return len(self.base)

        def __getitem__(self, i: int) -> dict:
            x, y = self.base[i]
            return {self.key: x, "label": y}

    root = pil_folder(tmp_path / "imgs")
    model = zoo.build("resnet18", num_classes=2, stem="cifar").eval()
    files = torchvision.datasets.ImageFolder(root)
    by_path = [r["index"] for r in predict(model, [p for p, _ in files.samples])]
    assert [r["index"] for r in zoo.predict(model, Dicts(files, "img"))] == by_path
    tensors = Dicts(torchvision.datasets.ImageFolder(root, transform=transforms_for(model)), "pixel_values")
    assert [r["index"] for r in zoo.predict(model, tensors)] == by_path
    assert [r["index"] for r in zoo.predict(model, DataLoader(tensors, batch_size=3))] == by_path
    assert [r["index"] for r in zoo.predict(model, DataLoader(Dicts(files, "img"), batch_size=3,
                                                               collate_fn=lambda b: b))] == by_path
    with pytest.raises(TypeError, match=r"one key besides the label .* keys 'a', 'b', 'label'"):
        zoo.predict(model, torch.utils.data.StackDataset(a=files, b=files, label=files))


def test_one_image_in_torchs_channel_order_is_told_how_to_go_in():
    """A (C, H, W) tensor (torchvision's one image) or NumPy array was refused naming the forms taken, not the
    call that works: a batch of one, or the array in (H, W, C) order."""
    import zoo

    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    with pytest.raises(ValueError, match=r"got torch.float32 \(3, 32, 32\): one image of \(C, H, W\) goes in as a "
                                         r"batch of one, x.unsqueeze\(0\)"):
        zoo.predict(model, torch.rand(3, 32, 32))
    chw = np.zeros((3, 20, 24), np.uint8)
    with pytest.raises(ValueError, match=r"a \(C, H, W\) image goes in as a.transpose\(1, 2, 0\), of shape "
                                         r"\(20, 24, 3\)"):
        zoo.predict(model, chw)
    with pytest.raises(ValueError, match=r"one preprocessed \(C, H, W\) image goes in as a batch of one, a\[None\]"):
        zoo.predict(model, chw.astype(np.float32))
    assert len(zoo.predict(model, chw.transpose(1, 2, 0))) == len(zoo.predict(model, torch.rand(3, 32, 32)[None])) == 1
