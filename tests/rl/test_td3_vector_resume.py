"""A vector env's run checkpointed where no sub-env has an episode in progress (every episode ended at the
checkpoint's step, or, NEXT_STEP, every sub-env's autoreset was that step) resumes bit for bit: each sub-env
restarts from its random state before that reset. Before, the resume reset every sub-env from a seed of its
own and, NEXT_STEP, skipped the autoreset step the uninterrupted run takes (its episodes ended 2 transitions
earlier): another run, without a word. A checkpoint that cannot be continued so says it."""

from __future__ import annotations

import signal
import warnings

import gymnasium as gym
import pytest
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import zoo

TINY = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}
RUN = {"eval_every": 0, "progress": False}


def _pendulum() -> gym.Env:
    return gym.make("Pendulum-v1", max_episode_steps=40)


def _vec(kind=SyncVectorEnv, mode=AutoresetMode.NEXT_STEP):
    return lambda: kind([_pendulum] * 2, autoreset_mode=mode)


class _CtrlCAt(gym.vector.VectorWrapper):
    """Sends this process SIGINT from inside its ``at``-th step (never with ``at=0``), as a user's Ctrl-C."""

    def __init__(self, env, at: int = 0) -> None:
        super().__init__(env)
        self.at, self.n = at, 0

    def step(self, actions):
        self.n += 1
        if self.n == self.at:
            signal.raise_signal(signal.SIGINT)
        return self.env.step(actions)


def _differences(agent, ref) -> list[str]:
    """What differs between two agents' runs: every transition in order, the networks, the episodes logged."""
    out = [] if len(agent.buffer) == len(ref.buffer) else ["buffer length"]
    n = min(len(agent.buffer), len(ref.buffer))
    out += [] if torch.equal(agent.buffer.data[:n], ref.buffer.data[:n]) else ["transitions"]
    theirs = ref.network_state_dict()
    out += [k for k, v in agent.network_state_dict().items() if not torch.equal(v, theirs[k])][:1]
    return out + ([] if agent.episode_log == ref.episode_log else ["episodes"])


def _resumed(make, stop: int, total: int, tmp_path, **train) -> list[str]:
    ref = zoo.build("td3", **TINY)
    zoo.train(ref, make(), total_steps=total, **train, **RUN)
    zoo.train(zoo.build("td3", **TINY), make(), total_steps=stop, checkpoint_dir=tmp_path, **train, **RUN)
    agent = zoo.build("td3", **TINY)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*does not replay the uninterrupted one exactly")
        zoo.train(agent, make(), total_steps=total, checkpoint_dir=tmp_path, resume=True, **train, **RUN)
    assert agent.num_timesteps == total
    return _differences(agent, ref)


@pytest.mark.parametrize(("make", "stop"), [
    (_vec(), 80),  # both episodes end at step 40: the env resets them at its next step
    (_vec(), 82),  # that reset step was the last before the checkpoint
    (_vec(AsyncVectorEnv), 80),
    (_vec(mode=AutoresetMode.SAME_STEP), 80),  # reset inside the step that ended them
], ids=["NEXT_STEP, episode end", "NEXT_STEP, reset step", "AsyncVectorEnv, episode end", "SAME_STEP, episode end"])
def test_a_vector_env_checkpointed_between_episodes_resumes_exactly(tmp_path, make, stop):
    assert _resumed(make, stop, 160, tmp_path) == []  # were: transitions, networks and episodes


def test_zoos_own_vector_env_resumes_exactly_at_an_episode_end(tmp_path):
    """An env id with num_envs=2 (zoo makes it SAME_STEP): Pendulum's 200-step episodes end at transition 400."""
    assert _resumed(lambda: "Pendulum-v1", 400, 440, tmp_path, num_envs=2) == []


def test_ctrl_c_at_a_vector_envs_episode_end_resumes_exactly(tmp_path):
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's, as a user's process has it
    try:
        ref = zoo.build("td3", **TINY)
        zoo.train(ref, _CtrlCAt(_vec()()), total_steps=160, **RUN)
        with pytest.raises(KeyboardInterrupt, match="at step 80 of 160"):  # the step that ended both episodes
            zoo.train(zoo.build("td3", **TINY), _CtrlCAt(_vec()(), at=40), total_steps=160, checkpoint_dir=tmp_path,
                      **RUN)
    finally:
        signal.signal(signal.SIGINT, previous)
    agent = zoo.build("td3", **TINY)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*does not replay the uninterrupted one exactly")
        zoo.train(agent, _CtrlCAt(_vec()()), total_steps=160, checkpoint_dir=tmp_path, resume=True, **RUN)
    assert _differences(agent, ref) == []


def test_a_vector_checkpoint_between_episodes_that_cannot_resume_exactly_says_so(tmp_path):
    """A vector NormalizeReward's reset clears the discounted return it carries over a truncation, which the
    checkpoint does not hold: that resume restarts the episodes as before, but no longer silently."""
    def make():
        return gym.wrappers.vector.NormalizeReward(_vec()())

    zoo.train(zoo.build("td3", **TINY), make(), total_steps=80, checkpoint_dir=tmp_path, **RUN)
    with pytest.warns(UserWarning, match="holds no random state .* does not replay the uninterrupted one exactly"):
        zoo.train(zoo.build("td3", **TINY), make(), total_steps=100, checkpoint_dir=tmp_path, resume=True, **RUN)
