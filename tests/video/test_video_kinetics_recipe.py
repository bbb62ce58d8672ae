"""Preprocessing of torchvision's Kinetics-400 R(2+1)D weights against torchvision's own transform, and the
recipes of the project's own video weights, which must not move with it."""

from __future__ import annotations

import warnings

import pytest
import torch
from torchvision.models.video import R2Plus1D_18_Weights

import zoo
from zoo import hub
from zoo.video import transforms as VT
from zoo.video.export import _recipe
from zoo.video.r2plus1d import _load_weights

# torch's uint8 bilinear kernel rounds a pixel one level away from torchvision's float one now and then
ONE_LEVEL = 1.001 / 255 / min(VT.KINETICS_STD)


def _clip(h: int = 240, w: int = 320, t: int = 2) -> torch.Tensor:
    """A noisy uint8 ``(C, T, H, W)`` clip of UCF101's frame size: downscaled, antialiasing shows at once."""
    return torch.randint(0, 256, (3, t, h, w), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


def _torchvision(clip: torch.Tensor) -> torch.Tensor:
    """``R2Plus1D_18_Weights.KINETICS400_V1.transforms()`` on ``clip`` (it takes ``(T, C, H, W)``)."""
    return R2Plus1D_18_Weights.KINETICS400_V1.transforms()(clip.permute(1, 0, 2, 3))


def _assert_as_torchvision(ours: torch.Tensor, clip: torch.Tensor) -> None:
    ref = _torchvision(clip)
    assert ours.shape == ref.shape == (3, clip.shape[1], 112, 112)
    diff = (ours - ref).abs()
    assert float(diff.max()) <= ONE_LEVEL, f"max |diff| {float(diff.max()):.3f}, mean {float(diff.mean()):.4f}"


@pytest.mark.parametrize("hw", [(240, 320), (120, 160)])
def test_kinetics_eval_is_torchvisions_kinetics_transform(hw):
    clip = _clip(*hw)
    _assert_as_torchvision(VT.kinetics_eval()(clip), clip)
    assert "antialias=False" in repr(VT.kinetics_eval())


def _kinetics_model(tmp_path) -> torch.nn.Module:
    """r2plus1d_18 loaded as ``weights="kinetics400-v1"`` loads it, from a file of the same shape (no download)."""
    path = tmp_path / "r2plus1d_18-91a641e6.pth"  # torchvision's file is a torch.save'd state dict
    torch.save(zoo.build("r2plus1d_18", num_classes=400).state_dict(), path)
    return _load_weights(zoo.build("r2plus1d_18", num_classes=400), path, hub.get_entry("r2plus1d_18.kinetics400-v1"))


def test_r2plus1d_with_kinetics_weights_preprocesses_as_torchvision(tmp_path):
    model = _kinetics_model(tmp_path)
    clip = _clip()
    # the transform zoo.predict and zoo.evaluate feed the network through
    _assert_as_torchvision(model._transform(False)(clip), clip)
    assert model.video_cfg["resize"] == [128, 171] and model.video_cfg["antialias"] is False
    # torchvision's Kinetics-400 categories name the outputs (they were '0' ... '399')
    from torchvision.models.video import R2Plus1D_18_Weights

    assert model.video_cfg["classes"] == R2Plus1D_18_Weights.KINETICS400_V1.meta["categories"]
    # kept by zoo.save (a fine-tuned Kinetics network is fed as it was pretrained) and by an export
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zoo.save(model, tmp_path / "k.safetensors")
        again = zoo.build("r2plus1d_18", weights=str(tmp_path / "k.safetensors"))
    _assert_as_torchvision(again._transform(False)(clip), clip)
    recipe, _, _ = _recipe(again, None, None, 16)
    assert recipe["resize"] == [128, 171] and recipe["antialias"] is False and recipe["size"] == 112
    assert _recipe(again, None, 56, 16)[0]["resize"] == [64, 86]  # a half-size crop halves the resize
    # the training crop is torchvision's too: the resize is not antialiased
    torch.manual_seed(0)
    train = model._transform(True)(clip)
    resized = torch.nn.functional.interpolate(clip.transpose(0, 1).float(), size=(128, 171), mode="bilinear",
                                              align_corners=False).round().transpose(0, 1)
    windows = [VT.Normalize(VT.KINETICS_MEAN, VT.KINETICS_STD)(resized[..., i:i + 112, j:j + 112] / 255)
               for i in range(17) for j in range(60)]
    best = min(min(float((w - train).abs().max()), float((w.flip(-1) - train).abs().max())) for w in windows)
    assert best <= ONE_LEVEL


def test_project_trained_video_weights_keep_their_antialiased_recipe(tmp_path):
    """The recipes the shipped and saved video weights were trained on produce the tensors they always did."""
    clip = _clip(90, 120)
    tsn = zoo.build("video-tsn", weights="synthetic-actions")
    assert "antialias" not in tsn.video_cfg and tsn.video_cfg["resize"] == 64
    expected = VT.Compose([VT.Resize(64), VT.CenterCrop(64), VT.ToFloat(), VT.Normalize(VT.IMAGENET_MEAN,
                                                                                          VT.IMAGENET_STD)])
    assert torch.equal(tsn._transform(False)(clip), expected(clip))
    scratch = zoo.build("r2plus1d_18", num_classes=3)  # the recipe of r2plus1d_18 trained here, saved
    zoo.save(scratch, tmp_path / "r.safetensors")
    loaded = zoo.build("r2plus1d_18", weights=str(tmp_path / "r.safetensors"))
    expected = VT.Compose([VT.Resize(128, antialias=True), VT.CenterCrop(112), VT.ToFloat(),
                           VT.Normalize(VT.KINETICS_MEAN, VT.KINETICS_STD)])
    for model in (scratch, loaded):
        assert torch.equal(model._transform(False)(_clip()), expected(_clip()))
        assert "antialias" not in _recipe(model, None, None, 16)[0]
