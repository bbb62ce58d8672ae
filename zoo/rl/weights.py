"""Loading weights into a TD3 agent (``zoo.build("td3", weights=...)``, the loader :func:`zoo.rl.td3.td3`
registers): a safetensors file that :meth:`TD3Agent.save` or ``hub.add_weights`` wrote, in the spaces,
``net_arch`` and normalisation statistics its ``zoo.td3`` metadata records; a published file without that
metadata, read from its tensors' shapes; or a run's checkpoint (``td3_last.pt``), built with the config
:func:`checkpoint_build_config` reads from it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from zoo.registry import validate_config
from zoo.rl import normalization

if TYPE_CHECKING:
    from zoo.rl.td3 import TD3Agent

__all__ = ["checkpoint_build_config", "load_weights", "saved_spec"]


def checkpoint_build_config(state: dict[str, Any]) -> dict[str, Any]:
    """The ``zoo.build("td3", ...)`` config of the agent a TD3 checkpoint (``td3_last.pt``) holds, as short as
    it can be said: its env id, its preset and seed where not the defaults, and the hyperparameters its
    preset does not give that env."""
    from zoo.rl.config import preset_config

    saved = json.loads(state["describe"])
    settings = json.loads(state["settings"]) if "settings" in state else {}
    config = {k: settings.get(k, v) for k, v in saved["config"].items()}  # settings: after a resume's changes
    preset, env_id = saved.get("preset") or "rl-zoo", saved.get("env_id")
    try:
        defaults = preset_config(preset, env_id or "").to_dict()
    except ValueError:  # a preset this version does not know: every value is said
        defaults = {}
    out: dict[str, Any] = {"env": env_id} if env_id is not None else {}
    if preset != "rl-zoo":
        out["preset"] = preset
    if settings.get("seed", 0):
        out["seed"] = int(settings["seed"])
    out.update({k: v for k, v in config.items() if k not in defaults or defaults[k] != v})
    return out


def load_weights(agent: TD3Agent, path, entry, requested: dict[str, Any] | None = None) -> TD3Agent:
    """``zoo.build("td3", weights=...)``: the four networks from a safetensors file written by
    :meth:`TD3Agent.save` / ``hub.add_weights``, in the spaces its ``zoo.td3`` metadata records
    (:func:`_file_spaces`), or from a run's checkpoint (``td3_last.pt``: the networks at its last step, not
    the best evaluated ones, which are ``td3_best.safetensors``), built with the checkpoint's config
    (:func:`checkpoint_build_config`) under the caller's. The file's ``net_arch`` is used unless the caller
    asked for another (an error that names both)."""
    from zoo import hub
    from zoo.rl.td3 import TD3Agent, td3  # at call time: td3.py imports this module to register the builder

    checkpoint = _run_checkpoint(path)
    if checkpoint is not None:
        agent = td3(**validate_config("td3", {**checkpoint_build_config(checkpoint), **(requested or {})}))
        meta = {"zoo.td3": checkpoint["describe"]}
    else:
        meta = hub.read_metadata(path) if hub.state.is_safetensors(path) else {}  # by its bytes, not its name
    saved = json.loads(meta["zoo.td3"]) if "zoo.td3" in meta else {}  # the file's description of its agent
    if saved:
        obs_space, act_space, env_id = _file_spaces(agent, saved, path, (requested or {}).get("env") is not None)
        arch = tuple(saved.get("config", {}).get("net_arch", agent.config.net_arch))
        _refuse_other_arch(entry.name if entry is not None else path, arch, (requested or {}).get("net_arch"))
        # files from TD3Agent.save before it wrote zoo.config record their net_arch in zoo.td3 only (the
        # builder used the preset's); the spaces differ where the file's are not the built env's
        if (arch != tuple(agent.config.net_arch) or env_id != agent.env_id or obs_space is not agent.observation_space
                or act_space is not agent.action_space):
            agent = TD3Agent(obs_space, act_space, dataclasses.replace(agent.config, net_arch=arch), env_id=env_id,
                             preset=agent.preset, device=agent.device, seed=agent.seed)
    tensors = checkpoint["networks"] if checkpoint is not None else hub.load_state_dict(path)
    if "zoo.td3" not in meta:
        agent = _fit_tensors(agent, tensors, path, entry, meta, requested or {})
    agent.load_network_state_dict({k: v for k, v in tensors.items() if not k.startswith("normalization.")})
    stats = dict(checkpoint.get("normalization") or {}) if checkpoint is not None else {
        k.removeprefix("normalization."): v for k, v in tensors.items() if k.startswith("normalization.")}
    _load_statistics(agent, stats, saved, path, (requested or {}).get("env"))
    return agent


def _refuse_other_arch(name: Any, arch: tuple[int, ...], asked: Any) -> None:
    if asked is not None and tuple(asked) != arch:
        raise ValueError(
            f"weights {name} hold a TD3 agent with net_arch {arch}, but net_arch {tuple(asked)} was asked for: "
            "leave net_arch out to use the file's, or build without weights= to train an agent of that shape")


def _fit_tensors(agent: TD3Agent, tensors: dict[str, torch.Tensor], path, entry, meta: dict[str, str],
                 requested: dict[str, Any]) -> TD3Agent:
    """A file without ``zoo.td3`` metadata (the published agents, written before it existed): the dims and
    ``net_arch`` its actor's tensors have, checked against the caller's env and ``net_arch`` with the errors
    a described file gets (the env it was trained on is its manifest entry's, or its ``zoo.config``'s); the
    file's ``net_arch`` is used unless the caller asked for another. Tensors of another layout are left to
    :meth:`TD3Agent.load_network_state_dict`, which names them."""
    from zoo.rl.td3 import TD3Agent

    layout = _actor_layout(tensors)
    if layout is None:
        return agent
    obs_dim, act_dim, arch = layout
    name = entry.name if entry is not None else path
    _refuse_other_arch(name, arch, requested.get("net_arch"))
    if (obs_dim, act_dim) != (agent.obs_dim, agent.act_dim):
        config = entry.config if entry is not None else json.loads(meta.get("zoo.config", "{}"))
        trained = repr(config["env"]) if isinstance(config.get("env"), str) else "an env"
        given = requested.get("env") is not None
        fix = ("pass the env the agent was trained on (with its wrappers), or leave env out to use the file's" if given
               else f"build it with env=<the env it was trained on>: zoo.build('td3', weights={str(name)!r}, env=...)")
        raise ValueError(
            f"weights {name} were trained on {trained} with obs_dim {obs_dim}, act_dim {act_dim}; the env "
            f"{'given' if given else 'built'} ({agent.env_id!r}) has obs_dim {agent.obs_dim}, act_dim {agent.act_dim}: "
            f"{fix}")
    if arch != tuple(agent.config.net_arch):
        agent = TD3Agent(agent.observation_space, agent.action_space, dataclasses.replace(agent.config, net_arch=arch),
                         env_id=agent.env_id, preset=agent.preset, device=agent.device, seed=agent.seed)
    return agent


def _actor_layout(tensors: dict[str, torch.Tensor]) -> tuple[int, int, tuple[int, ...]] | None:
    """``(obs_dim, act_dim, net_arch)`` of the actor ``tensors`` hold (:class:`zoo.rl.networks.Actor`'s
    ``actor.hidden.<i>.weight`` ... ``actor.out.weight``), or None when they hold no actor of that layout."""
    hidden = []
    while (w := tensors.get(f"actor.hidden.{len(hidden)}.weight")) is not None and w.dim() == 2:
        hidden.append(tuple(w.shape))
    out = tensors.get("actor.out.weight")
    if not hidden or out is None or out.dim() != 2:
        return None
    return hidden[0][1], int(out.shape[0]), tuple(h[0] for h in hidden)


def _load_statistics(agent: TD3Agent, stats: dict[str, torch.Tensor], saved: dict[str, Any], path,
                     env: Any) -> None:
    """A file's normalisation statistics become the loaded agent's, and its env spec the agent's env where the
    caller gave none; an env object the caller gave takes the statistics into its normalisers (a warning
    says what the file holds and what the env has when they do not pair). A file without them (every file
    written before they were saved) loads as before."""
    import gymnasium as gym

    agent.normalization = stats
    if env is None:
        agent.env_spec = saved_spec(saved)
        agent.env_spec_lost = None if agent.env_spec is not None else _lost_spec(saved)
    elif stats and isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        from zoo.rl.envspec import env_identity

        for j, theirs in enumerate(normalization.stacks(env)):  # a vector env's: every sub-env's
            normalization.put(theirs, stats, source=f"weights {path}", env_name=f"the env given ({env_identity(env)})",
                              warn=normalization.RUNNING_STATS if j == 0 else ())


def saved_spec(saved: dict[str, Any]) -> Any:
    """The ``EnvSpec`` a file's description records (``env_spec``: the env its statistics are of), or None
    (none recorded, or one this gymnasium cannot read: the caller passes the env)."""
    import gymnasium as gym

    from zoo.rl.envspec import spec_from_json

    if saved.get("env_spec") is None:
        return None
    try:
        return spec_from_json(saved["env_spec"])
    except (gym.error.Error, ValueError, TypeError, KeyError):
        return None


def _lost_spec(saved: dict[str, Any]) -> str | None:
    """How a file names the env whose spec it could not record (``env_spec_unwritable``), or could record but this
    gymnasium cannot read; None where the file's env is its bare id (files written before either was noted)."""
    if saved.get("env_spec_unwritable"):
        return str(saved["env_spec_unwritable"])
    if saved.get("env_spec") is not None:
        spec = saved["env_spec"]
        name = spec.get("id") if isinstance(spec, dict) else None
        return f"an env whose spec this gymnasium cannot read back ({name!r} with its wrappers)"
    return None


