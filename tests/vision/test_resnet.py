"""ResNet18 builder and surgery: stems, head replacement and loading reports, in_chans adaptation, transforms."""

from __future__ import annotations

import warnings

import pytest
import torch
from PIL import Image

import zoo
from zoo import hub
from zoo.vision.resnet import adapt_input_conv
from zoo.vision.transforms import transforms_for


def _saved(tmp_path, **config):
    torch.manual_seed(0)
    model = zoo.build("resnet18", **config)
    path = hub.save_weights(model, tmp_path / "w.safetensors")
    return model, path


def test_default_build_is_imagenet_shaped_torchvision_resnet18():
    from torchvision.models import ResNet

    model = zoo.build("resnet18")
    assert isinstance(model, ResNet)
    assert model.fc.out_features == 1000 and model.conv1.kernel_size == (7, 7) and model.conv1.stride == (2, 2)
    assert isinstance(model.maxpool, torch.nn.MaxPool2d)
    assert sum(p.numel() for p in model.parameters()) == 11_689_512  # torchvision's resnet18
    assert model.pretrained_cfg["input_size"] == [3, 224, 224]


def test_cifar_stem_and_bad_config():
    model = zoo.build("resnet18", stem="cifar", num_classes=10)
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert isinstance(model.maxpool, torch.nn.Identity)
    assert model(torch.randn(2, 3, 8, 8)).shape == (2, 10)
    with pytest.raises(ValueError, match="stem must be one of"):
        zoo.build("resnet18", stem="tiny")
    with pytest.raises(TypeError, match="num_clases"):
        zoo.build("resnet18", num_clases=3)


