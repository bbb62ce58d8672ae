"""Text pasted from web pages and PDFs: a no-break space, thin space, tab, CR, ... reads as a plain space and
zero-width characters and soft hyphens are dropped, in training and in use, for tokenizers already stored in
weights files too. One U+00A0 per sentence changed 53 of 60 Multi30k test translations of the shipped model."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer as HFTokenizer

import zoo
from zoo.seq2seq.tokenizer import Tokenizer, train_tokenizer

PLAIN = ["Ein Mann fährt Fahrrad.", "Ein Hund läuft über die Nummer 28."]
PASTED = ["Ein\u00a0Mann fährt\u2009Fahrrad.", "Ein\tHund\u3000läuft\u202füber die Num\u00admer\u200b\u00a028.\r"]
PASTED_PLAIN = ["Ein Mann fährt Fahrrad.", "Ein Hund läuft über die Nummer 28. "]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(PLAIN * 3, vocab_size=300, min_frequency=1)


def test_pasted_whitespace_encodes_as_plain_spaces_for_a_stored_tokenizer(tok):
    stored = Tokenizer.from_json(tok.to_json())  # as a weights file gives it back
    assert stored.encode_batch(PASTED) == stored.encode_batch(PASTED_PLAIN)
    assert stored.encode("\ufeffEin Mann") == stored.encode("Ein Mann")
    assert stored.encode("Ein\nMann") != stored.encode("Ein Mann")  # a line break stays one (it cuts sentences)
    # the stored JSON, the tokenizer's fingerprint in checkpoints, is the one trained: NFC alone
    assert json.loads(tok.to_json())["normalizer"]["type"] == "NFC"


def test_normalize_text_maps_every_whitespace_but_the_line_break_to_a_space():
    from zoo.seq2seq.tokenizer import normalize_text

    spaces = [c for c in map(chr, range(0x3001)) if c.isspace() and c not in " \n"]
    assert [normalize_text(f"a{c}b") for c in spaces] == ["a b"] * len(spaces)
    assert normalize_text("".join(spaces)) == " "  # a run of them is one space
    assert normalize_text("a\u200bb\u2060c\ufeffd\u00ade\u200df") == "abcde\u200df"  # ZWJ carries meaning


LIGATURES = "Eine Gruppe Menschen, die sich in einem ö\ufb00entlichen Park amüsieren, ein Mann \ufb01lmt, \ufb02iegt."
LETTERS = "Eine Gruppe Menschen, die sich in einem öffentlichen Park amüsieren, ein Mann filmt, fliegt."


def test_pdf_ligatures_read_as_their_letters_in_zoo_and_in_the_exported_tokenizer(tok):
    """Before: U+FB00-FB06 (PDF copy-paste) were kept, three bytes the BPE never saw in training: every one of 40
    Multi30k test sentences with one translated otherwise than typed, some to garbage, and so did an export's."""
    import unicodedata

    from zoo.seq2seq.tokenizer import normalize_text

    ligatures = "".join(map(chr, range(0xFB00, 0xFB07)))
    assert normalize_text(ligatures) == unicodedata.normalize("NFKC", ligatures) == "fffiflffifflstst"
    assert normalize_text("\ufb07\ufb13 \u00b2 \uff21") == "\ufb07\ufb13 \u00b2 \uff21"  # no more of NFKC than them
    stored = Tokenizer.from_json(tok.to_json())  # as a weights file gives it back
    assert stored.encode(LIGATURES) == stored.encode(LETTERS)
    exported = HFTokenizer.from_str(tok.export_json())
    assert exported.encode(LIGATURES, add_special_tokens=False).ids == stored.encode(LETTERS)


