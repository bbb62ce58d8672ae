"""Translation, sacreBLEU scoring, and the hooks that train a seq2seq model through ``zoo.engine.fit``.

* :func:`translate`: sentences in, sentences out (tokenize, batch by length, search, detokenize,
  restore the order).
* :func:`corpus_bleu`: sacreBLEU on detokenized, cased output with its default 13a tokenizer (the
  comparable number; Post 2018, https://arxiv.org/abs/1804.08771).
* :func:`seq2seq_forward` (the engine's ``forward_fn``: teacher forcing, padding removed) and
  :func:`bleu_eval_fn` (the engine's ``eval_fn``: validation BLEU, so ``monitor="val_bleu"`` works).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from zoo.seq2seq.search import beam_search, greedy_search
from zoo.seq2seq.tokenizer import EOS_ID, PAD_ID

__all__ = ["bleu_eval_fn", "corpus_bleu", "seq2seq_forward", "training_config", "translate"]


def _device(model: torch.nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def translate(
    model: Any,
    sentences: Sequence[str] | str,
    *,
    beam_size: int = 1,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    batch_size: int = 64,
    progress: bool = False,
) -> list[str] | str:
    """Translate ``sentences`` with ``model`` (which must carry its ``tokenizer``)."""
    single = isinstance(sentences, str)
    items = [sentences] if single else list(sentences)
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        raise ValueError(
            "this model has no tokenizer: build it with weights (zoo.build(name, weights=...)) or train one "
            "(zoo.seq2seq.train_tokenizer) and set model.tokenizer"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    limit = model.max_len - 1
    ids = [x[:limit] + [EOS_ID] for x in tok.encode_batch(items)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths share a batch
    out: list[list[int]] = [[] for _ in ids]
    device = _device(model)
    was_training = model.training
    model.eval()
    try:
        for s in tqdm(range(0, len(order), batch_size), disable=not progress, desc="translate", unit="batch"):
            chunk = order[s : s + batch_size]
            rows = [ids[i] for i in chunk]
            src = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)
            for r, x in enumerate(rows):
                src[r, : len(x)] = torch.as_tensor(x)
            src = src.to(device)
            if beam_size == 1:
                hyps = greedy_search(model, src, max_len=max_len)
            else:
                hyps = beam_search(model, src, beam_size=beam_size, max_len=max_len, length_penalty=length_penalty)
            for i, h in zip(chunk, hyps):
                out[i] = h
    finally:
        model.train(was_training)
    texts = tok.decode_batch(out)
    return texts[0] if single else texts


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """sacreBLEU (13a, cased, detokenized input) of ``hypotheses`` against one reference each."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)


def seq2seq_forward(model: torch.nn.Module, batch: Any) -> tuple[Tensor, Tensor]:
    """``forward_fn`` for the engine: teacher forcing; returns ``(logits (N, V), targets (N,))`` over the
    non-padding target positions only, so any plain cross entropy (with label smoothing) and token
    accuracy are right without an ``ignore_index``."""
    (src, tgt_in), tgt_out = batch
    device = _device(model)
    src, tgt_in, tgt_out = src.to(device), tgt_in.to(device), tgt_out.to(device)
    logits = model(src, tgt_in)  # (B, T, V)
    keep = tgt_out != PAD_ID
    return logits[keep], tgt_out[keep]


def bleu_eval_fn(
    sources: Sequence[str],
    references: Sequence[str],
    *,
    beam_size: int = 1,
    batch_size: int = 128,
    key: str = "bleu",
) -> Callable[[Any, Any], dict[str, float]]:
    """``eval_fn`` for the engine: translate ``sources`` and score them against ``references``.

    The engine reports the value with its validation prefix (``val_bleu``) for ``monitor``.
    """
    sources, references = list(sources), list(references)

    def eval_fn(model: Any, _val_data: Any = None) -> dict[str, float]:
        hyps = translate(model, sources, beam_size=beam_size, batch_size=batch_size)
        return {key: corpus_bleu(hyps, references)}

    return eval_fn


def training_config(
    *,
    epochs: int = 20,
    lr: float = 7e-4,
    warmup_steps: int = 1000,
    label_smoothing: float = 0.1,
    amp: str | None = "auto",
    clip_grad_norm: float | None = 1.0,
    weight_decay: float = 1e-4,
    eval_fn: Callable | None = None,
) -> dict[str, Any]:
    """The keyword arguments for ``zoo.engine.fit`` that train a seq2seq model well on CPU."""
    config: dict[str, Any] = {
        "epochs": epochs,
        "optimizer": "adamw",
        "lr": lr,
        "weight_decay": weight_decay,
        "schedule": "inverse_sqrt",
        "warmup_steps": warmup_steps,
        "label_smoothing": label_smoothing,
        "amp": amp,
        "clip_grad_norm": clip_grad_norm,
        "forward_fn": seq2seq_forward,
        "metrics": ("accuracy",),
    }
    if eval_fn is not None:
        config.update(eval_fn=eval_fn, monitor="val_bleu", monitor_mode="max")
    return config
