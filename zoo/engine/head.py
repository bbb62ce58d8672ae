"""timm's classifier-head API, once for every zoo classifier, and its head replacement for any torchvision one.

A timm user reaches for four methods (https://huggingface.co/docs/timm/feature_extraction):

* ``forward_features(x)``: the backbone's unpooled output (ResNet18: ``(B, 512, H/32, W/32)``);
* ``forward_head(features, pre_logits=False)``: pooling, then the classifier; ``pre_logits=True`` stops
  before it and returns the pooled ``(B, D)`` vectors a linear probe or a retrieval index wants;
* ``get_classifier()`` and ``reset_classifier(num_classes)``: read or replace the head.

``forward(x) == forward_head(forward_features(x))`` for every model here (ResNet18 and R(2+1)D keep
torchvision's ``forward``, which runs the same ops: ``zoo.export`` scripts it as a plain torchvision
model). The two forward methods are each model's own (their shapes differ); the head replacement is the
function :func:`swap_classifier`, which the method calls; :func:`reset_classifier` calls a model's own method
where it has one and takes a torchvision model without it too (``fc``, ``classifier``, ``head`` or ``heads``: ResNet, VGG / MobileNet, Swin, ViT; with the auxiliary
classifiers of Inception v3 and GoogLeNet); it also drops class names
recorded for the old head, wherever the model keeps them.
"""

from __future__ import annotations

import copy
import logging

import torch
from torch import nn

from zoo.inputs import whole_number
from zoo.wrappers import unwrap

__all__ = ["AUX_HEADS", "HEADLESS_HINT", "HEAD_NAMES", "ClassifierHead", "classifier_outputs", "drop_stale_classes",
           "head_name", "num_outputs", "output_layers", "reorder_outputs_by_name", "replace_fc", "reset_classifier",
           "swap_classifier",
           "take_file_head", "weights_as_backbone"]

log = logging.getLogger(__name__)

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


def _classifier(model: nn.Module) -> nn.Module:
    """The head as the model names it: its own ``get_classifier()``, else the :func:`head_name` attribute."""
    own = getattr(model, "get_classifier", None)
    return own() if callable(own) else getattr(model, head_name(model))


def output_layers(model: nn.Module) -> list[tuple[nn.Module, str, nn.Linear]]:
    """``(parent, attribute, Linear)`` of each layer that scores the classes: the head's last Linear first, then the
    auxiliary classifiers' (:data:`AUX_HEADS`, torchvision's Inception v3 and GoogLeNet)."""
    name = head_name(model)
    head = getattr(model, name)
    linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
    if not linears:
        return []
    links = [(model, name, head)] if head is linears[-1] else [
        (parent, attr, child) for parent in head.modules() for attr, child in parent.named_children()
        if child is linears[-1]][:1]
    for path in AUX_HEADS:
        parent_name, _, attr = path.rpartition(".")
        parent = getattr(model, parent_name, None)
        if isinstance(getattr(parent, attr, None), nn.Linear):
            links.append((parent, attr, getattr(parent, attr)))
    return links


@torch.no_grad()
def reorder_outputs_by_name(model: nn.Module, old: list[str] | None, new: list[str]) -> None:
    """A kept head (the data's class count is the head's, ``old`` its class names) with its outputs put in the
    data's class order ``new`` by name: renamed by position, a head trained on ``['bee', 'ant']`` and trained on
    ``ant/`` and ``bee/`` started out calling every bee an ant. Names the head does not have take its other
    outputs, in their order. The layers are replaced by reordered copies, not changed in place, so a caller that
    kept the old ones can put them back."""
    if old is None or len(old) != len(new) or old == new or len(set(old)) != len(old):
        return
    at, kept = {name: i for i, name in enumerate(old)}, set(new)
    rest = iter(i for i, name in enumerate(old) if name not in kept)
    order = [at[name] if name in at else next(rest) for name in new]
    if order == list(range(len(new))):
        return
    for parent, attr, linear in output_layers(model):
        reordered = copy.deepcopy(linear)
        for param in (reordered.weight, reordered.bias):
            if param is not None:
                param.copy_(param[torch.tensor(order, device=param.device)])
        setattr(parent, attr, reordered)
    log.info("the head's outputs put in the data's class order by name (%s -> %s)", old, new)


def num_outputs(model: nn.Module) -> int | None:
    """The head's number of outputs: the last ``nn.Linear`` of the classifier (a ``Sequential(Dropout, Linear)``
    head, torchvision's fine-tuning idiom, included); None for a model without one (``fc = nn.Identity()``)."""
    linears = [m for m in _classifier(unwrap(model)).modules() if isinstance(m, nn.Linear)]
    return linears[-1].out_features if linears else None


def classifier_outputs(model: nn.Module) -> int:
    """:func:`num_outputs`, refused where there is no classifier: class scores, class names and a saved config
    all need one, and an AttributeError raised under a property would be reported as a missing attribute."""
    count = num_outputs(model)
    if count is None:
        inner = unwrap(model)
        raise TypeError(f"{type(inner).__name__} has no classifier (its head is {type(_classifier(inner)).__name__}): "
                        "expected an nn.Linear head to score classes. For features call model.forward_head("
                        "model.forward_features(x), pre_logits=True); model.reset_classifier(n) puts an n-class "
                        "head back")
    return count


