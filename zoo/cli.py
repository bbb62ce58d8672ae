"""The ``zoo`` command.

Subcommands are registered with :func:`command` (the spine's here, in ``zoo/hub_cli.py`` and
``zoo/export_cli.py``, and in each family's ``zoo/<family>/cli.py``); ``zoo demo`` runs every step registered
with :func:`demo`.

``zoo train|eval|predict NAME`` are one command for every family: they build ``NAME`` (its config
options are generated from the model's config dataclass: ``zoo train td3 --help`` lists them), hand
``--data``/``--env`` to ``zoo.train`` / ``zoo.evaluate`` / ``zoo.predict`` as they are, and say what
they inferred from the data (an env's spaces, a folder's classes). A family adds options of its own
with :func:`family_options` (``--splits`` for videos, ``--labels`` for scenes), and says how ``zoo predict``
reads its inputs and shows its result with :func:`predict_rules` (a scene's label map written by ``--out``).

Errors print one line and a hint, exit code 2; ``--debug`` (or ``ZOO_DEBUG=1``) shows the traceback.
``zoo predict`` exits 1 when some inputs could not be read (their rows say why; the others are printed),
``zoo train --out`` when the model could not be saved there (it is saved to a fallback file it names).
Importing this module and the families' CLI modules imports no torch, so ``zoo --help`` and
``zoo list`` answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AMP_CHOICES", "PredictRules", "UsageError", "add_device_and_amp", "amp_option", "command", "demo",
           "family_options", "main", "model_kv", "parse_kv", "predict_rules", "stdin_lines",
           "with_stdin"]


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


@dataclass(frozen=True)
class _FamilyOptions:
    configure: Callable[[argparse.ArgumentParser], None]
    to_config: Callable[[argparse.Namespace], dict[str, Any]]


@dataclass(frozen=True)
class PredictRules:
    """How ``zoo predict`` treats one family's inputs and result; the defaults are a classifier's (each string an
    input as it is, blank lines of standard input skipped, one printed row per input, ``--out`` refused)."""

    read: Callable[[list[str]], Any] | None = None  # the strings -> what zoo.predict takes (TD3: JSON observations)
    keep_blank: bool = False  # a blank line of standard input is an input (a sentence: output line i is input i's)
    one_input: str | None = None  # zoo.predict takes one such input ("scene"); several are refused naming it
    out: str | None = None  # what --out writes ("a scene's label map"); None: the result is only printed
    # (--out, the first input as typed) -> raises UsageError before the prediction, for a path it cannot write
    check_out: Callable[[str | None, str], Any] | None = None
    # (result, args) -> exit code after printing a result that is not rows (writing --out), None if not its kind
    show: Callable[[Any, argparse.Namespace], int | None] | None = None


_COMMANDS: dict[str, _Command] = {}
_DEMOS: list[_DemoStep] = []
_FAMILY_OPTIONS: dict[str, _FamilyOptions] = {}
# family -> fn(list of input strings) -> what zoo.predict takes (observations parsed from JSON, ...)
_PREDICT_RULES: dict[str, PredictRules] = {}


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


def family_options(family: str, configure: Callable[[argparse.ArgumentParser], None]):
    """Register options of one family for ``zoo train/eval NAME``: ``configure(parser)`` adds them and the
    decorated ``fn(args) -> dict`` turns them into options for ``zoo.train`` / ``zoo.evaluate``."""

    def decorator(fn: Callable[[argparse.Namespace], dict[str, Any]]):
        _FAMILY_OPTIONS[family] = _FamilyOptions(configure, fn)
        return fn

    return decorator


def predict_rules(family: str, rules: PredictRules) -> None:
    """Register how ``zoo predict`` reads a family's inputs (TD3's observations given as JSON), writes ``--out``
    and shows its result (see :class:`PredictRules`)."""
    _PREDICT_RULES[family] = rules


def parse_kv(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``["lr=0.1", "name=x", "flag=true"]`` -> ``{"lr": 0.1, "name": "x", "flag": True}`` (JSON values
    where they parse, Python's ``None`` / ``True`` / ``False`` as theirs, strings otherwise). A key may be
    spelled as the flags are (``image-size=32``)."""
    from zoo.config import json_or_text

    return {key: json_or_text(value) for key, value in _split_kv(pairs).items()}


