"""TD3: the maths of the update, the buffer, the loop's bootstrapping, resume and determinism, bad input."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import zoo
from zoo.rl.buffer import Batch, ReplayBuffer

SMALL = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}


def _params(module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def _fill(agent, n: int = 64, seed: int = 0) -> None:
    g = np.random.default_rng(seed)
    agent.ensure_buffer().add(g.standard_normal((n, agent.obs_dim)), g.uniform(-1, 1, (n, agent.act_dim)),
                              g.standard_normal(n), g.standard_normal((n, agent.obs_dim)), g.random(n) < 0.1)


# --- actions ----------------------------------------------------------------------------------------


def test_action_rescaling_asymmetric_bounds(counter_env):
    low, high = (-1.0, 0.0, 2.0), (3.0, 10.0, 2.5)
    agent = zoo.build("td3", env=counter_env(low=low, high=high), **SMALL)
    a = torch.tensor([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.5, -0.5, 0.0]])
    out = agent.scale_action(a)
    expected = torch.tensor([list(low), list(high), [1.0, 5.0, 2.25], [2.0, 2.5, 2.25]])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(agent.unscale_action(out), a)
    obs = np.random.default_rng(0).standard_normal((50, 2)) * 100  # saturates the tanh both ways
    for explore in (False, True):
        acts = agent.act(obs, explore=explore)
        assert acts.shape == (50, 3)
        assert (acts >= np.array(low) - 1e-6).all() and (acts <= np.array(high) + 1e-6).all()
    assert agent.act(obs[0]).shape == (3,)



class _StrictBox(gym.Env):
    """Pendulum-sized, and refuses an action outside its Box (as envs that assert action_space.contains do)."""

    def __init__(self, low: float, high: float):
        self.observation_space = spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = spaces.Box(np.float32(low), np.float32(high), (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.float32)), f"out of bounds {action}"
        return np.zeros(3, np.float32), 0.0, False, False, {}


def test_actions_at_the_bounds_stay_inside_them_where_float32_rounds_past():
    """center + 1 * half gave 6.694216 for a high of 6.6942153 (float32): an env that checks its action
    space failed after a few steps of exploration clamped to +-1."""
    env = _StrictBox(2.39814, 6.6942153)
    agent = zoo.build("td3", env=env, **{**SMALL, "exploration_noise": 1.0})
    ends = agent.scale_action(torch.tensor([[-1.0], [1.0]]))
    assert ends[0, 0] >= env.action_space.low[0] and ends[1, 0] <= env.action_space.high[0]
    assert (ends[1] == torch.from_numpy(env.action_space.high)).all()
    zoo.train(agent, env, total_steps=60, eval_every=0, progress=False)  # AssertionError: out of bounds


def test_a_nan_or_infinite_hyperparameter_is_refused_at_build():
    """NaN passed every check (NaN <= 0 is False): training then blamed the env for non-finite observations,
    and exploration_noise=nan meant no noise."""
    for key, value in (("actor_lr", math.nan), ("critic_lr", math.inf), ("target_policy_noise", math.nan),
                       ("target_noise_clip", math.nan), ("exploration_noise", math.nan)):
        with pytest.raises(ValueError, match=rf"invalid TD3 config: {key} must be a finite number >?=? 0, "
                                             rf"got {value!r}"):
            zoo.build("td3", **{key: value})


# --- the update's maths -----------------------------------------------------------------------------


def test_clipped_double_q_target_by_hand(counter_env):
    agent = zoo.build("td3", env=counter_env(), net_arch=(1,), gamma=0.9, target_noise_clip=0.5, amp=None)
    with torch.no_grad():
        # target actor: constant tanh(atanh(0.8)) = 0.8
        for p in agent.actor_target.parameters():
            p.zero_()
        agent.actor_target.out.bias.fill_(math.atanh(0.8))
        # target critics: h = relu(0.5 a + 1); Q1 = h, Q2 = -h + 2.9  (input = [obs(2), act(1)])
        c = agent.critic_target
        c.weight0.zero_()
        c.weight0[:, 2, 0] = 0.5
        c.bias0.fill_(1.0)
        c.weight1.copy_(torch.tensor([1.0, -1.0]).view(2, 1, 1))
        c.bias1.copy_(torch.tensor([0.0, 2.9]).view(2, 1, 1))
    agent.refresh_compute_copies()  # the weights were edited in place
    batch = Batch(obs=torch.zeros(3, 2), act=torch.zeros(3, 1), reward=torch.tensor([1.0, 2.0, -1.0]),
                  next_obs=torch.randn(3, 2), not_done=torch.tensor([1.0, 0.0, 1.0]))
    noise = torch.tensor([[0.9], [-0.1], [0.0]])  # clipped to 0.5 -> a' = clip(1.3) = 1, 0.7, 0.8
    # a'=1: Q1 1.5, Q2 1.4 -> 1.4;  a'=0.7: terminal;  a'=0.8: Q1 1.4, Q2 1.5 -> 1.4
    expected = torch.tensor([1 + 0.9 * 1.4, 2.0, -1 + 0.9 * 1.4])
    torch.testing.assert_close(agent.critic_target_value(batch, noise), expected)
    # negative noise: no clipping of the action; the minimum now comes from the first critic
    noise2 = torch.tensor([[-0.9], [0.0], [-0.3]])  # -> a' = 0.3, 0.8, 0.5: Q1 1.15 / 1.25, Q2 1.75 / 1.65
    torch.testing.assert_close(agent.critic_target_value(batch, noise2), torch.tensor([1 + 0.9 * 1.15, 2.0, -1 + 0.9 * 1.25]))


def test_update_counts_with_policy_delay(counter_env):
    agent = zoo.build("td3", env=counter_env(), policy_delay=3, **SMALL)
    _fill(agent)
    actor0, critic0, target0 = _params(agent.actor), _params(agent.critic), _params(agent.critic_target)
    agent.update(2)
    assert (agent.num_updates, agent.num_actor_updates) == (2, 0)
    assert _same(_params(agent.actor), actor0) and _same(_params(agent.critic_target), target0)
    assert not _same(_params(agent.critic), critic0)
    agent.update(1)  # the third critic update also updates the actor and the targets
    assert (agent.num_updates, agent.num_actor_updates) == (3, 1)
    assert not _same(_params(agent.actor), actor0) and not _same(_params(agent.critic_target), target0)
    agent.update(7)
    assert (agent.num_updates, agent.num_actor_updates) == (10, 3)
    assert agent.actor_opt.state[agent.actor.out.weight]["step"].item() == 3
    assert agent.critic_opt.state[agent.critic.weight0]["step"].item() == 10


def test_soft_update_tau_one_copies_tau_zero_keeps(counter_env):
    agent = zoo.build("td3", env=counter_env(), **SMALL)
    with torch.no_grad():
        for p in list(agent.actor.parameters()) + list(agent.critic.parameters()):
            p.add_(1.0)
    before = _params(agent.actor_target) + _params(agent.critic_target)
    agent.soft_update(0.0)
    assert _same(_params(agent.actor_target) + _params(agent.critic_target), before)
    agent.soft_update(0.25)
    for t, t0, o in zip(_params(agent.actor_target), before, _params(agent.actor)):
        torch.testing.assert_close(t, 0.75 * t0 + 0.25 * o)
    agent.soft_update(1.0)
    assert _same(_params(agent.actor_target), _params(agent.actor))
    assert _same(_params(agent.critic_target), _params(agent.critic))


# --- replay buffer ----------------------------------------------------------------------------------


def test_buffer_wraparound_and_sampling(tmp_path):
    buf = ReplayBuffer(5, obs_dim=2, act_dim=1)
    for i in range(3):
        buf.add_one(np.array([i, i]), np.array([0.1 * i]), float(i), np.array([i + 1, i + 1]), i == 1)
    assert (len(buf), buf.pos) == (3, 3)
    # a batch of 4 crosses the end: rows 3, 4, then 0, 1 are overwritten
    ids = np.arange(3, 7)
    buf.add(np.stack([ids, ids], 1), 0.1 * ids[:, None], ids.astype(float), np.stack([ids + 1] * 2, 1),
            np.array([False, False, True, False]))
    assert (len(buf), buf.pos) == (5, 2)
    assert buf.obs[:, 0].tolist() == [5, 6, 2, 3, 4]
    assert buf.reward.tolist() == [5, 6, 2, 3, 4]
    assert buf.not_done.tolist() == [0, 1, 1, 1, 1]  # transition 5 terminated
    torch.testing.assert_close(buf.next_obs[:, 0], buf.obs[:, 0] + 1)
    torch.testing.assert_close(buf.act[:, 0], 0.1 * buf.obs[:, 0])

    g = torch.Generator().manual_seed(0)
    batch = buf.sample(5000, g)
    assert batch.obs.shape == (5000, 2) and batch.act.shape == (5000, 1) and batch.reward.shape == (5000,)
    counts = torch.bincount(batch.obs[:, 0].long(), minlength=7)[2:]
    assert counts.sum() == 5000 and counts.min() > 850  # uniform over the 5 stored rows (expected 1000)
    torch.testing.assert_close(batch.reward, batch.obs[:, 0])  # rows stay intact

    buf.save(tmp_path / "buf.pt")
    other = ReplayBuffer(5, obs_dim=2, act_dim=1)
    other.load(tmp_path / "buf.pt")
    assert torch.equal(other.data, buf.data) and (other.pos, other.size) == (buf.pos, buf.size)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(6, 2, 1).load(tmp_path / "buf.pt")


# --- the loop: bootstrapping, NaN, resume, determinism ----------------------------------------------


def test_terminated_vs_truncated_bootstrapping(counter_env):
    # episodes end by truncation (horizon 4) in the first env, by termination (t=3) in the second
    for horizon, terminate_at, not_done_last in ((4, None, 1.0), (None, 3, 0.0)):
        env = counter_env(horizon=horizon, terminate_at=terminate_at)
        agent = zoo.build("td3", env=env, **{**SMALL, "learning_starts": 100})
        zoo.train(agent, env=env, total_steps=12, eval_every=0, progress=False)
        buf = agent.buffer
        length = horizon or terminate_at
        ends = [i for i in range(len(buf)) if buf.obs[i, 1] == length - 1]  # the last step of each episode
        assert len(ends) == 12 // length
        for i in ends:
            assert buf.not_done[i].item() == not_done_last
            # next_obs is the true final observation, not the next episode's reset observation
            assert buf.next_obs[i].tolist() == [buf.obs[i, 0].item(), float(length)]
        others = [i for i in range(len(buf)) if i not in ends]
        assert buf.not_done[others].eq(1.0).all()
    # the target bootstraps only where not_done is 1
    batch = Batch(torch.zeros(2, 2), torch.zeros(2, 1), torch.tensor([1.0, 1.0]), torch.zeros(2, 2),
                  torch.tensor([1.0, 0.0]))
    target = agent.critic_target_value(batch, torch.zeros(2, 1))
    assert target[1].item() == 1.0 and target[0].item() != 1.0


def test_vector_env_truncation_keeps_final_obs(counter_env):
    venv = gym.vector.SyncVectorEnv([lambda: counter_env(horizon=3)] * 2,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    agent = zoo.build("td3", env=venv, **{**SMALL, "learning_starts": 100})
    zoo.train(agent, env=venv, total_steps=12, eval_every=0, progress=False)
    buf = agent.buffer
    assert len(buf) == 12 and agent.num_episodes == 4
    ends = buf.obs[:12, 1] == 2
    assert ends.sum() == 4 and buf.not_done[:12].eq(1.0).all()
    assert buf.next_obs[:12][ends, 1].eq(3.0).all()  # info["final_obs"], not the reset obs


@pytest.mark.parametrize("mode", ["NEXT_STEP", "SAME_STEP"])
def test_evaluate_shares_the_episodes_of_a_vector_env_out(counter_env, mode):
    """zoo.train takes a VectorEnv; zoo.evaluate refused one ("evaluate takes a single env"). Now env j runs
    (episodes + j) // n of them, as Stable-Baselines3's evaluate_policy does; an env's reset step (NEXT_STEP)
    is no part of an episode, and an episode cut at max_steps runs on uncounted."""
    venv = gym.vector.SyncVectorEnv([lambda: counter_env(horizon=3), lambda: counter_env(horizon=5)],
                                    autoreset_mode=getattr(gym.vector.AutoresetMode, mode))
    agent = zoo.build("td3", env=venv, **SMALL)
    out = zoo.evaluate(agent, venv, episodes=5)  # rewards 1, 2, ...: an episode of 3 steps returns 6, of 5 15
    assert out == {"return_mean": (6 * 2 + 15 * 3) / 5, "return_std": pytest.approx(np.std([6, 6, 15, 15, 15])),
                   "length_mean": (3 * 2 + 5 * 3) / 5, "episodes": 5.0}
    cut = zoo.evaluate(agent, venv, episodes=4, max_steps=4)  # the 5-step episodes end after 1 + 2 + 3 + 4
    assert cut["return_mean"] == (6 * 2 + 10 * 2) / 4 and cut["length_mean"] == 3.5


def test_evaluate_shows_a_bar_over_its_episodes_when_asked(counter_env, capsys):
    """zoo.evaluate(agent, progress=True) was an unknown option where every other family takes it."""
    venv = gym.vector.SyncVectorEnv([lambda: counter_env(horizon=3), lambda: counter_env(horizon=5)])
    agent = zoo.build("td3", env=venv, **SMALL)
    quiet = zoo.evaluate(agent, venv, episodes=5)
    assert capsys.readouterr().err == ""
    assert zoo.evaluate(agent, venv, episodes=5, progress=True) == quiet
    err = capsys.readouterr().err
    assert "evaluate: 100%" in err and "5/5" in err
    assert zoo.evaluate(agent, counter_env(horizon=3), episodes=2, progress=True)["episodes"] == 2.0
    assert "2/2" in capsys.readouterr().err


def test_nan_observation_names_the_step(counter_env):
    env = counter_env(horizon=5, nan_at=7)
    agent = zoo.build("td3", env=env, **SMALL)
    with pytest.raises(ValueError, match=r"non-finite observation at env step 7 \(episode 2\)"):
        zoo.train(agent, env=env, total_steps=20, eval_every=0, progress=False)


PENDULUM_SMALL = {"net_arch": (32, 32), "batch_size": 32, "learning_starts": 100, "buffer_size": 2000}


@pytest.mark.slow
def test_exact_resume(tmp_path):
    full = zoo.build("td3", **PENDULUM_SMALL)
    zoo.train(full, total_steps=600, eval_every=200, eval_episodes=1, progress=False)

    first = zoo.build("td3", **PENDULUM_SMALL)
    r1 = zoo.train(first, total_steps=400, eval_every=200, eval_episodes=1, checkpoint_dir=tmp_path,
                   progress=False)
    assert r1.checkpoint_path == tmp_path / "td3_best.safetensors"  # the best checkpoint, as TrainResult says
    saved = torch.load(tmp_path / "td3_last.pt", weights_only=True)  # the run's checkpoint: plain content only
    assert saved["counters"]["num_timesteps"] == 400
    resumed = zoo.build("td3", **PENDULUM_SMALL)
    zoo.train(resumed, total_steps=600, eval_every=200, eval_episodes=1, checkpoint_dir=tmp_path,
              resume=True, progress=False)
    assert resumed.num_timesteps == full.num_timesteps == 600
    assert resumed.num_updates == full.num_updates == 500
    sd_full, sd_res = full.network_state_dict(), resumed.network_state_dict()
    assert all(torch.equal(sd_full[k], sd_res[k]) for k in sd_full)
    assert torch.equal(full.buffer.data, resumed.buffer.data)
    assert [h["eval_return_mean"] for h in full.history] == [h["eval_return_mean"] for h in resumed.history]
    assert (tmp_path / "metrics.csv").is_file() and (tmp_path / "learning_curves.png").is_file()
    assert (tmp_path / "episodes.csv").is_file()
    assert (tmp_path / "td3_best.safetensors").is_file() and resumed.best_step == full.best_step
    assert all(torch.equal(full.best_state[k], resumed.best_state[k]) for k in full.best_state)


@pytest.mark.slow
def test_same_seed_same_result():
    runs = []
    for seed in (3, 3, 4):
        agent = zoo.build("td3", seed=seed, **PENDULUM_SMALL)
        res = zoo.train(agent, total_steps=300, eval_every=0, progress=False)
        runs.append((agent.network_state_dict(), agent.buffer.data.clone(), res))
    (a, buf_a, _), (b, buf_b, _), (c, _, _) = runs
    assert all(torch.equal(a[k], b[k]) for k in a) and torch.equal(buf_a, buf_b)
    assert not all(torch.equal(a[k], c[k]) for k in a)
    agent = zoo.build("td3", seed=3, **PENDULUM_SMALL)
    assert zoo.evaluate(agent, episodes=2) == zoo.evaluate(agent, episodes=2)


# --- bad input --------------------------------------------------------------------------------------


class _SpaceEnv(gym.Env):
    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space


def test_unsupported_spaces_fail_at_build():
    vec = spaces.Box(-1, 1, (3,), np.float32)
    act = spaces.Box(-1, 1, (1,), np.float32)
    with pytest.raises(ValueError, match="continuous Box action space"):
        zoo.build("td3", env=_SpaceEnv(vec, spaces.Discrete(3)))
    with pytest.raises(ValueError, match="finite action bounds"):
        zoo.build("td3", env=_SpaceEnv(vec, spaces.Box(-np.inf, np.inf, (2,), np.float32)))
    with pytest.raises(ValueError, match="pixel observations .* need an encoder"):
        zoo.build("td3", env=_SpaceEnv(spaces.Box(0, 255, (64, 64, 3), np.uint8), act))
    with pytest.raises(ValueError, match="pixel observations .* need an encoder"):
        zoo.build("td3", env=_SpaceEnv(spaces.Box(0, 255, (1, 84, 84), np.uint8), act))
    # before: any 3-D Box (a float grid of sensor values) and any 2-D uint8 Box were refused as pixels; SB3's
    # MlpPolicy reads them flat (its is_image_space: uint8, 3-D, 1/3/4 channels)
    for state in (spaces.Box(-1, 1, (2, 2, 2), np.float32), spaces.Box(0, 9, (2, 3), np.uint8),
                  spaces.Box(0, 9, (2, 5, 6), np.uint8)):
        agent = zoo.build("td3", env=_SpaceEnv(state, act))
        assert agent.act(state.sample()).shape == (1,)
    with pytest.raises(ValueError, match="flat Box observation space"):
        zoo.build("td3", env=_SpaceEnv(spaces.Dict({"x": vec}), act))
    with pytest.raises(ValueError, match="CartPole-v1: TD3 needs a continuous Box"):
        zoo.build("td3", env="CartPole-v1")
    with pytest.raises(ValueError, match="unknown TD3 preset"):
        zoo.build("td3", preset="nope")
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        zoo.build("td3", batch_size=0)


# --- presets, weights round trip --------------------------------------------------------------------


def test_presets_and_default_build():
    agent = zoo.build("td3")
    cfg = agent.config
    assert (agent.env_id, agent.preset) == ("Pendulum-v1", "rl-zoo")
    assert (cfg.gamma, cfg.buffer_size, cfg.learning_starts, cfg.exploration_noise) == (0.98, 200_000, 10_000, 0.1)
    assert (cfg.net_arch, cfg.actor_lr, cfg.batch_size, cfg.policy_delay) == ((400, 300), 1e-3, 256, 2)
    f = zoo.build("td3", preset="fujimoto", env="Pendulum-v1").config
    assert (f.net_arch, f.actor_lr, f.learning_starts, f.gamma, f.target_policy_noise, f.target_noise_clip) == (
        (256, 256), 3e-4, 25_000, 0.99, 0.2, 0.5)


def test_weights_round_trip(tmp_path, counter_env):
    agent = zoo.build("td3", **PENDULUM_SMALL)
    with torch.no_grad():
        agent.actor.out.bias.add_(0.3)
    path = tmp_path / "agent.safetensors"
    agent.save(path)
    loaded = zoo.build("td3", weights=str(path), **PENDULUM_SMALL)
    obs = np.random.default_rng(0).standard_normal((4, 3))
    np.testing.assert_array_equal(loaded.act(obs), agent.act(obs))
    with pytest.raises(ValueError, match="obs_dim"):
        zoo.build("td3", weights=str(path), env=counter_env(), **PENDULUM_SMALL)


def test_an_agent_that_only_acts_makes_no_optimizer():
    """Making a torch optimizer imports torch._dynamo: 2.2 s of a 6.5 s `zoo predict td3` on a 2 GHz Zen 1."""
    import subprocess
    import sys

    code = ("import sys, zoo\nagent = zoo.build('td3', weights='pendulum-v1')\nzoo.predict(agent, [1.0, 0.0, 0.0])\n"
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split()[-1] == "False", out.stderr[-2000:]


def test_cli_train_out_and_eval(tmp_path, capsys):
    from zoo import cli

    out = tmp_path / "p.safetensors"
    model = ["--model", "net_arch=[16,16]", "learning_starts=100", "batch_size=8", "buffer_size=500"]
    assert cli.main(["train", "td3", "--env", "Pendulum-v1", "--steps", "150", *model, "--out", str(out)]) == 0
    assert out.is_file()
    assert cli.main(["eval", "td3", "--weights", str(out), *model, "--episodes", "1"]) == 0
    assert "return_mean:" in capsys.readouterr().out
    assert cli.main(["train", "td3", "--env", "Pendulum-v1", *model]) == 2  # no --steps: one-line error
    assert "--steps" in capsys.readouterr().err


def test_bf16_update_keeps_fp32_masters_in_sync(counter_env):
    agent = zoo.build("td3", env=counter_env(), amp="bf16", policy_delay=1, **{**SMALL, "net_arch": (64, 64)})
    assert agent.precision == "bf16"
    _fill(agent)
    agent.update(3)
    # masters and the soft-updated targets stay fp32; the compute copies are their bf16 images for the
    # wide hidden layer only (64 -> 64); the observation layer and the one-unit heads run in fp32
    bf16 = {"hidden.1.weight", "hidden.1.bias", "weight1", "bias1"}
    for name in ("actor", "critic", "actor_target", "critic_target"):
        flat = agent._flat[name]
        for pname, p in getattr(agent, name).named_parameters():
            c = flat.weights[pname]
            assert p.dtype == torch.float32
            assert c.dtype == (torch.bfloat16 if pname in bf16 else torch.float32), pname
            assert torch.equal(c, p.detach().to(c.dtype)), pname
    assert agent.num_actor_updates == 3
    # a bf16 update stays close to the fp32 one (same algorithm, bf16 rounding in the middle layer)
    ref = zoo.build("td3", env=counter_env(), amp=None, policy_delay=1, **{**SMALL, "net_arch": (64, 64)})
    _fill(ref)
    ref.update(3)
    lr = agent.config.critic_lr  # an Adam step moves a weight by at most ~lr: 3 steps, either sign
    for p, q in zip(agent.critic.parameters(), ref.critic.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=6 * lr)
        assert (p - q).abs().mean() < 0.1 * lr


def test_fp32_and_auto_precision(counter_env):
    from zoo.engine.precision import auto_amp

    assert zoo.build("td3", env=counter_env(), amp="fp32", **SMALL).precision == "fp32"
    assert zoo.build("td3", env=counter_env(), amp="none", **SMALL).config.amp is None
    agent = zoo.build("td3", env=counter_env(), **SMALL)
    assert agent.config.amp == "auto" and agent.precision == (auto_amp("cpu", "matmul") or "fp32")
    with pytest.raises(ValueError, match="amp must be"):
        zoo.build("td3", env=counter_env(), amp="fp16", **SMALL)


def test_critic_step_matches_reference_adam(counter_env):
    """One critic update equals plain (unfused) Adam on the clipped double-Q loss: guards the stacked
    layout's non-contiguous gradients (torch's fused CPU Adam misapplies those)."""
    import copy

    agent = zoo.build("td3", env=counter_env(), amp=None, **SMALL)
    _fill(agent)
    ref = copy.deepcopy(agent.critic)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=agent.config.critic_lr, foreach=False)
    batch = agent.buffer.sample(8, torch.Generator().manual_seed(0))
    noise = torch.randn(8, 1) * 0.2
    for _ in range(2):  # the first step (lazy state) and a later one take different code paths
        target = agent.critic_target_value(batch, noise)
        loss = (ref(batch.obs, batch.act) - target).pow(2).mean(dim=1).sum()
        ref_opt.zero_grad()
        loss.backward()
        ref_opt.step()
        agent._update(batch, noise, update_actor=False)
    for (name, p), q in zip(agent.critic.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_full_update_matches_autograd_reference(counter_env):
    """Critic step, actor step through Q1 and soft update, against autograd + plain Adam (fp32): the
    explicit backward of zoo.rl.networks computes the same gradients."""
    agent = zoo.build("td3", env=counter_env(), amp=None, policy_delay=1, **SMALL)
    _fill(agent)
    _update_matches_autograd(agent)


@pytest.mark.parametrize("actor_silent", [slice(None, None, 2), slice(None)], ids=["half", "all"])
def test_update_over_live_units_matches_autograd_reference(counter_env, monkeypatch, actor_silent):
    """Where most units of a hidden layer are silent for the whole batch (dead ReLUs: half of TD3's second
    critic layer on Pendulum), the backward multiplies the live ones only; the gradients stay autograd's.
    The twin critics have different live units (and different numbers of them), as the actor has its own."""
    from zoo.rl import networks

    agent = zoo.build("td3", env=counter_env(), amp=None, policy_delay=1, skip_silent_units=True,
                      **{**SMALL, "net_arch": (16, 20)})
    _fill(agent)
    with torch.no_grad():  # silence units for every input: a bias far below what the inputs can reach
        agent.critic.bias1[0, 0, :12] = -100.0  # critic 0: 8 of 20 live
        agent.critic.bias1[1, 0, 5:14] = -100.0  # critic 1: 11 of 20 live
        agent.actor.hidden[1].bias[actor_silent] = -100.0  # the actor: 10 of 20 live, or none
    calls = {"stacked": 0, "single": 0}

    def spy(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(networks, "_live_backward_stacked", spy("stacked", networks._live_backward_stacked))
    monkeypatch.setattr(networks, "_live_backward", spy("single", networks._live_backward))
    _update_matches_autograd(agent)
    assert calls == {"stacked": 3, "single": 3}  # each of 3 updates: the critics' step and the actor's
    # off by default: its last bits differ from the dense backward's, and it was measured faster on one CPU kind
    default = zoo.build("td3", env=counter_env(), amp=None, policy_delay=1, **{**SMALL, "net_arch": (16, 20)})
    _fill(default)
    default.load_network_state_dict(agent.network_state_dict())
    default.update(2)
    assert calls == {"stacked": 3, "single": 3}
    with pytest.raises(TypeError, match="skip_silent_units expects bool, got 'yes'"):
        zoo.build("td3", env=counter_env(), skip_silent_units="yes", **SMALL)


def _update_matches_autograd(agent) -> None:
    import copy

    critic, actor = copy.deepcopy(agent.critic), copy.deepcopy(agent.actor)
    critic_t, actor_t = copy.deepcopy(agent.critic_target), copy.deepcopy(agent.actor_target)
    c_opt = torch.optim.Adam(critic.parameters(), lr=agent.config.critic_lr, foreach=False)
    a_opt = torch.optim.Adam(actor.parameters(), lr=agent.config.actor_lr, foreach=False)
    tau, gamma, clip = agent.config.tau, agent.config.gamma, agent.config.target_noise_clip
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        batch = agent.buffer.sample(8, g)
        noise = torch.randn(8, 1, generator=g) * 0.2
        with torch.no_grad():
            a2 = (actor_t(batch.next_obs) + noise.clamp(-clip, clip)).clamp(-1, 1)
            y = batch.reward + gamma * batch.not_done * critic_t(batch.next_obs, a2).amin(0)
        c_opt.zero_grad()
        (critic(batch.obs, batch.act) - y).pow(2).mean(1).sum().backward()
        c_opt.step()
        a_opt.zero_grad()
        (-critic.q1(batch.obs, actor(batch.obs)).mean()).backward()
        a_opt.step()
        with torch.no_grad():
            for t, o in zip(list(actor_t.parameters()) + list(critic_t.parameters()),
                            list(actor.parameters()) + list(critic.parameters())):
                t.lerp_(o, tau)
        agent._update(batch, noise, update_actor=True)
    for mine, ref in ((agent.critic, critic), (agent.actor, actor), (agent.critic_target, critic_t),
                      (agent.actor_target, actor_t)):
        for (name, p), q in zip(mine.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_predict_refuses_an_observation_that_is_not_finite():
    """The policy answered NaN with a NaN action, without a word."""
    agent = zoo.build("td3")
    assert zoo.predict(agent, [0.1, 0.2, 0.3]).shape == (1,)
    with pytest.raises(ValueError, match=r"observations must be finite; got nan at index \[0\]"):
        zoo.predict(agent, [float("nan"), 0.0, 0.0])
    with pytest.raises(ValueError, match=r"got inf at index \[1, 1\]"):
        zoo.predict(agent, torch.tensor([[0.0, 0.0, 0.0], [0.0, math.inf, 0.0]]))


def test_predict_refuses_what_turns_non_finite_in_the_float32_cast():
    """A None (JSON null) or a float64 beyond float32's range became NaN / inf in the cast, after the check."""
    agent = zoo.build("td3")
    with pytest.raises(ValueError, match=r"observations must be finite; got None at index \[1\]"):
        zoo.predict(agent, [1.0, None, 0.0])
    with pytest.raises(ValueError, match=r"got None at index \[0, 1\]"):
        agent.predict(np.array([[1.0, None, 0.0]]))
    with pytest.raises(ValueError, match=r"got 1e\+39 at index \[2\] \(beyond float32's range"):
        zoo.predict(agent, np.array([0.0, 0.0, 1e39]))


