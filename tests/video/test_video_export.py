"""Video export: TSN's graph takes any number of segments (dynamic T) and batch; R(2+1)D's keeps the traced T."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import zoo
from zoo.exporting import read_metadata

ort = pytest.importorskip("onnxruntime")


def test_tsn_onnx_takes_other_clip_lengths(tmp_path):
    torch.manual_seed(0)
    model = zoo.build("video-tsn", num_classes=5, modality="rgbdiff").eval()
    res = zoo.export(model, tmp_path / "tsn.onnx", frames=4, size=32)
    assert res.max_abs_diff <= res.atol == 1e-4
    assert read_metadata(res.path)["clips"] == "(B, 3, T, 32, 32) float32, normalised"
    session = ort.InferenceSession(str(res.path), providers=["CPUExecutionProvider"])
    for b, t in ((1, 9), (3, 3)):
        x = torch.randn(b, 3, t, 32, 32)
        (logits,) = session.run(None, {"clips": x.numpy()})
        with torch.no_grad():
            np.testing.assert_allclose(logits, model(x).numpy(), atol=1e-4, rtol=1e-4)


def test_export_options_are_checked(tmp_path):
    model = zoo.build("video-tsn", num_classes=5, modality="rgbdiff")
    with pytest.raises(ValueError, match="frames must be at least 3"):
        zoo.export(model, tmp_path / "tsn.onnx", frames=2, size=32)


def test_a_two_segment_recipe_exports_with_its_defaults(tmp_path):
    """`zoo train video-tsn --num-segments 2` then `zoo export`: the recipe's 2 segments are the least an RGB
    TSN takes, so the other segment counts checked are above it."""
    model = zoo.build("video-tsn", num_classes=2, stem="cifar").eval()
    model.video_cfg.update(size=16, resize=20, num_segments=2)
    res = zoo.export(model, tmp_path / "tsn.pt2", "torch.export")
    assert read_metadata(res.path)["num_segments"] == 2 and res.max_abs_diff <= res.atol


def test_defaults_and_metadata_follow_the_input_recipe(tmp_path):
    from zoo.exporting.exporters import spec_for

    model = zoo.build("video-tsn", num_classes=2)
    model.video_cfg.update(size=24, resize=30, num_segments=4, classes=["a", "b"])
    res = zoo.export(model, tmp_path / "tsn.pt2", "torch.export")  # no frames/size: the recipe's
    meta = read_metadata(res.path)
    assert meta["clips"] == "(B, 3, T, 24, 24) float32, normalised" and meta["classes"] == ["a", "b"]
    assert (meta["size"], meta["resize"], meta["num_segments"]) == (24, 30, 4)
    assert meta["mean"] == model.video_cfg["mean"] and meta["std"] == model.video_cfg["std"]
    clip = torch.randn(1, 3, 4, 24, 24)  # what zoo.predict feeds this model
    with torch.no_grad():
        np.testing.assert_allclose(torch.export.load(str(res.path)).module()(clip).numpy(), model.eval()(clip).numpy(),
                                   atol=1e-4, rtol=1e-4)
    r21d = zoo.build("r2plus1d_18", num_classes=3)
    r21d.video_cfg.update(frames_per_clip=6, size=40, resize=48)
    spec = spec_for(r21d, {})  # its T is fixed at the recipe's frames_per_clip (was always 16)
    assert spec.graphs[0].inputs[0].shape[2:] == (6, 40, 40)
    assert (spec.metadata["frames_per_clip"], spec.metadata["size"], spec.metadata["resize"]) == (6, 40, 48)
    spec = spec_for(r21d, {"frames": 8, "size": 20})  # the graph's own T and crop, the resize scaled with it
    assert (spec.metadata["frames_per_clip"], spec.metadata["size"], spec.metadata["resize"]) == (8, 20, 24)
    with pytest.raises(ValueError, match="export option size must be an int >= 1, got 0"):
        spec_for(model, {"size": 0})


def test_a_half_tsn_takes_float16_clips(tmp_path):
    """VideoTSN.half() was traced on float32 clips ('Input type (torch.FloatTensor) and weight type
    (torch.HalfTensor) should be the same')."""
    torch.manual_seed(0)
    model = zoo.build("video-tsn", num_classes=5).half()
    res = zoo.export(model, tmp_path / "tsn.pt2", frames=3, size=32)
    assert res.format == "torch.export" and res.verified and res.max_abs_diff <= res.atol
    assert read_metadata(res.path)["clips"] == "(B, 3, T, 32, 32) float16, normalised"


def test_a_head_replaced_by_hand_is_described_without_the_recipes_class_names(tmp_path):
    """Before: ``model.fc = nn.Linear(512, 2)`` on the 5-class synthetic-actions TSN (torchvision's head idiom)
    was exported with the recipe's five class names beside two logits: a deployment reading classes[argmax]
    named the clips wrongly."""
    from torch import nn

    from zoo.exporting.exporters import spec_for

    model = zoo.build("video-tsn", weights="synthetic-actions")
    assert len(spec_for(model, {"frames": 3, "size": 16}).metadata["classes"]) == 5  # as loaded: kept
    model.fc = nn.Linear(model.fc.in_features, 2)
    meta = spec_for(model, {"frames": 3, "size": 16}).metadata
    assert "classes" not in meta and meta["logits"] == "(B, 2)" and "5 class names" in meta["classes_dropped"]
    assert len(model.video_cfg["classes"]) == 5  # the model's own record is left as it was
    r21d = zoo.build("r2plus1d_18", num_classes=3)
    r21d.video_cfg["classes"] = ["a", "b", "c"]
    assert spec_for(r21d, {"frames": 2, "size": 16}).metadata["classes"] == ["a", "b", "c"]
    r21d.fc = nn.Linear(r21d.fc.in_features, 4)
    meta = spec_for(r21d, {"frames": 2, "size": 16}).metadata
    assert "classes" not in meta and meta["logits"] == "(B, 4)"
