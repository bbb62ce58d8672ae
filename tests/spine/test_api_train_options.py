"""zoo.train's options, the same in every family: a misspelt one is refused before the model is touched, in
the same words, and ``weights=`` starts a model given by name from those weights, as zoo.build and zoo.finetune
take them; a weights name means the same to zoo.model_info as to zoo.build."""

from __future__ import annotations

import copy

import pytest
import torch

import zoo


def test_a_misspelt_option_leaves_a_resnet18_as_it_was(tiny):
    """The engine refused 'epohcs' only after the data hook had read the folder into the network: the refused call
    left it naming its outputs after that folder's classes (its predictions said 'dog' for another folder's cat)."""
    model = zoo.build("resnet18", num_classes=2, stem="cifar")
    before = copy.deepcopy(model.pretrained_cfg)
    with pytest.raises(TypeError, match=r"zoo.train on resnet18: unknown option\(s\) 'epohcs' \(did you mean "
                                        r"'epochs'\?\); it takes "):
        zoo.train(model, tiny.image_folder(), epohcs=1)
    assert model.pretrained_cfg == before


def test_a_misspelt_option_leaves_a_hybridsn_as_it_was_and_is_said_as_elsewhere(tiny):
    """HybridSN's refusal came from fit after the split and the preprocessing fit: the refused call refitted the
    model's PCA on the new scene and replaced its recorded training pixels, and said "fit: unknown option(s)
    epohcs; options: ..." where every other family says "zoo.train on NAME: unknown option(s) 'epohcs' ..."."""
    model = zoo.build("hybridsn", n_bands=15, window=9, num_classes=3)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    scene = tiny.scene()
    with pytest.raises(TypeError, match=r"zoo.train on hybridsn: unknown option\(s\) 'epohcs' \(did you mean "
                                        r"'epochs'\?\); it takes .*train_fraction"):
        zoo.train(model, scene, split="random", epohcs=1)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert getattr(model, "training_record_", None) is None and getattr(model, "split_", None) is None
    # what its training hands on to the engine still gets there: fit's own callbacks= among them
    result = zoo.train(model, scene, split="random", epochs=1, batch_size=64, callbacks=[], progress=False)
    assert len(result.history) == 1


def test_train_by_name_takes_weights_as_build_and_finetune_do(tiny, monkeypatch):
    """zoo.train("resnet18", data, weights="cifar10") was refused as "unknown option(s) 'weights' (did you mean
    'weight_decay'?)", where zoo.build, zoo.finetune and `zoo train NAME --weights` take them."""
    monkeypatch.setenv("ZOO_OFFLINE", "1")  # the file comes from the checkout's weights/
    folder = tiny.image_folder()
    loop = {"epochs": 1, "batch_size": 4, "progress": False}
    given = zoo.train("resnet18", folder, weights="cifar10", **loop)
    named = zoo.train("resnet18.cifar10", folder, **loop)
    assert [row["train_loss"] for row in given.history] == [row["train_loss"] for row in named.history]
    for a, b in zip(given.model.state_dict().values(), named.model.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="names the weights 'cifar10' but weights='imagenet1k-v1'"):
        zoo.train("resnet18.cifar10", folder, weights="imagenet1k-v1", **loop)
    with pytest.raises(TypeError, match="weights= is only used when the model is given by name"):
        zoo.train(given.model, folder, weights="cifar10", **loop)


def test_model_info_refuses_a_weights_name_build_refuses():
    """model_info("resnet18.cifar1") gave resnet18's card, as if those weights existed, where zoo.build (and train,
    evaluate, predict, finetune) of the same name say they are unknown and name the close ones."""
    with pytest.raises(KeyError, match="unknown weights 'resnet18.cifar1'"):
        zoo.build("resnet18.cifar1")
    with pytest.raises(KeyError, match=r"no weights named 'resnet18.cifar1'.* Did you mean 'resnet18.cifar10'"):
        zoo.model_info("resnet18.cifar1")
    assert zoo.model_info("resnet18.cifar10") == zoo.model_info("resnet18")  # a published one is its model's card


def test_a_resnet18s_own_zoo_train_refuses_a_misspelt_option_before_the_folder_is_read(tiny):
    """zoo.train's check sat in zoo.train alone: model.zoo_train(folder, epohcs=1), the method it calls, refused
    only once the data hook had named the network's outputs after the folder's classes."""
    model = zoo.build("resnet18", num_classes=2, stem="cifar")
    before = copy.deepcopy(model.pretrained_cfg)
    with pytest.raises(TypeError, match=r"^zoo.train on resnet18: unknown option\(s\) 'epohcs' \(did you mean "
                                        r"'epochs'\?\); it takes .*unknown_classes"):
        model.zoo_train(tiny.image_folder(), epohcs=1)
    assert model.pretrained_cfg == before


def test_a_hybridsns_own_zoo_train_refuses_a_misspelt_option_before_the_scene_is_read(tiny):
    """model.zoo_train(scene, epohcs=1) refitted the PCA and replaced the recorded training pixels, then said
    "fit: unknown option(s) epohcs; options: ..." where zoo.train says "zoo.train on hybridsn: ..."."""
    model = zoo.build("hybridsn", n_bands=15, window=9, num_classes=3)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(TypeError, match=r"^zoo.train on hybridsn: unknown option\(s\) 'epohcs' \(did you mean "
                                        r"'epochs'\?\); it takes .*train_fraction"):
        model.zoo_train(tiny.scene(), split="random", epohcs=1)
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert getattr(model, "training_record_", None) is None and getattr(model, "split_", None) is None


def test_a_hybridsn_given_windows_keeps_its_scene_split_when_an_option_is_misspelt(tiny):
    """Windows given as a Dataset drop the scene split a model recorded (they may be its test pixels), and they
    did so before the engine refused the typo: the refused call left a trained model with no record of the
    pixels it was trained on, so its evaluation no longer kept them out."""
    model = zoo.build("hybridsn", n_bands=15, window=9, num_classes=3)
    model.zoo_train(tiny.scene(), split="random", epochs=0, progress=False)
    record = model.training_record_
    assert record is not None
    windows = torch.utils.data.TensorDataset(torch.zeros(4, 1, 15, 9, 9), torch.ones(4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"^zoo.train on hybridsn: unknown option\(s\) 'epohcs'"):
        model.zoo_train(windows, epohcs=1)
    assert model.training_record_ is record and model.split_ is not None


@pytest.mark.parametrize("name", ["seq2seq-gru", "video-tsn"])
def test_a_networks_own_zoo_train_refuses_a_misspelt_option_before_its_data_hook(tiny, name):
    """The check sat in zoo.train alone: seq2seq's model.zoo_train(corpus, epohcs=1) trained a tokenizer on the
    corpus into the model before the engine refused the typo. Every network trained by the shared engine now
    refuses it as its zoo_train starts (zoo.engine.network.Network.zoo_train)."""
    model = zoo.build(name, **({"num_classes": 3} if name == "video-tsn" else {}))
    data = tiny.corpus() if name.startswith("seq2seq") else tiny.video_folder()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(TypeError, match=rf"^zoo.train on {name}: unknown option\(s\) 'epohcs' \(did you mean "
                                        r"'epochs'\?\)"):
        model.zoo_train(data, epohcs=1)
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert getattr(model, "tokenizer", None) is None
