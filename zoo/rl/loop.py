"""The environment loop: collect, update, evaluate, log, checkpoint and resume.

:func:`train` reads top to bottom: set up the run (:class:`zoo.rl.run.Run`), resume, then per environment
step collect a transition, update, end episodes, evaluate and log, checkpoint. The log is the engine's
(:class:`zoo.engine.logs.RunLogger`): ``metrics.csv`` with one row per evaluation keyed by ``step``
(environment steps), TensorBoard scalars when it is installed, ``learning_curves.png`` at the end, and
``episodes.csv`` (every training episode's return). The envs are made and evaluated by
:mod:`zoo.rl.evaluation`; the checkpoint and exact resume are :mod:`zoo.rl.resume`'s.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import signal
import sys
import threading
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from zoo import fs
from zoo._stacklevel import user_stacklevel
from zoo.engine.logs import RunLogger, restore_csv, write_csv
from zoo.engine.threads import check_threads, torch_threads
from zoo.rl import normalization
from zoo.rl.envspec import env_identity, unmade_wrappers, without_pass_through
from zoo.rl.evaluation import (
    SYNCED_EVAL_ENV,
    adopt_statistics,
    check_env_fits,
    env_label,
    evaluate,
    make_env,
    pick_env,
    whole_count,
)
from zoo.rl.normalization import RUNNING_STATS, normalizers
from zoo.rl.resume import (
    env_rng_state,
    note_sub_env_starts,
    reset_episode,
    restore_env,
    resume_path,
    resume_run,
    save_checkpoint,
    set_env_rng_state,
    sub_env_rng_states,
)
from zoo.rl.run import (
    BEST_NAME,
    CHECKPOINT_NAME,
    Clock,
    LiveEpisodes,
    Run,
    end_of_run,
    keep_statistics,
    next_multiple,
)

__all__ = ["BEST_NAME", "CHECKPOINT_NAME", "evaluate", "make_env", "train"]

CHECKPOINT_EVERY = 10_000
"""Environment steps between periodic checkpoints when ``checkpoint_dir`` is given with neither
``checkpoint_every`` nor ``eval_every`` (a checkpoint only at the end would lose a whole run to a kill)."""

log = logging.getLogger(__name__)
# the history columns learning_curves.png draws, against "step"
_PLOTTED = ("step", "eval_return_mean", "train_return_recent", "critic_loss", "actor_loss", "steps_per_s")


def train(
    agent,
    data: Any = None,
    *,
    env: Any = None,
    total_steps: int | None = None,
    eval_every: int | None = None,
    eval_episodes: int = 10,
    eval_env: Any = None,
    seed: int | None = None,
    num_envs: int = 1,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool | str | os.PathLike = False,
    log_dir: str | os.PathLike | None = None,
    progress: bool = True,
    threads: int | str | None = None,
):
    """Train ``agent`` until it has collected ``total_steps`` environment transitions (in all).

    Args:
        env / data: a gymnasium id (default: the agent's), a ``gymnasium.Env`` or a ``VectorEnv``.
        total_steps: environment transitions in total, in whole vector steps (:func:`zoo.rl.run.end_of_run`).
        eval_every: deterministic evaluation of ``eval_episodes`` episodes on a separate env every this
            many steps (and at the end); ``None`` evaluates only at the end, 0 never.
        eval_env: what evaluations run on (default: a new env made from the training env's id, or from its
            spec: make kwargs and wrappers too; an env with no id, or one its spec cannot make again, is
            evaluated on itself at the end, and every N steps only with ``eval_env``).
        seed: seeds this call's first env reset (default: the agent's seed on a first call). A later call on
            the env the last one stopped in continues its episodes unless given a seed, as SB3's
            ``learn(n, reset_num_timesteps=False)`` does (:class:`zoo.rl.run.LiveEpisodes`); on another env
            they start anew. When resuming, the checkpoint's seed or none (its random state continues);
            another raises ``zoo.engine.ResumeError``.
        num_envs: with an env id, ``> 1`` collects from a synchronous vector env.
        checkpoint_dir: ``td3_last.pt`` is written there at the first episode end after every
            ``checkpoint_every`` steps (default: ``eval_every``, else :data:`CHECKPOINT_EVERY`; 0: only at
            the end), at the end, and when Ctrl-C stops the run (mid-episode too: a resume replays that
            episode's steps, see :mod:`zoo.rl.resume`'s notes on exact resume); the best evaluated
            policy goes to ``td3_best.safetensors`` (and stays in memory as ``agent.best_state``); the result's
            ``checkpoint_path`` is that file (``td3_last.pt`` when no evaluation scored a trained policy).
        resume: ``True`` continues from ``checkpoint_dir/td3_last.pt`` (from scratch while the folder holds
            no run); a path, from that file (and its folder's best policy); other runs are refused a used folder.
            ``actor_lr``, ``critic_lr``, ``exploration_noise`` and ``total_steps`` may differ (applied, logged);
            any other change (the config, ``num_envs``, the env: id, make kwargs, wrappers) raises
            ``zoo.engine.ResumeError``: an env that is not the checkpoint's (the agent's own, when the call
            names none) is refused so, naming the checkpoint's env and the call that continues it.
        log_dir: ``metrics.csv`` (one row per evaluation: returns, mean critic and actor loss since the
            previous row, steps/s), TensorBoard events when installed, ``learning_curves.png`` and
            ``episodes.csv`` (default: ``checkpoint_dir``).
        threads: torch threads for the run (an int, ``"all"`` cores, or None: leave torch's setting);
            restored afterwards. At batch 256 and 400x300 layers a second core makes an update 1.65x
            faster (fp32, benchmarks/td3_update.py); on a machine whose other core is busy, 2 threads
            can be many times *slower* (each parallel region waits for the preempted thread).

    Returns a ``zoo.engine.TrainResult``: a history row per evaluation, the best mean eval return, its file.
    """
    total_steps, eval_every, checkpoint_every, eval_episodes = _check_run_options(
        total_steps, eval_every, checkpoint_every, eval_episodes)
    check_threads(threads)  # a bad value fails before an env is made
    _refuse_several_processes()
    ckpt_dir = Path(checkpoint_dir).expanduser() if checkpoint_dir is not None else None  # "~/runs", as fit reads it
    logs = Path(log_dir).expanduser() if log_dir is not None else ckpt_dir
    with _own_folders(ckpt_dir, logs, resume, agent):  # before any work: a folder that cannot be ours fails at once
        run = _open_run(agent, data, env, num_envs, total_steps=total_steps, eval_every=eval_every,
                        eval_episodes=eval_episodes, eval_env=eval_env, ckpt_dir=ckpt_dir,
                        ckpt_every=_checkpoint_every(checkpoint_every, eval_every),
                        log_dir=logs)
        try:
            # no torch.set_flush_denormal here: FlatAdam zeroes the moments before they turn denormal
            # (zoo.engine.denormals), and with that, flushing every denormal on this thread as well changed
            # neither the speed nor a single parameter (benchmarks/README, "Denormal Adam moments")
            with torch_threads(threads):
                _start(agent, run, resume, seed, progress)
                with _deferred_interrupt(run):
                    _loop(agent, run)
                _finish(agent, run)
                _keep_live_episodes(agent, run)
        finally:
            _close(agent, run)
    return _result(agent, run)


def _check_run_options(total_steps: Any, eval_every: Any, checkpoint_every: Any,
                       eval_episodes: Any) -> tuple[int, int | None, int | None, int]:
    """The run's counts as ints, refused before any step with what came (a bad eval_episodes would otherwise be
    said at the first evaluation: after eval_every steps, or after the whole run)."""
    if total_steps is None:
        raise ValueError("TD3 trains for a number of environment steps: give total_steps=N (zoo train td3 --steps N)")
    total_steps = whole_count("total_steps", total_steps, 1, "environment steps")
    eval_every, checkpoint_every = (None if v is None else whole_count(k, v, 0, "environment steps (or None)")
                                    for k, v in (("eval_every", eval_every), ("checkpoint_every", checkpoint_every)))
    return total_steps, eval_every, checkpoint_every, whole_count("eval_episodes", eval_episodes, 1, "episodes")


def _refuse_several_processes() -> None:
    """TD3 learns in one process: under torchrun every process would run the same agent, and the second
    would find the first's lock on the checkpoint folder ("in use by another training run"), which names no
    cause."""
    from zoo.engine.distributed import dist_info

    world = dist_info().world_size
    if world > 1:
        raise ValueError(f"TD3 learns in one process, and WORLD_SIZE={world} (torchrun started {world}): run it "
                         "without torchrun; threads= (--threads) has one run use several cores, and separate seeds "
                         "run as separate commands")


@contextlib.contextmanager
def _own_folders(checkpoint_dir: Path | None, log_dir: Path | None, resume: bool | str | os.PathLike, agent: Any):
    """The run's folders, as the engine's fit owns its own: created (a file in the way, or a read-only
    place, fails before the first step instead of at the first checkpoint), locked for the run's whole life
    (a second run there fails at once, naming this one: two writers would interleave one td3_last.pt),
    swept of the temp files that killed writers left there (one folder under two names, relative and absolute
    or a symlinked alias, once: :func:`zoo.fs.own_folders`), and refused when the run would overwrite
    another run's checkpoints (read under the lock: a run that just ended there has written its last)."""
    with fs.own_folders((("checkpoint_dir", checkpoint_dir), ("log_dir", log_dir)), "training run"):
        if checkpoint_dir is not None:
            _refuse_a_used_folder(checkpoint_dir, resume, agent)
        yield