def model_kv(name: str, pairs: Sequence[str] | None, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """``--model KEY=VALUE ...`` of model ``name``: each value read as its config key's ``--KEY VALUE`` flag
    reads it (:func:`zoo.config.coerce_value`: ``net_arch=32,32`` as ``--net-arch 32,32``; parse_kv's JSON
    left it the string '32,32'). A key that is not in the config (``params``: the registry's ``{key: type}``
    of ``name`` by default) is refused naming the keys."""
    from zoo import registry
    from zoo.config import coerce_value

    if not pairs:
        return {}
    base = registry.split_weights_name(name)[0]
    params = registry.config_params(base) if params is None else params
    given = _split_kv(pairs)
    if isinstance(base, str) and base in registry.list_models():  # a renamed key's old spelling, as build takes it
        given = registry.current_config(base, given)
    out: dict[str, Any] = {}
    for key, text in given.items():
        if key not in params:
            raise UsageError(f"{name}: unknown config key {key!r}; keys: {', '.join(sorted(params))}")
        try:
            out[key] = coerce_value(name, key, text, params[key])
        except (TypeError, ValueError) as err:
            raise UsageError(str(err)) from None
    return out


def _split_kv(pairs: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        out[key.replace("-", "_")] = value  # option names are Python names, never with a dash
    return out


# --- the spine's own commands -----------------------------------------------------------------------


def _configure_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--family", help="only the models of this family")


@command("list", "list the registered models", _configure_list)
def _cmd_list(args: argparse.Namespace) -> int:
    from zoo import registry

    names = registry.list_models(args.family)
    width = max((len(n) for n in names), default=4)
    for name in names:
        print(f"{name:<{width}}  {registry.family_of(name):<13}  {registry.summary_of(name)}")
    return 0


def _configure_info(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a registered model name (see `zoo list`)")


@command("info", "show a model's defaults, weights and references", _configure_info)
def _cmd_info(args: argparse.Namespace) -> int:
    import zoo
    from zoo import hub, registry

    card = zoo.model_info(args.name)
    print(card)
    named = registry.split_weights_name(args.name)[1]  # zoo info resnet18.cifar10: that weights' card
    for wname in [named] if named else card.weights:
        entry = hub.get_entry(wname)
        metrics = ", ".join(f"{k}={v}" for k, v in (entry.meta.get("metrics") or {}).items())
        print(f"    {wname}: {entry.meta.get('dataset', 'dataset not recorded')}" + (f"  {metrics}" if metrics else ""))
        if named:
            _print_weights_details(entry)
    return 0


# what `zoo info NAME.TAG` shows of a weights entry beyond its data set and metrics: how it was made and stored
_WEIGHTS_DETAILS = ("recipe", "command", "train_minutes", "num_params", "dtype", "license")


def _print_weights_details(entry: Any) -> None:
    """The entry's provenance (the command that produced it, its recipe) and its file (size, sha256, storage
    dtype, license): they were only in the manifest, which `zoo info` is the reader of."""
    from zoo import fs

    for key in _WEIGHTS_DETAILS:
        if entry.meta.get(key) is not None:
            print(f"      {key}: {entry.meta[key]}")
    if entry.config:
        print(f"      config: {', '.join(f'{k}={v!r}' for k, v in entry.config.items())}")
    size = f"{fs.human_size(entry.size)}, " if entry.size else ""
    print(f"      file: {entry.url} ({size}{entry.format}, sha256 {entry.sha256 or entry.sha256_prefix})")


# --- zoo train / eval / predict: one command for every family --------------------------------------------

# where zoo train saves without --out, as zoo finetune writes to runs/finetune (and YOLO to runs/train)
TRAIN_RUNS = Path("runs") / "train"
# common options -> the loop option they set (when given)
_LOOP_OPTIONS = {"epochs": "epochs", "steps": "total_steps", "episodes": "episodes", "lr": "lr",
                 "batch_size": "batch_size", "device": "device", "seed": "seed", "checkpoint_dir": "checkpoint_dir"}
# common options that are also a model's config key where the model has one (TD3's batch_size, amp, seed): for
# zoo train they set it; zoo eval / predict build with the device only (where the model runs), the others are
# training settings there
_SHARED_WITH_CONFIG = ("batch_size", "amp", "device", "seed")
_SHARED_WHEN_RUN = ("device",)
# the common options of zoo eval / zoo predict: each goes to zoo.evaluate / zoo.predict where the model's
# evaluate / predict takes it, and is refused where it does not (never dropped unseen)
_CALL_FLAGS = {"evaluate": ("device", "amp", "batch_size", "seed", "episodes"),
               "predict": ("device", "amp", "batch_size", "seed", "topk")}


def _device(text: str) -> str:
    """``--device``, checked before any work (:func:`zoo.engine.devices.usable_device`): torch's own error for a
    missing GPU came after the model was built and named no flag."""
    from zoo.engine.devices import usable_device

    try:
        usable_device(text, name="--device")
    except RuntimeError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


AMP_CHOICES = ("auto", "bf16", "fp16", "none")


def add_device_and_amp(p: argparse.ArgumentParser) -> None:
    """``--device`` and ``--amp`` as ``zoo predict`` has them, for a family's own command; :func:`amp_option`
    turns ``--amp`` into the ``amp=`` value."""
    p.add_argument("--device", type=_device, help="cpu (default), cuda, cuda:1, ...")
    p.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                   help="mixed precision: auto (default) is bf16 only where this device computes it fast; none is "
                        "exact fp32")


def amp_option(value: str | None) -> str | None:
    """``--amp``'s value as ``amp=`` takes it: ``none`` is None (fp32)."""
    return None if value == "none" else value


def _add_common(p: argparse.ArgumentParser, kind: str) -> None:
    p.add_argument("name", help="a registered model name (see `zoo list`); `zoo KIND NAME --help` lists its config")
    # predict needs weights, but NAME as MODEL.TAG gives them too: checked in _cmd_predict, so that the usage
    # line does not show --weights as required
    p.add_argument("--weights",
                   help="weights: a tag (pendulum-v1), MODEL.TAG, a .safetensors path or a URL"
                        + ("; or give NAME as MODEL.TAG (zoo predict resnet18.cifar10 IMAGES)" if kind == "predict"
                           else ""))
    if kind != "predict":
        p.add_argument("--data", help="data: an image/video/corpus folder, a scene file or data set name")
        p.add_argument("--env", help="gymnasium environment id (TD3): the agent is built for it")
        p.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="more options for the family's loop")
    p.add_argument("--model", nargs="*", metavar="KEY=VALUE", help="config keys, as an alternative to --KEY VALUE")
    where = "" if kind == "train" else f" (models whose {'evaluate' if kind == 'eval' else kind} takes it)"
    p.add_argument("--device", type=_device, help=f"cpu (default), cuda, cuda:1, ...{where}")
    p.add_argument("--seed", type=int, help=f"random seed{where}")
    p.add_argument("--batch-size", type=int, help=f"batch size{where}")
    p.add_argument("--amp", choices=AMP_CHOICES,
                   help=f"mixed precision: auto (default) is bf16 only where this device computes it fast{where}")
    if kind == "train":
        p.add_argument("--epochs", type=int, help="epochs (networks)")
        p.add_argument("--steps", type=int, help="environment steps (agents)")
        p.add_argument("--lr", type=float, help="learning rate")
        p.add_argument("--overfit-batches", type=int, default=0,
                       help="sanity mode: train and validate on the first N batches only")
        p.add_argument("--checkpoint-dir", help="folder for checkpoints and logs")
        p.add_argument("--resume", action="store_true", help="resume from the last checkpoint in --checkpoint-dir")
        p.add_argument("--out", help="save the trained model here (.safetensors, or a folder; default "
                                     f"{TRAIN_RUNS}/NAME.safetensors, numbered NAME-2 ... beside an earlier one)")
    elif kind == "eval":
        p.add_argument("--episodes", type=int, help="evaluation episodes (agents)")
        p.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    else:
        p.add_argument("inputs", nargs="+", help="image/video files or folders, sentences, scene files, "
                                                 "observations as JSON or 1,0,-2; - reads them from standard input, one a line")
        p.add_argument("--topk", type=int, help="classes to show per input (classifiers)")
        p.add_argument("--out", help="where to write an output that is a file (a scene's label map: .npy + .png)")
        p.add_argument("--json", action="store_true", help="print JSON lines")
        p.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="more options for zoo.predict (beam_size=5)")


