"""The environment loop: collect, update, evaluate, log, checkpoint and resume.

Exact resume (single env, CPU): checkpoints are taken at episode boundaries, where the whole state of
the run is the agent (networks, optimizers, buffer, its torch generator, counters) plus the env's
``np_random`` state, so a resumed run replays the uninterrupted one bit for bit. With a vector env the
episodes in progress at a checkpoint restart on resume (their physics state is not saved).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
import warnings
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zoo import fs
from zoo.engine.threads import check_threads

__all__ = ["CHECKPOINT_NAME", "evaluate", "make_env", "train"]

CHECKPOINT_NAME = "td3_last.pt"


def make_env(env: Any, *, num_envs: int = 1):
    """An env id -> ``gymnasium.make`` (or a same-step-autoreset vector env when ``num_envs > 1``);
    an env object is returned as it is."""
    import gymnasium as gym

    if isinstance(env, (str, os.PathLike)):
        env_id = str(env)
        try:
            if num_envs > 1:
                return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                                    vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
            return gym.make(env_id)
        except gym.error.Error as err:
            raise ValueError(f"cannot make gymnasium env {env_id!r}: {err}") from None
    if isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        return env
    raise TypeError(f"env must be a gymnasium env id, gymnasium.Env or VectorEnv; got {type(env).__name__}")


def _env_name(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__


def _check_env_fits(agent, env) -> None:
    import gymnasium as gym

    vec = isinstance(env, gym.vector.VectorEnv)
    obs_space = env.single_observation_space if vec else env.observation_space
    act_space = env.single_action_space if vec else env.action_space
    from zoo.rl.td3 import check_spaces

    obs_dim, act_dim = check_spaces(obs_space, act_space, _env_name(env))
    if (obs_dim, act_dim) != (agent.obs_dim, agent.act_dim):
        raise ValueError(f"{_env_name(env)} has obs_dim {obs_dim}, act_dim {act_dim}; the agent was built for "
                         f"obs_dim {agent.obs_dim}, act_dim {agent.act_dim} (env {agent.env_id!r})")
    low, high = np.asarray(act_space.low, np.float32), np.asarray(act_space.high, np.float32)
    if not (np.array_equal(low, agent._low_np) and np.array_equal(high, agent._high_np)):
        raise ValueError(f"{_env_name(env)} action bounds {low.tolist()}..{high.tolist()} differ from the agent's "
                         f"{agent._low_np.tolist()}..{agent._high_np.tolist()}")


def _pick_env(agent, data: Any, env: Any) -> Any:
    if data is not None and env is not None:
        raise TypeError("give the environment once: as data or as env=..., not both")
    chosen = env if env is not None else data
    if chosen is None:
        if agent.env_id is None:
            raise ValueError("no environment: pass env=<gymnasium id or env>")
        chosen = agent.env_id
    return chosen


@torch.inference_mode()
def evaluate(agent, data: Any = None, *, env: Any = None, episodes: int = 10, seed: int | None = None,
             max_steps: int | None = None) -> dict[str, float]:
    """Mean and std of the return of ``episodes`` deterministic episodes (no exploration noise).

    Episode ``i`` is reset with ``seed + i`` (default seed: the agent's seed + 10_000), so an evaluation
    is repeatable and independent of the training env's state.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    chosen = _pick_env(agent, data, env)
    e = make_env(chosen)
    import gymnasium as gym

    if isinstance(e, gym.vector.VectorEnv):
        raise TypeError("evaluate takes a single env (an id or gymnasium.Env), not a VectorEnv")
    _check_env_fits(agent, e)
    base = agent.seed + 10_000 if seed is None else int(seed)
    returns, lengths = [], []
    try:
        for i in range(episodes):
            obs, _ = e.reset(seed=base + i)
            total, n, done = 0.0, 0, False
            while not done:
                obs, reward, terminated, truncated, _ = e.step(agent.act(obs))
                total += float(reward)
                n += 1
                done = terminated or truncated or (max_steps is not None and n >= max_steps)
            returns.append(total)
            lengths.append(n)
    finally:
        if e is not chosen:
            e.close()
    return {"return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)),
            "length_mean": float(np.mean(lengths)), "episodes": float(episodes)}


# --- checkpoints --------------------------------------------------------------------------------------


def _atomic_torch_save(obj: Any, path: Path) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    fs.write_bytes(path, buf.getbuffer())  # atomic, free space checked first, the user's umask


def _env_rng_state(env) -> str | None:
    rng = getattr(env.unwrapped, "_np_random", None)
    return None if rng is None else json.dumps(rng.bit_generator.state)


def _set_env_rng_state(env, state: str | None) -> None:
    if state is None:
        return
    st = json.loads(state)
    bitgen = getattr(np.random, st["bit_generator"])()
    bitgen.state = st
    env.unwrapped.np_random = np.random.Generator(bitgen)


# --- the loop ----------------------------------------------------------------------------------------


class _Logger:
    """evaluations.csv, episodes.csv and learning_curve.png in ``log_dir`` (rewritten atomically)."""

    def __init__(self, log_dir: Path | None, title: str) -> None:
        self.dir, self.title = log_dir, title

    def _write_csv(self, name: str, rows: list[dict[str, Any]]) -> None:
        if self.dir is None or not rows:
            return
        with fs.atomic_write(self.dir / name, text=True, newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    def write(self, history: list[dict[str, Any]], episodes: list[dict[str, Any]]) -> None:
        if self.dir is None:
            return
        self._write_csv("evaluations.csv", history)
        self._write_csv("episodes.csv", episodes)
        if history or episodes:
            plot_learning_curves({"zoo TD3": (history, episodes)}, self.dir / "learning_curve.png", self.title)


def plot_learning_curves(curves: dict[str, tuple[list[dict], list[dict]]], path: Path, title: str) -> None:
    """One PNG: deterministic eval return (mean +- std) and training episode returns per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (label, (history, episodes)) in enumerate(curves.items()):
        color = f"C{i}"
        if episodes:
            ax.plot([e["step"] for e in episodes], [e["return"] for e in episodes], color=color, alpha=0.25, lw=0.8)
        if history:
            x = np.array([h["step"] for h in history])
            m = np.array([h["eval_return_mean"] for h in history])
            s = np.array([h["eval_return_std"] for h in history])
            ax.plot(x, m, color=color, lw=2, label=f"{label} (eval)")
            ax.fill_between(x, m - s, m + s, color=color, alpha=0.15)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    with fs.atomic_write(path) as fh:
        fig.savefig(fh, dpi=110, format="png")
    plt.close(fig)


def train(
    agent,
    data: Any = None,
    *,
    env: Any = None,
    total_steps: int | None = None,
    eval_every: int | None = None,
    eval_episodes: int = 10,
    eval_env: Any = None,
    seed: int | None = None,
    num_envs: int = 1,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool | str | os.PathLike = False,
    log_dir: str | os.PathLike | None = None,
    progress: bool = True,
    threads: int | str | None = None,
):
    """Train ``agent`` until it has collected ``total_steps`` environment transitions (in all).

    Args:
        env / data: a gymnasium id (default: the agent's), a ``gymnasium.Env`` or a ``VectorEnv``.
        total_steps: environment transitions in total (a resumed run continues up to it).
        eval_every: deterministic evaluation of ``eval_episodes`` episodes on a separate env every this
            many steps (and at the end); ``None`` evaluates only at the end, 0 never.
        seed: seeds the training env's first reset (default: the agent's seed).
        num_envs: with an env id, ``> 1`` collects from a synchronous vector env.
        checkpoint_dir: ``td3_last.pt`` is written there at the first episode end after every
            ``checkpoint_every`` steps (default: ``eval_every``) and at the end; the best evaluated
            policy goes to ``td3_best.safetensors`` (and stays in memory as ``agent.best_state``).
        resume: ``True`` continues from ``checkpoint_dir/td3_last.pt``; a path continues from that file.
        log_dir: evaluations.csv, episodes.csv, learning_curve.png (default: ``checkpoint_dir``).
        threads: torch threads for the run (an int, ``"all"`` cores, or None: leave torch's setting);
            restored afterwards. At batch 256 and 400x300 layers a second core makes an update 1.65x
            faster (fp32, benchmarks/td3_update.py); on a machine whose other core is busy, 2 threads
            can be many times *slower* (each parallel region waits for the preempted thread).

    Returns a ``zoo.engine.TrainResult`` (history = one dict per evaluation; best metric = best mean
    eval return; model = the agent).
    """
    import gymnasium as gym
    from tqdm.auto import tqdm

    try:
        from zoo.engine import TrainResult
    except ImportError:  # the engine package's __init__ not in place yet: same class from its module
        from zoo.engine.fit import TrainResult

    if total_steps is None or int(total_steps) < 1:
        raise ValueError(f"TD3 trains for a number of environment steps: give total_steps=N (zoo train td3 --steps N), "
                         f"got {total_steps!r}")
    total_steps = int(total_steps)
    cfg = agent.config
    chosen = _pick_env(agent, data, env)
    train_env = make_env(chosen, num_envs=num_envs)
    owns_env = train_env is not chosen
    vec = isinstance(train_env, gym.vector.VectorEnv)
    _check_env_fits(agent, train_env)
    env_name = _env_name(train_env)
    ckpt_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
    log_path = Path(log_dir) if log_dir is not None else ckpt_dir
    ckpt_every = checkpoint_every if checkpoint_every is not None else (eval_every or None)
    if eval_every is not None and eval_every < 0:
        raise ValueError(f"eval_every must be >= 0, got {eval_every}")
    prev_threads = torch.get_num_threads()
    n_threads = check_threads(threads)
    if n_threads is not None:
        torch.set_num_threads(n_threads)
    # Adam's second moments and small gradients underflow into denormals as training goes on; on x86 they
    # made the fused Adam step ~4x slower (0.83 vs 0.22 ms measured here). Flushed to zero for the run.
    torch.set_flush_denormal(True)

    if total_steps <= max(cfg.learning_starts, agent.num_timesteps):
        warnings.warn(
            f"TD3 on {env_name}: total_steps={total_steps} does not pass learning_starts={cfg.learning_starts} "
            f"(and {agent.num_timesteps} steps are done): this run collects random transitions and makes no "
            "gradient update; raise total_steps or lower learning_starts (zoo.build('td3', learning_starts=...))",
            stacklevel=3)
    buf = agent.ensure_buffer()
    episodes_log: list[dict[str, Any]] = []
    env_rng = None
    if resume:
        path = Path(resume) if not isinstance(resume, bool) else (ckpt_dir / CHECKPOINT_NAME if ckpt_dir else None)
        if path is None:
            raise ValueError("resume=True needs checkpoint_dir (or pass the checkpoint path as resume=...)")
        if not path.is_file():
            raise FileNotFoundError(f"no TD3 checkpoint at {path} to resume from")
        state = torch.load(path, map_location=agent.device, weights_only=True)
        agent.load_checkpoint_state(state)
        episodes_log = [dict(e) for e in state.get("episodes", [])]
        env_rng = state.get("env_rng")
    run_seed = agent.seed if seed is None else int(seed)
    if agent.num_timesteps == 0:
        obs, _ = train_env.reset(seed=run_seed)
    else:  # resumed (or trained before): continue the env's random stream instead of reseeding
        if not vec:
            _set_env_rng_state(train_env, env_rng)
        obs, _ = train_env.reset()
    n_envs = train_env.num_envs if vec else 1
    logger = _Logger(log_path, f"TD3 on {env_name}")
    recent = deque((e["return"] for e in episodes_log[-10:]), maxlen=10)
    ep_ret = np.zeros(n_envs)
    ep_len = np.zeros(n_envs, dtype=np.int64)
    prev_autoreset = np.zeros(n_envs, dtype=bool)  # NEXT_STEP autoreset: that step's transition is skipped
    next_step_mode = vec and train_env.metadata.get("autoreset_mode") == gym.vector.AutoresetMode.NEXT_STEP
    grad_steps = cfg.gradient_steps
    next_eval = _next_multiple(agent.num_timesteps, eval_every) if eval_every else None
    next_ckpt = _next_multiple(agent.num_timesteps, ckpt_every) if (ckpt_dir and ckpt_every) else None
    ckpt_path = ckpt_dir / CHECKPOINT_NAME if ckpt_dir else None
    # learning-phase speed: wall time from the first step at learning_starts on, minus evaluations
    learn_t0: float | None = None
    eval_time = 0.0
    learn_steps = 0

    def learn_rate() -> float:
        if learn_t0 is None or learn_steps == 0:
            return float("nan")
        return learn_steps / (time.perf_counter() - learn_t0 - eval_time)
    step_since_train = 0
    bar = tqdm(total=total_steps, initial=agent.num_timesteps, desc=f"td3 {env_name}", unit="step",
               disable=not progress, dynamic_ncols=True)

    def run_eval() -> None:
        nonlocal eval_time
        t_eval = time.perf_counter()
        res = evaluate(agent, env=eval_env if eval_env is not None else (chosen if isinstance(chosen, str)
                       else agent.env_id), episodes=eval_episodes)
        row = {"epoch": len(agent.history) + 1, "step": agent.num_timesteps, "eval_return_mean": res["return_mean"],
               "eval_return_std": res["return_std"], "eval_length_mean": res["length_mean"],
               "train_return_recent": float(np.mean(recent)) if recent else float("nan"),
               "episodes": agent.num_episodes, "updates": agent.num_updates,
               "learn_steps_per_s": learn_rate()}
        if not agent.history or res["return_mean"] > max(h["eval_return_mean"] for h in agent.history):
            # the best evaluated policy so far (what rl-zoo's EvalCallback keeps as best_model)
            agent.best_state = {k: v.clone() for k, v in agent.export_state_dict().items()}
            agent.best_step = agent.num_timesteps
            if ckpt_dir is not None:
                agent.save(ckpt_dir / "td3_best.safetensors", {"step": str(agent.num_timesteps)})
        agent.history.append(row)
        bar.set_postfix(ret=f"{row['train_return_recent']:.1f}", eval=f"{res['return_mean']:.1f}")
        logger.write(agent.history, episodes_log)
        if learn_t0 is not None:
            eval_time += time.perf_counter() - t_eval

    def save_ckpt() -> None:
        state = agent.checkpoint_state()
        state["env_rng"] = _env_rng_state(train_env) if not vec else None
        state["episodes"] = episodes_log
        _atomic_torch_save(state, ckpt_path)

    need_reset = False  # a single env is reset at the top of the next step, so that a checkpoint taken
    # at an episode end holds the env's random state from before that reset
    try:
        while agent.num_timesteps < total_steps:
            if need_reset:
                obs, _ = train_env.reset()
                need_reset = False
            learning = agent.num_timesteps >= cfg.learning_starts
            if learning and learn_t0 is None:
                learn_t0 = time.perf_counter()
            if learning:
                a = agent.act_normalised(obs, explore=True)
            else:
                a = agent.random_action_normalised(n_envs if vec else None)
            action = agent.scale_action(a).cpu().numpy()
            a_np = a.cpu().numpy()
            next_obs, reward, terminated, truncated, info = train_env.step(action)
            step = agent.num_timesteps + n_envs
            if not (np.isfinite(next_obs).all() and np.isfinite(reward).all()):
                what = "observation" if not np.isfinite(next_obs).all() else "reward"
                raise ValueError(f"{env_name} returned a non-finite {what} at env step {step} "
                                 f"(episode {agent.num_episodes + 1}): obs={np.asarray(next_obs).tolist()}, "
                                 f"reward={np.asarray(reward).tolist()}; training stopped")
            if not vec:
                buf.add_one(obs, a_np, reward, next_obs, terminated)
                done = np.array([terminated or truncated])
                reward_arr = np.array([reward])
            else:
                done = np.logical_or(terminated, truncated)
                store = next_obs
                if not next_step_mode and done.any():
                    final = info.get("final_obs")
                    store = np.array(next_obs, copy=True)
                    for i in np.flatnonzero(done):
                        store[i] = final[i]
                keep = ~prev_autoreset
                if keep.all():
                    buf.add(obs, a_np, reward, store, terminated)
                elif keep.any():
                    buf.add(obs[keep], a_np[keep], reward[keep], store[keep], terminated[keep])
                prev_autoreset = done if next_step_mode else prev_autoreset
                reward_arr = np.where(keep, reward, 0.0) if next_step_mode else np.asarray(reward)
            agent.num_timesteps = step
            bar.update(n_envs)
            step_since_train += 1

            if agent.num_timesteps > cfg.learning_starts and step_since_train >= cfg.train_freq:
                agent.update(grad_steps if grad_steps > 0 else step_since_train * n_envs)
                step_since_train = 0

            ep_ret += reward_arr
            ep_len += 1
            episode_ended = False
            for i in np.flatnonzero(done):
                agent.num_episodes += 1
                recent.append(float(ep_ret[i]))
                episodes_log.append({"step": agent.num_timesteps, "return": float(ep_ret[i]),
                                     "length": int(ep_len[i])})
                ep_ret[i], ep_len[i] = 0.0, 0
                episode_ended = True
            if episode_ended and recent:
                bar.set_postfix(ret=f"{np.mean(recent):.1f}", refresh=False)
            if learning:
                learn_steps += n_envs

            if next_eval is not None and agent.num_timesteps >= next_eval:
                run_eval()
                next_eval = _next_multiple(agent.num_timesteps, eval_every)
            # checkpoints only where an episode just ended: then the run's state is fully saveable
            if next_ckpt is not None and agent.num_timesteps >= next_ckpt and (episode_ended or vec):
                save_ckpt()
                next_ckpt = _next_multiple(agent.num_timesteps, ckpt_every)

            obs = next_obs
            need_reset = not vec and bool(done[0])
        learn_time = (time.perf_counter() - learn_t0 - eval_time) if learn_t0 is not None else 0.0
        if eval_every != 0 and (not agent.history or agent.history[-1]["step"] != agent.num_timesteps):
            run_eval()
        if ckpt_path is not None:
            save_ckpt()
        logger.write(agent.history, episodes_log)
    finally:
        bar.close()
        if owns_env:
            train_env.close()
        torch.set_num_threads(prev_threads)
        torch.set_flush_denormal(False)  # torch's default (it has no getter to restore a previous value)

    evals = [h["eval_return_mean"] for h in agent.history]
    # no gradient update, no trained policy: its evaluations score the random initialisation
    best_i = int(np.argmax(evals)) if evals and agent.num_updates > 0 else None
    agent.last_run_stats = {"learn_steps": learn_steps, "learn_time_s": learn_time,
                            "learn_steps_per_s": learn_steps / learn_time if learn_time > 0 else float("nan")}
    return TrainResult(
        history=list(agent.history),
        best_metric=evals[best_i] if best_i is not None else None,
        best_epoch=best_i + 1 if best_i is not None else None,
        checkpoint_path=ckpt_path,
        model=agent,
        monitor="eval_return_mean",
    )


def _next_multiple(current: int, every: int) -> int:
    return (current // every + 1) * every if every else math.inf
