"""The run's checkpoint (``td3_last.pt``): what it holds, writing and reading it, and resuming from it.

Exact resume (single env, CPU): periodic checkpoints are taken at episode boundaries, where the whole
state of the run is the agent (networks, optimizers, buffer, its torch generator, counters) plus the env's
``np_random`` state and the running statistics of its ``NormalizeObservation`` / ``NormalizeReward``
wrappers, so a resumed run replays the uninterrupted one bit for bit. A run that stops
mid-episode (its last checkpoint) cannot save the env's physics; it records how that episode started (the
reset's seed or the env's random state before it), and a resume resets the env the same way and steps it
with the episode's actions from the replay buffer, checking every observation and reward against the
buffer's. An env that does not reproduce them (its dynamics depend on more than its seed) gets a warning
and a fresh episode. With a vector env the episodes in progress at a checkpoint restart on resume (a
warning says so); one taken where no sub-env has an episode in progress (every episode ended at that step, or,
with NEXT_STEP autoreset, every sub-env's reset was that step) resumes exactly: the run keeps each sub-env's
random state from before the reset that began its episode, and a resume resets the sub-envs from them
(:func:`_restart_sub_envs`).

The file's format is this module's alone (:data:`CHECKPOINT_FORMAT`): ``format``, ``describe`` (the agent's
spaces and config, as its weights files carry them), ``settings`` (what a resume compares:
:data:`RESUME_APPLIED` may change), ``precision``, the agent's :meth:`~zoo.rl.td3.TD3Agent.training_state`
(networks, optimizers, buffer, generator, counters, ...), the run's ``env_rng``, ``episodes`` and
``run_state``, and a ``digest`` of its tensors. :func:`check_format` is what a file read must pass, and
:func:`load_checkpoint_state` checks the rest (spaces, settings, random stream, precision) before it loads.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.engine.precision import precision_record, resumed_precision
from zoo.rl import normalization
from zoo.rl.run import BEST_NAME, CHECKPOINT_NAME, Run, WrittenCheckpoint, keep_statistics, next_multiple

__all__ = ["CHECKPOINT_FORMAT", "RESUME_APPLIED", "check_format", "checkpoint_state", "env_rng_state",
           "is_td3_checkpoint", "load_checkpoint_state", "note_sub_env_starts", "reset_episode", "restore_env",
           "resume_path", "resume_run", "save_checkpoint", "set_env_rng_state", "sub_env_rng_states"]

log = logging.getLogger(__name__)


CHECKPOINT_FORMAT = "zoo.td3.checkpoint/1"
"""The ``format`` of a run's checkpoint (``td3_last.pt``): what :func:`checkpoint_state` writes, which
:func:`resume_run` resumes and ``zoo.build("td3", weights=)`` reads the networks of."""

# what a resumed run may change (zoo.engine.resume's policy): the optimizers' lr, the exploration noise's
# scale, and where the run ends; every other hyperparameter (and the seed) is refused with its values
RESUME_APPLIED = ("actor_lr", "critic_lr", "exploration_noise", "total_steps")


# -- the checkpoint's format -------------------------------------------------------------------------------

def is_td3_checkpoint(state: Any) -> bool:
    """Whether ``state`` (a file's contents as read) is a TD3 run's checkpoint, of the format this version writes."""
    return isinstance(state, dict) and state.get("format") == CHECKPOINT_FORMAT


def check_format(state: Any, source: Any) -> None:
    """A ``CheckpointError`` for anything but a TD3 checkpoint (``source``: the file or what it came from, for the
    message), naming what it is where it can (a network's training checkpoint) and the file a resume needs."""
    from zoo.engine.checkpoint import FORMAT, CheckpointError

    if is_td3_checkpoint(state):
        return
    fmt = state.get("format") if isinstance(state, dict) else type(state).__name__
    what = " (a network's training checkpoint: resume it with zoo.train on that network)" if fmt == FORMAT else ""
    raise CheckpointError(f"{source} is not a TD3 checkpoint: expected format {CHECKPOINT_FORMAT!r}, got {fmt!r}{what}; "
                          f"a TD3 resume needs the {CHECKPOINT_NAME} that zoo.train(agent, ..., "
                          "checkpoint_dir=...) writes")


def checkpoint_state(agent, run: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a run's checkpoint holds of the agent (weights_only-loadable): the format, the agent's description
    (its spaces and config, as its weights files carry it), its training state
    (:meth:`~zoo.rl.td3.TD3Agent.training_state`), the settings a resume compares (the agent's, and ``run``'s:
    the loop's own) and the precision it computed in (amp="auto" is decided per machine, and a resume keeps it)."""
    return {"format": CHECKPOINT_FORMAT, "describe": json.dumps(agent.describe()), **agent.training_state(),
            "settings": json.dumps({**agent.resume_settings(), **(run or {})}),
            "precision": precision_record(agent.precision, agent.device)}


def load_checkpoint_state(agent, state: dict[str, Any], run: dict[str, Any] | None = None,
                          what: str = "the checkpoint") -> dict[str, tuple[Any, Any]]:
    """Continue ``agent`` from :func:`checkpoint_state`. The checkpoint is checked first: its format, its spaces
    against the agent's, its settings against the agent's (and ``run``'s): :data:`RESUME_APPLIED` changes are
    applied and returned as ``{key: (saved, now)}``, any other change raises :class:`zoo.engine.ResumeError`
    before anything is loaded."""
    from zoo.rl.weights import saved_spec

    check_format(state, what)
    saved = json.loads(state["describe"])
    _refuse_other_spaces(agent, state, saved, what)
    recorded = json.loads(state["settings"]) if "settings" in state else saved["config"]
    changed = _reconcile(agent, recorded, {**agent.resume_settings(), **(run or {})}, what, run_keys=set(run or {}))
    same_stream = _stream_continues(agent.device, state["generator"], state.get("precision"), what)
    _keep_precision(agent, state.get("precision"), what)
    agent.load_training_state(state, fresh_stream=not same_stream)
    agent.env_spec = saved_spec(saved) or agent.env_spec
    return changed


def _refuse_other_spaces(agent, state: dict[str, Any], saved: dict[str, Any], what: str) -> None:
    """A checkpoint of an agent for other spaces is a ``ResumeError`` naming the build that fits it."""
    from zoo.engine.resume import ResumeError
    from zoo.rl.weights import checkpoint_build_config

    for key in ("obs_dim", "act_dim"):
        if saved[key] != getattr(agent, key):
            build = ", ".join(f"{k}={v!r}" for k, v in checkpoint_build_config(state).items())
            raise ResumeError(f"{what} is a TD3 run on {saved.get('env_id')!r} with {key}={saved[key]}; this "
                              f"agent (env {agent.env_id!r}) has {key}={getattr(agent, key)}: resume it with an "
                              f"agent built for that env, zoo.build('td3', {build})")


def _reconcile(agent, saved: dict[str, Any], current: dict[str, Any], what: str,
               run_keys: set[str] = frozenset()) -> dict[str, tuple[Any, Any]]:
    """``reconcile`` with a refusal that says how to fix the call: the agent's settings go to
    ``zoo.build``, the loop's (``run_keys``: the env, ``num_envs``) to ``zoo.train``."""
    from zoo.engine.resume import ResumeError, reconcile

    try:
        return reconcile(saved, current, applied=RESUME_APPLIED, what=what)
    except ResumeError as err:
        refused = {k: saved[k] for k in sorted(current)
                   if k in saved and saved[k] != current[k] and k not in RESUME_APPLIED}
        built = ", ".join(f"{k}={v!r}" for k, v in refused.items() if k not in run_keys)
        trained = ", ".join(f"{k}={v!r}" for k, v in refused.items() if k in run_keys)
        fixes = [(f"build the agent with the checkpoint's values (zoo.build('td3', env={agent.env_id!r}, "
                  f"{built}, ...))")] if built else []
        if trained:
            fixes.append(f"train it as the checkpointed run did ({trained})")
        raise ResumeError(f"{err}. To continue this TD3 run, {', '.join(fixes)} and pass zoo.train(agent, "
                          "..., resume=True) no other value for them") from None


def _stream_continues(device: torch.device, saved: torch.Tensor, precision: Any, what: str) -> bool:
    """Whether the saved state of the agent's random stream fits a generator on ``device``; False with a
    warning where it does not: a CPU generator (Mersenne Twister) and a CUDA one (Philox) keep different
    states, so a run checkpointed on one device continues on the other with a fresh stream, not exactly."""
    probe = torch.Generator(device=device)
    try:
        probe.set_state(saved.cpu())
    except (RuntimeError, TypeError, ValueError):
        written_on = precision.get("device", "another device") if isinstance(precision, dict) else "another device"
        warnings.warn(f"{what} was written on {written_on}; its random stream (exploration, replay "
                      f"sampling, target noise) cannot continue on {device}: the resumed run draws a "
                      "fresh one from the seed and the step count, so it will not repeat the uninterrupted "
                      "run exactly (resume on the device it was written on for that)",
                      stacklevel=user_stacklevel())
        return False
    return True


def _keep_precision(agent, recorded: Any, what: str) -> None:
    """A resume with ``amp="auto"`` keeps the precision the checkpointed run trained in
    (:func:`zoo.engine.precision.resumed_precision`, the engine's rule)."""
    decided = None if agent.precision == "fp32" else agent.precision
    kept = resumed_precision(agent.config.amp, recorded, agent.device, decided, what, allowed=("bf16", "fp32"))
    agent.use_precision(kept or "fp32")


# -- reading and writing td3_last.pt --------------------------------------------------------------------------

def _read_checkpoint(path: Path) -> dict[str, Any]:
    """The TD3 checkpoint at ``path``, read onto the CPU (loading copies each tensor to the agent's device;
    the generator state must stay a CPU byte tensor). An empty, truncated, corrupt or foreign file is a
    ``zoo.engine.CheckpointError`` naming it and how to go on."""
    from zoo.engine.checkpoint import check_digest, load_plain

    state = load_plain(path, "cpu", what="TD3 checkpoint", how=(
        f"resume from an older copy of {CHECKPOINT_NAME}, or start a fresh run (without resume, or in another "
        "checkpoint_dir)"))
    check_format(state, path)
    check_digest(state, path, "TD3 checkpoint")
    return state


def env_rng_state(env) -> str | None:
    return _rng_state(getattr(env.unwrapped, "_np_random", None))


def set_env_rng_state(env, state: str | None) -> None:
    if state is None:
        return
    env.unwrapped.np_random = _rng_of(state)


def _rng_state(rng: np.random.Generator | None) -> str | None:
    return None if rng is None else json.dumps(rng.bit_generator.state)


def _rng_of(state: str) -> np.random.Generator:
    st = json.loads(state)
    bitgen = getattr(np.random, st["bit_generator"])()
    bitgen.state = st
    return np.random.Generator(bitgen)


def sub_env_rng_states(run: Run, checkpoint_ahead: bool) -> list[dict[str, Any]] | None:
    """A SAME_STEP vector env's sub-envs' random states before a step (which resets the sub-envs whose episodes
    end in it), where reading them is cheap (a ``SyncVectorEnv``'s are in this process) or a checkpoint may
    follow the step (``checkpoint_ahead``): an ``AsyncVectorEnv`` answers ``get_attr`` from its worker
    processes, a round trip each step. None otherwise."""
    import gymnasium as gym

    base = _vector_base(run.env)
    if not (isinstance(base, gym.vector.SyncVectorEnv) or checkpoint_ahead):
        return None
    try:
        return [rng.bit_generator.state for rng in base.get_attr("np_random")]
    except AttributeError:  # a sub-env that is no gymnasium.Env: nothing to restart it from
        return None


def note_sub_env_starts(run: Run, done: np.ndarray, before: list[dict[str, Any]] | None = None) -> None:
    """Each sub-env whose episode just ended: its random state from before the reset that begins its next
    episode (a NEXT_STEP vector env resets it at its next step, from its state as it is now; a SAME_STEP one
    reset it in this step, from ``before``, :func:`sub_env_rng_states`), for a resume from a checkpoint where no
    episode is in progress (:func:`_restart_sub_envs`)."""
    if run.next_step_mode:
        try:
            before = [rng.bit_generator.state for rng in _vector_base(run.env).get_attr("np_random")]
        except AttributeError:  # a sub-env that is no gymnasium.Env: nothing to restart it from
            before = None
    for i in np.flatnonzero(done):
        run.sub_env_starts[i] = json.dumps(before[i]) if before is not None else None


def _vector_base(env: Any) -> Any:
    """The vector env under ``env``'s vector wrappers, which do not pass ``get_attr`` / ``set_attr`` on."""
    import gymnasium as gym

    while isinstance(env, gym.vector.VectorWrapper):
        env = env.env
    return env


def resume_path(run: Run, resume: bool | str | os.PathLike) -> Path | None:
    """The checkpoint ``resume`` names; None for ``resume=True`` on a folder that has none yet (the engine's
    rule: one command line serves the first run and every restart after a kill)."""
    if not isinstance(resume, bool):
        path = Path(resume).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no TD3 checkpoint at {path} to resume from")
        return path
    if run.ckpt_path is None:
        raise ValueError("resume=True needs checkpoint_dir (or pass the checkpoint path as resume=...)")
    if not run.ckpt_path.exists():  # a file there that does not load is an error (_read_checkpoint), not this
        log.info("resume: no TD3 checkpoint in %s yet (%s), starting from scratch", run.ckpt_dir, CHECKPOINT_NAME)
        return None
    return run.ckpt_path


def _carry_best_file(agent, run: Run, path: Path) -> None:
    """A resume from another folder's checkpoint into ``checkpoint_dir`` copies that run's
    ``td3_best.safetensors`` (the policy of the agent's ``best_step``) there, atomically: the result's best
    step and ``checkpoint_path`` name the files of one folder (its best policy stayed behind, and the result
    named ``td3_last.pt``). A best file of another step, or none, is not copied."""
    if run.ckpt_dir is None or agent.best_step is None or path.parent.resolve() == run.ckpt_dir.resolve():
        return
    source = path.parent / BEST_NAME
    if not source.is_file():
        return
    from zoo import hub

    if hub.read_metadata(source).get("step") != str(agent.best_step):
        return
    import shutil

    with open(source, "rb") as src, fs.atomic_write(run.ckpt_dir / BEST_NAME, size=source.stat().st_size) as dst:
        shutil.copyfileobj(src, dst)


def _run_settings(run: Run) -> dict[str, Any]:
    """The loop's own settings a checkpoint records and a resume compares (only ``total_steps`` may change):
    how many envs collect, and which env (its id, make kwargs and wrappers: another env with the same
    spaces is another experiment)."""
    return {"total_steps": run.total_steps, "num_envs": run.n_envs, "env": run.identity}


def resume_run(agent, run: Run, path: Path, seed: int | None = None) -> tuple[str | None, dict[str, Any] | None]:
    """Load the checkpoint into the agent (its settings reconciled first: zoo.engine.resume's policy) and
    the run's episode log; returns the env's saved random state and the run's state at the checkpoint
    (None in a checkpoint from before it was saved: those were taken at episode boundaries). ``seed``: the
    call's, which must be the checkpoint's (:func:`_refuse_other_seed`)."""
    from zoo import hub

    if hub.state.is_safetensors(path):  # by its bytes: a copy named td3_last.pt is still the policy alone
        raise ValueError(f"{path} holds a policy's weights only (TrainResult.checkpoint_path is the best evaluated "
                         f"policy); a resume needs the run's checkpoint, {path.with_name(CHECKPOINT_NAME)} (optimizers, "
                         f"replay buffer, episodes): pass resume=True with checkpoint_dir, or that file's path. "
                         f"To start a new run from these weights: zoo.build('td3', weights={str(path)!r})")
    state = _read_checkpoint(path)
    _refuse_other_env(agent, run, state, path)
    _refuse_other_seed(state, seed, path)
    changed = load_checkpoint_state(agent, state, run=_run_settings(run), what=str(path))
    run.episodes = [dict(e) for e in state.get("episodes", [])]
    run.resumed = {"checkpoint": path, "changed": changed}
    _carry_best_file(agent, run, path)
    log.info("resumed TD3 on %s from %s at step %d", run.name, path, agent.num_timesteps)
    return state.get("env_rng"), state.get("run_state")


def _refuse_other_seed(state: dict[str, Any], seed: int | None, path: Path) -> None:
    """A call's ``seed`` on resume: the checkpoint's passes quietly (the checkpoint's random state continues,
    which is that seed's run); another is a ``ResumeError`` before anything loads, as the engine refuses a
    changed seed. Not a warning that it is ignored: the agent's own seed (an agent built by name takes the
    call's) would then be refused as well, so one call would say both."""
    from zoo.engine.resume import ResumeError

    saved = json.loads(state["settings"]).get("seed") if "settings" in state else None  # older: not recorded
    if seed is None or saved is None or int(seed) == int(saved):
        return
    raise ResumeError(f"cannot resume with changed settings that do not apply mid-run (seed: {saved!r} in {path}, "
                      f"{int(seed)!r} now). To continue this TD3 run, pass seed={saved!r} (the checkpoint's random "
                      "state continues; left out, an agent built by name would take seed 0); another seed is "
                      "another run: start it in another checkpoint_dir")


def _refuse_other_env(agent, run: Run, state: dict[str, Any], path: Path) -> None:
    """A resume trains on the checkpointed run's env: another one (the agent's own default when the call
    named none, say) is a ``ResumeError`` before anything loads, naming the checkpoint's env and the call
    that continues it. An agent built for another env is not rebuilt for the checkpoint's behind the
    caller's back (Stable-Baselines3's ``load`` + ``learn`` also need the env passed again)."""
    from zoo.engine.resume import ResumeError
    from zoo.rl.weights import checkpoint_build_config

    saved = json.loads(state["describe"])
    recorded = json.loads(state["settings"]).get("env") if "settings" in state else None  # older: not recorded
    if (recorded is None or recorded == run.identity) and (saved["obs_dim"], saved["act_dim"]) == (
            agent.obs_dim, agent.act_dim):
        return
    theirs = recorded or saved.get("env_id") or "an env without a registered id"
    build = checkpoint_build_config(state)
    env_id = build.pop("env", None)
    args = "".join(f", {k}={v!r}" for k, v in build.items())
    if env_id is not None and recorded in (None, env_id):  # a plain id: the name makes it again
        by_name = f", model_config={build!r}" if build else ""
        how = (f"zoo.train('td3', {env_id!r}{by_name}, resume=True, ...), or with an agent: "
               f"zoo.train(zoo.build('td3', env={env_id!r}{args}), {env_id!r}, resume=True, ...)")
    else:  # make kwargs, wrappers or no id: only the caller can make that env again
        how = (f"ENV, made as that run's was ({theirs}), with an agent built for it: "
               f"zoo.train(zoo.build('td3', env=ENV{args}), ENV, resume=True, ...)")
    given = "" if run.env_given else ", the agent's own (the call named no env)"
    raise ResumeError(
        f"cannot resume {path} on {run.identity!r}{given}, obs_dim {agent.obs_dim}, act_dim {agent.act_dim}: it "
        f"continues a TD3 run on {theirs!r}, obs_dim {saved['obs_dim']}, act_dim {saved['act_dim']}, and a resume "
        f"trains on the same env (env: {theirs!r} in {path}, {run.identity!r} now). To continue it, pass that "
        f"env: {how}")


def reset_episode(run: Run, seed: int | None = None) -> None:
    """Start the single env's next episode (all of a vector env's), remembering how, for a resume."""
    if not run.vec:
        run.episode_start = {"seed": seed} if seed is not None else {"rng": env_rng_state(run.env)}
        if run.normalizers:  # a resume mid-episode replays it from the statistics it began with
            run.episode_start["normalization"] = normalization.statistics(run.normalizers, accumulators=True)
    obs, _ = run.env.reset(seed=seed)
    run.obs = np.array(obs, copy=True)  # not the env's own array, which its next step may rewrite in place (_collect)


def restore_env(agent, run: Run, env_rng: str | None, saved: dict[str, Any] | None) -> None:
    """Put the env where the checkpointed run was: at an episode boundary, its random state restored and
    the next episode begun; mid-episode, that episode begun again and replayed (:func:`_replay_episode`)."""
    if saved is not None:
        run.since_train = int(saved["since_train"])
    now = (saved or {}).get("normalization")  # None in a checkpoint of a run without them, or an older one
    if run.vec:
        _put_sub_env_statistics(run, now, (saved or {}).get("sub_env_normalization"))
        if saved is not None and _restart_sub_envs(run, saved):
            return
        if saved is not None and any(n > 0 for n in saved["ep_len"]):
            warnings.warn(f"TD3 on {run.name}: resuming a vector env mid-episode: the episodes in progress at the "
                          "checkpoint restart (a vector env's state is not saved), so the resumed run does not "
                          "replay the uninterrupted one exactly", stacklevel=user_stacklevel())
        elif saved is not None:  # before, silently: the sub-envs' next episodes began from another seed
            warnings.warn(f"TD3 on {run.name}: the checkpoint holds no random state its sub-envs' next episodes "
                          "begin from (a SAME_STEP vector env, sub-envs whose episodes ended on different steps, a "
                          "vector NormalizeReward, or an older checkpoint): they begin from a seed of the resume's "
                          "own, so the resumed run does not replay the uninterrupted one exactly",
                          stacklevel=user_stacklevel())
        # a seed of the run's own (its seed and step), not the OS's: else two resumes of one checkpoint would be two runs
        reset_episode(run, seed=(agent.seed * 1_000_003 + agent.num_timesteps) % 2**31)
        return
    ep_len = int(saved["ep_len"][0]) if saved is not None else 0
    if ep_len > 0:
        _put_statistics(run, saved["episode_start"].get("normalization"))  # as the episode began
        if _replay_episode(agent, run, saved["episode_start"], ep_len):
            run.ep_ret[0], run.ep_len[0] = float(saved["ep_ret"][0]), ep_len
            run.episode_start = dict(saved["episode_start"])
            return
        warnings.warn(
            f"TD3 on {run.name}: the checkpoint was taken {ep_len} steps into an episode, and replaying that "
            "episode's actions did not reproduce its observations and rewards (the env's dynamics depend on more "
            "than its seed, or its transitions left the replay buffer): the episode restarts, so the resumed run "
            "does not replay the uninterrupted one exactly", stacklevel=user_stacklevel())
    _put_statistics(run, now)
    set_env_rng_state(run.env, env_rng)
    reset_episode(run)


def _restart_sub_envs(run: Run, saved: dict[str, Any]) -> bool:
    """A vector env checkpointed where no sub-env has an episode in progress: every episode ended at the
    checkpoint's step and a NEXT_STEP env resets them at its next step, or every sub-env was reset in that step
    (SAME_STEP) or the one before (NEXT_STEP). Each sub-env gets its random state from before that reset back
    and is reset again. In the first case the resumed run's first step is that autoreset step
    (``run.reset_taken``: its action drawn, nothing stored, the env not stepped); in the others the reset was
    before the checkpoint, so the statistics (updated with its observations) stay frozen, and the observations
    must be the checkpoint's (an env whose step draws from its random state resets to others). False where the
    checkpoint cannot be continued so (the caller restarts the episodes)."""
    import gymnasium as gym

    starts, pending = saved.get("sub_env_starts"), np.asarray(saved.get("prev_autoreset") or [], bool)
    if (starts is None or None in starts or any(n > 0 for n in saved["ep_len"]) or len(pending) != run.n_envs
            or pending.any() != pending.all()):
        return False
    outer = [w for w in normalization.normalizers(run.env) if isinstance(w, gym.vector.VectorWrapper)]
    if any(hasattr(w, "return_rms") for w in outer):
        return False  # a vector NormalizeReward's reset clears the return it carries over a truncation; none saved
    _vector_base(run.env).set_attr("np_random", [_rng_of(s) for s in starts])
    with normalization.frozen([] if pending.all() else [w for s in normalization.stacks(run.env) for w in s]):
        obs, _ = run.env.reset()
    if not pending.all() and not np.array_equal(np.asarray(obs, np.float32), saved["obs"].numpy()):
        return False
    run.obs = np.array(obs, copy=True)
    run.prev_autoreset, run.sub_env_starts, run.reset_taken = pending.copy(), list(starts), bool(pending.all())
    return True


def _put_statistics(run: Run, stats: dict[str, torch.Tensor] | None) -> None:
    """The checkpoint's normalisation statistics (and NormalizeReward's discounted return) back into the
    training env's wrappers; nothing for a checkpoint without them."""
    if stats is not None:
        normalization.put(run.normalizers, stats, source="the checkpoint", env_name=f"the training env ({run.identity})")


def _put_sub_env_statistics(run: Run, now: dict[str, torch.Tensor] | None,
                            per_env: list[dict[str, torch.Tensor]] | None) -> None:
    """A vector env's statistics back into each sub-env's normalisers: its own set where the checkpoint holds
    one per sub-env (``sub_env_normalization``), else its one set (sub-env 0's, all a checkpoint held before
    them) in every sub-env, where a fresh sub-env would normalise its observations with mean 0 and var 1."""
    stacks = normalization.stacks(run.env)
    sets = per_env if per_env is not None and len(per_env) == len(stacks) else [now] * len(stacks)
    for j, (theirs, stats) in enumerate(zip(stacks, sets)):
        if stats is not None:
            normalization.put(theirs, stats, source="the checkpoint", env_name=f"the training env ({run.identity})",
                              warn=normalization.RUNNING_STATS if j == 0 else ())


def _replay_episode(agent, run: Run, start: dict[str, Any], n: int) -> bool:
    """Begin the checkpoint's episode in progress as it began, and step it with its ``n`` actions (the
    buffer's last ``n`` transitions); True when every observation and reward matches the buffer's."""
    buf = agent.buffer
    if n > len(buf) or not (start.get("seed") is not None or start.get("rng")):
        return False
    if start.get("seed") is not None:
        obs, _ = run.env.reset(seed=int(start["seed"]))
    else:
        set_env_rng_state(run.env, start["rng"])
        obs, _ = run.env.reset()
    same = lambda x, stored: np.array_equal(np.asarray(x, np.float32), stored.cpu().numpy())
    for i in range(n):
        row = (buf.pos - n + i) % buf.capacity
        if not same(obs, buf.obs[row]):
            return False
        # the action exactly as the env got it: the buffer keeps the normalised float32 action
        obs, reward, terminated, truncated, _ = run.env.step(agent.env_action(buf.act[row]))
        if terminated or truncated or not (same(obs, buf.next_obs[row]) and same(reward, buf.reward[row])):
            return False
    run.obs = np.array(obs, copy=True)  # as reset_episode keeps it
    return True


def save_checkpoint(agent, run: Run) -> None:
    """``td3_last.pt``, atomically: the agent's state, the run's settings and episodes, the env's rng, and
    where the run stands in its episodes (what a resume needs when the checkpoint is mid-episode)."""
    from zoo.engine.checkpoint import save_with_digest

    keep_statistics(agent, run)
    state = checkpoint_state(agent, run=_run_settings(run))
    state["env_rng"] = env_rng_state(run.env) if not run.vec else None
    state["episodes"] = run.episodes
    state["run_state"] = {"since_train": run.since_train, "ep_ret": run.ep_ret.tolist(),
                          "ep_len": run.ep_len.tolist(), "episode_start": dict(run.episode_start)}
    if run.vec:  # where the sub-envs stand between episodes: what _restart_sub_envs continues
        state["run_state"].update(prev_autoreset=run.prev_autoreset.tolist(), sub_env_starts=list(run.sub_env_starts),
                                  obs=torch.from_numpy(np.asarray(run.obs, np.float32).copy()))
    if run.normalizers:  # the env's statistics as they stand (and NormalizeReward's discounted return)
        state["run_state"]["normalization"] = normalization.statistics(run.normalizers, accumulators=True)
    stacks = normalization.stacks(run.env) if run.vec else []
    if any(stacks[1:]):  # a normaliser in each sub-env: each keeps statistics of its own
        state["run_state"]["sub_env_normalization"] = [normalization.statistics(s, accumulators=True) for s in stacks]
    save_with_digest(state, run.ckpt_path)
    agent.checkpoint_written = WrittenCheckpoint.of(run.ckpt_path)  # a later call of this agent goes on there
    run.next_ckpt = next_multiple(agent.num_timesteps, run.ckpt_every)
