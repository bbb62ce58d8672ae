"""The model registry: every family registers its builders here; users build them by name.

Two steps, so that ``zoo list`` and ``zoo --help`` import no family's heavy modules (torch among them):

* a family's ``__init__`` *declares* each name with its summary and the module that implements it
  (:func:`declare`: cheap, no import);
* that module *registers* the builder with its config dataclass, references and weights loader
  (:func:`register`), and is imported the first time the name is built or inspected.

A model's settings are one frozen config dataclass (see :mod:`zoo.config`): ``build`` checks every key
and value against it before any work is done, ``model_info`` shows its defaults, and the ``zoo`` command
derives its options from it (as torchvision's and timm's registries do for names and defaults).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.config import check_value, config_defaults, config_types, current_keys, renamed_fields_of
from zoo.inputs import close_matches, close_names, either

__all__ = ["ModelCard", "build", "declare", "list_families", "list_models", "model_info", "register",
           "split_weights_name"]

Builder = Callable[..., Any]
# (object built from the merged config, local weights file, manifest entry or None[, requested=the config
# the caller passed]) -> loaded object; a loader that takes ``requested`` can refuse a caller's setting
# the file's weights cannot honour, instead of silently using the file's
WeightsLoader = Callable[..., Any]
# (data a user passes, e.g. a folder or an env id; loop options it takes by name, e.g. splits=) -> the
# builder config that data implies
ConfigInference = Callable[..., dict[str, Any]]

_CONFIG_KEY_CUTOFF = 0.75
"""How alike a misspelt config key must be to a valid one, above :data:`zoo.inputs.SPELLING_CUTOFF`: a shared
word alone is no likeness (difflib rates ``num_segments`` 0.61 like ``num_classes``), and a key named in part
(``window_size`` for ``window``) is found by its words instead (:func:`_close_keys`)."""


@dataclass(frozen=True)
class ModelCard:
    """What ``zoo.model_info(name)`` returns: enough to decide whether and how to build a model."""

    name: str
    family: str
    summary: str
    default_config: dict[str, Any]
    weights: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    config_docs: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{self.name}  [{self.family}]", f"  {self.summary}", "  default config:"]
        for k, v in self.default_config.items():
            doc = self.config_docs.get(k)
            lines.append(f"    {k} = {v!r}" + (f"  # {doc}" if doc else ""))
        if not self.default_config:
            lines.append("    (none)")
        lines.append("  weights: " + (", ".join(self.weights) if self.weights else "(none published)"))
        lines += [f"  reference: {r}" for r in self.references]
        return "\n".join(lines)


@dataclass
class _Registration:
    name: str
    family: str
    summary: str
    module: str | None = None  # where the builder lives (imported on first use)
    builder: Builder | None = None
    config: type | None = None
    references: tuple[str, ...] = ()
    load_weights: WeightsLoader | None = None
    infer_config: ConfigInference | None = None
    # the config values a call with no arguments builds where they are not the dataclass's own defaults
    # (TD3: the rl-zoo preset for its default env replaces gamma, buffer_size, ...)
    built_defaults: Callable[[], dict[str, Any]] | None = None

    def params(self) -> dict[str, Any]:
        """``{key: type}`` of every config key: the builder's own keyword arguments and the dataclass fields."""
        assert self.builder is not None
        sig = inspect.signature(self.builder)
        hints = typing.get_type_hints(self.builder)
        own = {p.name: hints.get(p.name, Any) for p in sig.parameters.values()
               if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        return {**own, **(config_types(self.config) if self.config is not None else {})}

    def defaults(self) -> dict[str, Any]:
        assert self.builder is not None
        own = {p.name: p.default for p in inspect.signature(self.builder).parameters.values()
               if p.default is not inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD}
        merged = {**own, **(config_defaults(self.config) if self.config is not None else {})}
        return {**merged, **(self.built_defaults() if self.built_defaults is not None else {})}


_REGISTRY: dict[str, _Registration] = {}
# A family's first import, one thread at a time: two threads importing torchvision's models side by side (a
# first zoo.build("resnet18") beside a first zoo.build("r2plus1d_18")) can each hold a module the other needs,
# and Python then fails one of them with "deadlock detected by _ModuleLock".
_IMPORTING = threading.RLock()


def declare(name: str, *, family: str, summary: str, module: str) -> None:
    """Make ``name`` known (``zoo list``) without importing ``module``, which registers its builder."""
    if name in _REGISTRY:
        raise ValueError(f"model name {name!r} is already declared by family {_REGISTRY[name].family!r}")
    _REGISTRY[name] = _Registration(name, family, summary, module)


def register(
    name: str,
    *,
    family: str | None = None,
    summary: str | None = None,
    config: type | None = None,
    references: tuple[str, ...] | list[str] = (),
    load_weights: WeightsLoader | None = None,
    infer_config: ConfigInference | None = None,
    built_defaults: Callable[[], dict[str, Any]] | None = None,
) -> Callable[[Builder], Builder]:
    """Decorator that registers ``builder`` under ``name`` (declared beforehand, or new: then ``family`` and
    ``summary`` are required).

    ``config``: the model's config dataclass; the builder takes its fields as keyword arguments (``**config``)
    besides any keyword arguments of its own. ``load_weights(obj, path, entry)`` loads a weights file into the
    freshly built object (default: a strict state-dict load through :func:`zoo.hub.load_into`).
    ``infer_config(data)`` says what a data source implies (an env id -> ``{"env": ...}``, an image folder
    -> ``{"num_classes": ...}``), for ``zoo train NAME`` and ``zoo.train(NAME, data)``.
    ``built_defaults()``: the config values ``build(name)`` ends up with where a default of the builder
    changes them (a preset picked by the default env), so that ``model_info`` shows what is built.
    A renamed field of ``config`` (:func:`zoo.config.renamed_fields`) is taken by its old key too.
    """
    if config is not None and not dataclasses.is_dataclass(config):
        raise TypeError(f"{name}: config must be a dataclass type, got {config!r}")

    def decorator(builder: Builder) -> Builder:
        reg = _REGISTRY.get(name)
        if reg is not None and reg.builder is not None:
            prev = reg.builder
            raise ValueError(f"model name {name!r} is already registered by {prev.__module__}.{prev.__qualname__}; "
                             "choose another name")
        if reg is None:
            if family is None or summary is None:
                raise ValueError(f"register({name!r}): a name that was not declared needs family= and summary=")
            reg = _REGISTRY[name] = _Registration(name, family, summary, builder.__module__)
        reg.builder, reg.config, reg.references = builder, config, tuple(references)
        reg.load_weights, reg.infer_config, reg.built_defaults = load_weights, infer_config, built_defaults
        if summary is not None:
            reg.summary = summary
        return builder

    return decorator


def _lookup(name: str) -> _Registration:
    if not isinstance(name, str):
        raise TypeError(f"model name must be a str, got {type(name).__name__}: {name!r}")
    reg = _REGISTRY.get(name)
    if reg is None:
        close = close_names(name, _REGISTRY)
        hint = f" Did you mean {either(close)}?" if close else ""
        raise KeyError(f"unknown model {name!r}.{hint} Registered: {', '.join(sorted(_REGISTRY))} (see `zoo list`).")
    if reg.builder is None and reg.module is not None:
        with _IMPORTING:
            importlib.import_module(reg.module)
    if reg.builder is None:
        raise RuntimeError(f"{name!r} is declared by the {reg.family} family, but {reg.module} registered no builder")
    return reg


def validate_config(name: str, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with values normalised to their declared types; a TypeError naming the key otherwise
    (an unknown key lists the valid ones and the closest match)."""
    reg = _lookup(name)
    params = reg.params()
    config = _current_keys(reg, config)  # a renamed field's old key (HybridSN's n_classes) as its new one
    unknown = [k for k in config if k not in params]
    if unknown:
        raise TypeError(_unknown_keys_message(name, {k: config[k] for k in unknown}, sorted(params)))
    return {k: check_value(name, k, v, params[k]) for k, v in config.items()}


def _unknown_keys_message(name: str, unknown: dict[str, Any], valid: list[str]) -> str:
    """One line for the keys ``build(name, ...)`` does not take: those that are options of ``zoo.train`` /
    ``zoo.evaluate`` / ``zoo.predict`` for the model are said to be, with the call that takes them (the
    likeliest reason to pass them to ``build``); the others get the valid key they probably misspell."""
    calls = call_options(name)
    misspelt, elsewhere = [], []
    for key, value in unknown.items():
        if key == "pretrained":  # timm's flag: zoo names the weights instead
            from zoo import hub

            tags = [w.split(".", 1)[1] for w in hub.list_weights(name)]
            elsewhere.append(f"pretrained is timm's flag; zoo names the weights: zoo.build({name!r}, weights=TAG) or "
                             f"zoo.build('{name}.TAG'), TAG one of: {', '.join(tags) or 'none published'}")
        elif key in calls:
            where = " / ".join(f"zoo.{c}" for c in calls[key])
            example = f"zoo.{calls[key][0]}(model, {'inputs' if calls[key][0] == 'predict' else 'data'}, {key}={value!r})"
            elsewhere.append(f"{key} is an option of {where} for {name}, not of its architecture: {example}")
        else:
            close = _close_keys(key, valid)
            misspelt.append(f"{key!r}" + (f" (did you mean {either(close)}?)" if close else ""))
    parts = ([f"unknown config key(s) {', '.join(misspelt)}"] if misspelt else []) + elsewhere
    return f"{name}: {'; '.join(parts)}; valid config keys are: {', '.join(valid)}"


def _close_keys(key: str, valid: list[str]) -> list[str]:
    """The valid keys ``key`` probably misspells: a close spelling, else one whose words hold all of its words
    or are all among them (``window_size`` -> ``window``); see :data:`_CONFIG_KEY_CUTOFF`."""
    close = close_matches(key, valid, cutoff=_CONFIG_KEY_CUTOFF)
    if close:
        return close
    by_spelling = {k.casefold().replace("-", "_"): k for k in valid}
    spelt = key.casefold().replace("-", "_")
    words = set(spelt.split("_")) - {""}
    return [k for s, k in sorted(by_spelling.items()) if words and
            (words <= (theirs := set(s.split("_"))) or theirs <= words)][:3]


def _built_class(reg: _Registration) -> type | None:
    """The class the builder says it returns (its return annotation), None when it names none."""
    try:
        returned = typing.get_type_hints(reg.builder).get("return")
    except (NameError, TypeError):  # an annotation only a type checker resolves
        returned = inspect.signature(reg.builder).return_annotation
    return returned if isinstance(returned, type) else None


def _keyword_options(fn: Callable[..., Any], skip: int) -> list[str]:
    params = list(inspect.signature(fn).parameters.values())[skip:]
    return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "train"]


_METHOD_CALLS = {"zoo_data": ("train", "evaluate"), "zoo_train": ("train",), "zoo_evaluate": ("evaluate",),
                 "zoo_predict": ("predict",)}


def _options_of(target: str) -> list[str]:
    """The keyword options of ``"module.function"`` (after its model and data) or the fields of
    ``"module.Class"`` (a dataclass of options): where a method's ``**options`` go."""
    import importlib

    module, _, attr = target.rpartition(".")
    obj = getattr(importlib.import_module(module), attr)
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj)]
    return _keyword_options(obj, 2)


