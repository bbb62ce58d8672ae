"""The registry: duplicate names, suggestions for unknown names, config validation, model cards."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo import registry


@pytest.fixture
def scratch_registry(monkeypatch):
    """A private registry so that test registrations never leak into other tests."""
    monkeypatch.setattr(registry, "_REGISTRY", {})
    return registry


def test_register_and_build_with_defaults(scratch_registry):
    @scratch_registry.register("toy-net", family="toys", summary="a toy")
    def _build(*, width: int = 4, depth: int = 2):
        return {"width": width, "depth": depth}

    assert scratch_registry.build("toy-net") == {"width": 4, "depth": 2}
    assert scratch_registry.build("toy-net", width=8) == {"width": 8, "depth": 2}
    card = scratch_registry.model_info("toy-net")
    assert card.family == "toys"
    assert card.default_config == {"width": 4, "depth": 2}
    assert "width = 4" in str(card)
    assert scratch_registry.list_models() == ["toy-net"]
    assert scratch_registry.list_models("toys") == ["toy-net"]


def test_duplicate_name_is_an_error(scratch_registry):
    scratch_registry.register("dup", family="toys", summary="first")(lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        scratch_registry.register("dup", family="toys", summary="second")(lambda: 2)


def test_unknown_name_suggests_closest(scratch_registry):
    scratch_registry.register("resnet18", family="vision", summary="x")(lambda: 1)
    scratch_registry.register("resnet50", family="vision", summary="x")(lambda: 1)
    with pytest.raises(KeyError, match=r"Did you mean 'resnet18' or 'resnet50'\? "):  # as a config key's hint says it
        scratch_registry.build("resnet81")


def test_unknown_config_key_lists_valid_keys(scratch_registry):
    @scratch_registry.register("toy-net", family="toys", summary="a toy")
    def _build(*, width: int = 4, depth: int = 2):
        return width, depth

    with pytest.raises(TypeError) as err:
        scratch_registry.build("toy-net", widht=3)
    msg = str(err.value)
    assert "'widht'" in msg and "did you mean 'width'" in msg and "depth, width" in msg


def test_unknown_family_is_an_error(scratch_registry):
    with pytest.raises(KeyError, match="unknown family"):
        scratch_registry.list_models("nope")


def test_non_string_name_is_a_type_error(scratch_registry):
    with pytest.raises(TypeError, match="must be a str"):
        scratch_registry.build(42)


REQUIRED = {
    "resnet18": "vision",
    "seq2seq-transformer": "seq2seq",
    "seq2seq-gru": "seq2seq",
    "td3": "rl",
    "hsi-pca-svm": "hyperspectral",
    "hybridsn": "hyperspectral",
    "video-tsn": "video",
    "r2plus1d_18": "video",
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_contract_names_build_with_no_arguments(name):
    """design.md: every registered name builds with no arguments (the first call a user types)."""
    if name not in zoo.list_models():
        pytest.skip(f"{name} is not registered in this checkout")
    assert zoo.model_info(name).family == REQUIRED[name]
    assert zoo.build(name) is not None


def test_every_registered_model_has_a_card():
    for name in zoo.list_models():
        card = zoo.model_info(name)
        assert card.name == name and card.summary and card.family in zoo.list_families()


class _ToyModel:
    """What a family's builder returns: its train / evaluate / predict options are in its methods' signatures."""

    def zoo_data(self, data, *, train: bool, crop: int | None = None, **options):
        return data, options

    def zoo_train(self, data, **config):
        return None

    def zoo_evaluate(self, data, *, tta: bool = False, **config):
        return {}

    def zoo_predict(self, inputs, *, topk: int = 1):
        return []


def test_a_train_or_predict_option_given_to_build_names_the_call_that_takes_it(scratch_registry):
    @scratch_registry.register("toy-net", family="toys", summary="a toy")
    def _build(*, num_classes: int = 2, width: int = 4) -> _ToyModel:
        return _ToyModel()

    assert scratch_registry.call_options("toy-net") == {"crop": ("train", "evaluate"), "tta": ("evaluate",),
                                                        "topk": ("predict",)}
    with pytest.raises(TypeError) as err:
        scratch_registry.build("toy-net", crop=32, topk=3, num_segments=2, widht=8)
    msg = str(err.value)
    assert "crop is an option of zoo.train / zoo.evaluate for toy-net, not of its architecture: " \
           "zoo.train(model, data, crop=32)" in msg
    assert "topk is an option of zoo.predict for toy-net, not of its architecture: zoo.predict(model, inputs, topk=3)" \
           in msg
    # a shared word ("num") is no likeness: no hint for num_segments, one for a misspelling
    assert "unknown config key(s) 'num_segments', 'widht' (did you mean 'width'?)" in msg
    assert "valid config keys are: num_classes, width" in msg


def test_close_keys_suggest_misspellings_and_word_subsets_only():
    valid = ["actor_lr", "critic_lr", "num_classes", "stem", "window"]
    assert registry._close_keys("num_clases", valid) == ["num_classes"]
    assert registry._close_keys("Stem", valid) == ["stem"]
    assert registry._close_keys("window_size", valid) == ["window"]
    assert registry._close_keys("lr", valid) == ["actor_lr", "critic_lr"]
    assert registry._close_keys("num_segments", valid) == []
    assert registry._close_keys("frames_per_clip", valid) == []


def test_video_tsn_says_num_segments_is_a_training_option():
    """build("video-tsn", num_segments=2) says num_segments is zoo.train's, not a suggestion of 'num_classes'."""
    with pytest.raises(TypeError) as err:
        zoo.build("video-tsn", num_classes=3, num_segments=2)
    msg = str(err.value)
    assert "num_segments is an option of zoo.train / zoo.evaluate for video-tsn, not of its architecture: " \
           "zoo.train(model, data, num_segments=2)" in msg
    assert "did you mean" not in msg
    with pytest.raises(TypeError, match=r"epochs is an option of zoo.train for resnet18"):
        zoo.build("resnet18", epochs=2)


