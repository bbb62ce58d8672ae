"""A resumed run repeats the uninterrupted one's random draws in its loaders too: worker seeds of validation
loaders, and DataLoaders with persistent workers (training or validation)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from zoo.engine import LambdaCallback, fit


class NoisyPoints(Dataset):
    """Points with fresh noise at every read: in a worker it draws from the worker's seeded generator."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x.sum(1) > 0).long()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i] + 0.5 * torch.randn(4), self.y[i]


def net() -> nn.Module:
    torch.manual_seed(0)
    # dropout draws from the global generator, which a loader without a generator of its own draws its seed from
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))


def plain_val() -> DataLoader:
    g = torch.Generator().manual_seed(3)
    points = TensorDataset(torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g))
    return DataLoader(points, batch_size=16, num_workers=2, persistent_workers=True)


CASES = {
    # fit's own validation loader: its generator gave each pass's worker seeds, one more number per epoch
    "validation-workers": lambda: (NoisyPoints(48, 0), NoisyPoints(16, 1), {"num_workers": 1}),
    # the training loader's persistent workers went on with their streams from epoch to epoch
    "training-persistent-workers": lambda: (
        DataLoader(NoisyPoints(48, 0), batch_size=16, shuffle=True, num_workers=2, persistent_workers=True), None, {}),
    # a validation loader's persistent workers: only its first pass drew a seed from the global generator
    "validation-persistent-workers": lambda: (NoisyPoints(48, 0), plain_val(), {}),
}


def _strip(history):
    return [{k: v for k, v in row.items() if k != "epoch_time_s"} for row in history]


@pytest.mark.parametrize("case", CASES)
def test_a_resumed_run_repeats_the_loaders_draws_of_the_run_it_continues(tmp_path, case):
    """Before: each case resumed at epoch 2 onto other draws (other validation noise, other augmentation, or the
    global generator one number off), so its later rows, best epoch and weights were another run's."""
    def run(folder, **extra):
        train, val, options = CASES[case]()
        return fit(net(), train, val, checkpoint_dir=tmp_path / folder, epochs=3, batch_size=16, lr=1e-2, seed=1,
                   progress=False, **options, **extra)

    def stop_after_1(state, row):
        if row["epoch"] == 1:
            state.request_stop("interrupted")

    full = run("full")
    run("part", callbacks=[LambdaCallback(on_epoch_end=stop_after_1)])
    resumed = run("part", resume=True)
    assert _strip(resumed.history) == _strip(full.history)
    assert (resumed.best_epoch, resumed.best_metric) == (full.best_epoch, full.best_metric)
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    last_full = torch.load(tmp_path / "full" / "epoch-0003.pt", weights_only=True)
    last_resumed = torch.load(tmp_path / "part" / "epoch-0003.pt", weights_only=True)
    assert torch.equal(last_full["rng"][0]["torch"], last_resumed["rng"][0]["torch"])


def test_ending_persistent_workers_makes_the_next_pass_draw_as_a_first_pass():
    """Workers kept from one pass to the next go on with their streams; ended, the next pass starts fresh ones,
    seeded as a first pass is (here from the global generator: the loader has none of its own)."""
    from zoo.engine.data import end_persistent_workers

    loader = DataLoader(NoisyPoints(8, 0), batch_size=4, num_workers=2, persistent_workers=True)
    passes = []
    for _ in range(2):
        torch.manual_seed(5)
        passes.append(torch.cat([x for x, _ in loader]))
        end_persistent_workers(loader)
    assert torch.equal(*passes)
    end_persistent_workers(DataLoader(NoisyPoints(8, 0), batch_size=4))  # no workers to end: nothing happens