def _config_flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _add_model_flags(p: argparse.ArgumentParser, name: str) -> None:
    """``--KEY VALUE`` for every config key of ``name`` that is not a common option."""
    from zoo import registry
    from zoo.config import field_docs, type_name

    taken = {a.dest for a in p._actions}
    cls = registry.config_class(name)
    docs = field_docs(cls) if cls is not None else {}
    group = p.add_argument_group(f"{name} config (defaults: `zoo info {name}`)")
    for key, tp in registry.config_params(name).items():
        if key in taken:
            continue
        shown = type_name(tp).replace(" ", "")  # INT, FLOAT | NONE; literal values as they are typed: 'cifar'
        group.add_argument(_config_flag(key), dest=f"cfg__{key}", metavar=shown if "'" in shown else shown.upper(),
                           help=docs.get(key, ""))
    for old, new in registry.renamed_keys(name).items():  # the old flag still works, out of --help
        if _config_flag(old) not in p._option_string_actions:
            group.add_argument(_config_flag(old), dest=f"cfg__{new}", action=_RenamedFlag, help=argparse.SUPPRESS,
                               renamed=_config_flag(new))


class _RenamedFlag(argparse.Action):
    """A renamed config field's old flag (``--n-classes``): stores into the new one's, with a FutureWarning."""

    def __init__(self, *args: Any, renamed: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.renamed = renamed

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        warnings.warn(f"{option_string} is renamed {self.renamed} ({option_string} will stop working in a future "
                      "release)", FutureWarning, stacklevel=2)
        setattr(namespace, self.dest, values)


_NAME_AND_WEIGHTS = ("train", "eval", "predict", "finetune", "export")  # commands taking NAME and --weights
_MODEL_FLAG = ("translate",)  # commands taking the model as --model NAME


def weights_name_argv(argv: list[str]) -> list[str]:
    """``zoo predict resnet18.cifar10 ...`` -> ``zoo predict resnet18 ... --weights resnet18.cifar10`` (a weights
    name given as NAME, as :func:`zoo.build` takes one); a ``--weights`` naming other weights is an error."""
    from zoo import registry

    if len(argv) < 2 or argv[0] not in _NAME_AND_WEIGHTS:
        return argv
    flag = next((i for i, a in enumerate(argv) if a == "--weights" or a.startswith("--weights=")), None)
    given = None if flag is None else (argv[flag].split("=", 1)[1] if "=" in argv[flag] else
                                       (argv[flag + 1] if flag + 1 < len(argv) else None))
    name, weights = registry.split_weights_name(argv[1], given)
    if name == argv[1]:
        return argv
    return [argv[0], name, *argv[2:], *(["--weights", weights] if given is None else [])]


def model_first_argv(argv: list[str]) -> list[str]:
    """``zoo translate seq2seq-gru --weights W "Ein Hund."`` -> ``zoo translate --weights W "Ein Hund." --model
    seq2seq-gru``: the ``zoo CMD NAME`` shape of every other command, for a command whose model is ``--model``
    (argparse read NAME as the first sentence and refused the sentence after ``--weights``). A weights name
    there (``seq2seq-gru.TAG``) is its ``--weights`` when none is given."""
    from zoo import registry

    if len(argv) < 2 or argv[0] not in _MODEL_FLAG or argv[1].startswith("-") or \
            argv[1].split(".", 1)[0] not in registry.list_models() or "--model" in argv:
        return argv
    name, weights = registry.split_weights_name(argv[1])
    given = any(a == "--weights" or a.startswith("--weights=") for a in argv)
    return [argv[0], *argv[2:], "--model", name, *(["--weights", weights] if weights and not given else [])]


def _model_name_in(argv: Sequence[str]) -> str | None:
    """The NAME of ``zoo train|eval|predict NAME ...`` when it is a registered model (for its flags)."""
    from zoo import registry

    if len(argv) < 2 or argv[0] not in ("train", "eval", "predict"):
        return None
    names = registry.list_models()
    if argv[1] in names:
        return argv[1]
    if not argv[1].startswith("-"):
        # a misspelt NAME now, or argparse rejects its model flags first ("unrecognized arguments: --stem")
        registry.family_of(argv[1])
    # options before NAME (`zoo train --data DIR resnet18 --stem cifar`)
    return next((a for a in argv[2:] if a in names), None)


def _model_config(args: argparse.Namespace, params: dict[str, Any], shared: Sequence[str]) -> dict[str, Any]:
    from zoo.config import coerce_value

    config = model_kv(args.name, args.model, params)
    for key, value in vars(args).items():
        if key.startswith("cfg__") and value is not None:
            config[key[5:]] = coerce_value(args.name, key[5:], value, params[key[5:]])
    for key in shared:
        value = getattr(args, key, None)
        if key in params and value is not None:
            config[key] = amp_option(value) if key == "amp" else value
    return config


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
    extra = _FAMILY_OPTIONS.get(family)
    if extra is not None:
        out.update(extra.to_config(args))
    out.update(parse_kv(getattr(args, "set", None)))
    return out


def _data(args: argparse.Namespace) -> Any:
    if args.data is not None and args.env is not None:
        raise UsageError("give the data once: --data for datasets, --env for an environment")
    return args.env if args.env is not None else args.data


def _require_data(model: Any, data: Any, args: argparse.Namespace, method: str) -> None:
    """Without ``--data``, the engine's networks fail naming the Python call (``zoo.train(ResNet18, data)``);
    on the command line the missing thing is the flag. (Agents default to their env, the hyperspectral
    models to their own scene: their own methods decide.)"""
    if data is not None:
        return
    from zoo.engine.network import Network

    if isinstance(model, Network):  # a family's own zoo_evaluate (video) still needs data
        raise UsageError(f"{args.name} needs --data: an image, video or corpus folder "
                         f"(`zoo {args.command} {args.name} --help` lists the options)")


def _build(args: argparse.Namespace, data: Any, infer: bool, loop: dict[str, Any] | None = None) -> Any:
    """Build ``args.name`` from its options; for training, with what ``data`` implies (and say so), its initial
    weights drawn after seeding with ``--seed`` (0 when none is given, as ``zoo.train`` by name does). ``loop``: the options the data goes to ``zoo.train`` with
    (``splits`` changes what a video root holds)."""
    import zoo
    from zoo import registry

    params = registry.config_params(args.name)
    config = _model_config(args, params, _SHARED_WITH_CONFIG if infer else _SHARED_WHEN_RUN)
    if infer:
        implied = registry.infer_config(args.name, data, **(loop or {}))
        inferred = {k: v for k, v in implied.items() if k not in config}
        if inferred:
            shown = ", ".join(f"{k}={v!r}" for k, v in inferred.items())
            print(f"{args.name}: {shown} (inferred from {'--env' if args.env else '--data'})")
        config = {**inferred, **config}
        from zoo.api import seeded_build

        # the initial weights come from generators seeded as zoo.train(NAME, ...) seeds them: --seed, else 0
        with seeded_build((loop or {}).get("seed", args.seed)):
            return zoo.build(args.name, weights=args.weights, **config)
    return zoo.build(args.name, weights=args.weights, **config)


def _out_path(out: str | None, name: str) -> Path | None:
    """Check ``--out`` before any work: a folder gets ``NAME.safetensors`` inside; an unwritable place fails now."""
    if out is None:
        return None
    path = Path(out).expanduser()  # as zoo.save and --weights do (a quoted '~' reaches us unexpanded)
    if path.is_dir() or out.endswith(("/", os.sep)):
        path = path / f"{name}.safetensors"
    if path.suffix == "" and not path.exists():  # a folder's name, most likely: zoo makes none (a typo would get one)
        raise UsageError(f"--out {out}: no folder {path}; create it (mkdir -p {path}) to save {name}.safetensors "
                         f"there, or give a file name ending in .safetensors")
    if path.suffix != ".safetensors":
        raise UsageError(f"--out {out}: zoo saves .safetensors files; give NAME.safetensors or a folder")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"--out {out}: folder {parent} does not exist; create it (mkdir -p {parent}) or give "
                         "another path")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--out {out}: {path if path.exists() else parent} is not writable")
    return path


