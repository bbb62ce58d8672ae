"""The running statistics of an env's normalisation wrappers (gymnasium's ``NormalizeObservation`` /
``NormalizeReward``), as tensors a weights file or a checkpoint holds, and put back into another env's.

A policy trained behind ``NormalizeObservation`` acts on observations scaled by the training env's running
mean and variance: the same weights behind a wrapper with fresh statistics (mean 0, var 1, what
``gymnasium.make`` of the env's spec gives) see another input scale. Stable-Baselines3 saves ``VecNormalize``
in a file of its own; zoo's one weights file carries them, keyed ``<kind>.<i>.<field>``: ``kind`` is the
wrapper's statistics attribute (``obs_rms``, ``return_rms``), ``i`` counts the wrappers of that kind in the
stack outermost first, ``field`` is ``mean``, ``var`` or ``count`` (and, in a run's checkpoint only,
``discounted_reward``: ``NormalizeReward``'s running discounted return, which an exact resume continues).
"""

from __future__ import annotations

import contextlib
import re
import warnings
from typing import Any

import numpy as np
import torch

from zoo._stacklevel import user_stacklevel

__all__ = ["RUNNING_STATS", "counts", "describe", "env_rewards", "frozen", "hidden_normalizers", "is_fresh", "normalizers",
           "observations", "put", "raw_rewards", "reward_normalizers", "stacks", "statistics"]

RUNNING_STATS = ("obs_rms", "return_rms")  # NormalizeObservation's, NormalizeReward's (single and vector)
_WRAPPER = {"obs_rms": "NormalizeObservation", "return_rms": "NormalizeReward"}
_FIELDS = ("mean", "var", "count")
_ACCUMULATOR = "discounted_reward"  # NormalizeReward's discounted return so far (it carries over truncations)
_KEY = re.compile(r"^(obs_rms|return_rms)\.(\d+)\.")


def normalizers(env: Any, sub: int = 0) -> list[Any]:
    """The wrappers in ``env``'s stack (a vector env's own, then its sub-env ``sub``'s) that normalise with
    running statistics they update as they step: gymnasium's ``NormalizeObservation`` / ``NormalizeReward``,
    outermost first."""
    found = []
    for _ in range(64):  # deeper is no wrapper stack
        if env is None:
            break
        if hasattr(env, "update_running_mean") and any(hasattr(env, a) for a in RUNNING_STATS):
            found.append(env)
        inner = getattr(env, "env", None)
        subs = getattr(env, "envs", None) or []
        env = inner if inner is not None else (subs[sub] if sub < len(subs) else None)
    return found


def hidden_normalizers(env: Any) -> list[str]:
    """The names of the normalising wrappers (``NormalizeObservation`` / ``NormalizeReward``) inside the sub-envs
    of an ``AsyncVectorEnv`` (under any vector wrappers), as its spec records them (``make_vec``'s ``wrappers=``,
    the env spec's ``additional_wrappers``); empty for any other env. Those wrappers live in the worker
    processes, where :func:`normalizers` cannot reach: their statistics could be neither saved, nor put in, nor
    frozen, nor their reward scaling taken off."""
    import gymnasium as gym

    for _ in range(64):  # deeper is no wrapper stack
        if not isinstance(env, gym.vector.VectorWrapper):
            break
        env = env.env
    spec = getattr(env, "spec", None)
    if not isinstance(env, gym.vector.AsyncVectorEnv) or spec is None:
        return []
    names = [getattr(getattr(w, "func", w), "__name__", type(w).__name__) for w in spec.kwargs.get("wrappers") or ()]
    names += [w.name for w in spec.additional_wrappers or ()]
    return [n for n in names if n in _WRAPPER.values()]


def stacks(env: Any) -> list[list[Any]]:
    """:func:`normalizers` of each of a vector env's sub-envs (the vector env's own wrappers in each), one list
    for any other env: a ``NormalizeObservation`` in every sub-env of ``make_vec(..., wrappers=[...])`` keeps
    statistics of its own, which a checkpoint saves, a resume restores and an evaluation freezes one by one."""
    n = len(_sub_envs(env)) or 1
    return [normalizers(env, j) for j in range(n)]


def _sub_envs(env: Any) -> list[Any]:
    for _ in range(64):  # deeper is no wrapper stack
        if env is None or getattr(env, "envs", None):
            break
        env = getattr(env, "env", None)
    return list(getattr(env, "envs", None) or [])


