"""The ``zoo`` parser: one subparser per registered command, a model's config flags for ``zoo train|eval|predict
NAME``, and the rewriting of the command line argparse cannot read (``NAME.TAG``, a model named first).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

from zoo.cli.commands import COMMANDS, FAMILY_OPTIONS
from zoo.cli.model_options import add_model_flags

_NAME_AND_WEIGHTS = ("train", "eval", "predict", "finetune", "export")  # commands taking NAME and --weights
_MODEL_FLAG = ("translate",)  # commands taking the model as --model NAME


def _name_at(argv: Sequence[str]) -> int | None:
    """Where NAME stands in ``zoo CMD ... NAME ...``: right after CMD, or after options given first (``zoo predict
    --json td3.pendulum-v1 ...``): the first registered name or ``MODEL.TAG`` that is not ``--weights``' value,
    before any ``--`` (what follows it are inputs)."""
    from zoo import registry

    if len(argv) < 2:
        return None
    if not argv[1].startswith("-"):
        return 1
    names = registry.list_models()
    for i in range(2, len(argv)):
        if argv[i] == "--":
            return None
        if argv[i - 1] != "--weights" and registry.split_weights_name(argv[i])[0] in names:
            return i
    return None


def weights_name_argv(argv: list[str]) -> list[str]:
    """``zoo predict resnet18.cifar10 ...`` -> ``zoo predict resnet18 --weights resnet18.cifar10 ...`` (a weights
    name given as NAME, as :func:`zoo.build` takes one, also after options: ``zoo predict --json td3.TAG ...``);
    a ``--weights`` naming other weights is an error."""
    from zoo import registry

    at = _name_at(argv) if argv and argv[0] in _NAME_AND_WEIGHTS else None
    if at is None:
        return argv
    flag = next((i for i, a in enumerate(argv) if a == "--weights" or a.startswith("--weights=")), None)
    given = None if flag is None else (argv[flag].split("=", 1)[1] if "=" in argv[flag] else
                                       (argv[flag + 1] if flag + 1 < len(argv) else None))
    name, weights = registry.split_weights_name(argv[at], given)
    if name == argv[at]:
        return argv
    # right after NAME: put last, it came after a `--` (zoo predict td3.pendulum-v1 -- -1,0,0) and was an input
    return [*argv[:at], name, *(["--weights", weights] if given is None else []), *argv[at + 1:]]


def model_first_argv(argv: list[str]) -> list[str]:
    """``zoo translate seq2seq-gru --weights W "Ein Hund."`` -> ``zoo translate --model seq2seq-gru --weights W
    "Ein Hund."``: the ``zoo CMD NAME`` shape of every other command, for a command whose model is ``--model``
    (argparse read NAME as the first sentence and refused the sentence after ``--weights``), also after options
    (``zoo translate --beam-size 4 seq2seq-gru ...``). A weights name there (``seq2seq-gru.TAG``) is its
    ``--weights`` when none is given."""
    from zoo import registry

    at = _name_at(argv) if argv and argv[0] in _MODEL_FLAG and "--model" not in argv else None
    if at is None or registry.split_weights_name(argv[at])[0] not in registry.list_models():
        return argv
    name, weights = registry.split_weights_name(argv[at])
    given = any(a == "--weights" or a.startswith("--weights=") for a in argv)
    # first: put last, they came after a `--` (zoo translate NAME.TAG -- "-Ja") and were sentences
    return [argv[0], "--model", name, *(["--weights", weights] if weights and not given else []),
            *argv[1:at], *argv[at + 1:]]


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


# a negative observation, "-1,0,0" or "-0.5e-3,2": argparse takes only "-1" and "-.5" for numbers, and read it
# as an unknown option ("the following arguments are required: inputs")
_NEGATIVE_VALUES = re.compile(r"^-\.?\d[\d.,eE+-]*$")


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
    from zoo import registry

    # allow_abbrev=False: zoo reads some flags before parsing (--json sends logs to stderr), which an abbreviation
    # (--jso) slipped past, putting a log line in front of the JSON
    parser = argparse.ArgumentParser(prog="zoo", description="zoo: build, train, evaluate, predict and pull models.",
                                     allow_abbrev=False)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument("--version", action=_PrintVersion)
    # argparse's own hook for what reads as a value, not an option (no flag of ours starts with a digit); the
    # top parser sorts the words before a command's parser sees them
    parser._negative_number_matcher = _NEGATIVE_VALUES
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    name = _model_name_in(argv)
    for cmd in sorted(COMMANDS.values(), key=lambda c: c.name):
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help, allow_abbrev=False)
        p._negative_number_matcher = _NEGATIVE_VALUES
        cmd.configure(p)
        if cmd.name in ("train", "eval") and name is not None:
            extra = FAMILY_OPTIONS.get(registry.family_of(name))
            if extra is not None:
                extra.configure(p.add_argument_group(f"{registry.family_of(name)} options"))
        if name is not None and cmd.name == argv[0]:
            add_model_flags(p, name)
        p.set_defaults(_run=cmd.run)
    return parser
