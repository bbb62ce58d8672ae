"""``zoo translate`` (zoo/seq2seq/cli.py)."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.cli import main
from zoo.seq2seq.base import Seq2SeqModel
from zoo.seq2seq.tokenizer import train_tokenizer


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    m = zoo.build("seq2seq-gru", emb_dim=8, hidden=16, src_vocab=300, tgt_vocab=300)
    m.tokenizer = train_tokenizer(["Ein Hund läuft.", "A dog runs."], vocab_size=300, min_frequency=1)
    return zoo.save(m, tmp_path / "m.safetensors")


def test_translate_takes_amp_and_device_as_zoo_predict_does(saved, monkeypatch, capsys):
    """Before: zoo translate had neither, so the fp32 the README recommends (a sentence translating the same
    however it is batched) could only be had through zoo predict --amp none."""
    seen = []
    translate = Seq2SeqModel.translate
    monkeypatch.setattr(Seq2SeqModel, "translate", lambda self, s, **k: seen.append(k) or translate(self, s, **k))
    assert main(["translate", "--weights", str(saved), "--amp", "none", "--device", "cpu", "Ein Hund."]) == 0
    assert main(["translate", "--weights", str(saved), "--max-len", "3", "Ein Hund."]) == 0
    assert [(k["amp"], k["device"]) for k in seen] == [(None, "cpu"), ("auto", None)]
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["translate", "--weights", str(saved), "--amp", "fp8", "x"])
    assert "invalid choice: 'fp8'" in capsys.readouterr().err


def test_a_weights_name_as_name_stays_a_flag_before_a_double_dash(capsys, monkeypatch):
    """Before: --model NAME --weights TAG were put last, after `--`, and read as two more sentences: `zoo translate
    seq2seq-transformer.multi30k-de-en -- "-Ja"` said --model was required."""
    from zoo.cli import main

    monkeypatch.setenv("ZOO_OFFLINE", "1")
    assert main(["translate", "seq2seq-transformer.multi30k-de-en", "--", "-Ja"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