def call_options(name: str) -> dict[str, tuple[str, ...]]:
    """``{option: calls}``: the keyword options ``zoo.train`` / ``zoo.evaluate`` / ``zoo.predict`` (``calls``)
    take for model ``name``, read from the signatures of the class its builder returns: its ``zoo_train``,
    ``zoo_evaluate``, ``zoo_predict``, ``zoo_data`` (the data options of train and evaluate) and, for a
    :class:`zoo.engine.network.Network`, the engine loop's options. What a method hands on as ``**options`` is
    seen where the class names where they go (``zoo_options_of``: ``{method: "module.function" or
    "module.Class"}``, a function's keyword options after its model and data, a dataclass's fields); elsewhere
    (TD3's loop, the seq2seq corpus reader) it is not. Imports the model's module (as ``build`` does), never at ``zoo list``
    time."""
    cls = _built_class(_lookup(name))
    if cls is None:
        return {}
    found: dict[str, list[str]] = {}

    def add(options: list[str], *calls: str) -> None:
        for option in options:
            found.setdefault(option, [])
            found[option] += [c for c in calls if c not in found[option]]

    for method, calls in _METHOD_CALLS.items():
        if callable(getattr(cls, method, None)):
            add(_keyword_options(getattr(cls, method), 2), *calls)  # after self and the data / inputs
    for method, target in getattr(cls, "zoo_options_of", {}).items():
        add(_options_of(target), *_METHOD_CALLS[method])
    from zoo.engine.network import Network

    if issubclass(cls, Network):  # its training runs zoo.engine.fit, which takes FitConfig's fields
        from zoo.engine.options import FitConfig

        add([f.name for f in dataclasses.fields(FitConfig)], "train")
        if cls.zoo_evaluate is Network.zoo_evaluate:
            from zoo.engine.evaluation import evaluate

            add(_keyword_options(evaluate, 2), "evaluate")
    order = ("train", "evaluate", "predict")
    return {k: tuple(sorted(v, key=order.index)) for k, v in found.items()}


