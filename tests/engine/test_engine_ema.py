"""``ema_decay``: an exponential moving average of the weights, scored by validation and kept at the end."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.engine import LambdaCallback, evaluate, fit, load_checkpoint
from zoo.engine.checkpoint import CheckpointError


def data(n: int = 64, seed: int = 0) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def test_the_model_ends_holding_the_average_of_the_weights_after_each_step(tmp_path):
    decay, raw = 0.8, []
    keep = LambdaCallback(on_batch_end=lambda state, logs: raw.append(
        {k: v.detach().clone().float() for k, v in state.model.state_dict().items()}))
    r = fit(net(), data(), data(32, 1), epochs=3, batch_size=16, lr=0.05, ema_decay=decay, progress=False,
            callbacks=[keep], checkpoint_dir=tmp_path)
    assert len(raw) == 12  # 4 steps x 3 epochs
    # bias-corrected: sum_k (1 - d) d^(n - k) w_k / (1 - d^n) over the steps k = 1..n, written out
    n = len(raw)
    want = {k: sum((1 - decay) * decay ** (n - i) * w[k] for i, w in enumerate(raw, 1)) / (1 - decay ** n)
            for k in raw[0]}
    got = r.model.state_dict()
    for k, v in want.items():
        if k.endswith("num_batches_tracked"):
            continue
        torch.testing.assert_close(got[k].float(), v, rtol=1e-5, atol=1e-6, msg=k)
    assert not torch.allclose(raw[-1]["0.weight"], got["0.weight"])  # the average, not the last step
    plain = dict(raw[0])  # AveragedModel's plain EMA (first step copied) would weigh the first step d^(n-1)
    for w in raw[1:]:
        plain = {k: decay * plain[k] + (1 - decay) * w[k] for k in plain}
    assert not torch.allclose(plain["0.weight"], got["0.weight"], rtol=1e-3, atol=1e-4)
    # validation scored the average: the last epoch's val_loss is the returned model's
    assert r.history[-1]["val_loss"] == pytest.approx(evaluate(r.model, data(32, 1), batch_size=16)["loss"], rel=1e-5)
    # the checkpoint keeps the raw weights (to resume exactly) and the average beside them
    ckpt = load_checkpoint(r.checkpoint_path)
    torch.testing.assert_close(ckpt["model"]["0.weight"], raw[-1]["0.weight"])
    torch.testing.assert_close(ckpt["extra"]["ema"]["module.0.weight"], got["0.weight"])
    # use_ema=True loads the average (what the run returned), weights and BatchNorm statistics
    fresh = net()
    load_checkpoint(r.checkpoint_path, fresh, use_ema=True)
    for k, v in got.items():
        assert torch.equal(fresh.state_dict()[k], v), k
    with pytest.raises(ValueError, match="resume continues from the raw weights"):
        load_checkpoint(r.checkpoint_path, fresh, torch.optim.SGD(fresh.parameters(), lr=0.1), use_ema=True)


def test_use_ema_on_a_checkpoint_without_an_average_says_so(tmp_path):
    r = fit(net(), data(), epochs=1, batch_size=16, progress=False, checkpoint_dir=tmp_path)
    with pytest.raises(CheckpointError, match="holds no weight average.*use_ema=False"):
        load_checkpoint(r.checkpoint_path, net(), use_ema=True)


def test_without_ema_the_model_ends_at_its_last_step():
    raw = []
    keep = LambdaCallback(on_batch_end=lambda state, logs: raw.append(state.model[0].weight.detach().clone()))
    r = fit(net(), data(), epochs=1, batch_size=16, progress=False, callbacks=[keep])
    assert torch.equal(r.model[0].weight, raw[-1])


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1])
def test_ema_decay_outside_zero_one_is_refused(bad):
    with pytest.raises(ValueError, match=r"ema_decay must be in \(0, 1\)"):
        fit(net(), data(), epochs=1, ema_decay=bad, progress=False)


def test_a_compiled_models_average_resumes_on_the_plain_network(tmp_path):
    """With ema_decay the average was a copy of the torch.compile wrapper: the checkpoint's average held
    'module._orig_mod.' keys and a resume on the plain network failed in AveragedModel.load_state_dict."""
    opts = {"ema_decay": 0.9, "checkpoint_dir": str(tmp_path), "batch_size": 16, "amp": None, "progress": False}
    torch.manual_seed(0)
    compiled = torch.compile(net(), backend="eager")
    fit(compiled, data(), epochs=1, **opts)
    ema = load_checkpoint(tmp_path / "epoch-0001.pt")["extra"]["ema"]
    assert not any("_orig_mod" in k for k in ema)
    plain = net()
    result = fit(plain, data(), epochs=2, resume=True, **opts)
    assert result.resumed is not None and len(result.history) == 2


@pytest.mark.parametrize("prefix", ["module._orig_mod.", "module.module.", "module.module._orig_mod."])
def test_an_average_written_from_a_wrapped_model_loads_into_the_average_of_the_network(prefix):
    """Averages written before they copied the network inside its wrapper hold the wrapper's prefixes; the
    torch.compile one was handled, and a DataParallel model's average no longer resumed."""
    from zoo.engine.ema import averaged_model, load_average

    src = averaged_model(net(), 0.9)
    state = {(prefix + k[len("module."):] if k.startswith("module.") else k): v.clone()
             for k, v in src.state_dict().items()}
    dst = averaged_model(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)), 0.9)
    load_average(dst, state)
    assert all(torch.equal(a, b) for a, b in zip(dst.state_dict().values(), src.state_dict().values()))


def test_building_from_the_best_checkpoint_of_an_ema_run_gives_the_average_it_scored(tmp_path):
    """Before: zoo.build(weights=best.pt) and zoo.hub.load_state_dict(best.pt) gave the raw weights of a run with
    ema_decay, while best.pt was chosen by the average's val_loss (1.136 scored, 3.474 loaded back)."""
    import zoo
    from zoo.hub import load_state_dict

    val = (torch.randn(4, 3, 16, 16), torch.tensor([0, 1] * 2))
    r = zoo.train(zoo.build("resnet18", num_classes=2, stem="cifar"), ((torch.randn(8, 3, 16, 16),
                  torch.tensor([0, 1] * 4)), val), epochs=2, batch_size=4, lr=0.05, ema_decay=0.5,
                  checkpoint_dir=tmp_path, amp=None, progress=False)
    back = zoo.build("resnet18", weights=r.checkpoint_path)
    assert zoo.evaluate(back, val, amp=None)["loss"] == pytest.approx(r.best_metric, rel=1e-5)
    ckpt = load_checkpoint(r.checkpoint_path)
    assert load_state_dict(r.checkpoint_path)["fc.weight"].equal(ckpt["extra"]["ema"]["module.fc.weight"])
    assert not ckpt["model"]["fc.weight"].equal(ckpt["extra"]["ema"]["module.fc.weight"])
