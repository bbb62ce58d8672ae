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
    with pytest.raises(ValueError, match="frames must be at least 4"):
        zoo.export(model, tmp_path / "tsn.onnx", frames=3, size=32)
