"""A parallel-corpus folder as training and evaluation data: what ``zoo.train`` / ``zoo.evaluate`` do
with ``zoo.train(model, "multi30k", direction="de-en")``.

The folder holds ``train.xx``/``train.yy``, ``val.*`` and a test split (``test_2016_flickr.*`` for
Multi30k), plain or ``.gz``. Training trains a byte-level BPE on the training text when the model has
no tokenizer yet, batches by token budget, and monitors validation BLEU; evaluation scores the test
split: token loss and accuracy (teacher forcing) and sacreBLEU of the decoded translations.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["corpus_data"]


def _direction(model: Any, direction: str | None) -> str:
    chosen = direction or getattr(model.config, "direction", None)
    if chosen is None:
        raise ValueError("which languages? pass direction='de-en' (source-target codes) or build the model with "
                         "direction=...; the corpus folder holds one file per language")
    return str(chosen)


def _tokenizer_size(model: Any, vocab_size: int | None) -> int:
    """The vocabulary of a tokenizer trained for ``model``: one joint tokenizer encodes both sides, so
    its ids index the source *and* the target embedding and must stay below the smaller of the two."""
    src, tgt = int(model.config.src_vocab), int(model.config.tgt_vocab)
    fits = min(src, tgt)
    if vocab_size is None:
        return fits
    if int(vocab_size) > fits:
        raise ValueError(
            f"vocab_size={vocab_size} does not fit {model.registry_name} (src_vocab={src}, tgt_vocab={tgt}): "
            f"the joint source+target tokenizer's ids index both embeddings, so it can have at most {fits} "
            f"tokens; pass vocab_size<={fits} (or leave it out), or build the model with "
            f"src_vocab and tgt_vocab >= {vocab_size}")
    return int(vocab_size)


def _check_tokenizer_fits(model: Any) -> None:
    src, tgt = int(model.config.src_vocab), int(model.config.tgt_vocab)
    n = model.tokenizer.vocab_size
    if n > min(src, tgt):
        sides = " and ".join(side for side, v in (("source", src), ("target", tgt)) if v < n)
        raise ValueError(
            f"{model.registry_name}'s tokenizer has {n} tokens but the model has src_vocab={src}, tgt_vocab={tgt}: "
            f"its ids would overflow the {sides} embedding; attach a tokenizer of at most {min(src, tgt)} tokens "
            f"(or none: zoo.train trains one), or build the model with src_vocab and tgt_vocab >= {n}")


def corpus_data(model: Any, data: Any, *, train: bool, direction: str | None = None, max_tokens: int | None = None,
                batch_size: int | None = None, vocab_size: int | None = None, val_split: str = "val",
                test_split: str = "test_2016_flickr", beam_size: int = 1, bleu_sentences: int | None = None,
                **options: Any) -> tuple[Any, dict[str, Any]]:
    """``(loader, loop options)`` for ``model`` from a corpus folder; a Dataset/DataLoader passes through.

    Batches hold sentences of similar length, at most ``max_tokens`` padded tokens (default 4096) or, with
    ``batch_size``, that many sentence pairs (given both, whichever cap a batch reaches first);
    ``vocab_size``: of the joint tokenizer trained here when the model has none (default and most: the
    smaller of the model's ``src_vocab`` and ``tgt_vocab``); ``beam_size`` / ``bleu_sentences``: how BLEU is
    decoded and on how many sentences, at the evaluation's ``amp``.
    """
    from zoo.seq2seq.data import ParallelDataset, load_multi30k, make_loader
    from zoo.seq2seq.translate import bleu_eval_fn

    if not isinstance(data, (str, os.PathLike)):
        if batch_size is not None:
            options["batch_size"] = batch_size  # the engine batches a Dataset (a DataLoader keeps its own)
        if max_tokens is not None:
            raise ValueError(f"max_tokens={max_tokens} batches a corpus folder by its token budget; a "
                             f"{type(data).__name__} brings its own batching: leave max_tokens out")
        return data, options
    if max_tokens is None and batch_size is None:
        max_tokens = 4096  # fairseq's way: a token budget keeps the work per step even across lengths
    root = Path(data)
    if not root.is_dir():
        raise FileNotFoundError(f"corpus folder not found: {root} (expected train.xx / train.yy, val.*, ... files)")
    direction = _direction(model, direction)
    if model.config.direction is None:
        model.config.direction = direction

    def loader(split: str, shuffle: bool) -> tuple[Any, Any]:
        text = load_multi30k(root, split, direction)
        return text, make_loader(ParallelDataset(text, model.tokenizer, model.max_len), max_tokens=max_tokens,
                                 batch_size=batch_size, shuffle=shuffle, seed=int(options.get("seed", 0)))

    def bleu(text: Any) -> Any:
        n = bleu_sentences
        return bleu_eval_fn(text.src[:n] if n else text.src, text.tgt[:n] if n else text.tgt, beam_size=beam_size,
                            amp=options.get("amp", "auto"))

    if train:
        if model.tokenizer is None:
            from zoo.seq2seq.tokenizer import train_tokenizer

            size = _tokenizer_size(model, vocab_size)
            text = load_multi30k(root, "train", direction)
            model.tokenizer = train_tokenizer(text.src + text.tgt, vocab_size=size)
        else:
            _check_tokenizer_fits(model)
        _, train_loader = loader("train", True)
        val_text, val_loader = loader(val_split, False)
        extra = {"val_data": val_loader, "eval_fn": bleu(val_text), "monitor": "val_bleu", "monitor_mode": "max"}
        return train_loader, {**extra, **options}
    if model.tokenizer is None:
        raise ValueError(f"{model.registry_name} has no tokenizer yet: train it (zoo.train) or load weights that "
                         "carry one (zoo.build(name, weights=...))")
    test_text, test_loader = loader(test_split, False)
    return test_loader, {"eval_fn": bleu(test_text), **options}
