"""DataLoaders for the engine: reproducible per-epoch shuffling, DDP sharding, and batch moving.

:func:`prepare_loader` turns a Dataset (or ``(X, y)`` tensors) into a DataLoader whose shuffle order is a
pure function of ``(seed, epoch)`` (a ``DistributedSampler``, also with one process, so 1-process and
N-process runs see the same global batches), and whose worker seeds derive from the same pair. A ready
DataLoader passes through unchanged in one process: the family then owns its batching (a bucketing batch
sampler, say); its sampler/batch sampler gets ``set_epoch(epoch)`` when it has one, and so does its dataset.
Under DDP a ready DataLoader whose sampler does not share samples out by rank is rebuilt around the engine's
sampler (:func:`prepare_loader`), else every rank ran every sample.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
)

from zoo.engine.distributed import DistInfo
from zoo.engine.seed import epoch_generator, seed_worker
from zoo.inputs import whole_number

__all__ = ["ShardSampler", "as_dataset_if_xy", "end_persistent_workers", "inference_loader", "model_dtype",
           "move_batch", "prepare_loader", "say_what_a_ready_loader_ignores", "set_eval_loader_epoch",
           "set_loader_epoch", "split_batch", "train_val", "with_val", "xy_dataset"]


def model_dtype(model: torch.nn.Module) -> torch.dtype | None:
    """The floating dtype ``model`` computes in: its first floating parameter's, else its first floating buffer's
    (None: it holds none). :func:`move_batch` casts float inputs to it, so that a float64 array from NumPy
    feeds a float32 network, and a network the user cast with ``.half()`` / ``.double()`` gets inputs it takes."""
    for group in (model.parameters(), model.buffers()):
        for tensor in group:
            if tensor.is_floating_point():
                return tensor.dtype
    return None


class ShardSampler(Sampler[int]):
    """Indices ``rank, rank + world, ...`` in order, without padding: every sample is scored exactly once
    across ranks (DistributedSampler would repeat samples to even out the shards)."""

    def __init__(self, length: int, rank: int, world_size: int) -> None:
        self.length, self.rank, self.world_size = length, rank, world_size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.length, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.length, self.world_size))


def xy_dataset(data: Any) -> TensorDataset | None:
    """``(X, y)`` as a TensorDataset when ``data`` is a pair of tensors, NumPy arrays or lists of numbers (as
    scikit-learn takes them; arrays shared, not copied), else None. A length mismatch is an error naming both
    lengths."""
    if not _arrays_pair(data):
        return None
    data = tuple(np.asarray(t) if isinstance(t, (list, tuple)) else t for t in data)
    for name, t in zip("Xy", data):
        if isinstance(t, np.ndarray) and t.dtype.kind in "OUS":  # scikit-learn takes labels as names; torch cannot
            hint = (": map them to class indices, e.g. sklearn.preprocessing.LabelEncoder().fit_transform(y)"
                    if name == "y" else "")
            raise TypeError(f"{name} holds {t.dtype} values ({t.ravel()[:3].tolist()} ...); a network takes numbers"
                            f"{hint}")
    x, y = (torch.as_tensor(t) for t in data)
    if len(x) != len(y):
        raise ValueError(f"(X, y) must have the same length, got {len(x)} and {len(y)}")
    return TensorDataset(x, y)


def _arrays_pair(data: Any) -> bool:
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        return False
    depths = [-1 if isinstance(t, (torch.Tensor, np.ndarray)) else _numbers_depth(t) for t in data]
    return 0 not in depths and depths != [1, 1]  # two flat lists: two samples as likely as (X, y)


def _numbers_depth(t: Any) -> int:
    """How deep ``t`` nests as a (nested) list of numbers, as scikit-learn takes ``X`` and ``y`` (``y.tolist()``: 1,
    ``X.tolist()``: 2); 0 for anything else (a list of samples: images, ``(input, label)`` tuples). Its first
    entries decide, NumPy the rest."""
    first, depth = t, 0
    while isinstance(first, (list, tuple)):
        if not first:
            return 0
        first, depth = first[0], depth + 1
    if depth == 1 and isinstance(t, list) and isinstance(first, (np.ndarray, torch.Tensor)):
        return _arrays_depth(t)  # X as a list of equally shaped arrays
    if not isinstance(t, list) or isinstance(first, bool) or not isinstance(first, (int, float, np.number)):
        return 0
    try:
        return depth if np.asarray(t).dtype.kind in "biuf" else 0
    except ValueError:  # ragged: not an array
        return 0


def _arrays_depth(t: list) -> int:
    """1 + the arrays' ndim for a list of NumPy arrays or tensors of one shape and a real number dtype (a user's
    images, ``[img0, img1, ...]``: ``X`` as ``np.asarray`` stacks it), else 0. ``(images, labels)`` was read as a
    data set of two samples: torch's "stack expects each tensor to be equal size"."""
    def real(a: Any) -> bool:
        if isinstance(a, torch.Tensor):
            return not a.is_complex() and a.dtype != torch.bool
        return isinstance(a, np.ndarray) and a.dtype.kind in "iuf"

    shape = tuple(t[0].shape)
    return 1 + len(shape) if all(real(a) and tuple(a.shape) == shape for a in t) else 0


