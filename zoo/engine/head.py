"""timm's classifier-head API, once for every zoo classifier, and its head replacement for any torchvision one.

A timm user reaches for four methods (https://huggingface.co/docs/timm/feature_extraction):

* ``forward_features(x)``: the backbone's unpooled output (ResNet18: ``(B, 512, H/32, W/32)``);
* ``forward_head(features, pre_logits=False)``: pooling, then the classifier; ``pre_logits=True`` stops
  before it and returns the pooled ``(B, D)`` vectors a linear probe or a retrieval index wants;
* ``get_classifier()`` and ``reset_classifier(num_classes)``: read or replace the head.

``forward(x) == forward_head(forward_features(x))`` for every model here (ResNet18 and R(2+1)D keep
torchvision's ``forward``, which runs the same ops: ``zoo.export`` scripts it as a plain torchvision
model). The two forward methods are each model's own (their shapes differ); the head replacement is the
function :func:`reset_classifier`, which the method calls and which takes a torchvision model without the
method too (``fc``, ``classifier``, ``head`` or ``heads``: ResNet, VGG / MobileNet, Swin, ViT; with the auxiliary
classifiers of Inception v3 and GoogLeNet); it also drops class names
recorded for the old head, wherever the model keeps them.
"""

from __future__ import annotations

from torch import nn

from zoo.inputs import whole_number

__all__ = ["AUX_HEADS", "HEADLESS_HINT", "HEAD_NAMES", "ClassifierHead", "drop_stale_classes", "head_name", "replace_fc",
           "reset_classifier", "take_file_head"]

HEADLESS_HINT = ("for features without a head, timm's num_classes=0, call "
                 "model.forward_head(model.forward_features(x), pre_logits=True)")
"""What a ``num_classes`` below 1 is told: zoo's classifiers always have a head."""

_CLASS_CFGS = ("pretrained_cfg", "video_cfg")  # where zoo's image and video models record class names
HEAD_NAMES = ("fc", "classifier", "head", "heads")  # torchvision's ResNet / VGG, MobileNet / Swin / ViT
# the auxiliary classifiers training adds to the loss (torchvision's Inception v3, GoogLeNet): left at the old
# count, their logits no longer match the targets
AUX_HEADS = ("AuxLogits.fc", "aux1.fc2", "aux2.fc2")


def head_name(model: nn.Module) -> str:
    """The attribute holding the classifier: ``fc`` (torchvision's ResNet), ``classifier`` or ``head``."""
    for name in HEAD_NAMES:
        if isinstance(getattr(model, name, None), nn.Module):
            return name
    raise TypeError(f"{type(model).__name__} has no classifier attribute ({', '.join(HEAD_NAMES)}): expected the "
                    "head as one of them")


def reset_classifier(model: nn.Module, num_classes: int) -> nn.Module:
    """Give ``model`` a fresh classifier of ``num_classes`` outputs and return it: the last ``nn.Linear`` of its
    head (:func:`head_name`: an ``nn.Linear``, or a ``Sequential`` ending in one) becomes a new
    ``Linear(in_features, num_classes)`` (torchvision's default init) on the old one's device and dtype, and
    class names recorded for another count are dropped. timm's name; on a zoo classifier it is the method
    ``model.reset_classifier(num_classes)``."""
    num_classes = whole_number(num_classes, "num_classes", hint=HEADLESS_HINT)
    name = head_name(model)
    head = getattr(model, name)
    last = head[-1] if isinstance(head, nn.Sequential) and len(head) else head
    if not isinstance(last, nn.Linear):
        raise TypeError(f"cannot replace a head of type {type(head).__name__}: expected nn.Linear or a Sequential "
                        "ending in one")
    fresh = _fresh_linear(last, num_classes)
    if last is head:
        setattr(model, name, fresh)
    else:
        head[-1] = fresh
    for path in AUX_HEADS:
        parent_name, _, attr = path.rpartition(".")
        parent = getattr(model, parent_name, None)
        if isinstance(getattr(parent, attr, None), nn.Linear):
            setattr(parent, attr, _fresh_linear(getattr(parent, attr), num_classes))
    drop_stale_classes(model, num_classes)
    return model


def _fresh_linear(old: nn.Linear, num_classes: int) -> nn.Linear:
    """A new ``Linear(old.in_features, num_classes)`` (torchvision's default init) on ``old``'s device and dtype."""
    return nn.Linear(old.in_features, num_classes).to(old.weight.device, old.weight.dtype)


replace_fc = reset_classifier  # the name of an earlier release, kept for callers that use it


def drop_stale_classes(model: nn.Module, num_classes: int) -> None:
    """Forget the class names ``model`` recorded when there are not ``num_classes`` of them: after a head
    replacement the old head's names no longer describe the outputs (predictions would carry them)."""
    for attr in _CLASS_CFGS:
        cfg = getattr(model, attr, None)
        if isinstance(cfg, dict) and len(cfg.get("classes") or ()) != num_classes:
            cfg.pop("classes", None)


def take_file_head(model: nn.Module, state: dict, requested: dict | None) -> None:
    """Give ``model`` (an ``fc`` classifier) the size of the ``fc.weight`` in ``state`` when the caller asked for
    no ``num_classes``: a plain state dict (torchvision's ``.pth``, ``torch.save(model.state_dict())``) records no
    config, and the builder's default head would have the file's trained one re-initialised. A ``num_classes``
    asked for is kept (the loader then re-initialises the head, with a warning)."""
    head = state.get("fc.weight")
    if (head is not None and head.dim() == 2 and "num_classes" not in (requested or {})
            and head.shape[1] == model.fc.in_features and head.shape[0] != model.fc.out_features):
        model.reset_classifier(int(head.shape[0]))


class ClassifierHead:
    """Mixin: ``get_classifier`` / ``reset_classifier`` over ``self.fc``; the model defines
    ``forward_features`` and ``forward_head`` (see the module docs). ``fc`` is the model's own attribute and
    carries no annotation here: torch.jit.script would try to compile one into every model."""

    def get_classifier(self) -> nn.Linear:
        """The classifier: the ``fc`` Linear."""
        return self.fc

    def reset_classifier(self, num_classes: int) -> None:
        """Replace the classifier with a fresh one of ``num_classes`` outputs (the module's :func:`reset_classifier`)."""
        reset_classifier(self, num_classes)  # type: ignore[arg-type]
