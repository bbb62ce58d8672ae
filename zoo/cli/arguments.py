"""Argument helpers every command shares: ``KEY=VALUE`` pairs, ``--device`` / ``--amp``, inputs read from
standard input (``-``), and the strict JSON ``--json`` prints.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from zoo.cli.errors import UsageError


def json_plain(value: Any) -> Any:
    """``value`` as strict JSON holds it: NaN and the infinities as null (JSON has no such numbers; Python's
    ``NaN`` made ``jq`` and ``JSON.parse`` refuse the whole line: a kappa of one class), NumPy and torch arrays and
    scalars as lists and numbers, mappings and sequences walked, anything else (a path) as its text."""
    if isinstance(value, Mapping):
        return {k if isinstance(k, (str, int)) else str(k): json_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # a NumPy or torch array or scalar: its values
        return json_plain(value.tolist())
    return str(value)


def json_line(value: Any) -> str:
    """``value`` as one line of strict JSON (:func:`json_plain`), what every ``--json`` output prints."""
    return json.dumps(json_plain(value), allow_nan=False)


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


def device(text: str) -> str:
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
    p.add_argument("--device", type=device, help="cpu (default), cuda, cuda:1, ...")
    p.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                   help="mixed precision: auto (default) is bf16 only where this device computes it fast; none is "
                        "exact fp32")


def amp_option(value: str | None) -> str | None:
    """``--amp``'s value as ``amp=`` takes it: ``none`` is None (fp32)."""
    return None if value == "none" else value


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
