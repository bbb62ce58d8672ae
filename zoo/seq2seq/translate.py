"""Translation, sacreBLEU scoring, and the hooks that train a seq2seq model through ``zoo.engine.fit``.

* :func:`translate`: sentences in, sentences out (tokenize, cut inputs into sentences, batch by length,
  search, detokenize, restore the order).
* :func:`corpus_bleu`: sacreBLEU on detokenized, cased output with its default 13a tokenizer (the
  comparable number; Post 2018, https://arxiv.org/abs/1804.08771).
* :func:`seq2seq_forward` (the engine's ``forward_fn``: teacher forcing, padding removed) and
  :func:`bleu_eval_fn` (the engine's ``eval_fn``: validation BLEU, so ``monitor="val_bleu"`` works).
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

from zoo._progress import ProgressBar
from zoo._stacklevel import user_stacklevel
from zoo.engine.devices import inference_placement, model_device
from zoo.engine.distributed import all_gather_objects, live_place
from zoo.engine.modes import eval_mode
from zoo.inputs import whole_number
from zoo.seq2seq.search import beam_search, greedy_search, max_len_out_of_range
from zoo.seq2seq.sentences import join_pieces, segments, text_inputs
from zoo.seq2seq.tokenizer import EOS_ID, PAD_ID, normalize_text

__all__ = ["bleu_eval_fn", "corpus_bleu", "seq2seq_forward", "training_config", "translate"]


def check_search_options(beam_size: Any, length_penalty: Any, max_len: Any, batch_size: Any,
                         model_max: int) -> tuple[int, float, int | None, int]:
    """Every decoding option a user can get wrong, named with what came and what was expected; returns them as
    Python numbers (a NumPy scalar, ``np.int64(3)`` from an array or a grid search, is the number it holds)."""
    beam_size, batch_size = whole_number(beam_size, "beam_size"), whole_number(batch_size, "batch_size")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, numbers.Real):
        raise TypeError(f"length_penalty must be a number >= 0; got {length_penalty!r}")
    if not math.isfinite(length_penalty) or length_penalty < 0:
        raise ValueError(f"length_penalty must be a finite number >= 0 (GNMT alpha, 0 = none); got {length_penalty}")
    # no minimum here: 0 is out of the model's range, which that error gives
    max_len = whole_number(max_len, "max_len", minimum=None, allow_none=True, hint="new tokens per sentence")
    if max_len is not None and not 1 <= max_len <= model_max - 1:
        raise max_len_out_of_range(max_len, model_max)
    return beam_size, float(length_penalty), max_len, batch_size


def translate(
    model: Any,
    sentences: Sequence[str] | str | os.PathLike[str],
    *,
    beam_size: int = 1,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    batch_size: int = 64,
    progress: bool = False,
    device: str | torch.device | None = None,
    amp: str | None = "auto",
) -> list[str] | str:
    """Translate ``sentences`` with ``model`` (which must carry its ``tokenizer``).

    An input of several sentences or lines is translated sentence by sentence, the pieces joined with a
    space (a line break kept), as :mod:`zoo.seq2seq.sentences` cuts it: a model trained on single sentences
    (Multi30k) translates a paragraph best one sentence at a time. Why not cut an over-long input: that
    would drop its end without a word. A single sentence longer than the model takes (``model.max_len - 1``
    source tokens) even when cut at ``; :`` is refused, with the limit and its length in the message. Empty or whitespace-only inputs translate to ``""`` with no model call.
    ``beam_size`` < 1, ``max_len`` outside ``1 .. model.max_len - 1`` and a negative or non-finite
    ``length_penalty`` are errors naming the argument. The search runs on the model's device (``device=``
    moves the model there) at ``amp="auto"``: bf16 where this device computes GEMMs faster in it (scores are
    compared in fp32); ``amp=None`` is exact fp32. In bf16 a sentence's logits move slightly with the shape of
    its batch (the other sentences in it), which can tip a close beam: 3 of 40 Multi30k test sentences came out
    differently with ``beam_size=5`` batched than alone, and greedy 1 of 40 on an AMX Xeon (none on the CPU
    first measured). ``amp=None`` translated all 40 alike either way: use it where a sentence must translate
    the same whatever it is batched with.
    """
    items, single = text_inputs(sentences)
    joined = _translate_texts(model, items, beam_size=beam_size, length_penalty=length_penalty, max_len=max_len,
                              batch_size=batch_size, progress=progress, device=device, amp=amp)
    return joined[0] if single else joined


def _translate_texts(model: Any, items: list[str], *, beam_size: int, length_penalty: float, max_len: int | None,
                     batch_size: int, progress: bool, device: str | torch.device | None, amp: str | None,
                     clip: bool = False) -> list[str]:
    """:func:`translate` of a list of texts; ``clip``: a sentence too long for the model even when cut is
    clipped to its limit, with a warning, instead of refused (:func:`~zoo.seq2seq.sentences.segments`)."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        raise ValueError(
            "this model has no tokenizer: build it with weights (zoo.build(name, weights=...)) or train one "
            "(zoo.seq2seq.train_tokenizer) and set model.tokenizer"
        )
    from zoo.seq2seq.corpus import _check_tokenizer_fits

    _check_tokenizer_fits(model)  # an id past the embedding was a bare IndexError inside the encoder
    beam_size, length_penalty, max_len, batch_size = check_search_options(beam_size, length_penalty, max_len,
                                                                          batch_size, model.max_len)
    _, dtype = inference_placement(model, device, amp)
    pieces = segments(items, tok.encode_batch(items), tok, model.max_len - 1, clip=clip)
    hyps = _search_all(model, [x + [EOS_ID] for _, x, _ in pieces], beam_size, length_penalty, max_len, batch_size,
                       progress, dtype)
    return join_pieces(pieces, tok.decode_batch(hyps), len(items))


