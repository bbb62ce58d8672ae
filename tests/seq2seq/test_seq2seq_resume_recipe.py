"""A seq2seq run resumes only on the recipe it was trained with (direction, batching, tokenizer, corpus,
architecture), also from checkpoints that recorded none; and evaluation finds a user's own test files."""

from __future__ import annotations

import logging
import random
import shutil

import pytest
import torch

import zoo
from zoo.engine import ResumeError

ARCH = {"hidden": 32, "emb_dim": 16, "src_vocab": 300, "tgt_vocab": 300}
OPTIONS = {"direction": "de-en", "batch_size": 8, "amp": None, "seed": 0, "bleu_sentences": 4, "progress": False}


def _corpus(root, seed, words, splits=("train", "val")):
    root.mkdir(parents=True)
    rng = random.Random(seed)
    for split in splits:
        pairs = [[rng.choice(words) for _ in range(rng.randint(2, 5))] for _ in range(24 if split == "train" else 4)]
        (root / f"{split}.de").write_text("\n".join(" ".join(s) for s in pairs) + "\n")
        (root / f"{split}.en").write_text("\n".join(" ".join(w[::-1] for w in s) for s in pairs) + "\n")
    return root


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """One epoch of a tiny GRU on corpus ``a`` (checkpoints in ``run``), and a corpus ``b`` of other words."""
    base = tmp_path_factory.mktemp("s2s_resume")
    a = _corpus(base / "a", 0, ["hund", "katze", "haus", "baum", "mann"])
    _corpus(base / "b", 5, ["wasser", "feuer", "erde", "luft"])
    _train(a, base / "run", 1)
    return base


def _train(data, folder, epochs, arch=None, **options):
    torch.manual_seed(0)
    model = zoo.build("seq2seq-gru", **{**ARCH, **(arch or {})})
    return zoo.train(model, str(data), epochs=epochs, checkpoint_dir=folder, **{**OPTIONS, **options})


def _resume(data, folder, epochs=2, **options):
    return _train(data, folder, epochs, resume=True, **options)


def _copy(first_run, tmp_path):
    return shutil.copytree(first_run / "run", tmp_path / "run")


def test_the_checkpoint_records_the_real_batch_size_and_the_recipe(first_run, tmp_path):
    config = torch.load(first_run / "run" / "epoch-0001.pt", weights_only=True)["config"]
    assert config["batch_size"] == 8  # the corpus loader's sentences per batch, not fit's default 32
    assert config["data.direction"] == "de-en" and config["data.max_tokens"] is None
    assert config["data.tokenizer"].startswith("300 tokens, ") and config["model.dropout"] == 0.3
    resumed = _resume(first_run / "a", _copy(first_run, tmp_path), bleu_sentences=2)
    assert resumed.resumed["changed"] == {"epochs": (1, 2), "data.bleu_sentences": (4, 2)}  # evaluation: applied


@pytest.mark.parametrize(("change", "said"), [
    ({"batch_size": 4}, "batch_size: 8 in epoch-0001.pt, 4 now"),
    ({"max_tokens": 40}, "data.max_tokens: None in epoch-0001.pt, 40 now"),
    ({"arch": {"dropout": 0.0}}, "model.dropout: 0.3 in epoch-0001.pt, 0.0 now"),
    ({"direction": "en-de"}, "data.direction: 'de-en' in epoch-0001.pt, 'en-de' now"),
    ({"data": "b"}, "data.tokenizer: '300 tokens, "),
])
def test_a_changed_recipe_is_refused(first_run, tmp_path, change, said):
    change = dict(change)
    data = first_run / change.pop("data", "a")
    with pytest.raises(ResumeError) as err:
        _resume(data, _copy(first_run, tmp_path), **change)
    assert said in str(err.value)
    if data.name == "b":
        assert "data.corpus: '4 files, " in str(err.value)


def test_a_checkpoint_without_a_recipe_resumes_but_not_under_another_tokenizer(first_run, tmp_path):
    run = _copy(first_run, tmp_path)
    ckpt = torch.load(run / "epoch-0001.pt", weights_only=True)
    # as written before runs recorded their recipe: fit's default batch_size, no data.* / model.* keys
    ckpt["config"] = {k: v for k, v in ckpt["config"].items()
                      if not k.startswith(("data.", "model.")) and k not in ("batch_size_from", "recipe_may_change")}
    ckpt["config"]["batch_size"] = 32
    torch.save(ckpt, run / "epoch-0001.pt")
    with pytest.raises(ResumeError, match=r"data\.tokenizer: '300 tokens, \w+' in epoch-0001\.pt"):
        _resume(first_run / "b", run)  # its batches would be encoded by b's tokenizer, then a's restored
    assert _resume(first_run / "a", run).resumed["changed"] == {"epochs": (1, 2)}


def test_evaluation_falls_back_to_the_folders_own_test_files_and_says_so(first_run, tmp_path, caplog):
    model = zoo.build("seq2seq-gru", weights=None, **ARCH)
    model.load_state_dict(torch.load(first_run / "run" / "epoch-0001.pt", weights_only=True)["model"])
    own = _corpus(tmp_path / "own", 1, ["hund", "haus"], splits=("test",))
    with caplog.at_level(logging.INFO, logger="zoo"):
        scores = zoo.evaluate(model, str(own), direction="de-en", amp=None)
    assert 0.0 <= scores["accuracy"] <= 1.0
    assert "evaluating on test.de and its .en side" in caplog.text and "test_split=NAME" in caplog.text
    with pytest.raises(FileNotFoundError, match=r"test_split=NAME \(CLI: --set test_split=NAME\)"):
        zoo.evaluate(model, str(first_run / "a"), direction="de-en")  # train and val files only
    with pytest.raises(FileNotFoundError, match=r"'dev' file .* test_split=NAME \(CLI: --set test_split=NAME\)"):
        zoo.evaluate(model, str(own), direction="de-en", test_split="dev")


def test_a_missing_validation_split_names_val_split(first_run, tmp_path):
    only_train = _corpus(tmp_path / "c", 0, ["hund", "katze"], splits=("train",))
    with pytest.raises(FileNotFoundError, match=r"'val' file .* val_split=NAME \(CLI: --set val_split=NAME\)"):
        _train(only_train, None, 1)
