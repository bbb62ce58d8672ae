"""A TD3 run that is stopped loses nothing: Ctrl-C (a real SIGINT) ends it after the step in progress with a
checkpoint the resume continues exactly, and a run that dies has periodic checkpoints by default."""

from __future__ import annotations

import re
import signal

import gymnasium as gym
import pytest
import torch

import zoo
from zoo.rl import loop

TINY = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}
RUN = {"eval_every": 0, "progress": False}


class _SignalAt(gym.Wrapper):
    """Sends this process SIGINT ``times`` times from inside its ``at``-th step (what a user's Ctrl-C does
    mid-run), or raises ``crash`` there (an env that dies)."""

    def __init__(self, env, at: int | None = None, times: int = 1, crash: bool = False) -> None:
        super().__init__(env)
        self.at, self.times, self.crash, self.n = at, times, crash, 0

    def step(self, action):
        self.n += 1
        if self.n == self.at:
            if self.crash:
                raise RuntimeError("the env died")
            for _ in range(self.times):
                signal.raise_signal(signal.SIGINT)
        return self.env.step(action)


def _pendulum(**kw) -> gym.Env:
    return _SignalAt(gym.make("Pendulum-v1", max_episode_steps=40), **kw)


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Python's own Ctrl-C handler, as a user's process has it (a test runner's worker may not)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _params(agent) -> dict[str, torch.Tensor]:
    return agent.network_state_dict()


def test_ctrl_c_stops_after_the_step_with_a_checkpoint_that_resumes_exactly(tmp_path):
    steps = 150
    ref = zoo.build("td3", **TINY)
    zoo.train(ref, _pendulum(), total_steps=steps, **RUN)

    agent = zoo.build("td3", **TINY)
    with pytest.raises(KeyboardInterrupt, match=r"stopped by Ctrl-C at step 57 of 150; .*td3_last.pt continues it"):
        zoo.train(agent, _pendulum(at=57), total_steps=steps, checkpoint_dir=tmp_path, **RUN)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's handler is back
    assert agent.num_timesteps == 57  # the step in progress was finished, then the run stopped
    assert (tmp_path / "episodes.csv").is_file()  # the logs so far were written too

    resumed = zoo.build("td3", **TINY)
    result = zoo.train(resumed, _pendulum(), total_steps=steps, checkpoint_dir=tmp_path, resume=True, **RUN)
    assert result.resumed["checkpoint"] == tmp_path / loop.CHECKPOINT_NAME
    assert resumed.num_timesteps == steps
    mine, theirs = _params(resumed), _params(ref)
    assert all(torch.equal(v, theirs[k]) for k, v in mine.items())  # mid-episode, replayed bit for bit


def test_a_second_ctrl_c_stops_at_once_and_a_callers_own_handler_is_left_alone(tmp_path):
    agent = zoo.build("td3", **TINY)
    with pytest.raises(KeyboardInterrupt) as err:
        zoo.train(agent, _pendulum(at=57, times=2), total_steps=150, checkpoint_dir=tmp_path, checkpoint_every=0,
                  **RUN)
    assert str(err.value) == "" and agent.num_timesteps == 56  # inside step 57: no checkpoint taken
    assert not (tmp_path / loop.CHECKPOINT_NAME).exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    seen = []
    signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))  # the caller's: it decides
    agent = zoo.build("td3", **TINY)
    zoo.train(agent, _pendulum(at=57), total_steps=150, **RUN)
    assert seen == [signal.SIGINT] and agent.num_timesteps == 150


def test_a_run_that_dies_keeps_its_periodic_checkpoint_by_default(tmp_path, monkeypatch):
    """checkpoint_dir alone (no eval_every) wrote td3_last.pt only at the end: a crash lost the whole run."""
    monkeypatch.setattr(loop, "CHECKPOINT_EVERY", 50)
    agent = zoo.build("td3", **TINY)
    with pytest.raises(RuntimeError, match="the env died"):
        zoo.train(agent, _pendulum(at=131, crash=True), total_steps=200, checkpoint_dir=tmp_path, **RUN)
    saved = torch.load(tmp_path / loop.CHECKPOINT_NAME, weights_only=True)
    # episodes of 40 steps end at 40, 80, 120: checkpoints at the first end after 50 and after 100
    assert saved["counters"]["num_timesteps"] == 120
    resumed = zoo.build("td3", **TINY)
    zoo.train(resumed, _pendulum(), total_steps=200, checkpoint_dir=tmp_path, resume=True, **RUN)
    ref = zoo.build("td3", **TINY)
    zoo.train(ref, _pendulum(), total_steps=200, **RUN)
    mine, theirs = _params(resumed), _params(ref)
    assert resumed.num_timesteps == 200 and all(torch.equal(v, theirs[k]) for k, v in mine.items())


@pytest.mark.parametrize("episodes", [0, -2, 1.5, True])
def test_a_bad_eval_episodes_is_refused_before_any_step(tmp_path, episodes):
    """eval_episodes=0 failed at the first evaluation: after eval_every steps, or after the whole run."""
    with pytest.raises(ValueError, match=rf"eval_episodes must be a whole number of episodes >= 1, got {episodes!r}"):
        zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=50, checkpoint_dir=tmp_path,
                  eval_episodes=episodes, progress=False)
    assert not (tmp_path / loop.CHECKPOINT_NAME).exists()


