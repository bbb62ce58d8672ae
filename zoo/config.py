"""Config dataclasses as the one definition of a model's settings: defaults, types, docs and CLI flags.

A family writes one frozen dataclass per model (``ResNet18Config``, ``TD3Config``, ...). The registry
reads its fields for ``model_info`` defaults, checks a ``zoo.build(name, **config)`` call against their
types (naming the key, as in ``td3: gamma expects float, got 'high' (str)``), and the ``zoo`` command
turns them into ``--key VALUE`` options, so builder defaults, dataclass defaults and CLI flags cannot
disagree (the CleanRL / tyro idea, on argparse).

Field docs are the string literal after a field (as in CleanRL's ``Args``); ``field_docs`` reads them
from the source when it is available.

A renamed field keeps its old spelling working (:func:`renamed_fields`): the class, ``zoo.build``, the
``zoo`` command and the files written with the old key all take it, so one decorator on the dataclass is
the whole rename.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import json
import numbers
import sys
import textwrap
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Literal, Union

from zoo._stacklevel import user_stacklevel

__all__ = ["check_value", "coerce_value", "config_defaults", "config_types", "current_keys", "field_docs",
           "renamed_fields", "renamed_fields_of", "type_name"]

_MISSING = dataclasses.MISSING


def config_types(cls: type) -> dict[str, Any]:
    """``{field: resolved type}`` of a config dataclass (string annotations resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}


def config_defaults(cls: type) -> dict[str, Any]:
    """``{field: default}`` for the fields that have one."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default is not _MISSING:
            out[f.name] = f.default
        elif f.default_factory is not _MISSING:
            out[f.name] = f.default_factory()
    return out


def current_keys(owner: str, config: Mapping[str, Any], renamed: Mapping[str, str], *,
                 warn: bool = True) -> dict[str, Any]:
    """``config`` with each old spelling of a renamed key (``renamed``: ``{old: new}``) given as the new one.
    A caller's old spelling gets a FutureWarning, as torchvision's and timm's renamed keywords do;
    ``warn=False`` reads a file's record, which its reader cannot rewrite. Both spellings with different
    values are a TypeError (which one was meant is not known)."""
    out = dict(config)
    for old, new in renamed.items():
        if old not in out:
            continue
        value = out.pop(old)
        if new in out and out[new] != value:
            raise TypeError(f"{owner}: {new}={out[new]!r} and {old}={value!r} name one setting ({old} is the "
                            f"old name of {new}); give one")
        if warn:
            warnings.warn(f"{owner}: {old} is renamed {new}; pass {new} ({old} will stop working in a future "
                          "release)", FutureWarning, stacklevel=user_stacklevel())
        out[new] = value
    return out


_RENAMED_ATTR = "zoo_renamed_fields"
# the frames that rebuild a dataclass for dataclasses.replace (Python 3.13 calls __replace__, i.e. _replace)
_REPLACE_CODES = {f.__code__ for f in (dataclasses.replace, getattr(dataclasses, "_replace", None)) if f is not None}


def renamed_fields(**renamed: str) -> Callable[[type], type]:
    """Class decorator of a config dataclass whose fields were renamed (``old="new"``): the class still takes
    the old keyword and reads the old attribute (each with a FutureWarning), and the registry takes the old key
    in ``zoo.build``, in the ``zoo`` command's ``--model KEY=VALUE`` and ``--old-flag``, and in the config
    of weights files and checkpoints written with it (:func:`renamed_fields_of`)."""

    def decorate(cls: type) -> type:
        unknown = sorted(set(renamed.values()) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"{cls.__name__}: renamed_fields names no field {', '.join(unknown)}")
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if sys._getframe(1).f_code in _REPLACE_CODES:
                # dataclasses.replace(cfg, old=...) passes every current field beside the caller's old key:
                # the field's value is the object's, not a second choice that clashes with the caller's
                kwargs = {k: v for k, v in kwargs.items() if not any(k == n and o in kwargs for o, n in renamed.items())}
            init(self, *args, **current_keys(cls.__name__, kwargs, renamed))

        cls.__init__ = __init__  # type: ignore[misc]
        setattr(cls, _RENAMED_ATTR, types.MappingProxyType(dict(renamed)))
        for old, new in renamed.items():
            setattr(cls, old, property(_old_attribute(cls.__name__, old, new), doc=f"the old name of ``{new}``"))
        return cls

    return decorate


def _old_attribute(owner: str, old: str, new: str) -> Callable[[Any], Any]:
    def read(self: Any) -> Any:
        warnings.warn(f"{owner}.{old} is renamed {new}; read .{new} ({old} will stop working in a future release)",
                      FutureWarning, stacklevel=user_stacklevel())
        return getattr(self, new)

    return read


def renamed_fields_of(cls: type | None) -> dict[str, str]:
    """``{old: new}`` of a config dataclass's renamed fields (:func:`renamed_fields`; none: empty)."""
    return dict(getattr(cls, _RENAMED_ATTR, {}))


@cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring literal written right after each field (empty when the source is not available)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr) \
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def type_name(tp: Any) -> str:
    """A readable name for an annotation: ``int``, ``float | None``, ``'avg' | 'attention'``, ``tuple[int, ...]``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return "any value"
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join("None" if a is type(None) else type_name(a) for a in args)
    if origin in (tuple, list):
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{origin.__name__}[{inner}]" if args else origin.__name__
    return getattr(tp, "__name__", str(tp))


def _matches(value: Any, tp: Any) -> bool:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or tp is object:
        return True
    if tp is type(None):
        return value is None
    if origin is Literal:
        return value in args
    if origin in (Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0]) for v in value)
        return not args or (len(args) == len(value) and all(_matches(v, a) for v, a in zip(value, args)))
    if origin is dict:
        return isinstance(value, dict)
    if tp is float:  # numbers.Real: numpy's scalars too (np.float32(0.5), len(np.unique(y)) as np.int64)
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    # another generic (``Sequence[str]``, ``Callable[..., Any]``) is not checked; Python 3.10 calls such an
    # alias a type, and isinstance() with it raises
    if isinstance(tp, type) and origin is None:
        return isinstance(value, tp)
    return True  # an annotation we cannot check (a Protocol, a string we could not resolve)


def _choice_of_right_type(value: Any, tp: Any) -> bool:
    """Whether ``value`` has the type of a ``Literal`` in ``tp`` (so it is a bad choice, not a bad type)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return any(type(value) is type(a) for a in args)
    if origin in (Union, types.UnionType):
        return any(_choice_of_right_type(value, a) for a in args)
    return False


def check_value(owner: str, key: str, value: Any, tp: Any) -> Any:
    """``value`` normalised for ``tp`` (a list for a tuple field becomes a tuple); a TypeError naming the key for
    a value of the wrong type, a ValueError for one of the right type outside a ``Literal``'s choices."""
    value = _python_numbers(value)
    if not _matches(value, tp):
        if _choice_of_right_type(value, tp):
            raise ValueError(f"{owner}: {key} must be one of {type_name(tp)}, got {value!r}")
        raise TypeError(f"{owner}: {key} expects {type_name(tp)}, got {value!r} ({type(value).__name__})")
    if isinstance(value, list) and typing.get_origin(tp) is tuple:
        return tuple(value)
    if isinstance(value, int) and not isinstance(value, bool) and tp is float:
        return float(value)
    return value


def _python_numbers(value: Any) -> Any:
    """numpy's integer and float scalars as Python's ``int`` / ``float`` (in a tuple or list too), as
    scikit-learn's and torch's constructors take them; a config stays plain JSON when it is saved."""
    if isinstance(value, (tuple, list)):
        plain = [_python_numbers(v) for v in value]
        # the same object where nothing changed: callers compare defaults by identity (fit's metrics)
        return value if all(a is b for a, b in zip(plain, value)) else type(value)(plain)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or type(value) in (int, float):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _sequence_type(tp: Any) -> Any:
    """The tuple/list annotation inside ``tp`` (``tuple[int, ...] | None`` -> ``tuple[int, ...]``), else None."""
    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        return tp
    if origin in (Union, types.UnionType):
        return next((a for a in typing.get_args(tp) if typing.get_origin(a) in (tuple, list)), None)
    return None


def _split_sequence(text: str) -> list[Any] | None:
    """``32,32``, ``(32, 32)``, ``[32, 32]``, ``32 32`` -> ``[32, 32]`` (items as JSON where they parse, else
    strings); None when the text is not written as a sequence (an empty item: ``32,,32``)."""
    body = text.strip()
    if len(body) >= 2 and (body[0], body[-1]) in (("(", ")"), ("[", "]")):
        body = body[1:-1]
    parts = [p.strip() for p in body.split(",")] if "," in body else body.split()
    if parts and parts[-1] == "" and len(parts) > 1:  # a trailing comma, as in Python's (32,)
        parts.pop()
    if any(not p for p in parts):
        return None
    items: list[Any] = []
    for part in parts:
        try:
            items.append(json.loads(part))
        except json.JSONDecodeError:
            items.append(part.strip("'\""))
    return items


# The docs and errors name Python's constants ("an int or None"), so a user types them so. Exactly so:
# "none" stays a string, a value some options take (HybridSN's spectral_norm="none").
PYTHON_CONSTANTS: dict[str, Any] = {"None": None, "True": True, "False": False}


def json_or_text(text: str) -> Any:
    """A command-line value: JSON where it parses (``0.5``, ``[400, 300]``, ``null``, ``true``), Python's
    ``None`` / ``True`` / ``False`` as theirs, the string itself otherwise."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return PYTHON_CONSTANTS.get(text, text)


def coerce_value(owner: str, key: str, text: str, tp: Any) -> Any:
    """A command-line string -> a value of ``tp`` (:func:`json_or_text`), checked with :func:`check_value`.
    A tuple or list may also be written the way a shell user types it: ``32,32``, ``(32, 32)`` or ``"32 32"``."""
    if tp is str or (typing.get_origin(tp) is Literal and all(isinstance(a, str) for a in typing.get_args(tp))):
        return check_value(owner, key, text, tp)
    value = json_or_text(text)
    seq = _sequence_type(tp)
    if seq is not None and not isinstance(value, list) and value is not None:
        value = _split_sequence(text)
        if value is None or not _matches(value, tp):
            flag, example = f"--{key.replace('_', '-')}", _sequence_example(seq)
            raise ValueError(f"{owner}: {flag} expects {type_name(tp)}, got {text!r}; write it as {flag} {example} "
                             f"(or {flag} \"{example.replace(',', ', ').join('[]')}\", quoted as one argument)")
    if isinstance(value, list) and seq is not None and typing.get_origin(seq) is tuple:
        value = tuple(value)
    return check_value(owner, key, value, tp)


def _sequence_example(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not Ellipsis] or [int]
    samples = {int: "32", float: "0.5", str: "a", bool: "true"}
    items = [samples.get(a, "32") for a in args]
    return ",".join(items * 2 if len(items) == 1 else items)