def _refuse_a_used_folder(folder: Path, resume: bool | str | os.PathLike, agent: Any) -> None:
    """The engine's rules (zoo.engine.resume.refuse_a_used_folder): a run that does not continue the
    folder's ``td3_last.pt`` (a new one, or a resume from a file elsewhere) would replace it and
    ``td3_best.safetensors`` (a re-run of the command that Ctrl-C stopped, without ``--resume``, would lose
    the run); and ``resume=True`` on a folder that has a best policy but no ``td3_last.pt`` would start over on
    top of that policy."""
    from zoo.engine.checkpoint import CheckpointError

    last, best = folder / CHECKPOINT_NAME, folder / BEST_NAME
    held = [p.name for p in (last, best) if p.is_file()]
    if not held or (resume is True and last.is_file()):
        return
    written = agent.checkpoint_written
    if not resume and written is not None and written.is_file(last):
        # this agent's own run, written by its last call (learn(n, reset_num_timesteps=False) into the same
        # folder, as SB3's checkpoints go on): refused as "another run's" before; its best stays in agent.history
        return
    if resume is True:
        raise CheckpointError(
            f"resume: {folder} cannot be continued where it stopped: it holds no {CHECKPOINT_NAME}, but {BEST_NAME} "
            f"(the best evaluated policy, weights only). The run is not started over on top of it; to start over, "
            f"use another checkpoint_dir or remove the folder's files; to train on from that policy: "
            f"zoo.build('td3', weights={str(best)!r}) with another checkpoint_dir")
    new = "a new run"
    if resume:  # a file of this folder is checked as the resume reads it; one from elsewhere starts a fork here
        path = Path(resume).expanduser()
        if not path.is_file() or path.resolve().parent == folder.resolve():
            return
        new = f"a run continued from {path} (resume={str(resume)!r})"
    raise ValueError(f"checkpoint_dir {folder} holds another run's checkpoints ({', '.join(held)}): resume=True "
                     f"(`zoo train td3 ... --resume`) continues that run; {new} needs another folder, or those "
                     "files deleted (none is overwritten)")


