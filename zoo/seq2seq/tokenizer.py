"""Joint byte-level BPE for source and target, on Hugging Face ``tokenizers``.

Byte-level BPE (GPT-2 style; Sennrich et al. 2016, https://arxiv.org/abs/1508.07909) starts from the 256
bytes, so *no* input is unknown (any script, emoji, control character) and decoding gives back the exact
detokenized text, spacing included (other whitespace than a line break as one plain space, below): sacreBLEU
scores the output as it comes. One vocabulary for both
languages lets the Transformer share its embeddings. The whole tokenizer serialises to one JSON string,
which is stored in the weights file's safetensors metadata.

Text is read as its words: every whitespace character but the line break (a no-break space, thin space,
ideographic space, tab, CR, ...) is a plain space, a run of spaces is one, the invisible ones (zero-width space,
word joiner, soft hyphen, a BOM mid-text) are dropped and the Latin ligatures of PDFs (U+FB00-FB06: ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ)
are their letters (:func:`normalize_text`), in training and in use alike. Text pasted from web pages and PDFs
has them, and to the byte-level BPE a U+00A0 is two bytes no training sentence had: one of them per sentence
changed 53 of 60 Multi30k test translations of the shipped de-en model (BLEU 33.97 -> 27.23); a second space
is a token of its own (28 of 60 changed), a ligature three bytes (40 of 40 sentences with one changed). It
runs before the tokenizer's own normaliser (NFC) in :meth:`Tokenizer.encode_batch` rather than inside it, so
tokenizers already stored in weights files, whose JSON is their fingerprint, read such text the same way.

The special tokens are ids, never text: ``"<s>"``, ``"</s>"``, ``"<pad>"`` and ``"<unk>"`` typed in a sentence
are encoded as their characters (Hugging Face matches them in raw text by default, which put an EOS in the
middle of a source and made decoding drop them). The switch (``encode_special_tokens``) is not part of the
JSON, so it holds for the tokenizers already stored in weights files, fingerprints unchanged.
"""

from __future__ import annotations

import operator
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as _HFTokenizer

__all__ = ["BLANK_CHARS", "BOS_ID", "EOS_ID", "PAD_ID", "SPECIAL_TOKENS", "UNK_ID", "Tokenizer", "normalize_text",
           "train_tokenizer"]

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)

# str.isspace()'s characters but " " and "\n" (a line break cuts sentences: zoo.seq2seq.sentences)
_SPACES = "\t\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
# invisible: zero-width space, word joiner, BOM (zero-width no-break space), soft hyphen; ZWJ / ZWNJ carry meaning
_INVISIBLE = "\u200b\u2060\ufeff\xad"
# the Latin ligatures U+FB00-FB06 (ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ), which PDF text is copied with, as their letters (NFKC's reading of
# exactly these: all of NFKC would rewrite ² ½ ™ and full-width text too)
_LIGATURES = {chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)}
# what normalize_text turns into a space or drops, and a space and a line break: a line of only these holds no text
BLANK_CHARS = " \n" + _SPACES + _INVISIBLE
_TEXT_TABLE = str.maketrans(dict.fromkeys(_SPACES, " ") | dict.fromkeys(_INVISIBLE) | _LIGATURES)
# a run of spaces is one: typed, or made above of a no-break space + space, tab + space, " \xad "
_SPACE_RUN = " {2,}"


def normalize_text(text: str) -> str:
    """``text`` as the tokenizer reads it: other whitespace characters than the line break as a plain space, a run
    of spaces as one, zero-width characters and soft hyphens dropped, ligatures as their letters (see the module
    docstring)."""
    return re.sub(_SPACE_RUN, " ", text.translate(_TEXT_TABLE))


def _text_normalizer() -> normalizers.Normalizer:
    """:func:`normalize_text` as a ``tokenizers`` normaliser, for a tokenizer.json read outside zoo."""
    return normalizers.Sequence([normalizers.Replace(Regex(f"[{_INVISIBLE}]"), ""),
                                 normalizers.Replace(Regex(f"[{_SPACES}]"), " "),
                                 *(normalizers.Replace(lig, letters) for lig, letters in _LIGATURES.items()),
                                 normalizers.Replace(Regex(_SPACE_RUN), " ")])


_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_surrogates(texts: Sequence[str], first: int = 0) -> None:
    """A lone surrogate (bytes read with ``errors="surrogateescape"``, a JSON ``"\\ud800"``) is no character UTF-8
    can hold, so a byte-level BPE has no bytes for it: ``tokenizers`` answered "TextEncodeInput must be
    Union[TextInputSequence, Tuple[InputSequence, InputSequence]]", naming neither the input nor the character."""
    for i, text in enumerate(texts, first):
        if (m := _SURROGATE.search(text)) is not None:
            raise ValueError(
                f"text {i} holds a lone surrogate U+{ord(m.group()):04X} at character {m.start()} "
                f"({text[max(0, m.start() - 20):m.start() + 20]!r}), which is not a character and has no UTF-8 bytes: "
                "expected valid Unicode text; decode the source bytes with errors='replace' (or fix their encoding)")


