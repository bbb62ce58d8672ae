"""``set_loader_epoch`` reaches a dataset that draws per ``(seed, epoch, item)`` behind ``random_split`` and
``ConcatDataset``: before, only ``loader.dataset`` itself heard of the epoch."""

from __future__ import annotations

import torch
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Subset, random_split

from zoo.engine.data import set_loader_epoch


class _Epochs(Dataset):
    """Records every ``set_epoch`` call."""

    def __init__(self, n: int = 4) -> None:
        self.n, self.calls = n, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(i)

    def set_epoch(self, epoch: int) -> None:
        self.calls.append(epoch)


def test_set_loader_epoch_reaches_datasets_inside_subsets_and_concats_each_once():
    a, b, plain = _Epochs(), _Epochs(), torch.utils.data.TensorDataset(torch.zeros(3))
    train, _ = random_split(a, [3, 1], generator=torch.Generator().manual_seed(0))
    # a nested several times over: still one call per epoch
    nested = ConcatDataset([Subset(train, [0, 1]), ConcatDataset([b, plain]), a, Subset(Subset(b, [1]), [0])])
    for epoch in (0, 3):
        set_loader_epoch(DataLoader(nested, batch_size=2), epoch, 0)
    assert a.calls == [0, 3] and b.calls == [0, 3]


def test_set_loader_epoch_calls_the_dataset_itself_and_one_behind_a_subset():
    ds = _Epochs()
    set_loader_epoch(DataLoader(ds), 2, 0)
    set_loader_epoch(DataLoader(Subset(ds, [0])), 5, 0)
    assert ds.calls == [2, 5]