def _search_all(model: Any, ids: list[list[int]], beam_size: int, length_penalty: float, max_len: int | None,
                batch_size: int, progress: bool, dtype: torch.dtype | None = None) -> list[list[int]]:
    """Token ids out for each source row, batched by length, in the input order."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths share a batch
    out: list[list[int]] = [[] for _ in ids]
    device = model_device(model)
    cap, capped = model.max_len - 1, 0
    with eval_mode(model):
        for s in ProgressBar(range(0, len(order), batch_size), disable=not progress, desc="translate", unit="batch"):
            chunk = order[s : s + batch_size]
            rows = [ids[i] for i in chunk]
            src = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)
            for r, x in enumerate(rows):
                src[r, : len(x)] = torch.as_tensor(x)
            src = src.to(device)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                if beam_size == 1:
                    hyps = greedy_search(model, src, max_len=max_len)
                else:
                    hyps = beam_search(model, src, beam_size=beam_size, max_len=max_len,
                                       length_penalty=length_penalty)
            for i, h in zip(chunk, hyps):
                out[i] = h
                capped += len(h) >= cap
    if capped:
        warnings.warn(f"{capped} translation(s) reached the model's limit of {cap} target tokens without ending: "
                      f"their end is missing (translate shorter sentences)", stacklevel=user_stacklevel())
    return out


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]]) -> float:
    """sacreBLEU (13a, cased, detokenized input) of ``hypotheses`` against one reference each (a list of str), or
    against several: sacreBLEU's own form, a list of reference streams, each a list of str as long as
    ``hypotheses`` (``corpus_bleu(hyps, [refs])`` as ``sacrebleu.corpus_bleu`` is called). Every text is read as
    the tokenizer reads it (:func:`~zoo.seq2seq.tokenizer.normalize_text`, then NFC)."""
    import unicodedata

    import sacrebleu

    hypotheses = _texts(hypotheses, "hypotheses")
    if not isinstance(references, (str, bytes)) and isinstance(references, Iterable):
        references = list(references)
    # sacreBLEU's form, [refs] (a list of lists), was an AttributeError ("'list' object has no attribute
    # 'translate'") or "2 hypotheses but 1 references"
    several = isinstance(references, list) and bool(references) and all(
        isinstance(r, Iterable) and not isinstance(r, (str, bytes)) for r in references)
    streams = [_texts(refs, f"references[{k}]") for k, refs in enumerate(references)] if several \
        else [_texts(references, "references")]
    for k, refs in enumerate(streams):
        if len(hypotheses) != len(refs):
            which = f" in reference stream {k}" if len(streams) > 1 else ""
            raise ValueError(f"{len(hypotheses)} hypotheses but {len(refs)} references{which}: expected one "
                             "reference per hypothesis")
    if not hypotheses:  # sacreBLEU's own answer is a bare IndexError
        raise ValueError("no sentences to score: expected one hypothesis and one reference per sentence, got two "
                         "empty lists")
    # the model writes NFC: references in NFD (macOS file tools write umlauts decomposed) matched none of its
    # umlauts, 0.29 BLEU became 0.24
    def read(texts: Sequence[str]) -> list[str]:
        return [unicodedata.normalize("NFC", normalize_text(t)) for t in texts]

    # sacreBLEU's exp(mean log precision) of a perfect match is 100.00000000000004, not a score past the maximum
    return min(100.0, float(sacrebleu.corpus_bleu(read(hypotheses), [read(refs) for refs in streams]).score))


def _texts(texts: Any, name: str) -> list[str]:
    """``texts`` as a list of sentences, refusing a str (iterated, its characters were scored as sentences: BLEU 0
    of a perfect match) and anything but str inside (an AttributeError from the normaliser)."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Iterable):
        raise TypeError(f"{name} must be a list of sentences (str), got {type(texts).__name__}"
                        + (f" {texts[:40]!r}: wrap one sentence in a list" if isinstance(texts, str) else ""))
    texts = list(texts)
    bad = sorted({type(t).__name__ for t in texts if not isinstance(t, str)})
    if bad:
        raise TypeError(f"{name} must be a list of sentences (str), got elements of type {', '.join(bad)}")
    return texts


