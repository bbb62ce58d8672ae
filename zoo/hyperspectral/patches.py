"""Windows around labelled pixels, cut on the fly from one padded cube.

Indian Pines at 25x25x30 for its 10,249 labelled pixels would be 770 MB of float32 copies; the dataset
instead keeps one padded ``(C, H + 2r, W + 2r)`` tensor (3.4 MB there) and slices a view per item.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from zoo.inputs import whole_number

__all__ = ["PADDING_MODES", "PatchDataset", "pad_cube"]

PADDING_MODES = ("reflect", "symmetric", "edge", "constant")


def pad_cube(cube: np.ndarray, radius: int, mode: str = "reflect") -> np.ndarray:
    """Pad the two spatial axes of an ``(H, W, C)`` cube by ``radius``.

    ``reflect`` mirrors without repeating the edge (numpy ``reflect``), ``symmetric`` repeats it,
    ``edge`` replicates the border pixel, ``constant`` pads zeros (the HybridSN reference code's choice).
    """
    if mode not in PADDING_MODES:
        raise ValueError(f"padding mode must be one of {PADDING_MODES}; got {mode!r}")
    # numpy's own words were "index can't contain negative values" for -1 and "`pad_width` must be of integral
    # type" for 2.0
    radius = whole_number(radius, "radius", minimum=0, hint="pixels of padding on each side")
    cube = np.asarray(cube)
    if cube.ndim != 3:
        raise ValueError(f"pad_cube expected an (H, W, C) cube; got shape {cube.shape}")
    h, w = cube.shape[:2]
    if radius and min(h, w) == 0:
        raise ValueError(f"cannot pad an empty {h}x{w} scene")
    if mode == "reflect" and radius >= min(h, w):
        raise ValueError(f"reflect padding of {radius} needs a scene larger than {radius} pixels; got {h}x{w} "
                         f"(padding='symmetric', 'edge' or 'constant' pad any scene, or use a smaller window)")
    return np.pad(cube, ((radius, radius), (radius, radius), (0, 0)), mode=mode)


class PatchDataset(Dataset):
    """``(window, label)`` pairs around pixel ``coords``.

    Items are ``(x, y)`` with ``x`` of shape ``(1, C, window, window)`` (the 3-D convolution layout;
    ``add_channel_dim=False`` gives ``(C, window, window)``) and ``y`` the class index (label - 1, so
    classes start at 0; unlabelled pixels give -100, the ignore index) where ``labels`` is an ``(H, W)`` label
    map; 1-D ``labels`` are those class indices already, one per pixel of ``coords`` (negative: ignored, as
    -100). ``augment`` applies a random
    quarter turn and mirror per item; ``noise_std`` adds Gaussian noise of that standard deviation to every
    value of the window (in the cube's units: on whitened PCA components, a fraction of each component's
    spread). Both are for training only.
    """

    def __init__(self, cube: np.ndarray, coords: np.ndarray, labels: np.ndarray | None = None, *,
                 window: int = 25, padding: str = "constant", add_channel_dim: bool = True,
                 dtype: torch.dtype = torch.float32, augment: bool = False, noise_std: float = 0.0) -> None:
        # a float (3.0) failed in numpy's padding, a string in a comparison, and True was taken as 1
        window = whole_number(window, "window", hint="an odd number of pixels")
        if window % 2 == 0:
            raise ValueError(f"window must be a positive odd number; got {window}")
        if not noise_std >= 0.0:
            raise ValueError(f"noise_std must be >= 0; got {noise_std}")
        cube = np.asarray(cube)
        if cube.ndim != 3:
            raise ValueError(f"expected an (H, W, C) cube; got shape {cube.shape}")
        coords = np.asarray(coords, dtype=np.int64).reshape(-1, 2)
        h, w = cube.shape[:2]
        if coords.size and (coords.min() < 0 or (coords[:, 0] >= h).any() or (coords[:, 1] >= w).any()):
            raise ValueError(f"pixel coordinates outside the {h}x{w} scene")
        self.radius = window // 2
        self.window = window
        padded = pad_cube(cube, self.radius, padding)  # (H+2r, W+2r, C)
        self.padded = torch.from_numpy(np.ascontiguousarray(padded.transpose(2, 0, 1))).to(dtype)  # (C, H', W')
        self.coords = torch.from_numpy(coords)
        if labels is None:
            self.targets = torch.full((len(coords),), -100, dtype=torch.long)
        else:
            lab = np.asarray(labels)
            if lab.ndim == 2 and lab.shape != (h, w):
                raise ValueError(f"a label map must be (H, W) = {(h, w)} like the cube; got {lab.shape}")
            if lab.ndim == 1 and len(lab) != len(coords):
                raise ValueError(f"1-D labels give one class per pixel of coords: expected {len(coords)}, "
                                 f"got {len(lab)}")
            if lab.ndim not in (1, 2):
                raise ValueError(f"labels must be an (H, W) label map or one class per pixel of coords (1-D); "
                                 f"got shape {lab.shape}")
            tgt = lab[coords[:, 0], coords[:, 1]].astype(np.int64) - 1 if lab.ndim == 2 else lab.astype(np.int64)
            self.targets = torch.from_numpy(np.where(tgt < 0, -100, tgt))
        self.add_channel_dim = add_channel_dim
        self.augment = augment  # random flips / quarter turns of the window (a scene has no "up")
        self.noise_std = float(noise_std)

    @classmethod
    def from_mask(cls, cube: np.ndarray, labels: np.ndarray, mask: np.ndarray, **kwargs) -> PatchDataset:
        """Windows around every pixel where ``mask`` is true (row-major order)."""
        coords = np.argwhere(np.asarray(mask, dtype=bool))
        return cls(cube, coords, labels, **kwargs)

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    def __getitem__(self, i: int):
        r, c = (int(v) for v in self.coords[i])
        # padded row r + radius is pixel r, so the window starts at r
        x = self.padded[:, r:r + self.window, c:c + self.window]  # (C, window, window) view
        if self.augment:
            k, flip = torch.randint(0, 4, (2,)).tolist()
            x = torch.rot90(x, k, dims=(1, 2))
            if flip % 2:
                x = x.flip(2)
        if self.noise_std:
            x = x + self.noise_std * torch.randn_like(x)  # a new tensor: the padded cube stays clean
        if self.add_channel_dim:
            x = x.unsqueeze(0)  # (1, C, window, window)
        return x, self.targets[i]