@pytest.mark.parametrize(("name", "key", "said"), [
    ("video-tsn", "device", "device is an option of zoo.train / zoo.evaluate / zoo.predict for video-tsn"),
    ("hybridsn", "lr", "lr is an option of zoo.train for hybridsn"),
    ("td3", "total_steps", "total_steps is an option of zoo.train for td3"),
    ("td3", "episodes", "episodes is an option of zoo.evaluate for td3"),
])
def test_options_a_family_hands_on_as_keywords_are_named_with_their_call(name, key, said):
    """What zoo_train / zoo_evaluate hand on as **options (video's evaluate, HybridSN's fit, TD3's loop) was
    not seen: device was 'of zoo.train / zoo.predict' for video-tsn, lr and total_steps 'unknown config keys'."""
    with pytest.raises(TypeError) as err:
        zoo.build(name, **{key: 1})
    assert said in str(err.value) and "unknown config key" not in str(err.value)


def test_a_weights_name_builds_its_model_with_those_weights():
    by_name = zoo.build("td3.pendulum-v1")
    by_tag = zoo.build("td3", weights="pendulum-v1")
    assert by_name.env_id == "Pendulum-v1"
    for k, v in by_tag.actor.state_dict().items():
        assert torch.equal(by_name.actor.state_dict()[k], v)
    assert zoo.build("td3.pendulum-v1", weights="pendulum-v1").env_id == "Pendulum-v1"  # the same, twice: fine
    with pytest.raises(ValueError, match=r"'td3.pendulum-v1' names the weights 'pendulum-v1' but weights='halfcheetah-v5'"):
        zoo.build("td3.pendulum-v1", weights="halfcheetah-v5")
    with pytest.raises(KeyError, match=r"unknown weights 'td3.nope' for model 'td3'"):
        zoo.build("td3.nope")
    with pytest.raises(KeyError, match=r"unknown model 'tdd3.pendulum-v1'"):
        zoo.build("tdd3.pendulum-v1")


def test_split_weights_name_leaves_other_names_alone(scratch_registry):
    @scratch_registry.register("toy.net", family="toys", summary="a registered name with a dot")
    def _build():
        return {}

    assert scratch_registry.split_weights_name("toy.net") == ("toy.net", None)
    assert scratch_registry.split_weights_name("other.tag", "w") == ("other.tag", "w")
    assert scratch_registry.split_weights_name(3) == (3, None)


def test_timms_pretrained_flag_says_how_zoo_names_weights():
    with pytest.raises(TypeError, match=r"pretrained is timm's flag; .*weights=TAG.*'resnet18.TAG'.*cifar10, imagenet1k-v1"):
        zoo.build("resnet18", pretrained=True)


def test_train_and_finetune_by_weights_name_start_from_those_weights():
    from torch.utils.data import TensorDataset

    data = TensorDataset(torch.randn(4, 3, 16, 16), torch.arange(4) % 2)
    fit = {"epochs": 1, "batch_size": 4, "progress": False, "lr": 0.0}
    tuned = zoo.finetune("resnet18.cifar10", data, num_classes=2, strategy="head", **fit).model
    ref = zoo.build("resnet18", weights="cifar10")
    assert torch.equal(tuned.layer1[0].conv1.weight, ref.layer1[0].conv1.weight.to(tuned.layer1[0].conv1.weight.dtype))
    trained = zoo.train("resnet18.cifar10", data, **fit).model  # lr 0: the weights stay the file's
    assert torch.equal(trained.conv1.weight, ref.conv1.weight)


def test_threads_building_every_model_first_at_once(tmp_path):
    """A server's threads each making their first model at once import the families side by side; torchvision's
    models imported from two threads made Python fail one with "deadlock detected by _ModuleLock" (three runs
    of three before the fix). A fresh interpreter, since this one has imported them all already."""
    import os
    import subprocess
    import sys

    code = """if True:
        import threading, traceback, zoo
        names = zoo.list_models() * 2
        start, failed = threading.Barrier(len(names)), []
        def build(name):
            start.wait(60)
            try:
                zoo.build(name)
            except Exception:
                failed.append(traceback.format_exc())
        threads = [threading.Thread(target=build, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        print("".join(failed) or "ok")
    """
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "ZOO_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok", out.stdout[-3000:]
