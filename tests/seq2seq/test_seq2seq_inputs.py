"""What translate() does with inputs a model cannot take as they are: blank inputs give "" without a model
call, inputs of several sentences and long inputs are translated sentence by sentence (a single over-long
sentence is refused with the limit), and every bad decoding option is an error naming it."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import zoo
from zoo.seq2seq.search import beam_search, greedy_search
from zoo.seq2seq.tokenizer import train_tokenizer

DE = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball am Strand.", "Eine Frau liest ein Buch im Park."]
EN = ["A dog runs across the meadow.", "Two men play soccer on the beach.", "A woman reads a book in the park."]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = zoo.build("seq2seq-transformer", d_model=32, n_heads=4, n_layers=1, d_ff=64, src_vocab=300, tgt_vocab=300,
                  dropout=0.0, max_len=32)  # 31 source tokens at most: every DE sentence fits, all three do not
    m.tokenizer = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    return m.eval()


def test_blank_inputs_translate_to_empty_without_a_model_call(model, monkeypatch):
    """Before: translate("") returned "A" and whitespace a hallucinated sentence."""
    def boom(*a, **k):
        raise AssertionError("the model was called for a blank input")

    monkeypatch.setattr(model, "start", boom)
    assert model.translate("") == ""
    assert model.translate(["   ", "\n\t", ""], beam_size=3) == ["", "", ""]


def test_inputs_of_only_characters_the_tokenizer_drops_are_blank(model, monkeypatch):
    """Before: a zero-width space, BOM, soft hyphen or word joiner alone was not blank: the model was called on an
    empty source and its made-up translation returned, where " " gave ""."""
    from zoo.seq2seq.sentences import split_sentences

    invisible = ["\u200b", "\ufeff", "\xad", "\u200b\u200b \u2060", "\u2060\n\ufeff"]
    assert [split_sentences(s) for s in invisible] == [[]] * len(invisible)
    assert split_sentences("Ein Hund.\n\u200b\nZwei.") == [("Ein Hund.", ""), ("Zwei.", "\n\n")]

    def boom(*a, **k):
        raise AssertionError("the model was called for a blank input")

    monkeypatch.setattr(model, "start", boom)
    assert model.translate(invisible, beam_size=3) == [""] * len(invisible)
    assert model.translate("\u200b") == ""


def test_a_text_file_given_as_a_path_is_translated_line_by_line_and_other_inputs_are_refused(model, tmp_path):
    """A str is a sentence (zoo.predict(m, "corpus/test.de") translates those words); a pathlib.Path is the
    file. An int gave "'int' object is not iterable"."""
    path = tmp_path / "test.de"
    path.write_text("\n".join(DE) + "\n", encoding="utf-8")
    assert zoo.predict(model, path, amp=None) == zoo.predict(model, DE, amp=None)
    with pytest.raises(FileNotFoundError, match="no text file to translate"):
        zoo.predict(model, tmp_path / "missing.de")
    for bad, got in ((5, "got int"), ([DE[0], 3], r"got a list of \['int', 'str'\]")):
        with pytest.raises(TypeError, match=f"translates a sentence .*; {got}"):
            zoo.predict(model, bad)


def test_a_text_file_from_a_windows_editor_reads_as_its_sentences(model, tmp_path):
    """A byte-order mark and CRLF line ends (Notepad) translate as the plain file does. A file in another
    encoding is an error naming it and the fix; it was a bare UnicodeDecodeError naming neither."""
    path = tmp_path / "notepad.de"
    path.write_bytes(("\r\n".join(DE) + "\r\n").encode("utf-8-sig"))
    assert zoo.predict(model, path, amp=None) == zoo.predict(model, DE, amp=None)
    latin = tmp_path / "latin.de"
    latin.write_bytes("Zwei Männer spielen Fußball.\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.de is not UTF-8 text \(byte 0xe4: .*save it as UTF-8"):
        zoo.predict(model, latin)


def test_long_input_is_translated_sentence_by_sentence(model):
    """Before: an input longer than the model's positions was cut to max_len - 1 tokens without a word."""
    paragraph = " ".join(DE)
    assert len(model.tokenizer.encode(paragraph)) > model.max_len - 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no truncation warning either
        whole = model.translate(paragraph, max_len=6)
    pieces = model.translate(DE, max_len=6)
    assert whole == " ".join(p.strip() for p in pieces)
    # the same in a batch next to short inputs, and with beam search
    batch = model.translate(["", paragraph, DE[0]], beam_size=2, max_len=6)
    assert batch[0] == "" and batch[2] == model.translate(DE[0], beam_size=2, max_len=6)
    assert batch[1] == " ".join(p.strip() for p in model.translate(DE, beam_size=2, max_len=6))


