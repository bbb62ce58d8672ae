"""The ``zoo`` command.

Subcommands are registered with :func:`command` (the spine's here and in ``zoo/hub_cli.py``, each family's
in its own ``zoo/<family>/cli.py``), and ``zoo demo`` runs every step registered with :func:`demo`.
A user error (:class:`UsageError`, or the ``KeyError``/``TypeError``/``ValueError``/``FileNotFoundError``
the API raises for bad input) prints one line and exits 2, without a traceback; ``ZOO_DEBUG=1`` shows it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["UsageError", "command", "demo", "main"]


class UsageError(Exception):
    """A mistake in how the command was called; printed as one line."""


@dataclass(frozen=True)
class _Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]


@dataclass(frozen=True)
class _DemoStep:
    title: str
    run: Callable[[], None]
    order: int


_COMMANDS: dict[str, _Command] = {}
_DEMOS: list[_DemoStep] = []
# family -> fn(args, model) -> (data, config): turns `zoo train/eval` options into a family's data
_DATA_ADAPTERS: dict[str, Callable[[argparse.Namespace, Any], tuple[Any, dict[str, Any]]]] = {}


def command(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] | None = None):
    """Register ``fn(args) -> exit code`` as ``zoo NAME``; ``configure(parser)`` adds its arguments."""

    def decorator(fn: Callable[[argparse.Namespace], int | None]):
        if name in _COMMANDS:
            raise ValueError(f"zoo command {name!r} is already registered")
        _COMMANDS[name] = _Command(name, help, configure or (lambda p: None), fn)
        return fn

    return decorator


def demo(title: str, order: int = 50):
    """Register a no-argument function as one step of ``zoo demo`` (lower ``order`` runs first)."""

    def decorator(fn: Callable[[], None]):
        _DEMOS.append(_DemoStep(title, fn, order))
        return fn

    return decorator


def data_adapter(family: str):
    """Register ``fn(args, model) -> (data, config)`` that ``zoo train``/``zoo eval`` use for ``family``.

    ``args`` holds the common options (``--data``, ``--splits``, ``--env``, ``--epochs``, ``--steps``,
    ``--batch-size``, ``--lr``, ``--amp``, ``--device``, ``--seed``, ``--overfit-batches``,
    ``--checkpoint-dir``, ``--resume``, ``--set KEY=VALUE``); ``config`` is passed on to ``zoo.train`` or
    ``zoo.evaluate``. Without an adapter, ``--data`` is passed as it is.
    """

    def decorator(fn):
        _DATA_ADAPTERS[family] = fn
        return fn

    return decorator


def parse_kv(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``["lr=0.1", "name=x", "flag=true"]`` -> ``{"lr": 0.1, "name": "x", "flag": True}`` (JSON values
    where they parse, strings otherwise)."""
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


# --- the spine's own commands -----------------------------------------------------------------------


def _configure_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--family", help="only the models of this family")


@command("list", "list the registered models", _configure_list)
def _cmd_list(args: argparse.Namespace) -> int:
    import zoo

    names = zoo.list_models(args.family)
    width = max((len(n) for n in names), default=4)
    for name in names:
        card = zoo.model_info(name)
        print(f"{name:<{width}}  {card.family:<13}  {card.summary}")
    return 0


def _configure_info(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a registered model name (see `zoo list`)")


@command("info", "show a model's defaults, weights and references", _configure_info)
def _cmd_info(args: argparse.Namespace) -> int:
    import zoo
    from zoo import hub

    card = zoo.model_info(args.name)
    print(card)
    for wname in card.weights:
        entry = hub.get_entry(wname)
        metrics = ", ".join(f"{k}={v}" for k, v in (entry.meta.get("metrics") or {}).items())
        print(f"    {wname}: {entry.meta.get('dataset', '?')}  {metrics}")
    return 0


def _add_run_options(p: argparse.ArgumentParser, training: bool) -> None:
    p.add_argument("name", help="a registered model name (see `zoo list`)")
    p.add_argument("--weights", help="weights to start from: a tag, MODEL.TAG, a path or a URL")
    p.add_argument("--data", help="data root (an image folder, a scene file, a video root, ...)")
    p.add_argument("--splits", help="split files folder (UCF101)")
    p.add_argument("--env", help="gymnasium environment id (TD3)")
    p.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: the model's own, cpu)")
    p.add_argument("--batch-size", type=int, help="batch size")
    p.add_argument("--model", nargs="*", metavar="KEY=VALUE", help="builder config, e.g. num_classes=10")
    p.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="extra options for the family's loop")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    if training:
        p.add_argument("--epochs", type=int, help="epochs (supervised models)")
        p.add_argument("--steps", type=int, help="environment steps (TD3)")
        p.add_argument("--lr", type=float, help="learning rate")
        p.add_argument("--amp", choices=["auto", "bf16", "fp16", "none"],
                       help="mixed precision (default auto: bf16 only where this device computes it fast)")
        p.add_argument("--overfit-batches", type=int, default=0,
                       help="sanity mode: train and validate on the first N batches only")
        p.add_argument("--checkpoint-dir", help="folder for checkpoints (last N and best)")
        p.add_argument("--resume", action="store_true", help="resume from the last checkpoint in --checkpoint-dir")
        p.add_argument("--out", help="save the trained weights here (.safetensors)")
    else:
        p.add_argument("--episodes", type=int, help="evaluation episodes (TD3)")


