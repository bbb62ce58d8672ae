"""Image folders as they are found in the wild (torchvision ``ImageFolder`` layout: ``root/<class>/<file>``).

What real folders contain and what happens to it:

* non-image files (``imageNotFound.gif`` in hymenoptera, ``.DS_Store``, notes) -> ignored, counted in
  ``skipped["non_image"]`` (extensions as ``torchvision.datasets.folder.IMG_EXTENSIONS``, any case);
* spaces and unicode in names -> plain ``pathlib`` paths, nothing to quote; a class folder named in another
  Unicode normalisation than ``classes`` (``val/`` unzipped on macOS, NFD; ``train/`` on Linux, NFC) is that
  class;
* hidden files and everything in hidden folders (``._x.jpg``, ``.ipynb_checkpoints/``) -> ignored, as
  ``zoo.predict`` ignores them;
* grayscale, palette, CMYK, RGBA/LA images -> RGB (transparent pixels composited on white);
* 16-bit and 32-bit integer / float images (16-bit PNG, scientific TIFF) -> scaled to 8 bits over their
  bit depth (``/ 257`` for 16-bit), not clipped at 255; a float or 32-bit image outside the range its
  type implies is min-max scaled with a warning naming the file;
* photos with an EXIF orientation tag (phones) -> turned upright (``exif_transpose=False`` keeps them as
  stored);
* a corrupt or truncated image -> skipped with one warning and counted in ``skipped["corrupt"]``;
  an image above Pillow's decompression-bomb limit -> ``skipped["too_large"]``; ``strict=True`` raises
  instead, naming the file;
* a class folder with no images -> ``ValueError`` before any training starts; a class folder unknown to
  the ``classes`` given (a val class train does not have) -> ``ValueError`` naming it, or with
  ``unknown_classes="skip"`` a warning and ``skipped["unknown_class"]``.
"""

from __future__ import annotations

import os
import unicodedata
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps
from torch.utils.data import DataLoader, Dataset
from torchvision.datasets.folder import IMG_EXTENSIONS

from zoo._stacklevel import user_stacklevel
from zoo.inputs import SPLIT_NAMES, class_folders, split_folder, visible_files

__all__ = ["IMG_EXTENSIONS", "ImageFolderDataset", "LabelsByName", "dataset_classes", "find_split", "labels_by_name",
           "load_image_folders", "open_rgb", "scored_folder", "to_rgb"]



_HIGH_DEPTH = {"I;16": 65535.0, "I;16B": 65535.0, "I;16L": 65535.0, "I;16N": 65535.0, "I": 65535.0, "F": 1.0}


def _to_8bit(img: Image.Image, name: str) -> Image.Image:
    """A 16/32-bit integer or float single-channel image as 8-bit ``L``, scaled over its bit depth.

    16-bit modes span 0..65535 (a 16-bit PNG that Pillow opens as 32-bit ``I`` too, when its values fit);
    floats span 0..1. Values outside that range have no known scale: they are min-max scaled, with a
    warning, rather than clipped.
    """
    import numpy as np

    arr = np.asarray(img, dtype=np.float64)
    top = _HIGH_DEPTH[img.mode]
    lo, hi = (float(arr.min()), float(arr.max())) if arr.size else (0.0, 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"image {name} ({img.mode}) holds NaN or infinite values")
    if lo < 0 or hi > top:
        warnings.warn(f"image {name}: {img.mode} values span [{lo:g}, {hi:g}], outside the 0..{top:g} its type "
                      f"implies; scaled that span to 0..255", stacklevel=user_stacklevel())
        arr, top = arr - lo, max(hi - lo, 1e-12)
    return Image.fromarray(np.rint(arr * (255.0 / top)).astype(np.uint8), mode="L")


def to_rgb(img: Image.Image, *, name: str = "image") -> Image.Image:
    """Any PIL mode -> RGB; images with transparency are composited on white (not on black, which a plain
    ``convert("RGB")`` of RGBA gives for fully transparent pixels); 16/32-bit and float images are scaled
    to 8 bits over their depth (a plain ``convert`` clips them at 255)."""
    if img.mode == "RGB":
        return img
    if img.mode in _HIGH_DEPTH:
        return _to_8bit(img, name).convert("RGB")
    if img.mode == "P" and "transparency" in img.info:
        img = img.convert("RGBA")
    if img.mode in ("RGBA", "LA", "PA"):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")  # L, 1, P, CMYK, YCbCr, ...