def _checkpoint_every(checkpoint_every: int | None, eval_every: int | None) -> int | None:
    if checkpoint_every is not None:
        return int(checkpoint_every) or None  # 0: only at the end
    return int(eval_every or CHECKPOINT_EVERY)


@contextlib.contextmanager
def _deferred_interrupt(run: Run):
    """Ctrl-C during the loop stops it after the step in progress, so that ``td3_last.pt`` is written
    from a whole step (a KeyboardInterrupt inside an update could leave the critic stepped and its target
    not), then raises KeyboardInterrupt as Python would have. A second Ctrl-C stops at once. Only Python's
    own handler in the main thread is replaced: a caller's handler, or a run in a thread, is left alone. Where
    SIGINT is ignored (a job started with ``&``), the `zoo` command's SIGTERM is taken so instead."""
    from zoo._interrupts import sigterm_is_ctrl_c

    on_ctrl_c = signal.getsignal(signal.SIGINT)
    hook = (signal.SIGINT if on_ctrl_c is signal.default_int_handler else
            signal.SIGTERM if on_ctrl_c == signal.SIG_IGN and sigterm_is_ctrl_c() else None)
    if threading.current_thread() is not threading.main_thread() or hook is None:
        yield
        return

    def stop_after_this_step(signum, frame) -> None:
        if run.interrupted:
            raise KeyboardInterrupt
        run.interrupted = True
        run.stopped_by = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
        saving = f"writing {run.ckpt_path} first; " if run.ckpt_path is not None else ""
        _say(run, f"{run.stopped_by}: TD3 stops after this step ({saving}a second {run.stopped_by} stops it at once)")

    previous = signal.signal(hook, stop_after_this_step)
    try:
        yield
    finally:
        signal.signal(hook, previous)


def _say(run: Run, message: str) -> None:
    """A line for the user, above the progress bar."""
    from zoo._progress import ProgressBar

    if run.bar is not None and not run.bar.disable:
        ProgressBar.write(message, file=sys.stderr)
    else:
        log.warning(message)


def _loop(agent, run: Run) -> None:
    """Per environment step: collect, update, end episodes, evaluate, checkpoint, up to ``total_steps``."""
    while agent.num_timesteps < run.total_steps:
        done, reward = _collect(agent, run)
        _update(agent, run)
        ended = _end_episodes(agent, run, done, reward)
        if agent.num_timesteps >= run.next_eval:
            _evaluate(agent, run)
        # checkpoints only where an episode just ended: then the run's state is fully saveable
        if agent.num_timesteps >= run.next_ckpt and (ended or run.vec):
            save_checkpoint(agent, run)
        run.need_reset = not run.vec and bool(done[0])
        if run.interrupted:
            _stop(agent, run)


