"""torch.hub entry points: one per registered zoo model.

    import torch
    model = torch.hub.load("OWNER/zoo", "resnet18", weights="cifar10")              # from GitHub
    model = torch.hub.load("path/to/zoo", "resnet18", weights="cifar10", source="local")
    torch.hub.list("OWNER/zoo")      # resnet18, seq2seq_transformer, td3, ... (torch.hub.list has no local source)

Each entry point is ``zoo.build(name, weights=..., **config)``: ``weights`` is a tag, ``MODEL.TAG``, a
path, a URL or ``hf-hub:org/repo``; the other keywords are the model's config (``zoo info NAME``). A
model name with '-' gets an identifier-safe entry point with '_' (``seq2seq-transformer`` ->
``seq2seq_transformer``); ``torch.hub.help("OWNER/zoo", entry)`` shows the model's card.
"""

from __future__ import annotations

import zoo as _zoo

dependencies = ["torch", "torchvision", "numpy", "safetensors", "tqdm", "huggingface_hub"]


def _entrypoint(name: str):
    def load(weights=None, **config):
        return _zoo.build(name, weights=weights, **config)

    load.__name__ = load.__qualname__ = name.replace("-", "_")
    load.__doc__ = f"zoo.build({name!r}, weights=..., **config)\n\n{_zoo.model_info(name)}"
    return load


for _name in _zoo.list_models():
    globals()[_name.replace("-", "_")] = _entrypoint(_name)