def reset_classifier(model: nn.Module, num_classes: int) -> nn.Module:
    """Give ``model`` a fresh classifier of ``num_classes`` outputs and return it: the model's own
    ``reset_classifier`` method where it has one (it may keep a config in step), else :func:`swap_classifier`.
    DataParallel / DDP / torch.compile wrappers are looked through. timm's name; on a zoo classifier it is the
    method ``model.reset_classifier(num_classes)``."""
    num_classes = whole_number(num_classes, "num_classes", hint=HEADLESS_HINT)
    inner = unwrap(model)
    if callable(getattr(type(inner), "reset_classifier", None)):
        inner.reset_classifier(num_classes)
    else:
        swap_classifier(inner, num_classes)
    return model


def swap_classifier(model: nn.Module, num_classes: int) -> None:
    """The head surgery behind :func:`reset_classifier` and the models' own ``reset_classifier`` methods: the last
    ``nn.Linear`` of the head (:func:`head_name`: an ``nn.Linear``, or a ``Sequential`` ending in one) becomes a
    new ``Linear(in_features, num_classes)`` (torchvision's default init) on the old one's device and dtype; an
    ``nn.Identity`` head (torchvision's headless idiom) becomes ``Linear(model.num_features, num_classes)``; the
    auxiliary heads too; class names recorded for another count are dropped."""
    name = head_name(model)
    head = getattr(model, name)
    last = head[-1] if isinstance(head, nn.Sequential) and len(head) else head
    if isinstance(last, nn.Identity):
        setattr(model, name, _linear_for_identity(model, num_classes))
    elif not isinstance(last, nn.Linear):
        raise TypeError(f"cannot replace a head of type {type(head).__name__}: expected nn.Linear or a Sequential "
                        "ending in one (or nn.Identity)")
    elif last is head:
        setattr(model, name, _fresh_linear(last, num_classes))
    else:
        head[-1] = _fresh_linear(last, num_classes)
    for path in AUX_HEADS:
        parent_name, _, attr = path.rpartition(".")
        parent = getattr(model, parent_name, None)
        if isinstance(getattr(parent, attr, None), nn.Linear):
            setattr(parent, attr, _fresh_linear(getattr(parent, attr), num_classes))
    drop_stale_classes(model, num_classes)
    cfg = getattr(model, "pretrained_cfg", None)
    if isinstance(cfg, dict) and cfg.get("weights") is not None:  # else the model keeps its own dict
        model.pretrained_cfg = weights_as_backbone(cfg)


def weights_as_backbone(cfg: dict) -> dict:
    """``cfg`` (a copy) with the weights it names moved from ``weights`` to ``backbone_from``, for a network whose
    head is no longer theirs (reset, replaced by hand, or built with another ``num_classes``): exports and saved
    metadata would otherwise say the network is those weights, while only its backbone is, which a head-only
    fine-tune on cached features still rebuilds its checkpoints around."""
    cfg = dict(cfg)
    if cfg.get("weights") is not None:
        cfg["backbone_from"] = cfg.pop("weights")
    return cfg


def _linear_for_identity(model: nn.Module, num_classes: int) -> nn.Linear:
    """A ``Linear(num_features, num_classes)`` for a model whose head was set to ``nn.Identity``: its input width
    is the pooled features' (timm's ``num_features``), which the Identity no longer records."""
    width = getattr(model, "num_features", None)
    if not isinstance(width, int):
        raise TypeError(f"cannot put a head on a {type(model).__name__} whose head is nn.Identity: expected the model "
                        f"to give its feature width as num_features, got {width!r}; set the head yourself "
                        "(model.fc = nn.Linear(width, num_classes))")
    param = next(model.parameters(), None)
    fresh = nn.Linear(width, num_classes)
    return fresh if param is None else fresh.to(param.device, param.dtype)


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
    asked for is kept (the loader then re-initialises the head, with a warning). A head saved as a
    ``Sequential`` around one Linear (``fc = Sequential(Dropout, Linear)``) loads as that Linear."""
    _one_linear_head(state)
    head = state.get("fc.weight")
    if (head is not None and head.dim() == 2 and "num_classes" not in (requested or {})
            and head.shape[1] == model.fc.in_features and head.shape[0] != model.fc.out_features):
        model.reset_classifier(int(head.shape[0]))


def _one_linear_head(state: dict) -> None:
    """Rename ``fc.<i>.weight`` / ``fc.<i>.bias`` to ``fc.weight`` / ``fc.bias`` in ``state`` where the saved head
    was a Sequential whose only layer with parameters is that Linear: its other layers (Dropout, Flatten) do
    nothing in eval mode, and the trained head would otherwise be left freshly initialised on load."""
    indices = {key.split(".")[1] for key in state if key.startswith("fc.") and key.count(".") == 2}
    if "fc.weight" in state or len(indices) != 1 or any(k.startswith("fc.") and k.count(".") != 2 for k in state):
        return
    (i,) = indices
    if getattr(state.get(f"fc.{i}.weight"), "ndim", 0) == 2:
        for part in ("weight", "bias"):
            if f"fc.{i}.{part}" in state:
                state[f"fc.{part}"] = state.pop(f"fc.{i}.{part}")


class ClassifierHead:
    """Mixin: ``get_classifier`` / ``reset_classifier`` over ``self.fc``; the model defines
    ``forward_features`` and ``forward_head`` (see the module docs). ``fc`` is the model's own attribute and
    carries no annotation here: torch.jit.script would try to compile one into every model."""

    def get_classifier(self) -> nn.Module:
        """The classifier: the ``fc`` Linear (or the head the user set, a ``Sequential`` or an ``Identity``)."""
        return self.fc

    def reset_classifier(self, num_classes: int) -> None:
        """Replace the classifier with a fresh one of ``num_classes`` outputs (the module's :func:`reset_classifier`)."""
        swap_classifier(self, whole_number(num_classes, "num_classes", hint=HEADLESS_HINT))  # type: ignore[arg-type]