def _stop(agent, run: Run) -> None:
    """Ctrl-C: the checkpoint the end of the run would write (mid-episode too), the logs so far, then
    KeyboardInterrupt. No final evaluation: the user asked to stop."""
    if run.ckpt_path is not None:
        save_checkpoint(agent, run)
    _write_logs(agent, run)
    _keep_live_episodes(agent, run)  # stopped after a whole step: a later call continues from it
    where = (f"; {run.ckpt_path} continues it (resume=True, or `zoo train td3 ... --resume`)"
             if run.ckpt_path is not None else "; nothing was saved (no checkpoint_dir)")
    raise KeyboardInterrupt(f"TD3 stopped by {run.stopped_by} at step {agent.num_timesteps} of {run.total_steps}"
                            f"{where}")


def _open_run(agent, data: Any, env: Any, num_envs: int, **settings: Any) -> Run:
    """The training env (made from an id, or the caller's), checked against the agent's spaces."""
    import gymnasium as gym

    chosen = pick_env(agent, data, env)
    train_env = make_env(chosen, num_envs=num_envs)
    try:
        check_env_fits(agent, train_env)
    except ValueError:
        if train_env is not chosen:
            train_env.close()
        raise
    vec = isinstance(train_env, gym.vector.VectorEnv)
    mode = train_env.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP) if vec else None
    if vec and mode not in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
        if train_env is not chosen:
            train_env.close()
        raise ValueError(f"TD3 trains on vector envs that reset their episodes themselves (autoreset_mode NEXT_STEP "
                         f"or SAME_STEP); this one has {mode}: make it with vector_kwargs={{'autoreset_mode': "
                         "gymnasium.vector.AutoresetMode.SAME_STEP}} (it failed at the first episode's end)")
    next_step = vec and mode == gym.vector.AutoresetMode.NEXT_STEP
    try:
        settings["eval_env"] = _eval_target(agent, chosen, train_env, vec, settings["eval_env"],
                                            settings["eval_every"])
    except ValueError:
        if train_env is not chosen:
            train_env.close()
        raise
    n_envs = train_env.num_envs if vec else 1
    live = agent.live_episodes
    if train_env is not chosen and live is not None and live.made_again(train_env, n_envs):
        train_env.close()  # the same env made again: the one the last call stopped in goes on (_start decides)
        train_env = live.env
    return Run(env=train_env, chosen=chosen, owns_env=train_env is not chosen, name=env_label(train_env),
                vec=vec, n_envs=n_envs, next_step_mode=next_step,
                identity=env_identity(train_env), env_given=data is not None or env is not None,
                normalizers=normalizers(train_env), reward_scalers=normalization.reward_normalizers(train_env),
                **settings)


def _eval_target(agent, chosen: Any, train_env: Any, vec: bool, eval_env: Any, eval_every: int | None) -> Any:
    """What the run evaluates on, decided (and checked against the agent) before it trains: ``eval_env``,
    else the caller's id, else a fresh env made from the training env's spec (id, make kwargs and wrappers:
    a wrapped env keeps its id, so the id alone would evaluate another env). An env object that cannot be
    made again can only be evaluated on itself, which mid-run would cut the training episode in progress:
    that is done for the one evaluation at the end (``eval_every=None``); periodic evaluations need
    ``eval_env``."""
    if eval_every == 0:
        return eval_env
    if eval_env is not None:
        _check_eval_env(agent, eval_env)
        return eval_env
    if isinstance(chosen, (str, os.PathLike)):
        return str(chosen)
    spec, missing = _equivalent_spec(agent, train_env)
    if spec is not None:
        return spec
    if not vec and eval_every is None:
        return train_env
    name = env_label(train_env)
    why = ("a vector env cannot be evaluated episode by episode" if vec else
           f"evaluating every {eval_every} steps on the training env would cut its episodes")
    raise ValueError(f"TD3 on {name}: no separate env to evaluate on ({missing}, and {why}): "
                     f"pass eval_env=<another {name} instance> (or eval_every=0 to skip evaluation)")


def _check_eval_env(agent, eval_env: Any) -> None:
    """``eval_env`` made (an id or spec) and checked against the agent before the first step: a wrong one
    would fail at the first evaluation, after ``eval_every`` steps of training, with nothing saved."""
    try:
        e = make_env(eval_env)
    except (TypeError, ValueError) as err:
        raise type(err)(f"eval_env={_shown(eval_env)}: {err}") from None
    try:
        check_env_fits(agent, e)
    except ValueError as err:
        raise ValueError(f"eval_env={_shown(eval_env)}: {err}") from None
    finally:
        if e is not eval_env:
            e.close()


def _shown(env: Any) -> str:
    if isinstance(env, (str, os.PathLike)):
        return repr(str(env))
    return getattr(env, "id", None) or env_label(env)  # an EnvSpec by its id


