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


def test_a_large_length_penalty_ranks_hypotheses_instead_of_overflowing():
    """Before: the option check accepts any finite length_penalty >= 0, but the search divided by
    ``((5 + length) / 6) ** alpha`` in Python floats: alpha=1e6 was "OverflowError: Numerical result out of range"
    at the first finished hypothesis. Now hypotheses rank as the quotient ranks them: at max_len=8, alpha=200
    (no overflow either way) and 1e6 both favour the longest hypotheses alike."""
    torch.manual_seed(0)
    m = zoo.build("seq2seq-gru", src_vocab=40, tgt_vocab=40, emb_dim=16, hidden=32, dropout=0.0).eval()
    src = torch.tensor([[5, 9, 17, 2], [7, 2, 0, 0]])
    huge = beam_search(m, src, beam_size=3, max_len=8, length_penalty=1e6)
    assert huge == beam_search(m, src, beam_size=3, max_len=8, length_penalty=200.0)
    assert [len(h) for h in huge] == [8, 8]