def _too_large(path: str | os.PathLike, err: Exception) -> ValueError:
    return ValueError(f"image {path} is above Pillow's decompression-bomb limit (PIL.Image.MAX_IMAGE_PIXELS = "
                      f"{Image.MAX_IMAGE_PIXELS}; refused above twice that): {err}. Raise the limit only for files "
                      f"you trust")


def open_rgb(path: str | os.PathLike, *, exif_transpose: bool = True) -> Image.Image:
    """Decode an image file fully and return it as RGB, upright per its EXIF orientation unless
    ``exif_transpose=False`` (raises ``OSError`` for a corrupt file, ``ValueError`` for one above Pillow's
    decompression-bomb limit, naming the file and the limit)."""
    try:
        with Image.open(path) as img:
            img.load()
            if exif_transpose:
                img = ImageOps.exif_transpose(img)
            return to_rgb(img, name=str(path))
    except Image.DecompressionBombError as err:
        raise _too_large(path, err) from None


class TransformedImages(Dataset):
    """A data set of PIL images and labels, as torchvision's data sets give them without a ``transform``
    (``(image, label)``: ``CIFAR10(root)``, ``ImageFolder(root)``) and Hugging Face image data sets do (``{"img":
    image, "label": 3}``), with ``transform`` applied to each image (made RGB first): ``(tensor, label)``, what
    the network expects. A uint8 NumPy image (``(H, W)`` or ``(H, W, 1|3|4)``, as cv2 and ``np.asarray(pil)``
    give it) is such an image, read as ``zoo.predict`` reads one. ``classes`` is the data set's, where it names
    them (torchvision's ``classes``, a Hugging Face ``ClassLabel``'s ``names``)."""

    def __init__(self, dataset: Dataset, transform: Callable[[Image.Image], Any], *,
                 exif_transpose: bool = True) -> None:
        self.dataset, self.transform, self.exif_transpose = dataset, transform, exif_transpose
        first = dataset[0]  # type: ignore[index]
        where = _image_and_label(first)
        self.where = where or (0, 1)
        if where is not None and isinstance(first[where[0]], np.ndarray):  # (C, H, W): refused now, not in a batch
            _pil_image(first[where[0]], 0)
        self.classes = getattr(dataset, "classes", None) or _label_names(dataset, self.where[1])

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        sample = self.dataset[i]
        image, label = self.where
        img = _pil_image(sample[image], i)
        if self.exif_transpose:  # upright, as the folder reader and zoo.predict turn the same photos
            img = ImageOps.exif_transpose(img)
        return self.transform(to_rgb(img, name=f"sample {i}")), sample[label]


def _pil_image(img: Any, i: int) -> Image.Image:
    """Sample ``i``'s image as PIL: a uint8 NumPy array converted by ``zoo.predict``'s rules (an error naming the
    layout for one that is no image, a ``(C, H, W)`` one); a PIL image as it is."""
    if not isinstance(img, np.ndarray):
        return img
    from zoo.vision.predict import array_image  # predict imports this module

    return array_image(img, i, sample=True)


def _image_value(value: Any) -> bool:
    """A PIL image, or a uint8 NumPy array of 2 or 3 dimensions: an ``(H, W)`` / ``(H, W, 1|3|4)`` image, or one
    in another layout (``(C, H, W)``), refused by :func:`_pil_image` naming the layout. Collated as it is, a uint8
    array failed inside the first convolution ("expected input[4, 20, 24, 3] to have 3 channels, but got 20")."""
    return isinstance(value, Image.Image) or (isinstance(value, np.ndarray) and value.dtype == np.uint8
                                              and value.ndim in (2, 3))


