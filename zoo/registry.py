"""The model registry: every family registers its builders here; users build them by name.

A builder is a plain function whose keyword arguments with defaults *are* the model's config:
``register`` reads them with ``inspect`` so that ``model_info`` can show the defaults and ``build``
can reject a misspelt key before any work is done (as torchvision's and timm's registries do).
"""

from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ModelCard", "build", "list_families", "list_models", "model_info", "register"]

Builder = Callable[..., Any]
# (object built from the merged config, local weights file, manifest entry or None) -> loaded object
WeightsLoader = Callable[[Any, Path, Any], Any]


@dataclass(frozen=True)
class ModelCard:
    """What ``zoo.model_info(name)`` returns: enough to decide whether and how to build a model."""

    name: str
    family: str
    summary: str
    default_config: dict[str, Any]
    weights: tuple[str, ...] = ()
    references: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [f"{self.name}  [{self.family}]", f"  {self.summary}", "  default config:"]
        lines += [f"    {k} = {v!r}" for k, v in self.default_config.items()] or ["    (none)"]
        lines.append("  weights: " + (", ".join(self.weights) if self.weights else "(none published)"))
        lines += [f"  reference: {r}" for r in self.references]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Registration:
    name: str
    family: str
    summary: str
    builder: Builder
    references: tuple[str, ...] = ()
    load_weights: WeightsLoader | None = None
    params: dict[str, inspect.Parameter] = field(default_factory=dict)
    accepts_any: bool = False


_REGISTRY: dict[str, _Registration] = {}


def register(
    name: str,
    *,
    family: str,
    summary: str,
    references: tuple[str, ...] | list[str] = (),
    load_weights: WeightsLoader | None = None,
) -> Callable[[Builder], Builder]:
    """Decorator that registers ``builder`` under ``name``.

    ``load_weights(obj, path, entry)`` loads a weights file into the freshly built object; without it,
    networks load a state dict strictly through :func:`zoo.hub.load_into`.
    """

    def decorator(builder: Builder) -> Builder:
        if name in _REGISTRY:
            prev = _REGISTRY[name].builder
            raise ValueError(
                f"model name {name!r} is already registered by {prev.__module__}.{prev.__qualname__}; "
                "choose another name"
            )
        sig = inspect.signature(builder)
        params = {
            p.name: p
            for p in sig.parameters.values()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        }
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        _REGISTRY[name] = _Registration(
            name, family, summary, builder, tuple(references), load_weights, params, accepts_any
        )
        return builder

    return decorator


def _lookup(name: str) -> _Registration:
    if not isinstance(name, str):
        raise TypeError(f"model name must be a str, got {type(name).__name__}: {name!r}")
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3, cutoff=0.4)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise KeyError(
            f"unknown model {name!r}.{hint} Registered: {', '.join(sorted(_REGISTRY))} (see `zoo list`)."
        ) from None


def _default_config(reg: _Registration) -> dict[str, Any]:
    return {k: p.default for k, p in reg.params.items() if p.default is not inspect.Parameter.empty}


def validate_config(name: str, config: dict[str, Any]) -> None:
    """Raise a TypeError naming the valid keys when ``config`` holds a key the builder does not take."""
    reg = _lookup(name)
    if reg.accepts_any:
        return
    unknown = [k for k in config if k not in reg.params]
    if unknown:
        valid = sorted(reg.params)
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, valid, n=1)
            hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise TypeError(
            f"{name}: unknown config key(s) {', '.join(hints)}; valid keys are: {', '.join(valid)}"
        )


def build(name: str, *, weights: str | os.PathLike | None = None, local_files_only: bool = False,
          **config: Any) -> Any:
    """Build a registered model, optionally loading weights (a tag, ``model.tag``, a path, a URL or
    ``hf-hub:org/repo``).

    With weights from the manifest, the entry's ``config`` supplies the defaults the file needs and
    the caller's ``config`` overrides them (a different ``num_classes`` re-initialises the head, where
    the family supports that). ``local_files_only=True`` never opens a network connection.
    """
    reg = _lookup(name)
    if weights is None:
        validate_config(name, config)
        return reg.builder(**config)

    from zoo import hub  # spine-to-spine; imported lazily so that registering stays cheap

    path, entry = hub.resolve(weights, model=name, local_files_only=local_files_only)
    merged = {**(entry.config if entry is not None else {}), **config}
    validate_config(name, merged)
    obj = reg.builder(**merged)
    if reg.load_weights is not None:
        return reg.load_weights(obj, path, entry)
    hub.load_into(obj, hub.load_state_dict(path))
    return obj


def list_models(family: str | None = None) -> list[str]:
    """Registered model names, sorted; only those of ``family`` when given."""
    if family is not None and family not in list_families():
        raise KeyError(f"unknown family {family!r}; families: {', '.join(list_families())}")
    return sorted(n for n, r in _REGISTRY.items() if family is None or r.family == family)


def list_families() -> list[str]:
    return sorted({r.family for r in _REGISTRY.values()})


def model_info(name: str) -> ModelCard:
    reg = _lookup(name)
    from zoo import hub

    return ModelCard(
        name=reg.name,
        family=reg.family,
        summary=reg.summary,
        default_config=_default_config(reg),
        weights=tuple(hub.list_weights(name)),
        references=reg.references,
    )


def builder_params(name: str) -> list[str]:
    """The config keys a model's builder takes (used by ``zoo.train`` to route CLI options)."""
    return sorted(_lookup(name).params)
