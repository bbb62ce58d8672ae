"""The options ``zoo train``, ``zoo eval`` and ``zoo predict`` share: the common flags, a model's config keys as
``--KEY VALUE`` flags, building the model from them, and refusing a flag the model's call does not take.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import warnings
from collections.abc import Sequence
from typing import Any

from zoo.cli.arguments import AMP_CHOICES, amp_option, device, model_kv
from zoo.cli.errors import UsageError
from zoo.cli.train_output import TRAIN_RUNS

# common options that are also a model's config key where the model has one (TD3's batch_size, amp, seed): for
# zoo train they set it; zoo eval / predict build with the device only (where the model runs), the others are
# training settings there
_SHARED_WITH_CONFIG = ("batch_size", "amp", "device", "seed")
_SHARED_WHEN_RUN = ("device",)
# the common options of zoo eval / zoo predict: each goes to zoo.evaluate / zoo.predict where the model's
# evaluate / predict takes it, and is refused where it does not (never dropped unseen)
_CALL_FLAGS = {"evaluate": ("device", "amp", "batch_size", "seed", "episodes"),
               "predict": ("device", "amp", "batch_size", "seed", "topk")}


def add_common(p: argparse.ArgumentParser, kind: str) -> None:
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
        # extend: a second --set adds its pairs (it replaced the first's, whose settings were dropped without a word)
        p.add_argument("--set", nargs="*", action="extend", metavar="KEY=VALUE",
                       help="more options for the family's loop")
    p.add_argument("--model", nargs="*", action="extend", metavar="KEY=VALUE",
                   help="config keys, as an alternative to --KEY VALUE")
    where = "" if kind == "train" else f" (models whose {'evaluate' if kind == 'eval' else kind} takes it)"
    p.add_argument("--device", type=device, help=f"cpu (default), cuda, cuda:1, ...{where}")
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
        p.add_argument("--out", help="save the trained model here (a .safetensors file, replaced if it exists, or a "
                                     f"folder; default {TRAIN_RUNS}; in a folder NAME.safetensors, numbered NAME-2 "
                                     "... beside an earlier one)")
    elif kind == "eval":
        p.add_argument("--episodes", type=int, help="evaluation episodes (agents)")
        p.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    else:
        p.add_argument("inputs", nargs="+", help="image/video files or folders, sentences, scene files, "
                                                 "observations as JSON or 1,0,-2; - reads them from standard input, one a line")
        p.add_argument("--topk", type=int, help="classes to show per input (classifiers)")
        p.add_argument("--out", help="where to write an output that is a file (a scene's label map: .npy + .png)")
        p.add_argument("--json", action="store_true", help="print JSON lines")
        p.add_argument("--set", nargs="*", action="extend", metavar="KEY=VALUE",
                       help="more options for zoo.predict (beam_size=5)")


def config_flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def add_model_flags(p: argparse.ArgumentParser, name: str) -> None:
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
        group.add_argument(config_flag(key), dest=f"cfg__{key}", metavar=shown if "'" in shown else shown.upper(),
                           help=docs.get(key, "").replace("%", "%%"))  # argparse %-formats help texts
    for old, new in registry.renamed_keys(name).items():  # the old flag still works, out of --help
        if config_flag(old) not in p._option_string_actions:
            group.add_argument(config_flag(old), dest=f"cfg__{new}", action=_RenamedFlag, help=argparse.SUPPRESS,
                               renamed=config_flag(new))


class _RenamedFlag(argparse.Action):
    """A renamed config field's old flag (``--n-classes``): stores into the new one's, with a FutureWarning."""

    def __init__(self, *args: Any, renamed: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.renamed = renamed

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        warnings.warn(f"{option_string} is renamed {self.renamed} ({option_string} will stop working in a future "
                      "release)", FutureWarning, stacklevel=2)
        earlier = getattr(namespace, self.dest, None)  # the new flag's, when it came first
        setattr(namespace, self.dest, values)
        setattr(namespace, RENAMED_PREFIX + self.dest, (option_string, self.renamed, values, earlier))


RENAMED_PREFIX = "renamed__"  # where an old flag keeps what it and the new flag were given, to compare them


def _check_renamed_flags(args: argparse.Namespace) -> None:
    """The old and the new flag of a renamed setting, both given with different values: one would be dropped
    (the last one given wins in argparse), where zoo.build and the config class refuse the same two values."""
    for key, (old, new, value, earlier) in [(k, v) for k, v in vars(args).items() if k.startswith(RENAMED_PREFIX)]:
        other = getattr(args, key[len(RENAMED_PREFIX):]) if earlier is None else earlier
        if other != value:
            raise UsageError(f"{new} {other} and {old} {value} name one setting ({old} is the old name of {new}); "
                             "give one")


def _model_config(args: argparse.Namespace, params: dict[str, Any], shared: Sequence[str]) -> dict[str, Any]:
    from zoo.config import coerce_value

    _check_renamed_flags(args)
    config = model_kv(args.name, args.model, params)
    flags: dict[str, Any] = {}
    for key, value in vars(args).items():
        if key.startswith("cfg__") and value is not None:
            flags[key[5:]] = coerce_value(args.name, key[5:], value, params[key[5:]])
    for key in shared:
        value = getattr(args, key, None)
        if key in params and value is not None:
            flags[key] = amp_option(value) if key == "amp" else value
    for key, value in flags.items():
        # a key given as --KEY and as --model KEY=VALUE with two values: the flag won without a word (--num-classes
        # 2 --model num_classes=7 built 2 outputs), where zoo train refuses a flag and a --set pair that differ
        if key in config and config[key] != value:
            raise UsageError(f"{config_flag(key)} {value} and --model {key}={config[key]} name one setting, {key}: "
                             "give one")
        config[key] = value
    return config


def given_data(args: argparse.Namespace) -> Any:
    if args.data is not None and args.env is not None:
        raise UsageError("give the data once: --data for datasets, --env for an environment")
    return args.env if args.env is not None else args.data


def require_data(model: Any, data: Any, args: argparse.Namespace, method: str) -> None:
    """Without ``--data``, the engine's networks fail naming the Python call (``zoo.train(ResNet18, data)``);
    on the command line the missing thing is the flag. (Agents default to their env, the hyperspectral
    models to their own scene: their own methods decide.)"""
    if data is not None:
        return
    from zoo.engine.network import Network

    if isinstance(model, Network):  # a family's own zoo_evaluate (video) still needs data
        raise UsageError(f"{args.name} needs --data: an image, video or corpus folder "
                         f"(`zoo {args.command} {args.name} --help` lists the options)")


def build_from_args(args: argparse.Namespace, data: Any, infer: bool, loop: dict[str, Any] | None = None) -> Any:
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
        from zoo.engine.distributed import dist_info

        if inferred and dist_info().is_main:  # under torchrun one process says it, as one reports the run
            shown = ", ".join(f"{k}={v!r}" for k, v in inferred.items())
            print(f"{args.name}: {shown} (inferred from {'--env' if args.env else '--data'})")
        config = {**inferred, **config}
        from zoo.api import seeded_build

        # the initial weights come from generators seeded as zoo.train(NAME, ...) seeds them: --seed, else 0
        with seeded_build((loop or {}).get("seed", args.seed)):
            return zoo.build(args.name, weights=args.weights, **config)
    return zoo.build(args.name, weights=args.weights, **config)


def call_options(args: argparse.Namespace, model: Any, call: str) -> dict[str, Any]:
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
            raise UsageError(_not_an_option(args, model, call, config_flag(dest)))
        out[dest] = amp_option(value) if dest == "amp" else value
    return out


def merge_sets(config: dict[str, Any], sets: dict[str, Any], flags: dict[str, str]) -> None:
    """Add the ``--set KEY=VALUE`` pairs ``sets`` to ``config``, the options the command's flags gave (``flags``:
    the flag typed for each key, ``total_steps`` is ``--steps``). A key given both ways with two values is refused,
    on every command: one of the two won without a word (zoo eval's --set, zoo predict's flag)."""
    for key, value in sets.items():
        if key in config and config[key] != value:
            raise UsageError(f"{flags.get(key, config_flag(key))} {config[key]} and --set {key}={value} name one "
                             f"setting, {key}: give one")
        config[key] = value


def _not_an_option(args: argparse.Namespace, model: Any, call: str, flag: str, said: str = "") -> str:
    """The one line refusing ``flag``; ``said``: the family's own refusal, whose list of what it takes is kept."""
    from zoo import registry
    from zoo.api import named_options

    key = flag.removeprefix("--set ").removeprefix("--").replace("-", "_")
    if call == "train" and key in registry.config_params(args.name):
        # a setting the model is built with: the refusal told the user to leave out what --KEY sets
        return (f"{key} is a setting of {args.name}'s config, which the model takes when it is built: "
                f"{config_flag(key)} VALUE (or --model {key}=VALUE), not {flag.split('=')[0]}")
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
def refusing_unknown(args: argparse.Namespace, model: Any, call: str, given: dict[str, str]):
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
