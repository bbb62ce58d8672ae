"""zoo.train / zoo.evaluate dispatch on what they are given."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import zoo


class _Agent:
    """A minimal object implementing the Trainable protocol."""

    def __init__(self):
        self.trained_with = None

    def zoo_train(self, data, **config):
        self.trained_with = (data, config)
        return "result"

    def zoo_evaluate(self, data, **config):
        return {"return": 1.5}


def test_trainable_protocol_dispatch():
    agent = _Agent()
    assert zoo.train(agent, "env-id", total_steps=3) == "result"
    assert agent.trained_with == ("env-id", {"total_steps": 3})
    assert zoo.evaluate(agent) == {"return": 1.5}


def test_estimator_dispatch():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    result = zoo.train(LogisticRegression(), (X, y))
    assert result.model is not None
    assert zoo.evaluate(result.model, (X, y))["accuracy"] > 0.9  # a classifier's score is its accuracy


def test_estimator_needs_xy_pair():
    with pytest.raises(TypeError, match=r"data=\(X, y\)"):
        zoo.train(LogisticRegression(), "not a pair")


def test_unknown_object_is_a_clear_error():
    with pytest.raises(TypeError, match="does not know how to train a int"):
        zoo.train(3, None)


def test_model_config_only_with_a_name():
    with pytest.raises(TypeError, match="model_config"):
        zoo.train(_Agent(), None, model_config={"a": 1})
