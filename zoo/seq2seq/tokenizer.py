"""Joint byte-level BPE for source and target, on Hugging Face ``tokenizers``.

Byte-level BPE (GPT-2 style; Sennrich et al. 2016, https://arxiv.org/abs/1508.07909) starts from the 256
bytes, so *no* input is unknown (any script, emoji, control character) and decoding gives back the exact
detokenized text, spacing included: sacreBLEU scores the output as it comes. One vocabulary for both
languages lets the Transformer share its embeddings. The whole tokenizer serialises to one JSON string,
which is stored in the weights file's safetensors metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tokenizers import Tokenizer as _HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "SPECIAL_TOKENS", "UNK_ID", "Tokenizer", "train_tokenizer"]

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)


class Tokenizer:
    """Text <-> token ids. ``encode_batch(list[str]) -> list[list[int]]`` (no specials added);
    ``decode_batch(list[list[int]]) -> list[str]`` (specials and padding dropped)."""

    def __init__(self, hf: _HFTokenizer) -> None:
        for i, tok in enumerate(SPECIAL_TOKENS):
            if hf.token_to_id(tok) != i:
                raise ValueError(
                    f"tokenizer must map {tok!r} to id {i} (zoo's fixed special ids), got {hf.token_to_id(tok)}"
                )
        self.hf = hf

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
        if bad:
            raise TypeError(f"expected a list of str to tokenize, got elements of type {', '.join(sorted(set(bad)))}")
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self.decode_batch([ids])[0]

    def decode_batch(self, ids: Sequence[Sequence[int]]) -> list[str]:
        return self.hf.decode_batch([list(map(int, x)) for x in ids], skip_special_tokens=True)

    def to_json(self) -> str:
        return self.hf.to_str()

    @classmethod
    def from_json(cls, text: str) -> Tokenizer:
        return cls(_HFTokenizer.from_str(text))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Tokenizer(byte-level BPE, vocab_size={self.vocab_size})"


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2) -> Tokenizer:
    """Train a byte-level BPE on ``texts`` (both languages for a joint vocabulary)."""
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
    hf.train_from_iterator(texts, trainer)
    return Tokenizer(hf)