def test_same_head_loads_strictly_with_a_clean_report(tmp_path):
    src, path = _saved(tmp_path, stem="cifar", num_classes=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean load says nothing
        model = zoo.build("resnet18", weights=str(path), stem="cifar", num_classes=10)
    assert model.load_report.ok and len(model.load_report.loaded) == len(src.state_dict())
    for k, v in src.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k


def test_other_num_classes_replaces_the_head_and_says_so(tmp_path):
    src, path = _saved(tmp_path, stem="cifar", num_classes=10)
    with pytest.warns(UserWarning, match=r"fc\.weight"):
        model = zoo.build("resnet18", weights=str(path), stem="cifar", num_classes=3)
    assert model.fc.weight.shape == (3, 512)
    assert {k for k, _, _ in model.load_report.reinitialized} == {"fc.weight", "fc.bias"}
    for k, v in src.state_dict().items():
        if not k.startswith("fc."):
            assert torch.equal(model.state_dict()[k], v), k


@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_a_file_without_its_config_builds_with_the_head_it_holds(tmp_path, suffix):
    """A torchvision state dict (torch.save, or zoo.save of a plain torchvision ResNet) of a 4-class model
    built a 1000-class head and dropped the trained one with a warning, unless num_classes was given."""
    import warnings

    import torchvision

    src = torchvision.models.resnet18(num_classes=4)
    path = tmp_path / f"tv4{suffix}"
    torch.save(src.state_dict(), path) if suffix == ".pth" else zoo.save(src, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is re-initialised
        model = zoo.build("resnet18", weights=str(path))
    assert model.fc.out_features == 4 and model.config.num_classes == 4
    for k, v in src.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    with pytest.warns(UserWarning, match=r"fc\.weight"):  # asked for another head: a fresh one, as before
        assert zoo.build("resnet18", weights=str(path), num_classes=7).fc.out_features == 7


def test_mismatch_outside_the_head_is_an_error_naming_keys_and_shapes(tmp_path):
    _, path = _saved(tmp_path, stem="cifar", num_classes=10)
    with pytest.raises(ValueError, match=r"conv1\.weight.*\[64, 3, 3, 3\].*\[64, 3, 7, 7\]"):
        zoo.build("resnet18", weights=str(path), stem="imagenet", num_classes=10)
    state = hub.load_state_dict(path)
    del state["layer1.0.bn1.running_mean"]
    hub.save_weights(state, tmp_path / "missing.safetensors")
    with pytest.raises(ValueError, match=r"layer1\.0\.bn1\.running_mean"):
        zoo.build("resnet18", weights=str(tmp_path / "missing.safetensors"), stem="cifar", num_classes=10)


@pytest.mark.parametrize("stem", ["cifar", "imagenet"])
def test_in_chans_adaptation_keeps_rgb_output_with_zero_extra_channels(tmp_path, stem):
    src, path = _saved(tmp_path, stem=stem, num_classes=4)
    model5 = zoo.build("resnet18", weights=str(path), stem=stem, num_classes=4, in_chans=5).eval()
    src.eval()
    assert model5.conv1.weight.shape[1] == 5
    x = torch.randn(2, 3, 32, 32)
    x5 = torch.cat([x, torch.zeros(2, 2, 32, 32)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model5(x5), src(x), rtol=1e-5, atol=1e-5)
        # the extra channels are live (they got filters), so non-zero extra bands change the output
        assert not torch.allclose(model5(x5 + torch.cat([torch.zeros_like(x), torch.ones(2, 2, 32, 32)], 1)), src(x))


def test_in_chans_one_is_the_rgb_net_on_a_grey_image(tmp_path):
    src, path = _saved(tmp_path, stem="cifar", num_classes=4)
    model1 = zoo.build("resnet18", weights=str(path), stem="cifar", num_classes=4, in_chans=1).eval()
    grey = torch.randn(2, 1, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(model1(grey), src.eval()(grey.expand(-1, 3, -1, -1)), rtol=1e-4, atol=1e-4)


def test_a_grey_network_adapted_to_rgb_reads_a_grey_image_given_as_rgb_the_same():
    """Before: a one-channel source kept its filter on the first channel and a third on the others ([w, w/3, w/3]):
    the grey image given as RGB reached conv1 at 5/3 of the trained response."""
    w = torch.randn(8, 1, 3, 3)
    adapted = adapt_input_conv(3, w)
    grey = torch.randn(2, 1, 9, 9)
    torch.testing.assert_close(torch.nn.functional.conv2d(grey.expand(-1, 3, -1, -1), adapted),
                               torch.nn.functional.conv2d(grey, w), rtol=1e-5, atol=1e-5)


def test_in_chans_one_from_a_plain_rgb_state_dict_averages_the_imagenet_statistics(tmp_path):
    """Before: a 3-channel file without metadata (torchvision's .pth, a plain state dict) built with in_chans=1
    normalised with mean 0 / std 1, not the averaged RGB statistics the RGB build of the file uses."""
    torch.save(zoo.build("resnet18", num_classes=4).state_dict(), tmp_path / "plain.pth")
    rgb = zoo.build("resnet18", weights=str(tmp_path / "plain.pth"), num_classes=4)
    grey = zoo.build("resnet18", weights=str(tmp_path / "plain.pth"), num_classes=4, in_chans=1)
    assert rgb.pretrained_cfg["mean"] == pytest.approx([0.485, 0.456, 0.406])
    assert grey.pretrained_cfg["mean"] == pytest.approx([sum(rgb.pretrained_cfg["mean"]) / 3])
    assert grey.pretrained_cfg["std"] == pytest.approx([sum(rgb.pretrained_cfg["std"]) / 3])


@pytest.mark.parametrize(("given", "mode"), [("BICUBIC", "bicubic"), ("lanczos", "lanczos"), ("bicubic", "bicubic")])
def test_the_interpolation_a_cfg_names_is_the_one_used_in_any_spelling(given, mode):
    """Before: every name but bilinear, bicubic and nearest in lower case (and torchvision's own enum) silently
    became bilinear."""
    from torchvision.transforms import InterpolationMode

    from zoo.vision.transforms import transforms_for

    cfg = {"input_size": [3, 8, 8], "resize": 10, "mean": [0.5] * 3, "std": [0.5] * 3}
    for value in (given, InterpolationMode(mode)):
        resize = transforms_for({**cfg, "interpolation": value}).transforms[0]
        assert resize.interpolation == InterpolationMode(mode)
    with pytest.raises(ValueError, match=r"interpolation 'bicubicc' is none of torchvision's InterpolationMode: "
                                         r"'nearest', .*'lanczos'"):
        transforms_for({**cfg, "interpolation": "bicubicc"})


def test_adapt_input_conv_shapes_and_errors():
    w = torch.randn(8, 3, 3, 3)
    for c in (1, 2, 3, 4, 7):
        assert adapt_input_conv(c, w).shape == (8, c, 3, 3)
    assert torch.equal(adapt_input_conv(7, w)[:, :3], w)
    with pytest.raises(ValueError, match="expected conv weights"):
        adapt_input_conv(4, torch.randn(8, 3))


def test_transforms_follow_the_model_cfg_and_train_is_random():
    img = Image.fromarray(torch.randint(0, 255, (40, 50, 3), dtype=torch.uint8).numpy())
    cifar = zoo.build("resnet18", stem="cifar", num_classes=10)
    ev = transforms_for(cifar)
    assert ev(img).shape == (3, 32, 32) and torch.equal(ev(img), ev(img))
    assert transforms_for(cifar, image_size=16)(img).shape == (3, 16, 16)
    tr = transforms_for(cifar, train=True)
    torch.manual_seed(0)
    outs = [tr(img) for _ in range(4)]
    assert outs[0].shape == (3, 32, 32) and any(not torch.equal(outs[0], o) for o in outs[1:])
    big = transforms_for(zoo.build("resnet18"), train=False)
    assert big(img).shape == (3, 224, 224)
    cfg = dict(cifar.pretrained_cfg, mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5])
    x = transforms_for(cfg)(Image.new("RGB", (32, 32), (255, 0, 255)))
    assert torch.allclose(x[:, 0, 0], torch.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="missing 'mean'"):
        transforms_for({"input_size": [3, 8, 8], "std": [1, 1, 1]})


def test_weights_meta_sets_the_transform(tmp_path):
    from types import SimpleNamespace

    from zoo.vision.resnet import _load_weights

    _, path = _saved(tmp_path, stem="cifar", num_classes=2)
    entry = SimpleNamespace(name="resnet18.test", meta={
        "transforms": {"resize": 40, "crop": 36, "mean": [0.1, 0.2, 0.3], "std": [0.5, 0.5, 0.5]},
        "classes": ["a", "b"]})
    model = _load_weights(zoo.build("resnet18", stem="cifar", num_classes=2), path, entry)
    cfg = model.pretrained_cfg
    assert cfg["input_size"] == [3, 36, 36] and cfg["resize"] == 40 and cfg["mean"] == [0.1, 0.2, 0.3]
    assert cfg["classes"] == ["a", "b"] and cfg["weights"] == "resnet18.test"
    assert transforms_for(model)(Image.new("RGB", (50, 60))).shape == (3, 36, 36)