def _of_kind(wrappers: list[Any], kind: str) -> list[Any]:
    return [w for w in wrappers if hasattr(w, kind)]


def statistics(wrappers: list[Any], *, accumulators: bool = False) -> dict[str, torch.Tensor]:
    """The running statistics of ``wrappers`` (:func:`normalizers`) as CPU tensors of their own dtype, keyed
    ``<kind>.<i>.<field>``; ``accumulators`` adds ``NormalizeReward``'s discounted return (a run's state)."""
    out: dict[str, torch.Tensor] = {}
    for kind in RUNNING_STATS:
        for i, w in enumerate(_of_kind(wrappers, kind)):
            rms = getattr(w, kind)
            for name in _FIELDS:  # np.array copies: the tensor must not follow the wrapper's later updates
                out[f"{kind}.{i}.{name}"] = torch.from_numpy(np.array(getattr(rms, name)))
            if accumulators and kind == "return_rms" and hasattr(w, _ACCUMULATOR):
                out[f"{kind}.{i}.{_ACCUMULATOR}"] = torch.from_numpy(np.array(getattr(w, _ACCUMULATOR)))
    return out


def counts(stats: dict[str, torch.Tensor]) -> dict[str, int]:
    """How many wrappers of each kind ``stats`` holds statistics for (kinds with none left out)."""
    found: dict[str, set[int]] = {}
    for key in stats:
        m = _KEY.match(key)
        if m:
            found.setdefault(m.group(1), set()).add(int(m.group(2)))
    return {kind: len(found[kind]) for kind in RUNNING_STATS if kind in found}


def describe(numbers: dict[str, int]) -> str:
    """``{"obs_rms": 1}`` -> ``"1 NormalizeObservation (obs_rms)"``; ``"none"`` when empty."""
    parts = [f"{n} {_WRAPPER[kind]} ({kind})" for kind, n in numbers.items() if n]
    return " and ".join(parts) or "none"


def is_fresh(wrappers: list[Any]) -> bool:
    """True when none of ``wrappers`` has been updated yet (a wrapper starts at count 1e-4, and each update
    adds at least one sample): its statistics say nothing, so an agent's may be put in."""
    return all(float(getattr(w, kind).count) < 1.0 for w in wrappers for kind in RUNNING_STATS if hasattr(w, kind))


def put(wrappers: list[Any], stats: dict[str, torch.Tensor], *, source: str, env_name: str,
        warn: tuple[str, ...] = RUNNING_STATS) -> list[Any]:
    """Copy ``stats`` into ``wrappers`` (:func:`normalizers` of one env), kind by kind; returns the wrappers
    that took them. A kind whose number of wrappers (or statistics' shape) differs between the two is left
    as it is, with a warning (for the kinds in ``warn``) that says what ``source`` holds and what ``env_name``
    has."""
    have, theirs = counts(stats), {kind: len(_of_kind(wrappers, kind)) for kind in RUNNING_STATS}
    theirs = {kind: n for kind, n in theirs.items() if n}
    took, unpaired = [], []
    for kind in RUNNING_STATS:
        ours_k = _of_kind(wrappers, kind)
        if have.get(kind, 0) != len(ours_k) or not all(
                np.shape(getattr(w, kind).mean) == tuple(stats[f"{kind}.{i}.mean"].shape) for i, w in enumerate(ours_k)):
            unpaired.append(kind)
            continue
        for i, w in enumerate(ours_k):
            rms = getattr(w, kind)
            rms.mean = stats[f"{kind}.{i}.mean"].numpy().copy()
            rms.var = stats[f"{kind}.{i}.var"].numpy().copy()
            rms.count = float(stats[f"{kind}.{i}.count"])
            acc = stats.get(f"{kind}.{i}.{_ACCUMULATOR}")
            if acc is not None and hasattr(w, _ACCUMULATOR):
                setattr(w, _ACCUMULATOR, acc.numpy().copy())
            took.append(w)
    lost = [kind for kind in unpaired if have.get(kind, 0) and kind in warn]
    if lost:
        effect = ("the policy sees another input scale than it was trained on" if "obs_rms" in lost else
                  "its rewards (and returns) are scaled otherwise than in training")
        warnings.warn(
            f"{source} holds the running statistics of {describe(have)}; {env_name} normalises with "
            f"{describe(theirs)}: the {' and '.join(lost)} statistics cannot be put in, so {effect}; pass an env "
            "wrapped as the training env was (an agent whose weights record that env's spec makes it when env is "
            "left out)", stacklevel=user_stacklevel())
    return took


