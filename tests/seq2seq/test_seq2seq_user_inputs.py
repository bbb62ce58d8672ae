"""Inputs as users of Hugging Face, sacreBLEU and fairseq hand them over: containers that are not lists of
sentences, sacreBLEU's reference streams, text that is not valid Unicode, and a parallel corpus as two files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import zoo
from zoo.seq2seq import corpus_bleu, train_tokenizer
from zoo.seq2seq.translate import bleu_eval_fn

DE = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball am Strand."]
EN = ["A dog runs across the meadow.", "Two men play soccer on the beach."]

# an untrained model rambles to its length limit and says so; what is read is the point here
pytestmark = pytest.mark.filterwarnings("ignore:.*translation.s. reached the model's limit:UserWarning")

@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = zoo.build("seq2seq-gru", src_vocab=300, tgt_vocab=300, emb_dim=16, hidden=24, max_len=64, dropout=0.0).eval()
    m.tokenizer = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    return m

def test_a_dict_a_set_or_a_dataframe_is_refused_and_a_0d_array_is_its_sentence(model):
    """Before: zoo.predict(m, {"de": "Ein Hund."}) translated the key "de" (the value dropped without a word), a
    DataFrame its column names, a set came back in an order of its own, and np.array("Ein Hund.") failed with
    "iteration over a 0-d array"."""
    with pytest.raises(TypeError, match=r"got a dict: its keys or its values\? pass list\(d.values\(\)\)"):
        zoo.predict(model, {"de": DE[0]}, max_len=2, amp=None)
    with pytest.raises(TypeError, match=r"got a set: it has no order .* sorted\(s\)"):
        zoo.predict(model, set(DE), max_len=2, amp=None)
    pd = pytest.importorskip("pandas")
    with pytest.raises(TypeError, match=r"got a 2-D DataFrame: pass one column, e.g. df\['de'\]"):
        zoo.predict(model, pd.DataFrame({"de": DE, "en": EN}), max_len=2, amp=None)  # its column names, before
    with pytest.raises(TypeError, match=r"got a 2-D ndarray: pass a 1-D array or a list"):
        zoo.predict(model, np.array([DE, EN]), max_len=2, amp=None)
    one = zoo.predict(model, DE[0], max_len=2, amp=None)
    assert zoo.predict(model, np.array(DE[0]), max_len=2, amp=None) == one  # a str back, as for the str
    assert zoo.predict(model, np.array(DE), max_len=2, amp=None) == zoo.predict(model, DE, max_len=2, amp=None)

def test_corpus_bleu_refuses_a_str_and_takes_sacrebleus_reference_streams():
    """Before: corpus_bleu("A dog runs.", "A dog runs.") scored each character as a sentence (0.0 for a perfect
    match), and sacreBLEU's call form, corpus_bleu(hyps, [refs]), was "'list' object has no attribute
    'translate'" for one sentence and "2 hypotheses but 1 references" for two."""
    with pytest.raises(TypeError, match="hypotheses must be a list of sentences .*got str 'A dog.*wrap one sentence"):
        corpus_bleu(EN[0], EN[0])
    with pytest.raises(TypeError, match="sources must be a list of sentences .*got str"):
        bleu_eval_fn(DE[0], EN[0])
    assert corpus_bleu([EN[0]], [[EN[0]]]) == 100.0
    assert corpus_bleu(EN, [EN]) == corpus_bleu(EN, EN) == 100.0
    # a second stream is a second reference per sentence: a hypothesis matching either scores
    assert corpus_bleu(["A dog runs across the meadow.", "Two men play soccer on the beach."],
                       [["A cat sleeps on the sofa.", EN[1]], [EN[0], "Three women dance."]]) == 100.0
    with pytest.raises(ValueError, match="2 hypotheses but 1 references in reference stream 1"):
        corpus_bleu(EN, [EN, EN[:1]])
    with pytest.raises(TypeError, match="references must be a list of sentences .*elements of type NoneType"):
        corpus_bleu(EN, [EN[0], None])

