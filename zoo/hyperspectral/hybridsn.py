"""HybridSN: the 3D-2D CNN of Roy et al. 2019 for hyperspectral image classification.

Roy, Krishna, Dubey, Chaudhuri, "HybridSN: Exploring 3-D-2-D CNN Feature Hierarchy for Hyperspectral
Image Classification", IEEE GRSL 17(2), 2020. https://arxiv.org/abs/1902.06701

Three 3-D convolutions learn joint spectral-spatial features, one 2-D convolution mixes the spectral
feature maps, then three dense layers with dropout classify the centre pixel of the window.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config import renamed_fields
from zoo.engine.head import swap_classifier
from zoo.hyperspectral.patches import PADDING_MODES
from zoo.hyperspectral.scene_model import SPECTRAL_NORMS, SceneClassifierMixin
from zoo.inputs import whole_number

__all__ = ["HybridSN", "HybridSNConfig"]


@renamed_fields(n_classes="num_classes")
@dataclass(frozen=True)
class HybridSNConfig:
    """The settings of a HybridSN (Roy et al. 2019); the defaults are the paper's Indian Pines ones."""

    n_bands: int = 30
    """Spectral depth of the input window: the PCA components the scene is reduced to."""
    num_classes: int = 16
    """Outputs of the classifier: the scene's class ids 1..num_classes (0 is unlabelled)."""
    window: int = 25
    """Spatial side of the input window (pixels)."""
    dropout: float = 0.4
    padding: str = "constant"
    """How windows at the scene border are padded: ``constant`` (zeros, as the reference code), ``reflect``,
    ``symmetric`` or ``edge`` (:func:`zoo.hyperspectral.patches.pad_cube`)."""
    spectral_norm: str = "none"
    """``l2``: divide every pixel's spectrum by its L2 norm before band standardisation and PCA, so that a
    field that is brighter or darker overall reduces to the same components (what carries a network
    across fields: the disjoint Indian Pines split, benchmarks/hsi_recipe.py); ``none``: the paper's."""


class HybridSN(SceneClassifierMixin, nn.Module):
    """Input ``(B, 1, n_bands, window, window)`` (or ``(B, n_bands, window, window)``) -> logits ``(B, num_classes)``."""

    registry_name = "hybridsn"
    # (out_channels, spectral kernel) of the three 3-D convolutions; spatial kernels are 3x3 (paper Fig. 1)
    _SPEC3D = ((8, 7), (16, 5), (32, 3))
    min_n_bands = 1 + sum(k - 1 for _, k in _SPEC3D)  # each 3-D convolution shortens the spectral axis by k - 1
    min_n_bands_layers = "its three 3-D convolutions"

    def __init__(self, config: HybridSNConfig | None = None) -> None:
        nn.Module.__init__(self)
        c = config or HybridSNConfig()
        self.padding = c.padding
        depth, side = c.n_bands, c.window
        if depth < self.min_n_bands or side - 8 < 1:
            raise ValueError(
                f"HybridSN needs n_bands >= {self.min_n_bands} and window >= 9 (three 3x3 3-D convolutions and a "
                f"3x3 2-D convolution); got n_bands={depth}, window={side}"
            )
        if side % 2 == 0:  # a window is centred on its pixel: built, it would fail only in zoo.train, after the PCA fit
            raise ValueError(f"HybridSN's window is centred on its pixel, so it must be odd; got window={side}")
        if c.padding not in PADDING_MODES:
            raise ValueError(f"padding must be one of {PADDING_MODES}; got {c.padding!r}")
        if c.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {c.num_classes}")
        if c.spectral_norm not in SPECTRAL_NORMS:
            raise ValueError(f"spectral_norm must be one of {SPECTRAL_NORMS}, got {c.spectral_norm!r}")
        self.config = c
        layers: list[nn.Module] = []
        in_ch = 1
        for out_ch, k in self._SPEC3D:
            layers += [nn.Conv3d(in_ch, out_ch, kernel_size=(k, 3, 3)), nn.ReLU(inplace=True)]
            in_ch, depth, side = out_ch, depth - k + 1, side - 2
        self.conv3d = nn.Sequential(*layers)
        self._mixed = in_ch * depth  # spectral feature maps folded into 2-D channels
        self.conv2d = nn.Sequential(nn.Conv2d(self._mixed, 64, kernel_size=3), nn.ReLU(inplace=True))
        side -= 2
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * side * side, 256),
            nn.ReLU(inplace=True),
            nn.Dropout(c.dropout),
            nn.Linear(256, 128),
            nn.ReLU(inplace=True),
            nn.Dropout(c.dropout),
            nn.Linear(128, c.num_classes),
        )

    def get_classifier(self) -> nn.Linear:
        """The output layer (timm's name, as every zoo classifier has it: :mod:`zoo.engine.head`)."""
        return self.classifier[-1]

    def reset_classifier(self, num_classes: int) -> None:
        """A fresh output layer of ``num_classes`` outputs (timm's name: :func:`zoo.engine.head.reset_classifier`),
        recorded in the config, which ``zoo.save`` writes: the file rebuilds a network of this size."""
        num_classes = whole_number(num_classes, "num_classes", minimum=2, hint="class ids 1..num_classes")
        swap_classifier(self, num_classes)
        self.config = replace(self.config, num_classes=num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        if x.dim() == 4:  # (B, C, H, W) -> (B, 1, C, H, W)
            x = x.unsqueeze(1)
        if x.dim() != 5 or x.shape[1] != 1 or tuple(x.shape[2:]) != (c.n_bands, c.window, c.window):
            raise ValueError(
                f"HybridSN expects input (B, 1, {c.n_bands}, {c.window}, {c.window}); got {tuple(x.shape)}"
            )
        x = self.conv3d(x)  # (B, 32, D', S, S)
        b, ch, d, h, w = x.shape
        x = x.reshape(b, ch * d, h, w)  # (B, 32*D', S, S)
        x = self.conv2d(x)  # (B, 64, S-2, S-2)
        return self.classifier(x)  # (B, num_classes)

    def dense_forward(self, padded: torch.Tensor) -> torch.Tensor:
        """Logits of every pixel of a scene at once (eval mode: dropout off).

        ``padded``: the reduced cube ``(n_bands, H + window - 1, W + window - 1)`` padded by
        ``window // 2`` as the windows are; returns ``(num_classes, H, W)``, pixel ``(r, c)`` equal to
        ``forward`` of the window at ``padded[:, r:r + window, c:c + window]``.
        """
        c = self.config
        if padded.dim() != 3 or padded.shape[0] != c.n_bands or min(padded.shape[1:]) < c.window:
            raise ValueError(f"dense_forward expects a padded cube ({c.n_bands}, >= {c.window}, >= {c.window}); "
                             f"got {tuple(padded.shape)}")
        x = self.conv3d(padded[None, None])  # (1, 32, D', H'-6, W'-6)
        b, ch, d, h, w = x.shape
        x = self.conv2d(x.reshape(b, ch * d, h, w))  # (1, 64, H'-8, W'-8)
        first, second, third = self.classifier[1], self.classifier[4], self.classifier[7]
        side = c.window - 8
        # Flatten orders (64, S, S) row-major, the layout of a conv kernel (out, in, kh, kw)
        x = F.relu(F.conv2d(x, first.weight.view(first.out_features, 64, side, side), first.bias))  # (1, 256, H, W)
        x = F.relu(F.conv2d(x, second.weight[:, :, None, None], second.bias))  # (1, 128, H, W)
        return F.conv2d(x, third.weight[:, :, None, None], third.bias)[0]  # (num_classes, H, W)
