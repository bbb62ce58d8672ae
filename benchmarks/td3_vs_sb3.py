"""TD3: zoo vs Stable-Baselines3, same machine, same run, interleaved, identical hyperparameters.

Claim (issue 6): zoo's TD3 collects learning-phase environment steps several times faster than SB3's
TD3 (the ``rl-zoo`` preset: rl-baselines3-zoo's hyperparameters), at an equal or better deterministic
evaluation return. Per seed, each variant trains ``--steps`` steps; the runs of one seed are
interleaved (order rotated per seed). Measured per run:

* ``learn_steps_per_s``: environment steps after ``learning_starts`` (each with one gradient step)
  per second of wall time, evaluations excluded;
* ``final_return``: mean deterministic return over ``--eval-episodes`` episodes at the end (episode i
  reset with seed ``seed + 10_000 + i``, the same episodes for every variant);
* the learning curve (evaluation every ``--eval-every`` steps), plotted to results/<name>.png.

Ratios: of the medians over seeds, and ``..._paired``, the median over seeds of the ratio within a seed.

The peer needs the ``bench`` extra (``pip install -e '.[bench]'``, i.e. stable-baselines3); without it
the peer is skipped with a note. ``--publish TAG`` adds the zoo run with the best evaluation, at that evaluation (as
rl-zoo's EvalCallback keeps its best_model), as ``td3.TAG`` to the weights manifest (actor + critic,
fp32 safetensors), with its eval return re-measured after loading it back in the meta.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/td3_vs_sb3.py --env Pendulum-v1 --steps 20000 \\
        --seeds 0 1 2 --variants zoo-auto sb3 --threads 2 --publish pendulum-v1

``--threads`` applies to every variant (SB3 too). ``zoo-auto`` runs the precision ``amp="auto"`` picks on
this CPU (bf16 with native bf16 GEMMs, else fp32); ``zoo-bf16`` / ``zoo-fp32`` force one. ``zoo-skip`` is
``zoo-auto`` with the opt-in ``skip_silent_units=True`` (a backward over the live units of each layer, fp32 on
the CPU only), timed beside the default it would replace.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    RESULTS_DIR,
    command_line,
    machine_info,
    may_publish_weights,
    median,
    output_file,
    parse_args,
    quiet_sb3_logger,
    result_file,
    write_result,
)
from td3_update import ZOO_VARIANTS  # what each zoo variant sets on top of the preset, as the update is timed

import zoo
from zoo.engine.logs import plot_curves
from zoo.engine.precision import auto_amp
from zoo.rl.config import TD3Config, preset_config


def _eval_episodes(policy, env_id: str, episodes: int, base_seed: int) -> tuple[float, float]:
    import gymnasium as gym

    env = gym.make(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=base_seed + i)
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(policy(obs))
            total += float(r)
            done = term or trunc
        returns.append(total)
    env.close()
    return float(np.mean(returns)), float(np.std(returns))


def run_zoo(env_id: str, steps: int, seed: int, variant: dict[str, Any], args) -> dict[str, Any]:
    agent = zoo.build("td3", env=env_id, preset=args.preset, seed=seed, **variant, **args.overrides)
    t0 = time.perf_counter()
    zoo.train(agent, env=env_id, total_steps=steps, eval_every=args.eval_every,
              eval_episodes=args.eval_episodes, seed=seed, progress=args.progress, threads=args.threads)
    wall = time.perf_counter() - t0
    final = agent.history[-1]
    return {
        "learn_steps_per_s": agent.last_run_stats["learn_steps_per_s"],
        "final_return": final["eval_return_mean"], "final_return_std": final["eval_return_std"],
        "wall_s": wall,
        "curve": [(h["step"], h["eval_return_mean"], h["eval_return_std"]) for h in agent.history],
        "agent": agent,
        "precision": agent.precision,
    }


def run_sb3(env_id: str, steps: int, seed: int, args) -> dict[str, Any]:
    import gymnasium as gym
    from stable_baselines3 import TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    cfg = preset_config(args.preset, env_id, **args.overrides)
    env = gym.make(env_id)
    n_act = env.action_space.shape[0]
    # SB3 adds the noise in the normalised action space too (scaled_action + noise, clipped to [-1, 1])
    noise_class = OrnsteinUhlenbeckActionNoise if cfg.noise_type == "ornstein-uhlenbeck" else NormalActionNoise
    # rl-zoo's lin_<lr>: the lr times SB3's progress_remaining (1 at the start, 0 at the end)
    lr = (lambda progress: cfg.actor_lr * progress) if cfg.lr_schedule == "linear" else cfg.actor_lr
    model = TD3(
        "MlpPolicy", env, learning_rate=lr, buffer_size=cfg.buffer_size,
        learning_starts=cfg.learning_starts, batch_size=cfg.batch_size, tau=cfg.tau, gamma=cfg.gamma,
        train_freq=cfg.train_freq, gradient_steps=cfg.gradient_steps,
        action_noise=noise_class(np.zeros(n_act), cfg.exploration_noise * np.ones(n_act)),
        policy_delay=cfg.policy_delay, target_policy_noise=cfg.target_policy_noise,
        target_noise_clip=cfg.target_noise_clip, policy_kwargs={"net_arch": list(cfg.net_arch)},
        seed=seed, device="cpu", verbose=0,
    )
    if abs(cfg.actor_lr - cfg.critic_lr) > 0:
        raise ValueError("SB3's TD3 has one learning rate; the preset's actor_lr and critic_lr differ")

    def policy(obs):
        return model.predict(obs, deterministic=True)[0]

    class Timer(BaseCallback):
        def __init__(self):
            super().__init__()
            self.t_learn: float | None = None
            self.eval_time = 0.0
            self.curve: list[tuple[int, float, float]] = []

        def _on_step(self) -> bool:
            n = self.num_timesteps
            if n == cfg.learning_starts and self.t_learn is None:
                self.t_learn = time.perf_counter()
            if args.eval_every and n % args.eval_every == 0:
                t = time.perf_counter()
                m, s = _eval_episodes(policy, env_id, args.eval_episodes, seed + 10_000)
                self.curve.append((n, m, s))
                if self.t_learn is not None:
                    self.eval_time += time.perf_counter() - t
            return True

    model.set_logger(quiet_sb3_logger())
    timer = Timer()
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, callback=timer, progress_bar=False)
    t_end = time.perf_counter()
    learn_time = t_end - timer.t_learn - timer.eval_time
    if not timer.curve or timer.curve[-1][0] != steps:
        m, s = _eval_episodes(policy, env_id, args.eval_episodes, seed + 10_000)
        timer.curve.append((steps, m, s))
    env.close()
    return {
        "learn_steps_per_s": (steps - cfg.learning_starts) / learn_time,
        "final_return": timer.curve[-1][1], "final_return_std": timer.curve[-1][2],
        "wall_s": t_end - t0, "curve": timer.curve,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--preset", default="rl-zoo")
    p.add_argument("--variants", nargs="+", default=["zoo-auto", "sb3"],
                   choices=[*ZOO_VARIANTS, "sb3"],
                   help="zoo-auto: the default precision on this CPU (bf16 only with native bf16 GEMMs)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for every variant (default 1)")
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--name", help="result name (default: td3_vs_sb3_<env>)")
    p.add_argument("--publish", metavar="TAG", help="publish the best zoo run's agent as td3.TAG")
    p.add_argument("--progress", action="store_true", help="show the zoo runs' progress bars")
    p.add_argument("--learning-starts", type=int, help="override the preset (smoke runs only)")
    p.add_argument("--merge", action="store_true",
                   help="keep the variants of the earlier result (same env, steps, preset, evaluation) that this "
                        "run does not repeat, e.g. an SB3 peer added beside a published zoo run")
    args = parse_args(p, argv, __file__)
    args.overrides = {} if args.learning_starts is None else {"learning_starts": args.learning_starts}

    torch.set_num_threads(args.threads)
    name = args.name or "td3_vs_sb3_" + args.env.lower().replace("-", "_")
    variants = list(args.variants)
    notes: list[str] = []
    if "zoo-skip" in variants and auto_amp("cpu", "matmul"):  # skip_silent_units acts on fp32 layers only
        raise SystemExit("zoo-skip: amp='auto' picks bf16 on this CPU, where skip_silent_units does nothing "
                         "(it acts on fp32 layers): leave zoo-skip out of --variants")
    if "sb3" in variants:
        try:
            import stable_baselines3  # noqa: F401
        except ImportError:  # a result without its peer would replace the last one that had it
            raise SystemExit("stable-baselines3 is not installed: pip install -e '.[bench]' "
                             "(or leave sb3 out of --variants to run ours alone)") from None

    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for i, seed in enumerate(args.seeds):
        order = variants[i % len(variants):] + variants[: i % len(variants)]
        for v in order:
            print(f"[seed {seed}] {v} ...", file=sys.stderr, flush=True)
            if v == "sb3":
                r = run_sb3(args.env, args.steps, seed, args)
            else:
                r = run_zoo(args.env, args.steps, seed, ZOO_VARIANTS[v], args)
            r["seed"] = seed
            runs[v].append(r)
            print(f"[seed {seed}] {v}: {r['learn_steps_per_s']:.1f} learn steps/s, final return "
                  f"{r['final_return']:.1f} +- {r['final_return_std']:.1f}, wall {r['wall_s']:.0f} s",
                  file=sys.stderr, flush=True)

    def summary(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "learn_steps_per_s": median([r["learn_steps_per_s"] for r in rs]),
            "final_return_median": median([r["final_return"] for r in rs]),
            "final_return_mean": float(np.mean([r["final_return"] for r in rs])),
            "final_return_per_seed": [round(r["final_return"], 2) for r in rs],
            "best_eval_return_per_seed": [round(max(c[1] for c in r["curve"]), 2) for r in rs],
            "learn_steps_per_s_per_seed": [round(r["learn_steps_per_s"], 1) for r in rs],
            "wall_s_per_seed": [round(r["wall_s"], 1) for r in rs],
        }

    summaries = {v: summary(rs) for v, rs in runs.items()}
    seed_curves = {v: [r["curve"] for r in rs] for v, rs in runs.items()}
    earlier = merge_earlier(result_file(name), args, set(runs)) if args.merge else {}
    for v, e in earlier.items():
        summaries[v], seed_curves[v] = e["summary"], e["curves"]
    ours_key = next((v for v in ZOO_VARIANTS if v in summaries), None)
    if ours_key is None:
        raise SystemExit("no zoo variant in this run or (with --merge) in the earlier result to compare against")
    metrics = {**summaries[ours_key], "variant": ours_key}
    peers = {v: s for v, s in summaries.items() if v != ours_key}

    def paired(a: str, b: str) -> float | None:
        """Median over seeds of a's steps/s over b's in the same seed: the runs of one seed follow each other,
        so a VM that speeds up or slows down over the run moves both sides of each ratio alike."""
        if a not in runs or b not in runs:  # a variant merged from an earlier run has no partner here
            return None
        return median([x["learn_steps_per_s"] / y["learn_steps_per_s"] for x, y in zip(runs[a], runs[b])])

    ratios = {}
    for v, s in peers.items():
        ratios[f"learn_steps_per_s_vs_{v}"] = metrics["learn_steps_per_s"] / s["learn_steps_per_s"]
        if (p := paired(ours_key, v)) is not None:
            ratios[f"learn_steps_per_s_vs_{v}_paired"] = p
        ratios[f"final_return_median_minus_{v}"] = metrics["final_return_median"] - s["final_return_median"]
    for v, s in peers.items():  # every other zoo variant against the peer too
        if v != "sb3" and "sb3" in peers:
            ratios[f"{v}_learn_steps_per_s_vs_sb3"] = s["learn_steps_per_s"] / peers["sb3"]["learn_steps_per_s"]
            if (p := paired(v, "sb3")) is not None:
                ratios[f"{v}_learn_steps_per_s_vs_sb3_paired"] = p
            ratios[f"{v}_final_return_median_minus_sb3"] = s["final_return_median"] - peers["sb3"]["final_return_median"]

    # learning curves: mean over seeds of each variant's evaluation curve
    curves = {}
    for v, cs in seed_curves.items():
        steps = [c[0] for c in cs[0]]
        means = np.mean([[c[1] for c in curve] for curve in cs], axis=0)
        stds = np.std([[c[1] for c in curve] for curve in cs], axis=0)
        hist = [{"step": s, "eval_return_mean": float(m), "eval_return_std": float(sd)}
                for s, m, sd in zip(steps, means, stds)]
        curves[f"{v} ({len(cs)} seeds)"] = (hist, [])
    png = output_file(name, "png")
    plot_curves(curves, png, f"TD3 {args.env}, {args.preset} preset: eval return (mean +- std over seeds)")

    extra: dict[str, Any] = {
        "settings": {"env": args.env, "steps": args.steps, "seeds": args.seeds, "preset": args.preset,
                     "threads": args.threads, "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
                     "config": preset_config(args.preset, args.env, **args.overrides).to_dict()},
        "curves": seed_curves,
        "plot": str(png.relative_to(RESULTS_DIR.parent.parent)),
        "notes": notes,
    }
    if earlier:
        # which variant came from which run: each keeps its own command, date and machine
        extra["runs"] = {v: {k: e[k] for k in ("command", "date", "machine", "seeds")} for v, e in earlier.items()}
        this_run = {"command": command_line(), "date": _dt.datetime.now(_dt.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"), "machine": machine_info(), "seeds": args.seeds}  # one record for all its variants
        extra["runs"].update({v: dict(this_run) for v in runs})
        if earlier_published := next((e["published"] for e in earlier.values() if e.get("published")), None):
            extra["published"] = earlier_published
    if args.publish and may_publish_weights(f"td3.{args.publish}"):
        # the run with the best evaluation, at that evaluation (rl-zoo's EvalCallback best_model)
        best = max(runs[ours_key], key=lambda r: max(c[1] for c in r["curve"]))
        agent = best["agent"]
        step = agent.best_step
        agent.load_network_state_dict(agent.best_state)
        extra["published"] = publish(agent, args, best["seed"], ours_key, step)
    write_result(name, metrics=metrics, peers=peers, ratios=ratios, command=command_line(), extra=extra)
    return 0


def merge_earlier(path: Path, args, rerun: set[str]) -> dict[str, dict[str, Any]]:
    """The variants of the earlier result at ``path`` that this run does not repeat: their summaries, per-seed
    curves, command, date and machine. Refuses an earlier result measured under other settings."""
    if not path.exists():
        return {}
    old = json.loads(path.read_text(encoding="utf-8"))
    config = json.loads(json.dumps(preset_config(args.preset, args.env, **args.overrides).to_dict()))
    was, now = old.get("settings", {}), {"env": args.env, "steps": args.steps, "preset": args.preset, "config": config,
                                         "eval_every": args.eval_every, "eval_episodes": args.eval_episodes}
    # fields added to the config since the earlier run held their default then; amp is set per variant
    defaults = {f.name: f.default for f in dataclasses.fields(TD3Config)}
    was_config = dict(was.get("config") or {})
    for k, v in config.items():
        if k == "amp" or (k not in was_config and v == defaults.get(k)):
            was_config[k] = v
    was = {**was, "config": was_config}
    differ = {k: (was.get(k), v) for k, v in now.items() if was.get(k) != v}
    if differ:
        raise SystemExit(f"--merge: {path} was measured with other settings (earlier, now): {differ}")
    ours = old["metrics"].get("variant")
    summaries = {ours: {k: v for k, v in old["metrics"].items() if k != "variant"}, **old.get("peers", {})}
    earlier = {}
    for v, s in summaries.items():
        if v in rerun or v not in old.get("curves", {}):
            continue
        run = old.get("runs", {}).get(v) or {"command": old["command"], "date": old["date"],
                                             "machine": old["machine"], "seeds": was.get("seeds")}
        earlier[v] = {"summary": s, "curves": old["curves"][v], **run,
                      "published": old.get("published") if v == ours else None}
    return earlier


def publish(agent, args, seed: int, variant: str, step: int) -> dict[str, Any]:
    """Add the agent's actor + critic (fp32) to the manifest as td3.TAG, re-measured after loading."""
    from zoo import hub

    state = agent.export_state_dict()
    config = {"env": args.env, "preset": args.preset, **args.overrides}
    if agent.config.amp not in ("auto",):  # the precision to build it with; "auto" is the default
        config["amp"] = agent.config.amp or "fp32"
    wname = f"td3.{args.publish}"
    meta = {
        "dataset": f"gymnasium {args.env} (online interaction; run of {args.steps} steps, seed {seed}; "
                   f"the policy of its best evaluation, at step {step})",
        "license": "MIT",
        "command": command_line(),
        "storage": "float32 actor + twin critic (targets are re-initialised from them on load)",
        "num_params": sum(v.numel() for v in state.values()),
        "variant": variant,
        "train_precision": agent.precision,
    }
    # force: a publishing run replaces the tag (the second call always did: the first had just written it)
    entry = hub.add_weights(state, name=wname, config=config, meta={**meta, "metrics": {}}, force=True)
    loaded = zoo.build("td3", weights=args.publish)
    res = zoo.evaluate(loaded, env=args.env, episodes=10)
    metrics = {"eval_return_mean_10ep": round(res["return_mean"], 2), "eval_return_std_10ep": round(res["return_std"], 2),
               "train_steps": step, "seed": seed}
    entry = hub.add_weights(state, name=wname, config=config, meta={**meta, "metrics": metrics}, force=True)
    print(f"published {wname}: {json.dumps(metrics)}", file=sys.stderr)
    return {"name": wname, "sha256": entry.sha256, "metrics": metrics}


if __name__ == "__main__":
    sys.exit(main())