VAL_KEYS = ("val", "validation")
"""The keys a data dict may hold its validation set under: zoo's and Hugging Face ``DatasetDict``'s."""


def train_val(data: Any) -> tuple[Any, Any] | None:
    """``(train, val)`` when ``data`` holds both, else None (one data set).

    Both: a dict with ``"train"`` and optionally ``"val"`` / ``"validation"`` (a Hugging Face ``DatasetDict``;
    its ``"test"`` split is left alone), or a pair of data sets (Datasets, DataLoaders, ``(X, y)`` pairs or two
    existing folders) such as ``((X, y), (X_val, y_val))``, each ``(X, y)`` pair as a TensorDataset. Two arrays
    are ``(X, y)``, never ``(train, val)``."""
    if isinstance(data, Mapping) and "train" in data:
        vals = [k for k in VAL_KEYS if k in data]
        if len(vals) > 1:
            raise ValueError(f"the data dict holds two validation sets, {vals[0]!r} and {vals[1]!r}: keep one")
        return as_dataset_if_xy(data["train"]), as_dataset_if_xy(data[vals[0]]) if vals else None
    if _arrays_pair(data) or not (isinstance(data, (tuple, list)) and len(data) == 2):
        return None
    if all(isinstance(d, (str, os.PathLike)) and os.path.isdir(os.path.expanduser(d)) for d in data):
        return data[0], data[1]  # two folders (train_dir, val_dir): each family reads its folder form
    train, val = (as_dataset_if_xy(d) for d in data)
    return (train, val) if all(isinstance(d, (Dataset, DataLoader)) for d in (train, val)) else None


def with_val(data: Any, val_data: Any) -> tuple[Any, Any]:
    """``(train, val)``: ``data`` split where it holds both (:func:`train_val`), else ``(data, val_data)``;
    a validation set in both places is an error."""
    pair = train_val(data)
    if pair is None:
        return data, val_data
    if val_data is not None:
        raise ValueError("validation data given twice: in the data (train, val) and as val_data")
    return pair


LOADER_OPTIONS = ("batch_size", "num_workers", "collate_fn", "drop_last")
"""Options that make a DataLoader: a loader given as data has its own, and the engine passes it through."""

# Set while zoo.train / zoo.evaluate / zoo.finetune run: they said what a ready loader ignores of the caller's own
# options, and the engine's fit / evaluate under them see the family's recipe merged in, which the caller never gave.
_LOADER_OPTIONS_SAID: contextvars.ContextVar[bool] = contextvars.ContextVar("zoo_loader_options_said", default=False)


@contextlib.contextmanager
def loader_options_said() -> Iterator[None]:
    """Within: :func:`zoo.engine.fit` and :func:`zoo.engine.evaluate` leave :func:`say_what_a_ready_loader_ignores`
    to the caller, which said it of the options it was given."""
    token = _LOADER_OPTIONS_SAID.set(True)
    try:
        yield
    finally:
        _LOADER_OPTIONS_SAID.reset(token)


