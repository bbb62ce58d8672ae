"""Masked multi-head attention (self and cross) on ``F.scaled_dot_product_attention``.

Mask conventions follow PyTorch, but the two boolean masks follow *different* PyTorch APIs:

* ``attn_mask``: boolean, ``True`` = may attend (SDPA's convention), or additive float (added to the
  scores; ``-inf`` masks). Shapes ``(T, S)``, ``(B, T, S)`` or anything that broadcasts to ``(B, H, T, S)``.
  **A boolean ``attn_mask`` is the opposite of ``nn.MultiheadAttention``'s** (there ``True`` = masked):
  a mask written for ``nn.MultiheadAttention`` / ``nn.Transformer`` must be passed as ``~mask``; for
  causality pass ``causal=True`` instead. Additive float masks mean the same in both.
* ``key_padding_mask``: boolean ``(B, S)``, ``True`` = padding, ignore (``nn.MultiheadAttention``'s
  convention, and what a tokenizer's ``ids == pad`` gives directly), so the opposite of ``attn_mask``.
* ``causal=True``: query ``i`` sees keys ``j <= i + (S - T)``, i.e. the causal mask is aligned to the
  *end* of the key sequence. With a KV cache (T new queries, S = past + T keys) this is the right
  alignment; SDPA's ``is_causal=True`` aligns top-left and would be wrong there, so it is only used
  when T == S and no other mask is given. The low-level :func:`attention` / :func:`reference_attention`
  refuse ``is_causal=True`` in every other case (pass ``causal_mask(T, S)`` as the mask there).

A row whose keys are all masked gives zeros (never NaN), in both paths and their gradients.

Reference: Vaswani et al., "Attention Is All You Need", https://arxiv.org/abs/1706.03762
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zoo._stacklevel import user_stacklevel

__all__ = ["MultiHeadAttention", "attention", "causal_mask", "combine_masks", "reference_attention"]

Impl = Literal["sdpa", "sdpa-always", "reference"]


def causal_mask(q_len: int, k_len: int, device: torch.device | None = None) -> Tensor:
    """Boolean ``(T, S)`` mask, ``True`` = may attend, aligned to the end of the keys (cache-safe)."""
    if q_len > k_len:
        raise ValueError(f"causal mask needs q_len <= k_len (queries are the last keys), got {q_len} > {k_len}")
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=k_len - q_len)


def _as_4d(mask: Tensor, name: str, target: tuple[int, int, int, int]) -> Tensor:
    """Lift a 2-D/3-D mask to 4-D and check that it broadcasts to ``target`` = (B, H, T, S)."""
    given = tuple(mask.shape)
    if mask.dim() == 2:  # (T, S)
        mask = mask[None, None]
    elif mask.dim() == 3:  # (B, T, S): same for every head
        mask = mask[:, None]
    elif mask.dim() != 4:
        raise ValueError(
            f"{name} must have 2, 3 or 4 dims broadcastable to (B, H, T, S) = {tuple(target)}, "
            f"got shape {tuple(mask.shape)}"
        )
    B, H, T, S = target
    # nn.MultiheadAttention's 3-D masks stack the heads into the batch: here 3-D is one mask per sentence
    per_head = (
        f" (a 3-D mask is (B, T, S) here, one for all heads; nn.MultiheadAttention's (B * n_heads, T, S) "
        f"layout is mask.view({B}, {H}, {T}, {S}))"
        if given == (B * H, T, S) and H > 1 else ""
    )
    try:
        torch.broadcast_shapes(tuple(mask.shape), target)
    except RuntimeError:
        raise ValueError(
            f"{name} of shape {given} cannot broadcast to (B, H, T, S) = {tuple(target)}{per_head}"
        ) from None
    if torch.broadcast_shapes(tuple(mask.shape), target) != target:
        raise ValueError(
            f"{name} of shape {given} cannot broadcast to (B, H, T, S) = {tuple(target)} (it would enlarge "
            f"it){per_head}"
        )
    return mask


def _warn_if_nn_causal_mask(attn_mask: Tensor) -> None:
    """Warn when a boolean ``attn_mask`` is exactly ``nn.MultiheadAttention``'s causal mask (``True`` above
    the diagonal = masked): read with this module's ``True`` = may attend, each query would see only its
    future, the last query nothing, and nothing fails to tell the caller."""
    if attn_mask.dim() != 2 or attn_mask.shape[0] != attn_mask.shape[1] or torch.compiler.is_compiling():
        return
    T = attn_mask.shape[0]
    if torch.equal(attn_mask, torch.ones(T, T, dtype=torch.bool, device=attn_mask.device).triu(1)):
        warnings.warn(
            f"attn_mask ({T}, {T}) is exactly nn.MultiheadAttention's causal mask, torch.ones(T, T, "
            "dtype=torch.bool).triu(1) (True = masked), but here a bool attn_mask means True = may attend "
            "(SDPA's convention): every query would attend only to later keys and the last to none. "
            "Pass causal=True (and no attn_mask), or ~mask.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def combine_masks(
    shape: tuple[int, int, int, int],
    *,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    causal: bool = False,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
) -> Tensor | None:
    """Merge an attention mask, a key padding mask and causality into one mask broadcastable to ``shape``.

    Returns ``None`` (no masking), a boolean mask (``True`` = attend) when every input is boolean, or an
    additive float mask of ``dtype`` when ``attn_mask`` is float. Shapes are validated with an error
    that prints both the mask's shape and the attention's (B, H, T, S). A boolean ``attn_mask`` is
    ``True`` = may attend, the opposite of ``nn.MultiheadAttention``'s (pass its masks as ``~mask``);
    ``key_padding_mask`` is ``True`` = padding, as there. ``nn.MultiheadAttention``'s causal mask passed
    unchanged warns.
    """
    B, _H, T, S = shape
    bool_parts: list[Tensor] = []
    additive: Tensor | None = None
    if attn_mask is not None:
        m = _as_4d(attn_mask, "attn_mask", shape)
        if m.dtype == torch.bool:
            _warn_if_nn_causal_mask(attn_mask)
            bool_parts.append(m)
        elif m.is_floating_point():
            additive = m.to(dtype)
        else:
            raise TypeError(f"attn_mask must be bool (True = attend) or float (additive), got {m.dtype}")
    if key_padding_mask is not None:
        kpm = key_padding_mask
        if kpm.dtype != torch.bool:
            raise TypeError(f"key_padding_mask must be bool (True = padding), got {kpm.dtype}")
        if kpm.shape != (B, S):
            raise ValueError(
                f"key_padding_mask must have shape (B, S) = {(B, S)}, got {tuple(kpm.shape)} "
                f"(attention is (B, H, T, S) = {tuple(shape)})"
            )
        bool_parts.append(~kpm[:, None, None, :])  # (B, 1, 1, S), True = attend
    if causal:
        bool_parts.append(causal_mask(T, S, device=device)[None, None])  # (1, 1, T, S)
    if not bool_parts and additive is None:
        return None
    allowed: Tensor | None = None
    for part in bool_parts:
        allowed = part if allowed is None else allowed & part
    if additive is None:
        return allowed
    if allowed is not None:
        additive = additive.masked_fill(~allowed, float("-inf"))
    return additive


def _dead_rows(mask: Tensor) -> Tensor:
    """(…, T, 1) boolean: rows where no key may be attended."""
    if mask.dtype == torch.bool:
        return ~mask.any(dim=-1, keepdim=True)
    return torch.isneginf(mask).all(dim=-1, keepdim=True)


def _revive(mask: Tensor, dead: Tensor) -> Tensor:
    """Let fully masked rows attend everywhere (their output is zeroed afterwards) so softmax stays finite."""
    if mask.dtype == torch.bool:
        return mask | dead
    return mask.masked_fill(dead, 0.0)


# Above this many scores per head (T * S) the explicit path loses in bf16 training too: fwd+bwd, 8 heads
# of 32, 1 thread (torch 2.14, AMX Xeon): T=32: explicit 21 ms vs SDPA 62; T=128: 31 vs 66; T=512: 70 vs
# 67 (and O(T^2) memory); T=2048: 352 vs 162. In fp32 SDPA wins at every length (2.8x at 512).
_EXPLICIT_MAX_SCORES = 256 * 256


def _sdpa_backward_is_slow(q: Tensor, k: Tensor | None = None) -> bool:
    """bf16 training on CPU at translation lengths: the fused CPU kernel's bf16 *backward* is 2-3x
    slower than the explicit path there (T ~ 20-130, head dim 32; measured in
    benchmarks/attention_decode.py), while its forward is fast. So bf16 with autograd and at most
    ``_EXPLICIT_MAX_SCORES`` scores per head uses the explicit path (bf16 matmuls on AMX); longer
    sequences, inference and fp32 use SDPA (O(T) memory instead of the explicit path's O(T * S))."""
    scores = q.shape[-2] * (k.shape[-2] if k is not None else q.shape[-2])
    return (q.device.type == "cpu" and q.dtype == torch.bfloat16 and torch.is_grad_enabled() and q.requires_grad
            and scores <= _EXPLICIT_MAX_SCORES)


def _check_is_causal(q: Tensor, k: Tensor, mask: Tensor | None, fn: str) -> None:
    """``is_causal`` means SDPA's top-left causal mask, the reference path's end-aligned one: the two agree
    only for T == S without another mask, so everything else is refused rather than path-dependent."""
    T, S = q.shape[-2], k.shape[-2]
    if T != S or mask is not None:
        with_mask = "" if mask is None else f" together with a mask of shape {tuple(mask.shape)}"
        raise ValueError(
            f"{fn}(is_causal=True) needs as many queries as keys and no mask, got q {tuple(q.shape)} "
            f"(T = {T}) and k {tuple(k.shape)} (S = {S}){with_mask}. Pass is_causal=False with "
            f"mask=causal_mask({T}, {S}) (end-aligned; combine_masks(..., causal=True) merges it with other "
            "masks), or use MultiHeadAttention's forward(..., causal=True)"
        )


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    impl: Impl = "sdpa",
) -> Tensor:
    """Attention over per-head tensors ``q (B, H, T, Dh)``, ``k, v (B, H, S, Dh)`` with a combined mask.

    ``impl="sdpa"`` uses ``F.scaled_dot_product_attention`` except for bf16 training on CPU (see
    :func:`_sdpa_backward_is_slow`); ``impl="sdpa-always"`` forces it (benchmarks).
    ``is_causal=True`` needs ``mask`` None and T == S, else it is a ValueError: SDPA would align the
    causal mask top-left and :func:`reference_attention` to the end of the keys, and this function picks
    between them itself. Callers with a cache or other masks pass :func:`causal_mask` / :func:`combine_masks`.
    """
    if is_causal:
        _check_is_causal(q, k, mask, "attention")
    dead = None
    if mask is not None:
        dead = _dead_rows(mask)
        # an exported graph cannot branch on data: it revives always (the same result, one op more)
        if torch.compiler.is_exporting() or bool(dead.any()):
            mask = _revive(mask, dead)
        else:
            dead = None
    if impl == "sdpa" and _sdpa_backward_is_slow(q, k):
        impl = "reference"
    if impl in ("sdpa", "sdpa-always"):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
    elif impl == "reference":
        out = reference_attention(q, k, v, mask, dropout_p=dropout_p, is_causal=is_causal)
    else:
        raise ValueError(f"impl must be 'sdpa', 'sdpa-always' or 'reference', got {impl!r}")
    if dead is not None:
        out = out.masked_fill(dead, 0.0)  # dead: (B|1, H|1, T, 1) broadcasts over Dh
    return out