def test_text_with_a_lone_surrogate_is_refused_naming_the_text_and_the_character(model):
    """Before: "TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]" from
    ``tokenizers`` when translating (bytes read with errors="surrogateescape"), a UnicodeEncodeError naming no
    sentence when training the tokenizer; and encode_batch("abc") encoded three one-letter texts."""
    with pytest.raises(ValueError, match=r"text 1 holds a lone surrogate U\+DCFF at character 3 .*errors='replace'"):
        model.translate([DE[0], "Ein\udcff Hund."], max_len=2, amp=None)
    with pytest.raises(ValueError, match=r"text 2 holds a lone surrogate U\+D800"):
        train_tokenizer(DE + ["a\ud800"], vocab_size=300)
    with pytest.raises(TypeError, match=r"got a str \('Ein Hund"):
        model.tokenizer.encode_batch(DE[0])

def test_train_and_evaluate_read_a_source_file_and_a_target_file_given_as_paths(tmp_path):
    """Before: zoo.train(m, (Path("c.de"), Path("c.en"))) was refused with "seq2seq data in memory is a list of
    (source, target) sentence pairs ...", naming neither the files nor a way to read them; the files must have been
    renamed into a corpus folder's train.de / train.en. Windows files (BOM, CRLF) read as their lines."""
    src, tgt = tmp_path / "c.de", tmp_path / "c.en"
    src.write_bytes(("\ufeff" + "\r\n".join(DE) + "\r\n").encode())
    tgt.write_bytes(("\r\n".join(EN) + "\r\n").encode())
    torch.manual_seed(0)
    m = zoo.build("seq2seq-gru", src_vocab=300, tgt_vocab=300, emb_dim=16, hidden=24, max_len=64, dropout=0.0)
    result = zoo.train(m, ((src, tgt), (src, tgt)), epochs=1, amp=None, progress=False)  # (train, val) as files
    assert 0.0 <= result.history[-1]["val_bleu"] <= 1.0
    files = zoo.evaluate(m, (src, tgt), amp=None, progress=False)
    assert files == zoo.evaluate(m, (DE, EN), amp=None, progress=False)  # the same pairs as in memory
    (tmp_path / "one.en").write_text(EN[0] + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="c.de has 2 lines, .*one.en has 1"):
        zoo.evaluate(m, (src, tmp_path / "one.en"), amp=None, progress=False)
    with pytest.raises(TypeError, match=r"got two file names as str: .* pass them as pathlib.Path"):
        zoo.evaluate(m, (str(src), str(tgt)), amp=None, progress=False)
    with pytest.raises(TypeError, match=r"one sentence pair goes in a list, \[\(source, target\)\]"):
        zoo.evaluate(m, (DE[0], EN[0]), amp=None, progress=False)


def test_decode_refuses_ids_that_are_not_the_tokenizers_and_takes_arrays_of_them(model):
    """Before: decode([4.7]) truncated the float to id 4, decode("12") read ids 1 and 2 (both special: ""), an id
    past the vocabulary (argmax over an output layer larger than the tokenizer) decoded as "" without a word, and
    -1 was "OverflowError: number too small to fit in target type"."""
    tok = model.tokenizer
    ids = tok.encode(DE[0])
    assert tok.decode(torch.tensor(ids)) == tok.decode(np.array(ids)) == tok.decode(ids) == DE[0]
    assert tok.decode_batch(torch.tensor([ids, ids])) == [DE[0], DE[0]]
    with pytest.raises(TypeError, match=r"whole numbers, got float 4.7 in row 0"):
        tok.decode([*ids, 4.7])
    with pytest.raises(TypeError, match=r"got a str \('12'\) as row 0"):
        tok.decode("12")
    for bad in (tok.vocab_size, -1):
        with pytest.raises(ValueError, match=rf"token id {bad} in row 1 is not one of this tokenizer's 300 tokens"):
            tok.decode_batch([ids, [*ids, bad]])
