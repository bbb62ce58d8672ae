"""``zoo eval NAME``: evaluate a model (with ``--weights``) on data and print its metrics."""

from __future__ import annotations

import argparse

from zoo.cli.arguments import json_line, parse_kv
from zoo.cli.commands import FAMILY_OPTIONS, command
from zoo.cli.model_options import (
    add_common,
    build_from_args,
    call_options,
    config_flag,
    given_data,
    merge_sets,
    refusing_unknown,
    require_data,
)


def _configure_eval(p: argparse.ArgumentParser) -> None:
    add_common(p, "eval")


@command("eval", "evaluate a model (with --weights) on data and print its metrics", _configure_eval)
def _cmd_eval(args: argparse.Namespace) -> int:
    import zoo
    from zoo import registry

    data = given_data(args)
    model = build_from_args(args, data, infer=False)
    require_data(model, data, args, "zoo_evaluate")
    config = call_options(args, model, "evaluate")
    given = {key: config_flag(key) for key in config}
    extra = FAMILY_OPTIONS.get(registry.family_of(args.name))
    if extra is not None:
        family = extra.to_config(args)  # --splits, --fold, --labels
        config.update(family)
        given.update({key: config_flag(key) for key in family})
    sets = parse_kv(args.set)
    merge_sets(config, sets, given)  # --episodes 1 --set episodes=2 ran 2, unsaid
    given.update({key: f"--set {key}" for key in sets if key not in given})
    with refusing_unknown(args, model, "evaluate", given):
        metrics = zoo.evaluate(model, data, **config)
    if args.json:
        print(json_line(metrics))  # strict JSON: a kappa of one class is NaN, printed null
        return 0
    for key, value in metrics.items():
        print(f"{key}: {value:.6g}" if isinstance(value, float) else f"{key}: {value}")
    return 0