def reference_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> Tensor:
    """The textbook path: explicit scores, ``masked_fill``, softmax, dropout, weighted sum.

    Kept for tests (SDPA must equal it) and for the benchmark (what SDPA saves). ``is_causal=True`` needs
    T == S and no ``mask``, as in :func:`attention`.
    """
    if is_causal:
        _check_is_causal(q, k, mask, "reference_attention")
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q * scale) @ k.transpose(-2, -1)  # (B, H, T, S)
    if is_causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], device=q.device), float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.to(scores.dtype)
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v  # (B, H, T, Dh)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with a real split into ``n_heads`` heads of ``d_model // n_heads``.

    Self-attention projects q, k, v with one fused GEMM; cross-attention projects the memory's k, v
    once (and, with a cache, only once per source sentence). ``impl`` picks SDPA (default) or the plain
    reference path; dropout on the attention weights is applied only in training mode.
    """

    def __init__(
        self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True, impl: Impl = "sdpa"
    ) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.impl: Impl = impl
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # rows: [q; k; v]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        nn.init.xavier_uniform_(self.in_proj.weight)
        if bias:
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    def _split(self, x: Tensor) -> Tensor:
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, L, Dh)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of ``memory (B, S, D)`` as ``(B, H, S, Dh)`` each (cross-attention cache)."""
        D = self.d_model
        w = self.in_proj.weight[D:]
        b = self.in_proj.bias[D:] if self.in_proj.bias is not None else None
        k, v = F.linear(memory, w, b).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def _check_context(self, query: Tensor, memory: Tensor | None, kv: tuple[Tensor, Tensor] | None) -> None:
        """Shape comparisons only: this runs at every decoding step. Wrong shapes otherwise fail deep inside
        a matmul, an unpacking or a broadcast, with messages that name none of these arguments."""
        B, D, H, Dh = query.shape[0], self.d_model, self.n_heads, self.head_dim
        if kv is not None and memory is not None:  # kv won, and a memory of other sentences went unread
            raise ValueError("cross-attention takes memory or its projection kv=project_kv(memory), not both: pass "
                             "one (kv saves projecting the same memory at every decoding step)")
        if kv is not None:
            if not isinstance(kv, (tuple, list)) or len(kv) != 2:
                got = f"{type(kv).__name__} of length {len(kv)}" if isinstance(kv, (tuple, list)) else type(kv).__name__
                raise ValueError(
                    f"kv must be a (keys, values) pair as project_kv(memory) returns, got a {got}; "
                    "pass kv=project_kv(memory) of this module"
                )
            k, v = kv
            if k.dim() != 4 or k.shape[0] not in (B, 1) or k.shape[1] != H or k.shape[3] != Dh or v.shape != k.shape:
                raise ValueError(
                    f"kv must be keys and values of one shape (B or 1, n_heads, S, head_dim) = ({B} or 1, {H}, S, "
                    f"{Dh}) for query {tuple(query.shape)}, got keys {tuple(k.shape)} and values "
                    f"{tuple(v.shape)}; pass kv=project_kv(memory) of this module, with memory's batch matching "
                    "the query's"
                )
        elif memory is not None and (memory.dim() != 3 or memory.shape[0] not in (B, 1) or memory.shape[2] != D):
            raise ValueError(
                f"memory must be (B or 1, S, d_model) = ({B} or 1, S, {D}) for query {tuple(query.shape)}, got "
                f"{tuple(memory.shape)}; pass the encoder output with a batch dimension (memory[None] for one "
                f"sentence), one row per query row, projected to d_model={D}"
            )

    def project_q(self, x: Tensor) -> Tensor:
        D = self.d_model
        b = self.in_proj.bias[:D] if self.in_proj.bias is not None else None
        return self._split(F.linear(x, self.in_proj.weight[:D], b))

    def forward(
        self,
        query: Tensor,
        memory: Tensor | None = None,
        *,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        kv: tuple[Tensor, Tensor] | None = None,
        cache=None,
    ) -> Tensor:
        """``query (B, T, D)`` -> ``(B, T, D)``.

        Self-attention when ``memory`` and ``kv`` are None; cross-attention over ``memory (B or 1, S, D)`` or
        over precomputed ``kv``, keys and values ``(B or 1, H, S, Dh)`` each (from :meth:`project_kv`).
        ``cache`` (a :class:`zoo.seq2seq.cache.LayerCache` slot) makes self-attention append this step's
        keys/values and attend to all cached positions.

        Masks: a boolean ``attn_mask`` is ``True`` = may attend (SDPA's convention), **the opposite of
        nn.MultiheadAttention's** ``attn_mask`` (``True`` = masked): pass such a mask as ``~mask``, and use
        ``causal=True`` for causality (a ``triu(1)`` causal mask passed unchanged warns). A float
        ``attn_mask`` is added to the scores, as there. ``key_padding_mask (B, S)`` is ``True`` = padding,
        ignore, the same as nn.MultiheadAttention's.
        """
        if query.dim() != 3 or query.shape[-1] != self.d_model:
            raise ValueError(f"query must be (B, T, {self.d_model}), got {tuple(query.shape)}")
        self._check_context(query, memory, kv)
        B, T, _ = query.shape
        if memory is None and kv is None:
            q, k, v = self.in_proj(query).chunk(3, dim=-1)
            q, k, v = self._split(q), self._split(k), self._split(v)
            if cache is not None:
                k, v = cache.append(k, v)
        else:
            q = self.project_q(query)
            k, v = kv if kv is not None else self.project_kv(memory)
        S = k.shape[-2]
        dropout_p = self.dropout if self.training else 0.0
        # One (the last) query sees every key, cached or not: causality needs no mask at all.
        causal = causal and T > 1
        # The fast causal kernel is exact only without a cache offset and without other masks.
        plain_causal = causal and T == S and attn_mask is None and key_padding_mask is None
        mask = None
        if not plain_causal:
            mask = combine_masks(
                (B, self.n_heads, T, S),
                attn_mask=attn_mask,
                key_padding_mask=key_padding_mask,
                causal=causal,
                dtype=q.dtype,
                device=q.device,
            )
        out = attention(q, k, v, mask, dropout_p=dropout_p, is_causal=plain_causal, impl=self.impl)
        out = out.transpose(1, 2).reshape(B, T, self.d_model)  # (B, T, D)
        return self.out_proj(out)
