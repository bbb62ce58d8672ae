"""Making an agent's env and evaluating the agent in it: :func:`make_env` makes an env id or ``EnvSpec``
(one env, or a same-step-autoreset vector env), :func:`evaluate` runs deterministic episodes with the agent's
normalisation statistics frozen in the env. The training loop (:mod:`zoo.rl.loop`) makes and checks its envs,
and evaluates, through these.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from zoo.inputs import whole_number
from zoo.rl import normalization
from zoo.rl.envspec import default_env, env_identity, unmade_wrappers

__all__ = ["SYNCED_EVAL_ENV", "adopt_statistics", "check_env_fits", "env_label", "evaluate", "make_env", "pick_env",
           "whole_count"]


def make_env(env: Any, *, num_envs: int = 1):
    """An env id or ``EnvSpec`` -> ``gymnasium.make`` (or a same-step-autoreset vector env when
    ``num_envs > 1``); an env object is returned as it is."""
    import gymnasium as gym
    from gymnasium.envs.registration import EnvSpec

    if isinstance(env, (str, os.PathLike, EnvSpec)):
        # a spec (zoo.rl.envspec) makes the id with its kwargs and recorded wrappers again
        env_id = env if isinstance(env, EnvSpec) else str(env)
        unmade = unmade_wrappers(env)
        if unmade:
            raise ValueError(
                f"cannot make {env.id} with its wrapper(s) {', '.join(unmade)} again: they record no constructor "
                "arguments (gymnasium.utils.RecordConstructorArgs), so gymnasium.make cannot rebuild them; pass "
                "the wrapped env object (env=...), or give the wrapper RecordConstructorArgs")
        num_envs = whole_number(num_envs, "num_envs")
        try:
            if num_envs > 1:
                return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                                    vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
            return gym.make(env_id)
        except gym.error.Error as err:
            name = env_id.id if isinstance(env_id, EnvSpec) else env_id
            raise ValueError(f"cannot make gymnasium env {name!r}: {err}") from None
    if isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        if num_envs != 1 and num_envs != getattr(env, "num_envs", 1):  # else it would train on the env as it is, unsaid
            raise ValueError(f"num_envs={num_envs!r} makes copies of an env id; {env_label(env)} is an env object "
                             "trained on as it is: give its id with num_envs, or a VectorEnv of the copies")
        return env
    raise TypeError(f"env must be a gymnasium env id, EnvSpec, gymnasium.Env or VectorEnv; got {type(env).__name__}")


def env_label(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__


def check_env_fits(agent, env) -> None:
    from zoo.rl.envspec import acting_spaces
    from zoo.rl.td3 import check_spaces

    hidden = normalization.hidden_normalizers(env)
    if hidden:  # training would save no statistics, and evaluation would return scaled, moving returns
        raise ValueError(f"{env_label(env)} is an AsyncVectorEnv whose sub-envs carry {' + '.join(hidden)}: their "
                         "running statistics live in its worker processes, where TD3 can neither save, restore nor "
                         "freeze them nor take the reward scaling off; make it with vectorization_mode=\"sync\" "
                         "(the same make_vec call otherwise), or without those wrappers")
    obs_space, act_space = acting_spaces(env)  # a ClipAction's Box(-inf, inf): the bounds it clips into

    obs_dim, act_dim = check_spaces(obs_space, act_space, env_label(env))
    if (obs_dim, act_dim) != (agent.obs_dim, agent.act_dim) or tuple(obs_space.shape) != agent.obs_shape:
        shapes = "" if len(agent.obs_shape) == 1 and len(obs_space.shape) == 1 else \
            f" (observations {tuple(obs_space.shape)}, the agent's {agent.obs_shape})"
        raise ValueError(f"{env_label(env)} has obs_dim {obs_dim}, act_dim {act_dim}; the agent was built for "
                         f"obs_dim {agent.obs_dim}, act_dim {agent.act_dim} (env {agent.env_id!r}){shapes}")
    low, high = np.asarray(act_space.low, np.float32), np.asarray(act_space.high, np.float32)
    own_low, own_high = agent.action_bounds
    if not (np.array_equal(low, own_low) and np.array_equal(high, own_high)):
        raise ValueError(f"{env_label(env)} action bounds {low.tolist()}..{high.tolist()} differ from the agent's "
                         f"{own_low.tolist()}..{own_high.tolist()}: pass the env the agent acts in (a "
                         "wrapped env with its wrappers, e.g. gymnasium.wrappers.RescaleAction)")


def pick_env(agent, data: Any, env: Any) -> Any:
    if data is not None and env is not None:
        raise TypeError("give the environment once: as data or as env=..., not both")
    chosen = env if env is not None else data
    if chosen is None:
        if agent.env_id is None:
            raise ValueError(f"no environment: this agent (obs_dim {agent.obs_dim}, act_dim {agent.act_dim}) was built "
                             "for an env without a registered id (or loaded from the weights of one), so there is "
                             "none to make: pass env=<gymnasium id or env>")
        # an agent built or trained on a wrapped env acts in that env: its spec makes the wrappers again (or,
        # where it cannot, the env object itself)
        chosen = default_env(agent)
    return chosen


@torch.inference_mode()
def evaluate(agent, data: Any = None, *, env: Any = None, episodes: int = 10, seed: int | None = None,
             max_steps: int | None = None, progress: bool = False) -> dict[str, float]:
    """Mean and std of the return of ``episodes`` deterministic episodes (no exploration noise).

    Episode ``i`` is reset with ``seed + i`` (default seed: the agent's seed + 10_000), so an evaluation
    is repeatable and independent of the training env's state. A ``VectorEnv`` (what ``zoo.train`` also
    takes) shares the episodes out among its envs, as Stable-Baselines3's ``evaluate_policy`` does: env
    ``j`` is reset with ``seed + j`` and runs its share one after another.

    An agent that trained behind ``NormalizeObservation`` / ``NormalizeReward`` (``agent.normalization``,
    which its weights file carries) puts its statistics into an env whose normalisers have not been
    updated yet (one made here, its own by default) and evaluates with them frozen, as its training run's
    evaluations did; an env whose normalisers have statistics of their own keeps them, and one without
    the agent's wrappers gets a warning. The returns are the env's own: ``NormalizeReward``'s scaling is taken
    off while evaluating (:func:`zoo.rl.normalization.raw_rewards`), as rl-baselines3-zoo evaluates with
    ``norm_reward=False``; scaled, they would be in the scale of the statistics of the moment, which move
    between a run's evaluations. ``progress=True`` shows a bar over the episodes.
    """
    from zoo._progress import ProgressBar

    episodes = whole_count("episodes", episodes, 1, "episodes")
    if max_steps is not None:  # 0 or -3 ran 1-step episodes, 2.5 ran 3, reported as a normal evaluation
        max_steps = whole_count("max_steps", max_steps, 1, "steps")
    seed = whole_number(seed, "seed", minimum=0, allow_none=True, hint="episode i is reset with seed + i")
    chosen = pick_env(agent, data, env)
    e = make_env(chosen)
    import gymnasium as gym

    check_env_fits(agent, e)
    base = agent.seed + 10_000 if seed is None else int(seed)
    episodes_of = _vector_episodes if isinstance(e, gym.vector.VectorEnv) else _episodes
    try:
        with _agent_statistics(agent, e), normalization.raw_rewards(e), \
                ProgressBar(total=episodes, desc="evaluate", unit="episode", disable=not progress) as bar:
            returns, lengths = episodes_of(agent, e, episodes, base, max_steps, bar.update)
    finally:
        if e is not chosen:
            e.close()
    return {"return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)),
            "length_mean": float(np.mean(lengths)), "episodes": float(episodes)}


@contextlib.contextmanager
def _agent_statistics(agent, e: Any):
    """The agent's normalisation statistics put into ``e``'s fresh normalisers (none for an env the training
    loop synced from its training env), and every normaliser of ``e`` frozen for the block, every sub-env's
    too: an env that kept statistics of its own (the training env itself) would otherwise take the
    evaluation's observations into them, and one seed would give another return each time. Fresh normalisers
    of an agent without statistics (a file written before they were saved) update as the caller left them:
    frozen, they would hold mean 0 and var 1, which no training saw."""
    stats = getattr(agent, "normalization", None)
    if stats and e is not SYNCED_EVAL_ENV.get():
        # an evaluation's rewards are the env's own (raw_rewards): only the observations' scale is at stake there
        adopt_statistics(agent, e, "this agent", kinds=("obs_rms",))
    every = [w for stack in normalization.stacks(e) for w in stack]
    with normalization.frozen(every if stats or not normalization.is_fresh(every) else []):
        yield


# the evaluation env whose normalisers the training loop synced from its training env, which it sets while it
# evaluates: evaluate puts no agent statistics into that one (the agent's copy may be older than the run's)
SYNCED_EVAL_ENV: contextvars.ContextVar[Any] = contextvars.ContextVar("zoo_td3_synced_eval_env", default=None)


def adopt_statistics(agent, env: Any, source: str, kinds: tuple[str, ...] = normalization.RUNNING_STATS) -> list[Any]:
    """Put ``agent.normalization`` into ``env``'s normalisers when none of them has been updated yet (a
    vector env's: into each sub-env's, a mismatch of ``kinds`` warning once, :func:`zoo.rl.normalization.put`);
    returns the wrappers that took it."""
    stacks = normalization.stacks(env)
    if not agent.normalization or (stacks[0] and not normalization.is_fresh([w for s in stacks for w in s])):
        return []
    took = []
    for j, theirs in enumerate(stacks):
        took += normalization.put(theirs, agent.normalization, source=source,
                                  env_name=f"the env ({env_identity(env)})", warn=kinds if j == 0 else ())
    return took


def _episodes(agent, e, episodes: int, base: int, max_steps: int | None,
              ended: Callable[[], object] = lambda: None) -> tuple[list[float], list[int]]:
    """Returns and lengths of ``episodes`` episodes of the env ``e``, episode ``i`` reset with ``base + i``;
    ``ended()`` after each."""
    returns, lengths = [], []
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
        ended()
    return returns, lengths


def _vector_episodes(agent, e, episodes: int, base: int, max_steps: int | None,
                     ended_one: Callable[[], object] = lambda: None) -> tuple[list[float], list[int]]:
    """Returns and lengths of ``episodes`` episodes of the vector env ``e``, in the order they end; env ``j``
    runs ``(episodes + j) // n`` of them (the first ones the env ends, so the share does not favour short
    episodes); ``ended_one()`` after each."""
    import gymnasium as gym

    mode = e.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode not in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
        raise ValueError(f"evaluate runs vector envs that reset their episodes themselves (NEXT_STEP or SAME_STEP "
                         f"autoreset); this one has {mode}")
    n = e.num_envs
    todo = np.array([(episodes + j) // n for j in range(n)])
    total, length = np.zeros(n), np.zeros(n, np.int64)
    resetting = np.zeros(n, bool)  # NEXT_STEP: this step only resets the env that ended
    counting = np.ones(n, bool)  # False while an episode cut at max_steps runs on to its end, uncounted
    returns: list[float] = []
    lengths: list[int] = []
    obs, _ = e.reset(seed=[base + j for j in range(n)])
    while todo.any():
        obs, reward, terminated, truncated, _ = e.step(agent.act(obs))
        ended = np.asarray(terminated) | np.asarray(truncated)
        live = ~resetting
        total[live] += np.asarray(reward, np.float64)[live]
        length[live] += 1
        cut = live & counting & ~ended & (max_steps is not None) & (length >= (max_steps or 0))
        for j in np.flatnonzero(live & ((ended & counting) | cut)):
            if todo[j]:
                returns.append(float(total[j]))
                lengths.append(int(length[j]))
                todo[j] -= 1
                ended_one()
        counting = np.where(ended & live, True, counting & ~cut)
        total[ended & live], length[ended & live] = 0.0, 0
        resetting = ended & live if mode == gym.vector.AutoresetMode.NEXT_STEP else np.zeros(n, bool)
    return returns, lengths


def whole_count(name: str, value: Any, minimum: int, unit: str) -> int:
    """``value`` as an int when it is a whole number >= ``minimum``: an integer, or a float without a
    fraction (``learn(1e4)``, as Stable-Baselines3 takes it); else a ValueError naming ``name`` and what came
    (``100.9`` steps would be run as 100 without a word)."""
    whole = isinstance(value, numbers.Integral) or (
        isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer())
    if isinstance(value, bool) or not whole or value < minimum:
        raise ValueError(f"{name} must be a whole number of {unit} >= {minimum}, got {value!r}")
    return int(value)
