"""Key/value cache for incremental (step-by-step) Transformer decoding.

Self-attention keys/values are appended once per step into preallocated buffers (grown by doubling, so
a step costs one copy of the new position, not of the whole prefix); cross-attention keys/values are
computed once per source sentence. ``reorder`` follows the beams chosen by beam search.

Decoding with autograd (scheduled sampling, minimum-risk training, ...) grows the cache out of place
instead: the attention of every earlier step saved views of the buffer for its backward, and writing the
next position into that buffer would invalidate them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = ["KVCache", "LayerCache"]


class LayerCache:
    """One decoder layer's self-attention keys/values, ``(B, H, L, Dh)`` each, plus its cross k/v."""

    def __init__(self, capacity: int = 64) -> None:
        self._k: Tensor | None = None
        self._v: Tensor | None = None
        self.length = 0
        self._capacity = capacity
        self.cross_kv: tuple[Tensor, Tensor] | None = None

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store this step's ``k, v (B, H, T, Dh)``; return all cached keys/values ``(B, H, L + T, Dh)``.

        Without autograd the step is written into the reused buffer (one copy of the new position); with
        it the cache is concatenated anew, so that the tensors earlier steps saved for backward stay intact.
        """
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad or self._tracks_grad()):
            return self._append_out_of_place(k, v)
        B, H, T, Dh = k.shape
        need = self.length + T
        if self._k is None or need > self._k.shape[2] or self._k.dtype != k.dtype:
            cap = max(self._capacity, need)
            if self._k is not None:
                cap = max(cap, 2 * self._k.shape[2])
            new_k = k.new_empty(B, H, cap, Dh)
            new_v = v.new_empty(B, H, cap, Dh)
            if self._k is not None and self.length:
                new_k[:, :, : self.length] = self._k[:, :, : self.length]
                new_v[:, :, : self.length] = self._v[:, :, : self.length]
            self._k, self._v = new_k, new_v
        self._k[:, :, self.length : need] = k
        self._v[:, :, self.length : need] = v
        self.length = need
        return self._k[:, :, :need], self._v[:, :, :need]

    def _tracks_grad(self) -> bool:
        # A cache grown with autograd must not be written in place even if this step's k/v need no grad.
        return self._k is not None and (self._k.requires_grad or self._v.requires_grad)

    def _append_out_of_place(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if self._k is None or self._v is None or self.length == 0:
            self._k, self._v = k, v
        else:
            # Slicing drops the spare room of a buffer filled without autograd; like the in-place path,
            # the new step's dtype wins.
            self._k = torch.cat([self._k[:, :, : self.length].to(k.dtype), k], dim=2)
            self._v = torch.cat([self._v[:, :, : self.length].to(v.dtype), v], dim=2)
        # No spare room: an in-place append after this (autograd switched off) allocates a fresh buffer
        # rather than writing into tensors the graph may still hold.
        self.length = self._k.shape[2]
        return self._k, self._v

    @property
    def cached_kv(self) -> tuple[Tensor, Tensor]:
        """All cached keys/values, ``(B, H, L, Dh)`` each: views of the buffers, whose room past ``L`` is unused."""
        if self._k is None or self._v is None:
            raise ValueError("nothing is cached yet: append a step first")
        return self._k[:, :, : self.length], self._v[:, :, : self.length]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search's survivors; may repeat rows)."""
        if self._k is not None:
            self._k = self._k.index_select(0, index)
            self._v = self._v.index_select(0, index)
        if self.cross_kv is not None:
            self.cross_kv = (self.cross_kv[0].index_select(0, index), self.cross_kv[1].index_select(0, index))


@dataclass
class KVCache:
    """The whole decoder's cache: one :class:`LayerCache` per layer, the source padding mask, and the step."""

    layers: list[LayerCache]
    src_pad_mask: Tensor | None = None  # (B, S) True = padding
    position: int = 0
    extras: dict[str, Tensor] = field(default_factory=dict)

    @classmethod
    def empty(cls, n_layers: int, capacity: int = 64, src_pad_mask: Tensor | None = None) -> KVCache:
        return cls([LayerCache(capacity) for _ in range(n_layers)], src_pad_mask)

    def reorder(self, index: Tensor) -> None:
        for layer in self.layers:
            layer.reorder(index)
        if self.src_pad_mask is not None:
            self.src_pad_mask = self.src_pad_mask.index_select(0, index)
        self.extras = {k: v.index_select(0, index) for k, v in self.extras.items()}

    @property
    def batch_size(self) -> int:
        if self.src_pad_mask is not None:
            return self.src_pad_mask.shape[0]
        kv = self.layers[0].cross_kv
        return kv[0].shape[0] if kv is not None else 0

    def __len__(self) -> int:
        return self.position


def expand_index(batch: int, beams: int, device: torch.device | None = None) -> Tensor:
    """``[0,0,..,1,1,..]``: the rows that repeat each sentence ``beams`` times."""
    return torch.arange(batch, device=device).repeat_interleave(beams)
