"""timm's head API on every zoo classifier (zoo.engine.head): forward_features / forward_head, get_classifier,
reset_classifier, and the same outputs as the torchvision forward each model replaces."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import TensorDataset
from torchvision.models import ResNet
from torchvision.models.video import VideoResNet

import zoo
from zoo.engine.head import reset_classifier

# name -> (input, feature-map shape, pooled width)
CASES = {
    "resnet18": ((2, 3, 64, 64), (2, 512, 2, 2), 512),
    "video-tsn": ((2, 3, 4, 32, 32), (2, 4, 512), 512),
    "r2plus1d_18": ((2, 3, 8, 32, 32), (2, 512, 1, 2, 2), 512),
}


def _model(name: str, **config):
    torch.manual_seed(0)
    return zoo.build(name, num_classes=7, **config).eval()


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_is_forward_head_of_forward_features(name):
    shape, feat_shape, width = CASES[name]
    model, x = _model(name), torch.randn(shape)
    with torch.no_grad():
        feats = model.forward_features(x)
        assert tuple(feats.shape) == feat_shape
        assert tuple(model.forward_head(feats, pre_logits=True).shape) == (2, width)
        assert torch.equal(model.forward_head(feats), model(x))
    assert model.get_classifier() is model.fc


def test_resnet18_and_r2plus1d_keep_torchvisions_forward():
    x = torch.randn(2, 3, 64, 64)
    resnet = _model("resnet18")
    video = _model("r2plus1d_18")
    v = torch.randn(2, 3, 8, 32, 32)
    assert type(resnet).forward is ResNet.forward and type(video).forward is VideoResNet.forward  # zoo.export scripts them
    with torch.no_grad():
        assert torch.equal(resnet(x), resnet.forward_head(resnet.forward_features(x)))
        assert torch.equal(video(v), video.forward_head(video.forward_features(v)))


def test_tsn_pre_logits_come_before_dropout():
    model = _model("video-tsn", dropout=0.9).train()
    x = torch.randn(2, 3, 4, 32, 32)
    with torch.no_grad():
        feats = model.forward_features(x)
        assert torch.equal(model.forward_head(feats, pre_logits=True), feats.mean(dim=1))


def test_pre_logits_are_what_extract_features_caches():
    from zoo.vision.finetune import extract_features

    model = _model("resnet18", stem="cifar")
    x, y = torch.randn(5, 3, 16, 16), torch.arange(5)
    cached = extract_features(model, TensorDataset(x, y), amp=None, progress=False)
    with torch.no_grad():
        pooled = model.forward_head(model.forward_features(x), pre_logits=True)
    torch.testing.assert_close(cached.tensors[0], pooled)
    assert model.fc.out_features == 7  # extract_features puts the head back


@pytest.mark.parametrize("name", sorted(CASES))
def test_reset_classifier_gives_a_fresh_head_and_forgets_stale_class_names(name, tmp_path):
    model = _model(name).double()
    cfg = model.pretrained_cfg if name == "resnet18" else model.video_cfg
    cfg["classes"] = [f"c{i}" for i in range(7)]
    model.reset_classifier(7)  # same count: the names still describe the outputs
    assert cfg["classes"] == [f"c{i}" for i in range(7)]
    old = model.fc
    model.reset_classifier(3)
    assert model.fc is not old and model.fc.out_features == 3 and model.fc.weight.dtype == torch.float64
    assert "classes" not in cfg and model.config.num_classes == 3
    path = zoo.save(model.float(), tmp_path / "m.safetensors")
    assert zoo.build(name, weights=str(path)).fc.out_features == 3


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_reset_classifier_refuses_a_headless_or_odd_count_and_says_what_to_call(bad):
    model = _model("resnet18")
    with pytest.raises(ValueError, match=r"num_classes must be an int >= 1 \(for features without a head, "
                                         r".*pre_logits=True\)\), got "):
        model.reset_classifier(bad)
    assert model.fc.out_features == 7
    with pytest.raises(TypeError, match=r"Sequential has no classifier attribute \(fc, classifier, head, heads\)"):
        reset_classifier(torch.nn.Sequential(), 3)


class _Foreign(torch.nn.Module):
    """A torchvision-style classifier without timm's method: VGG's / MobileNet's ``classifier`` Sequential."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Flatten()
        self.classifier = torch.nn.Sequential(torch.nn.Dropout(), torch.nn.Linear(4, 10))
        self.pretrained_cfg = {"classes": [f"c{i}" for i in range(10)]}


def test_one_head_replacement_for_zoo_and_torchvision_models():
    """reset_classifier is the one name (timm's): the method of zoo's classifiers and, for a torchvision model
    without it, the function (zoo.vision.reset_classifier); zoo.vision.replace_head and replace_fc name the same
    function, which took only a ResNet's fc."""
    from zoo.engine import head
    from zoo.vision import finetune

    assert zoo.vision.reset_classifier is zoo.vision.replace_head is head.replace_fc is reset_classifier
    assert finetune.head_name is head.head_name
    net = _Foreign().double()
    assert zoo.vision.replace_head(net, 3) is net
    assert net.classifier[-1].out_features == 3 and net.classifier[-1].weight.dtype == torch.float64
    assert isinstance(net.classifier[0], torch.nn.Dropout) and "classes" not in net.pretrained_cfg
    with pytest.raises(ValueError, match=r"num_classes must be an int >= 1 \(for features without a head.*\), got 0"):
        reset_classifier(net, 0)
    net.classifier = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with pytest.raises(TypeError, match="cannot replace a head of type Sequential: expected nn.Linear or a Sequential "
                                        "ending in one"):
        reset_classifier(net, 3)


def test_build_with_timm_num_classes_zero_points_at_pre_logits():
    with pytest.raises(ValueError, match=r"num_classes must be an int >= 1 \(.*forward_head.*\), got 0"):
        zoo.build("resnet18", num_classes=0)


@pytest.mark.parametrize("build, heads", [
    ("vit_b_16", lambda m: [m.heads[-1]]),  # its head sits in `heads`: refused as having no classifier
    ("inception_v3", lambda m: [m.fc, m.AuxLogits.fc]),  # the auxiliary heads stayed at 1000 classes
    ("googlenet", lambda m: [m.fc, m.aux1.fc2, m.aux2.fc2]),
])
def test_reset_classifier_replaces_every_head_of_a_torchvision_model(build, heads):
    import torchvision

    options = {"image_size": 32} if build == "vit_b_16" else {"aux_logits": True, "init_weights": False}
    model = getattr(torchvision.models, build)(weights=None, **options)
    assert reset_classifier(model, 7) is model
    assert [h.out_features for h in heads(model)] == [7] * len(heads(model))
