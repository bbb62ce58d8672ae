"""The command line for TD3: ``zoo train td3 --env ID --steps N``, ``zoo eval td3 --weights TAG`` and the
demo step (the shipped Pendulum agent, 5 deterministic episodes)."""

from __future__ import annotations

import argparse
from typing import Any

from zoo import cli


@cli.data_adapter("rl")
def _td3_data(args: argparse.Namespace, agent: Any) -> tuple[Any, dict[str, Any]]:
    env = args.env or agent.env_id
    if getattr(args, "data", None):
        raise cli.UsageError("td3 interacts with an environment: use --env ID, not --data")
    config: dict[str, Any] = {"env": env}
    if hasattr(args, "steps"):  # zoo train
        if getattr(args, "epochs", None) is not None:
            raise cli.UsageError("td3 trains for environment steps: use --steps N, not --epochs")
        if args.steps is None:
            raise cli.UsageError("zoo train td3 needs --steps N (environment steps)")
        config.update(total_steps=args.steps, seed=args.seed)
        if args.checkpoint_dir:
            config["log_dir"] = args.checkpoint_dir
    else:  # zoo eval
        if getattr(args, "episodes", None) is not None:
            config["episodes"] = args.episodes
    if args.device and args.device != str(agent.device):
        raise cli.UsageError(f"build the agent on {args.device} with --model device={args.device}")
    return None, config


@cli.demo("TD3 on Pendulum-v1 (shipped agent td3.pendulum-v1)", order=60)
def _demo() -> None:
    import time

    import zoo

    t0 = time.perf_counter()
    try:
        agent = zoo.build("td3", weights="pendulum-v1")
    except (KeyError, FileNotFoundError) as err:
        print(f"td3.pendulum-v1 is not available ({err}); train one with "
              "`zoo train td3 --env Pendulum-v1 --steps 20000 --out pendulum.safetensors`")
        return
    res = zoo.evaluate(agent, env="Pendulum-v1", episodes=5)
    print(f"td3.pendulum-v1: mean return over 5 deterministic episodes {res['return_mean']:.1f} "
          f"(+- {res['return_std']:.1f}); {time.perf_counter() - t0:.1f} s")
