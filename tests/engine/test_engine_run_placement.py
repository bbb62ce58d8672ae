"""Where and in what precision the engine runs when the caller does not say: the model's own device, and on a
resume the precision the checkpointed run trained in."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

import pytest
import torch
from torch import nn

from zoo.engine import evaluation, fit, trainer
from zoo.engine.devices import model_device
from zoo.engine.evaluation import evaluate
from zoo.engine.precision import cpu_features
from zoo.engine.resume import ResumeError

fit_mod = importlib.import_module("zoo.engine.fit")  # the module (zoo.engine.fit is also the function)


def _data(n: int = 32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return x, (x[:, 0] > 0).long()


class DtypeProbe(nn.Module):
    """Records the dtype its layer computes in (bf16 under autocast, else fp32)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Linear(4, 2)
        self.seen: list[torch.dtype] = []

    def forward(self, x):
        out = self.net(x)
        self.seen.append(out.dtype)
        return out


def test_model_device_is_where_its_parameters_are():
    assert model_device(nn.Linear(2, 2, device="meta")) == torch.device("meta")
    assert model_device(nn.Linear(2, 2)) == torch.device("cpu")
    assert model_device(nn.ReLU()) == torch.device("cpu")  # nothing to go by: the CPU
    bn = nn.BatchNorm1d(2, affine=False, device="meta")  # buffers only
    assert model_device(bn) == torch.device("meta")


def test_evaluate_runs_where_the_model_is_and_does_not_move_it(monkeypatch):
    """A model on a GPU (here: on 'meta', which this CPU machine has) is scored there; the default used to be
    'cpu', which moved a CUDA model to the CPU and left it there."""
    seen = {}
    monkeypatch.setattr(evaluation, "evaluate_loader", lambda model, loader, **kw: seen.update(kw) or {"loss": 0.0})
    monkeypatch.setattr(evaluation, "run_device", model_device)  # 'meta' stands in for a GPU: its refusal aside
    model = nn.Linear(4, 2, device="meta")
    monkeypatch.setattr(model, "to", lambda *a, **k: (_ for _ in ()).throw(AssertionError("moved")))
    evaluate(model, _data())
    assert seen["device"] == torch.device("meta")


def test_evaluate_moves_the_model_when_told_to(monkeypatch):
    model = nn.Linear(4, 2)
    moved = []
    monkeypatch.setattr(model, "to", lambda *a, **k: moved.append(a) or model)
    assert set(evaluate(model, _data(), device="cpu", amp=None)) == {"loss", "accuracy"}
    assert moved == []  # already there
    seen = {}
    monkeypatch.setattr(evaluation, "evaluate_loader", lambda model, loader, **kw: seen.update(kw) or {})
    evaluate(model, _data(), device="meta")
    assert moved == [(torch.device("meta"),)] and seen["device"] == torch.device("meta")


def test_fit_trains_where_the_model_is(monkeypatch):
    got = {}

    class Recorder:
        def __init__(self, model, train_data, val_data, cfg, callbacks, info, dev):
            got.update(dev=dev, recorded=cfg.recorded()["device"])

        def run(self):
            return "ran"

    monkeypatch.setattr(fit_mod, "Trainer", Recorder)
    monkeypatch.setattr(fit_mod, "run_device", model_device)  # 'meta' stands in for a GPU: its refusal aside
    assert fit(nn.Linear(4, 2, device="meta"), _data()) == "ran"
    assert got == {"dev": torch.device("meta"), "recorded": "meta"}
    fit(nn.Linear(4, 2), _data(), device="meta")  # a device given wins
    assert got["dev"] == torch.device("meta")
    fit(nn.Linear(4, 2), _data())
    assert got == {"dev": torch.device("cpu"), "recorded": "cpu"}  # as before for a model on the CPU