def file_config(path: str | os.PathLike, name: str) -> dict[str, Any]:
    """The builder config a weights file written by :func:`zoo.save`, or a training checkpoint of
    ``zoo.train`` (``checkpoint_dir``'s ``best.pt``), records (empty for other files), with the current key of
    a field renamed since it was written; an error when the file holds another model."""
    from zoo import hub

    if not hub.state.is_safetensors(path):  # by its bytes: names in caches and URLs lie (``/download``)
        run = hub.training_config(path) if Path(path).is_file() else None
        trained = (run or {}).get("zoo.model")  # a training checkpoint's model (those since it was recorded)
        if isinstance(trained, str) and trained != name:
            raise ValueError(f"{path} is a training checkpoint of a {trained!r} model, not {name!r}: build it with "
                             f"zoo.build({trained!r}, weights={str(path)!r})")
        recorded = {k.removeprefix("model."): v for k, v in (run or {}).items() if k.startswith("model.")}
        return _current_keys(_lookup(name), recorded, warn=False)

    meta = hub.read_metadata(path)
    # zoo.save writes zoo.model; a published file (and a copy of it) carries its "model.tag" as zoo.name
    published = meta.get("zoo.name")
    saved = meta.get("zoo.model") or (published.partition(".")[0] if published else None)
    if saved is not None and saved != name:
        what = f"{saved!r} model" + (f" (weights {published!r})" if published else "")
        raise ValueError(f"{path} holds a {what}, not {name!r}: build it with zoo.build({saved!r}, "
                         f"weights={str(path)!r})")
    return _current_keys(_lookup(name), json.loads(meta["zoo.config"]), warn=False) if "zoo.config" in meta else {}