def test_a_paragraph_that_fits_is_translated_sentence_by_sentence(model):
    """Four captions joined with spaces came back from the shipped de-en model as one sentence that mixed
    them ("A man is riding a bicycle, and playing a book in the snow, ..."): an input of several sentences
    that fits the model is cut into them too, and line breaks are kept in the translation."""
    two = ["Ein Hund läuft.", "Eine Frau liest."]
    assert len(model.tokenizer.encode(" ".join(two))) <= model.max_len - 1
    pieces = [p.strip() for p in model.translate(two, max_len=6)]
    assert model.translate(" ".join(two), max_len=6) == " ".join(pieces)
    assert model.translate("\n\n".join(two), max_len=6) == "\n\n".join(pieces)
    one = "Dr. Seuss liest im 2. Stock."  # stays one sentence
    assert model.translate(one, max_len=6) == model.translate([one], max_len=6)[0]


@pytest.mark.parametrize(("text", "sentences"), [
    ("Ein Hund läuft. Zwei Katzen schlafen!  Was? Nein.", ["Ein Hund läuft.", "Zwei Katzen schlafen!", "Was?", "Nein."]),
    ("Mr. Potato steht im 2. Stock bzw. am St. Patrick's Day vor U.S. Army Dept. 5. Fertig.",
     ["Mr. Potato steht im 2. Stock bzw. am St. Patrick's Day vor U.S. Army Dept. 5. Fertig."]),
    ("Er ruft: \"Hallo!\" Dann geht A. Noble.", ["Er ruft: \"Hallo!\"", "Dann geht A. Noble."]),
    # German quotes close with “ ‘ « (after „ ‚ »), French sets » off by a space: each sentence was kept whole
    ("Er sagte: \u201eIch komme.\u201c Dann ging er. \u201aJa.\u2018 Er kam. \u00bbNein!\u00ab \u201eGut.\u201c",
     ["Er sagte: \u201eIch komme.\u201c", "Dann ging er.", "\u201aJa.\u2018", "Er kam.", "\u00bbNein!\u00ab",
      "\u201eGut.\u201c"]),
    ("Il a dit : \u00ab Oui. \u00bb Puis il est parti.", ["Il a dit : \u00ab Oui. \u00bb", "Puis il est parti."]),
    ("ein hund läuft . zwei katzen schlafen .", ["ein hund läuft . zwei katzen schlafen ."]),  # lower case: one
    ("Warte ... Dann", ["Warte ... Dann"]),
    ("Eins.\nZwei.\n\n\nDrei. Vier.", ["Eins.", "Zwei.", "Drei.", "Vier."]),
    ("  \n ", []),
])
def test_sentences_are_cut_where_a_sentence_ends_not_after_abbreviations(text, sentences):
    from zoo.seq2seq.sentences import split_sentences

    assert [s for s, _ in split_sentences(text)] == sentences
    if text.startswith("Eins"):
        assert [sep for _, sep in split_sentences(text)] == ["", "\n", "\n\n\n", " "]


def test_one_sentence_longer_than_the_model_is_refused_with_the_limit(model):
    sentence = "Ein Hund läuft über die Wiese und " * 6  # no sentence end to split at
    n = len(model.tokenizer.encode(sentence.strip()))
    with pytest.raises(ValueError, match=rf"one sentence is still {n} tokens, more than the model's limit of 31 "
                                         r"source tokens"):
        model.translate(["Kurz.", sentence])


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"max_len": 0}, ValueError, r"max_len must be between 1 and 31 .*got 0"),
    ({"max_len": -3}, ValueError, r"max_len must be between 1 and 31"),
    ({"max_len": 32}, ValueError, r"max_len must be between 1 and 31 \(the model's max_len 32 less BOS\)"),
    ({"max_len": 2.5}, TypeError, r"max_len must be an int"),
    ({"max_len": True}, TypeError, r"max_len must be an int"),
    ({"length_penalty": math.nan}, ValueError, r"length_penalty must be a finite number >= 0 .*got nan"),
    ({"length_penalty": math.inf}, ValueError, r"length_penalty must be a finite number"),
    ({"length_penalty": -0.5}, ValueError, r"length_penalty must be a finite number >= 0"),
    ({"length_penalty": "0.6"}, TypeError, r"length_penalty must be a number"),
    ({"beam_size": 0}, ValueError, r"beam_size must be an int >= 1, got 0"),
    ({"beam_size": 2.0}, TypeError, r"beam_size must be an int"),
    ({"batch_size": 0}, ValueError, r"batch_size must be an int >= 1, got 0"),
])
def test_bad_decoding_options_name_the_argument(model, kwargs, error, message):
    """Before: max_len=0 was ignored and length_penalty=nan accepted."""
    with pytest.raises(error, match=message):
        model.translate(DE[:1], **kwargs)