def _default_out(name: str) -> Path:
    """``runs/train/NAME.safetensors``, or ``NAME-2``, ``NAME-3`` ...: a default never overwrites a model."""
    folder = TRAIN_RUNS.expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"no --out given and {folder} cannot be made ({err}): give --out FILE.safetensors") from err
    path, k = folder / f"{name}.safetensors", 1
    while path.exists():
        k += 1
        path = folder / f"{name}-{k}.safetensors"
    return path


def _save_trained(model: Any, out: Path, run_dir: Path) -> bool:
    """Save to ``out``; if that fails after all (disk full, permissions changed), save to a fallback file in
    the run folder so the trained model is not lost, and say where. False when ``out`` was not written (the
    command then exits 1: a script must not go on with a missing or old file)."""
    import zoo

    try:
        print(f"saved to {zoo.save(model, out)}")
        return True
    except OSError as err:
        fallback = run_dir / f"{out.stem}.unsaved-{time.strftime('%Y%m%d-%H%M%S')}.safetensors"
        try:
            zoo.save(model, fallback)
        except OSError:
            raise UsageError(f"could not save the trained model to {out} ({err}), nor to {fallback}") from err
        print(f"could not save to {out} ({err}); the trained model is in {fallback}", file=sys.stderr)
        return False