def build(name: str, *, weights: str | os.PathLike | None = None, local_files_only: bool = False,
          **config: Any) -> Any:
    """Build a registered model, optionally loading weights (a tag, ``model.tag``, a path, a URL or
    ``hf-hub:org/repo``). ``name`` may be a weights name itself, as timm's ``model.tag`` names are:
    ``build("resnet18.cifar10")`` is ``build("resnet18", weights="cifar10")``.

    The weights' own config (the manifest entry's, or the one :func:`zoo.save` wrote into the file)
    supplies the defaults the file needs, and the caller's ``config`` overrides them (a different
    ``num_classes`` re-initialises the head, where the family supports that). ``local_files_only=True``
    never opens a network connection.
    """
    name, weights = split_weights_name(name, weights)
    reg = _lookup(name)
    config = _current_keys(reg, config)
    # a model that builds on its device (TD3): torch's "Found no NVIDIA driver" names neither; to any other
    # model device is a call's option, which validate_config names
    if config.get("device") is not None and "device" in reg.params():
        from zoo.engine.devices import usable_device

        usable_device(config["device"])
    if weights is None:
        return reg.builder(**validate_config(name, config))

    from zoo import hub  # spine-to-spine; imported lazily so that registering stays cheap

    path, entry = hub.resolve(weights, model=name, local_files_only=local_files_only)
    # a manifest entry written before a field's rename names its old key: read it without a warning, as
    # file_config reads a file's
    saved = _current_keys(reg, dict(entry.config), warn=False) if entry is not None else file_config(path, name)
    obj = reg.builder(**validate_config(name, {**saved, **config}))
    if reg.load_weights is not None:
        if "requested" in inspect.signature(reg.load_weights).parameters:
            return reg.load_weights(obj, path, entry, requested=dict(config))
        return reg.load_weights(obj, path, entry)
    hub.load_into(obj, hub.load_state_dict(path))
    return obj


