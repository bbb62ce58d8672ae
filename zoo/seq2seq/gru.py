"""GRU encoder-decoder with Bahdanau (additive) or Luong (dot / general) attention.

* Bahdanau et al. 2015, https://arxiv.org/abs/1409.0473: the context is computed from the *previous*
  decoder state and fed into the GRU with the embedding; the output layer sees state, context and
  embedding (the variant of bentrevett/pytorch-seq2seq notebook 3).
* Luong et al. 2015, https://arxiv.org/abs/1508.04025: the GRU runs first; attention uses the *new*
  state (``dot``: h·s, ``general``: h·W s) and the attentional state ``tanh(W [c; h])`` gives the logits.
  Because the GRU does not depend on the context, teacher forcing runs it over the whole sequence at
  once.

The encoder is a bidirectional GRU over packed sequences; its final states initialise the decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from zoo.seq2seq.base import Seq2SeqModel, check_source, check_step_tokens

__all__ = ["AdditiveAttention", "GRUConfig", "LuongAttention", "Seq2SeqGRU"]

AttentionKind = Literal["bahdanau", "luong-dot", "luong-general"]


@dataclass
class GRUConfig:
    src_vocab: int = 8000
    tgt_vocab: int = 8000
    emb_dim: int = 256
    hidden: int = 512  # decoder state; the encoder uses hidden // 2 per direction
    attention: AttentionKind = "bahdanau"
    dropout: float = 0.3
    max_len: int = 256
    direction: str | None = None
    """The languages translated, as ``"src-tgt"`` codes (``"de-en"``): what ``zoo.train`` / ``zoo.evaluate``
    read from a parallel-corpus folder when no ``direction=`` is given."""

    def __post_init__(self) -> None:
        if self.attention not in ("bahdanau", "luong-dot", "luong-general"):
            raise ValueError(
                f"attention must be 'bahdanau', 'luong-dot' or 'luong-general', got {self.attention!r}"
            )
        if self.hidden % 2:
            raise ValueError(f"hidden must be even (two encoder directions of hidden // 2), got {self.hidden}")
        for name in ("src_vocab", "tgt_vocab", "emb_dim", "hidden", "max_len"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def _masked_softmax(scores: Tensor, pad_mask: Tensor | None) -> Tensor:
    """softmax over the last dim with padding (True) removed; a fully padded row gives zeros."""
    if pad_mask is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(pad_mask, float("-inf"))
    dead = pad_mask.all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(dead, 0.0), dim=-1)
    return weights.masked_fill(dead, 0.0)


class AdditiveAttention(nn.Module):
    """Bahdanau: ``v^T tanh(W_q q + W_k k)``; keys are projected once per source (``project_keys``)."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.w_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.w_k = nn.Linear(key_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.w_k(keys)  # (B, S, A)

    def forward(self, query: Tensor, keys_proj: Tensor, values: Tensor, pad_mask: Tensor | None) -> Tensor:
        # query (B, T, Q), keys_proj (B, S, A), values (B, S, E) -> context (B, T, E)
        energy = torch.tanh(self.w_q(query)[:, :, None] + keys_proj[:, None])  # (B, T, S, A)
        weights = _masked_softmax(self.v(energy).squeeze(-1), None if pad_mask is None else pad_mask[:, None])
        return weights @ values


class LuongAttention(nn.Module):
    """Luong ``dot`` (h·s) or ``general`` (h·W s) scores; keys are projected once per source."""

    def __init__(self, query_dim: int, key_dim: int, kind: Literal["dot", "general"]) -> None:
        super().__init__()
        if kind == "dot" and query_dim != key_dim:
            raise ValueError(f"Luong dot attention needs query_dim == key_dim, got {query_dim} and {key_dim}")
        self.kind = kind
        self.w = nn.Linear(key_dim, query_dim, bias=False) if kind == "general" else None

    def project_keys(self, keys: Tensor) -> Tensor:
        return keys if self.w is None else self.w(keys)  # (B, S, Q)

    def forward(self, query: Tensor, keys_proj: Tensor, values: Tensor, pad_mask: Tensor | None) -> Tensor:
        scores = query @ keys_proj.transpose(1, 2)  # (B, T, S)
        weights = _masked_softmax(scores, None if pad_mask is None else pad_mask[:, None])
        return weights @ values


