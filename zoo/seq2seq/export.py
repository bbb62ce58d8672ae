"""What ``zoo.export`` ships for a translator: the encoder and one decoder step, with the cache as tensors.

A folder with ``encoder.{onnx,pt2}``, ``decoder_step.{onnx,pt2}``, ``tokenizer.json`` (when the model has
one; :meth:`~zoo.seq2seq.tokenizer.Tokenizer.export_json`, which reads pasted text as zoo does) and ``export.json``; :class:`zoo.seq2seq.runner.ExportedTranslator` translates with it (greedy).

* ``encoder``: ``src (B, S) int64`` (token ids ending in EOS, right-padded with PAD) -> the decoder's
  initial ``state`` and its per-sentence ``context``.
* ``decoder_step``: ``tokens (B, 1) int64, *state, *context`` -> ``logits (B, V)`` and the next state.

Transformer: state = the self-attention cache ``self_k, self_v (L, B, H, P, Dh)`` (P = tokens decoded so
far; the encoder returns it empty, P = 0, and each step returns it one position longer), context = the
cross-attention keys/values ``cross_k, cross_v (L, B, H, S, Dh)`` computed once, and ``src_pad (B, S)``
bool. GRU: state = ``hidden (B, H)``, context = ``memory (B, S, H)``, the projected attention ``keys``
and ``src_pad``. Batch, source length and cache length are dynamic axes.

Each graph is checked against the model's own ``start``/``step`` (the path ``translate`` takes), not only
against the wrapper that is traced, on sources of up to ``max_len`` tokens (``src_len`` may not exceed it).
Tolerance: ``atol = rtol = 1e-4`` (logits and cache).

Two pieces differ from eager PyTorch because a graph cannot branch on data or pack sequences: the
attention always applies the padding mask (eager skips an all-false one: the same result), and the GRU
encoder runs its two directions as ``scan`` loops that hold the state past each sentence's end, which is
what ``pack_padded_sequence`` computes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch._higher_order_ops.scan import (
    scan,  # the loop torch.export and the ONNX exporter keep (prototype API)
)

from zoo.exporting import ExportSpec, Graph, check_int, register_exporter
from zoo.seq2seq.base import Seq2SeqModel
from zoo.seq2seq.cache import KVCache
from zoo.seq2seq.gru import GRUState, Seq2SeqGRU
from zoo.seq2seq.transformer import Seq2SeqTransformer

__all__ = ["export_gru", "export_transformer"]

EXPORT_FORMAT = "zoo.seq2seq-export/1"


# --- Transformer ------------------------------------------------------------------------------------------


class _ConcatCache:
    """A :class:`zoo.seq2seq.cache.LayerCache` stand-in for a traced step: the past arrives as tensors and
    leaves one position longer (a graph returns its cache; it cannot keep a buffer between calls)."""

    def __init__(self, k: Tensor, v: Tensor, cross_kv: tuple[Tensor, Tensor]) -> None:
        self.k, self.v, self.cross_kv = k, v, cross_kv

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.k, self.v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        return self.k, self.v


class TransformerEncoderGraph(nn.Module):
    def __init__(self, model: Seq2SeqTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor):
        m = self.model
        memory, _ = m.encode(src)  # (B, S, D)
        cross = [layer.cross_attn.project_kv(memory) for layer in m.decoder_layers]
        cross_k, cross_v = torch.stack([k for k, _ in cross]), torch.stack([v for _, v in cross])  # (L, B, H, S, Dh)
        empty = cross_k[:, :, :, :0]  # (L, B, H, 0, Dh): nothing decoded yet
        return empty, empty.clone(), cross_k, cross_v, src == m.pad_id  # the mask even when nothing is padded


class TransformerStepGraph(nn.Module):
    def __init__(self, model: Seq2SeqTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor, self_k: Tensor, self_v: Tensor, cross_k: Tensor, cross_v: Tensor,
                src_pad: Tensor):
        caches = [_ConcatCache(self_k[i], self_v[i], (cross_k[i], cross_v[i])) for i in range(self_k.shape[0])]
        logits = self.model.step(KVCache(caches, src_pad, position=self_k.shape[3]), tokens)  # (B, V)
        return logits, torch.stack([c.k for c in caches]), torch.stack([c.v for c in caches])


def _transformer_start(model: Seq2SeqTransformer, src: Tensor) -> tuple[Tensor, ...]:
    """The encoder graph's outputs computed by ``model.start`` (the eager decoding path)."""
    cache = model.start(src)
    k = torch.stack([lc.cross_kv[0] for lc in cache.layers])
    empty = k[:, :, :, :0]
    return empty, empty, k, torch.stack([lc.cross_kv[1] for lc in cache.layers]), src == model.pad_id