def current_config(name: str, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` for model ``name`` with the old key of a renamed field (:func:`zoo.config.renamed_fields`:
    HybridSN's ``n_classes``) as its new one, with a FutureWarning: what a caller merges with other config
    first (``zoo.train``'s inferred one); both keys, differing, are a TypeError."""
    return _current_keys(_lookup(name), config)


def renamed_keys(name: str) -> dict[str, str]:
    """``{old key: new key}`` of model ``name``'s renamed config fields."""
    return renamed_fields_of(_lookup(name).config)


def _current_keys(reg: _Registration, config: dict[str, Any], *, warn: bool = True) -> dict[str, Any]:
    renamed = renamed_fields_of(reg.config)
    return current_keys(reg.name, config, renamed, warn=warn) if renamed else dict(config)


def split_weights_name(name: Any, weights: Any = None) -> tuple[Any, Any]:
    """``("model.tag", None)`` -> ``("model", "model.tag")`` where ``model`` is registered (timm's ``model.tag``
    names: a weights name builds its model with those weights); any other ``name`` comes back unchanged."""
    if not isinstance(name, str) or name in _REGISTRY or "." not in name:
        return name, weights
    model, _, tag = name.partition(".")
    if model not in _REGISTRY:
        return name, weights  # _lookup's "unknown model" error follows
    if weights is not None and str(weights) not in (tag, name):
        raise ValueError(f"{name!r} names the weights {tag!r} but weights={str(weights)!r} names others: give the "
                         f"weights once, zoo.build({model!r}, weights=...) or zoo.build({name!r})")
    return model, name


def infer_config(name: str, data: Any, **options: Any) -> dict[str, Any]:
    """What ``data`` implies about ``name``'s config (``{}`` when the family cannot tell).

    ``options`` are the loop options the data comes with (``zoo.train(name, data, **options)``); those
    the family's inference takes by name reach it, because they change what the data means (a UCF101
    root's ``splits=`` folder holds the class list).
    """
    reg = _lookup(name)
    if reg.infer_config is None or data is None:
        return {}
    _data, *params = inspect.signature(reg.infer_config).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return dict(reg.infer_config(data, **options))
    named = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return dict(reg.infer_config(data, **{k: v for k, v in options.items() if k in named}))


def config_class(name: str) -> type | None:
    """The config dataclass of a registered model (None when it has none)."""
    return _lookup(name).config


def config_params(name: str) -> dict[str, Any]:
    """``{key: type}`` of every config key ``build(name, ...)`` takes."""
    return _lookup(name).params()


def family_of(name: str) -> str:
    """The family of a registered name, without importing it."""
    if name not in _REGISTRY:
        _lookup(name)  # raises the helpful KeyError
    return _REGISTRY[name].family


def summary_of(name: str) -> str:
    if name not in _REGISTRY:
        _lookup(name)
    return _REGISTRY[name].summary


def list_models(family: str | None = None) -> list[str]:
    """Registered model names, sorted; only those of ``family`` when given. Imports no family module."""
    if family is not None and family not in list_families():
        raise KeyError(f"unknown family {family!r}; families: {', '.join(list_families())}")
    return sorted(n for n, r in _REGISTRY.items() if family is None or r.family == family)


def list_families() -> list[str]:
    return sorted({r.family for r in _REGISTRY.values()})


def model_info(name: str) -> ModelCard:
    """The card of a registered model; a weights name (``"resnet18.cifar10"``, as :func:`build` takes one) is
    its model's card. A weights name of a tag the model has not published is refused, as :func:`build` refuses
    it: ``model_info("resnet18.cifar1")`` gave resnet18's card, as if those weights existed."""
    name, weights = split_weights_name(name)
    reg = _lookup(name)
    from zoo import hub
    from zoo.config import field_docs

    published = hub.list_weights(name)
    if weights is not None and weights not in published and not Path(weights).expanduser().is_file():
        hub.get_entry(weights)  # its refusal: the close published names and where to list them (`zoo info` says it)

    return ModelCard(
        name=reg.name,
        family=reg.family,
        summary=reg.summary,
        default_config=reg.defaults(),
        weights=tuple(published),
        references=reg.references,
        config_docs=field_docs(reg.config) if reg.config is not None else {},
    )
