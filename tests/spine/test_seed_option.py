"""seed= means one thing in every family: zoo.train / finetune / evaluate check it once, as the plain int all
their loops take (None: no seed given)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import zoo
from zoo.hyperspectral.synthetic import make_scene


@pytest.fixture(scope="module")
def scene():
    return make_scene(16, 16, 12, 3, seed=0)


def _agent():
    return zoo.build("td3", net_arch=(8, 8), learning_starts=10, batch_size=4, buffer_size=100)


def test_a_seed_that_is_no_seed_is_refused_alike_in_every_family(scene):
    """None failed in seq2seq with int()'s TypeError and passed in td3; 2.7 and True became 2 and 1 in td3; -1
    was gymnasium's or scikit-learn's bare error; 2**40 was refused by hsi-pca-svm alone."""
    calls = {
        "td3": lambda seed: zoo.train(_agent(), "Pendulum-v1", total_steps=12, eval_every=0, progress=False, seed=seed),
        "hsi-pca-svm": lambda seed: zoo.train(zoo.build("hsi-pca-svm", n_components=3), scene, split="random",
                                              seed=seed),
        "a network": lambda seed: zoo.train(torch.nn.Linear(2, 2), (torch.zeros(4, 2), torch.zeros(4).long()),
                                            epochs=1, progress=False, seed=seed),
    }
    for train in calls.values():
        for bad, error in ((2.7, TypeError), (True, TypeError), ("a", TypeError), (-1, ValueError),
                           (2**32, ValueError), (2**40, ValueError)):
            with pytest.raises(error, match=rf"^seed must be an int >= 0 or None \(at most 2\*\*32 - 1 = 4294967295\), "
                                            rf"got {bad!r}$"):
                train(bad)
    with pytest.raises(ValueError, match=r"^seed must be an int >= 0 or None .*got -1$"):
        zoo.evaluate(_agent(), "Pendulum-v1", episodes=1, seed=-1)


def test_none_is_no_seed_and_numpy_integers_are_seeds(scene):
    first = zoo.train(zoo.build("hsi-pca-svm", n_components=3), scene, split="random", seed=None).model
    assert first.split_["seed"] == 0  # the default seed, as no seed= gives
    largest = zoo.train(zoo.build("hsi-pca-svm", n_components=3), scene, split="random", seed=np.uint32(2**32 - 1))
    assert largest.model.split_["seed"] == 2**32 - 1 and type(largest.model.split_["seed"]) is int
    pairs = [("ein hund", "a dog"), ("eine katze", "a cat")] * 2
    net = zoo.build("seq2seq-gru", hidden=8, emb_dim=8, src_vocab=300, tgt_vocab=300)
    zoo.train(net, pairs, epochs=1, batch_size=2, progress=False, seed=None)  # was int(None)'s TypeError
    agent = _agent()
    zoo.train(agent, "Pendulum-v1", total_steps=12, eval_every=0, progress=False, seed=None)
    assert zoo.evaluate(agent, "Pendulum-v1", episodes=1, seed=None) == zoo.evaluate(agent, "Pendulum-v1", episodes=1)