def say_if_called_directly(data: Any, options: Mapping[str, Any], call: str) -> None:
    """:func:`say_what_a_ready_loader_ignores` for the engine's own entry points, unless zoo's API called them
    (:func:`loader_options_said`)."""
    if not _LOADER_OPTIONS_SAID.get():
        say_what_a_ready_loader_ignores(data, options, call)


def say_what_a_ready_loader_ignores(data: Any, options: Mapping[str, Any], call: str) -> None:
    """Warn about each option of :data:`LOADER_OPTIONS` that a DataLoader in ``data`` (or
    ``options["val_data"]``) keeps its own value of: ``zoo.train(model, loader_of_32, batch_size=64)`` trains
    on batches of 32, which would otherwise go unsaid. A value equal to the loader's changes nothing and
    passes quietly. A warning, as for a ready optimizer's ``lr`` (:mod:`zoo.engine.optim`): the run is the
    loader's, as asked."""
    from zoo._stacklevel import user_stacklevel

    given = {k: options[k] for k in LOADER_OPTIONS if k in options}
    if not given:
        return
    pair = train_val(data)
    found = [("data", data)] if pair is None else [("the training data", pair[0]), ("the validation data", pair[1])]
    for where, loader in [*found, ("val_data", options.get("val_data"))]:
        if not isinstance(loader, DataLoader):
            continue
        for key, want in given.items():
            have = loader.batch_size if key == "batch_size" else getattr(loader, key)
            if key == "collate_fn" and want is None:
                want = default_collate  # what DataLoader itself uses when given none
            if want is have or (key != "collate_fn" and want == have):
                continue
            asked = f"{key}={getattr(want, '__name__', want)!r}"
            own = ("batches with its own batch_sampler" if key == "batch_size" and have is None
                   else f"runs with {key}={getattr(have, '__name__', have)!r}")
            warnings.warn(f"{call}: {asked} is not applied: {where} is a DataLoader, which {own}; build the "
                          f"DataLoader with {asked}, or pass its dataset and zoo makes the loader with it",
                          stacklevel=user_stacklevel())


def as_dataset_if_xy(data: Any) -> Any:
    """``(X, y)`` tensors or arrays as a TensorDataset (:func:`xy_dataset`); anything else as it is."""
    xy = xy_dataset(data)
    return data if xy is None else xy


def _as_dataset(data: Any) -> Dataset:
    if isinstance(data, Dataset):
        return data
    if (xy := xy_dataset(data)) is not None:
        return xy
    if isinstance(data, (tuple, list)) and len(data) == 3 and all(isinstance(t, (torch.Tensor, np.ndarray)) and t.ndim
                                                          and len(t) == len(data[0]) for t in data) \
            and data[0].ndim >= 2 and data[2].ndim == 1 and len(data[0]) != 3:  # X of rows, a weight per row
        # (X, y, sample_weight), as Keras' fit takes it, would be read as a data set of 3 samples ('stack expects ...')
        raise TypeError(f"expected (X, y); got a {type(data).__name__} of 3 arrays of {len(data[0])} rows: sample weights "
                        f"(Keras' third array) are not taken apart; weigh the loss in loss_fn with a forward_fn "
                        f"that passes them, or pass a Dataset yielding the samples you want")
    if isinstance(data, Mapping) and not all(isinstance(k, int) for k in data):
        # a dict is a map-style data set only with sample indices as keys: the loader's data[0] was a KeyError
        keys = ", ".join(repr(k) for k in list(data)[:6])
        raise TypeError(f"expected a torch Dataset, a DataLoader or (X, y) tensors or NumPy arrays, got a "
                        f"{type(data).__name__} with keys {keys}, which is not a data set (its samples would be "
                        f"data[0], data[1], ...): for a dict of splits pass the one to use, such as "
                        f"data[{next(iter(data))!r}] (fit also takes {{'train': ..., 'val': ...}}); for columns of "
                        f"arrays pass (X, y)")
    if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
        return data  # a map-style dataset that does not subclass Dataset
    raise TypeError(
        f"expected a torch Dataset, a DataLoader or (X, y) tensors or NumPy arrays, got {type(data).__name__}; a "
        "folder path must be turned into a Dataset by the model's family (zoo train does this)"
    )