def _equivalent_spec(agent, train_env: Any) -> tuple[Any, str]:
    """``(spec, "")`` when ``gymnasium.make(spec)`` of the training env's spec gives an env that fits the
    agent; else ``(None, why not)``."""
    import gymnasium as gym

    from zoo.rl.envspec import single_spec

    name, spec = env_label(train_env), without_pass_through(single_spec(train_env))  # remade without a Monitor
    if spec is None:
        return None, f"{name} has no registered id"
    unmade = unmade_wrappers(spec)
    if unmade:  # gymnasium's own refusal blames the wrapper's class, where the arguments could not be read here
        why = (f"{name} cannot be made again from its spec: its wrapper(s) {', '.join(unmade)} record no "
               "arguments here (a wrapper without gymnasium.utils.RecordConstructorArgs, a vector wrapper, or one "
               "of make_vec's wrappers= in an AsyncVectorEnv's worker processes)")
        log.info("TD3 on %s: %s", name, why)
        return None, why
    if spec.kwargs.get("render_mode") == "human":  # nobody watches an evaluation: no window for its episodes
        spec = replace(spec, kwargs={k: v for k, v in spec.kwargs.items() if k != "render_mode"})
    try:
        remade = gym.make(spec)
    except Exception as err:  # noqa: BLE001  any failure of the env's own code means: no equivalent env
        why = f"{name} cannot be made again from its spec ({type(err).__name__}: {err})"
    else:
        try:
            check_env_fits(agent, remade)
            return spec, ""
        except ValueError as err:
            why = f"{name} made again from its spec does not fit the agent ({err})"
        finally:
            remade.close()
    log.info("TD3 on %s: %s", name, why)
    return None, why


def _start(agent, run: Run, resume: bool | str | os.PathLike, seed: int | None, progress: bool) -> None:
    """Resume (when asked), then the env's first reset: seeded for a new run or by an explicit ``seed``,
    the checkpoint's episode restored for a resumed one, none where the last call's episodes continue
    (:class:`LiveEpisodes`); the schedule of evaluations and checkpoints; the log and the progress bar."""
    from zoo._progress import ProgressBar

    agent.ensure_buffer()
    path = resume_path(run, resume) if resume else None
    live, agent.live_episodes = agent.live_episodes, None  # this call continues them, or they end here
    continued = path is None and seed is None and live is not None and live.continue_in(agent, run)
    if live is not None and not continued:
        live.close_unless(run.env)
    if path is None:  # a loaded agent fine-tuned on a fresh env goes on with the input scale it learnt
        adopt_statistics(agent, run.env, "this agent")
    if path is not None:  # a seed other than the checkpoint's is refused there; its own continues the run
        restore_env(agent, run, *resume_run(agent, run, path, seed))
        agent.episode_log = run.episodes
    elif continued:
        pass  # the env, its observation and the episodes' returns so far are the last call's
    elif agent.num_timesteps == 0 or seed is not None:
        reset_episode(run, seed=agent.seed if seed is None else int(seed))
    elif run.owns_env:
        # trained before, on an env made here: a fresh env has no stream to continue; seeding it from the
        # agent's progress keeps a repeated sequence of calls repeatable
        reset_episode(run, seed=agent.seed + agent.num_timesteps)
    else:  # trained before, on the caller's env: continue its random stream instead of reseeding
        reset_episode(run)
    run.end_steps = end_of_run(agent.num_timesteps, run.total_steps, run.n_envs)  # from the resumed count, if any
    if run.end_steps > run.total_steps:
        log.info("TD3 on %s: %d envs collect %d transitions a step, so the run ends at %d (total_steps=%d, rounded up "
                 "to whole steps)", run.name, run.n_envs, run.n_envs, run.end_steps, run.total_steps)
    _warn_short_run(agent, run, resumed=path is not None)
    if path is None:
        run.episodes = agent.episode_log  # the agent's episodes so far: episodes.csv lists them, as metrics.csv its rows
    if path is None and not continued:
        agent.reset_noise(training=True)  # new episodes: the correlated noise starts again (a resumed run keeps its own)
    run.recent.extend(e["return"] for e in run.episodes[-10:])
    run.next_eval = next_multiple(agent.num_timesteps, run.eval_every)
    run.next_ckpt = next_multiple(agent.num_timesteps, run.ckpt_every) if run.ckpt_dir else math.inf
    run.clock = Clock(mark_steps=agent.num_timesteps)
    run.logger = RunLogger(run.log_dir, step_key="step") if run.log_dir is not None else None
    if path is not None:
        _restore_logs(agent, run)
    run.bar = ProgressBar(total=run.end_steps, initial=agent.num_timesteps, desc=f"td3 {run.name}", unit="step",
                   disable=not progress, dynamic_ncols=True)