def seq2seq_forward(model: torch.nn.Module, batch: Any) -> tuple[Tensor, Tensor]:
    """``forward_fn`` for the engine: teacher forcing; returns ``(logits (N, V), targets (N,))`` over the
    non-padding target positions only, so any plain cross entropy (with label smoothing) and token
    accuracy are right without an ``ignore_index``."""
    (src, tgt_in), tgt_out = batch
    device = model_device(model)
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
    amp: str | None = "auto",
) -> Callable[[Any, Any], dict[str, float]]:
    """``eval_fn`` for the engine: translate ``sources`` and score them against ``references``.

    The value is sacreBLEU as a fraction in [0, 1] (zoo's unit for every proportion: 0.3731 is 37.31
    BLEU); the engine reports it with its validation prefix (``val_bleu``) for ``monitor``. ``amp``: the
    precision of the decoding (see :func:`translate`). Under DDP (a live process group) each rank decodes
    every ``world_size``-th sentence and all score the gathered whole, as the engine's evaluation gathers its
    shards: one BLEU on every rank, so every rank must call it (``fit`` and ``evaluate`` do). A source
    sentence longer than the model takes is translated clipped to its limit, with a warning, as the loss on the
    same data clips it (refusing it would fail the run after a trained epoch, with no checkpoint).
    """
    sources, references = _texts(sources, "sources"), _texts(references, "references")
    if not sources:  # refused before training, not at the first validation after a trained epoch
        raise ValueError("bleu_eval_fn: no sentences to score (empty sources); pass at least one source sentence "
                         "and its reference")

    def eval_fn(model: Any, _val_data: Any = None) -> dict[str, float]:
        rank, world = live_place()
        share = sources[rank::world]
        mine = _translate_texts(model, share, beam_size=beam_size, length_penalty=0.6, max_len=None,
                                batch_size=batch_size, progress=False, device=None, amp=amp, clip=True) if share else []
        hyps: list[str] = [""] * len(sources)
        for r, part in enumerate(all_gather_objects(mine)):
            hyps[r::world] = part
        return {key: corpus_bleu(hyps, references) / 100.0}  # corpus_bleu is at most 100

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