def test_a_run_of_spaces_reads_as_one_in_zoo_and_in_the_exported_tokenizer(tok):
    """Before: a second space was a byte-level token of its own (28 of 60 test translations changed), and
    normalize_text made such runs itself of a no-break space + space, a tab + space or a space, soft hyphen, space."""
    from zoo.seq2seq.tokenizer import normalize_text

    runs = ["Ein  Mann fährt   Fahrrad.", "Ein\u00a0 Mann\t fährt \u00ad Fahrrad.", "  Ein Mann fährt Fahrrad.  "]
    assert [normalize_text(t) for t in runs] == ["Ein Mann fährt Fahrrad."] * 2 + [" Ein Mann fährt Fahrrad. "]
    assert normalize_text("Ein\n\nMann") == "Ein\n\nMann"  # line breaks are no spaces: they cut sentences
    stored = Tokenizer.from_json(tok.to_json())
    assert stored.encode_batch(runs[:2]) == stored.encode_batch([PLAIN[0]] * 2)
    exported = HFTokenizer.from_str(tok.export_json())
    assert [e.ids for e in exported.encode_batch(runs, add_special_tokens=False)] == stored.encode_batch(runs)


def test_the_exported_normaliser_agrees_with_normalize_text_on_mixed_text():
    import random

    from zoo.seq2seq.tokenizer import _text_normalizer, normalize_text

    alphabet = [" ", "\n", "a", "ß", "\u00a0", "\t", "\u3000", "\u200b", "\u00ad", "\ufeff", "\u200d", "\ufb01",
                "\ufb03", "\ufb06", "\ufb07"]
    rng = random.Random(0)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(300)]
    exported = _text_normalizer()
    assert [exported.normalize_str(t) for t in texts] == [normalize_text(t) for t in texts]


def test_training_reads_the_corpus_as_translation_does():
    corpus = ["Er trägt die Nummer\u00a028.", "Sie hat 2\u00a0Finger frei."] * 4
    plain = [s.replace("\u00a0", " ") for s in corpus]
    assert train_tokenizer(corpus, vocab_size=300) == train_tokenizer(plain, vocab_size=300)


def test_the_exported_tokenizer_json_reads_text_as_zoo_does(tok):
    hf = HFTokenizer.from_str(tok.export_json())
    assert [e.ids for e in hf.encode_batch(PASTED, add_special_tokens=False)] == tok.encode_batch(PASTED_PLAIN)
    assert Tokenizer.from_json(tok.export_json()).encode_batch(PASTED) == tok.encode_batch(PASTED)


def test_shipped_model_translates_a_pasted_sentence_as_the_plain_one():
    from zoo import hub

    if "seq2seq-transformer.multi30k-de-en" not in hub.list_weights("seq2seq-transformer"):
        pytest.skip("seq2seq-transformer.multi30k-de-en is not published")
    m = zoo.build("seq2seq-transformer", weights="multi30k-de-en")
    pasted, plain = m.translate(["Ein\u00a0Mann fährt\u00a0Fahrrad.", "Ein Mann fährt Fahrrad."], amp=None)
    assert pasted == plain


def test_special_tokens_written_in_the_text_are_text_not_control_ids(tok):
    stored = Tokenizer.from_json(tok.to_json())  # as a weights file gives it back, JSON unchanged
    assert stored.to_json() == tok.to_json()
    text = "Ein </s> Hund <s> läuft <pad> über <unk> die Wiese."
    ids = stored.encode(text)
    assert min(ids) >= 4, ids  # no PAD, BOS, EOS or UNK from a user's characters
    assert stored.decode(ids) == text
    assert stored.decode([5, 2, 6, 0]) == stored.decode([5, 6])  # special ids (a model's EOS, padding) dropped


def test_special_tokens_stay_text_in_a_copied_or_pickled_tokenizer(tok):
    """Before: copy.deepcopy, pickle and torch.save(model) gave a tokenizer without encode_special_tokens (Hugging
    Face pickles only the JSON), which read a literal "</s>" in a sentence as the EOS id 2."""
    import copy
    import io
    import pickle

    import torch

    text = "Ein </s> Hund"
    m = zoo.build("seq2seq-gru", emb_dim=16, hidden=32, src_vocab=300, tgt_vocab=300)
    m.tokenizer = tok
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False).tokenizer
    for copied in (copy.deepcopy(tok), pickle.loads(pickle.dumps(tok)), copy.deepcopy(m).tokenizer, loaded):
        assert copied.encode(text) == tok.encode(text) and min(copied.encode(text)) >= 4
        assert copied == tok
