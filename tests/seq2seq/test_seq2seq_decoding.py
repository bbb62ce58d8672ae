"""KV cache, incremental decoding and search: cached logits equal full recomputation at every step,
beam 1 equals greedy, beams follow reorders, and the cache stays consistent."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.seq2seq.cache import KVCache, LayerCache
from zoo.seq2seq.search import beam_search, default_max_len, greedy_search

V = 40
TINY = {
    "transformer": ("seq2seq-transformer", {"d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64, "src_vocab": V, "tgt_vocab": V}),
    "transformer-learned": (
        "seq2seq-transformer",
        {"d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64, "src_vocab": V, "tgt_vocab": V + 3, "positions": "learned",
             "tie_embeddings": False, "share_embeddings": False},
    ),
    "gru-bahdanau": ("seq2seq-gru", {"emb_dim": 16, "hidden": 32, "src_vocab": V, "tgt_vocab": V}),
    "gru-luong-dot": ("seq2seq-gru", {"emb_dim": 16, "hidden": 32, "src_vocab": V, "tgt_vocab": V, "attention": "luong-dot"}),
    "gru-luong-general": (
        "seq2seq-gru", {"emb_dim": 16, "hidden": 32, "src_vocab": V, "tgt_vocab": V, "attention": "luong-general"}
    ),
}


def _model(key, seed=0):
    torch.manual_seed(seed)
    name, kw = TINY[key]
    return zoo.build(name, **kw).eval()


def _src(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (3, 7), generator=g)
    src[1, 4:] = 0  # padded sentence
    src[2, 6] = 0
    return src


@pytest.mark.parametrize("key", list(TINY))
def test_cached_logits_equal_full_recomputation_at_every_step(key):
    m = _model(key)
    src = _src()
    tgt = torch.cat([torch.ones(3, 1, dtype=torch.long), torch.randint(4, V, (3, 8))], dim=1)
    with torch.no_grad():
        state = m.start(src)
        for t in range(tgt.shape[1]):
            cached = m.step(state, tgt[:, t])  # (B, V) from the cache
            full = m(src, tgt[:, : t + 1])[:, -1]  # recompute the whole prefix
            torch.testing.assert_close(cached, full, atol=2e-5, rtol=1e-5)


def test_transformer_step_accepts_several_tokens_at_once():
    m = _model("transformer")
    src, tgt = _src(), torch.randint(4, V, (3, 6))
    with torch.no_grad():
        s1 = m.start(src)
        a = m.step(s1, tgt[:, :4])  # a 4-token chunk: explicit causal mask with the cache offset
        b = m.step(s1, tgt[:, 4:])
        s2 = m.start(src)
        for t in range(6):
            c = m.step(s2, tgt[:, t])
            if t == 3:
                torch.testing.assert_close(a, c, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(b, c, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(b, m(src, tgt)[:, -1], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("key", ["transformer", "gru-bahdanau", "gru-luong-general"])
def test_beam_one_equals_greedy(key):
    m = _model(key, seed=3)
    for seed in range(3):
        src = _src(seed)
        assert beam_search(m, src, beam_size=1, max_len=12) == greedy_search(m, src, max_len=12)


def _sequence_logprob(m, src_row, hyp):
    toks = torch.tensor([[m.bos_id] + hyp + [m.eos_id]])
    with torch.no_grad():
        logp = torch.log_softmax(m(src_row[None], toks[:, :-1]), -1)
    return float(logp[0].gather(1, toks[0, 1:, None]).sum())


@pytest.mark.parametrize("key", ["gru-bahdanau", "gru-luong-general"])
def test_beam_search_scores_are_the_model_probabilities_and_beat_greedy(key):
    """With no length penalty a wider beam never finds a worse finished hypothesis than greedy, and the
    returned hypothesis' score is the model's own log-probability (so reorder kept the right rows)."""
    m = _model(key, seed=1)
    # Make EOS likely enough that hypotheses finish inside max_len.
    with torch.no_grad():
        m.out.bias[m.eos_id] += 3.0
    src = _src(5)
    greedy = greedy_search(m, src, max_len=30)
    beam = beam_search(m, src, beam_size=4, max_len=30, length_penalty=0.0)
    compared = 0
    for b in range(src.shape[0]):
        lp_beam = _sequence_logprob(m, src[b][src[b] != 0], beam[b])
        lp_greedy = _sequence_logprob(m, src[b][src[b] != 0], greedy[b])
        if len(greedy[b]) < 30:  # greedy finished: beam must do at least as well
            assert lp_beam >= lp_greedy - 1e-4
            compared += 1
    assert compared > 0


def test_beam_search_handles_rows_and_limits():
    m = _model("transformer")
    src = _src()
    out = beam_search(m, src, beam_size=3, max_len=5)
    assert len(out) == 3 and all(len(h) <= 5 for h in out)
    assert all(t not in (m.pad_id, m.bos_id, m.eos_id) for h in out for t in h)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(m, src, beam_size=0)


def test_default_max_len_follows_the_source_and_the_model():
    src = torch.tensor([[5, 6, 7, 2, 0, 0], [5, 2, 0, 0, 0, 0]])
    assert default_max_len(src, 0, 256).tolist() == [int(1.5 * 4) + 10, int(1.5 * 2) + 10]  # each row its own
    assert default_max_len(torch.full((1, 300), 5), 0, 256).tolist() == [255]


class _NeverStops:
    """The model, with EOS never chosen: a sentence runs to its length limit (an undertrained model's way)."""

    def __init__(self, model) -> None:
        self.model = model
        self.pad_id, self.bos_id, self.eos_id, self.max_len = model.pad_id, model.bos_id, model.eos_id, model.max_len

    def start(self, src):
        return self.model.start(src)

    def step(self, state, tokens):
        logits = self.model.step(state, tokens).clone()
        logits[:, self.eos_id] = float("-inf")
        return logits


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_sentence_that_never_stops_gets_its_own_limit_alone_or_batched(search):
    """The default limit came from the batch's longest source: a sentence without an end ran longer beside a
    long one than alone (19 vs 131 characters), so its translation depended on its neighbours."""
    m = _NeverStops(_model("transformer"))
    src = _src()  # rows of 7, 4 and 6 tokens
    run = greedy_search if search == "greedy" else (lambda model, s: beam_search(model, s, beam_size=2))
    batched = run(m, src)
    for i, lengths in enumerate((7, 4, 6)):
        alone = run(m, src[i:i + 1, :lengths])
        assert batched[i] == alone[0] and len(alone[0]) == int(1.5 * lengths) + 10


def test_layer_cache_appends_grows_and_reorders():
    lc = LayerCache(capacity=2)
    ks = [torch.randn(2, 3, 1, 4) for _ in range(5)]
    for i, k in enumerate(ks):
        k_all, v_all = lc.append(k, -k)
        assert k_all.shape == (2, 3, i + 1, 4)
    torch.testing.assert_close(k_all, torch.cat(ks, dim=2))
    torch.testing.assert_close(v_all, -torch.cat(ks, dim=2))
    lc.reorder(torch.tensor([1, 1, 0]))
    k_all, _ = lc.append(torch.zeros(3, 3, 1, 4), torch.zeros(3, 3, 1, 4))
    torch.testing.assert_close(k_all[:2, :, :5], torch.cat(ks, dim=2)[[1, 1]])
    torch.testing.assert_close(k_all[2, :, :5], torch.cat(ks, dim=2)[0])


def test_transformer_cache_tracks_positions_and_max_len():
    m = zoo.build("seq2seq-transformer", d_model=16, n_heads=2, n_layers=1, d_ff=16, src_vocab=V, tgt_vocab=V,
                  max_len=4).eval()
    state = m.start(torch.tensor([[5, 6, 2]]))
    assert isinstance(state, KVCache)
    for t in range(4):
        m.step(state, torch.tensor([1]))
    assert state.position == 4
    with pytest.raises(ValueError, match="max_len=4"):
        m.step(state, torch.tensor([1]))


def test_bad_source_shape_is_a_clear_error():
    for key in ("transformer", "gru-bahdanau"):
        with pytest.raises(ValueError, match=r"\(B, S\)"):
            _model(key).start(torch.tensor([1, 2, 3]))


@pytest.mark.parametrize("key", ["transformer", "transformer-learned"])
@pytest.mark.parametrize("chunk", [1, 3])
def test_backprop_through_cached_decoding_equals_teacher_forcing(key, chunk):
    """Before: backward through Transformer start + step failed ("modified by an inplace operation ...
    AsStrided"): each step wrote its keys/values into the buffer whose views earlier steps had saved."""
    m = _model(key)
    src = _src()
    tgt = torch.cat([torch.ones(3, 1, dtype=torch.long), torch.randint(4, V, (3, 5))], dim=1)
    state = m.start(src)
    logits = [m.step(state, tgt[:, :chunk])]  # a forced prefix in one call, then one token at a time
    logits += [m.step(state, tgt[:, t]) for t in range(chunk, tgt.shape[1])]
    params = [p for p in m.parameters() if p.requires_grad]
    cached = torch.autograd.grad(torch.stack(logits, 1).logsumexp(-1).sum(), params, allow_unused=True)
    full = torch.autograd.grad(m(src, tgt)[:, chunk - 1:].logsumexp(-1).sum(), params, allow_unused=True)
    assert sum(g is not None for g in cached) > len(params) // 2
    for a, b in zip(cached, full):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_layer_cache_grows_out_of_place_only_under_autograd():
    """Before: appends under autograd also went into the reused buffer, so a backward through keys read
    at earlier steps failed; inference must still write into the buffer (one copy per step)."""
    lc = LayerCache(capacity=8)
    with torch.no_grad():
        views = [lc.append(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4))[0] for _ in range(3)]
    assert len({v.untyped_storage().data_ptr() for v in views}) == 1  # no-grad: one buffer, written in place
    prefix = views[-1].clone()
    ks = [torch.randn(2, 3, 1, 4, requires_grad=True) for _ in range(3)]
    loss = sum(lc.append(k, k * 2)[0].square().sum() for k in ks)  # each step's keys saved for backward
    grads = torch.autograd.grad(loss, ks)
    for i, (k, g) in enumerate(zip(ks, grads)):
        torch.testing.assert_close(g, 2 * k.detach() * (len(ks) - i))  # step i's keys are read len - i times
    k_all, v_all = lc.cached_kv
    torch.testing.assert_close(k_all.detach(), torch.cat([prefix, *ks], dim=2).detach())
    torch.testing.assert_close(v_all[:, :, 3:].detach(), 2 * torch.cat(ks, dim=2).detach())
    with torch.no_grad():  # back to inference: a fresh buffer, the autograd tensors left as they were
        k_before = k_all.clone()
        lc.append(torch.zeros(2, 3, 1, 4), torch.zeros(2, 3, 1, 4))
    torch.testing.assert_close(k_all, k_before)
    assert lc.cached_kv[0].shape == (2, 3, 7, 4)


