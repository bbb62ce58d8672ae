"""What an export says about a classifier's head: its number of outputs, and the class names (and weights name)
recorded for it only while they still describe it.

A head replaced by hand (torchvision's idiom ``m.fc = nn.Sequential(nn.Dropout(0.2), nn.Linear(512, n))``, or
``nn.Identity()`` for features) leaves the model's recorded config as the weights wrote it: ten CIFAR-10 names
and ``weights: resnet18.cifar10`` were stored with a graph of three logits, and a deployment reading
``classes[argmax]`` labelled every image with a wrong name (``zoo.predict`` refuses such a model).
"""

from __future__ import annotations

from typing import Any

from torch import nn


def head_outputs(model: nn.Module) -> int | None:
    """The classifier's outputs (the last ``nn.Linear`` of its head), or None for a headless network
    (``fc = nn.Identity()``) or one without a head zoo knows how to find."""
    from zoo.engine.head import num_outputs  # here: zoo.engine's package imports the training loop

    try:
        return num_outputs(model)
    except TypeError:  # no fc / classifier / head attribute: nothing to check the names against
        return None


def fitting_classes(cfg: dict[str, Any], outputs: int | None) -> tuple[dict[str, Any], str | None]:
    """``cfg`` (a copy) without class names that do not name ``outputs`` outputs, its ``weights`` name then moved
    to ``backbone_from`` (the head is no longer the weights', as ``reset_classifier`` records it); returns the
    cfg and a note for the metadata when names were dropped, else None."""
    from zoo.engine.head import weights_as_backbone

    classes = cfg.get("classes")
    if classes is None or (outputs is not None and len(classes) == outputs):
        return dict(cfg), None
    cfg = weights_as_backbone({k: v for k, v in cfg.items() if k != "classes"})
    head = f"{outputs} outputs" if outputs is not None else "no classifier (its head is not an nn.Linear)"
    return cfg, (f"the recorded {len(classes)} class names are not stored: the network's head gives {head}, "
                 f"so it was replaced after they were recorded")
