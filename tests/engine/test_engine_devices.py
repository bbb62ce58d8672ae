"""One reading of a ``device=`` argument (zoo.engine.devices.usable_device): a name torch does not know, or a
device this machine lacks, is refused with one message that says what the machine has."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.engine import evaluate, fit
from zoo.engine.devices import usable_device


def _data(n: int = 8):
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(0))
    return x, (x[:, 0] > 0).long()


@pytest.fixture
def one_gpu(monkeypatch):
    """A machine with one CUDA device, as far as the check can tell (nothing here touches a real GPU)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.mark.parametrize("device", ["cpu", "cpu:0", torch.device("cpu"), "meta"])
def test_devices_this_machine_has_pass_as_torch_devices(device, no_gpu):
    assert usable_device(device) == torch.device(device)


def test_auto_is_the_gpu_where_there_is_one_else_the_cpu(monkeypatch):
    """Stable-Baselines3's default, device="auto", which its users bring to zoo.build("td3", ...)."""
    import zoo

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert usable_device("auto") == torch.device("cpu")
    agent = zoo.build("td3", device="auto", net_arch=(8, 8), buffer_size=100, learning_starts=10, batch_size=4)
    assert agent.device == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert usable_device("auto") == torch.device("cuda")


@pytest.mark.parametrize("device", ["cuda", "cuda:3", torch.device("cuda", 1), 0])
def test_cuda_without_a_gpu_is_refused_saying_so(device, no_gpu):
    shown = device if isinstance(device, str) else str(torch.device(device))
    with pytest.raises(RuntimeError, match=rf"device '{shown}' is not available: torch .* finds no CUDA GPU on "
                                           r"this machine; leave device out to run on the CPU"):
        usable_device(device)


def test_a_cuda_index_past_the_last_gpu_names_the_ones_there_are(one_gpu):
    assert usable_device("cuda") == torch.device("cuda") and usable_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(RuntimeError, match=r"device 'cuda:3' is not available: this machine has 1 CUDA device "
                                           r"\(cuda:0\); pass one of those"):
        usable_device("cuda:3")


def test_mps_on_a_machine_without_it_is_refused(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="device 'mps' is not available: this machine has no MPS device; "
                                           "leave --device out"):
        usable_device("mps", name="--device")


@pytest.mark.parametrize("device", ["gpu", "cuda:x", ""])
def test_a_name_torch_does_not_know_is_refused_with_the_names_it_takes(device):
    with pytest.raises(RuntimeError, match=rf"^'{device}' is not a device: expected auto, cpu, cuda, cuda:1, mps"):
        usable_device(device)


@pytest.mark.parametrize("device", [1.5, True, ["cpu"]])
def test_what_is_no_device_at_all_is_a_type_error(device):
    with pytest.raises(TypeError, match="device must be a device name .*, a torch.device or a CUDA index; got"):
        usable_device(device)


def test_fit_and_evaluate_refuse_a_gpu_past_the_last_before_any_work(one_gpu, tmp_path):
    """torch's own "invalid device ordinal" (or "Found no NVIDIA driver") came from the first tensor moved
    there; the check asked only whether CUDA was there at all."""
    said = r"device 'cuda:3' is not available: this machine has 1 CUDA device \(cuda:0\)"
    with pytest.raises(RuntimeError, match=said):
        fit(nn.Linear(4, 2), _data(), epochs=1, device="cuda:3", checkpoint_dir=tmp_path / "run", progress=False)
    with pytest.raises(RuntimeError, match=said):
        evaluate(nn.Linear(4, 2), _data(), device="cuda:3")
    assert not (tmp_path / "run").exists()


def test_fit_and_evaluate_refuse_a_device_name_torch_does_not_know(tmp_path):
    for run in (lambda: fit(nn.Linear(4, 2), _data(), epochs=1, device="gpu", progress=False),
                lambda: evaluate(nn.Linear(4, 2), _data(), device="gpu")):
        with pytest.raises(RuntimeError, match="'gpu' is not a device: expected auto, cpu, cuda, cuda:1"):
            run()


def test_a_familys_predict_placement_refuses_before_moving_the_model(one_gpu):
    """inference_placement (vision, video and seq2seq predict): the model stays where it is."""
    from zoo.engine.devices import inference_placement

    model = nn.Linear(4, 2)
    with pytest.raises(RuntimeError, match=r"device 'cuda:3' is not available: this machine has 1 CUDA device"):
        inference_placement(model, "cuda:3", None)
    with pytest.raises(RuntimeError, match="'gpu' is not a device: expected auto, cpu, cuda, cuda:1"):
        inference_placement(model, "gpu", None)
    assert model.weight.device.type == "cpu"
    assert inference_placement(model, torch.device("cpu"), None) == (torch.device("cpu"), None)


def test_an_accelerator_torch_finds_none_of_is_refused(monkeypatch):
    """device="xpu" on a machine without one came through unchecked, to fail at the first tensor moved there."""
    monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"device 'xpu' is not available: torch .* finds no xpu device"):
        usable_device("xpu")
