"""The seq2seq models as zoo's API meets them (zoo/seq2seq/models.py: build, weights, finetune)."""

from __future__ import annotations

import pytest

import zoo


def test_finetune_of_a_translator_points_to_training_it_from_its_weights():
    """Before: the TypeError's hint was zoo.vision.finetune.finetune, which cannot read sentence pairs."""
    pairs = [("Ein Hund läuft.", "A dog runs.")]
    with pytest.raises(TypeError, match=r"fine-tune the translator 'seq2seq-transformer', train it from its weights: "
                                        r"zoo.train\(zoo.build\('seq2seq-transformer', weights='multi30k-de-en'\), "
                                        r"data\)") as err:
        zoo.finetune("seq2seq-transformer", pairs, weights="multi30k-de-en", strategy="full")
    assert "zoo.vision" not in str(err.value)
    with pytest.raises(TypeError, match=r"zoo.train\(zoo.build\('seq2seq-gru', weights='PATH'\), 'corpus'\)"):
        zoo.finetune(zoo.build("seq2seq-gru", hidden=16, emb_dim=8), "corpus")
