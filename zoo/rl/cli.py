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
    ``--net-arch 400,300``), or a JSON batch of them (``'[[1,0,0],[0,1,0]]'``); several make a batch, their
    rows in the order given, checked here to be numbers of one length (numpy's stacking said "inhomogeneous
    shape", and read ``true`` as 1)."""
    rows, batch = [], False
    for text in texts:
        value = _observation(text)
        nested = isinstance(value, list) and bool(value) and all(isinstance(v, list) for v in value)
        for row in (value if nested else [value]):
            rows.append(_numbers(row, text))
        batch = batch or nested
    lengths = sorted({len(r) for r in rows})
    if len(lengths) > 1:
        raise cli.UsageError(f"the observations given have {' and '.join(map(str, lengths))} numbers; a batch is "
                             f"observations of one length, as the env gives them: got {' '.join(map(repr, texts))}")
    return rows[0] if len(rows) == 1 and not batch else rows


def _numbers(row: Any, text: str) -> list[float]:
    """``row`` (one parsed observation of the argument ``text``) as a list of floats: a number, or a flat list
    of numbers; anything else (true, null, a string, a deeper list) is refused."""
    items = row if isinstance(row, list) else [row]
    if not items or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        raise cli.UsageError(f"an observation is numbers, like [1.0, 0.0, 0.0] or 1,0,0 (a batch: a list of such "
                             f"lists); got {text!r}")
    return [float(v) for v in items]


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
