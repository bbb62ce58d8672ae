"""A path written ``~/...`` in Python (where no shell expands it) means the home folder in every family's
train, evaluate and predict, as in torchvision's data sets and ``zoo.build(weights=)``; a sentence that
starts with ``~`` is still a sentence."""

from __future__ import annotations

import numpy as np
import pytest

import zoo


@pytest.fixture
def home(tiny, monkeypatch):
    monkeypatch.setenv("HOME", str(tiny.root))  # os.path.expanduser reads HOME
    return tiny


def test_an_image_folder_and_image_files_under_home(home):
    folder = home.image_folder()
    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    assert zoo.evaluate(model, "~/images") == zoo.evaluate(model, folder)
    rows = zoo.predict(model, "~/images/val/dog")
    assert [r["input"] for r in rows] == [str(p) for p in sorted((folder / "val" / "dog").iterdir())]
    from pathlib import Path

    assert zoo.predict(model, [Path("~/images/val/dog/0.png")])[0]["input"] == str(folder / "val/dog/0.png")
    r = zoo.train(model, "~/images", epochs=1, batch_size=4, amp=None, progress=False)
    assert r.history[-1]["step"] == 2  # 8 training images


@pytest.mark.filterwarnings("ignore:1 translation:UserWarning")  # one epoch on 16 pairs: it rambles
def test_a_corpus_under_home_and_a_sentence_starting_with_a_tilde(home):
    home.corpus()
    model = zoo.build("seq2seq-gru", src_vocab=300, tgt_vocab=300, max_len=32, emb_dim=16, hidden=32)
    zoo.train(model, "~/corpus", direction="de-en", epochs=1, progress=False)
    assert set(zoo.evaluate(model, "~/corpus", bleu_sentences=2)) >= {"loss", "accuracy", "bleu"}
    assert isinstance(zoo.predict(model, "~/corpus ist ein Wort")[0], str)  # no such file: translated as text


def test_a_scene_file_under_home(home):
    path = home.scene_file()
    rel = "~/" + path.name
    r = zoo.train("hsi-pca-svm", rel, model_config={"n_components": 5}, split="random")
    assert np.array_equal(zoo.predict(r.model, rel), zoo.predict(r.model, path))


def test_a_video_folder_under_home(home):
    folder = home.video_folder()
    model = zoo.build("video-tsn", num_classes=2)  # ImageNet's stem: the CIFAR one took 16x the work (20 s)
    rows = zoo.predict(model, "~/videos")
    assert [r["input"] for r in rows] == [str(p) for p in sorted(folder.rglob("*.avi"))]