def _transformer_step(model: Seq2SeqTransformer, tokens, self_k, self_v, cross_k, cross_v, src_pad):
    """The step graph's outputs computed by ``model.step`` on a real :class:`KVCache`."""
    cache = KVCache.empty(self_k.shape[0], src_pad_mask=src_pad if bool(src_pad.any()) else None)
    for i, lc in enumerate(cache.layers):
        if self_k.shape[3]:
            lc.append(self_k[i], self_v[i])
        lc.cross_kv = (cross_k[i], cross_v[i])
    cache.position = self_k.shape[3]
    logits = model.step(cache, tokens)
    return (logits, torch.stack([lc.cached_kv[0] for lc in cache.layers]),
            torch.stack([lc.cached_kv[1] for lc in cache.layers]))


@register_exporter(Seq2SeqTransformer)
def export_transformer(model: Seq2SeqTransformer, batch: int = 2, src_len: int | None = None) -> ExportSpec:
    """Encoder + cached decoder step; sample sources of ``batch`` x ``src_len`` tokens (default 6, or the
    model's ``max_len`` where that is shorter), and others."""
    names = {"state": ("self_k", "self_v"), "context": ("cross_k", "cross_v", "src_pad")}
    enc, step = TransformerEncoderGraph(model), TransformerStepGraph(model)
    cache_axes = {1: "batch", 3: "past"}
    ctx_axes = {1: "batch", 3: "src_len"}
    return _spec(model, enc, step, names, batch, src_len,
                 enc_dynamic={0: {0: "batch", 1: "src_len"}},
                 step_dynamic={0: {0: "batch"}, 1: cache_axes, 2: cache_axes, 3: ctx_axes, 4: ctx_axes,
                               5: {0: "batch", 1: "src_len"}},
                 references=(lambda src: _transformer_start(model, src),
                             lambda *xs: _transformer_step(model, *xs)))


# --- GRU --------------------------------------------------------------------------------------------------


