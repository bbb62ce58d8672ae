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


class _EntryPoint:
    # zoo.build(name, weights=..., **config), with the model's card as its __doc__, read when asked for
    # (torch.hub.help): a card imports the model's family, and loading resnet18 must not need seq2seq's
    # tokenizers or the hyperspectral family's scipy

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = self.__qualname__ = name.replace("-", "_")

    def __call__(self, weights=None, **config):
        return _zoo.build(self.name, weights=weights, **config)

    @property
    def __doc__(self) -> str:  # type: ignore[override]
        return f"zoo.build({self.name!r}, weights=..., **config)\n\n{_zoo.model_info(self.name)}"


for _name in _zoo.list_models():
    globals()[_name.replace("-", "_")] = _EntryPoint(_name)