def observations(stats: dict[str, torch.Tensor], obs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``obs`` (one observation of ``shape``, or a batch of them) as the training env's ``NormalizeObservation``
    wrappers hand them on with the statistics ``stats`` holds, frozen, as an evaluation applies them: the same
    gymnasium wrappers, around a stand-in env, take those statistics (:func:`put`) and scale ``obs`` innermost
    first. ``obs`` comes back as it is where ``stats`` holds none."""
    import gymnasium as gym
    from gymnasium.wrappers import NormalizeObservation

    n = counts(stats).get("obs_rms", 0)
    if not n:
        return obs
    env: Any = _stand_in(gym.spaces.Box(-np.inf, np.inf, shape, np.float32))
    for _ in range(n):
        env = NormalizeObservation(env)
    wrappers = normalizers(env)
    put(wrappers, stats, source="this agent", env_name="its observations", warn=("obs_rms",))
    with frozen(wrappers):
        for w in reversed(wrappers):
            obs = w.observation(obs)
    return obs


def _stand_in(observation_space: Any) -> Any:
    """An env of ``observation_space`` that is never stepped, for :func:`observations`: what
    ``NormalizeObservation`` reads of the env it wraps."""
    import gymnasium as gym

    env = gym.Env()
    env.observation_space, env.action_space = observation_space, gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    return env


@contextlib.contextmanager
def frozen(wrappers: list[Any]):
    """``wrappers`` stop updating their statistics inside the block (their own setting restored after)."""
    unique = list({id(w): w for w in wrappers}.values())  # a vector env's own wrapper is in every sub-env's stack
    flags = [(w, w.update_running_mean) for w in unique]
    for w, _ in flags:
        w.update_running_mean = False
    try:
        yield
    finally:
        for w, flag in flags:
            w.update_running_mean = flag


def reward_normalizers(env: Any) -> list[tuple[Any, slice | int]]:
    """The ``NormalizeReward`` wrappers in ``env``'s stack (a vector env's own and every sub-env's), each with the
    rows of a step's rewards it scales: all of them, or its sub-env's index."""
    found, stack = [], [(env, slice(None))]
    while stack:
        e, rows = stack.pop()
        for _ in range(64):  # deeper is no wrapper stack
            if e is None:
                break
            if hasattr(e, "update_running_mean") and hasattr(e, "return_rms"):
                found.append((e, rows))
            inner = getattr(e, "env", None)
            if inner is None:
                stack.extend((sub, i) for i, sub in enumerate(getattr(e, "envs", None) or []))
            e = inner
    return found


def env_rewards(scalers: list[tuple[Any, slice | int]], reward: Any) -> np.ndarray:
    """``reward``, which the env of ``scalers`` (:func:`reward_normalizers`) just returned from ``step``, in the
    env's own units: each ``NormalizeReward`` divided it by ``sqrt(return_rms.var + epsilon)`` after that
    step's update (gymnasium's formula), so this multiplies it back. A training episode's return then reads as
    an evaluation's (:func:`raw_rewards`), as SB3's ``Monitor`` records it beneath ``VecNormalize``; the agent
    still learns from the scaled reward."""
    reward = np.asarray(reward, dtype=np.float64)
    scale = np.ones(reward.shape if reward.ndim else (1,))
    for wrapper, rows in scalers:
        scale[rows] *= np.sqrt(wrapper.return_rms.var + wrapper.epsilon)
    return reward * (scale if reward.ndim else scale[0])


@contextlib.contextmanager
def raw_rewards(env: Any):
    """Inside the block the ``NormalizeReward`` wrappers of ``env`` (a vector env's own and every sub-env's)
    hand on the rewards of the env they wrap, unscaled, and update nothing: an evaluation's returns are the
    env's own, on one scale from one evaluation to the next, as rl-baselines3-zoo evaluates
    (``VecNormalize(norm_reward=False)``, Monitor's returns). Each wrapper's ``step`` is shadowed by its inner
    env's for the block (an instance attribute), which the wrappers around it call as ``self.env.step``."""
    scaling = [w for w, _ in reward_normalizers(env)]
    for w in scaling:
        w.step = w.env.step
    try:
        yield
    finally:
        for w in scaling:
            vars(w).pop("step", None)