def prepare_loader(
    data: Any,
    *,
    batch_size: int,
    shuffle: bool,
    seed: int = 0,
    num_workers: int = 0,
    collate_fn: Any = None,
    drop_last: bool = False,
    dist: DistInfo | None = None,
    pin_memory: bool = False,
    train: bool | None = None,
) -> DataLoader:
    """A DataLoader for ``data`` (a Dataset, ``(X, y)`` tensors or NumPy arrays, or a DataLoader).

    Training loaders (``shuffle=True``) use a DistributedSampler seeded with ``seed`` (call
    :func:`set_loader_epoch` every epoch); evaluation loaders under DDP use a :class:`ShardSampler`.
    A DataLoader is returned unchanged in one process, or when its sampler shares samples out by rank itself;
    else, under DDP, it is rebuilt with the same options around the sampler a Dataset would get
    (:func:`shard_loader`; ``train``, default ``shuffle``, says which).
    """
    dist = dist or DistInfo()
    if isinstance(data, DataLoader):
        return shard_loader(data, dist, train=shuffle if train is None else train, seed=seed)
    batch_size = whole_number(batch_size, "batch_size")
    ds = _as_dataset(data)
    common: dict[str, Any] = {"batch_size": batch_size, "num_workers": num_workers, "collate_fn": collate_fn,
                                  "pin_memory": pin_memory, "drop_last": drop_last,
                                  # fresh workers each epoch, seeded from (seed, epoch): exact resume
                                  "persistent_workers": False}
    if isinstance(ds, IterableDataset):  # its generator, not the caller's global one, gives the workers' seeds
        return DataLoader(ds, generator=epoch_generator(seed, 0), **common)
    sampler: Sampler[int] | None = None
    if shuffle:
        sampler = _rank_sampler(ds, dist, train=True, shuffle=True, seed=seed, drop_last=drop_last)
    elif dist.enabled:
        sampler = _rank_sampler(ds, dist, train=False, shuffle=False, seed=seed, drop_last=drop_last)
    # The generator only seeds the workers (and the iterator's base seed); set_loader_epoch reseeds it,
    # so it never draws from the global RNG that model code (dropout) uses.
    return DataLoader(ds, sampler=sampler, shuffle=False, generator=epoch_generator(seed, 0),
                      worker_init_fn=seed_worker if num_workers > 0 else None, **common)


def _rank_sampler(ds: Any, dist: DistInfo, *, train: bool, shuffle: bool, seed: int, drop_last: bool) -> Sampler[int]:
    """This rank's share of ``ds``: for training a DistributedSampler (equal shares, padded: every rank joins every
    gradient all-reduce), for evaluation a :class:`ShardSampler` (each sample scored once over the ranks)."""
    if train:
        return DistributedSampler(ds, num_replicas=dist.world_size, rank=dist.rank, shuffle=shuffle, seed=seed,
                                  drop_last=drop_last)
    return ShardSampler(len(ds), dist.rank, dist.world_size)


def _shares_out(loader: DataLoader) -> bool:
    """Whether ``loader``'s sampler or batch sampler already takes this rank's share: torch's DistributedSampler,
    the engine's ShardSampler, or one that says its place (``place()``, as zoo's samplers; ``num_replicas``)."""
    parts = (loader.sampler, loader.batch_sampler)
    return any(isinstance(p, (DistributedSampler, ShardSampler)) or hasattr(p, "place") or hasattr(p, "num_replicas")
               for p in parts if p is not None)


