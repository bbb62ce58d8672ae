"""Export round trips: TorchScript and ONNX of a fine-tuned model give the eager model's outputs."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import TensorDataset

import zoo
from zoo.vision.export import export_onnx, export_torchscript


@pytest.fixture(scope="module")
def finetuned():
    torch.manual_seed(0)
    model = zoo.build("resnet18", stem="cifar", num_classes=3)
    data = TensorDataset(torch.randn(6, 3, 16, 16), torch.tensor([0, 1, 2, 0, 1, 2]))
    zoo.finetune(model, data, strategy="full", epochs=1, batch_size=6, lr=1e-2, progress=False)
    return model.eval()


def test_torchscript_round_trip(finetuned, tmp_path, recwarn):
    x = torch.randn(2, 3, 16, 16)
    res = export_torchscript(finetuned, tmp_path / "m.pt", x)
    assert not [w for w in recwarn if "torch.jit.script" in str(w.message) and "trac" in str(w.message)]  # scripted
    assert res.verified and res.max_abs_diff < 1e-4 and res.path.is_file()
    loaded = torch.jit.load(str(res.path))
    with torch.no_grad():
        torch.testing.assert_close(loaded(torch.ones(5, 3, 16, 16)), finetuned(torch.ones(5, 3, 16, 16)),
                                   rtol=1e-4, atol=1e-4)
    assert not list(tmp_path.glob(".*tmp"))  # nothing left behind


@pytest.mark.slow
def test_onnx_round_trip_with_dynamic_batch(finetuned, tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    res = export_onnx(finetuned, tmp_path / "m.onnx", torch.randn(2, 3, 16, 16))
    assert res.verified and res.max_abs_diff < 1e-4
    session = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"])
    x = torch.randn(7, 3, 16, 16)
    (out,) = session.run(None, {"input": x.numpy()})
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(out), finetuned(x), rtol=1e-4, atol=1e-4)


def test_export_rejects_unbatched_input(finetuned, tmp_path):
    with pytest.raises(ValueError, match="batched tensor"):
        export_torchscript(finetuned, tmp_path / "m.pt", torch.randn(16))


def test_metadata_describes_the_traced_image_size(tmp_path):
    from zoo.exporting import read_metadata

    model = zoo.build("resnet18", stem="cifar", num_classes=3)  # weights' recipe: 32 px crop, resize 32
    model.pretrained_cfg.update(input_size=[3, 32, 32], resize=40)
    res = zoo.export(model, tmp_path / "m16.pt2", "torch.export", image_size=16)
    meta = read_metadata(res)
    assert meta["input"].startswith("(B, 3, 16, 16)") and meta["input_size"] == [3, 16, 16]
    assert meta["resize"] == 20  # scaled with the crop, as zoo.predict(image_size=16) resizes
    with pytest.raises(ValueError, match="export option image_size must be an int >= 1, got -4"):
        zoo.export(model, tmp_path / "bad.pt2", "torch.export", image_size=-4)


@pytest.mark.parametrize(("dtype", "fmt"), [(torch.float16, "onnx"), (torch.float16, "torch.export"),
                                            (torch.float64, "torch.export"), (torch.bfloat16, "torch.export")])
def test_a_cast_resnet_exports_in_its_dtype(tmp_path, dtype, fmt):
    """zoo.export(resnet.half(), "r.onnx") traced float32 images: the ONNX checker's 'W has inconsistent type
    tensor(float16)', torch.export's 'Input type (torch.FloatTensor) and weight type (torch.HalfTensor)'."""
    from zoo.exporting import read_metadata

    torch.manual_seed(0)
    model = zoo.build("resnet18", stem="cifar", num_classes=3).to(dtype)
    res = zoo.export(model, tmp_path / "r", fmt, image_size=16)
    assert res.verified and res.max_abs_diff <= res.atol
    assert read_metadata(res)["input"].startswith(f"(B, 3, 16, 16) {str(dtype).removeprefix('torch.')}, ")
    assert next(model.parameters()).dtype == dtype  # the model is handed back as it was
    if fmt == "onnx":
        ort = pytest.importorskip("onnxruntime")
        assert ort.InferenceSession(str(res)).get_inputs()[0].type == "tensor(float16)"
    # float32 images for a cast model are cast to its dtype (the graph takes that dtype)
    again = zoo.export(model, tmp_path / "again.pt2", example_input=torch.randn(2, 3, 16, 16))
    assert again.format == "torch.export" and again.verified


def test_a_resnet_whose_conv1_was_swapped_exports_its_channels_and_says_how_they_are_normalised(tmp_path):
    """Before: the sample images took their channels from pretrained_cfg's input_size (3) where a conv1 swapped
    for 4-band input (torchvision's way; model.config.in_chans reads 4) takes 4: the tracer's 'expected input to
    have 4 channels, but got 3 channels instead', and no export."""
    from torch import nn

    from zoo.exporting import read_metadata

    torch.manual_seed(0)
    model = zoo.build("resnet18", stem="cifar", num_classes=3)
    model.conv1 = nn.Conv2d(4, 64, 3, 1, 1, bias=False)
    res = zoo.export(model, tmp_path / "r4.pt2", image_size=16)
    assert res.verified and res.max_abs_diff <= res.atol
    meta = read_metadata(res)
    assert meta["input"].startswith("(B, 4, 16, 16) float32") and meta["input_size"] == [4, 16, 16]
    # no RGB statistics carry over to 4 channels: those of a network built with in_chans=4, said so
    assert meta["mean"] == [0.0] * 4 and meta["std"] == [1.0] * 4
    assert "takes 4" in meta["normalisation"] and "in_chans=4" in meta["normalisation"]
    assert model.pretrained_cfg["input_size"][0] == 3  # the model's own record is left as it was
    with pytest.raises(ValueError, match=r"example_input has 3 channels .*first convolution takes 4: pass \(B, 4, H, W\)"):
        zoo.export(model, tmp_path / "r3.pt2", example_input=torch.randn(2, 3, 16, 16))


def test_a_head_replaced_by_hand_is_exported_without_the_weights_class_names(tmp_path):
    """Before: ``m.fc = nn.Sequential(nn.Dropout(0.2), nn.Linear(512, 3))`` on resnet18.cifar10 (torchvision's
    idiom, which the README says works on a zoo network) was exported with the ten CIFAR-10 names and
    ``weights: resnet18.cifar10`` beside three logits: a deployment reading classes[argmax] named every image
    wrongly (zoo.predict refuses that model). ``fc = nn.Identity()`` was exported as 'logits' with ten names."""
    from torch import nn

    from zoo.exporting import read_metadata

    model = zoo.build("resnet18", weights="cifar10")
    kept = read_metadata(zoo.export(model, tmp_path / "as_loaded.pt2", image_size=16, verify=False))
    assert len(kept["classes"]) == 10 and kept["weights"] == "resnet18.cifar10" and "classes_dropped" not in kept
    model.fc = nn.Sequential(nn.Dropout(0.2), nn.Linear(512, 3))
    meta = read_metadata(zoo.export(model, tmp_path / "three.pt2", image_size=16, verify=False))
    assert "classes" not in meta and "weights" not in meta and meta["backbone_from"] == "resnet18.cifar10"
    assert meta["logits"] == "(B, 3)" and kept["logits"] == "(B, 10)" and "10 class names" in meta["classes_dropped"]
    assert len(model.pretrained_cfg["classes"]) == 10  # the model's own record is left as it was
    model.fc = nn.Identity()
    res = zoo.export(model, tmp_path / "features.pt2", image_size=16)
    meta = read_metadata(res)
    assert meta["outputs"] == ["features"] and "classes" not in meta and "no classifier" in meta["features"]
    with torch.no_grad():
        assert torch.export.load(str(res)).module()(torch.randn(2, 3, 16, 16)).shape == (2, 512)


def test_example_input_must_be_float_images_and_the_only_size_given(tmp_path):
    """Before: uint8 images failed pages deep in the tracer ('mean(): could not infer output dtype ... Got:
    torch.int64' for int64), and an image_size beside example_input was silently ignored (the graph took
    example_input's size)."""
    model = zoo.build("resnet18", stem="cifar", num_classes=3)
    with pytest.raises(ValueError, match=r"example_input must hold float images .*got dtype torch\.uint8"):
        zoo.export(model, tmp_path / "u8.pt2", example_input=torch.zeros(2, 3, 16, 16, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"image_size=32 and example_input \(2, 3, 16, 16\) both set the traced"):
        zoo.export(model, tmp_path / "both.pt2", example_input=torch.randn(2, 3, 16, 16), image_size=32)
    with pytest.raises(ValueError, match=r"batch=4 and example_input"):
        zoo.export(model, tmp_path / "both.pt2", example_input=torch.randn(2, 3, 16, 16), batch=4)
    assert list(tmp_path.iterdir()) == []


def test_a_fine_tuned_network_is_exported_naming_the_weights_it_was_tuned_from(tmp_path):
    """Before: fine-tuning moves ``weights`` to ``finetuned_from`` (the network is no longer those weights), and
    the export kept neither: the provenance a head reset keeps (``backbone_from``) was lost."""
    from zoo.exporting import read_metadata
    from zoo.vision.finetune import record_origin

    model = zoo.build("resnet18", weights="cifar10")
    record_origin(model)  # what zoo.finetune does to the record before it trains
    meta = read_metadata(zoo.export(model, tmp_path / "tuned.pt2", image_size=16, verify=False))
    assert meta["finetuned_from"] == "resnet18.cifar10" and "weights" not in meta
