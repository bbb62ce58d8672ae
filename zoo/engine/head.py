"""timm's classifier-head API, once for every zoo classifier whose classifier is the ``fc`` Linear.

A timm user reaches for four methods (https://huggingface.co/docs/timm/feature_extraction):

* ``forward_features(x)``: the backbone's unpooled output (ResNet18: ``(B, 512, H/32, W/32)``);
* ``forward_head(features, pre_logits=False)``: pooling, then the classifier; ``pre_logits=True`` stops
  before it and returns the pooled ``(B, D)`` vectors a linear probe or a retrieval index wants;
* ``get_classifier()`` and ``reset_classifier(num_classes)``: read or replace the head.

``forward(x) == forward_head(forward_features(x))`` for every model here (ResNet18 and R(2+1)D keep
torchvision's ``forward``, which runs the same ops: ``zoo.export`` scripts it as a plain torchvision
model). The two forward methods are each model's own (their shapes differ); the head replacement lives
in :func:`replace_fc`, which also drops class names recorded for the old head, wherever the model keeps
them.
"""

from __future__ import annotations

from torch import nn

from zoo.inputs import whole_number

__all__ = ["HEADLESS_HINT", "ClassifierHead", "drop_stale_classes", "replace_fc"]

HEADLESS_HINT = ("for features without a head, timm's num_classes=0, call "
                 "model.forward_head(model.forward_features(x), pre_logits=True)")
"""What a ``num_classes`` below 1 is told: zoo's classifiers always have a head."""

_CLASS_CFGS = ("pretrained_cfg", "video_cfg")  # where zoo's image and video models record class names


def replace_fc(model: nn.Module, num_classes: int) -> nn.Module:
    """Give ``model.fc`` a fresh ``Linear(in_features, num_classes)`` (torchvision's default init) on the
    old head's device and dtype; class names recorded for another count are dropped."""
    if not isinstance(getattr(model, "fc", None), nn.Linear):
        raise TypeError(f"expected a model with an nn.Linear `fc` head, got {type(model).__name__}")
    num_classes = whole_number(num_classes, "num_classes", hint=HEADLESS_HINT)
    old = model.fc
    model.fc = nn.Linear(old.in_features, num_classes).to(old.weight.device, old.weight.dtype)
    drop_stale_classes(model, num_classes)
    return model


def drop_stale_classes(model: nn.Module, num_classes: int) -> None:
    """Forget the class names ``model`` recorded when there are not ``num_classes`` of them: after a head
    replacement the old head's names no longer describe the outputs (predictions would carry them)."""
    for attr in _CLASS_CFGS:
        cfg = getattr(model, attr, None)
        if isinstance(cfg, dict) and len(cfg.get("classes") or ()) != num_classes:
            cfg.pop("classes", None)


class ClassifierHead:
    """Mixin: ``get_classifier`` / ``reset_classifier`` over ``self.fc``; the model defines
    ``forward_features`` and ``forward_head`` (see the module docs). ``fc`` is the model's own attribute and
    carries no annotation here: torch.jit.script would try to compile one into every model."""

    def get_classifier(self) -> nn.Linear:
        """The classifier: the ``fc`` Linear."""
        return self.fc

    def reset_classifier(self, num_classes: int) -> None:
        """Replace the classifier with a fresh one of ``num_classes`` outputs (:func:`replace_fc`)."""
        replace_fc(self, num_classes)  # type: ignore[arg-type]