def _train_flags(args: argparse.Namespace, config: dict[str, Any]) -> dict[str, str]:
    """The flag the user typed for each option ``zoo train`` hands to ``zoo.train`` (``total_steps`` was
    ``--steps``, ``x`` of ``--set x=1`` was that), so a family's loop refusing one is said in those words."""
    flags = {key: _config_flag(opt) for opt, key in _LOOP_OPTIONS.items() if key in config}
    flags.update({key: _config_flag(key) for key in ("amp", "overfit_batches", "resume") if key in config})
    flags.update({key: f"--set {key}" for key in parse_kv(getattr(args, "set", None))})
    return flags


def _configure_train(p: argparse.ArgumentParser) -> None:
    _add_common(p, "train")


@command("train", "train a model on data: networks, agents and pipelines alike", _configure_train)
def _cmd_train(args: argparse.Namespace) -> int:
    import zoo
    from zoo import registry

    out = _out_path(args.out, args.name)
    data = _data(args)
    config = _loop_config(args, registry.family_of(args.name))
    model = _build(args, data, infer=True, loop=config)
    _require_data(model, data, args, "zoo_train")
    with _refusing_unknown(args, model, "train", _train_flags(args, config)):
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
        out = _default_out(args.name)  # without --out the trained model was lost, after a run of any length
    run_dir = Path(args.checkpoint_dir).expanduser() if args.checkpoint_dir else Path.cwd()
    return 0 if _save_trained(result.model, out, run_dir) else 1


def _configure_eval(p: argparse.ArgumentParser) -> None:
    _add_common(p, "eval")


def _call_options(args: argparse.Namespace, model: Any, call: str) -> dict[str, Any]:
    """The common options given to ``zoo eval`` / ``zoo predict``, for ``zoo.<call>``: each one the model's
    evaluate / predict takes (by its signature, looked at now: a family may add one), else a UsageError
    naming it, except one the model was built with (TD3's --device: it runs where it was built)."""
    from zoo import registry
    from zoo.api import accepts_option

    built = set(_SHARED_WHEN_RUN) & set(registry.config_params(args.name))
    out: dict[str, Any] = {}
    for dest in _CALL_FLAGS[call]:
        value = getattr(args, dest, None)
        if value is None:
            continue
        if accepts_option(model, call, dest) is False:
            if dest in built:
                continue
            raise UsageError(_not_an_option(args, model, call, _config_flag(dest)))
        out[dest] = amp_option(value) if dest == "amp" else value
    return out


def _not_an_option(args: argparse.Namespace, model: Any, call: str, flag: str, said: str = "") -> str:
    """The one line refusing ``flag``; ``said``: the family's own refusal, whose list of what it takes is kept."""
    from zoo import registry
    from zoo.api import named_options

    key = flag.removeprefix("--set ").removeprefix("--").replace("-", "_")
    if call == "train" and key in registry.config_params(args.name):
        # a setting the model is built with: the refusal told the user to leave out what --KEY sets
        return (f"{key} is a setting of {args.name}'s config, which the model takes when it is built: "
                f"{_config_flag(key)} VALUE (or --model {key}=VALUE), not {flag.split('=')[0]}")
    takes = named_options(model, call) if call != "train" else None  # a loop's options are not in a signature
    if takes is None:  # the family decides; its own message may list what it takes
        listed = re.search(r"(?:it takes|options:) ([\w, ]+)", said)
        takes = [listed.group(1)] if listed else []
    trained = (f"; {flag} is a training setting of {args.name} (`zoo train {args.name} {flag} ...`)"
               if call != "train" and not flag.startswith("--set ") and key in registry.config_params(args.name)
               else "")
    return (f"{flag} is not an option of {args.name}'s {call}" + (f" (it takes {', '.join(takes)})" if takes else "")
            + f"{trained}; leave it out")


