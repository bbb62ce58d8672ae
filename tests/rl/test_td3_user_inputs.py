"""What a user hands a TD3 agent that it cannot use is refused, saying what was expected and what came: a seed
out of zoo's range when the agent is built, and observations that are no batch of numbers in zoo.predict."""

from __future__ import annotations

import numpy as np
import pytest

import zoo

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64])
def test_a_seed_out_of_range_is_refused_when_the_agent_is_built(seed):
    """Before: -1 built an agent whose first zoo.train failed at the env's reset with gymnasium's "Seed must be
    greater or equal to zero"; 2**64 was torch's "Overflow when unpacking long long"; 2**32 was taken, where
    zoo.train(agent, seed=2**32) is refused."""
    with pytest.raises(ValueError, match=rf"seed must be an int >= 0 \(at most 2\*\*32 - 1 = 4294967295\), got {seed}"):
        zoo.build("td3", seed=seed, **TINY)
    assert zoo.build("td3", seed=2**32 - 1, **TINY).seed == 2**32 - 1


@pytest.mark.parametrize(("inputs", "error", "message"), [
    ({"obs": [1.0, 0.0, 0.0]}, TypeError, r"got a dict with keys \['obs'\]: .*FlattenObservation"),
    ([{"obs": 1.0}], TypeError, r"got a dict with keys \['obs'\]"),
    ([[1.0, 0.0, 0.0], [1.0, 0.0]], ValueError, r"shape \(N, 3\); got rows of unequal lengths or depths: \[\[1\.0"),
    (np.array([1j, 0.0, 0.0]), TypeError, r"3 real numbers, got complex values \(complex128\)"),
    ([object()], TypeError, r"an observation is 3 numbers .*, got a object: <object object"),
])
def test_zoo_predict_says_what_an_observation_is(inputs, error, message):
    """Before: numpy's "float() argument must be a string or a real number, not 'dict'", its "setting an array
    element with a sequence. The requested array has an inhomogeneous shape", and complex observations acted on
    with their imaginary parts dropped."""
    agent = zoo.build("td3", **TINY)
    with pytest.raises(error, match=message):
        zoo.predict(agent, inputs)
    with pytest.raises(error, match=message):
        agent.predict(inputs)
    np.testing.assert_array_equal(zoo.predict(agent, [[1, 0, 0], [0, 1, 0]]), agent.act(np.eye(3)[:2]))
