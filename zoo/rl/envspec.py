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
import json
from typing import Any

import numpy as np

__all__ = ["acting_spaces", "env_identity", "own_spec", "single_spec", "spec_from_json", "spec_identity",
           "spec_to_json"]

# make_vec records its own arguments in the spec's kwargs: they are not the single env's
_VECTOR_KWARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")
_MAKE_FIELDS = ("max_episode_steps", "disable_env_checker")  # gymnasium.make's arguments, EnvSpec fields
# how an env is shown, not how it behaves: a resume may render differently
_NOT_IDENTITY = ("render_mode",)
# wrappers that record no constructor arguments (gymnasium cannot make them again) and leave the env as it is:
# left out of an env's spec and identity (SB3's Monitor, around every env of SB3's make_vec_env and rl-zoo)
_PASS_THROUGH = ("stable_baselines3.common.monitor:Monitor",)
# gymnasium.wrappers.vector wrappers that leave what the agent sees and does as it is (they record, render,
# reshape infos, or clip actions TD3 keeps in the bounds anyway): a vector env under them is the same env
_TRANSPARENT_VECTOR = ("RecordEpisodeStatistics", "DictInfoToList", "RecordVideo", "HumanRendering", "ClipAction")


def acting_spaces(env: Any) -> tuple[Any, Any]:
    """``(observation space, action space)`` an agent acts in on ``env`` (one of a vector env's). The action
    space is the one under gymnasium's ``ClipAction``, which since gymnasium 1.0 widens it to
    ``Box(-inf, inf)`` and clips what it is given into its env's bounds: actions in those bounds (TD3's
    scaled tanh) pass it unchanged."""
    import gymnasium as gym
    from gymnasium.wrappers import ClipAction
    from gymnasium.wrappers.vector import ClipAction as VectorClipAction

    if isinstance(env, gym.vector.VectorEnv):
        obs, space = env.single_observation_space, env.single_action_space
        while isinstance(env, gym.vector.VectorWrapper):
            if isinstance(env, VectorClipAction) and env.single_action_space == space:
                space = env.env.single_action_space
            elif env.env.single_action_space != space:  # a wrapper above this one set the space
                return obs, space
            env = env.env
        subs = getattr(env, "envs", None)  # SyncVectorEnv: its sub-envs may clip too
        if subs and subs[0].action_space == space:
            space = acting_spaces(subs[0])[1]
        return obs, space
    obs, space = env.observation_space, env.action_space
    while isinstance(env, gym.Wrapper):
        if isinstance(env, ClipAction) and env.action_space == space:
            space = env.env.action_space
        elif env.env.action_space != space:  # a wrapper above this one (RescaleAction, say) set the space
            break
        env = env.env
    return obs, space


def single_spec(env: Any) -> Any:
    """The ``EnvSpec`` that ``gymnasium.make`` turns into one env like ``env`` (one of a vector env's), or
    None when the env has no registered id."""
    import gymnasium as gym

    if isinstance(env, gym.vector.VectorEnv):
        env = _under_transparent(env)
        outer = _vector_wrappers(env)
        while isinstance(env, gym.vector.VectorWrapper):
            env = env.env
        subs = getattr(env, "envs", None)  # SyncVectorEnv: the sub-env's own spec, wrappers included
        if subs:
            spec = getattr(subs[0], "spec", None)
            return _with_unmade(spec, outer)
        spec = getattr(env, "spec", None)
        if spec is None:
            return None
        kwargs = {k: v for k, v in spec.kwargs.items() if k not in _VECTOR_KWARGS}
        # make_vec's spec keeps gymnasium.make's own arguments among the env's kwargs, where making one env
        # from it passed them to the env (PendulumEnv.__init__() got an unexpected keyword 'max_episode_steps')
        fields = {k: kwargs.pop(k) for k in _MAKE_FIELDS if k in kwargs}
        # make_vec's wrappers= live in AsyncVectorEnv's worker processes, whose specs cannot be read here
        # (get_attr("spec") pickles them, and a lambda's failure shuts a worker down): without them the spec
        # named the bare env, which evaluations then ran on; named, they make the env one gymnasium cannot make
        inner = [_unmade(w) for w in spec.kwargs.get("wrappers") or ()]
        return _with_unmade(dataclasses.replace(spec, kwargs=kwargs, **fields), [*inner, *outer])
    return getattr(env, "spec", None)