@contextlib.contextmanager
def _refusing_unknown(args: argparse.Namespace, model: Any, call: str, given: dict[str, str]):
    """A family whose evaluate / predict takes ``**options`` refuses an unknown one with a TypeError (Python's
    "got an unexpected keyword argument 'seed'", zoo's "unknown option(s) 'seed'"); on the command line that is
    the flag the user typed, said as such."""
    try:
        yield
    except TypeError as err:
        found = re.search(r"(?:unexpected keyword argument|unknown option\(s\)) '?(\w+)", str(err))
        if found is None or found.group(1) not in given:
            raise
        raise UsageError(_not_an_option(args, model, call, given[found.group(1)], str(err))) from err


@command("eval", "evaluate a model (with --weights) on data and print its metrics", _configure_eval)
def _cmd_eval(args: argparse.Namespace) -> int:
    import zoo
    from zoo import registry

    data = _data(args)
    model = _build(args, data, infer=False)
    _require_data(model, data, args, "zoo_evaluate")
    config = _call_options(args, model, "evaluate")
    given = {key: _config_flag(key) for key in config}
    extra = _FAMILY_OPTIONS.get(registry.family_of(args.name))
    if extra is not None:
        config.update(extra.to_config(args))
    sets = parse_kv(args.set)
    config.update(sets)
    given.update({key: f"--set {key}" for key in sets})
    with _refusing_unknown(args, model, "evaluate", given):
        metrics = zoo.evaluate(model, data, **config)
    if args.json:
        print(json.dumps(metrics, default=_json_plain))
        return 0
    for key, value in metrics.items():
        print(f"{key}: {value:.6g}" if isinstance(value, float) else f"{key}: {value}")
    return 0


def _json_plain(value: Any) -> Any:
    """A NumPy or torch value (a per-class array, a NumPy float) as JSON's list or number; else its text."""
    return value.tolist() if hasattr(value, "tolist") else str(value)


# a negative observation, "-1,0,0" or "-0.5e-3,2": argparse takes only "-1" and "-.5" for numbers, and read it
# as an unknown option ("the following arguments are required: inputs")
_NEGATIVE_VALUES = re.compile(r"^-\.?\d[\d.,eE+-]*$")


def _configure_predict(p: argparse.ArgumentParser) -> None:
    _add_common(p, "predict")


def _predict_rules(name: str) -> PredictRules:
    from zoo import registry

    return _PREDICT_RULES.get(registry.family_of(name), PredictRules())


def _print_prediction(result: Any, args: argparse.Namespace) -> int:
    """Print ``zoo.predict``'s result; returns how many inputs could not be read (their rows say why)."""
    import numpy as np

    if isinstance(result, str):
        result = [result]
    if isinstance(result, list) and result and all(isinstance(r, dict) for r in result):
        for r in result:
            if args.json:
                print(json.dumps(r, default=str))
            elif "error" in r:
                print(f"{r['input']}\tERROR {r['error']}")
            else:
                print(f"{r['input']}\t" + "  ".join(f"{lbl} {p:.3f}" for lbl, p in r["topk"]))
        return sum("error" in r for r in result)
    if isinstance(result, list):
        for r in result:
            print(json.dumps(r) if args.json else r)
        return 0
    show = _predict_rules(args.name).show  # the family's own kind of result (a scene's label map)
    code = show(result, args) if show is not None else None
    if code is not None:
        return code
    print(json.dumps(np.asarray(result).tolist()))
    return 0


def stdin_lines() -> list[str]:
    """Standard input's lines without their ends (``\\n`` or ``\\r\\n``) and without a byte-order mark before
    the first (Windows tools write one), which would otherwise begin the first input."""
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    if lines:
        lines[0] = lines[0].removeprefix("\ufeff")
    return lines


def with_stdin(inputs: list[str], *, keep_blank: bool) -> list[str]:
    """``inputs`` with a ``-`` replaced by the lines of standard input, one input per line (``find . -name
    '*.jpg' | zoo predict resnet18 --weights cifar10 -``). Blank lines are kept where an input is a sentence
    (its translation is "", so output line i stays input line i's) and skipped where it is a path or an
    observation."""
    if "-" not in inputs:
        return inputs
    if inputs.count("-") > 1:
        raise UsageError("'-' (read inputs from standard input) may be given once")
    lines = stdin_lines()
    lines = lines if keep_blank else [line for line in lines if line.strip()]
    i = inputs.index("-")
    out = inputs[:i] + lines + inputs[i + 1:]
    if not out:
        raise UsageError("no inputs: standard input ('-') was empty")
    return out