class GRUEncoder(nn.Module):
    def __init__(self, c: GRUConfig, embed: nn.Embedding) -> None:
        super().__init__()
        self.embed = embed
        self.rnn = nn.GRU(c.emb_dim, c.hidden // 2, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(c.hidden, c.hidden)  # final fwd/bwd states -> decoder's initial state
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, src: Tensor, pad_id: int) -> tuple[Tensor, Tensor, Tensor | None]:
        # src (B, S) -> outputs (B, S, H), h0 (B, H), pad mask (B, S) or None
        pad = src == pad_id
        here = pad.cpu()  # one transfer for the packing's lengths and the layout read below
        lengths = (~here).sum(1).clamp(min=1)  # an empty source still reads one (pad) position
        x = self.dropout(self.embed(src))
        if not src.shape[0]:  # nothing to pack (pack_padded_sequence refuses an empty batch)
            return x.new_zeros(0, src.shape[1], self.bridge.out_features), x.new_zeros(0, self.bridge.out_features), None
        # A packed row is its first `length` positions: a pad before a token (left padding, as Hugging Face's
        # decoder-only habit pads) was read as input and the row's end cut off. The tokens go first, in order, and
        # the outputs back to their positions, so padding is ignored wherever it stands, as the Transformer's mask
        # ignores it.
        order = pad.to(torch.uint8).argsort(dim=1, stable=True) if bool((here[:, :-1] & ~here[:, 1:]).any()) else None
        if order is not None:
            x = x.gather(1, order[..., None].expand_as(x))
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, h = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        if order is not None:
            out = out.gather(1, order.argsort(dim=1)[..., None].expand_as(out))
        h0 = torch.tanh(self.bridge(torch.cat([h[0], h[1]], dim=-1)))  # (B, H)
        return out, h0, (pad if bool(here.any()) else None)


@dataclass
class GRUState:
    """Search state: decoder hidden, encoder outputs, projected keys, padding mask."""

    hidden: Tensor  # (B, H)
    memory: Tensor  # (B, S, H)
    keys: Tensor  # (B, S, A)
    pad_mask: Tensor | None
    position: int = 0

    def reorder(self, index: Tensor) -> None:
        self.hidden = self.hidden.index_select(0, index)
        self.memory = self.memory.index_select(0, index)
        self.keys = self.keys.index_select(0, index)
        if self.pad_mask is not None:
            self.pad_mask = self.pad_mask.index_select(0, index)


class Seq2SeqGRU(Seq2SeqModel):
    """``forward(src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab)``; ``start``/``step`` for search."""

    registry_name = "seq2seq-gru"

    def __init__(self, config: GRUConfig | None = None, **kwargs) -> None:
        config = config or GRUConfig(**kwargs)
        super().__init__(config)
        c = config
        H, E = c.hidden, c.emb_dim
        self.encoder = GRUEncoder(c, nn.Embedding(c.src_vocab, E, padding_idx=self.pad_id))
        self.tgt_embed = nn.Embedding(c.tgt_vocab, E, padding_idx=self.pad_id)
        self.dropout = nn.Dropout(c.dropout)
        self.bahdanau = c.attention == "bahdanau"
        if self.bahdanau:
            self.attn: nn.Module = AdditiveAttention(H, H, H)
            self.cell = nn.GRUCell(E + H, H)
            self.out = nn.Linear(H + H + E, c.tgt_vocab)
        else:
            self.attn = LuongAttention(H, H, "dot" if c.attention == "luong-dot" else "general")
            self.rnn = nn.GRU(E, H, batch_first=True)
            self.combine = nn.Linear(2 * H, H)
            self.out = nn.Linear(H, c.tgt_vocab)

    def start(self, src: Tensor) -> GRUState:
        check_source(src, self.config.src_vocab)
        memory, h0, pad = self.encoder(src, self.pad_id)
        return GRUState(h0, memory, self.attn.project_keys(memory), pad)

    def _bahdanau_step(self, state: GRUState, emb: Tensor) -> Tensor:
        # emb (B, E); context from the previous state, then the GRU, then the output over [h; c; e]
        ctx = self.attn(state.hidden[:, None], state.keys, state.memory, state.pad_mask)[:, 0]  # (B, H)
        state.hidden = self.cell(torch.cat([emb, ctx], dim=-1), state.hidden)
        return self.out(self.dropout(torch.cat([state.hidden, ctx, emb], dim=-1)))

    def _luong_outputs(self, states: Tensor, state: GRUState) -> Tensor:
        # states (B, T, H) -> logits (B, T, V)
        ctx = self.attn(states, state.keys, state.memory, state.pad_mask)  # (B, T, H)
        att = torch.tanh(self.combine(torch.cat([ctx, states], dim=-1)))
        return self.out(self.dropout(att))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        state = self.start(src)
        emb = self.dropout(self.tgt_embed(tgt_in))  # (B, T, E)
        if self.bahdanau:
            return torch.stack([self._bahdanau_step(state, emb[:, t]) for t in range(emb.shape[1])], dim=1)
        states, _ = self.rnn(emb, state.hidden[None].contiguous())  # whole sequence at once
        return self._luong_outputs(states, state)

    def step(self, state: GRUState, tokens: Tensor) -> Tensor:
        """Feed ``tokens (B,)`` or ``(B, T)`` in order; returns the last logits ``(B, V)`` and advances ``state``
        by T positions: the same as T one-token steps, and what :meth:`Seq2SeqTransformer.step` means."""
        if tokens.dim() == 1:
            tokens = tokens[:, None]
        check_step_tokens(tokens)
        emb = self.dropout(self.tgt_embed(tokens))  # (B, T, E)
        state.position += tokens.shape[1]
        if self.bahdanau:
            for t in range(emb.shape[1]):
                logits = self._bahdanau_step(state, emb[:, t])
            return logits
        out, h = self.rnn(emb, state.hidden[None].contiguous())
        state.hidden = h[0]
        # only the last position's logits are returned, so the attention runs for that one alone
        return self._luong_outputs(out[:, -1:], state)[:, 0]
