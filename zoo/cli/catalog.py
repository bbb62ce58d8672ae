"""``zoo list`` and ``zoo info NAME``: the registered models, their defaults, weights and references."""

from __future__ import annotations

import argparse
from typing import Any

from zoo.cli.commands import command


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
    named = registry.split_weights_name(args.name)[1]  # zoo info resnet18.cifar10: that weights' card
    entries = [hub.get_entry(wname) for wname in ([named] if named else card.weights)]  # a bad tag fails first,
    print(card)  # not after the card was printed under exit code 2
    for wname, entry in zip([named] if named else card.weights, entries):
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