@pytest.mark.parametrize("key", ["gru-bahdanau", "gru-luong-dot", "gru-luong-general"])
def test_gru_step_feeds_a_token_prefix_in_order_like_the_transformer(key):
    """Before: Seq2SeqGRU.step with (B, T), T > 1, used only the last token (tokens[:, -1]) and advanced the
    position by 1, while Seq2SeqTransformer.step feeds all T: a forced prefix gave other logits."""
    m = _model(key)
    src, tgt = _src(), torch.cat([torch.ones(3, 1, dtype=torch.long), torch.randint(4, V, (3, 5))], dim=1)
    with torch.no_grad():
        chunked = m.start(src)
        a = m.step(chunked, tgt[:, :4])
        assert chunked.position == 4
        one_by_one = m.start(src)
        for t in range(4):
            c = m.step(one_by_one, tgt[:, t])
        torch.testing.assert_close(a, c)
        torch.testing.assert_close(a, m(src, tgt[:, :4])[:, -1], atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(m.step(chunked, tgt[:, 4:5]), m.step(one_by_one, tgt[:, 4]))  # (B, 1) = (B,)
        torch.testing.assert_close(chunked.hidden, one_by_one.hidden)
        with pytest.raises(ValueError, match=r"\(B, T\).*got shape \(3, 0\)"):
            m.step(m.start(src), tgt[:, :0])


def test_transformer_step_refuses_a_cache_it_cannot_take():
    """Before: a bare KVCache.empty(n_layers) (no cross-attention keys) decoded without error, each
    cross-attention attending over the target itself; a batch other than the cache's failed deep inside a layer
    (after the first layer had already written its keys into the cache) or, one row into two, broadcast."""
    m = _model("transformer")
    src = _src()
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"model\.start\(src\)"):
            m.step(KVCache.empty(len(m.decoder_layers)), torch.ones(3, dtype=torch.long))
        state = m.start(src)
        with pytest.raises(ValueError, match="tokens hold 2 rows but the cache holds 3"):
            m.step(state, torch.ones(2, dtype=torch.long))
        m.step(state, torch.ones(3, dtype=torch.long))
        for rows in (1, 4):
            with pytest.raises(ValueError, match=f"tokens hold {rows} rows but the cache holds 3"):
                m.step(state, torch.full((rows,), 5))
        assert state.position == 1 and all(lc.length == 1 for lc in state.layers)  # refused before any write
        tgt = torch.tensor([[1, 5]] * 3)
        torch.testing.assert_close(m.step(state, tgt[:, 1]), m(src, tgt)[:, -1], atol=2e-5, rtol=1e-5)


