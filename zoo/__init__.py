"""zoo: five model families behind one build / train / evaluate / predict / save / pull API.

    import zoo
    zoo.list_models()
    model = zoo.build("resnet18", weights="cifar10")
    result = zoo.train(model, "path/to/imagefolder", epochs=3)
    zoo.evaluate(result.model, "path/to/imagefolder")
    zoo.predict(result.model, "photo.jpg")
    zoo.save(result.model, "mine.safetensors")          # zoo.build("resnet18", weights="mine.safetensors")

``import zoo`` is light: the families declare their model names here and load their modules (and
torch) when a model is first built, so ``zoo list`` and ``zoo --help`` answer at once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from zoo.api import evaluate, finetune, list_weights, predict, save, train
from zoo.registry import ModelCard, build, list_families, list_models, model_info

__version__ = "0.1.0"

# Families declare their names on import (cheap: no torch). The spine (registry, hub, engine, api) imports
# none of them, which keeps the import graph free of cycles.
FAMILIES = ("vision", "seq2seq", "rl", "hyperspectral", "video")
for _family in FAMILIES:
    importlib.import_module(f"zoo.{_family}")

# Public names that live in heavier modules, loaded on first use (PEP 562).
_LAZY = {
    "export": "zoo.exporting",
    "pull": "zoo.hub",
}

if TYPE_CHECKING:  # pragma: no cover
    from zoo.exporting import export
    from zoo.hub import pull


# Subpackages reachable as attributes after a bare ``import zoo`` (``zoo.hub.list_weights()``), loaded on first use.
_SUBPACKAGES = ("engine", "hub")


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"zoo.{name}")  # the import binds it in this module too
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'zoo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))


__all__ = [
    "ModelCard",
    "build",
    "evaluate",
    "export",
    "finetune",
    "list_families",
    "list_models",
    "list_weights",
    "model_info",
    "predict",
    "pull",
    "save",
    "train",
]