def _gru_direction(rnn: nn.GRU, suffix: str, x: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """One direction of ``rnn``'s layer 0 over ``x (S, B, E)``; where ``valid (S, B, 1)`` is false the
    state is held and the output is zero (the semantics of a packed sequence). -> outputs, final state."""
    w = [getattr(rnn, f"{n}_l0{suffix}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    h0 = x.new_zeros(x.shape[1], rnn.hidden_size)

    def body(h: Tensor, xs: tuple[Tensor, Tensor]):
        x_t, ok = xs
        h = torch.where(ok, torch.gru_cell(x_t, h, *w), h)
        return h, torch.where(ok, h, torch.zeros_like(h))

    h, out = scan(body, h0, (x, valid))
    return out, h


class GRUEncoderGraph(nn.Module):
    """``GRUEncoder`` + the keys projection, with ``pack_padded_sequence`` replaced by masked scans."""

    def __init__(self, model: Seq2SeqGRU) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor):
        m, enc = self.model, self.model.encoder
        pad = src == m.pad_id  # (B, S)
        # the tokens wherever padding stands (valid = the first `length` positions read a left-padded row's pads,
        # where the eager encoder skips them); an empty source reads one (pad) position, as in eager
        first = torch.arange(src.shape[1], device=src.device) == 0
        valid = (~pad | (pad.all(1, keepdim=True) & first)).transpose(0, 1)[..., None]  # (S, B, 1)
        x = enc.dropout(enc.embed(src)).transpose(0, 1)  # (S, B, E)
        fwd, h_f = _gru_direction(enc.rnn, "", x, valid)
        bwd, h_b = _gru_direction(enc.rnn, "_reverse", x.flip(0), valid.flip(0))
        memory = torch.cat([fwd, bwd.flip(0)], dim=-1).transpose(0, 1)  # (B, S, H)
        hidden = torch.tanh(enc.bridge(torch.cat([h_f, h_b], dim=-1)))  # (B, H)
        return hidden, memory, m.attn.project_keys(memory), pad


class GRUStepGraph(nn.Module):
    def __init__(self, model: Seq2SeqGRU) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor, hidden: Tensor, memory: Tensor, keys: Tensor, src_pad: Tensor):
        state = GRUState(hidden, memory, keys, src_pad)
        logits = self.model.step(state, tokens)  # (B, V)
        return logits, state.hidden


def _gru_start(model: Seq2SeqGRU, src: Tensor) -> tuple[Tensor, ...]:
    s = model.start(src)
    return s.hidden, s.memory, s.keys, src == model.pad_id


def _gru_step(model: Seq2SeqGRU, tokens, hidden, memory, keys, src_pad):
    state = GRUState(hidden, memory, keys, src_pad if bool(src_pad.any()) else None)
    return model.step(state, tokens), state.hidden


@register_exporter(Seq2SeqGRU)
def export_gru(model: Seq2SeqGRU, batch: int = 2, src_len: int | None = None) -> ExportSpec:
    """Encoder + decoder step; sample sources of ``batch`` x ``src_len`` tokens (default 6, or the model's
    ``max_len`` where that is shorter), and others."""
    names = {"state": ("hidden",), "context": ("memory", "keys", "src_pad")}
    seq = {0: "batch", 1: "src_len"}
    return _spec(model, GRUEncoderGraph(model), GRUStepGraph(model), names, batch, src_len,
                 enc_dynamic={0: seq}, step_dynamic={0: {0: "batch"}, 1: {0: "batch"}, 2: seq, 3: seq, 4: seq},
                 references=(lambda src: _gru_start(model, src), lambda *xs: _gru_step(model, *xs)))


# --- shared -----------------------------------------------------------------------------------------------


def _sources(model: Seq2SeqModel, lengths: list[int], seed: int) -> Tensor:
    """Right-padded token ids ``(B, max(lengths))`` ending in EOS, as ``translate`` builds them."""
    g = torch.Generator().manual_seed(seed)
    vocab = model.config.src_vocab
    src = torch.full((len(lengths), max(lengths)), model.pad_id, dtype=torch.long)
    for r, n in enumerate(lengths):
        src[r, : n - 1] = torch.randint(4, vocab, (n - 1,), generator=g)
        src[r, n - 1] = model.eos_id
    return src


@torch.no_grad()
def _step_inputs(model: Seq2SeqModel, enc: nn.Module, step: nn.Module, n_state: int, src: Tensor,
                 steps: int) -> tuple[Tensor, ...]:
    """The step graph's inputs after ``steps`` greedy steps from ``src`` (eager): a consistent sample."""
    outs = enc(src)
    state, context = list(outs[:n_state]), list(outs[n_state:])
    tokens = torch.full((src.shape[0], 1), model.bos_id, dtype=torch.long)
    for _ in range(steps):
        logits, *state = step(tokens, *state, *context)
        tokens = logits.argmax(-1, keepdim=True)
    return (tokens, *state, *context)


_SRC_LEN = 6  # the sample sources' default length
_MIN_SRC_LEN = 3  # the traced length and the one a sentence shorter both above 1: torch.export fixes an axis of size 1


def _spec(model, enc, step, names, batch, src_len, enc_dynamic, step_dynamic, references) -> ExportSpec:
    if model.max_len < _MIN_SRC_LEN:
        raise ValueError(f"this model's max_len={model.max_len} is under the {_MIN_SRC_LEN} source tokens its export "
                         f"is traced with (the source length is a dynamic axis of the graphs): build it with "
                         f"max_len >= {_MIN_SRC_LEN} to export it")
    # the default within max_len: a model built with max_len=4 failed to export with no options given
    # ('export option src_len=6 exceeds this model's max_len=4')
    src_len = min(_SRC_LEN, model.max_len) if src_len is None else src_len
    batch, src_len = check_int("batch", batch), check_int("src_len", src_len, minimum=_MIN_SRC_LEN)
    if src_len > model.max_len:  # the graphs' src_len axis ends at max_len: the trace itself would fail
        raise ValueError(f"export option src_len={src_len} exceeds this model's max_len={model.max_len} (the longest "
                         f"source it reads, EOS included): pass src_len <= {model.max_len}")
    lengths = [src_len - (i % 2) for i in range(batch)]  # every second sentence padded by one
    src = _sources(model, lengths, 0)
    # a longer source than the traced one where the position table has room (a Transformer's max_len=8 refused
    # the 9 positions of src_len + 3, so its export failed with the default options)
    others = [_sources(model, [min(src_len + 3, model.max_len), 2, src_len], 1), _sources(model, [2], 2)]
    state, context = names["state"], names["context"]
    limits = {"src_len": model.max_len, "past": model.max_len - 1}
    enc_graph = Graph("encoder", enc, (src,), ("src",), (*state, *context), enc_dynamic,
                      checks=[(o,) for o in others], max_sizes=limits, reference=references[0])
    n = len(state)
    decoded = min(3, model.max_len - 1)  # the traced cache's length: the next step's position must exist
    step_graph = Graph("decoder_step", step, _step_inputs(model, enc, step, n, src, decoded),
                       ("tokens", *state, *context), ("logits", *(f"new_{s}" for s in state)), step_dynamic,
                       checks=[_step_inputs(model, enc, step, n, others[0], 0), _step_inputs(model, enc, step, n, others[1], 1)],
                       min_sizes={"past": 0}, max_sizes=limits, reference=references[1])
    c = model.config
    meta = {"export_format": EXPORT_FORMAT, "model": model.registry_name, "state": list(state), "context": list(context),
            "pad_id": model.pad_id, "bos_id": model.bos_id, "eos_id": model.eos_id, "max_len": model.max_len,
            "src_vocab": c.src_vocab, "tgt_vocab": c.tgt_vocab, "tokenizer": "tokenizer.json" if model.tokenizer else None}
    files = {"tokenizer.json": model.tokenizer.export_json()} if model.tokenizer is not None else {}
    return ExportSpec([enc_graph, step_graph], atol=1e-4, rtol=1e-4, metadata=meta, files=files)
