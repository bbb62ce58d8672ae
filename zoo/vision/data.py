"""Image folders as they are found in the wild (torchvision ``ImageFolder`` layout: ``root/<class>/<file>``).

What real folders contain and what happens to it:

* non-image files (``imageNotFound.gif`` in hymenoptera, ``.DS_Store``, notes) -> ignored, counted in
  ``skipped["non_image"]`` (extensions as ``torchvision.datasets.folder.IMG_EXTENSIONS``, any case);
* spaces and unicode in names -> plain ``pathlib`` paths, nothing to quote;
* grayscale, palette, CMYK, RGBA/LA images -> RGB (transparent pixels composited on white);
* a corrupt or truncated image -> skipped with one warning and counted in ``skipped["corrupt"]``;
  ``strict=True`` raises instead, naming the file;
* a class folder with no images -> ``ValueError`` before any training starts.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PIL import Image
from torch.utils.data import Dataset
from torchvision.datasets.folder import IMG_EXTENSIONS

__all__ = ["IMG_EXTENSIONS", "ImageFolderDataset", "find_split", "load_image_folders", "open_rgb", "to_rgb"]

SPLIT_NAMES = {"train": ("train", "training"), "val": ("val", "valid", "validation", "test")}


def to_rgb(img: Image.Image) -> Image.Image:
    """Any PIL mode -> RGB; images with transparency are composited on white (not on black, which a plain
    ``convert("RGB")`` of RGBA gives for fully transparent pixels)."""
    if img.mode == "RGB":
        return img
    if img.mode == "P" and "transparency" in img.info:
        img = img.convert("RGBA")
    if img.mode in ("RGBA", "LA", "PA"):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")  # L, 1, I, F, P, CMYK, YCbCr, ...


def open_rgb(path: str | os.PathLike) -> Image.Image:
    """Decode an image file fully and return it as RGB (raises ``OSError`` for a corrupt file)."""
    with Image.open(path) as img:
        img.load()
        return to_rgb(img)


def _is_image(path: Path) -> bool:
    return path.suffix.lower() in IMG_EXTENSIONS


class ImageFolderDataset(Dataset):
    """``root/<class>/<image>`` -> ``(transform(rgb_image), class_index)``.

    Args:
        root: the folder holding one sub-folder per class.
        transform: applied to the RGB PIL image (e.g. :func:`zoo.vision.transforms.transforms_for`).
        classes: class names to use, in index order (give the train split's to the val split so the
            indices agree); default: sorted sub-folder names.
        strict: raise on a corrupt image instead of skipping it.
        verify: decode every image once while scanning, so that corrupt files are found before
            training (cheap next to an epoch; ``False`` defers errors to loading time).
    """

    def __init__(
        self,
        root: str | os.PathLike,
        transform: Callable[[Image.Image], Any] | None = None,
        *,
        classes: Sequence[str] | None = None,
        strict: bool = False,
        verify: bool = True,
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"image folder not found: {self.root} (expected root/<class>/<image files>)")
        found = sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if classes is None:
            classes = found
        if not classes:
            raise ValueError(f"{self.root}: no class sub-folders; expected root/<class>/<image files>")
        missing = [c for c in classes if not (self.root / c).is_dir()]
        if missing:
            raise ValueError(f"{self.root}: class folder(s) missing: {missing} (classes: {list(classes)})")
        self.classes = list(classes)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.transform = transform
        self.strict = strict
        self.skipped: dict[str, list[str]] = {"non_image": [], "corrupt": []}
        self.samples: list[tuple[str, int]] = []
        empty = []
        for cls in self.classes:
            files = sorted(p for p in (self.root / cls).rglob("*") if p.is_file() and not p.name.startswith("."))
            n_before = len(self.samples)
            for path in files:
                if not _is_image(path):
                    self.skipped["non_image"].append(str(path))
                    continue
                if verify and not self._check(path):
                    continue
                self.samples.append((str(path), self.class_to_idx[cls]))
            if len(self.samples) == n_before:
                empty.append(cls)
        if empty:
            raise ValueError(
                f"{self.root}: class folder(s) with no usable images: {empty}; every class needs at least one "
                f"image ({', '.join(sorted(IMG_EXTENSIONS))})"
            )
        if self.skipped["corrupt"]:
            warnings.warn(
                f"{self.root}: skipped {len(self.skipped['corrupt'])} corrupt image(s): "
                f"{self.skipped['corrupt'][:5]}{' ...' if len(self.skipped['corrupt']) > 5 else ''} "
                "(strict=True raises instead)",
                stacklevel=2,
            )
        self.targets = [t for _, t in self.samples]

    def _check(self, path: Path) -> bool:
        try:
            with Image.open(path) as img:
                img.load()
        except (OSError, ValueError, SyntaxError) as err:  # PIL raises these for bad files
            if self.strict:
                raise ValueError(f"corrupt image {path}: {err}") from err
            self.skipped["corrupt"].append(str(path))
            return False
        return True

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        path, target = self.samples[index]
        try:
            img = open_rgb(path)
        except (OSError, ValueError, SyntaxError) as err:
            raise ValueError(f"cannot decode image {path}: {err}") from err
        return (self.transform(img) if self.transform is not None else img), target

    def __repr__(self) -> str:
        return (f"ImageFolderDataset({str(self.root)!r}, {len(self)} images, {len(self.classes)} classes, "
                f"skipped {len(self.skipped['non_image'])} non-image + {len(self.skipped['corrupt'])} corrupt)")


def find_split(root: Path, split: str) -> Path | None:
    for name in SPLIT_NAMES[split]:
        if (root / name).is_dir():
            return root / name
    return None


def load_image_folders(
    root: str | os.PathLike,
    *,
    train_transform: Callable | None = None,
    eval_transform: Callable | None = None,
    strict: bool = False,
) -> tuple[ImageFolderDataset, ImageFolderDataset | None]:
    """``root/train/<class>/...`` (+ ``root/val`` or ``valid``/``test``) -> ``(train, val or None)`` with shared
    class indices. A ``root`` without a ``train/`` folder is itself the training set."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"data folder not found: {root} (expected DIR/train/<class>/... and DIR/val/<class>/...)")
    train_dir = find_split(root, "train") or root
    train = ImageFolderDataset(train_dir, train_transform, strict=strict)
    val_dir = find_split(root, "val") if train_dir != root else None
    val = ImageFolderDataset(val_dir, eval_transform, classes=train.classes, strict=strict) if val_dir else None
    return train, val
