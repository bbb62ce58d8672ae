"""TD3 on the command line: observations for ``zoo predict td3`` and the demo step (the shipped
Pendulum agent, 5 deterministic episodes).

    zoo train td3 --env Hopper-v5 --steps 3000 --learning-starts 1000 --out hopper.safetensors
    zoo eval td3 --weights pendulum-v1 --env Pendulum-v1 --episodes 10
    zoo predict td3 --weights pendulum-v1 '[1.0, 0.0, 0.0]'
"""

from __future__ import annotations

import json
import re
from typing import Any

from zoo import cli


def _observations(texts: list[str]) -> Any:
    """Each input is one observation: JSON (``'[1.0, 0.0, 0.0]'``) or numbers apart by commas (``1,0,0``, as
    ``--net-arch 400,300``); several make a batch."""
    rows = [_observation(t) for t in texts]
    return rows[0] if len(rows) == 1 else rows


def _observation(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        try:
            return [float(x) for x in re.split(r"[,\s]+", text.strip().strip("[]()").strip())]
        except ValueError:
            raise cli.UsageError(f"an observation is a JSON array like '[1.0, 0.0, 0.0]' or numbers apart by commas "
                                 f"like 1,0,0; got {text!r} ({err})") from None


def _show_actions(result: Any, args: Any) -> int:
    """One action per line, one line per observation given (the rows' contract; several were one line of a
    nested list, whose shape depended on how many were given)."""
    import numpy as np

    actions = np.asarray(result)
    for row in (actions[None] if actions.ndim <= 1 else actions):
        print(cli.json_line(row))  # the one writer of every --json line
    return 0


cli.predict_rules("rl", cli.PredictRules(read=_observations, show=_show_actions))


@cli.demo("rl: TD3 on Pendulum-v1 (shipped agent td3.pendulum-v1)", order=60)
def _demo() -> None:
    import zoo

    try:
        agent = zoo.build("td3", weights="pendulum-v1")
    except KeyError as err:  # not published in this manifest; a file that cannot be had fails the step
        print(f"td3.pendulum-v1 is not available ({err}); train one with "
              "`zoo train td3 --env Pendulum-v1 --steps 20000 --out pendulum.safetensors`")
        return
    res = zoo.evaluate(agent, "Pendulum-v1", episodes=5)
    print(f"td3.pendulum-v1: mean return over 5 deterministic episodes {res['return_mean']:.1f} "
          f"(+- {res['return_std']:.1f})")
