"""The model inside the wrappers PyTorch users put around one: ``nn.DataParallel``,
``DistributedDataParallel`` (``.module``) and ``torch.compile`` (``._orig_mod``).

A wrapper runs the same network but has none of its family's attributes, and its state dict prefixes every
key (``module.``, ``_orig_mod.``). Saving and exporting look through it, and loading a state dict saved from
one strips the prefix, as timm's loaders do.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["WRAPPER_PREFIXES", "strip_parallel", "strip_wrapper_prefixes", "unwrap"]

WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def _wrapper_types() -> tuple[type, ...]:
    # only those already imported: a model wrapped in one imported its module, and zoo stays torch-free until used
    found = []
    parallel = sys.modules.get("torch.nn.parallel")
    if parallel is not None:
        found += [parallel.DataParallel, parallel.DistributedDataParallel]
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is not None:
        found.append(eval_frame.OptimizedModule)
    return tuple(found)


def unwrap(model: Any) -> Any:
    """``model`` without its DataParallel / DistributedDataParallel / torch.compile wrappers (any nesting)."""
    types = _wrapper_types()
    while types and isinstance(model, types):
        model = model._orig_mod if "_orig_mod" in model._modules else model.module
    return model


def strip_parallel(model: Any, family_attr: str) -> Any:
    """The model inside ``nn.DataParallel`` / ``DistributedDataParallel`` when it is a zoo model (it has
    ``family_attr``, the method ``zoo.train`` / ``evaluate`` / ``predict`` / ``finetune`` hands it to), else
    ``model`` unchanged. The wrapper hides the family's methods (``torch.compile``'s forwards them), so a
    wrapped ResNet18 would be read as a plain module: its folder iterated as a data set, its predictions raw
    logits. The family's own loop places the model and distributes under torchrun."""
    parallel = sys.modules.get("torch.nn.parallel")
    if parallel is None:
        return model
    inner = model
    while isinstance(inner, (parallel.DataParallel, parallel.DistributedDataParallel)):
        inner = inner.module
    return inner if inner is not model and hasattr(inner, family_attr) else model


def strip_wrapper_prefixes(state_dict: Mapping[str, Any], own_keys: Any) -> Mapping[str, Any]:
    """``state_dict`` with a wrapper's prefix taken off every key, where every key has it and the model's own
    keys (``own_keys``; none given: any model's) do not; otherwise unchanged."""
    own = set(own_keys)
    while state_dict and not own & set(state_dict):
        prefix = next((p for p in WRAPPER_PREFIXES if all(k.startswith(p) for k in state_dict)), None)
        if prefix is None:
            break
        state_dict = {k[len(prefix):]: v for k, v in state_dict.items()}
    return state_dict