def _image_and_label(sample: Any) -> tuple[Any, Any] | None:
    """Where a sample holds its image (PIL, or a uint8 NumPy image: :func:`_image_value`) and its label: ``(0, 1)``
    for ``(image, label)``, ``(image key, label key)`` for a dict with one image and one of
    :data:`zoo.engine.data.TARGET_KEYS`; None otherwise."""
    if isinstance(sample, (tuple, list)) and len(sample) == 2 and _image_value(sample[0]):
        return 0, 1
    if isinstance(sample, Mapping):
        from zoo.engine.data import TARGET_KEYS

        images = [k for k, v in sample.items() if _image_value(v)]
        labels = [k for k in TARGET_KEYS if k in sample]
        if len(images) == 1 and len(labels) == 1:
            return images[0], labels[0]
    return None


def _label_names(dataset: Any, key: Any) -> list[str] | None:
    """A Hugging Face data set's class names: its ``features[key]`` is a ``ClassLabel`` with ``names``."""
    features = getattr(dataset, "features", None)
    names = getattr(features.get(key), "names", None) if isinstance(features, Mapping) else None
    return list(names) if names else None


def yields_pil_images(data: Any) -> bool:
    """Whether ``data`` is a map-style data set (a torch Dataset, or any object with ``__getitem__`` and
    ``__len__``) whose first sample holds a PIL image (or a uint8 NumPy one) and its label: ``(image, label)``, or
    a dict of them (:func:`_image_and_label`)."""
    # a Hugging Face data set is no torch Dataset, but indexes and has a length as one
    if isinstance(data, (TransformedImages, Mapping, str, bytes)) or not hasattr(data, "__len__") \
            or not hasattr(data, "__getitem__"):
        return False
    if len(data) == 0:
        return False
    return _image_and_label(data[0]) is not None


def image_columns(data: Any) -> list[tuple[Any, Any]] | None:
    """``(images, labels)``, two equally long lists with PIL images first (zoo's ``(X, y)`` of images), as
    ``(image, label)`` samples; None for any other data."""
    if not (isinstance(data, (tuple, list)) and len(data) == 2
            and all(isinstance(d, (tuple, list)) for d in data) and len(data[0]) == len(data[1]) > 0):
        return None
    images, labels = data
    if not all(isinstance(x, Image.Image) for x in images) or any(isinstance(x, Image.Image) for x in labels):
        return None  # two (image, label) samples are samples, not columns
    return list(zip(images, labels))


def dataset_classes(data: Any) -> list[str] | None:
    """The class names ``data`` gives, in label order: a :class:`TransformedImages`' (its data set's or Hugging
    Face's), else a data set's ``classes`` list of names, as every torchvision classification data set holds it
    also with a ``transform`` of its own (``ImageFolder(root, transform=weights.transforms())`` yields tensors and
    still names its classes); a DataLoader gives its data set's. None where nothing names them."""
    if isinstance(data, DataLoader):
        data = data.dataset
    names = getattr(data, "classes", None)
    if isinstance(names, (list, tuple)) and names and all(isinstance(n, str) for n in names):
        return list(names)
    return None


class LabelsByName(Dataset):
    """``dataset`` with its labels renumbered to ``classes`` by name: a data set that names its classes in another
    order, or a part of them (an ``ImageFolder`` of a validation split lacking a class numbers the rest from 0), is
    scored as a folder is, each image under its own class's output. ``classes`` is the one it now gives."""

    def __init__(self, dataset: Any, names: Sequence[str], classes: Sequence[str]) -> None:
        index = {str(c): i for i, c in enumerate(classes)}
        self.dataset, self.classes = dataset, [str(c) for c in classes]
        self.index = [index[str(n)] for n in names]

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> Any:
        sample = self.dataset[i]
        if isinstance(sample, Mapping):  # {"img": ..., "label": 3}: the one label key renumbered
            from zoo.engine.data import TARGET_KEYS

            key = next(k for k in TARGET_KEYS if k in sample)
            return {**sample, key: self.index[int(sample[key])]}
        x, label = sample
        return x, self.index[int(label)]


