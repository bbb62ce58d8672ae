"""Ornstein-Uhlenbeck exploration noise, the resume policy (what may change on resume), the process-wide
torch settings a run leaves as it found them, and the RL family's code shape."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo
from zoo.engine import ResumeError
from zoo.rl.noise import OrnsteinUhlenbeckNoise

SMALL = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


def _lag1(x: np.ndarray) -> float:
    return float(np.corrcoef(x[:-1], x[1:])[0, 1])


# --- Ornstein-Uhlenbeck noise ----------------------------------------------------------------------


def test_ou_noise_is_sb3s_recursion_temporally_correlated_and_reset():
    g = torch.Generator().manual_seed(0)
    noise = OrnsteinUhlenbeckNoise(0.5, (3,))
    eps_g = torch.Generator().manual_seed(0)
    x = torch.zeros(3)
    for _ in range(5):  # x' = x + theta (0 - x) dt + sigma sqrt(dt) eps, theta 0.15, dt 0.01
        x = x + 0.15 * (0.0 - x) * 0.01 + 0.5 * math.sqrt(0.01) * torch.randn(3, generator=eps_g)
        assert torch.allclose(noise.sample(g), x, atol=1e-6)
    seq = np.array([OrnsteinUhlenbeckNoise.sample(noise, g)[0].item() for _ in range(2000)])
    white = torch.randn(2000, generator=g).numpy()
    assert _lag1(seq) > 0.9 and abs(_lag1(white)) < 0.1  # correlated in time, unlike Gaussian noise
    noise.reset()
    assert noise.x.eq(0).all()
    vec = OrnsteinUhlenbeckNoise(0.5, (2, 3))
    vec.sample(g)
    vec.reset([1])
    assert vec.x[1].eq(0).all() and vec.x[0].ne(0).all()  # only the env whose episode ended


def _explore(agent, n: int) -> np.ndarray:
    obs = np.zeros(agent.obs_dim, np.float32)
    return np.stack([(agent.act_normalised(obs, explore=True) - agent.act_normalised(obs)).numpy()
                     for _ in range(n)])


def test_mountain_car_explores_with_seeded_ou_noise():
    agent = zoo.build("td3", env="MountainCarContinuous-v0", net_arch=(16, 16), seed=1)
    assert (agent.config.noise_type, agent.config.exploration_noise) == ("ornstein-uhlenbeck", 0.5)
    assert zoo.build("td3", env="Pendulum-v1", net_arch=(16, 16)).config.noise_type == "normal"
    a = _explore(agent, 300)[:, 0]  # the noise added to the actor's action (no clipping this close to 0)
    assert _lag1(a) > 0.9
    again = _explore(zoo.build("td3", env="MountainCarContinuous-v0", net_arch=(16, 16), seed=1), 300)[:, 0]
    other = _explore(zoo.build("td3", env="MountainCarContinuous-v0", net_arch=(16, 16), seed=2), 300)[:, 0]
    np.testing.assert_array_equal(a, again)  # reproducible by the agent's seed
    assert not np.array_equal(a, other)
    agent.reset_noise()
    assert agent.action_noise.x.eq(0).all()


def test_ou_state_round_trips_a_checkpoint(counter_env):
    env = counter_env(horizon=50)
    agent = zoo.build("td3", env=env, noise_type="ornstein-uhlenbeck", exploration_noise=0.3, **SMALL)
    _explore(agent, 7)
    state = agent.checkpoint_state()
    assert torch.load(_saved(state), weights_only=True)["action_noise"].abs().sum() > 0
    other = zoo.build("td3", env=env, noise_type="ornstein-uhlenbeck", exploration_noise=0.3, **SMALL)
    other.load_checkpoint_state(torch.load(_saved(state), weights_only=True))
    np.testing.assert_array_equal(_explore(agent, 5), _explore(other, 5))


def _saved(state):
    import io

    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return buf


PENDULUM_OU = {"net_arch": (32, 32), "batch_size": 32, "learning_starts": 100, "buffer_size": 2000,
               "noise_type": "ornstein-uhlenbeck", "exploration_noise": 0.5}


@pytest.mark.slow
def test_exact_resume_with_ou_noise(tmp_path):
    full = zoo.build("td3", **PENDULUM_OU)
    zoo.train(full, total_steps=600, eval_every=200, eval_episodes=1, progress=False)
    first = zoo.build("td3", **PENDULUM_OU)
    zoo.train(first, total_steps=400, eval_every=200, eval_episodes=1, checkpoint_dir=tmp_path, progress=False)
    resumed = zoo.build("td3", **PENDULUM_OU)
    res = zoo.train(resumed, total_steps=600, eval_every=200, eval_episodes=1, checkpoint_dir=tmp_path,
                    resume=True, progress=False)
    assert res.resumed["changed"] == {"total_steps": (400, 600)}
    sd_full, sd_res = full.network_state_dict(), resumed.network_state_dict()
    assert all(torch.equal(sd_full[k], sd_res[k]) for k in sd_full)
    assert torch.equal(full.buffer.data, resumed.buffer.data)
    assert torch.equal(full.action_noise.x, resumed.action_noise.x)
    assert [h["eval_return_mean"] for h in full.history] == [h["eval_return_mean"] for h in resumed.history]
    assert [h["critic_loss"] for h in full.history] == [h["critic_loss"] for h in resumed.history]


# --- the resume policy ------------------------------------------------------------------------------


def _first_run(tmp_path, env, **overrides):
    agent = zoo.build("td3", env=env, **{**SMALL, **overrides})
    zoo.train(agent, env=env, total_steps=40, eval_every=0, checkpoint_dir=tmp_path, progress=False)
    return agent


def test_changed_lr_noise_and_steps_are_applied_on_resume(tmp_path, counter_env, caplog):
    env = counter_env(horizon=10)
    _first_run(tmp_path, env)
    agent = zoo.build("td3", env=env, **{**SMALL, "actor_lr": 3e-4, "critic_lr": 2e-4, "exploration_noise": 0.2})
    with caplog.at_level("INFO", logger="zoo.engine.resume"):
        res = zoo.train(agent, env=env, total_steps=60, eval_every=0, checkpoint_dir=tmp_path, resume=True,
                        progress=False)
    assert agent.num_timesteps == 60
    assert [g["lr"] for g in agent.actor_opt.param_groups] == [3e-4]
    assert [g["lr"] for g in agent.critic_opt.param_groups] == [2e-4]
    assert res.resumed["changed"] == {"actor_lr": (1e-3, 3e-4), "critic_lr": (1e-3, 2e-4),
                                      "exploration_noise": (0.1, 0.2), "total_steps": (40, 60)}
    assert "actor_lr 0.001 -> 0.0003 (applied)" in caplog.text
    # zoo.train's lr= option on resume is the same change
    again = zoo.build("td3", env=env, **{**SMALL, "exploration_noise": 0.2})
    zoo.train(again, env=env, total_steps=80, eval_every=0, checkpoint_dir=tmp_path, resume=True, lr=5e-4,
              progress=False)
    assert again.actor_opt.param_groups[0]["lr"] == again.critic_opt.param_groups[0]["lr"] == 5e-4


@pytest.mark.parametrize("change", [{"batch_size": 16}, {"gamma": 0.9}, {"noise_type": "ornstein-uhlenbeck"}])
def test_other_changes_are_refused_on_resume(tmp_path, counter_env, change):
    env = counter_env(horizon=10)
    _first_run(tmp_path, env)
    agent = zoo.build("td3", env=env, **{**SMALL, **change})
    (key, new), = change.items()
    old = getattr(zoo.build("td3", env=env, **SMALL).config, key)
    with pytest.raises(ResumeError) as err:
        zoo.train(agent, env=env, total_steps=60, eval_every=0, checkpoint_dir=tmp_path, resume=True,
                  progress=False)
    msg = str(err.value)
    assert f"{key}: {old!r} in " in msg and f"{new!r} now" in msg  # the key, the saved and the new value
    assert f"zoo.build('td3', env=None, {key}={old!r}, ...)" in msg  # how to fix the call
    assert agent.num_timesteps == 0 and len(agent.ensure_buffer()) == 0  # refused before anything loaded


def test_batch_size_given_to_train_on_resume_is_refused(tmp_path, counter_env):
    env = counter_env(horizon=10)
    _first_run(tmp_path, env)
    agent = zoo.build("td3", env=env, **SMALL)
    with pytest.raises(ResumeError, match=r"batch_size: 8 in .*, 32 now"):
        zoo.train(agent, env=env, total_steps=60, eval_every=0, checkpoint_dir=tmp_path, resume=True,
                  batch_size=32, progress=False)


def test_linear_lr_schedule_reaches_zero_at_the_end(counter_env):
    env = counter_env(horizon=10)
    agent = zoo.build("td3", env=env, lr_schedule="linear", **SMALL)
    zoo.train(agent, env=env, total_steps=40, eval_every=0, progress=False)
    assert agent.actor_opt.param_groups[0]["lr"] == 0.0  # SB3's lin_<lr>: 0 at the last update
    assert zoo.build("td3", env="Pendulum-v1", preset="rl-zoo", net_arch=(16, 16)).config.lr_schedule == "constant"


# --- the run leaves process-wide settings as it found them -------------------------------------------


def flush_denormal_enabled() -> bool:
    """Whether this thread flushes denormals to zero (torch has a setter but no getter: 1e-38 * 1e-3, a
    denormal 1e-41, comes out 0 only when flushing is on)."""
    return (torch.tensor([1e-38]) * torch.tensor([1e-3])).item() == 0.0


@pytest.mark.parametrize("flush", [False, True])
def test_train_leaves_threads_and_flush_denormal_as_found(counter_env, flush):
    env = counter_env(horizon=10)
    agent = zoo.build("td3", env=env, **SMALL)
    threads = torch.get_num_threads()
    torch.set_flush_denormal(flush)
    try:
        zoo.train(agent, env=env, total_steps=30, eval_every=0, progress=False, threads=1)
        assert flush_denormal_enabled() == flush and torch.get_num_threads() == threads
    finally:
        torch.set_flush_denormal(False)


def test_log_rows_hold_losses_and_speed(tmp_path, counter_env):
    import csv

    env = counter_env(horizon=10)
    agent = zoo.build("td3", env=env, **SMALL)
    res = zoo.train(agent, env=env, total_steps=40, eval_every=20, eval_episodes=1, eval_env=counter_env(horizon=10),
                    log_dir=tmp_path, progress=False)
    rows = list(csv.DictReader((tmp_path / "metrics.csv").open()))
    assert [int(r["step"]) for r in rows] == [h["step"] for h in res.history] == [20, 40]
    assert math.isnan(float(rows[0]["critic_loss"]))  # no update before learning_starts
    assert float(rows[1]["critic_loss"]) > 0 and float(rows[1]["steps_per_s"]) > 0
    assert not math.isnan(float(rows[1]["actor_loss"]))
    assert (tmp_path / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert res.best_epoch == 2 or res.best_epoch == 1


# --- the family's code shape -------------------------------------------------------------------------

ZOO = Path(zoo.__file__).parent
# the other model families (zoo.engine, zoo.hub, zoo.cli, zoo.exporting, zoo.fs, ... are shared, not families)
FAMILIES = sorted(f"zoo.{name}" for name in zoo.FAMILIES if name != "rl")


def _zoo_imports(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "zoo":
            out += [node.module] if node.module != "zoo" else [f"zoo.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == "zoo"]
    return out


def test_rl_functions_are_short_and_import_no_other_family():
    assert "zoo.vision" in FAMILIES
    long, foreign = [], []
    for path in sorted((ZOO / "rl").glob("*.py")):
        tree = ast.parse(path.read_text())
        long += [f"{path.name}:{node.name} {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80]
        foreign += [f"{path.name}: {m}" for m in _zoo_imports(tree)
                    if any(m == f or m.startswith(f + ".") for f in FAMILIES)]
    assert not long, long
    assert not foreign, foreign
