"""The joint tokenizer a corpus run trains must fit both embeddings; a weights file's shape settings win
over the caller's only when the caller did not ask for others (then it is an error, never a silent drop)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import zoo
from zoo.seq2seq.tokenizer import train_tokenizer

# six parallel sentences shared by the seq2seq tests (tests/seq2seq/data/six.de, six.en)
DE = (Path(__file__).parent / "data" / "six.de").read_text(encoding="utf-8").splitlines()
EN = (Path(__file__).parent / "data" / "six.en").read_text(encoding="utf-8").splitlines()
TINY_G = {"emb_dim": 16, "hidden": 32, "src_vocab": 300, "tgt_vocab": 300, "dropout": 0.0}
TINY_T = {"d_model": 32, "n_heads": 4, "n_layers": 1, "d_ff": 64, "src_vocab": 300, "tgt_vocab": 300,
          "dropout": 0.0}


@pytest.fixture
def corpus(tmp_path):
    """A corpus whose byte-level BPE reaches ~480 tokens, more than the 300-row embedding below."""
    root = tmp_path / "corpus"
    root.mkdir()
    for split in ("train", "val", "test_2016_flickr"):
        (root / f"{split}.de").write_text("\n".join(DE * 2) + "\n", encoding="utf-8")
        (root / f"{split}.en").write_text("\n".join(EN * 2) + "\n", encoding="utf-8")
    return root


def _train(model, corpus, **kw):
    return zoo.train(model, corpus, direction="de-en", epochs=1, bleu_sentences=2, progress=False, **kw)


# --- the tokenizer trained for a corpus run -------------------------------------------------------------


@pytest.mark.parametrize(("name", "config"), [
    ("seq2seq-gru", {**TINY_G, "tgt_vocab": 400}),
    ("seq2seq-gru", {**TINY_G, "src_vocab": 400}),
    ("seq2seq-transformer", {**TINY_T, "tgt_vocab": 400, "share_embeddings": False}),
])
def test_different_vocab_sizes_train_a_tokenizer_that_fits_both_embeddings(name, config, corpus):
    model = zoo.build(name, **config)
    _train(model, corpus)  # a 400-token tokenizer indexed past the 300-row embedding (IndexError)
    assert model.tokenizer.vocab_size == 300
    assert len(model.translate(DE[:2], max_len=4)) == 2


def test_a_vocab_size_larger_than_an_embedding_is_a_clear_error(corpus):
    model = zoo.build("seq2seq-gru", **TINY_G)
    with pytest.raises(ValueError, match=r"vocab_size=600 does not fit seq2seq-gru \(src_vocab=300, tgt_vocab=300\)"
                                         r".*vocab_size<=300"):
        _train(model, corpus, vocab_size=600)
    assert model.tokenizer is None  # refused before any tokenizer was trained
    model = zoo.build("seq2seq-gru", **{**TINY_G, "tgt_vocab": 500})
    with pytest.raises(ValueError, match="src_vocab=300, tgt_vocab=500.*at most 300"):
        _train(model, corpus, vocab_size=400)


def test_an_explicit_vocab_size_that_fits_is_used(corpus):
    model = zoo.build("seq2seq-gru", **{**TINY_G, "tgt_vocab": 400})
    _train(model, corpus, vocab_size=280)
    assert model.tokenizer.vocab_size == 280


def test_an_attached_tokenizer_too_large_for_an_embedding_is_a_clear_error(corpus):
    model = zoo.build("seq2seq-gru", **{**TINY_G, "tgt_vocab": 500})
    model.tokenizer = train_tokenizer((DE + EN) * 2, vocab_size=450, min_frequency=1)
    with pytest.raises(ValueError, match=r"tokenizer has 450 tokens.*src_vocab=300, tgt_vocab=500.*source embedding"):
        _train(model, corpus)


def test_cli_train_with_different_vocab_sizes(corpus, tmp_path, capsys):
    from zoo.cli import main

    out = tmp_path / "gru.safetensors"
    assert main(["train", "seq2seq-gru", "--data", str(corpus), "--epochs", "1", "--src-vocab", "300",
                 "--tgt-vocab", "500", "--hidden", "32", "--emb-dim", "16",
                 "--set", "direction=de-en", "bleu_sentences=2", "progress=false", "--out", str(out)]) == 0
    assert zoo.build("seq2seq-gru", weights=str(out)).tokenizer.vocab_size == 300
    assert main(["train", "seq2seq-gru", "--data", str(corpus), "--epochs", "1", "--src-vocab", "300",
                 "--tgt-vocab", "500", "--hidden", "32", "--emb-dim", "16",
                 "--set", "direction=de-en", "vocab_size=600", "progress=false"]) != 0
    assert "vocab_size=600 does not fit" in capsys.readouterr().err


# --- shape settings given with weights= ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(DE + EN, vocab_size=300, min_frequency=1)


def _saved(name, tok, path, how):
    torch.manual_seed(0)
    m = zoo.build(name, **(TINY_T if name == "seq2seq-transformer" else TINY_G))
    m.tokenizer = tok
    if how == "zoo.save":  # records the config in the file's metadata too
        return m, zoo.save(m, path)
    from zoo import hub

    hub.save_weights(m, path)  # the config only inside the state dict's extra state
    return m, path


@pytest.mark.parametrize("how", ["zoo.save", "hub.save_weights"])
@pytest.mark.parametrize(("name", "setting", "file_value", "asked"), [
    ("seq2seq-gru", "hidden", 32, 64),
    ("seq2seq-gru", "attention", "bahdanau", "luong-dot"),
    ("seq2seq-transformer", "n_layers", 1, 2),
    ("seq2seq-transformer", "n_heads", 4, 2),  # no shape changes, but the weights mean something else
])
def test_a_shape_setting_that_differs_from_the_file_is_an_error(name, setting, file_value, asked, how, tok,
                                                               tmp_path):
    _, path = _saved(name, tok, tmp_path / "m.safetensors", how)
    with pytest.raises(ValueError, match=rf"{setting}={file_value!r}, but {setting}={asked!r} was asked for"):
        zoo.build(name, weights=str(path), **{setting: asked})


@pytest.mark.parametrize("how", ["zoo.save", "hub.save_weights"])
def test_shape_free_and_matching_settings_still_apply(how, tok, tmp_path):
    m, path = _saved("seq2seq-gru", tok, tmp_path / "m.safetensors", how)
    loaded = zoo.build("seq2seq-gru", weights=str(path), hidden=32, dropout=0.25, max_len=64, direction="en-de")
    assert (loaded.config.hidden, loaded.config.dropout, loaded.config.max_len) == (32, 0.25, 64)
    assert loaded.config.direction == "en-de"
    assert zoo.build("seq2seq-gru", weights=str(path)).config.hidden == 32  # the file's own shape
    assert loaded.translate(DE[:3], max_len=6) == m.eval().translate(DE[:3], max_len=6)


@pytest.mark.parametrize("how", ["hub.save_weights", "torch.save"])
def test_shape_free_settings_left_out_are_the_files_own(how, tok, tmp_path):
    """Before: a file without zoo.save's metadata reloaded with the builder's max_len 256, dropout 0.3 and no
    direction, not the max_len 64, dropout 0.25 and en-de recorded in its own state dict."""
    from zoo import hub

    m = zoo.build("seq2seq-gru", **{**TINY_G, "dropout": 0.25, "max_len": 64, "direction": "en-de"})
    m.tokenizer = tok
    path = tmp_path / ("m.safetensors" if how == "hub.save_weights" else "m.pt")
    if how == "hub.save_weights":
        hub.save_weights(m, path)
    else:
        torch.save(m.state_dict(), path)
    loaded = zoo.build("seq2seq-gru", weights=str(path))
    assert (loaded.config.max_len, loaded.config.dropout, loaded.config.direction) == (64, 0.25, "en-de")
    asked = zoo.build("seq2seq-gru", weights=str(path), dropout=0.0, max_len=32)  # the caller's still win
    assert (asked.config.max_len, asked.config.dropout, asked.config.direction) == (32, 0.0, "en-de")


def test_a_shape_setting_that_differs_from_a_tagged_file_is_an_error(tok, tmp_path, monkeypatch):
    from zoo import hub

    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(tmp_path / "weights"))
    torch.manual_seed(0)
    m = zoo.build("seq2seq-transformer", **TINY_T)
    m.tokenizer = tok
    hub.add_weights(m, name="seq2seq-transformer.tiny-de-en", config=TINY_T,
                    meta={"dataset": "tiny", "metrics": {"bleu": 0.0}})
    with pytest.raises(ValueError, match=r"seq2seq-transformer.tiny-de-en holds .* n_layers=1, but n_layers=2"):
        zoo.build("seq2seq-transformer", weights="tiny-de-en", n_layers=2)  # was load_state_dict's RuntimeError
    assert zoo.build("seq2seq-transformer", weights="tiny-de-en", dropout=0.2).config.dropout == 0.2


def test_a_direction_other_than_the_weights_own_is_refused():
    """direction= beside published weights relabelled them: evaluate scored en-de references against de-en output
    (BLEU 0.006) without the wrong-direction warning, which compares against the label."""
    with pytest.raises(ValueError, match=r"multi30k-de-en translates de-en, but direction='en-de' was asked for"):
        zoo.build("seq2seq-transformer", weights="multi30k-de-en", direction="en-de")
    assert zoo.build("seq2seq-transformer", weights="multi30k-de-en", direction="de-en").config.direction == "de-en"
