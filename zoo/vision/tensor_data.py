"""Decode once, augment on tensors: the fast image pipeline for small images on a CPU.

JPEG decoding and PIL transforms cost as much as a small network's training step on a 2-core machine,
and a DataLoader worker doing them takes a core away from the math. So the images are decoded once into a
``uint8`` tensor ``(N, 3, H, W)`` (cached as ``.npz``), and every batch is augmented with a few batched
tensor ops (padded random crop + horizontal flip, as in the standard CIFAR recipe) in the main process.

Batches are indexed by :class:`EpochBatchSampler`, whose order *and augmentation seeds* are a pure function
of ``(seed, epoch)``; :func:`tensor_loader` wraps both in a ``DataLoader(batch_size=None)`` that
:func:`zoo.engine.fit` takes as a ready loader (it calls ``sampler.set_epoch`` each epoch).
"""

from __future__ import annotations

import os
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from zoo._stacklevel import user_stacklevel
from zoo.engine.distributed import sampler_place
from zoo.inputs import whole_number
from zoo.vision.data import ImageFolderDataset, open_rgb

__all__ = ["EpochBatchSampler", "TensorImageDataset", "decode_images", "load_or_decode", "tensor_loader"]


def _decode_one(args: tuple[str, int | None]) -> np.ndarray | str:
    """The image at ``path`` as ``(H, W, 3)`` uint8, or, for a file Pillow cannot read (truncated, not an
    image), the error naming it: in a worker process a raised error would lose which file it was."""
    path, size = args
    try:
        img = open_rgb(path)
        if size is not None:  # short side to `size`, then the centre square
            from torchvision.transforms.v2 import functional as F

            img = F.center_crop(F.resize(img, size, antialias=True), [size, size])
        arr = np.asarray(img, dtype=np.uint8)
    except (OSError, ValueError, SyntaxError) as err:  # what PIL raises for a bad file
        return f"{path}: {err}"
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"{path}: decoded to shape {arr.shape}, expected (H, W, 3)")
    return arr


def _decode_all(paths: Sequence[str], size: int | None, workers: int, progress: bool) -> list[np.ndarray | str]:
    """:func:`_decode_one` of every path, in order (``workers > 0``: in that many processes)."""
    from zoo._progress import ProgressBar

    jobs = [(str(p), size) for p in paths]
    if workers > 0:
        with ProcessPoolExecutor(workers) as pool:
            return list(ProgressBar(pool.map(_decode_one, jobs, chunksize=256), total=len(jobs), desc="decode",
                                    disable=not progress))
    return [_decode_one(j) for j in ProgressBar(jobs, desc="decode", disable=not progress)]


def decode_images(paths: Sequence[str], size: int | None = None, workers: int = 0,
                  progress: bool = True) -> torch.Tensor:
    """Decode image files to one ``uint8`` tensor ``(N, 3, size, size)`` (``size=None``: files must share a
    size). ``workers > 0`` decodes in that many processes. A file that cannot be decoded is an error naming it."""
    return _stack(_decode_all(paths, size, workers, progress))


def _stack(arrays: list[np.ndarray | str]) -> torch.Tensor:
    bad = [a for a in arrays if isinstance(a, str)]
    if bad:
        raise ValueError(f"cannot decode {len(bad)} image(s): {bad[:3]}{' ...' if len(bad) > 3 else ''}")
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"images have different sizes {sorted(shapes)[:4]}...; pass size= to resize them")
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()  # (N, 3, H, W)