def _warn_short_run(agent, run: Run, resumed: bool) -> None:
    """A run that collects nothing, or nothing past ``learning_starts``, says so before its first step; only
    once a resume has loaded the checkpoint, whose step count and config are the run's."""
    cfg = agent.config
    if run.total_steps <= agent.num_timesteps:
        if not resumed:  # a resumed run that has reached its total only finishes (evaluation, checkpoint)
            warnings.warn(
                f"TD3 on {run.name}: total_steps={run.total_steps} counts every transition this agent collected, "
                f"and it has collected {agent.num_timesteps}: this call collects none. To train further, give a "
                f"larger total (total_steps={agent.num_timesteps} + the steps to add)", stacklevel=user_stacklevel())
    elif run.end_steps <= cfg.learning_starts:
        warnings.warn(
            f"TD3 on {run.name}: total_steps={run.total_steps} does not pass learning_starts={cfg.learning_starts} "
            f"(and {agent.num_timesteps} steps are done): this run collects random transitions and makes no "
            "gradient update; raise total_steps or lower learning_starts (zoo.build('td3', learning_starts=...))",
            stacklevel=user_stacklevel())


def _collect(agent, run: Run) -> tuple[np.ndarray, np.ndarray]:
    """One environment step (all envs): uniform random actions before ``learning_starts``, the actor's
    with exploration noise after; the transitions go to the buffer. Returns ``(done, reward)``, (n_envs,)."""
    if run.need_reset:
        reset_episode(run)
        run.need_reset = False
    learning = agent.num_timesteps >= agent.config.learning_starts
    if learning and run.clock.t0 is None:
        run.clock.t0 = time.perf_counter()
    if learning:
        a = agent.act_normalised(run.obs, explore=True)  # (act_dim,) or (n_envs, act_dim) in [-1, 1]
    else:
        a = agent.random_action_normalised(run.n_envs if run.vec else None)
    before = None  # a SAME_STEP vector env resets ended episodes inside its step: their random states before it
    if run.vec and not run.next_step_mode:
        ahead = run.interrupted or agent.num_timesteps + run.n_envs >= min(run.next_ckpt, run.end_steps)
        before = sub_env_rng_states(run, checkpoint_ahead=ahead)
    if run.reset_taken:  # the resume took this autoreset step's resets already: what the env's step would give
        run.reset_taken, n = False, run.n_envs
        next_obs, reward, terminated, truncated, info = run.obs, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), {}
    else:
        next_obs, reward, terminated, truncated, info = run.env.step(agent.env_action(a))
    step = agent.num_timesteps + run.n_envs
    if not (np.isfinite(next_obs).all() and np.isfinite(reward).all()):
        what = "observation" if not np.isfinite(next_obs).all() else "reward"
        raise ValueError(f"{run.name} returned a non-finite {what} at env step {step} "
                         f"(episode {agent.num_episodes + 1}): obs={np.asarray(next_obs).tolist()}, "
                         f"reward={np.asarray(reward).tolist()}; training stopped")
    own = normalization.env_rewards(run.reward_scalers, reward) if run.reward_scalers else reward  # for the return
    done, reward = _store(agent.buffer, run, a.cpu().numpy(), next_obs, reward, terminated, truncated, info)
    if run.vec and done.any():
        note_sub_env_starts(run, done, before)
    if run.reward_scalers:  # the buffer learns from the scaled reward; the returns logged are the env's own
        reward = np.where(run.resetting, 0.0, own)  # an autoreset step's reward counts nowhere, as in _store
    agent.num_timesteps = step
    # a copy: a vector env made with copy=False, or an env that keeps its state in one array, hands out the same
    # array every step, rewritten in place; kept, the next step's transition was stored with obs == next_obs
    run.obs = np.array(next_obs, copy=True)
    run.bar.update(run.n_envs)
    run.since_train += 1
    if learning:
        run.clock.steps += run.n_envs
    return done, reward


def _store(buf, run: Run, a: np.ndarray, next_obs, reward, terminated, truncated,
           info: dict) -> tuple[np.ndarray, np.ndarray]:
    """Add this step's transitions; returns ``(done, reward)`` per env (a skipped transition's reward 0)."""
    if not run.vec:
        buf.add_one(run.obs, a, reward, next_obs, terminated)
        run.resetting = np.zeros(1, bool)
        return np.array([terminated or truncated]), np.array([reward])
    done = np.logical_or(terminated, truncated)
    store = next_obs
    if not run.next_step_mode and done.any():  # SAME_STEP: next_obs is the reset obs; store the true final one
        final = info.get("final_obs")
        store = np.array(next_obs, copy=True)
        for i in np.flatnonzero(done):
            store[i] = final[i]
    keep = ~run.prev_autoreset
    run.resetting = ~keep
    if keep.all():
        buf.add(run.obs, a, reward, store, terminated)
    elif keep.any():
        buf.add(run.obs[keep], a[keep], reward[keep], store[keep], terminated[keep])
    if run.next_step_mode:
        run.prev_autoreset = done
        return done, np.where(keep, reward, 0.0)
    return done, np.asarray(reward)


