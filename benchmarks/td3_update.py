"""TD3's update alone: zoo vs Stable-Baselines3, and zoo as a fraction of its GEMM roofline (issue 15).

The same replay contents (Pendulum-v1 shapes, random transitions) and the rl-zoo preset (400x300,
batch 256, policy delay 2) for every variant; per thread count, interleaved repeats of ``--updates``
gradient steps each, medians:

* ``zoo-auto`` (the default precision on this CPU), ``zoo-fp32``, ``zoo-bf16`` (where the CPU has
  native bf16; elsewhere it is 10-60x slower and only run with ``--force-bf16``), ``sb3`` (its
  ``TD3.train(gradient_steps=N)``, same thread count); where the default precision is fp32, ``zoo-skip``:
  ``skip_silent_units=True`` (off by default), whose backward multiplies only the hidden units some row of
  the batch activates (zoo.rl.networks);
* the GEMM roofline of each variant, SB3's included, measured in the same run: every matrix product
  an update runs (captured with a dispatch mode), replayed alone at the same shapes, strides and dtype,
  timed and summed (benchmarks/_roofline.py). ``roofline_fraction`` = that sum / the update's time: the
  share of the update that is matrix arithmetic at the throughput this CPU reaches at those shapes.
  ``sb3_ms_over_auto_roofline_ms`` is the ratio to SB3 that zoo would reach if everything but its GEMMs
  were free: the ceiling of ``sb3_ms_over_auto_ms`` on this CPU (both run the same products with the
  same BLAS; ``zoo-skip`` runs fewer, ``skip_gflop_per_update``).

Then the same again from trained networks (``--trained-steps``, default 12,000 env steps of zoo on
Pendulum: 2,000 updates; 0 skips it), their replay contents and weights copied into every variant, SB3's
included (Adam's moments start afresh in all of them), under ``trained.<...>``: the update a long run
spends its time in. There half the critics' second hidden layer is silent for whole batches (dead ReLUs),
which ``zoo-skip`` leaves out of its backward (``trained.critic_live_fraction`` is the live share).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/td3_update.py                  # 1 and 2 threads
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \\
        flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/td3_update.py              # an AVX2-only CPU
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _harness import interleave, median, parse_args, quiet_sb3_logger, write_result
from _roofline import capture_gemms, gemm_roofline

import zoo
from zoo.engine.precision import auto_amp, cpu_features
from zoo.engine.threads import torch_threads

ENV = "Pendulum-v1"
# what each zoo variant sets on top of the preset; td3_vs_sb3.py learns with the same ones, and of those a run
# has it takes the first in this order as "ours", the others as peers
ZOO_VARIANTS: dict[str, dict[str, Any]] = {"zoo-auto": {"amp": "auto"}, "zoo-bf16": {"amp": "bf16"},
                                           "zoo-fp32": {"amp": None},
                                           "zoo-skip": {"amp": "auto", "skip_silent_units": True}}


def transitions(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    g = np.random.default_rng(seed)
    obs = g.standard_normal((n, 3)).astype(np.float32)
    act = g.uniform(-1, 1, (n, 1)).astype(np.float32)
    return obs, act, g.standard_normal(n).astype(np.float32), g.standard_normal((n, 3)).astype(np.float32), \
        g.random(n) < 0.01


def zoo_agent(data, **config: Any) -> Any:
    agent = zoo.build("td3", env=ENV, preset="rl-zoo", seed=0, **config)
    agent.ensure_buffer().add(*data)
    return agent


def sb3_agent(data) -> Any:
    import gymnasium as gym
    from stable_baselines3 import TD3

    cfg = zoo.build("td3", env=ENV, preset="rl-zoo").config
    model = TD3("MlpPolicy", gym.make(ENV), learning_rate=cfg.actor_lr, buffer_size=len(data[0]) + 10,
                learning_starts=0, batch_size=cfg.batch_size, tau=cfg.tau, gamma=cfg.gamma,
                policy_delay=cfg.policy_delay, target_policy_noise=cfg.target_policy_noise,
                target_noise_clip=cfg.target_noise_clip, policy_kwargs={"net_arch": list(cfg.net_arch)},
                seed=0, device="cpu", verbose=0)
    obs, act, rew, nxt, term = data
    for i in range(len(obs)):  # SB3's buffer takes env-unit actions; Pendulum's are [-2, 2]
        model.replay_buffer.add(obs[i:i + 1], nxt[i:i + 1], 2.0 * act[i:i + 1], rew[i:i + 1],
                                term[i:i + 1], [{}])
    model.set_logger(quiet_sb3_logger())
    model._setup_learn(total_timesteps=1)
    return model


def trained_state(steps: int, threads: int) -> tuple[Any, tuple[np.ndarray, ...]]:
    """A zoo agent trained ``steps`` env steps on Pendulum (rl-zoo preset, seed 0) and its replay contents
    in :func:`transitions`' form: the networks and data a long run updates, where the fresh ones of
    :func:`transitions` are its first update. Half the critics' second hidden layer is silent for a
    whole batch within 2,000 updates (dead ReLUs), which ``skip_silent_units`` leaves out of the backward."""
    with torch_threads(threads):
        agent = zoo.build("td3", env=ENV, preset="rl-zoo", seed=0)
        agent.learn(steps, progress_bar=False)
    buf, n = agent.buffer, len(agent.buffer)
    data = tuple(col[:n].numpy().copy() for col in (buf.obs, buf.act, buf.reward, buf.next_obs))
    return agent, (*data, buf.not_done[:n].numpy() == 0.0)


def live_fraction(agent, data) -> float:
    """The share of the critics' last hidden units that some row of the first 256 transitions in the replay
    buffer (of the random-action phase) activates."""
    from zoo.rl import networks

    obs, act = torch.as_tensor(data[0][:256]), torch.as_tensor(data[1][:256])
    weights = {k: v.float() for k, v in agent._flat["critic"].weights.items()}
    with torch.no_grad():
        _, (_, outs) = networks.critic_forward(weights, torch.cat([obs, act], 1), agent.critic.num_layers)
    return float((outs[-1].amax(dim=1) > 0).float().mean())


def load_into_sb3(model, agent) -> None:
    """Copy ``agent``'s four networks into SB3's TD3 policy (its ``mu`` and ``qf<i>`` Sequentials)."""
    from torch import nn

    sd = agent.network_state_dict()
    pol = model.policy
    names = [f"hidden.{i}" for i in range(len(agent.config.net_arch))] + ["out"]
    with torch.no_grad():
        for prefix, net in (("actor", pol.actor), ("actor_target", pol.actor_target)):
            for lin, name in zip([m for m in net.mu if isinstance(m, nn.Linear)], names, strict=True):
                lin.weight.copy_(sd[f"{prefix}.{name}.weight"])
                lin.bias.copy_(sd[f"{prefix}.{name}.bias"])
        for prefix, net in (("critic", pol.critic), ("critic_target", pol.critic_target)):
            for i, q in enumerate(net.q_networks):
                for k, lin in enumerate(m for m in q if isinstance(m, nn.Linear)):
                    lin.weight.copy_(sd[f"{prefix}.weight{k}"][i].t())
                    lin.bias.copy_(sd[f"{prefix}.bias{k}"][i, 0])
        obs = torch.randn(8, agent.obs_dim)
        act = torch.rand(8, agent.act_dim) * 2 - 1
        if not (torch.allclose(pol.actor(obs), agent.actor(obs), atol=1e-5)
                and torch.allclose(torch.cat(pol.critic(obs, act), 1).t(), agent.critic(obs, act), atol=1e-4)):
            raise RuntimeError("SB3's policy does not compute what zoo's networks do after the copy")


def ms_per_update(fn, n: int) -> float:
    t0 = time.perf_counter()
    fn(n)
    return (time.perf_counter() - t0) / n * 1e3


def measure(threads: int, variants: list[str], args, data, trained: Any = None) -> dict[str, Any]:
    """Interleaved repeats at ``threads``: ms/update and roofline ms per variant, every variant from fresh
    networks, or from ``trained``'s (an agent; Adam's moments start afresh in every variant alike)."""
    with torch_threads(threads):
        agents: dict[str, Any] = {}
        runs: dict[str, Any] = {}
        for v in variants:
            if v == "sb3":
                agents[v] = sb3_agent(data)
                if trained is not None:
                    load_into_sb3(agents[v], trained)
                runs[v] = lambda n, m=agents[v]: m.train(gradient_steps=n, batch_size=256)
            else:
                agents[v] = zoo_agent(data, **ZOO_VARIANTS[v])
                if trained is not None:
                    agents[v].load_network_state_dict(trained.network_state_dict())
                runs[v] = agents[v].update
            runs[v](args.warmup)
        gemms = {v: capture_gemms(lambda a=agents[v]: a.update(2)) for v in variants if v != "sb3"}
        if "sb3" in agents:
            gemms["sb3"] = capture_gemms(lambda m=agents["sb3"]: m.train(gradient_steps=2, batch_size=256))
        cases = {v: (lambda v=v: ms_per_update(runs[v], args.updates)) for v in variants}
        cases.update({f"{v}.roofline": (lambda v=v: gemm_roofline(gemms[v], per=2)["seconds"] * 1e3)
                      for v in gemms})
        got = interleave(cases, repeats=args.repeats, warmup=1)
        out: dict[str, Any] = {"ms_per_update": {v: median(got[v]) for v in variants}}
        roof = {v: gemm_roofline(gemms[v], per=2) for v in gemms}
        out["roofline_ms"] = {v: median(got[f"{v}.roofline"]) for v in gemms}
        out["roofline_fraction"] = {v: out["roofline_ms"][v] / out["ms_per_update"][v] for v in gemms}
        out["gflop_per_update"] = {v: roof[v]["flops"] / 1e9 for v in gemms}
        out["gemm_gflop_per_s"] = {v: roof[v]["flops"] / 1e9 / (out["roofline_ms"][v] / 1e3) for v in gemms}
        out["precision"] = {v: agents[v].precision for v in gemms if v != "sb3"}
        out["runs_ms"] = {k: [round(x, 3) for x in vals] for k, vals in got.items()}
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--updates", type=int, default=100, help="gradient steps per timed sample")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--buffer", type=int, default=20_000, help="transitions in the replay buffer")
    p.add_argument("--force-bf16", action="store_true", help="run zoo-bf16 on a CPU without native bf16 too")
    p.add_argument("--no-sb3", action="store_true")
    p.add_argument("--trained-steps", type=int, default=12_000,
                   help="also time every variant from networks zoo trained this many env steps (0: fresh only)")
    args = parse_args(p, argv, __file__)
    # both alike: over a run's thousand-odd updates SB3's Adam would collect denormal moments that zoo's
    # FlatAdam zeroes (zoo.engine.denormals); this times the update's arithmetic, not that, so SB3 is spared
    torch.set_flush_denormal(True)
    feats = cpu_features()
    variants = ["zoo-auto", "zoo-fp32"]
    if feats.native_bf16 or args.force_bf16:
        variants.append("zoo-bf16")
    if not auto_amp("cpu", "matmul"):  # TD3Config.skip_silent_units acts on fp32 layers only
        variants.append("zoo-skip")
    notes = [] if "zoo-bf16" in variants else [
        f"zoo-bf16 not run: this CPU ({feats.kind}) has no native bf16 (--force-bf16 runs it)"]
    if not args.no_sb3:
        try:
            import stable_baselines3  # noqa: F401
            variants.append("sb3")
        except ImportError:  # a result without its peer would replace the last one that had it
            raise SystemExit("stable-baselines3 is not installed: pip install -e '.[bench]' "
                             "(or pass --no-sb3 to measure ours alone)") from None
    data = transitions(args.buffer)
    metrics: dict[str, Any] = {"auto_precision": auto_amp("cpu", "matmul") or "fp32"}
    peers: dict[str, dict] = {"sb3": {}} if "sb3" in variants else {}
    ratios: dict[str, float] = {}
    extra: dict[str, Any] = {"runs": {}}
    def record(res: dict[str, Any], t: str, state: str = "") -> None:
        """One thread count's results under ``<state><t>.<variant>.<figure>`` (state "" or "trained.")."""
        t = f"{state}{t}"
        for v in variants:
            if v == "sb3":  # on the row of ours at the default precision
                for figure in ("ms_per_update", "roofline_ms", "roofline_fraction", "gemm_gflop_per_s"):
                    peers["sb3"][f"{t}.auto.{figure}"] = res[figure][v]
                continue
            key = v.removeprefix("zoo-")
            for figure in ("ms_per_update", "roofline_ms", "roofline_fraction", "gemm_gflop_per_s", "precision"):
                metrics[f"{t}.{key}.{figure}"] = res[figure][v]
            if "sb3" in variants:  # > 1: ours faster
                name = f"{t}.auto.ms_per_update" if key == "auto" else f"{t}.sb3_ms_over_{key}_ms"
                ratios[name] = res["ms_per_update"]["sb3"] / res["ms_per_update"][v]
                if key == "auto":  # per repeat, SB3 and ours side by side: steadier on a noisy machine
                    ratios[f"{t}.auto.paired"] = median([s / z for s, z in zip(res["runs_ms"]["sb3"],
                                                                                res["runs_ms"]["zoo-auto"])])
                    ratios[f"{t}.sb3_ms_over_auto_roofline_ms"] = res["ms_per_update"]["sb3"] / res["roofline_ms"][v]
        metrics[f"{state}gflop_per_update"] = res["gflop_per_update"]["zoo-auto"]
        if "zoo-skip" in variants:
            metrics[f"{state}skip_gflop_per_update"] = res["gflop_per_update"]["zoo-skip"]
        if "sb3" in variants:
            peers["sb3"][f"{state}gflop_per_update"] = res["gflop_per_update"]["sb3"]
        extra["runs"][t] = res["runs_ms"]

    for threads in args.threads:
        print(f"--- {threads} thread(s)", file=sys.stderr)
        record(measure(threads, variants, args, data), f"{threads}t")
    if args.trained_steps:
        print(f"--- training zoo {args.trained_steps} steps for the trained networks", file=sys.stderr)
        trained, trained_data = trained_state(args.trained_steps, max(args.threads))
        metrics["trained.critic_live_fraction"] = live_fraction(trained, trained_data)
        for threads in args.threads:
            print(f"--- trained networks, {threads} thread(s)", file=sys.stderr)
            record(measure(threads, variants, args, trained_data, trained), f"{threads}t", "trained.")
    extra.update(notes=notes, settings={"env": ENV, "preset": "rl-zoo", "updates": args.updates,
                                        "repeats": args.repeats, "buffer": args.buffer, "threads": args.threads,
                                        "trained_steps": args.trained_steps},
                 goals={"roofline_fraction": ">= 0.70", "sb3_ms_over_auto_ms": ">= 1.6 (AVX2), >= 4 (AMX)"})
    write_result("td3_update", metrics=metrics, peers=peers, ratios=ratios, extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