@pytest.mark.parametrize("every", [-1, 2.5, True, "100"])
def test_a_bad_checkpoint_every_is_refused_before_any_step(tmp_path, every):
    with pytest.raises(ValueError, match=rf"checkpoint_every must be a whole number .*got {every!r}"):
        zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=50, checkpoint_dir=tmp_path,
                  checkpoint_every=every, **RUN)
    assert not (tmp_path / loop.CHECKPOINT_NAME).exists()


@pytest.mark.parametrize("stop, sigint", [(signal.SIGINT, "default_int_handler"),
                                          (signal.SIGTERM, "default_int_handler"), (signal.SIGTERM, "SIG_IGN")],
                         ids=["ctrl-c", "sigterm", "sigterm-in-a-background-job"])
def test_ctrl_c_in_zoo_train_says_where_the_run_continues(tmp_path, stop, sigint):
    """The command itself, interrupted as a user would (SIGINT to the process): exit 130 and the resume hint.
    SIGTERM (kill, a batch scheduler's time limit) ended it on the spot, nothing saved: it now stops so too,
    also in a job started with & from a script (SIGINT ignored), where it stopped at once and wrote nothing."""
    import subprocess
    import sys
    import time

    ck = tmp_path / "ck"
    # `zoo`, with Python's Ctrl-C handler even where the test runner's worker ignores SIGINT (inherited),
    # or with SIGINT ignored as a shell gives a background job
    zoo_command = (f"import signal, sys; signal.signal(signal.SIGINT, signal.{sigint}); "
                   "from zoo.cli import main; sys.exit(main())")
    line = [sys.executable, "-c", zoo_command, "train", "td3", "--env", "Pendulum-v1", "--steps", "1000000",
            "--model", "net_arch=[16,16]", "learning_starts=20", "batch_size=8", "--checkpoint-dir", str(ck),
            "--set", "eval_every=0", "checkpoint_every=50"]
    proc = subprocess.Popen(line, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (ck / loop.CHECKPOINT_NAME).exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the first periodic checkpoint (step 200, an episode's end): the loop is running
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    name = "Ctrl-C" if stop == signal.SIGINT else "SIGTERM"  # a SIGTERM was reported as a Ctrl-C
    assert f"interrupted: TD3 stopped by {name} at step" in err and "--resume" in err
    assert f"{name}: TD3 stops after this step" in err
    # the checkpoint holds the step it stopped at (the signal may land while step 200, the first periodic
    # checkpoint's, is still running: then that is the step)
    stopped = int(re.search(rf"stopped by {name} at step ([0-9,]+)", err).group(1).replace(",", ""))
    assert stopped >= 200
    assert torch.load(ck / loop.CHECKPOINT_NAME, weights_only=True)["counters"]["num_timesteps"] == stopped


@pytest.mark.parametrize("eval_env", ["MountainCarContinuous-v0", "NoSuchEnv-v9"])
def test_an_eval_env_that_does_not_fit_is_refused_before_any_step(tmp_path, eval_env):
    """It failed at the first evaluation, eval_every steps in, with nothing saved, and did not say that the
    env at fault was eval_env."""
    with pytest.raises(ValueError, match=rf"eval_env='{eval_env}': (MountainCarContinuous-v0 has obs_dim 2|cannot make)"):
        zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=50, eval_every=40, eval_env=eval_env,
                  checkpoint_dir=tmp_path, progress=False)
    assert not (tmp_path / loop.CHECKPOINT_NAME).exists()
    with pytest.raises(ValueError, match="eval_env=MountainCarContinuous-v0: MountainCarContinuous-v0 has obs_dim 2"):
        zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=50, eval_every=40,
                  eval_env=gym.make("MountainCarContinuous-v0"), progress=False)


def test_step_and_episode_counts_take_whole_floats_and_refuse_fractions():
    """total_steps=100.9 ran 100 steps without a word; evaluate(episodes=2.0) failed inside range()."""
    with pytest.raises(ValueError, match=r"total_steps must be a whole number of environment steps >= 1, got 30.9"):
        zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=30.9, **RUN)
    agent = zoo.build("td3", **TINY)
    zoo.train(agent, "Pendulum-v1", total_steps=3e1, **RUN)
    assert agent.num_timesteps == 30
    assert zoo.evaluate(agent, "Pendulum-v1", episodes=2.0, max_steps=5)["episodes"] == 2
    with pytest.raises(ValueError, match=r"episodes must be a whole number of episodes >= 1, got 1.5"):
        zoo.evaluate(agent, "Pendulum-v1", episodes=1.5)
    # max_steps 0 or -3 ran 1-step episodes and 2.5 ran 3, each reported as a normal evaluation; seed 1.5 was 1
    assert zoo.evaluate(agent, "Pendulum-v1", episodes=1, max_steps=3.0)["length_mean"] == 3
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match=rf"max_steps must be a whole number of steps >= 1, got {bad!r}"):
            zoo.evaluate(agent, "Pendulum-v1", episodes=1, max_steps=bad)
        with pytest.raises(ValueError, match=rf"max_steps must be a whole number of steps >= 1, got {bad!r}"):
            zoo.evaluate(agent, gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync"), episodes=2,
                         max_steps=bad)
    for bad in (1.5, -1, True):
        with pytest.raises(ValueError, match=rf"seed must be an int >= 0 or None .*got {bad!r}"):
            zoo.evaluate(agent, "Pendulum-v1", episodes=1, seed=bad)