def shard_loader(loader: DataLoader, dist: DistInfo, *, train: bool, seed: int) -> DataLoader:
    """``loader`` as this rank's share under DDP: unchanged in one process, for an IterableDataset (it streams as
    it was made to) or a sampler that shares out by rank itself; else the same loader (batch size, collate_fn,
    workers, pinning, drop_last, worker_init_fn, generator ...) around :func:`_rank_sampler`'s sampler, shuffled
    in training as its own RandomSampler / SequentialSampler was. A sampler or batch sampler of its own, whose
    order cannot be carried over, is refused: each rank would have run all of it."""
    if not dist.enabled or isinstance(loader.dataset, IterableDataset) or _shares_out(loader):
        return loader
    sampler = loader.sampler
    plain = (type(sampler) is SequentialSampler or (type(sampler) is RandomSampler and not sampler.replacement
                                                    and sampler._num_samples is None))
    if loader.batch_size is None or type(loader.batch_sampler) is not BatchSampler or not plain:
        own = type(loader.batch_sampler if loader.batch_size is not None and type(loader.batch_sampler)
                   is not BatchSampler else sampler).__name__
        raise ValueError(
            f"under DDP ({dist.world_size} processes) a DataLoader must give each process its share of the "
            f"samples, and this one batches with its own {own}, which zoo cannot share out (every process would "
            f"{'train on' if train else 'score'} all of it): pass its Dataset and batch_size (zoo shards it), or "
            f"build the DataLoader with sampler=torch.utils.data.DistributedSampler(dataset) (a batch sampler: one "
            f"that takes this rank's batches and has a place() or num_replicas)")
    return DataLoader(
        loader.dataset, batch_size=loader.batch_size, shuffle=False,
        sampler=_rank_sampler(loader.dataset, dist, train=train, shuffle=type(sampler) is RandomSampler, seed=seed,
                              drop_last=loader.drop_last),
        num_workers=loader.num_workers, collate_fn=loader.collate_fn, pin_memory=loader.pin_memory,
        drop_last=loader.drop_last, timeout=loader.timeout, worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context, generator=loader.generator,
        prefetch_factor=loader.prefetch_factor, persistent_workers=loader.persistent_workers,
        pin_memory_device=loader.pin_memory_device)


def inference_loader(data: Dataset | DataLoader, batch_size: int, **options: Any) -> DataLoader:
    """``data`` itself when it is a DataLoader (its batches may come from a sampler of its own), else an unshuffled
    DataLoader of it (``options``: ``num_workers``, ``collate_fn``, ...) with a generator of its own: a loader
    without one draws each pass's base seed from the caller's global torch generator, so predicting or scoring
    moved the caller's random stream."""
    if isinstance(data, DataLoader):
        return data
    return DataLoader(data, batch_size=batch_size, shuffle=False, generator=torch.Generator(), **options)


def _epoch_datasets(dataset: Any) -> list[Any]:
    """``dataset`` and every data set a ``Subset`` or ``ConcatDataset`` of it holds, at any depth, that has
    ``set_epoch`` (each once): a dataset that draws per item from ``(seed, epoch, index)`` (video clips) behind
    ``random_split`` never heard of the epoch, and every epoch drew epoch 0's clips and augmentations."""
    seen: dict[int, Any] = {}  # by id: a data set need not be hashable
    pending = [dataset]
    while pending:
        ds = pending.pop()
        if ds is None or id(ds) in seen:
            continue
        seen[id(ds)] = ds
        if isinstance(ds, Subset):
            pending.append(ds.dataset)
        elif isinstance(ds, ConcatDataset):
            pending.extend(reversed(ds.datasets))
    return [ds for ds in seen.values() if hasattr(ds, "set_epoch")]


def set_loader_epoch(loader: Any, epoch: int, seed: int) -> None:
    """Make epoch ``epoch``'s order and worker seeds a function of ``(seed, epoch)`` alone."""
    for part in (getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None)):
        if part is not None and hasattr(part, "set_epoch"):
            part.set_epoch(epoch)
    for dataset in _epoch_datasets(getattr(loader, "dataset", None)):
        dataset.set_epoch(epoch)
    set_eval_loader_epoch(loader, epoch, seed)


def set_eval_loader_epoch(loader: Any, epoch: int, seed: int) -> None:
    """Make the random draws of a pass over ``loader`` (its workers' seeds, a sampler's generator of its own) a
    function of ``(seed, epoch)`` alone, leaving its order as it is: :func:`set_loader_epoch` without the
    ``set_epoch`` calls, for a validation loader, whose samples stay the same every epoch. Its generators (the
    loader's, its sampler's and batch sampler's) are set to :func:`epoch_generator`'s state, and persistent workers
    are ended (:func:`end_persistent_workers`): else each pass went on from where the one before left them, so a run
    resumed at epoch k, whose loaders made their first pass there, drew other numbers than the run it continued."""
    # a sampler made with a generator of its own (RandomSampler(ds, generator=g), WeightedRandomSampler's) draws
    # from it, not the loader's: left as it was, a resume replayed the sampler's first epoch
    batch_sampler = getattr(loader, "batch_sampler", None)
    samplers = (loader, getattr(loader, "sampler", None), batch_sampler, getattr(batch_sampler, "sampler", None))
    gens = [getattr(s, "generator", None) for s in samplers]
    state = epoch_generator(seed, epoch).get_state()
    for gen in {id(g): g for g in gens if isinstance(g, torch.Generator)}.values():
        gen.set_state(state)
    end_persistent_workers(loader)