class Tokenizer:
    """Text <-> token ids. ``encode_batch(list[str]) -> list[list[int]]`` (no specials added, nor read from
    the text: a literal ``"</s>"`` is its characters); ``decode_batch(list[list[int]]) -> list[str]`` (special
    ids and padding dropped), so ``decode(encode(text)) == normalize_text(text)`` up to NFC."""

    def __init__(self, hf: _HFTokenizer) -> None:
        for i, tok in enumerate(SPECIAL_TOKENS):
            if hf.token_to_id(tok) != i:
                raise ValueError(
                    f"tokenizer must map {tok!r} to id {i} (zoo's fixed special ids), got {hf.token_to_id(tok)}"
                )
        hf.encode_special_tokens = True  # "</s>" in a user's text is four characters, not EOS (module docstring)
        self.hf = hf

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        if isinstance(texts, str):  # iterated, it was one "sentence" per character
            raise TypeError(f"expected a list of str to tokenize, got a str ({texts[:40]!r}): encode() takes one text, "
                            "encode_batch([text]) a list")
        bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
        if bad:
            raise TypeError(f"expected a list of str to tokenize, got elements of type {', '.join(sorted(set(bad)))}")
        _refuse_surrogates(texts)
        return [e.ids for e in self.hf.encode_batch([normalize_text(t) for t in texts], add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self.decode_batch([ids])[0]

    def decode_batch(self, ids: Sequence[Sequence[int]]) -> list[str]:
        return self.hf.decode_batch([self._id_row(x, r) for r, x in enumerate(ids)], skip_special_tokens=True)

    def _id_row(self, row: Sequence[int], r: int) -> list[int]:
        """Row ``r`` of token ids, each a whole number (NumPy's and 0-d tensors' too) below ``vocab_size``. int()
        truncated a float id (4.7 read as 4), read a str "12" as ids 1 and 2, and ``tokenizers`` decoded an id past
        the vocabulary as "" and a negative one as "OverflowError: number too small to fit in target type"."""
        if isinstance(row, str):
            raise TypeError(f"token ids are lists of ints, got a str ({row[:20]!r}) as row {r}: decode the ids "
                            "encode() gave")
        out = []
        for i in row:
            try:
                out.append(operator.index(i))
            except TypeError:
                raise TypeError(f"token ids are whole numbers, got {type(i).__name__} {i!r} in row {r}") from None
        n = self.vocab_size
        if (bad := next((i for i in out if not 0 <= i < n), None)) is not None:
            raise ValueError(f"token id {bad} in row {r} is not one of this tokenizer's {n} tokens (ids 0..{n - 1}): "
                             "ids from another vocabulary, or from an output layer larger than the tokenizer")
        return out

    def to_json(self) -> str:
        return self.hf.to_str()

    def export_json(self) -> str:
        """The JSON with :func:`normalize_text` ahead of its own normaliser: a ``tokenizers`` user of an export's
        tokenizer.json encodes as :meth:`encode_batch` does (:meth:`to_json` is the tokenizer as trained), once
        they set ``tokenizer.encode_special_tokens = True`` (literal ``"</s>"`` as text), which no JSON carries."""
        hf = _HFTokenizer.from_str(self.hf.to_str())
        own = hf.normalizer
        hf.normalizer = _text_normalizer() if own is None else normalizers.Sequence([_text_normalizer(), own])
        return hf.to_str()

    @classmethod
    def from_json(cls, text: str) -> Tokenizer:
        return cls(_HFTokenizer.from_str(text))

    # Hugging Face pickles a tokenizer as its JSON, which lacks encode_special_tokens: a deepcopy, pickle or
    # torch.save(model) of it read a typed "</s>" as EOS again. The switch travels beside the JSON.
    def __getstate__(self) -> dict[str, Any]:
        return {"json": self.to_json(), "encode_special_tokens": self.hf.encode_special_tokens}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # {"hf": ...}: pickled before the switch travelled, which this class always sets
        hf = state["hf"] if "hf" in state else _HFTokenizer.from_str(state["json"])
        hf.encode_special_tokens = bool(state.get("encode_special_tokens", True))
        self.hf = hf

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Tokenizer(byte-level BPE, vocab_size={self.vocab_size})"


def _checked(texts: Iterable[str]) -> Iterable[str]:
    """``texts`` normalised, one at a time (a corpus may stream), each refused where it holds a lone surrogate."""
    for i, text in enumerate(texts):
        _refuse_surrogates([text], first=i)
        yield normalize_text(text)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2) -> Tokenizer:
    """Train a byte-level BPE on ``texts`` (both languages for a joint vocabulary), read as
    :meth:`Tokenizer.encode_batch` reads them (:func:`normalize_text`)."""
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be at least {256 + len(SPECIAL_TOKENS)} (bytes + specials), got {vocab_size}")
    hf = _HFTokenizer(models.BPE())
    hf.normalizer = normalizers.NFC()  # composed umlauts: one form in training and in use
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(_checked(texts), trainer)
    return Tokenizer(hf)
