"""Sequence-to-sequence translation: masked attention, Transformer (KV cache) and GRU (Bahdanau/Luong)
encoder-decoders, greedy and beam search, byte-level BPE, Multi30k and parallel-text data.

    import zoo
    model = zoo.build("seq2seq-transformer", weights="multi30k-de-en")
    model.translate(["Ein Hund läuft über die Wiese."], beam_size=5)
"""

from __future__ import annotations

from zoo.seq2seq import cli as _cli  # noqa: F401  (registers `zoo translate`, the demo step, the data adapter)
from zoo.seq2seq import export as _export  # noqa: F401  (what zoo.export ships: encoder + decoder step)
from zoo.seq2seq.attention import MultiHeadAttention, causal_mask, combine_masks
from zoo.seq2seq.base import Seq2SeqModel
from zoo.seq2seq.cache import KVCache, LayerCache
from zoo.seq2seq.data import (
    ParallelDataset,
    ParallelText,
    TokenBucketSampler,
    collate,
    load_multi30k,
    load_parallel,
    make_loader,
)
from zoo.seq2seq.gru import GRUConfig, Seq2SeqGRU
from zoo.seq2seq.models import load_seq2seq_weights, seq2seq_gru, seq2seq_transformer
from zoo.seq2seq.runner import ExportedTranslator
from zoo.seq2seq.search import beam_search, greedy_search
from zoo.seq2seq.tokenizer import Tokenizer, train_tokenizer
from zoo.seq2seq.transformer import Seq2SeqTransformer, TransformerConfig
from zoo.seq2seq.translate import bleu_eval_fn, corpus_bleu, seq2seq_forward, training_config, translate

__all__ = [
    "ExportedTranslator",
    "GRUConfig",
    "KVCache",
    "LayerCache",
    "MultiHeadAttention",
    "ParallelDataset",
    "ParallelText",
    "Seq2SeqGRU",
    "Seq2SeqModel",
    "Seq2SeqTransformer",
    "TokenBucketSampler",
    "Tokenizer",
    "TransformerConfig",
    "beam_search",
    "bleu_eval_fn",
    "causal_mask",
    "collate",
    "combine_masks",
    "corpus_bleu",
    "greedy_search",
    "load_multi30k",
    "load_parallel",
    "load_seq2seq_weights",
    "make_loader",
    "seq2seq_forward",
    "seq2seq_gru",
    "seq2seq_transformer",
    "train_tokenizer",
    "training_config",
    "translate",
]
