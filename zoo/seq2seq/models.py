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


def _shape_free(file_config: dict[str, Any]) -> set[str]:
    # max_len only bounds the positions a model accepts, except for learned positions, whose table it sizes
    return _SHAPE_FREE | ({"max_len"} if file_config.get("positions") != "learned" else set())


def load_seq2seq_weights(model: Seq2SeqModel, path: Path, entry: Any,
                         requested: dict[str, Any] | None = None) -> Seq2SeqModel:
    """Load a file written from a seq2seq model's state dict: weights, tokenizer and config.

    The file carries its own config, which decides every shape: when the model built from the defaults
    (or from a manifest entry) differs from it, the model is rebuilt from the file's config (shape-free
    settings such as ``dropout`` from the caller where given, else from the file), so
    ``zoo.build(name, weights="my.safetensors")`` just works. A shape-defining setting the caller asked for that
    differs from the file's is an error naming both values, never silently dropped.
    """
    from zoo import hub
    from zoo.hub.state import dtype_mismatches, integer_weights

    sd = hub.load_state_dict(path)
    if EXTRA_STATE_KEY not in sd:
        raise ValueError(
            f"{path}: no tokenizer/config in this weights file (key {EXTRA_STATE_KEY!r} absent); expected a file "
            f"written by model.save(), hub.save_weights(model) or hub.add_weights(model) from a {model.registry_name} "
            "that had its tokenizer attached"
        )
    blob = decode_extra_state(sd[EXTRA_STATE_KEY])
    file_config = blob["config"]
    ours = dataclasses.asdict(model.config)
    unknown = sorted(set(file_config) - set(ours))
    if unknown:
        raise ValueError(f"{path}: config keys {unknown} are not {model.registry_name} settings")
    free = _shape_free(file_config)
    requested = requested or {}
    asked_direction = requested.get("direction")
    own_direction = file_config.get("direction") or (entry.config.get("direction") if entry is not None else None)
    if own_direction and asked_direction not in (None, own_direction):
        # a label, not a shape, but a false one: evaluate then scored en-de references against de-en output
        # (BLEU 0.006) without the wrong-direction warning, which compares against the label
        raise ValueError(f"{entry.name if entry is not None else path} translates {own_direction}, but "
                         f"direction={asked_direction!r} was asked for: leave direction out to use the file's, or "
                         "build without weights= to train a model of that direction")
    asked = [k for k, v in file_config.items() if k not in free and k in requested and requested[k] != v]
    if asked:
        found = ", ".join(f"{k}={file_config[k]!r}" for k in asked)
        wanted = ", ".join(f"{k}={requested[k]!r}" for k in asked)
        raise ValueError(
            f"{entry.name if entry is not None else path} holds a {model.registry_name} with {found}, but {wanted} "
            "was asked for: these settings fix tensor shapes, so the file's weights cannot be loaded with them; "
            "leave them out to use the file's "
            f"(only {', '.join(sorted(k for k in free if k in ours))} may differ from the file), or build without "
            "weights= to train a model of that shape")
    # a shape-free setting the caller left out is the file's own (hub.save_weights and torch.save of the state
    # dict record it nowhere else), not the builder's default that ``ours`` holds for it
    kept = {k: requested[k] if k in requested else file_config[k] if file_config.get(k) is not None else ours[k]
            for k in free if k in ours}
    wanted_config = {**file_config, **kept}
    if wanted_config != ours:
        model = type(model)(type(model.config)(**wanted_config))
    kinds = dtype_mismatches(model.state_dict(), sd)  # load_state_dict's copy_ would cast them without a word
    if kinds:
        raise ValueError(f"{path}: {integer_weights(kinds, model.registry_name)}")
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
