"""Sequence-to-sequence translation: masked attention, Transformer (KV cache) and GRU (Bahdanau/Luong)
encoder-decoders, greedy and beam search, byte-level BPE, Multi30k and parallel-text data.

    import zoo
    model = zoo.build("seq2seq-transformer", weights="multi30k-de-en")
    zoo.predict(model, ["Ein Hund läuft über die Wiese."], beam_size=5)
"""

from __future__ import annotations

from zoo._lazy import lazy_exports
from zoo.registry import declare
from zoo.seq2seq import cli as _cli  # noqa: F401  (registers `zoo translate` and the demo step; imports no torch)

declare("seq2seq-transformer", family="seq2seq", module="zoo.seq2seq.models",
        summary="Pre-LN Transformer encoder-decoder with KV-cache decoding, beam search and a byte-level BPE")
declare("seq2seq-gru", family="seq2seq", module="zoo.seq2seq.models",
        summary="Bidirectional-GRU encoder, GRU decoder with Bahdanau or Luong attention, beam search, byte-level BPE")

_EXPORTS = {
    "MultiHeadAttention": "zoo.seq2seq.attention",
    "causal_mask": "zoo.seq2seq.attention",
    "combine_masks": "zoo.seq2seq.attention",
    "Seq2SeqModel": "zoo.seq2seq.base",
    "KVCache": "zoo.seq2seq.cache",
    "LayerCache": "zoo.seq2seq.cache",
    "corpus_data": "zoo.seq2seq.corpus",
    "ParallelDataset": "zoo.seq2seq.data",
    "ParallelText": "zoo.seq2seq.data",
    "TokenBucketSampler": "zoo.seq2seq.data",
    "collate": "zoo.seq2seq.data",
    "load_multi30k": "zoo.seq2seq.data",
    "load_parallel": "zoo.seq2seq.data",
    "make_loader": "zoo.seq2seq.data",
    "GRUConfig": "zoo.seq2seq.gru",
    "Seq2SeqGRU": "zoo.seq2seq.gru",
    "load_seq2seq_weights": "zoo.seq2seq.models",
    "seq2seq_gru": "zoo.seq2seq.models",
    "seq2seq_transformer": "zoo.seq2seq.models",
    "ExportedTranslator": "zoo.seq2seq.runner",
    "beam_search": "zoo.seq2seq.search",
    "greedy_search": "zoo.seq2seq.search",
    "Tokenizer": "zoo.seq2seq.tokenizer",
    "train_tokenizer": "zoo.seq2seq.tokenizer",
    "Seq2SeqTransformer": "zoo.seq2seq.transformer",
    "TransformerConfig": "zoo.seq2seq.transformer",
    "bleu_eval_fn": "zoo.seq2seq.translate",
    "corpus_bleu": "zoo.seq2seq.translate",
    "seq2seq_forward": "zoo.seq2seq.translate",
    "training_config": "zoo.seq2seq.translate",
    "translate": "zoo.seq2seq.translate",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
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
    "corpus_data",
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
