"""What greedy and beam search (zoo/seq2seq/search.py) may emit."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.seq2seq.search import beam_search, greedy_search
from zoo.seq2seq.tokenizer import train_tokenizer


@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_search_emits_no_id_the_tokenizer_lacks(search):
    """Before: a model of 8000 output ids with a tokenizer of a few hundred ids trained on tiny data emitted ids past the
    tokenizer, which decoded to "" without a word."""
    torch.manual_seed(0)
    m = zoo.build("seq2seq-transformer", d_model=32, n_heads=2, n_layers=1, d_ff=64, src_vocab=8000, tgt_vocab=8000,
                  dropout=0.0).eval()
    m.tokenizer = train_tokenizer(["Ein Hund läuft.", "A dog runs."], vocab_size=8000, min_frequency=1)
    n = m.tokenizer.vocab_size
    assert n < 300
    step, past = m.step, torch.zeros(8000)
    past[n:] = 1e4  # the ids past the tokenizer the likeliest by far
    m.step = lambda state, tokens: step(state, tokens) + past
    src = torch.tensor([m.tokenizer.encode("Ein Hund läuft.") + [m.eos_id]])
    ids = search(m, src, max_len=10)[0]
    assert ids and max(ids) < n
