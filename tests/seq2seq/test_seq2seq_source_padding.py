"""Sources as the search reads them: padding ignored wherever it stands (a sentence translates the same in any
batch), and malformed sources refused by name before they reach an embedding or the length rule."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.seq2seq.search import beam_search, greedy_search

V = 40
TINY = {
    "transformer": ("seq2seq-transformer", {"d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64}),
    "gru-bahdanau": ("seq2seq-gru", {"emb_dim": 16, "hidden": 32}),
    "gru-luong-dot": ("seq2seq-gru", {"emb_dim": 16, "hidden": 32, "attention": "luong-dot"}),
    "gru-luong-general": ("seq2seq-gru", {"emb_dim": 16, "hidden": 32, "attention": "luong-general"}),
}
GRUS = [k for k in TINY if k.startswith("gru")]


def _model(key):
    torch.manual_seed(0)
    name, kw = TINY[key]
    return zoo.build(name, src_vocab=V, tgt_vocab=V, dropout=0.0, **kw).eval()


def _rows():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(4, V, (n,), generator=g).tolist() + [2] for n in (6, 2, 4)]  # EOS-terminated


def _padded(rows, layout):
    S = max(map(len, rows))
    out = []
    for x in rows:
        gap = [0] * (S - len(x))
        out.append(gap + x if layout == "left" else x[:1] + gap + x[1:] if layout == "middle" else x + gap)
    return torch.tensor(out)


@pytest.mark.parametrize("layout", ["left", "middle"])
@pytest.mark.parametrize("key", GRUS)
def test_gru_ignores_padding_wherever_it_stands(key, layout):
    """Before: the packed encoder read each row's first `length` positions, so a left-padded row was read as pads
    plus its start, its end dropped; every sentence of a left-padded batch came out as one string ('twoman
    readow .' for 'a dog runs .' alone). The Transformer's mask ignored the same padding all along."""
    m, rows = _model(key), _rows()
    src = _padded(rows, layout)
    for search in (lambda s: greedy_search(m, s, max_len=8), lambda s: beam_search(m, s, 3, max_len=8)):
        alone = [search(torch.tensor([x]))[0] for x in rows]
        assert search(src) == alone
        assert search(_padded(rows, "right")) == alone


@pytest.mark.parametrize("key", ["transformer", "gru-bahdanau"])
@pytest.mark.parametrize("src, message", [
    (torch.tensor([5, 6, 2]), r"src must be \(B, S\) integer token ids, got torch.int64 of shape \(3,\)"),
    (torch.tensor([[5.0, 2.0]]), r"src must be \(B, S\) integer token ids, got torch.float32"),
    (torch.zeros(2, 0, dtype=torch.long), r"at least one position per row, got shape \(2, 0\)"),
    (torch.tensor([[5, V, 2]]), rf"token id {V}, outside this model's source vocabulary of {V} ids"),
    (torch.tensor([[5, 2], [-1, 2]]), rf"token id -1, outside this model's source vocabulary of {V} ids"),
])
def test_search_refuses_a_malformed_source_by_name(key, src, message):
    """Before: a 1-D row was "IndexError: Dimension out of range" (the length rule read it before the model), an
    id outside the embedding "IndexError: index out of range in self", and a (B, 0) source was decoded by the
    Transformer from an empty memory with no error (the GRU: "Cannot pack empty tensors")."""
    m = _model(key)
    for search in (greedy_search, lambda model, s: beam_search(model, s, 2)):
        with pytest.raises(ValueError, match=message):
            search(m, src)


@pytest.mark.parametrize("key", GRUS)
def test_a_gru_gives_an_empty_batch_no_hypotheses(key):
    """Before: its encoder failed on it ("Cannot pack empty tensors"), where the Transformer gave []."""
    m, src = _model(key), torch.zeros(0, 4, dtype=torch.long)
    assert greedy_search(m, src) == [] and beam_search(m, src, 3) == []


def test_a_beam_size_below_one_is_refused_before_a_run_trains():
    """beam_size (how validation BLEU is decoded) was checked only when BLEU was decoded: zoo.train ran its epoch
    (and zoo.evaluate its loss pass) first, then failed."""
    pairs = [("ein hund läuft .", "a dog runs ."), ("zwei katzen .", "two cats .")] * 4
    model = zoo.build("seq2seq-gru", emb_dim=8, hidden=8)
    with pytest.raises(ValueError, match=r"beam_size must be an int >= 1, got 0"):
        zoo.train(model, pairs, val_data=pairs, epochs=1, beam_size=0, progress=False)
    assert model.tokenizer is None  # refused before the data step trained one into the model
