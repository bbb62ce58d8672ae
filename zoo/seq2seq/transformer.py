"""Encoder-decoder Transformer (pre-LN) with a KV cache for incremental decoding.

Pre-LN (layer norm inside the residual branch, one final norm) trains stably without the long warm-up
post-LN needs (Xiong et al. 2020, https://arxiv.org/abs/2002.04745). Positions are sinusoidal (no
parameters, any length up to ``max_len``) or learned. With a joint source/target tokenizer the three
embedding matrices can be one (Press & Wolf 2017, https://arxiv.org/abs/1608.05859).

Reference: Vaswani et al. 2017, https://arxiv.org/abs/1706.03762
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zoo.seq2seq.attention import MultiHeadAttention
from zoo.seq2seq.base import Seq2SeqModel, check_source, check_step_tokens
from zoo.seq2seq.cache import KVCache

__all__ = ["Seq2SeqTransformer", "TransformerConfig", "sinusoidal_positions"]


@dataclass
class TransformerConfig:
    src_vocab: int = 8000
    tgt_vocab: int = 8000
    d_model: int = 256
    n_heads: int = 8
    n_layers: int = 3  # encoder and decoder each
    d_ff: int = 1024
    dropout: float = 0.1
    max_len: int = 256
    positions: Literal["sinusoidal", "learned"] = "sinusoidal"
    tie_embeddings: bool = True  # decoder input embedding == output projection
    share_embeddings: bool = True  # encoder embedding == decoder embedding (needs src_vocab == tgt_vocab)
    direction: str | None = None
    """The languages translated, as ``"src-tgt"`` codes (``"de-en"``): what ``zoo.train`` / ``zoo.evaluate``
    read from a parallel-corpus folder when no ``direction=`` is given."""

    def __post_init__(self) -> None:
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions must be 'sinusoidal' or 'learned', got {self.positions!r}")
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(
                f"share_embeddings=True needs src_vocab == tgt_vocab, got {self.src_vocab} and "
                f"{self.tgt_vocab}; pass share_embeddings=False for separate vocabularies"
            )
        for name in ("src_vocab", "tgt_vocab", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")


def sinusoidal_positions(length: int, dim: int) -> Tensor:
    """(length, dim) sin/cos table of Vaswani et al."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    inv = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(pos * inv)
    table[:, 1::2] = torch.cos(pos * inv[: dim // 2])
    return table


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(c.d_model)
        self.attn = MultiHeadAttention(c.d_model, c.n_heads, c.dropout)
        self.norm2 = nn.LayerNorm(c.d_model)
        self.ff = FeedForward(c.d_model, c.d_ff, c.dropout)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: Tensor, pad_mask: Tensor | None) -> Tensor:
        x = x + self.dropout(self.attn(self.norm1(x), key_padding_mask=pad_mask))
        return x + self.dropout(self.ff(self.norm2(x)))


class DecoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(c.d_model)
        self.self_attn = MultiHeadAttention(c.d_model, c.n_heads, c.dropout)
        self.norm2 = nn.LayerNorm(c.d_model)
        self.cross_attn = MultiHeadAttention(c.d_model, c.n_heads, c.dropout)
        self.norm3 = nn.LayerNorm(c.d_model)
        self.ff = FeedForward(c.d_model, c.d_ff, c.dropout)
        self.dropout = nn.Dropout(c.dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        src_pad_mask: Tensor | None,
        cache=None,
    ) -> Tensor:
        # Right-padded targets need no key padding mask: causality already hides later (pad) positions.
        x = x + self.dropout(self.self_attn(self.norm1(x), causal=True, cache=cache))
        kv = cache.cross_kv if cache is not None else None
        x = x + self.dropout(
            self.cross_attn(self.norm2(x), memory if kv is None else None, kv=kv, key_padding_mask=src_pad_mask)
        )
        return x + self.dropout(self.ff(self.norm3(x)))


class Seq2SeqTransformer(Seq2SeqModel):
    """``forward(src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab)``; ``start``/``step`` decode with a cache."""

    registry_name = "seq2seq-transformer"

    def __init__(self, config: TransformerConfig | None = None, **kwargs) -> None:
        config = config or TransformerConfig(**kwargs)
        super().__init__(config)
        c = config
        self.src_embed = nn.Embedding(c.src_vocab, c.d_model, padding_idx=self.pad_id)
        self.tgt_embed = self.src_embed if c.share_embeddings else nn.Embedding(
            c.tgt_vocab, c.d_model, padding_idx=self.pad_id
        )
        for emb in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
            nn.init.normal_(emb.weight, std=c.d_model**-0.5)
            with torch.no_grad():
                emb.weight[self.pad_id].zero_()
        if c.positions == "learned":
            self.pos_embed = nn.Embedding(c.max_len, c.d_model)
            nn.init.normal_(self.pos_embed.weight, std=0.02)
        else:
            self.register_buffer("pos_table", sinusoidal_positions(c.max_len, c.d_model), persistent=False)
        self.embed_dropout = nn.Dropout(c.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.n_layers))
        self.encoder_norm = nn.LayerNorm(c.d_model)
        self.decoder_layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.n_layers))
        self.decoder_norm = nn.LayerNorm(c.d_model)
        self.output = None if c.tie_embeddings else nn.Linear(c.d_model, c.tgt_vocab, bias=False)
        self.scale = math.sqrt(c.d_model)

    # --- pieces --------------------------------------------------------------------------------------
    def _positions(self, start: int, length: int) -> Tensor:
        if start + length > self.config.max_len:
            raise ValueError(
                f"sequence of {start + length} positions exceeds max_len={self.config.max_len} of this model"
            )
        if self.config.positions == "learned":
            return self.pos_embed.weight[start : start + length]
        return self.pos_table[start : start + length]

    def _embed(self, emb: nn.Embedding, ids: Tensor, start: int = 0) -> Tensor:
        x = emb(ids) * self.scale + self._positions(start, ids.shape[1])  # (B, L, D)
        return self.embed_dropout(x)

    def _logits(self, h: Tensor) -> Tensor:
        h = self.decoder_norm(h)
        return F.linear(h, self.tgt_embed.weight) if self.output is None else self.output(h)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor | None]:
        """``src (B, S)`` -> memory ``(B, S, D)`` and the padding mask (None when nothing is padded)."""
        if src.dim() != 2:
            raise ValueError(f"src must be (B, S) token ids, got shape {tuple(src.shape)}")
        pad = src == self.pad_id
        pad_mask = pad if torch.compiler.is_exporting() or bool(pad.any()) else None  # exported: always a mask
        x = self._embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, pad_mask)
        return self.encoder_norm(x), pad_mask

    def decode(self, tgt_in: Tensor, memory: Tensor, src_pad_mask: Tensor | None) -> Tensor:
        """Teacher-forced decoder over all target positions: ``(B, T)`` -> logits ``(B, T, V)``."""
        x = self._embed(self.tgt_embed, tgt_in)
        for layer in self.decoder_layers:
            x = layer(x, memory, src_pad_mask)
        return self._logits(x)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, pad_mask = self.encode(src)
        return self.decode(tgt_in, memory, pad_mask)

    # --- incremental decoding ------------------------------------------------------------------------
    def start(self, src: Tensor) -> KVCache:
        """Encode once and precompute every layer's cross-attention keys/values."""
        check_source(src, self.config.src_vocab)
        memory, pad_mask = self.encode(src)
        cache = KVCache.empty(len(self.decoder_layers), src_pad_mask=pad_mask)
        for layer, lc in zip(self.decoder_layers, cache.layers):
            lc.cross_kv = layer.cross_attn.project_kv(memory)
        if pad_mask is None:  # the cache still needs the batch size for reorder bookkeeping
            cache.extras["batch"] = torch.zeros(src.shape[0], 1, device=src.device)
        return cache

    def step(self, state: KVCache, tokens: Tensor) -> Tensor:
        """Feed ``tokens (B,)`` or ``(B, T)`` at the cached position; returns the last logits ``(B, V)``."""
        if tokens.dim() == 1:
            tokens = tokens[:, None]
        if not torch.compiler.is_exporting():  # the export's stand-in cache is checked by its graph's shapes
            self._check_step(state, tokens)
        x = self._embed(self.tgt_embed, tokens, start=state.position)
        for layer, lc in zip(self.decoder_layers, state.layers):
            x = layer(x, None, state.src_pad_mask, cache=lc)
        state.position += tokens.shape[1]
        return self._logits(x[:, -1])

    def _check_step(self, state: KVCache, tokens: Tensor) -> None:
        """Refuse a step the cache cannot take before any layer writes to it. Without cross-attention keys
        (a bare ``KVCache.empty``) each cross-attention would attend over the target itself, with no error; a
        batch other than the cache's broadcast into its buffer (one row into all) or failed deep in a layer."""
        check_step_tokens(tokens)
        if len(state.layers) != len(self.decoder_layers) or any(lc.cross_kv is None for lc in state.layers):
            raise ValueError(
                f"the cache must hold {len(self.decoder_layers)} layers with their cross-attention keys/values, "
                f"got {len(state.layers)} layers, "
                f"{sum(lc.cross_kv is not None for lc in state.layers)} with them: start decoding with "
                "state = model.start(src), which encodes the source into the cache"
            )
        B = tokens.shape[0]
        cross = state.layers[0].cross_kv[0].shape[0]
        cached = state.layers[0].cached_kv[0].shape[0] if getattr(state.layers[0], "length", 0) else None
        if cross not in (B, 1) or cached not in (B, None):
            rows = cross if cached is None else cached
            raise ValueError(
                f"tokens hold {B} rows but the cache holds {rows} (of model.start(src), {state.position} positions "
                "decoded since); pass one token per cached row, or state.reorder(index) the cache to the rows "
                "wanted first (beam search repeats each sentence's row with expand_index(B, K))"
            )