def load_or_decode(folder: str | os.PathLike, cache: str | os.PathLike, *, size: int | None = None,
                   classes: Sequence[str] | None = None, workers: int = 0,
                   progress: bool = True) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """``(images uint8 (N, 3, H, W), targets int64 (N,), classes)`` for an image folder, decoded once and
    cached in ``cache`` (``.npz``, written atomically); a cache of another folder, size, class list or folder
    content (files added, removed or changed: their names, sizes and a sample of their bytes) is rebuilt, and
    so is one that cannot be read (with a warning naming it). A cache that cannot be written is warned about;
    the decoded images are returned all the same."""
    from zoo import fs
    from zoo.engine.resume import files_fingerprint

    cache = Path(cache)
    ds = ImageFolderDataset(folder, classes=classes, verify=False)
    paths = [p for p, _ in ds.samples]
    key = f"{Path(folder).resolve()}|{size}|{'/'.join(ds.classes)}|{files_fingerprint(paths, folder)}"
    if cache.is_file():
        cached = _read_cache(cache, key)
        if cached is not None:
            return cached
    arrays = _decode_all(paths, size, workers, progress)
    bad = [a for a in arrays if isinstance(a, str)]
    if bad:  # as ImageFolderDataset skips a corrupt file: one bad file of 50,000 ended the decode, naming none
        warnings.warn(f"{folder}: skipped {len(bad)} corrupt image(s): {bad[:5]}{' ...' if len(bad) > 5 else ''}",
                      stacklevel=user_stacklevel())
    kept = [i for i, a in enumerate(arrays) if not isinstance(a, str)]
    images = _stack([arrays[i] for i in kept])
    targets = torch.tensor([ds.targets[i] for i in kept], dtype=torch.int64)
    try:
        with fs.atomic_write(cache, size=images.numel() * images.element_size()) as fh:
            np.savez(fh, images=images.numpy(), targets=targets.numpy(), classes=np.array(ds.classes),
                     key=np.array(key))
    except OSError as err:  # a cache saves time next run; the decode is done and is this run's result
        warnings.warn(f"image cache {cache} could not be written ({err}); the images are decoded and used, and "
                      "will be decoded again next time", stacklevel=user_stacklevel())
    return images, targets, list(ds.classes)


def _read_cache(cache: Path, key: str) -> tuple[torch.Tensor, torch.Tensor, list[str]] | None:
    """The cached decode when ``cache`` holds ``key``'s; None when it is another folder's or size's, or cannot
    be read (a copy cut short, a crash of another writer's tool): a cache is rebuilt, never a reason to fail."""
    try:
        with np.load(cache, allow_pickle=False) as z:
            if str(z["key"]) != key:
                return None
            # read inside the try: an .npz member is decompressed (and its CRC checked) only when accessed
            images, targets, classes = z["images"], z["targets"], [str(c) for c in z["classes"]]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        warnings.warn(f"image cache {cache} cannot be read ({type(err).__name__}: {err}); decoding the images "
                      "again and rewriting it", stacklevel=user_stacklevel())
        return None
    return torch.from_numpy(images), torch.from_numpy(targets), classes