def _vector_wrappers(env: Any) -> list[Any]:
    """The ``WrapperSpec`` (arguments unrecorded) of each vector wrapper around ``env``, innermost first: a
    vector wrapper (``gymnasium.wrappers.vector.NormalizeObservation``) is no part of a sub-env's spec, and
    ``gymnasium.make`` makes one env without it."""
    import gymnasium as gym

    found = []
    while isinstance(env, gym.vector.VectorWrapper):
        # an evaluation takes NormalizeReward's scaling off (normalization.raw_rewards): one env without it is
        # the env evaluated
        if not (type(env).__name__ == "NormalizeReward" and type(env).__module__.startswith("gymnasium.wrappers")):
            found.append(_unmade(type(env)))
        env = env.env
    return found[::-1]


def _unmade(wrapper: Any) -> Any:
    """A wrapper (a class or a function of the env) as a ``WrapperSpec`` that records no arguments."""
    from gymnasium.envs.registration import WrapperSpec

    name = getattr(wrapper, "__qualname__", None) or type(wrapper).__qualname__
    return WrapperSpec(name.rsplit(".", 1)[-1], f"{getattr(wrapper, '__module__', '?')}:{name}", None)


def _with_unmade(spec: Any, wrappers: list[Any]) -> Any:
    if spec is None or not wrappers:
        return spec
    return dataclasses.replace(spec, additional_wrappers=(*spec.additional_wrappers, *wrappers))


def own_spec(env: Any) -> Any:
    """The spec an agent built or trained on ``env`` keeps as its env (what it evaluates and trains on when
    no env is given): ``env``'s spec (:func:`single_spec`, without ``render_mode``) where the bare id makes
    another env (make kwargs, an episode limit or wrappers of its own: ``RescaleAction`` changes the action
    bounds, ``TransformReward`` the returns), else None. A spec with a wrapper that records no arguments is
    kept too: ``gymnasium.make`` cannot build it again, and making it fails saying so
    (:func:`zoo.rl.evaluation.make_env`; the agent acts on the env object itself meanwhile, ``env_object``), where
    falling back to the bare id would train and evaluate on another env without a word (a reward wrapper's returns
    1000x apart). Wrappers known to leave the env as it is (:data:`_PASS_THROUGH`: SB3's ``Monitor``) are left
    out of the spec."""
    spec = without_pass_through(single_spec(env))
    if spec is None or _spec_identity(spec) == spec.id:
        return None
    if "render_mode" in spec.kwargs:  # nobody watches its evaluations
        spec = dataclasses.replace(spec, kwargs={k: v for k, v in spec.kwargs.items() if k != "render_mode"})
    return spec


def unmade_wrappers(spec: Any) -> list[str]:
    """The names of ``spec``'s wrappers that record no constructor arguments: ``gymnasium.make`` cannot make
    them again (empty for an id or None)."""
    return [w.name for w in getattr(spec, "additional_wrappers", ()) if w.kwargs is None]


def default_env(agent: Any) -> Any:
    """What an agent acts in when no env is given: where the env it was built or last trained on holds a
    wrapper gymnasium cannot make again (a user's, SB3's Monitor), that env object (``agent.env_object``, kept in
    memory as SB3 keeps ``model.env``); else its spec (or bare id). A loaded agent has no object, and making a
    spec it cannot make says why; one whose file could not record its env's spec (``agent.env_spec_lost``) is
    refused, where its bare id would make another env without a word."""
    if getattr(agent, "env_object", None) is not None:
        return agent.env_object
    spec = getattr(agent, "env_spec", None)
    lost = getattr(agent, "env_spec_lost", None)
    if spec is None and lost:
        raise ValueError(f"this agent was trained on {lost}, whose spec its weights file could not record (a "
                         f"make kwarg or wrapper argument that JSON cannot write, such as a function), so its id "
                         f"{agent.env_id!r} alone would make another env; expected env=<that env, made as in "
                         "training>, got none")
    return spec or agent.env_id


# how a numpy array in a spec's kwargs (RescaleAction's per-dimension bounds) is written in JSON
_ARRAY = "__ndarray__"


def spec_to_json(spec: Any) -> dict[str, Any] | None:
    """``spec`` as JSON data (what a weights file's description holds), or None where its kwargs hold what
    JSON cannot (an object, a function). Numpy scalars and arrays are written as
    ``{"__ndarray__": values, "dtype": name}``, which :func:`spec_from_json` reads back as what they were:
    gymnasium's own ``to_json`` refuses both, and ``RescaleAction`` takes its bounds as numpy values (not
    lists; a Python float it widens to float64, with a warning)."""
    plain = dataclasses.replace(spec, kwargs=_encode(spec.kwargs), additional_wrappers=tuple(
        dataclasses.replace(w, kwargs=_encode(w.kwargs)) for w in spec.additional_wrappers))
    try:
        return json.loads(plain.to_json())
    except (ValueError, TypeError):
        return None