def test_search_functions_check_their_options_too(model):
    src = torch.tensor([[5, 6, 7, 2]])
    with pytest.raises(ValueError, match="max_len must be an int >= 1"):
        greedy_search(model, src, max_len=0)
    # past the model's positions: the Transformer decoded 31 steps and then failed inside its position table
    for search in (greedy_search, lambda m, s, max_len: beam_search(m, s, beam_size=2, max_len=max_len)):
        with pytest.raises(ValueError, match=r"max_len must be between 1 and 31 \(the model's max_len 32 less BOS\)"
                                             r".*got 32"):
            search(model, src, max_len=32)
    assert len(greedy_search(model, src, max_len=31)[0]) <= 31
    with pytest.raises(ValueError, match="length_penalty must be a finite number"):
        beam_search(model, src, beam_size=2, length_penalty=float("nan"))
    with pytest.raises(ValueError, match="beam_size must be an int >= 1"):
        beam_search(model, src, beam_size=0)


def test_shipped_weights_translate_a_long_paragraph_to_its_end():
    """A 300+ token paragraph: before, everything after token 255 was dropped (here: the snow)."""
    from zoo import hub

    if "seq2seq-transformer.multi30k-de-en" not in hub.list_weights("seq2seq-transformer"):
        pytest.skip("seq2seq-transformer.multi30k-de-en is not published")
    m = zoo.build("seq2seq-transformer", weights="multi30k-de-en")
    paragraph = " ".join(["Ein Mann fährt mit dem Fahrrad."] * 40 + ["Zwei Hunde spielen im Schnee."])
    assert len(m.tokenizer.encode(paragraph)) > m.max_len
    out = m.translate(paragraph)
    assert out.count(".") >= 41 and "snow" in out.rsplit(".", 2)[-2].lower()


def _precision_of_steps(model, monkeypatch, **kw):
    """The autocast dtypes the search ran its decoder steps under (None: none, fp32)."""
    seen, step = set(), model.step

    def spy(*a, **k):
        seen.add(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None)
        return step(*a, **k)

    monkeypatch.setattr(model, "step", spy)
    try:
        out = zoo.predict(model, DE, max_len=4, **kw)
    finally:
        monkeypatch.undo()
    assert len(out) == len(DE)
    return seen


@pytest.mark.parametrize("beam_size", [1, 3])
def test_translate_runs_at_the_precision_amp_asks_for(model, monkeypatch, beam_size):
    from zoo.engine.precision import auto_amp

    for off in (None, "fp32", "none"):
        assert _precision_of_steps(model, monkeypatch, amp=off, beam_size=beam_size) == {None}
    assert _precision_of_steps(model, monkeypatch, amp="bf16", beam_size=beam_size) == {torch.bfloat16}
    auto = {torch.bfloat16 if auto_amp("cpu", "matmul") == "bf16" else None}  # GEMMs decide for a seq2seq model
    assert _precision_of_steps(model, monkeypatch, beam_size=beam_size) == auto
    assert model.translate(DE, max_len=4, amp=None) == model.translate(DE, max_len=4, amp="fp32")
    with pytest.raises(ValueError, match=r"amp='fp16' runs on CUDA only, and this prediction runs on cpu"):
        model.translate(DE, amp="fp16")  # fp16 autocast: CUDA only


def test_translate_runs_where_the_model_is_unless_device_is_given(model, monkeypatch):
    moved, to = [], model.to
    monkeypatch.setattr(model, "to", lambda *a, **k: moved.append(a) or to(*a, **k))
    zoo.predict(model, DE[0], max_len=4)
    model.translate(DE, max_len=4, beam_size=2)
    assert moved == []
    zoo.predict(model, DE[0], max_len=4, device="cpu")
    assert moved == [(torch.device("cpu"),)]