def _update(agent, run: Run) -> None:
    """Every ``train_freq`` steps after ``learning_starts``: ``gradient_steps`` updates (-1: as many as
    transitions were collected since the last ones)."""
    cfg = agent.config
    if run.since_train < cfg.train_freq:
        return
    # a rollout of train_freq steps ends, trained on or not (SB3's collect_rollouts): gradient_steps=-1 trains as
    # many steps as it collected, not every warm-up step too (learning_starts + 1 updates in the first phase)
    collected, run.since_train = run.since_train * run.n_envs, 0
    if agent.num_timesteps > cfg.learning_starts:
        if cfg.lr_schedule == "linear":  # SB3: lr * the fraction of the run still to go, before each phase
            agent.apply_lr(1.0 - agent.num_timesteps / run.end_steps)  # where the run ends: never below 0
        agent.update(cfg.gradient_steps if cfg.gradient_steps > 0 else collected)


def _end_episodes(agent, run: Run, done: np.ndarray, reward: np.ndarray) -> bool:
    """Count this step's reward; log the episodes that ended (and restart their noise). True if any did."""
    run.ep_ret += reward
    run.ep_len += ~run.resetting  # NEXT_STEP: an env's reset step is no step of its episode (its reward is 0)
    ended = np.flatnonzero(done)
    for i in ended:
        agent.num_episodes += 1
        run.recent.append(float(run.ep_ret[i]))
        run.episodes.append({"step": agent.num_timesteps, "return": float(run.ep_ret[i]),
                             "length": int(run.ep_len[i])})
        run.ep_ret[i], run.ep_len[i] = 0.0, 0
    if len(ended):
        agent.reset_noise(ended.tolist() if run.vec else None, training=True)
        run.bar.set_postfix(ret=f"{np.mean(run.recent):.1f}", refresh=False)
    return len(ended) > 0


def _evaluate(agent, run: Run) -> None:
    """A deterministic evaluation -> one history row (and metrics.csv row); keeps the best policy."""
    started = time.perf_counter()
    if run.eval_env is run.env:  # the end of a run on an env without an id (_eval_target)
        log.info("TD3 on %s: evaluating on the training env itself (pass eval_env= for a separate one)", run.name)
        run.episodes_cut = True  # the training episodes in progress are gone: a later call starts new ones
        saved = env_rng_state(run.env)  # the checkpoint after this holds the training stream, not the eval's
        stats = normalization.statistics(run.normalizers, accumulators=True)  # NormalizeReward's return too
        with _normalization_synced(run, run.env):  # frozen: evaluation steps are no training data
            res = evaluate(agent, env=run.env, episodes=run.eval_episodes)
        set_env_rng_state(run.env, saved)
        normalization.put(run.normalizers, stats, source="the training env", env_name="itself")
    else:
        e = make_env(run.eval_env)  # an id or spec made here (for its statistics); an env object as it is
        try:
            with _normalization_synced(run, e):
                res = evaluate(agent, env=e, episodes=run.eval_episodes)
        finally:
            if e is not run.eval_env:
                e.close()
    row = {"epoch": len(agent.history) + 1, "step": agent.num_timesteps, "eval_return_mean": res["return_mean"],
           "eval_return_std": res["return_std"], "eval_length_mean": res["length_mean"],
           "train_return_recent": float(np.mean(run.recent)) if run.recent else float("nan"),
           "episodes": agent.num_episodes, "updates": agent.num_updates, **agent.pop_losses(),
           "steps_per_s": run.clock.row_rate(agent.num_timesteps, started),
           "learn_steps_per_s": run.clock.learn_rate(started)}
    if not agent.history or res["return_mean"] > max(h["eval_return_mean"] for h in agent.history):
        # the best evaluated policy so far (what rl-zoo's EvalCallback keeps as best_model)
        agent.best_state = {k: v.clone() for k, v in agent.export_state_dict().items()}
        agent.best_step = agent.num_timesteps
        if run.ckpt_dir is not None:
            keep_statistics(agent, run)  # those this evaluation normalised with
            agent.save(run.ckpt_dir / BEST_NAME, {"step": str(agent.num_timesteps)})
    agent.history.append(row)
    recent = f"{row['train_return_recent']:.1f}" if run.recent else "-"  # no episode finished yet
    run.bar.set_postfix(ret=recent, eval=f"{res['return_mean']:.1f}")
    _write_logs(agent, run)
    run.clock.evaluated(started, agent.num_timesteps)
    run.next_eval = next_multiple(agent.num_timesteps, run.eval_every)


