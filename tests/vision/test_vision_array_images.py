"""Data sets of uint8 NumPy images (cv2 / ``np.asarray(pil)`` arrays, as users' own Datasets give them): trained,
fine-tuned and scored as the same images given as PIL images, as zoo.predict already read them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import Dataset

import zoo

FIT = {"epochs": 1, "batch_size": 4, "lr": 0.05, "optimizer": "sgd", "progress": False, "augment": False,
       "device": "cpu", "amp": None, "seed": 0}


class _Samples(Dataset):
    """``(image, label)`` samples, or ``{"image": image, "label": label}`` with ``dicts``."""

    def __init__(self, images: list, dicts: bool = False) -> None:
        self.images, self.dicts = images, dicts

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        return {"image": self.images[i], "label": i % 2} if self.dicts else (self.images[i], i % 2)


def _arrays() -> list[np.ndarray]:
    """Eight uint8 images in every layout zoo.predict takes: (H, W, 3), (H, W), (H, W, 1), (H, W, 4)."""
    rng = np.random.default_rng(0)
    rgb = [(rng.random((20, 24, 3)) * 80 + 120 * (i % 2)).astype(np.uint8) for i in range(8)]
    rgba = np.concatenate([rgb[3], (rng.random((20, 24, 1)) * 255).astype(np.uint8)], axis=2)
    return [rgb[0], rgb[1], rgb[2][..., 0], rgba, rgb[4][..., 1:2], *rgb[5:]]


def _as_pil(a: np.ndarray) -> Image.Image:
    return Image.fromarray(a[..., 0] if a.ndim == 3 and a.shape[2] == 1 else a)  # L, RGB or RGBA


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return zoo.build("resnet18", stem="cifar", num_classes=2)


@pytest.mark.parametrize("dicts", [False, True])
def test_numpy_image_datasets_train_finetune_and_score_as_pil_ones(dicts):
    """Before: zoo.finetune / zoo.train / zoo.evaluate failed inside the first convolution, "expected input[4, 20,
    24, 3] to have 3 channels, but got 20 channels instead", where zoo.predict took the same arrays."""
    arrays = _Samples(_arrays(), dicts)
    pils = _Samples([_as_pil(a) for a in _arrays()], dicts)
    model = _model()
    scores = zoo.evaluate(model, arrays, batch_size=4, amp=None)
    assert scores == pytest.approx(zoo.evaluate(model, pils, batch_size=4, amp=None), rel=1e-5)
    for run in (zoo.train, zoo.finetune):
        how = {"strategy": "full"} if run is zoo.finetune else {}  # a random backbone: no frozen-backbone warning
        by_array, by_pil = run(_model(), arrays, **FIT, **how), run(_model(), pils, **FIT, **how)
        assert by_array.history[-1]["train_loss"] == pytest.approx(by_pil.history[-1]["train_loss"], rel=1e-5)
        for a, b in zip(by_array.model.state_dict().values(), by_pil.model.state_dict().values()):
            torch.testing.assert_close(a, b)
        assert [r["index"] for r in zoo.predict(by_array.model, arrays, amp=None)] == \
            [r["index"] for r in zoo.predict(by_pil.model, pils, amp=None)]


def test_numpy_arrays_in_torchs_channel_order_are_told_how_to_go_in():
    """A uint8 (C, H, W) array failed inside the first convolution, naming neither the layout nor the fix; float
    arrays (already preprocessed) are passed on as they are."""
    from zoo.vision.data import with_network_transforms

    chw = _Samples([a.transpose(2, 0, 1) for a in _arrays() if a.ndim == 3 and a.shape[2] == 3])
    for run in (lambda: zoo.evaluate(_model(), chw), lambda: zoo.finetune(_model(), chw, strategy="full", **FIT)):
        with pytest.raises(ValueError, match=r"sample 0's numpy image has shape \(3, 20, 24\) and dtype uint8: an "
                                             r"image is \(H, W\) or \(H, W, 3\|4\) uint8; a \(C, H, W\) image goes in "
                                             r"as a.transpose\(1, 2, 0\), of shape \(20, 24, 3\)"):
            run()
    floats = _Samples([np.zeros((3, 20, 24), np.float32)] * 4)
    assert with_network_transforms(_model(), floats, train=False) is floats