def labels_by_name(data: Any, classes: Sequence[str] | None, what: str = "the validation data set") -> Any:
    """``data`` scored under ``classes`` by name (:class:`LabelsByName`) where it names other classes or the same in
    another order; as it is where either names none or they agree. A class ``classes`` lacks cannot be scored: an
    error naming it. A DataLoader cannot be renumbered: an error saying to give its Dataset. (A validation folder is
    read under the training classes; a data set naming its own, as an ImageFolder of a split that lacks a class
    numbers the rest from 0, was scored by position: bees as ants, without a word. ``finetune`` applies it after
    recording the recipe, whose fingerprint is the data's own.)"""
    names = dataset_classes(data)
    if names is None or classes is None or [str(c) for c in classes] == names:
        return data
    known = {str(c) for c in classes}
    if unknown := [n for n in names if n not in known]:
        raise ValueError(f"{what} names class(es) {unknown} that the network's classes {list(classes)} do not have; "
                         f"their images cannot be scored: leave them out, or give the images as a folder with "
                         f"unknown_classes='skip'")
    if isinstance(data, DataLoader):
        raise TypeError(f"{what} is a DataLoader whose data set numbers its classes {names} unlike the network's "
                        f"{list(classes)}, so its labels would be scored by position: give its Dataset (renumbered by "
                        f"name) or the images as a folder")
    return LabelsByName(data, names, classes)


def with_network_transforms(model: Any, data: Any, train: bool, *, augment: bool = True,
                            image_size: int | None = None) -> Any:
    """``data`` as :class:`TransformedImages` with the transforms ``model``'s pretrained_cfg gives (training ones
    when ``train`` and ``augment``) where it yields PIL images (``(images, labels)`` lists too); anything else,
    or a model without a pretrained_cfg, as it is."""
    data = image_columns(data) or data  # the batch of PIL images default_collate refused
    if getattr(model, "pretrained_cfg", None) is None or not yields_pil_images(data):
        return data
    from zoo.vision.transforms import transforms_for

    return TransformedImages(data, transforms_for(model, train=train and augment, image_size=image_size))


def _is_image(path: Path) -> bool:
    return path.suffix.lower() in IMG_EXTENSIONS


def _class_folders(found: Sequence[str], classes: Sequence[str]) -> dict[str, str]:
    """``{class: its folder name in found}`` for the classes that have one. A name matches exactly, else in
    Unicode NFC: macOS (and zips made there) write ``é`` as ``e`` + a combining accent (NFD), Linux as one
    character (NFC); the same class name, two spellings that compare unequal."""
    on_disk = set(found)
    folders = {c: c for c in classes if c in on_disk}
    # a folder matched exactly is no other class's (train/ may hold both spellings as two classes)
    by_nfc = {unicodedata.normalize("NFC", f): f for f in found if f not in folders}
    for c in classes:
        if c not in folders and (f := by_nfc.pop(unicodedata.normalize("NFC", c), None)) is not None:
            folders[c] = f
    return folders


def _repeated(classes: Sequence[str], found: Sequence[str]) -> list[str]:
    """The names in ``classes`` given twice, exactly or as two Unicode spellings of one name (both would read
    one folder, or leave an index no image has); two spellings that are both folders here are two classes
    (:func:`_class_folders` keeps them apart)."""
    on_disk = set(found)
    alike: dict[str, list[str]] = {}
    for c in classes:
        alike.setdefault(unicodedata.normalize("NFC", c), []).append(c)
    return [c for names in alike.values() if len(names) > 1
            and (len(set(names)) < len(names) or not on_disk.issuperset(names)) for c in dict.fromkeys(names)]


