"""Inputs cut into the sentences a model translates one at a time, and the translations put back together.

A model trained on single sentences (Multi30k's captions) translates a paragraph badly as one sequence: given
four sentences joined with spaces, the shipped de-en model returned one sentence that mixed them ("A man is
riding a bicycle, and playing a book in the snow, ..."), while each alone translated correctly. So every input
is cut at line breaks and at sentence ends, as a translation service or Moses' sentence splitter cuts it, and
the translations are joined with the whitespace kind that stood between the sentences (a line break stays one).

A full stop ends a sentence only where the next word starts with a capital letter and the word before it is not
an abbreviation: a single letter ("A. Noble"), a word with periods inside ("U.S.", "z.B."), a number (German
ordinals: "2. Stock") or a listed abbreviation ("Dr.", "St.", "bzw."). Text in lower case is therefore only cut
at line breaks. An input still longer than the model takes is cut at ``; :`` too before it is refused.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from zoo.seq2seq.tokenizer import normalize_text

__all__ = ["join_pieces", "segments", "split_sentences", "text_inputs"]

# the quotes that close a quotation: English ” ’, German “ ‘ (after „ ‚) and « (after »), French » (after «)
_CLOSING = "\"'\u201d\u2019\u201c\u2018\u00bb\u00ab\u203a\u2039)\\]"
# a candidate end: . ! ? or an ellipsis, any closing quotes or brackets (French sets » off by a space), then
# whitespace
_CANDIDATE_END = re.compile(rf"[.!?\u2026](?:[ \u00a0\u202f]?[\u00bb\u203a])?[{_CLOSING}]*(\s+)")
# what an over-long sentence is cut at as a last resort: the ends above and ; : as well
_CLAUSE_END = re.compile(rf"(?:(?<=[.!?\u2026;:])|(?<=[.!?\u2026;:][{_CLOSING}]))\s+")
_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+\s*")
_OPENING = "\"'\u201c\u201e\u2018\u201a\u00ab\u00bb\u2039\u203a(["
# Moses' nonbreaking prefixes that end in a full stop mid-sentence (de, en, fr), lower-cased, without the stop
_ABBREVIATIONS = frozenset((
    "abb", "abs", "abt", "allg", "bzw", "ca", "dept", "dipl", "dr", "evtl", "fa", "fr", "frl", "ggf", "hr", "jh",
    "jr", "mio", "mlle", "mme", "mr", "mrs", "ms", "mt", "no", "nr", "prof", "sr", "st", "str", "tel", "usw", "vgl",
    "vs"))


def split_sentences(text: str) -> list[tuple[str, str]]:
    """``(sentence, separator)`` pairs for ``text`` as the tokenizer reads it (:func:`normalize_text`): the
    separator is the whitespace joining a sentence's translation to the one before (``""`` for the first,
    ``"\\n"`` per line break, else ``" "``)."""
    # a line of nothing but zero-width spaces or soft hyphens is blank to the tokenizer, which drops them: cut
    # as it is, it was a sentence, and the model made up a translation of an empty source
    text = normalize_text(text)
    out: list[tuple[str, str]] = []
    sep = ""
    for line_break, line in _lines(text):
        sep = line_break if out else ""
        start = 0
        for m in _CANDIDATE_END.finditer(line):
            if _ends_sentence(line, m):
                out.append((line[start:m.start(1)].strip(), sep))
                start, sep = m.end(), " "
        if line[start:].strip():
            out.append((line[start:].strip(), sep))
    return out


def _lines(text: str) -> list[tuple[str, str]]:
    """``(line breaks before it, line)`` for each non-blank line."""
    parts = re.split(r"(\s*\n\s*)", text)
    lines, breaks = parts[0::2], [""] + parts[1::2]
    return [("\n" * b.count("\n"), line) for b, line in zip(breaks, lines) if line.strip()]


def _ends_sentence(line: str, m: re.Match) -> bool:
    rest = line[m.end():].lstrip(_OPENING)
    if not rest or not rest[0].isupper():
        return False
    if line[m.start()] != ".":
        return True
    word = line[:m.start()].rsplit(None, 1)[-1] if line[:m.start()].strip() else ""
    word = word.lstrip(_OPENING)
    return not (len(word) <= 1 or "." in word or word.isdigit() or word.lower() in _ABBREVIATIONS)


def text_inputs(inputs: Any) -> tuple[list[str], bool]:
    """The sentences to translate, and whether one ``str`` came (it gives one ``str`` back): a ``str`` is a
    sentence as written, never a file name (``"~/notes.txt"`` is text, as in a list), a list of them, or a
    text file given as a ``pathlib.Path`` (``~`` is the home folder), one sentence per line. One reader for
    ``model.translate``, ``zoo.predict`` and ``ExportedTranslator.translate``: they take the same inputs."""
    if getattr(inputs, "ndim", None) == 0 and hasattr(inputs, "item"):
        inputs = inputs.item()  # np.array("Ein Hund."): the one sentence it holds (iterating it was a bare TypeError)
    if isinstance(inputs, str):
        return [inputs], True
    if isinstance(inputs, os.PathLike):
        from zoo.inputs import expand_home
        from zoo.seq2seq.data import read_lines

        path = Path(expand_home(inputs))
        if not path.is_file():
            raise FileNotFoundError(f"no text file to translate at {path} (expected one sentence per line)")
        return read_lines(path), False
    if isinstance(inputs, (Mapping, AbstractSet)):
        # iterated, a dict gave its keys (its values dropped without a word) and a set an order of its own, in
        # which no caller could match the translations back to their sentences
        why = ("its keys or its values? pass list(d.values()), or list(d) for the keys" if isinstance(inputs, Mapping)
               else "it has no order to give the translations back in: pass a list, e.g. sorted(s)")
        raise TypeError("a seq2seq model translates a sentence (str), a list of them, or a text file given as a "
                        f"pathlib.Path (one sentence per line); got a {type(inputs).__name__}: {why}")
    if (ndim := getattr(inputs, "ndim", 1)) != 1:
        # iterated, a DataFrame gave its column names (translated in place of its sentences without a word)
        column = "one column, e.g. df['de']" if hasattr(inputs, "columns") else "a 1-D array or a list"
        raise TypeError("a seq2seq model translates a sentence (str), a list of them, or a text file given as a "
                        f"pathlib.Path (one sentence per line); got a {ndim}-D {type(inputs).__name__}: pass {column}")
    items = list(inputs) if isinstance(inputs, Iterable) else None
    if items is None or not all(isinstance(s, str) for s in items):
        got = type(inputs).__name__ if items is None else \
            f"a {type(inputs).__name__} of {sorted({type(s).__name__ for s in items})}"
        raise TypeError("a seq2seq model translates a sentence (str), a list of them, or a text file given as a "
                        f"pathlib.Path (one sentence per line); got {got}")
    return items, False


def segments(texts: list[str], ids: list[list[int]], tok: Any, limit: int, *,
             clip: bool = False) -> list[tuple[int, list[int], str]]:
    """``(input index, source ids, separator)`` pieces: each input's sentences (:func:`split_sentences`), an
    over-long one cut at clause ends too; ``ids`` are the inputs' own (one sentence reuses them). A clause still
    over ``limit`` tokens is refused, or with ``clip`` (scoring a data set, whose loss clips it too) cut to
    ``limit`` tokens, a warning counting them."""
    pieces: list[tuple[int, list[int], str]] = []
    clipped = 0
    for i, (text, x) in enumerate(zip(texts, ids)):
        sentences = split_sentences(text)
        if not sentences:
            continue  # nothing to translate: "" without a model call
        if len(sentences) == 1:  # its ids, of the text as split (spaces around it translated otherwise)
            sid = x if sentences[0][0] == text else tok.encode_batch([sentences[0][0]])[0]
            if len(sid) <= limit:
                pieces.append((i, sid, ""))
                continue
        for (sent, sep), sid in zip(sentences, tok.encode_batch([s for s, _ in sentences])):
            if len(sid) <= limit:
                pieces.append((i, sid, sep))
                continue
            for k, (clause, cid) in enumerate(_clauses(sent, tok)):
                if len(cid) > limit and clip:
                    cid, clipped = cid[:limit], clipped + 1
                elif len(cid) > limit:
                    raise ValueError(
                        f"input {i} is {len(x)} tokens; split at sentence ends, one sentence is still {len(cid)} "
                        f"tokens, more than the model's limit of {limit} source tokens (max_len {limit + 1} "
                        f"positions less EOS): {clause[:60]!r}... -- split it into shorter sentences")
                pieces.append((i, cid, sep if k == 0 else " "))
    if clipped:
        from zoo._stacklevel import user_stacklevel

        warnings.warn(f"{clipped} sentence(s) are longer than the model's limit of {limit} source tokens even when "
                      f"cut at sentence and clause ends: translated clipped to that limit (their ends are not "
                      f"translated), as the loss clips them", stacklevel=user_stacklevel())
    return pieces


def _clauses(sentence: str, tok: Any) -> list[tuple[str, list[int]]]:
    parts = [t.strip() for t in _CLAUSE_END.split(sentence) if t.strip()]
    return list(zip(parts, tok.encode_batch(parts)))


def join_pieces(pieces: list[tuple[int, list[int], str]], texts: list[str], n: int) -> list[str]:
    """The translations of :func:`segments`' pieces put back together, one string per input ("" for a blank one)."""
    out: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    for (i, _, sep), text in zip(pieces, texts):
        # a piece is one sentence of one line: a line break a model decodes in it (a byte token of an undertrained
        # one) would split its row in a file or the CLI's output, one line per input
        out[i].append((sep if out[i] else "", _LINE_BREAKS.sub(" ", text)))
    return ["".join(sep + t.strip() for sep, t in parts) if len(parts) > 1 else (parts[0][1] if parts else "")
            for parts in out]