@contextlib.contextmanager
def _normalization_synced(run: Run, eval_env: Any):
    """Evaluate with the training env's statistics: the evaluation env's normalisation wrappers take copies
    of the training env's running mean and variance and stop updating them for the evaluation (their own
    setting restored after), as SB3's EvalCallback syncs VecNormalize. A fresh env made from the spec would
    otherwise normalise with statistics of its own few episodes: another input scale than the policy's.
    Stacks that do not pair up (another number of either kind) are left as they are, with a warning. A vector
    eval env's sub-envs each take the statistics."""
    pairs = []
    for kind, theirs in ((k, t) for t in normalization.stacks(eval_env) for k in RUNNING_STATS
                         if run.normalizers or t):
        ours_k = [w for w in run.normalizers if hasattr(w, kind)]
        theirs_k = [w for w in theirs if hasattr(w, kind)]
        if len(ours_k) == len(theirs_k):
            pairs += [(kind, a, b) for a, b in zip(ours_k, theirs_k)]
        elif not run.normalization_warned:
            run.normalization_warned = True
            warnings.warn(
                f"TD3 on {run.name}: the training env normalises with running statistics ({kind}) in "
                f"{len(ours_k)} wrapper(s), the evaluation env in {len(theirs_k)}: they cannot be synced, so "
                "evaluations see another input scale than training; pass eval_env= with the same wrappers",
                stacklevel=user_stacklevel())
    for kind, a, b in pairs:
        if a is not b:
            setattr(b, kind, copy.deepcopy(getattr(a, kind)))
    token = SYNCED_EVAL_ENV.set(eval_env)  # evaluate puts no agent statistics in: this env has the run's (stale ones)
    try:
        with normalization.frozen([b for _, _, b in pairs]):
            yield
    finally:
        SYNCED_EVAL_ENV.reset(token)


def _write_logs(agent, run: Run) -> None:
    if run.logger is not None and agent.history:
        run.logger.log_epoch(agent.history)
    if run.log_dir is not None and run.episodes:
        write_csv(run.episodes, run.log_dir / "episodes.csv")


def _restore_logs(agent, run: Run) -> None:
    """A resumed run's CSVs rewritten from its checkpoint's rows before it goes on: ``td3_last.pt`` is written at
    episode ends between evaluations, the CSVs at evaluations, so a kill after a checkpoint left
    ``episodes.csv`` (or ``metrics.csv``) short of the run it continues until the resumed run's next evaluation,
    and for good when that run stopped again first (the engine's resume does the same with ``metrics.csv``)."""
    if run.logger is not None:
        run.logger.restore(agent.history)
    if run.log_dir is not None and run.episodes:
        restore_csv(run.episodes, run.log_dir / "episodes.csv")


def _finish(agent, run: Run) -> None:
    """The speed of the learning phase, a last evaluation and checkpoint at the end (mid-episode too: a
    resume replays that episode), the learning curves."""
    keep_statistics(agent, run)
    now = time.perf_counter()
    learn_time = run.clock.learn_time(now)
    agent.last_run_stats = {"learn_steps": run.clock.steps, "learn_time_s": learn_time,
                            "learn_steps_per_s": run.clock.steps / learn_time if learn_time > 0 else float("nan")}
    if run.eval_every != 0 and (not agent.history or agent.history[-1]["step"] != agent.num_timesteps):
        _evaluate(agent, run)
    if run.ckpt_path is not None:
        save_checkpoint(agent, run)
    _write_logs(agent, run)
    if run.logger is not None:  # the picture shows the curves worth a look; metrics.csv has every column
        shown = [{k: h[k] for k in _PLOTTED if k in h} for h in agent.history]
        run.logger.close(shown, title=f"TD3 on {run.name}")


def _keep_live_episodes(agent, run: Run) -> None:
    """The run stopped after a whole step: its episodes in progress stay with the agent for the next call
    (:class:`LiveEpisodes`). Not after an evaluation on the training env itself, which cut them."""
    if not run.episodes_cut:
        agent.live_episodes = LiveEpisodes.of(agent, run)


def _close(agent, run: Run) -> None:
    if run.bar is not None:
        run.bar.close()
    live = agent.live_episodes
    if run.owns_env and (live is None or live.env is not run.env):  # a kept env stays open for the next call
        run.env.close()
    if run.logger is not None:
        with contextlib.suppress(Exception):  # an error on the way out must not hide the run's own error
            run.logger.close([])


def _result(agent, run: Run):
    from zoo.engine.result import TrainResult

    evals = [h["eval_return_mean"] for h in agent.history]
    # no gradient update, no trained policy: its evaluations score the random initialisation
    best_i = int(np.argmax(evals)) if evals and agent.num_updates > 0 else None
    return TrainResult(
        history=list(agent.history),
        best_metric=evals[best_i] if best_i is not None else None,
        best_epoch=best_i + 1 if best_i is not None else None,
        checkpoint_path=_best_file(agent, run, best_i) or run.ckpt_path,
        model=agent,
        monitor="eval_return_mean",
        resumed=run.resumed,
    )


def _best_file(agent, run: Run, best_i: int | None) -> Path | None:
    """``td3_best.safetensors`` when it holds the policy of the best history row (the step it records is that
    row's), as TrainResult documents; None when no checkpoints were written or the file is from another run."""
    if run.ckpt_dir is None or best_i is None or not (run.ckpt_dir / BEST_NAME).is_file():
        return None
    from zoo import hub

    path = run.ckpt_dir / BEST_NAME
    return path if hub.read_metadata(path).get("step") == str(agent.history[best_i]["step"]) else None