def _model_and_data(args: argparse.Namespace, training: bool):
    import zoo

    model = zoo.build(args.name, weights=args.weights, **parse_kv(args.model))
    family = zoo.model_info(args.name).family
    adapter = _DATA_ADAPTERS.get(family)
    if adapter is not None:
        data, config = adapter(args, model)
    else:
        if args.data is None:
            raise UsageError(f"{args.name}: --data is required")
        data, config = args.data, {}
    config.update(parse_kv(args.set))
    return model, data, config


def _train_config(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"seed": args.seed}
    for key in ("epochs", "lr", "batch_size", "checkpoint_dir", "device"):
        if getattr(args, key, None) is not None:
            out[key] = getattr(args, key)
    if args.amp:
        out["amp"] = None if args.amp == "none" else args.amp
    if args.overfit_batches:
        out["overfit_batches"] = args.overfit_batches
    if args.resume:
        out["resume"] = True
    return out


def _configure_train(p: argparse.ArgumentParser) -> None:
    _add_run_options(p, training=True)


@command("train", "train a model on data (supervised, RL or pipeline; one command for all)", _configure_train)
def _cmd_train(args: argparse.Namespace) -> int:
    import zoo

    model, data, config = _model_and_data(args, training=True)
    config = {**_train_config(args), **config}
    result = zoo.train(model, data, **config)
    best = getattr(result, "best_metric", None)
    print(f"trained {args.name}: best metric {best}")
    if args.out:
        from zoo import hub

        trained = result.model if getattr(result, "model", None) is not None else model
        # objects that are not a Module (the hyperspectral sklearn pipeline) export their own tensors
        state = trained.export_state_dict() if hasattr(trained, "export_state_dict") else trained
        hub.save_weights(state, args.out)
        print(f"weights written to {args.out}")
    return 0


def _configure_eval(p: argparse.ArgumentParser) -> None:
    _add_run_options(p, training=False)


@command("eval", "evaluate a model (with --weights) on data and print its metrics", _configure_eval)
def _cmd_eval(args: argparse.Namespace) -> int:
    import zoo

    model, data, config = _model_and_data(args, training=False)
    metrics = zoo.evaluate(model, data, **config)
    for key, value in metrics.items():
        print(f"{key}: {value:.6g}" if isinstance(value, float) else f"{key}: {value}")
    return 0


def _benchmarks_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "benchmarks"


def _configure_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="benchmark name (benchmarks/NAME.py); omit to list them")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark script")


@command("bench", "list or run the benchmark scripts of a checkout (benchmarks/*.py)", _configure_bench)
def _cmd_bench(args: argparse.Namespace) -> int:
    import subprocess

    folder = _benchmarks_dir()
    scripts = sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_")) if folder.is_dir() else []
    if not scripts:
        raise UsageError(f"no benchmark scripts found in {folder} (benchmarks live in a source checkout)")
    if args.name is None:
        print("\n".join(scripts))
        return 0
    if args.name not in scripts:
        raise UsageError(f"unknown benchmark {args.name!r}; available: {', '.join(scripts)}")
    return subprocess.call([sys.executable, str(folder / f"{args.name}.py"), *args.args])


def _configure_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", nargs="*", help="run only the demo steps whose title contains one of these")


@command("demo", "run every family's demo on the bundled default weights", _configure_demo)
def _cmd_demo(args: argparse.Namespace) -> int:
    import zoo

    print(f"zoo {zoo.__version__}: {len(zoo.list_models())} models registered")
    for name in zoo.list_models():
        print(f"  {name}")
    steps = sorted(_DEMOS, key=lambda s: (s.order, s.title))
    if args.only:
        steps = [s for s in steps if any(o.lower() in s.title.lower() for o in args.only)]
    failed = 0
    for step in steps:
        print(f"\n== {step.title} ==")
        try:
            step.run()
        except Exception as err:  # one broken step must not hide the others
            failed += 1
            print(f"demo step failed: {type(err).__name__}: {err}", file=sys.stderr)
            if os.environ.get("ZOO_DEBUG"):
                raise
    return 1 if failed else 0


# --- entry point ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    import zoo
    import zoo.hub_cli  # noqa: F401  (`zoo pull`, `zoo weights ...`)

    parser = argparse.ArgumentParser(prog="zoo", description="zoo: build, train, fine-tune and pull models.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for cmd in sorted(_COMMANDS.values(), key=lambda c: c.name):
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.configure(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args._run(args)
    except (UsageError, KeyError, TypeError, ValueError, FileNotFoundError, PermissionError) as err:
        if os.environ.get("ZOO_DEBUG"):
            raise
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"zoo {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
