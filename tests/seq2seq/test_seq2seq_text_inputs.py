"""What a translator reads from its inputs, the same in ``zoo.predict``, ``model.translate`` and an export's
``ExportedTranslator.translate``: a str is a sentence as written (even "~/s.txt" naming a file), a list holds
sentences, a ``pathlib.Path`` is a text file of one sentence per line (``~`` is the home folder)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import zoo
from zoo.seq2seq import ExportedTranslator, train_tokenizer

DE = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball am Strand.", "Eine Frau singt."]
EN = ["A dog runs across the meadow.", "Two men play soccer on the beach.", "A woman is singing."]

# an untrained model rambles to its length limit and says so; what is read is the point here
pytestmark = pytest.mark.filterwarnings("ignore:.*translation.s. reached the model's limit:UserWarning")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = zoo.build("seq2seq-gru", src_vocab=300, tgt_vocab=300, emb_dim=16, hidden=24, max_len=32).eval()
    m.tokenizer = train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)
    return m


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A home folder holding ``s.txt``, one sentence per line."""
    monkeypatch.setenv("HOME", str(tmp_path))  # os.path.expanduser reads HOME
    (tmp_path / "s.txt").write_text("\n".join(DE) + "\n", encoding="utf-8")
    return tmp_path


def test_a_str_naming_a_file_under_home_is_the_sentence_as_written_as_in_a_list(model, home, monkeypatch):
    """Before: zoo.predict(m, "~/s.txt") translated "/home/me/s.txt" (the path expanded, then read as text),
    zoo.predict(m, ["~/s.txt"]) the words "~/s.txt": one input, two results. A str is a sentence."""
    seen: list[str] = []
    encode_batch = model.tokenizer.encode_batch

    def spy(texts: list[str]) -> list[list[int]]:
        seen.extend(texts)
        return encode_batch(texts)

    monkeypatch.setattr(model.tokenizer, "encode_batch", spy)
    one = zoo.predict(model, "~/s.txt", amp=None)
    assert seen == ["~/s.txt"], f"the str was translated as {seen}"
    assert zoo.predict(model, ["~/s.txt"], amp=None) == [one]
    # a pathlib.Path is the file (home expanded): one translation per line, as the list of its lines gives
    assert zoo.predict(model, Path("~/s.txt"), amp=None) == zoo.predict(model, DE, amp=None)
    assert model.translate(Path("~/s.txt"), amp=None) == model.translate(DE, amp=None)


def test_an_exported_translator_takes_what_zoo_predict_of_the_model_takes(model, home, tmp_path):
    """Before: ExportedTranslator.translate(Path("sents.txt")) raised "'PosixPath' object is not iterable", and
    translate(5) "'int' object is not iterable", where zoo.predict of the model reads the file's lines and
    names the inputs it takes."""
    pytest.importorskip("onnxruntime")
    runner = ExportedTranslator(zoo.export(model, tmp_path / "gru", "onnx", src_len=5).path)
    expected = zoo.predict(model, home / "s.txt", amp=None)  # the export is fp32 greedy
    assert len(expected) == len(DE)
    assert runner.translate(home / "s.txt") == runner.translate(Path("~/s.txt")) == runner.translate(DE) == expected
    assert runner.translate("~/s.txt") == zoo.predict(model, "~/s.txt", amp=None)  # a str is a sentence here too
    with pytest.raises(FileNotFoundError, match="no text file to translate at .*missing.txt"):
        runner.translate(tmp_path / "missing.txt")
    with pytest.raises(TypeError, match=r"translates a sentence \(str\), a list of them, or a text file .*; got int"):
        runner.translate(5)  # type: ignore[arg-type]


def test_spaces_around_one_sentence_do_not_change_what_is_translated(model):
    """A one-sentence input reused the ids of the text as given, spaces and line end included ('  Zwei Männer
    gehen.  ' translated 'The two men are walking.', without them 'Two men are walking.'); inputs of several
    sentences were trimmed already. The ids the model reads are the trimmed sentence's."""
    from zoo.seq2seq.sentences import segments

    tok = model.tokenizer
    plain = "Eine Frau singt."
    padded = ["  Eine Frau singt.  ", "Eine Frau singt.\n", "Eine Frau singt.\r\n", "\tEine Frau singt."]
    texts = [plain, *padded]
    assert len({tuple(ids) for _, ids, _ in segments(texts, tok.encode_batch(texts), tok, 30)}) == 1
    assert zoo.predict(model, padded, amp=None) == [zoo.predict(model, plain, amp=None)] * len(padded)