@command("predict", "run a model on inputs: images, videos, sentences, scenes or observations", _configure_predict)
def _cmd_predict(args: argparse.Namespace) -> int:
    import zoo
    from zoo.inputs import UnreadableInputWarning

    if args.weights is None:
        raise UsageError(f"zoo predict {args.name} needs trained weights: --weights TAG (`zoo weights list` names them), "
                         f"a .safetensors file, or NAME as MODEL.TAG (zoo predict {args.name}.TAG ...)")
    rules = _predict_rules(args.name)
    if args.out is not None and rules.out is None:
        # the other families' results are the printed lines; an --out that writes nothing would pass unnoticed
        writes = " or ".join(f"{r.out} ({family} models)" for family, r in sorted(_PREDICT_RULES.items()) if r.out)
        raise UsageError(f"--out {args.out}: only {writes} is written to a file; "
                         f"{args.name} prints one line per input (--json for JSON lines): redirect the output")
    strings = with_stdin(args.inputs, keep_blank=rules.keep_blank)
    inputs: Any = rules.read(strings) if rules.read is not None else strings
    if rules.one_input is not None:
        if len(inputs) > 1:  # zoo.predict takes one; its "got list" named no flag
            raise UsageError(f"{args.name} predicts one {rules.one_input} per command, got {len(inputs)}: "
                             f"run `zoo predict {args.name}` once per {rules.one_input}")
        inputs = inputs[0]
    if rules.check_out is not None:
        rules.check_out(args.out, str(args.inputs[0]))  # before the prediction: a missing folder fails now
    model = _build(args, None, infer=False)
    sets = parse_kv(args.set)
    flags = _call_options(args, model, "predict")
    config = {**sets, **flags}
    given = {**{key: f"--set {key}" for key in sets}, **{key: _config_flag(key) for key in flags}}
    with _refusing_unknown(args, model, "predict", given), warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableInputWarning)  # the input's row says it
        result = zoo.predict(model, inputs, **config)
    failed = _print_prediction(result, args)
    if failed:
        # the other inputs' rows are printed; the exit status still tells a script that some are missing
        print(f"zoo predict: {failed} input(s) could not be read (their rows say why)", file=sys.stderr)
        return 1
    return 0


def _benchmarks_dir() -> Path | None:
    """The checkout's ``benchmarks/``; None for an installed package (whose parent folder is site-packages,
    where another distribution's top-level ``benchmarks`` must never be taken for ours)."""
    from zoo.hub.manifest import checkout_root

    root = checkout_root()
    return None if root is None else root / "benchmarks"


def _configure_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="benchmark name (benchmarks/NAME.py); omit to list them")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark script")


@command("bench", "list or run the benchmark scripts of a checkout (benchmarks/*.py)", _configure_bench)
def _cmd_bench(args: argparse.Namespace) -> int:
    import subprocess

    folder = _benchmarks_dir()
    if folder is None:
        raise UsageError(f"zoo bench runs the benchmark scripts of a source checkout, and this zoo is installed "
                         f"({Path(__file__).resolve().parent}): run it in a clone of the repository")
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


@command("demo", "run every family's demo on the default weights (a checkout's weights/; installed: pulled "
         "into the cache, or from a ZOO_WEIGHTS_URL mirror)", _configure_demo)
def _cmd_demo(args: argparse.Namespace) -> int:
    import zoo

    steps = sorted(_DEMOS, key=lambda s: (s.order, s.title))
    if args.only:
        chosen = [s for s in steps if any(o.lower() in s.title.lower() for o in args.only)]
        if not chosen:  # a typo would otherwise run nothing and pass
            raise UsageError(f"--only {' '.join(args.only)}: no demo step's title contains that; steps: "
                             + "; ".join(s.title for s in steps))
        steps = chosen
    print(f"zoo {zoo.__version__}: {len(zoo.list_models())} models registered: {', '.join(zoo.list_models())}")
    note = _demo_threads()
    if note:
        print(note)
    failed = 0
    times: list[tuple[str, float]] = []
    for step in steps:
        print(f"\n== {step.title} ==", flush=True)
        t0 = time.perf_counter()
        try:
            step.run()
        except Exception as err:  # one broken step must not hide the others
            failed += 1
            print(f"demo step failed: {type(err).__name__}: {err}", file=sys.stderr)
            if os.environ.get("ZOO_DEBUG"):
                raise
        times.append((step.title, time.perf_counter() - t0))
        print(f"-- {times[-1][1]:.1f} s", flush=True)
    print("\ndemo step times: " + ", ".join(f"{t.split(':')[0].split(' (')[0]} {s:.1f} s" for t, s in times)
          + f"; total {sum(s for _, s in times):.1f} s")
    return 1 if failed else 0


def _demo_threads() -> str:
    """The demo's steps are small inferences. On a machine that other processes already keep busy, every op
    of a multi-threaded run waits for a descheduled peer thread (measured on a loaded 2-core VM: the seq2seq
    step 17 s with 2 threads, 0.4 s with 1), so a busy machine runs the steps single-threaded and says so.
    An explicit OMP_NUM_THREADS is obeyed."""
    if os.environ.get("OMP_NUM_THREADS") or not hasattr(os, "getloadavg"):
        return ""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load < cores:
        return ""
    import torch

    torch.set_num_threads(1)
    return f"(machine busy: load {load:.1f} on {cores} cores, so the steps run single-threaded)"


# --- entry point ------------------------------------------------------------------------------------


