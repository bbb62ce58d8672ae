"""``zoo predict NAME INPUTS``: run a model on inputs and print one row per input; a family says how its inputs
are read and its result shown with :func:`predict_rules`.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zoo.cli.arguments import json_line, parse_kv, with_stdin
from zoo.cli.commands import command
from zoo.cli.errors import UsageError
from zoo.cli.model_options import (
    add_common,
    build_from_args,
    call_options,
    config_flag,
    merge_sets,
    refusing_unknown,
)


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


# family -> fn(list of input strings) -> what zoo.predict takes (observations parsed from JSON, ...)
_PREDICT_RULES: dict[str, PredictRules] = {}


def predict_rules(family: str, rules: PredictRules) -> None:
    """Register how ``zoo predict`` reads a family's inputs (TD3's observations given as JSON), writes ``--out``
    and shows its result (see :class:`PredictRules`)."""
    _PREDICT_RULES[family] = rules


def _configure_predict(p: argparse.ArgumentParser) -> None:
    add_common(p, "predict")


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
                print(json_line(r))
            elif "error" in r:
                print(f"{r['input']}\tERROR {r['error']}")
            else:
                print(f"{r['input']}\t" + "  ".join(f"{lbl} {p:.3f}" for lbl, p in r["topk"]))
        return sum("error" in r for r in result)
    if isinstance(result, list):
        for r in result:
            print(json_line(r) if args.json else r)
        return 0
    show = _predict_rules(args.name).show  # the family's own kind of result (a scene's label map)
    code = show(result, args) if show is not None else None
    if code is not None:
        return code
    print(json_line(np.asarray(result)))
    return 0


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
    model = build_from_args(args, None, infer=False)
    sets = parse_kv(args.set)
    flags = call_options(args, model, "predict")
    given = {**{key: f"--set {key}" for key in sets}, **{key: config_flag(key) for key in flags}}
    config = dict(flags)
    merge_sets(config, sets, given)  # --topk 1 --set topk=3 showed 1 class, unsaid
    with refusing_unknown(args, model, "predict", given), warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableInputWarning)  # the input's row says it
        result = zoo.predict(model, inputs, **config)
    failed = _print_prediction(result, args)
    if failed:
        # the other inputs' rows are printed; the exit status still tells a script that some are missing
        print(f"zoo predict: {failed} input(s) could not be read (their rows say why)", file=sys.stderr)
        return 1
    return 0
