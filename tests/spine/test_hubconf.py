"""hubconf.py: every registered model loads through torch.hub from this checkout (source="local")."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import zoo

ROOT = Path(__file__).resolve().parents[2]


def _entry(name: str) -> str:
    return name.replace("-", "_")


def _hubconf():
    """hubconf.py as torch.hub imports it (torch.hub.list/help only read GitHub repos)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hubconf_under_test", ROOT / "hubconf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_entry_points_are_exactly_the_registered_models():
    module = _hubconf()
    public = sorted(n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_"))
    assert public == sorted(_entry(n) for n in zoo.list_models())
    for name in zoo.list_models():
        assert f"zoo.build({name!r}" in getattr(module, _entry(name)).__doc__


def test_loading_one_model_reads_no_other_models_card(monkeypatch):
    """Before: importing hubconf.py read every model's card (zoo.model_info), which imports each family: loading
    resnet18 through torch.hub failed where seq2seq's tokenizers or scipy was not installed."""
    def no_card(name):
        raise ModuleNotFoundError("No module named 'tokenizers'")

    monkeypatch.setattr(zoo, "model_info", no_card)
    module = _hubconf()
    assert type(module.resnet18(num_classes=3)) is type(zoo.build("resnet18"))
    monkeypatch.undo()
    assert "ResNet" in module.resnet18.__doc__ or "resnet18" in module.resnet18.__doc__


@pytest.mark.parametrize("name", zoo.list_models())
def test_every_registered_model_has_an_identifier_safe_entry_point(name):
    entry = _entry(name)
    assert entry.isidentifier()
    obj = torch.hub.load(str(ROOT), entry, source="local", trust_repo=True)
    assert type(obj) is type(zoo.build(name))


def test_resnet18_with_cifar10_weights_through_torch_hub(monkeypatch):
    monkeypatch.setenv("ZOO_OFFLINE", "1")  # the file comes from the checkout's weights/
    model = torch.hub.load(str(ROOT), "resnet18", weights="cifar10", source="local", trust_repo=True)
    reference = zoo.build("resnet18", weights="cifar10")
    assert model.fc.out_features == 10
    for a, b in zip(model.state_dict().values(), reference.state_dict().values()):
        assert torch.equal(a, b)


def test_td3_with_weights_and_config_through_torch_hub(monkeypatch):
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    agent = torch.hub.load(str(ROOT), "td3", weights="pendulum-v1", source="local", trust_repo=True)
    assert agent.env_id == "Pendulum-v1"
