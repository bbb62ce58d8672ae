"""Validation and evaluation BLEU (zoo/seq2seq/translate.py's bleu_eval_fn) and the decoding options
translate() takes."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.seq2seq.tokenizer import train_tokenizer

DE = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball am Strand."]
EN = ["A dog runs across the meadow.", "Two men play soccer on the beach."]
# one sentence, no sentence or clause end to cut it at, far over a 64-position model's 63 source tokens
LONG = " ".join(["ein Hund läuft schnell über die grüne Wiese und ein Mann schaut zu"] * 6)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = zoo.build("seq2seq-transformer", d_model=32, n_heads=2, n_layers=1, d_ff=64, src_vocab=300, tgt_vocab=300,
                  dropout=0.0, max_len=64)
    m.tokenizer = train_tokenizer(DE + EN + [LONG], vocab_size=300, min_frequency=1)
    return m.eval()


def test_an_over_long_validation_sentence_is_clipped_for_bleu_as_for_the_loss(model, tmp_path):
    """Before: the loss clipped it with a warning, then validation BLEU refused it ("split it into shorter
    sentences") after the trained epoch, with no checkpoint written; zoo.evaluate failed the same way."""
    pairs = list(zip(DE, EN)) + [(LONG, "A dog runs quickly.")]
    with pytest.warns(UserWarning, match=r"1 sentence\(s\) are longer than the model's limit of 63 source tokens.*"
                                         r"clipped to that limit"):
        r = zoo.train(model, pairs, val_data=pairs, epochs=1, amp=None, progress=False,
                      checkpoint_dir=tmp_path / "ck")
    assert 0.0 <= r.history[-1]["val_bleu"] <= 1.0
    assert (tmp_path / "ck" / "epoch-0001.pt").is_file()
    with pytest.warns(UserWarning, match="clipped to that limit"):
        assert 0.0 <= zoo.evaluate(model, pairs, amp=None, progress=False)["bleu"] <= 1.0
    with pytest.raises(ValueError, match="split it into shorter sentences"):  # asked to translate it: refused
        model.translate(LONG)


def test_bleu_of_perfect_translations_is_exactly_one(model, monkeypatch):
    """Before: 1.0000000000000004 (sacreBLEU's 100.00000000000004 / 100), past the [0, 1] of a proportion."""
    import zoo.seq2seq.translate as tr

    monkeypatch.setattr(tr, "_translate_texts", lambda m, items, **k: [dict(zip(DE, EN))[s] for s in items])
    assert tr.bleu_eval_fn(DE, EN, amp=None)(model) == {"bleu": 1.0}
    assert tr.corpus_bleu(EN, EN) == 100.0


def test_references_in_nfd_score_as_the_same_text_in_nfc(model, monkeypatch):
    """Before: BLEU compared the model's NFC output with the references as given, so German references with
    decomposed umlauts (NFD, as macOS file tools write them) lost every n-gram with an umlaut."""
    import unicodedata

    import zoo.seq2seq.translate as tr

    nfd = [unicodedata.normalize("NFD", s) for s in DE]
    assert nfd != DE
    assert tr.corpus_bleu(DE, nfd) == 100.0
    assert tr.corpus_bleu(DE, [s.replace("Fuß", "Fu\u00adß") for s in DE]) == 100.0  # a soft hyphen: dropped too
    monkeypatch.setattr(tr, "_translate_texts", lambda m, items, **k: list(items))
    assert tr.bleu_eval_fn(DE, nfd, amp=None)(model) == {"bleu": 1.0}


def test_numpy_scalars_are_the_numbers_they_hold_as_decoding_options(model):
    """Before: beam_size=np.int64(3) was refused ("beam_size must be an int >= 1; got np.int64(3)"), as were
    NumPy max_len and batch_size and a float32 length_penalty; a bool stays refused."""
    import numpy as np

    want = model.translate(DE, beam_size=3, max_len=5, batch_size=1, length_penalty=0.5, amp=None)
    assert zoo.predict(model, DE, beam_size=np.int64(3), max_len=np.int32(5), batch_size=np.int64(1),
                       length_penalty=np.float32(0.5), amp=None) == want
    for bad in ({"beam_size": np.bool_(True)}, {"beam_size": True}, {"max_len": np.float64(5.0)}):
        with pytest.raises(TypeError, match=f"{next(iter(bad))} must be an int"):
            model.translate(DE, **bad)


def test_a_translation_holds_no_line_break():
    """Once search stopped emitting ids past the tokenizer (which decoded to ""), an undertrained model's byte
    tokens could decode to a line break, splitting its row in the CLI's one-line-per-input output."""
    from zoo.seq2seq.sentences import join_pieces

    pieces = [(0, [5], ""), (1, [6], ""), (1, [7], "\n")]
    assert join_pieces(pieces, ["A\ndog\x1c runs.", "One.", "Two\r\n."], 2) == ["A dog runs.", "One.\nTwo ."]