def test_predict_of_the_command_lines_text_form_says_to_parse_it():
    """The command line takes 1,0,0; the Python call gave numpy's "could not convert string to float"."""
    agent = zoo.build("td3")
    with pytest.raises(TypeError, match=r"an observation is 3 numbers .*got the text '1,0,0': parse it first"):
        zoo.predict(agent, "1,0,0")
    np.testing.assert_array_equal(zoo.predict(agent, ["1", "0", "0"]), zoo.predict(agent, [1.0, 0.0, 0.0]))


def test_building_an_agent_leaves_the_callers_random_stream_alone(counter_env):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = zoo.build("td3", env=counter_env(), seed=5, **SMALL)
    assert torch.equal(torch.get_rng_state(), before)
    b = zoo.build("td3", env=counter_env(), seed=5, **SMALL)  # the seed alone decides the weights
    assert all(torch.equal(v, b.network_state_dict()[k]) for k, v in a.network_state_dict().items())


def test_an_env_with_2d_state_observations_is_read_flat_as_sb3_does(tmp_path):
    """SB3's MlpPolicy flattens a Box of any shape; TD3 here refused a (2, 3) one ("need an encoder")."""
    import gymnasium as gym

    class Grid(gym.Env):
        observation_space = spaces.Box(-1.0, 1.0, (2, 3), np.float64)
        action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self.np_random.uniform(-1, 1, (2, 3)), {}

        def step(self, action):
            self.t += 1
            return self.np_random.uniform(-1, 1, (2, 3)), -float(action[0] ** 2), False, self.t >= 10, {}

    agent = zoo.build("td3", env=Grid(), net_arch=(8, 8), learning_starts=20, batch_size=8)
    assert (agent.obs_dim, agent.obs_shape) == (6, (2, 3))
    result = zoo.train(agent, Grid(), total_steps=40, eval_episodes=1, progress=False)
    assert result.history[-1]["updates"] > 0
    obs = np.linspace(-1, 1, 6).reshape(2, 3)
    one = zoo.predict(agent, obs)
    np.testing.assert_array_equal(one, zoo.predict(agent, obs.reshape(6)))  # flat, row-major
    # a batch of them: equal up to float rounding (a 2-row product may take another GEMM kernel than a 1-row one:
    # 1 ulp apart on an AMX Xeon)
    np.testing.assert_allclose(zoo.predict(agent, np.stack([obs, obs]))[1], one, rtol=1e-6, atol=1e-7)
    loaded = zoo.build("td3", weights=zoo.save(agent, tmp_path / "grid.safetensors"))
    assert loaded.obs_shape == (2, 3)
    np.testing.assert_array_equal(zoo.predict(loaded, obs), one)
    assert zoo.evaluate(loaded, Grid(), episodes=1)["length_mean"] == 10
    assert zoo.export(agent, tmp_path / "grid.onnx").verified  # the graph takes them flat, (B, 6)

    class Turned(Grid):
        observation_space = spaces.Box(-1.0, 1.0, (3, 2), np.float64)

    with pytest.raises(ValueError, match=r"\(observations \(3, 2\), the agent's \(2, 3\)\)"):
        zoo.evaluate(agent, Turned(), episodes=1)