def end_persistent_workers(loader: Any) -> None:
    """End the workers a ``DataLoader(persistent_workers=True)`` kept from its last pass, so that its next pass
    starts fresh ones, seeded from that pass's base seed, as ``fit``'s own loaders' are every epoch. Kept, they
    carry their random streams (augmentation drawn in ``__getitem__``) from one epoch into the next, and only the
    first pass draws a base seed (from the global torch generator, for a loader without one of its own, which
    dropout draws from too): a resumed run, whose loaders make their first pass at the resumed epoch, trained and
    validated on other draws than the run it continued."""
    if not (isinstance(loader, DataLoader) and loader.persistent_workers):
        return
    iterator = getattr(loader, "_iterator", None)  # torch keeps the persistent workers' iterator there
    if iterator is None:
        return
    loader._iterator = None
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()


def move_batch(batch: Any, device: torch.device, channels_last: bool = False, dtype: torch.dtype | None = None) -> Any:
    """Move every tensor in a (nested) batch to ``device``; 4-D float tensors to channels_last if asked. With
    ``dtype`` (the model's, :func:`model_dtype`), float tensors of another float dtype are cast to it: inputs
    and float targets alike (an MSE target in float64 against float32 outputs fails in backward)."""
    if isinstance(batch, torch.Tensor):
        cast = dtype is not None and batch.is_floating_point() and batch.dtype != dtype
        if batch.device != device or cast:
            batch = batch.to(device, dtype if cast else None, non_blocking=True)
        if channels_last and batch.dim() == 4 and batch.is_floating_point():
            batch = batch.contiguous(memory_format=torch.channels_last)
        return batch
    if isinstance(batch, dict):
        return {k: move_batch(v, device, channels_last, dtype) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        moved = [move_batch(v, device, channels_last, dtype) for v in batch]
        return type(batch)(*moved) if hasattr(batch, "_fields") else type(batch)(moved)
    return batch


TARGET_KEYS = ("targets", "target", "labels", "label")
"""The keys a dict batch may hold its targets under: zoo's own, and the Hugging Face ``datasets`` names
(``{"pixel_values": ..., "labels": ...}``, ``{"image": ..., "label": ...}``)."""


def split_batch(batch: Any) -> tuple[Any, Any]:
    """``(inputs, targets)`` from a batch; a clear error for anything else. A dict's one target key
    (:data:`TARGET_KEYS`) holds the targets; its one other key is the input, several are keyword inputs."""
    if isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)) and len(batch) == 2:
        return batch[0], batch[1]
    if isinstance(batch, dict):
        found = [k for k in TARGET_KEYS if k in batch]
        if len(found) == 1 and len(batch) > 1:
            inputs = {k: v for k, v in batch.items() if k != found[0]}
            return (next(iter(inputs.values())) if len(inputs) == 1 else inputs), batch[found[0]]
        if len(found) > 1:
            raise TypeError(f"a dict batch holds its targets under one key; this one has {', '.join(found)}: "
                            "pass forward_fn=fn(model, batch) -> (outputs, targets) to say which")
    shape = f"a {type(batch).__name__}" + (f" of length {len(batch)}" if hasattr(batch, "__len__") else "")
    keys = f" with keys {', '.join(map(repr, batch))}" if isinstance(batch, dict) else ""
    raise TypeError(f"a batch must be (inputs, targets) or a dict with one of the keys "
                    f"{', '.join(map(repr, TARGET_KEYS))}, got {shape}{keys}; pass forward_fn=fn(model, batch) -> "
                    "(outputs, targets) for other layouts")