def spec_from_json(data: dict[str, Any]) -> Any:
    """The ``EnvSpec`` that :func:`spec_to_json` wrote (gymnasium's ``from_json``, arrays read back)."""
    from gymnasium.envs.registration import EnvSpec

    spec = EnvSpec.from_json(json.dumps(data))
    return dataclasses.replace(spec, kwargs=_decode(spec.kwargs), additional_wrappers=tuple(
        dataclasses.replace(w, kwargs=_decode(w.kwargs)) for w in spec.additional_wrappers))


def _encode(value: Any) -> Any:
    if isinstance(value, (np.generic, np.ndarray)):
        return {_ARRAY: value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_encode(v) for v in value)
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {_ARRAY, "dtype"}:
            values, dtype = value[_ARRAY], np.dtype(value["dtype"])
            return np.asarray(values, dtype=dtype) if isinstance(values, list) else dtype.type(values)
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def env_identity(env: Any) -> str:
    """``env`` as a plain string: its id with the make kwargs and episode limit that differ from the
    registered ones, then its recorded wrappers (``"Pendulum-v1 + RescaleAction(max_action=1.0,
    min_action=0.0)"``); an env without an id is named by its class and wrappers."""
    import gymnasium as gym

    spec = single_spec(env)
    if spec is None:
        if isinstance(env, gym.vector.VectorEnv):
            env = _under_transparent(env)
        if isinstance(env, gym.vector.VectorEnv) and getattr(env, "envs", None):
            env = env.envs[0]
        wrappers = []
        while isinstance(env, gym.Wrapper):
            wrappers.append(type(env).__name__)
            env = env.env
        inner = type(env)
        return f"{inner.__module__}.{inner.__qualname__} (no registered id)" + "".join(
            f" + {name}" for name in reversed(wrappers))
    return _spec_identity(spec)


def without_pass_through(spec: Any) -> Any:
    """``spec`` without the wrappers that record no arguments and change nothing (:data:`_PASS_THROUGH`: a
    spec with SB3's Monitor is made again, and is the same env, without it); None stays None."""
    if spec is None:
        return None
    kept = tuple(w for w in spec.additional_wrappers if not (w.kwargs is None and w.entry_point in _PASS_THROUGH))
    return spec if len(kept) == len(spec.additional_wrappers) else dataclasses.replace(spec, additional_wrappers=kept)


def had_unmade_wrappers(env: Any) -> bool:
    """True when ``env``'s spec holds a wrapper that records no arguments (SB3's Monitor too): the agent built or
    trained on it keeps the object itself (``env_object``), as SB3 keeps ``model.env``, so that a Monitor's log
    records the episodes ``learn()`` collects."""
    return bool(unmade_wrappers(single_spec(env)))


def spec_identity(spec: Any) -> str:
    """:func:`env_identity` of the env ``gymnasium.make(spec)`` makes: ``spec`` as one plain string."""
    return _spec_identity(spec)


def _spec_identity(spec: Any) -> str:
    """:func:`env_identity` of the env ``gymnasium.make(spec)`` would make (wrappers that change nothing left out)."""
    spec = without_pass_through(spec)
    kwargs = {k: v for k, v in spec.kwargs.items() if k not in _NOT_IDENTITY}
    if spec.max_episode_steps != _registered_limit(spec.id):
        kwargs["max_episode_steps"] = spec.max_episode_steps
    text = f"{spec.id}({_arguments(kwargs)})" if kwargs else spec.id
    for wrapper in spec.additional_wrappers:
        # kwargs None: a wrapper that records no arguments (gym.make cannot rebuild it either)
        text += f" + {wrapper.name}({_arguments(wrapper.kwargs) if wrapper.kwargs is not None else '?'})"
    return text


def _under_transparent(env: Any) -> Any:
    """A vector env without the outer vector wrappers that leave it the same env (``_TRANSPARENT_VECTOR``,
    CleanRL's ``RecordEpisodeStatistics``): its spec and identity are the env's under them."""
    import gymnasium as gym

    while isinstance(env, gym.vector.VectorWrapper) and type(env).__name__ in _TRANSPARENT_VECTOR and \
            type(env).__module__.startswith("gymnasium.wrappers.vector"):
        env = env.env
    return env


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
