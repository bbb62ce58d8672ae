"""``zoo train NAME``: train any registered model on ``--data`` / ``--env`` and save it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from zoo.cli.arguments import amp_option, parse_kv
from zoo.cli.commands import FAMILY_OPTIONS, command
from zoo.cli.errors import UsageError
from zoo.cli.model_options import (
    add_common,
    build_from_args,
    config_flag,
    given_data,
    merge_sets,
    refusing_unknown,
    require_data,
)
from zoo.cli.train_output import default_out, numbered, out_path, save_trained

# common options -> the loop option they set (when given)
_LOOP_OPTIONS = {"epochs": "epochs", "steps": "total_steps", "episodes": "episodes", "lr": "lr",
                 "batch_size": "batch_size", "device": "device", "seed": "seed", "checkpoint_dir": "checkpoint_dir"}


def _loop_config(args: argparse.Namespace, family: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for opt, key in _LOOP_OPTIONS.items():
        if getattr(args, opt, None) is not None:
            out[key] = getattr(args, opt)
    if getattr(args, "amp", None):
        out["amp"] = amp_option(args.amp)
    if getattr(args, "overfit_batches", 0):
        out["overfit_batches"] = args.overfit_batches
    if getattr(args, "resume", False):
        out["resume"] = True
    extra = FAMILY_OPTIONS.get(family)
    if extra is not None:
        out.update(extra.to_config(args))
    flags = {key: config_flag(opt) for opt, key in _LOOP_OPTIONS.items()}
    merge_sets(out, parse_kv(getattr(args, "set", None)), flags)  # --steps 30 --set total_steps=60 is refused
    if not out.get("resume") and isinstance(out.get("epochs"), int) and out["epochs"] < 1:
        # fit takes epochs=0 (a resume whose run is done); a new run of none saved an untrained network as trained
        raise UsageError(f"--epochs must be >= 1, got {out['epochs']}")
    return out


def _train_flags(args: argparse.Namespace, config: dict[str, Any]) -> dict[str, str]:
    """The flag the user typed for each option ``zoo train`` hands to ``zoo.train`` (``total_steps`` was
    ``--steps``, ``x`` of ``--set x=1`` was that), so a family's loop refusing one is said in those words."""
    flags = {key: config_flag(opt) for opt, key in _LOOP_OPTIONS.items() if key in config}
    flags.update({key: config_flag(key) for key in ("amp", "overfit_batches", "resume") if key in config})
    flags.update({key: f"--set {key}" for key in parse_kv(getattr(args, "set", None))})
    return flags


def _configure_train(p: argparse.ArgumentParser) -> None:
    add_common(p, "train")


@command("train", "train a model on data: networks, agents and pipelines alike", _configure_train)
def _cmd_train(args: argparse.Namespace) -> int:
    import zoo
    from zoo import registry

    out = out_path(args.out, args.name)
    data = given_data(args)
    config = _loop_config(args, registry.family_of(args.name))
    model = build_from_args(args, data, infer=True, loop=config)
    require_data(model, data, args, "zoo_train")
    with refusing_unknown(args, model, "train", _train_flags(args, config)):
        result = zoo.train(model, data, **config)
    from zoo.engine.distributed import dist_info

    if not dist_info().is_main:
        return 0  # under torchrun one process reports and saves (each printed and wrote the same file)
    if result.best_metric is None:
        print(f"trained {args.name}: nothing to report as best (the run made no update or no evaluation)")
    else:
        print(f"trained {args.name}: best {result.monitor} {result.best_metric:.6g} at row {result.best_epoch} "
              f"(step {result.best_step})")
    if out is None:
        out = default_out(args.name)  # without --out the trained model was lost, after a run of any length
    run_dir = Path(args.checkpoint_dir).expanduser() if args.checkpoint_dir else Path.cwd()
    return 0 if save_trained(result.model, out, run_dir, number_as=args.name if numbered(args.out) else None) else 1