class ImageFolderDataset(Dataset):
    """``root/<class>/<image>`` -> ``(transform(rgb_image), class_index)``.

    Args:
        root: the folder holding one sub-folder per class.
        transform: applied to the RGB PIL image (e.g. :func:`zoo.vision.transforms.transforms_for`).
        classes: class names to use, in index order (give the train split's to the val split so the
            indices agree; a folder matches its class exactly or in Unicode NFC); default: sorted sub-folder
            names.
        strict: raise on a corrupt (or too large) image instead of skipping it.
        verify: decode every image once while scanning, so that corrupt files are found before
            training (cheap next to an epoch; ``False`` defers errors to loading time).
        exif_transpose: turn photos upright per their EXIF orientation tag (``False``: as stored).
        unknown_classes: with ``classes`` given, a sub-folder not among them is an error (``"error"``) or
            is skipped with a warning and listed in ``skipped["unknown_class"]`` (``"skip"``).
    """

    def __init__(
        self,
        root: str | os.PathLike,
        transform: Callable[[Image.Image], Any] | None = None,
        *,
        classes: Sequence[str] | None = None,
        strict: bool = False,
        verify: bool = True,
        exif_transpose: bool = True,
        unknown_classes: str = "error",
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"image folder not found: {self.root} (expected root/<class>/<image files>)")
        found = class_folders(self.root)
        if unknown_classes not in ("error", "skip"):
            raise ValueError(f"unknown_classes must be 'error' or 'skip'; got {unknown_classes!r}")
        if classes is None:
            classes = found
        if not classes:
            raise ValueError(f"{self.root}: no class sub-folders; expected root/<class>/<image files>")
        if repeated := _repeated(classes, found):
            raise ValueError(f"{self.root}: class name(s) {repeated} come more than once in classes (exactly or "
                             f"alike in Unicode NFC); each class takes one name and one index: got {list(classes)}")
        # a folder of some of the classes scores those (a CIFAR-10 model on a folder of cats and dogs); one of
        # none of them is the wrong folder
        folders = _class_folders(found, classes)
        self.absent_classes = [c for c in classes if c not in folders]
        if len(self.absent_classes) == len(classes):
            raise ValueError(f"{self.root}: none of the {len(classes)} classes has a folder here (classes: "
                             f"{list(classes)[:10]}{' ...' if len(classes) > 10 else ''}; found: {found[:10]})")
        self.classes = list(classes)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.transform = transform
        self.strict = strict
        self.exif_transpose = exif_transpose
        self.skipped: dict[str, list[str]] = {"non_image": [], "corrupt": [], "too_large": [], "unknown_class": []}
        self._unknown(sorted(set(found) - set(folders.values())), unknown_classes)
        self.samples: list[tuple[str, int]] = []
        empty = []
        for cls in (c for c in self.classes if c not in self.absent_classes):
            files = visible_files(self.root / folders[cls])
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
        bomb = f"image(s) above Pillow's decompression-bomb limit ({Image.MAX_IMAGE_PIXELS} px)"
        for kind, what in (("corrupt", "corrupt image(s)"), ("too_large", bomb)):
            bad = self.skipped[kind]
            if bad:
                more = " ..." if len(bad) > 5 else ""
                warnings.warn(f"{self.root}: skipped {len(bad)} {what}: {bad[:5]}{more} (strict=True raises instead)",
                              stacklevel=user_stacklevel())
        if self.absent_classes:
            warnings.warn(f"{self.root}: {len(self.absent_classes)} of the {len(self.classes)} classes have no folder "
                          f"here ({self.absent_classes[:10]}{' ...' if len(self.absent_classes) > 10 else ''}): "
                          f"the images of the other {len(self.classes) - len(self.absent_classes)} are scored",
                          stacklevel=user_stacklevel())
        self.targets = [t for _, t in self.samples]

    def _unknown(self, extra: list[str], policy: str) -> None:
        """Class folders that ``classes`` does not list: their images could not be scored."""
        if not extra:
            return
        counts = {c: sum(1 for f in visible_files(self.root / c) if _is_image(f)) for c in extra}
        listed = ", ".join(f"{c!r} ({n} images)" for c, n in counts.items())
        if policy == "error":
            raise ValueError(f"{self.root}: class folder(s) {listed} are not among the {len(self.classes)} classes "
                             f"given ({self.classes[:10]}{' ...' if len(self.classes) > 10 else ''}); their images "
                             f"cannot be scored. Remove them, or pass unknown_classes='skip' to leave them out")
        self.skipped["unknown_class"] = [str(self.root / c) for c in extra]
        warnings.warn(f"{self.root}: skipped class folder(s) unknown to the given classes: {listed}",
                      stacklevel=user_stacklevel())

    def _check(self, path: Path) -> bool:
        try:
            with Image.open(path) as img:
                img.load()
                if img.mode in _HIGH_DEPTH:  # NaN/inf floats decode but cannot be scaled: found now, not mid-epoch
                    to_rgb(img, name=str(path))
        except Image.DecompressionBombError as err:
            if self.strict:
                raise _too_large(path, err) from None
            self.skipped["too_large"].append(str(path))
            return False
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
            img = open_rgb(path, exif_transpose=self.exif_transpose)
        except (OSError, ValueError, SyntaxError) as err:
            raise ValueError(f"cannot decode image {path}: {err}") from err
        return (self.transform(img) if self.transform is not None else img), target

    def __repr__(self) -> str:
        skipped = " + ".join(f"{len(v)} {k.replace('_', ' ')}" for k, v in self.skipped.items() if v) or "nothing"
        return f"ImageFolderDataset({str(self.root)!r}, {len(self)} images, {len(self.classes)} classes, skipped {skipped})"