def _version_line() -> str:
    """``zoo 0.1.0 (torch 2.14.1, Python 3.11.7)``: what a bug report needs, read without importing torch."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import zoo

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "not installed"
    return f"zoo {zoo.__version__} (torch {torch_version}, Python {platform.python_version()})"


class _PrintVersion(argparse.Action):
    """``--version``, looked up only when asked: reading torch's metadata would cost every command time."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show zoo's, torch's and Python's versions and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(_version_line())
        parser.exit()


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; with ``argv`` naming ``train|eval|predict MODEL``, that model's config options too."""
    import zoo
    import zoo.export_cli  # `zoo export`
    import zoo.hub_cli  # noqa: F401  (`zoo pull`, `zoo weights ...`)
    from zoo import registry

    parser = argparse.ArgumentParser(prog="zoo", description="zoo: build, train, evaluate, predict and pull models.")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument("--version", action=_PrintVersion)
    # argparse's own hook for what reads as a value, not an option (no flag of ours starts with a digit); the
    # top parser sorts the words before a command's parser sees them
    parser._negative_number_matcher = _NEGATIVE_VALUES
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    name = _model_name_in(argv)
    for cmd in sorted(_COMMANDS.values(), key=lambda c: c.name):
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        p._negative_number_matcher = _NEGATIVE_VALUES
        cmd.configure(p)
        if cmd.name in ("train", "eval") and name is not None:
            extra = _FAMILY_OPTIONS.get(registry.family_of(name))
            if extra is not None:
                extra.configure(p.add_argument_group(f"{registry.family_of(name)} options"))
        if name is not None and cmd.name == argv[0]:
            _add_model_flags(p, name)
        p.set_defaults(_run=cmd.run)
    return parser


_HINTS = {
    "FileNotFoundError": "check the path",
    "PermissionError": "check the file's permissions",
    "KeyError": "`zoo list` and `zoo weights list` show the names",
    "TypeError": "`zoo info NAME` shows the config keys and their types",
    "ExportError": "nothing was written; `zoo export --help` lists the formats",
}


def _report(command_name: str, err: BaseException) -> None:
    msg = err.args[0] if isinstance(err, KeyError) and err.args else err
    known = isinstance(err, (UsageError, ValueError, TypeError, KeyError, OSError))
    kind = "" if known else f"{type(err).__name__}: "
    print(f"zoo {command_name}: error: {kind}{msg}", file=sys.stderr)
    hint = _HINTS.get(type(err).__name__)
    print(f"  ({hint + '; ' if hint else ''}run with --debug for the traceback)", file=sys.stderr)


class _StdoutHandler(logging.StreamHandler):
    """Log records to whatever ``sys.stdout`` is when they are emitted (so a captured stdout gets them), or
    ``sys.stderr`` under ``--json``, whose standard output is JSON only."""

    to_stderr = False

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr if self.to_stderr else sys.stdout

    @stream.setter
    def stream(self, value) -> None:
        pass


def _show_zoo_logs(to_stderr: bool = False) -> None:
    """The families say what they decided (a split chosen, a setting applied on resume) through their
    module loggers; the command shows those INFO messages as plain lines (on standard error under --json)."""
    _StdoutHandler.to_stderr = to_stderr
    logger = logging.getLogger("zoo")
    if not any(isinstance(h, _StdoutHandler) for h in logger.handlers):
        handler = _StdoutHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


@contextlib.contextmanager
def _plain_warnings(command: str):
    """Warnings as one line each, ``zoo CMD: warning: message``, above any progress bar: the file and line
    a warning names mean nothing at a prompt, and the source line Python adds is zoo's own entry script."""
    from zoo._progress import ProgressBar

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        ProgressBar.write(f"zoo {command}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def main(argv: Sequence[str] | None = None) -> int:
    # no argv: this process's own command line (the `zoo` script, `python -m zoo`), which decides how
    # warnings look; a caller passing argv (a test, a script) keeps its own warning machinery
    own_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    _show_zoo_logs(to_stderr="--json" in argv)
    debug = "--debug" in argv or bool(os.environ.get("ZOO_DEBUG"))
    rest = [a for a in argv if a != "--debug"]
    plain = _plain_warnings(rest[0] if rest else "") if own_process and not debug else contextlib.nullcontext()
    if own_process:
        from zoo._interrupts import sigterm_as_ctrl_c

        sigterm_as_ctrl_c()
    with plain:
        return _dispatch(rest, debug)


def _dispatch(rest: list[str], debug: bool) -> int:
    try:
        rest = model_first_argv(weights_name_argv(rest))
        parser = build_parser(rest)
        args = parser.parse_args(rest)
        code = args._run(args)
    except KeyboardInterrupt as err:  # a run that saved its state on the way says where (TD3's loop does)
        print(f"interrupted: {err}" if str(err) else "interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `zoo list | head`
        sys.stderr.close()
        return 0
    except Exception as err:
        if debug:
            raise
        _report(rest[0] if rest else "", err)
        return 2
    return int(code or 0)


if __name__ == "__main__":
    # `python -m zoo.cli` runs this file as __main__, a second copy of the module: the families register their
    # commands (finetune, translate, pull, ...) into the package's zoo.cli, so that copy's main knew 7 of them
    from zoo.cli import main as package_main

    sys.exit(package_main())
