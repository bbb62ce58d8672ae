"""Blank lines in a parallel corpus's files (zoo/seq2seq/data.py load_parallel): blank on both sides is a pair, as
fairseq-preprocess and Hugging Face datasets keep one; blank on one side only is a misaligned corpus, refused
naming the file and the line rather than trained on."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import zoo
from zoo.seq2seq.data import load_parallel


def _write(path: Path, text: str) -> Path:
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


@pytest.mark.parametrize("blank_side", ["de", "en"])
@pytest.mark.parametrize("blank", ["", "   ", "\u200b", "\t\r"])
def test_a_line_blank_on_one_side_only_is_refused_naming_file_and_line(tmp_path, blank_side, blank):
    """Before: ("", "Two cats.") was a sentence pair, and every pair after it misaligned, trained on silently. A
    line blank on both sides (line 3) stays a pair, as fairseq-preprocess and Hugging Face datasets keep one."""
    lines = {"de": ["Ein Hund.", "Zwei Katzen.", blank, "Drei."], "en": ["A dog.", "Two cats.", "", "Three."]}
    both = load_parallel(_write(tmp_path / "both.de", "\n".join(lines["de"]) + "\n"),
                         _write(tmp_path / "both.en", "\n".join(lines["en"]) + "\n"))
    assert (both.src[2], both.tgt[2], len(both)) == (blank.removesuffix("\r"), "", 4)
    lines[blank_side][1] = blank
    de = _write(tmp_path / "train.de.gz", "\n".join(lines["de"]) + "\n")
    en = _write(tmp_path / "train.en", "\r\n".join(lines["en"]) + "\r\n")
    named = de if blank_side == "de" else en
    with pytest.raises(ValueError, match="misaligned") as err:
        load_parallel(de, en)
    assert f"line 2 of {named} is blank" in str(err.value)


def test_a_corpus_folder_with_a_one_sided_blank_line_is_refused_before_training(tmp_path):
    for split in ("train", "val"):
        _write(tmp_path / f"{split}.de", "Ein Hund.\nZwei Katzen.\nDrei Vögel.\n")
        _write(tmp_path / f"{split}.en", "A dog.\n\nThree birds.\n")
    model = zoo.build("seq2seq-transformer", d_model=32, n_heads=2, n_layers=1, d_ff=64, src_vocab=300,
                      tgt_vocab=300)
    with pytest.raises(ValueError, match=r"line 2 of .*train\.en is blank"):
        zoo.train(model, str(tmp_path), direction="de-en", epochs=1, progress=False, amp=None)
    with pytest.raises(ValueError, match=r"line 2 of .*b\.en is blank"):
        zoo.train(model, (_write(tmp_path / "b.de", "Ein Hund.\nZwei.\n"), _write(tmp_path / "b.en", "A dog.\n\n")),
                  epochs=1, progress=False, amp=None)


def test_files_of_two_lengths_say_when_the_extra_lines_are_blank(tmp_path):
    de = _write(tmp_path / "a.de", "Ein Hund.\nZwei.\n\n")
    en = _write(tmp_path / "a.en", "A dog.\nTwo.\n")
    with pytest.raises(ValueError, match=r"3 lines.* has 2; the extra 1 line\(s\) at the end of .*a\.de are blank"):
        load_parallel(de, en)
    with pytest.raises(ValueError, match=r"has 2 lines, .* has 3$"):
        load_parallel(en, _write(tmp_path / "b.de", "Ein Hund.\nZwei.\nDrei.\n"))


def test_a_stray_non_utf8_byte_is_named_with_its_line_and_a_conversion_that_fits_the_file(tmp_path):
    """Before: "(byte 0xe4: invalid continuation byte): ... iconv -f latin1 -t utf-8 train.de.gz": no line to look
    at in a corpus of thousands, and iconv run on the compressed bytes of a .gz."""
    data = "Ein Hund läuft.\nZwei Männer.\nDrei Vögel.\n".encode().replace("Vö".encode(), b"V\xf6")
    packed = tmp_path / "train.de.gz"
    packed.write_bytes(gzip.compress(data))
    with pytest.raises(ValueError, match=r"byte 0xf6: .*line 3: 'Drei V\ufffdgel\.'.*zcat train\.de\.gz \| iconv"):
        load_parallel(packed, _write(tmp_path / "train.en", "A dog runs.\nTwo men.\nThree birds.\n"))
    plain = tmp_path / "train.de"
    plain.write_bytes(data)
    with pytest.raises(ValueError, match=r"line 3: .*iconv -f latin1 -t utf-8 train\.de > utf8\.txt"):
        load_parallel(plain, tmp_path / "train.en")


@pytest.mark.parametrize("form", ["pairs", "sources, targets", "val_data"])
def test_sentence_pairs_in_memory_blank_on_one_side_only_are_refused_naming_the_pair(form):
    """Before: files with such a line were refused, and the same pairs given as a list ([("Zwei Katzen.", "")]) or
    a (sources, targets) tuple were trained on, an empty target taught for a sentence. Blank on both sides stays a
    pair, as in files."""
    pairs = [("Ein Hund.", "A dog."), ("Zwei Katzen.", "Two cats."), ("", "\u200b"), ("Drei.", "Three.")]
    model = zoo.build("seq2seq-transformer", d_model=32, n_heads=2, n_layers=1, d_ff=64, src_vocab=300,
                      tgt_vocab=300)
    loop = {"epochs": 1, "progress": False, "amp": None, "batch_size": 4}
    assert len(zoo.train(model, pairs, **loop).history) == 1
    pairs[1] = ("Zwei Katzen.", " \t")
    pairs[3] = ("\u200b", "Three.")
    given = {"pairs": {"data": pairs}, "sources, targets": {"data": tuple(map(list, zip(*pairs)))},
             "val_data": {"data": pairs[:1], "val_data": pairs}}[form]
    with pytest.raises(ValueError, match=r"^sentence pairs are misaligned: the pair at index 1 has a blank target "
                                         r"but a source \('Zwei Katzen\.'\) \(2 such pairs, the first shown\)"):
        zoo.train(model, **given, **loop)
