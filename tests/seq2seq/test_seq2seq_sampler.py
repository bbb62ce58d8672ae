"""The token-budget batch sampler as a DataLoader's len() reads it, and as zoo.engine.fit trains on it."""

from __future__ import annotations

import random

import torch
from torch import nn

from zoo.engine import fit
from zoo.seq2seq.data import TokenBucketSampler


def _lengths() -> list[int]:
    rng = random.Random(2)
    return [rng.randint(1, 30) for _ in range(200)]


def test_the_token_budget_samplers_len_is_the_coming_epochs_batch_count_and_fit_steps_them_all():
    """Before: len() was the count of the epoch last iterated (the first epoch's at the start), while a token
    budget cuts another number of batches each epoch (88, 92, 91, 94 here); fit read it once, so the extra
    batches of later epochs were trained but never stepped."""
    lengths = _lengths()
    sampler = TokenBucketSampler(lengths, max_tokens=60, seed=0, pool=1)
    counts = []
    for epoch in (0, 1, 2, 3, 1):
        sampler.set_epoch(epoch)
        told = len(sampler)
        counts.append(len(list(sampler)))
        assert told == counts[-1], epoch
    assert len(set(counts)) > 1  # the budget cuts the epochs differently
    assert len(sampler) == len(list(sampler))  # without set_epoch: the epoch the iteration moved on to
    rng = random.Random(0)
    data = [(torch.randint(1, 50, (n,)), rng.randint(0, 1)) for n in lengths]

    def collate(batch):
        return nn.utils.rnn.pad_sequence([s for s, _ in batch], batch_first=True), torch.tensor([t for _, t in batch])

    class Bag(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.out = nn.Embedding(50, 4), nn.Linear(4, 2)

        def forward(self, x):
            return self.out(self.embed(x).mean(1))

    loader = torch.utils.data.DataLoader(data, batch_sampler=TokenBucketSampler(lengths, max_tokens=60, seed=0, pool=1),
                                         collate_fn=collate)
    result = fit(Bag(), loader, epochs=2, progress=False, amp=None)
    assert [row["step"] for row in result.history] == [counts[0], counts[0] + counts[1]]
