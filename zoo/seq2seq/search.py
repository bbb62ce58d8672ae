"""Greedy and batched beam search over a model's incremental ``start``/``step`` interface.

Beam search keeps ``beam_size`` live hypotheses per sentence as rows of one ``(B * K)`` batch. At each
step it looks at the best ``2K`` continuations: those ending in EOS among the top K are finished
(scored with the GNMT length penalty, Wu et al. 2016, https://arxiv.org/abs/1609.08144, ``lp =
((5 + len) / 6) ** alpha``), the best K others stay live; a sentence is done once it has K finished
hypotheses (fairseq's rule) and none of its live ones scores better, normalised at the same length
(Hugging Face's ``early_stopping=False``). ``beam_size=1`` is exactly greedy search.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from zoo.inputs import whole_number
from zoo.seq2seq.cache import expand_index

__all__ = ["beam_search", "default_max_len", "greedy_search"]


def default_max_len(src: Tensor, pad_id: int, model_max: int) -> Tensor:
    """New tokens allowed to each row of ``src (B, S)``: 1.5 x its own length + 10, capped by the model's
    positions (``(B,)`` int64). Per row: a batch-wide limit from the longest source let a sentence that does not
    stop run longer beside a long one than alone."""
    lengths = (src != pad_id).sum(1).cpu()
    return (1.5 * lengths).long().add(10).clamp(1, max(1, model_max - 1))


def check_max_len(max_len: Any, model_max: int | None = None) -> int | None:
    """``max_len`` is None (the default per sentence) or an int >= 1 (a NumPy integer too), and with ``model_max``
    (the model's ``max_len``) at most ``model_max - 1``, the decoder's positions after BOS; returns it as an int."""
    max_len = whole_number(max_len, "max_len", allow_none=True, hint="new tokens")
    if max_len is not None and model_max is not None and max_len > model_max - 1:
        raise max_len_out_of_range(max_len, model_max)
    return max_len


def max_len_out_of_range(max_len: Any, model_max: int) -> ValueError:
    """The error for a ``max_len`` past the model's positions: unrefused, decoding would stop there (a Transformer)
    or the runner would clip it without a word, so it is refused up front."""
    return ValueError(f"max_len must be between 1 and {model_max - 1} (the model's max_len {model_max} less BOS), "
                      f"or None for 1.5 x the source + 10; got {max_len}")


def _start(model: Any, src: Tensor, max_len: int | None) -> tuple[Any, list[int]]:
    """The model's search state for ``src`` and the new tokens to allow each row: ``max_len``, checked, or the
    default for the row's source. The model reads ``src`` first: its check names a malformed one, which the length
    rule met as a bare "Dimension out of range"."""
    max_len = check_max_len(max_len, model.max_len)
    state = model.start(src)
    if max_len is None:
        return state, default_max_len(src, model.pad_id, model.max_len).tolist()
    return state, [max_len] * src.shape[0]


def _log_probs(logits: Tensor, model: Any) -> Tensor:
    logp = torch.log_softmax(logits.float(), dim=-1)
    logp[:, [model.pad_id, model.bos_id]] = float("-inf")  # never emit <pad> / <s>
    tok = getattr(model, "tokenizer", None)
    if tok is not None:  # a tokenizer smaller than the output layer (268 of 8000 ids) decodes the rest as ""
        logp[:, tok.vocab_size:] = float("-inf")
    return logp


@torch.no_grad()
def greedy_search(model: Any, src: Tensor, max_len: int | None = None) -> list[list[int]]:
    """Token ids (without BOS/EOS) for each row of ``src (B, S)``; stops a row at EOS."""
    state, limits = _start(model, src, max_len)
    B = src.shape[0]
    tokens = torch.full((B,), model.bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    ends = torch.tensor(limits, device=src.device)  # (B,) each row's last step + 1
    out = []
    for t in range(max(limits, default=0)):
        logp = _log_probs(model.step(state, tokens), model)
        tokens = logp.argmax(-1)
        tokens = tokens.masked_fill(done | (ends <= t), model.eos_id)
        out.append(tokens)
        done |= tokens == model.eos_id
        if bool(done.all()):
            break
    return _strip(torch.stack(out, 1).tolist(), model.eos_id) if out else [[] for _ in range(B)]


def _strip(rows: list[list[int]], eos: int) -> list[list[int]]:
    return [r[: r.index(eos)] if eos in r else r for r in rows]


def _normalized(score: float, length: int, alpha: float) -> float:
    """``score / lp(length)`` (GNMT: ``lp = ((5 + length) / 6) ** alpha``) as a key that orders hypotheses as the
    quotient does, taken in logarithms: ``log(lp) - log(-score)``, as ``score`` is a log probability (<= 0). The
    quotient itself failed for a large ``alpha``: ``lp`` past 1e308 is an OverflowError in Python's float power
    (``length_penalty=1000`` from 8 tokens on)."""
    if score >= 0.0:  # probability 1: a quotient of 0, which no other hypothesis reaches
        return math.inf
    return alpha * math.log((5.0 + length) / 6.0) - math.log(-score)


@torch.no_grad()
def beam_search(
    model: Any,
    src: Tensor,
    beam_size: int = 5,
    max_len: int | None = None,
    length_penalty: float = 0.6,
) -> list[list[int]]:
    """Best hypothesis (token ids without BOS/EOS) per row of ``src (B, S)``."""
    beam_size = whole_number(beam_size, "beam_size")
    if not math.isfinite(length_penalty) or length_penalty < 0:
        raise ValueError(f"length_penalty must be a finite number >= 0, got {length_penalty!r}")
    state, limits = _start(model, src, max_len)
    B, K, device = src.shape[0], beam_size, src.device
    state.reorder(expand_index(B, K, device))  # (B*K) rows, K per sentence
    scores = torch.zeros(B, K, device=device)
    scores[:, 1:] = float("-inf")  # all beams start identical: only the first may expand at step 0
    tokens = torch.full((B * K,), model.bos_id, dtype=torch.long, device=device)
    history = torch.empty(B * K, 0, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    done = [False] * B
    for t in range(max(limits, default=0)):
        logp = _log_probs(model.step(state, tokens), model)  # (B*K, V)
        V = logp.shape[-1]
        total = (scores.view(-1, 1) + logp).view(B, K * V)
        cand_scores, cand_idx = total.topk(min(2 * K, K * V), dim=-1)  # (B, 2K), sorted
        cand_beam, cand_tok = cand_idx // V, cand_idx % V
        is_eos = cand_tok == model.eos_id
        # finish EOS candidates ranked within the top K (they beat a live hypothesis)
        eos_hits = (is_eos[:, :K] & torch.isfinite(cand_scores[:, :K])).nonzero().tolist()
        for b, j in eos_hits:
            if done[b]:
                continue
            beam = int(cand_beam[b, j])
            hyp = history[b * K + beam].tolist()
            finished[b].append((_normalized(float(cand_scores[b, j]), len(hyp) + 1, length_penalty), hyp))
        # the best K non-EOS candidates stay live
        live_scores, live_pos = cand_scores.masked_fill(is_eos, float("-inf")).topk(K, dim=-1)  # (B, K)
        live_beam = cand_beam.gather(1, live_pos)
        live_tok = cand_tok.gather(1, live_pos)
        for b in range(B):
            if done[b]:
                continue
            last_step = t == limits[b] - 1
            if last_step:  # out of length: the live hypotheses compete as they are
                for k in range(K):
                    if torch.isfinite(live_scores[b, k]):
                        hyp = history[b * K + int(live_beam[b, k])].tolist() + [int(live_tok[b, k])]
                        finished[b].append((_normalized(float(live_scores[b, k]), len(hyp), length_penalty), hyp))
            # K finished are not enough while a live hypothesis still scores better (normalised at this
            # length, as the EOS finishers of this step): fairseq's rule alone stopped there and returned a
            # hypothesis worse than greedy's, which the live beam was about to finish (Hugging Face's rule).
            # Live scores only fall, so at length_penalty=0 no hypothesis it dropped could have won.
            best_live = _normalized(float(live_scores[b, 0]), t + 1, length_penalty)
            enough = len(finished[b]) >= K and max(s for s, _ in finished[b]) >= best_live
            done[b] = enough or last_step
        if all(done):
            break
        rows = (torch.arange(B, device=device)[:, None] * K + live_beam).view(-1)  # (B*K)
        state.reorder(rows)
        history = torch.cat([history.index_select(0, rows), live_tok.view(-1, 1)], dim=1)
        scores = live_scores
        tokens = live_tok.view(-1)
    return [max(f, key=lambda x: x[0])[1] if f else [] for f in finished]