class _TableState:
    def __init__(self, rows):
        self.prefixes = [()] * rows

    def reorder(self, index):
        self.prefixes = [self.prefixes[i] for i in index.tolist()]


_TABLE = {(): {4: -0.01, 5: -2.3, 2: -5.0}, (4,): {4: -0.01, 2: -3.0, 5: -3.0}, (5,): {2: -0.1, 4: -5.0, 5: -5.0},
          (4, 4): {4: -0.01, 2: -3.0, 5: -4.0}, (4, 5): {2: -0.05, 4: -6.0, 5: -6.0}, (4, 4, 4): {2: -0.01, 4: -6.0, 5: -6.0}}


class _TableModel:
    """Log-probabilities read from a table of prefixes (ids 4 = a, 5 = b): greedy takes a, a, a, EOS
    (log p ~ -0.27); [b] + EOS (~ -2.4) and [a, a] + EOS (~ -3.1) finish first, inside the top 2."""

    pad_id, bos_id, eos_id, max_len = 0, 1, 2, 64

    def start(self, src):
        return _TableState(src.shape[0])

    def step(self, state, tokens):
        rows = []
        for i, t in enumerate(tokens.tolist()):
            if t != self.bos_id:
                state.prefixes[i] += (t,)
            row = torch.full((6,), -30.0)
            for tok, logp in _TABLE.get(state.prefixes[i], {self.eos_id: 0.0}).items():
                row[tok] = logp
            rows.append(row)
        return torch.stack(rows)


@pytest.mark.parametrize("length_penalty", [0.0, 0.6])
def test_beam_search_does_not_stop_while_a_live_hypothesis_scores_better(length_penalty):
    """Before: a sentence was done as soon as K hypotheses had finished (fairseq's rule), here [b] and [a, a]
    at step 3 with beam 2, while the live [a, a, a] finished better one step later: beam 2 returned [b],
    log p -2.4, where greedy found [a, a, a], -0.27."""
    m, src = _TableModel(), torch.tensor([[7, 8]])
    assert greedy_search(m, src, max_len=10) == [[4, 4, 4]]
    for k in (1, 2, 3):
        assert beam_search(m, src, beam_size=k, max_len=10, length_penalty=length_penalty) == [[4, 4, 4]]
