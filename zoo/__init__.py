"""zoo: five model families behind one build / train / finetune / pull API.

    import zoo
    zoo.list_models()
    model = zoo.build("resnet18", num_classes=2, weights="cifar10")
    result = zoo.train(model, "path/to/imagefolder", epochs=3)
"""

from __future__ import annotations

import importlib

from zoo.api import evaluate, train
from zoo.export import export
from zoo.finetune import finetune
from zoo.hub import list_weights, pull
from zoo.registry import ModelCard, build, list_families, list_models, model_info

__version__ = "0.1.0"

# Families register themselves on import. The spine (registry, hub, engine) imports none of them,
# which keeps the import graph free of cycles; a family that is not written yet is simply absent.
FAMILIES = ("vision", "seq2seq", "rl", "hyperspectral", "video")
for _family in FAMILIES:
    try:
        importlib.import_module(f"zoo.{_family}")
    except ModuleNotFoundError as _err:  # only a missing family package is tolerated, not a broken one
        if _err.name != f"zoo.{_family}":
            raise

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
    "pull",
    "train",
]