@pytest.mark.parametrize("explore", ["no", "false", 5, None])
def test_predict_refuses_an_explore_that_is_not_a_bool(explore):
    """'no', 'false' or 5 (zoo predict --set explore="no") added exploration noise without a word."""
    agent = zoo.build("td3", net_arch=(8, 8))
    with pytest.raises(TypeError, match=rf"explore must be True or False, got {explore!r}"):
        zoo.predict(agent, [1.0, 0.0, 0.0], explore=explore)
    assert zoo.predict(agent, [1.0, 0.0, 0.0], explore=np.bool_(False)).shape == (1,)


class _Float64Bounds(gym.Env):
    """Actions in Box(-0.1, 0.1, float64), checked at every step: float32 holds 0.1 as 0.10000000149."""

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = spaces.Box(np.array([-0.1]), np.array([0.1]), dtype=np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), f"action {action!r} outside {self.action_space}"
        self.t += 1
        return np.array([self.t, float(action[0])]), float(action[0]), False, self.t >= 10, {}


def test_actions_stay_in_a_float64_box_that_float32_cannot_hold():
    """Before: the scaled action was clamped in float32, 0.10000000149 > 0.1, and training on a
    Box(-0.1, 0.1, float64) crashed with 'action outside Box' at the first action at the bound."""
    agent = zoo.build("td3", env=_Float64Bounds(), net_arch=(8,), learning_starts=0, batch_size=4,
                      exploration_noise=5.0)  # noise this large puts most actions at the bounds
    zoo.train(agent, _Float64Bounds(), total_steps=30, eval_every=0, progress=False)
    top = agent.env_action(torch.ones(1))
    assert top.dtype == np.float64 and top[0] == 0.1
    assert agent.act(np.zeros(2), explore=True).dtype == np.float64
