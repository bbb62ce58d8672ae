"""The registry of ``zoo`` subcommands (:func:`command`) and of the options a family adds to ``zoo train/eval
NAME`` (:func:`family_options`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class _Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]


@dataclass(frozen=True)
class _FamilyOptions:
    configure: Callable[[argparse.ArgumentParser], None]
    to_config: Callable[[argparse.Namespace], dict[str, Any]]


COMMANDS: dict[str, _Command] = {}
FAMILY_OPTIONS: dict[str, _FamilyOptions] = {}


def command(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] | None = None):
    """Register ``fn(args) -> exit code`` as ``zoo NAME``; ``configure(parser)`` adds its arguments."""

    def decorator(fn: Callable[[argparse.Namespace], int | None]):
        if name in COMMANDS:
            raise ValueError(f"zoo command {name!r} is already registered")
        COMMANDS[name] = _Command(name, help, configure or (lambda p: None), fn)
        return fn

    return decorator


def family_options(family: str, configure: Callable[[argparse.ArgumentParser], None]):
    """Register options of one family for ``zoo train/eval NAME``: ``configure(parser)`` adds them and the
    decorated ``fn(args) -> dict`` turns them into options for ``zoo.train`` / ``zoo.evaluate``."""

    def decorator(fn: Callable[[argparse.Namespace], dict[str, Any]]):
        FAMILY_OPTIONS[family] = _FamilyOptions(configure, fn)
        return fn

    return decorator