def test_a_resume_keeps_the_precision_the_run_was_trained_in(tmp_path, monkeypatch, caplog):
    """amp="auto" is decided on the machine; a resumed run must not switch precision because the process that
    resumes decides otherwise (another machine state, or an old decision re-measured)."""
    first = DtypeProbe()
    fit(first, _data(), epochs=1, batch_size=16, checkpoint_dir=tmp_path, progress=False)
    recorded = torch.load(tmp_path / "epoch-0001.pt", weights_only=True)["extra"]["precision"]
    assert recorded == {"amp": "bf16" if torch.bfloat16 in first.seen else "fp32", "device": "cpu",
                        "cpu_kind": cpu_features().kind}
    flipped = None if recorded["amp"] == "bf16" else "bf16"
    monkeypatch.setattr(trainer, "check_amp", lambda *a, **k: flipped)  # this process would now choose otherwise
    again = DtypeProbe()
    with caplog.at_level(logging.INFO, logger="zoo"):
        result = fit(again, _data(), epochs=2, batch_size=16, checkpoint_dir=tmp_path, resume=True, progress=False)
    want = torch.bfloat16 if recorded["amp"] == "bf16" else torch.float32
    assert set(again.seen) == {want}
    assert f"amp='auto' keeps {recorded['amp']}" in caplog.text
    assert isinstance(result.resumed["checkpoint"], Path) and isinstance(result.checkpoint_path, Path)
    ckpt = torch.load(tmp_path / "epoch-0002.pt", weights_only=True)
    assert ckpt["extra"]["precision"]["amp"] == recorded["amp"]  # and the next resume keeps it too


def test_an_explicit_amp_on_resume_is_what_runs(tmp_path, monkeypatch):
    fit(DtypeProbe(), _data(), epochs=1, batch_size=16, amp=None, checkpoint_dir=tmp_path, progress=False)
    again = DtypeProbe()
    fit(again, _data(), epochs=2, batch_size=16, amp=None, checkpoint_dir=tmp_path, resume=True, progress=False)
    assert set(again.seen) == {torch.float32}


def test_a_model_on_the_meta_device_is_refused_before_it_runs(tmp_path):
    with torch.device("meta"):
        model = nn.Linear(4, 2)
    for run in (lambda: evaluate(model, _data(), progress=False),
                lambda: fit(model, _data(), epochs=1, checkpoint_dir=tmp_path, progress=False)):
        with pytest.raises(ValueError, match=r"Linear is on the 'meta' device.*to_empty"):
            run()  # was "Tensor.item() cannot be called on meta tensors", after a whole epoch on meta
    assert not list(tmp_path.iterdir())  # refused before the run made anything


def test_a_run_started_with_amp_fp32_resumes_with_amp_none(tmp_path):
    fit(nn.Linear(4, 2), _data(), epochs=1, batch_size=16, amp="fp32", checkpoint_dir=tmp_path, progress=False)
    result = fit(nn.Linear(4, 2), _data(), epochs=2, batch_size=16, amp=None, checkpoint_dir=tmp_path,
                 resume=True, progress=False)  # one precision, two spellings: was a ResumeError
    assert "amp" not in result.resumed["changed"] and len(result.history) == 2
    with pytest.raises(ResumeError, match="amp: None in epoch-0002.pt, 'bf16' now"):
        fit(nn.Linear(4, 2), _data(), epochs=3, batch_size=16, amp="bf16", checkpoint_dir=tmp_path, resume=True,
            progress=False)  # another precision is still refused


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))])
def test_batches_are_page_locked_for_a_gpu_only(device, monkeypatch):
    """fit and evaluate pin their loaders' memory on CUDA (move_batch's non_blocking copies overlap only from
    pinned memory); on a CPU pinning would only cost (and warn on a machine without an accelerator)."""
    seen = []
    for module in (trainer, evaluation):
        real = module.prepare_loader
        monkeypatch.setattr(module, "prepare_loader",
                            lambda *a, real=real, **k: seen.append(k.get("pin_memory")) or real(*a, **k))
    net = nn.Linear(4, 2)
    fit(net, _data(), val_data=_data(8), epochs=1, device=device, progress=False)
    evaluate(net, _data(8))
    assert seen == [device == "cuda"] * 3