class EpochBatchSampler(Sampler):
    """Yields ``(indices, augmentation_seed)`` per batch; order and seeds depend only on ``(seed, epoch)``.

    Under DDP each process takes its share of the epoch's order, samples ``rank, rank + world_size, ...``, in
    batches of ``batch_size`` (per process, as the engine's), with seeds of its own: the ranks trained identical
    batches. Shuffled (training), the order is first padded with its own first samples to a multiple of
    ``world_size``, as torch's DistributedSampler pads, so every process runs as many steps; unshuffled
    (evaluation), each sample goes to one process only. ``rank`` / ``world_size`` default to the process's place
    (:func:`zoo.engine.distributed.sampler_place`), read when an epoch starts.
    """

    def __init__(self, n: int, batch_size: int, *, shuffle: bool, drop_last: bool = False, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None) -> None:
        if n < 1 or batch_size < 1:
            raise ValueError(f"need n >= 1 and batch_size >= 1, got n={n}, batch_size={batch_size}")
        self.n, self.batch_size, self.shuffle, self.drop_last, self.seed = n, batch_size, shuffle, drop_last, seed
        self._given = (rank, world_size)
        self.place()  # a rank outside world_size is refused here, not at the first epoch
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def place(self) -> tuple[int, int]:
        """``(rank, world_size)`` the samples are shared out by now (the engine leaves such a sampler as it is)."""
        return sampler_place(*self._given, training=self.shuffle)

    def _share(self, rank: int, world: int) -> int:
        """How many samples process ``rank`` of ``world`` takes per epoch."""
        return -(-self.n // world) if self.shuffle else len(range(rank, self.n, world))

    def __iter__(self) -> Iterator[tuple[list[int], int]]:
        rank, world = self.place()
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(self.n, generator=g) if self.shuffle else torch.arange(self.n)
        if world > 1:
            order = order[torch.arange(self._share(0, world) * world) % self.n] if self.shuffle else order
            order = order[rank::world]
        # every rank draws every rank's seeds (one process: the same draws as before) and takes its own
        seeds = torch.randint(0, 2**31 - 1, (self._batches(self._share(0, world)) * world,), generator=g)[rank::world]
        for b in range(len(self)):
            yield order[b * self.batch_size:(b + 1) * self.batch_size].tolist(), int(seeds[b])

    def _batches(self, samples: int) -> int:
        return samples // self.batch_size if self.drop_last else -(-samples // self.batch_size)

    def __len__(self) -> int:
        return self._batches(self._share(*self.place()))


class TensorImageDataset(Dataset):
    """Batches from a ``uint8`` image tensor: ``dataset[(indices, seed)] -> (x float (B, 3, S, S), y (B,))``.

    ``train=True``: random ``crop`` from the image zero-padded by ``pad`` (or from a larger stored image)
    plus horizontal flips; ``train=False``: the centre ``crop``. Then scaled to [0, 1] and normalised.
    """

    def __init__(self, images: torch.Tensor, targets: torch.Tensor, *, mean: Sequence[float], std: Sequence[float],
                 train: bool, crop: int | None = None, pad: int = 0, flip: bool = True,
                 channels_last: bool = False) -> None:
        if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be uint8 (N, 3, H, W), got {images.dtype} {tuple(images.shape)}")
        if len(images) != len(targets):
            raise ValueError(f"{len(images)} images but {len(targets)} targets")
        h, w = images.shape[2:]
        pad = whole_number(pad, "pad", minimum=0)
        self.crop = min(h, w) if crop is None else whole_number(crop, "crop")
        room = min(h, w) + (2 * pad if train else 0)
        if self.crop > room:  # else eval sliced from the end (2x2 images) and training failed inside randint
            raise ValueError(f"crop={self.crop} is larger than the {'padded ' if train and pad else ''}images "
                             f"({h}x{w}{f' + 2x{pad} padding' if train and pad else ''}): expected crop <= {room}")
        self.train, self.flip, self.channels_last = train, flip, channels_last
        self.images = torch.nn.functional.pad(images, (pad, pad, pad, pad)) if (train and pad) else images
        self.targets = targets
        self.mean = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1) * 255

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, item: tuple[list[int], int]) -> tuple[torch.Tensor, torch.Tensor]:
        indices, seed = item
        idx = torch.as_tensor(indices)
        x = self.images[idx]  # (B, 3, H, W) uint8
        H, W, c = x.shape[2], x.shape[3], self.crop
        if self.train:
            g = torch.Generator().manual_seed(seed)
            b = len(idx)
            dy = torch.randint(0, H - c + 1, (b,), generator=g)
            dx = torch.randint(0, W - c + 1, (b,), generator=g)
            rows = (dy[:, None] + torch.arange(c))[:, None, :, None]  # (B, 1, c, 1)
            cols = (dx[:, None] + torch.arange(c))[:, None, None, :]  # (B, 1, 1, c)
            x = x[torch.arange(b)[:, None, None, None], torch.arange(3)[None, :, None, None], rows, cols]
            if self.flip:
                flip = torch.rand(b, generator=g) < 0.5
                x = torch.where(flip[:, None, None, None], x.flip(3), x)
        else:
            top, left = (H - c) // 2, (W - c) // 2
            x = x[:, :, top:top + c, left:left + c]
        x = (x.float() - self.mean) / self.std  # (B, 3, c, c)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x, self.targets[idx]


def tensor_loader(images: torch.Tensor, targets: torch.Tensor, *, batch_size: int, train: bool, seed: int = 0,
                  drop_last: bool | None = None, **aug) -> DataLoader:
    """A ready ``DataLoader`` of augmented batches (see :class:`TensorImageDataset` for ``aug``)."""
    ds = TensorImageDataset(images, targets, train=train, **aug)
    sampler = EpochBatchSampler(len(ds), batch_size, shuffle=train, seed=seed,
                                drop_last=train if drop_last is None else drop_last)
    return DataLoader(ds, sampler=sampler, batch_size=None)
