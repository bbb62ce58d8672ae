"""Registered builders: ``zoo.build("seq2seq-transformer")`` and ``zoo.build("seq2seq-gru")``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from zoo.registry import register
from zoo.seq2seq.base import EXTRA_STATE_KEY, Seq2SeqModel, decode_extra_state
from zoo.seq2seq.gru import GRUConfig, Seq2SeqGRU
from zoo.seq2seq.transformer import Seq2SeqTransformer, TransformerConfig

__all__ = ["load_seq2seq_weights", "seq2seq_gru", "seq2seq_transformer"]

# Config keys that do not change any tensor's shape: a caller's value for these is kept when a file's
# own config rebuilds the model (e.g. dropout=0.0 for inference).
_SHAPE_FREE = {"dropout", "direction"}


def load_seq2seq_weights(model: Seq2SeqModel, path: Path, entry: Any) -> Seq2SeqModel:
    """Load a file written from a seq2seq model's state dict: weights, tokenizer and config.

    A file given by path (no manifest entry) carries its own config; when its shapes differ from the
    model built with defaults, the model is rebuilt from the file's config (keeping shape-free settings
    such as ``dropout`` from the caller), so ``zoo.build(name, weights="my.safetensors")`` just works.
    """
    from zoo import hub

    sd = hub.load_state_dict(path)
    if EXTRA_STATE_KEY not in sd:
        raise ValueError(
            f"{path}: no tokenizer/config in this weights file (key {EXTRA_STATE_KEY!r} absent); expected a file "
            f"written by model.save(), hub.save_weights(model) or hub.add_weights(model) from a {model.registry_name} "
            "that had its tokenizer attached"
        )
    blob = decode_extra_state(sd[EXTRA_STATE_KEY])
    file_config = blob["config"]
    if entry is None:
        ours = dataclasses.asdict(model.config)
        unknown = sorted(set(file_config) - set(ours))
        if unknown:
            raise ValueError(f"{path}: config keys {unknown} are not {model.registry_name} settings")
        wanted = {**file_config, **{k: ours[k] for k in _SHAPE_FREE if k in ours}}
        if wanted != ours:
            model = type(model)(type(model.config)(**wanted))
    model.load_state_dict(sd, strict=True)  # PyTorch names missing/unexpected keys and shape mismatches
    if model.tokenizer is None:
        raise ValueError(f"{path}: the weights file holds no tokenizer, so the model cannot translate text")
    return model.eval()


@register(
    "seq2seq-transformer",
    config=TransformerConfig,
    references=(
        "Vaswani et al. 2017, Attention Is All You Need, https://arxiv.org/abs/1706.03762",
        "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture, https://arxiv.org/abs/2002.04745",
    ),
    load_weights=load_seq2seq_weights,
)
def seq2seq_transformer(**config: Any) -> Seq2SeqTransformer:
    """A Transformer for translation; ``config``: :class:`TransformerConfig` fields."""
    return Seq2SeqTransformer(TransformerConfig(**config))


@register(
    "seq2seq-gru",
    config=GRUConfig,
    references=(
        ("Bahdanau et al. 2015, Neural Machine Translation by Jointly Learning to Align and Translate, "
         "https://arxiv.org/abs/1409.0473"),
        "Luong et al. 2015, Effective Approaches to Attention-based NMT, https://arxiv.org/abs/1508.04025",
    ),
    load_weights=load_seq2seq_weights,
)
def seq2seq_gru(**config: Any) -> Seq2SeqGRU:
    """A GRU encoder-decoder; ``config``: :class:`GRUConfig` fields (``attention``: ``"bahdanau"``,
    ``"luong-dot"`` or ``"luong-general"``)."""
    return Seq2SeqGRU(GRUConfig(**config))
