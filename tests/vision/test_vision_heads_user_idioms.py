"""The head idioms torchvision users bring to a zoo network (a Sequential or Identity ``fc``, DataParallel,
the function form of reset_classifier), and a head-only fine-tune of a backbone changed after it was built."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import zoo
from zoo.engine.head import reset_classifier
from zoo.exporting.metadata import read_metadata

FAST = {"epochs": 1, "batch_size": 4, "progress": False}


def _net(num_classes: int = 2) -> nn.Module:
    torch.manual_seed(0)
    return zoo.build("resnet18", stem="cifar", num_classes=num_classes)


def _xy(n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.rand(n, 3, 32, 32, generator=g), torch.arange(n) % 2


def test_a_head_only_checkpoint_rebuilds_a_backbone_changed_after_loading(tmp_path):
    """After m.load_state_dict(other), a cached head-only fine-tune wrote the head alone with the name of the
    loaded weights, and zoo.build(weights='DIR/best.pt') rebuilt that backbone (logits off by 0.15)."""
    zoo.save(_net(), tmp_path / "w.safetensors")
    m = zoo.build("resnet18", weights=str(tmp_path / "w.safetensors"))
    torch.manual_seed(1)
    m.load_state_dict(zoo.build("resnet18", stem="cifar", num_classes=2).state_dict())
    r = zoo.finetune(m, _xy(), strategy="head", augment=False, checkpoint_dir=str(tmp_path / "ck"), seed=0, **FAST)
    built = zoo.build("resnet18", weights=str(tmp_path / "ck" / "best.pt")).eval()
    x = torch.rand(2, 3, 32, 32)
    torch.testing.assert_close(built(x), r.model.eval()(x))


def test_a_sequential_head_trains_evaluates_and_saves(tmp_path):
    """m.fc = nn.Sequential(nn.Dropout(.2), nn.Linear(512, 2)) (torchvision's fine-tuning idiom) failed in
    train / evaluate ('no attribute out_features') and save ("no attribute 'config'"); the saved head then loaded
    as a fresh one (fc.1.weight unmatched)."""
    m, (x, y) = _net(10), _xy()
    m.fc = nn.Sequential(nn.Dropout(0.2), nn.Linear(512, 2))
    assert m.config.num_classes == 2
    zoo.train(m, (x, y), **FAST)
    assert "accuracy" in zoo.evaluate(m, (x, y))
    zoo.save(m, tmp_path / "seq.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "left freshly initialised" would be a head lost
        built = zoo.build("resnet18", weights=str(tmp_path / "seq.safetensors")).eval()
    torch.testing.assert_close(built(x), m.eval()(x))


def test_an_identity_head_is_said_to_be_no_classifier_and_can_be_put_back(tmp_path):
    """m.fc = nn.Identity(): save said "no attribute 'config'", evaluate "no attribute 'out_features'", predict
    asked for 512 class names, and reset_classifier(5) refused 'a head of type Identity'."""
    m, (x, y) = _net(10), _xy(2)
    m.fc = nn.Identity()
    for call in (lambda: zoo.save(m, tmp_path / "id.safetensors"), lambda: zoo.evaluate(m, (x, y)),
                 lambda: zoo.predict(m, x)):
        with pytest.raises(TypeError, match=r"no classifier.*pre_logits=True.*reset_classifier"):
            call()
    m.reset_classifier(5)
    assert isinstance(m.fc, nn.Linear) and (m.fc.in_features, m.fc.out_features) == (512, 5)
    assert tuple(m.eval()(x).shape) == (2, 5)


def test_the_function_form_keeps_a_hybridsn_config_in_step():
    """zoo.vision.reset_classifier(hybridsn, 3) replaced the layer but left config.num_classes at 5."""
    import zoo.vision

    h = zoo.build("hybridsn", n_bands=16, window=9, num_classes=5)
    zoo.vision.reset_classifier(h, 3)
    assert h.get_classifier().out_features == 3 and h.config.num_classes == 3


def test_reset_classifier_looks_through_data_parallel():
    """reset_classifier(nn.DataParallel(model), 3) was refused ('DataParallel has no classifier attribute')."""
    dp = nn.DataParallel(_net(10))
    assert reset_classifier(dp, 3) is dp
    assert dp.module.fc.out_features == 3


def test_a_head_reset_no_longer_names_the_weights_in_an_export(tmp_path):
    """After reset_classifier(5), zoo.export's metadata still said weights='...w.safetensors': a network of
    other outputs than those weights'. The weights are the backbone's, recorded as such."""
    zoo.save(_net(), tmp_path / "w.safetensors")
    m = zoo.build("resnet18", weights=str(tmp_path / "w.safetensors"))
    m.reset_classifier(5)
    meta = read_metadata(zoo.export(m, tmp_path / "r5.pt", image_size=32))
    assert "weights" not in meta and meta["backbone_from"].endswith("w.safetensors")


def test_a_build_with_another_head_size_names_the_weights_as_the_backbones(tmp_path):
    """zoo.build(weights=..., num_classes=3) of a 2-class file leaves the head freshly initialised (with a warning),
    but pretrained_cfg, zoo.export's metadata and zoo.save still named the file as the network's weights; like
    reset_classifier, the name moves to backbone_from. The same size keeps it as the weights'."""
    zoo.save(_net(2), tmp_path / "w.safetensors")
    with pytest.warns(UserWarning, match="fc"):
        m = zoo.build("resnet18", weights=str(tmp_path / "w.safetensors"), num_classes=3)
    assert "weights" not in m.pretrained_cfg and m.pretrained_cfg["backbone_from"].endswith("w.safetensors")
    meta = read_metadata(zoo.export(m, tmp_path / "r3.pt", image_size=32))
    assert "weights" not in meta and meta["backbone_from"].endswith("w.safetensors")
    same = zoo.build("resnet18", weights=str(tmp_path / "w.safetensors"))
    assert same.pretrained_cfg["weights"].endswith("w.safetensors") and "backbone_from" not in same.pretrained_cfg