def scored_folder(root: str | os.PathLike, transform: Callable | None, classes: Sequence[str] | None, *,
                  strict: bool = False, unknown_classes: str = "error", what: str = "image folder") -> ImageFolderDataset:
    """The images a folder gives to score or validate on, ``DIR/val/<class>/...`` or ``DIR/<class>/...``, under
    ``classes`` (the network's or the training set's); a missing folder is named as ``what``."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"{what} not found: {root} (expected DIR/val/<class>/... or DIR/<class>/...)")
    val = find_split(root, "val")
    if val is None and (train := find_split(root, "train")) is not None:  # else its splits were scored as classes
        raise ValueError(f"{root} has a training split ({train.name}/) but no split to score on "
                         f"({'/, '.join(SPLIT_NAMES['val'])}/): add {root}/val/<class>/..., or pass {train} to score "
                         f"the training images")
    return ImageFolderDataset(val or root, transform, classes=classes, strict=strict, unknown_classes=unknown_classes)


def find_split(root: str | os.PathLike, split: str) -> Path | None:
    """``root``'s ``split`` folder of images (:func:`zoo.inputs.split_folder`; the vision CLI and resnet.py call
    it): a ``train/`` holding images, or beside folders that do, is a class (CIFAR-100's), not a split."""
    return split_folder(Path(root), split, IMG_EXTENSIONS)


def _unused_siblings(root: Path, used: tuple[Path | None, ...]) -> None:
    """Warn about ``root``'s folders beside its split folders that no split reads (``holdout/``, ``dev2/``); a split
    folder of another name is no question (``test/`` beside ``train/`` and ``val/``: kept for the end)."""
    splits = {n for names in SPLIT_NAMES.values() for n in names}
    unused = [p.name for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".") and p not in used
              and p.name.lower() not in splits]
    if unused:
        warnings.warn(f"{root}: folder(s) {unused} beside the split folders are not read (the splits are "
                      f"{', '.join(SPLIT_NAMES['train'])} and {', '.join(SPLIT_NAMES['val'])}, in any case)",
                      stacklevel=user_stacklevel())


def load_image_folders(
    root: str | os.PathLike,
    *,
    train_transform: Callable | None = None,
    eval_transform: Callable | None = None,
    strict: bool = False,
    exif_transpose: bool = True,
    unknown_classes: str = "error",
) -> tuple[ImageFolderDataset, ImageFolderDataset | None]:
    """``root/train/<class>/...`` (+ ``root/val`` or ``valid``/``test``) -> ``(train, val or None)`` with shared
    class indices. A ``root`` without a ``train/`` folder is itself the training set. A val class that train
    does not have is an error (``unknown_classes="skip"``: left out with a warning naming it)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"data folder not found: {root} (expected DIR/train/<class>/... and DIR/val/<class>/...)")
    train_dir = find_split(root, "train") or root
    train = ImageFolderDataset(train_dir, train_transform, strict=strict, exif_transpose=exif_transpose)
    if len(train.classes) < 2:  # else the loss of a one-output network, always 0, is all that is said
        raise ValueError(f"{train_dir}: one class folder ({train.classes[0]!r}); a classifier learns to tell classes "
                         "apart: give it at least 2 (DIR/<class>/<images>, one folder per class)")
    val_dir = find_split(root, "val") if train_dir != root else None
    if train_dir != root:
        _unused_siblings(root, (train_dir, val_dir))
    val = ImageFolderDataset(val_dir, eval_transform, classes=train.classes, strict=strict, exif_transpose=exif_transpose,
                             unknown_classes=unknown_classes) if val_dir else None
    return train, val