def _run_checkpoint(path) -> dict[str, Any] | None:
    """The TD3 run checkpoint at ``path`` (what ``zoo.train(..., checkpoint_dir=)`` writes as ``td3_last.pt``,
    its digest checked), or None for any other file: the weights loader reads those and names what is wrong."""
    from zoo import hub
    from zoo.engine.checkpoint import CheckpointError, check_digest, load_plain
    from zoo.rl.resume import is_td3_checkpoint

    if not os.path.isfile(path) or hub.state.is_safetensors(path):
        return None
    try:
        state = load_plain(path, "cpu", what="TD3 checkpoint")
    except CheckpointError:
        return None
    if not is_td3_checkpoint(state):
        return None
    check_digest(state, path, "TD3 checkpoint")
    return state


def _file_spaces(agent: TD3Agent, saved: dict[str, Any], path, env_given: bool) -> tuple[Any, Any, str | None]:
    """``(observation space, action space, env id)`` for the agent a file describes. Its dims and action
    bounds are what the actor's outputs were scaled to, so a loaded agent acts as the saved one did: an
    env the caller gave (``env_given``) must have them (an error naming both otherwise); without one, the
    built env's spaces serve where they match and the file's are used where they do not (a wrapped env
    keeps its id, e.g. ``RescaleAction``; an env without an id leaves nothing to make)."""
    from gymnasium import spaces

    obs_dim, act_dim = int(saved["obs_dim"]), int(saved["act_dim"])
    obs_shape = tuple(saved.get("obs_shape", (obs_dim,)))  # files before it was recorded read flat observations
    own_low, own_high = agent.action_bounds
    low = np.asarray(saved.get("action_low", own_low), np.float32)
    high = np.asarray(saved.get("action_high", own_high), np.float32)
    env_id = saved.get("env_id")
    same_obs = obs_shape == agent.obs_shape
    same_act = act_dim == agent.act_dim and np.array_equal(low, own_low) and np.array_equal(high, own_high)
    if env_given:
        if not (same_obs and same_act):
            raise ValueError(
                f"weights {path} were trained on {env_id!r} with obs_dim {obs_dim}, act_dim {act_dim}, actions in "
                f"{low.tolist()}..{high.tolist()}; the env given ({agent.env_id!r}) has obs_dim {agent.obs_dim}, act_dim "
                f"{agent.act_dim}, actions in {own_low.tolist()}..{own_high.tolist()}: pass the env the "
                "agent was trained on (with its wrappers), or leave env out to use the file's spaces")
        return agent.observation_space, agent.action_space, agent.env_id
    same_env = env_id is not None and env_id == agent.env_id
    obs_space = (agent.observation_space if same_obs and same_env
                 else spaces.Box(-np.inf, np.inf, obs_shape, np.float32))
    if same_act and same_env:
        return obs_space, agent.action_space, env_id
    # the saved space's dtype and bounds (files before they were recorded: float32, the bounds the actor scales to)
    dtype = np.dtype(saved.get("action_dtype", "float32"))
    space_low = np.asarray(saved.get("action_space_low", low), dtype)
    space_high = np.asarray(saved.get("action_space_high", high), dtype)
    return obs_space, spaces.Box(space_low, space_high, dtype=dtype), env_id
