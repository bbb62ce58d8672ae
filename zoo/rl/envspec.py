"""Which env a run trains on: the gymnasium spec that makes an equivalent one again, and the same facts
as one plain string that a checkpoint records.

A wrapper keeps the wrapped env's ``spec.id``, so the id alone names another env (Pendulum-v1 wrapped in
``RescaleAction(0, 1)`` acts in [0, 1], ``gym.make("Pendulum-v1", g=2.0)`` has other physics). gymnasium 1.x
records the make kwargs and every wrapper that records its arguments on ``env.spec``; ``gym.make(spec)``
builds the same stack again. The identity string is what a resume compares: two envs with the same
spaces but other kwargs, episode limit or wrappers are different experiments.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["env_identity", "single_spec"]

# make_vec records its own arguments in the spec's kwargs: they are not the single env's
_VECTOR_KWARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")
# how an env is shown, not how it behaves: a resume may render differently
_NOT_IDENTITY = ("render_mode",)


def single_spec(env: Any) -> Any:
    """The ``EnvSpec`` that ``gymnasium.make`` turns into one env like ``env`` (one of a vector env's), or
    None when the env has no registered id."""
    import gymnasium as gym

    if isinstance(env, gym.vector.VectorEnv):
        subs = getattr(env, "envs", None)  # SyncVectorEnv: the sub-env's own spec, wrappers included
        if subs:
            return getattr(subs[0], "spec", None)
        spec = getattr(env, "spec", None)
        if spec is None:
            return None
        return dataclasses.replace(spec, kwargs={k: v for k, v in spec.kwargs.items() if k not in _VECTOR_KWARGS})
    return getattr(env, "spec", None)


def env_identity(env: Any) -> str:
    """``env`` as a plain string: its id with the make kwargs and episode limit that differ from the
    registered ones, then its recorded wrappers (``"Pendulum-v1 + RescaleAction(max_action=1.0,
    min_action=0.0)"``); an env without an id is named by its class and wrappers."""
    import gymnasium as gym

    spec = single_spec(env)
    if spec is None:
        if isinstance(env, gym.vector.VectorEnv) and getattr(env, "envs", None):
            env = env.envs[0]
        wrappers = []
        while isinstance(env, gym.Wrapper):
            wrappers.append(type(env).__name__)
            env = env.env
        inner = type(env)
        return f"{inner.__module__}.{inner.__qualname__} (no registered id)" + "".join(
            f" + {name}" for name in reversed(wrappers))
    kwargs = {k: v for k, v in spec.kwargs.items() if k not in _NOT_IDENTITY}
    if spec.max_episode_steps != _registered_limit(spec.id):
        kwargs["max_episode_steps"] = spec.max_episode_steps
    text = f"{spec.id}({_arguments(kwargs)})" if kwargs else spec.id
    for wrapper in spec.additional_wrappers:
        # kwargs None: a wrapper that records no arguments (gym.make cannot rebuild it either)
        text += f" + {wrapper.name}({_arguments(wrapper.kwargs) if wrapper.kwargs is not None else '?'})"
    return text


def _registered_limit(env_id: str) -> int | None:
    import gymnasium as gym

    try:
        return gym.spec(env_id).max_episode_steps
    except gym.error.Error:
        return None


def _arguments(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_plain(v)!r}" for k, v in sorted(kwargs.items()))


def _plain(value: Any) -> Any:
    """A value as it reads the same in every process: numbers, strings and containers of them; a space by
    its description; a function or other object by its name (never by its address)."""
    from gymnasium import spaces

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, spaces.Space):
        return str(value)
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"<{name}>"
