"""zoo.engine.denormals: optimizer moments kept out of the denormal range (Intel CPUs compute on denormals many
times slower) without changing a single parameter against torch's own optimizers."""

import copy

import pytest
import torch
from torch import nn

from zoo.engine import fit
from zoo.engine.denormals import FLUSH_EVERY, MOMENT_FLOORS, flush_tiny_moments

TINY = torch.finfo(torch.float32).tiny  # the smallest normal fp32; below it (and above 0): denormal


def _denormals(opt: torch.optim.Optimizer) -> int:
    return sum(int(((t != 0) & (t.abs() < TINY)).sum()) for st in opt.state.values() for k, t in st.items()
               if k in MOMENT_FLOORS)


OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01),
    "adam-foreach": lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=True),
    "adam-fused": lambda ps: torch.optim.Adam(ps, lr=1e-3, fused=True),
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-3, momentum=0.9),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_moments_of_weights_whose_gradient_stops_never_turn_denormal_and_parameters_match_torch(name):
    gen = torch.Generator().manual_seed(0)
    ref = [torch.randn(40, 30, generator=gen).requires_grad_(), torch.randn(30, generator=gen).requires_grad_()]
    ours = [p.detach().clone().requires_grad_() for p in ref]
    ref_opt, our_opt = OPTIMIZERS[name](ref), OPTIMIZERS[name](ours)
    dead = torch.rand(40, 30, generator=gen) < 0.3  # a third of the weights get tiny gradients, then none
    ref_denormals = 0
    for step in range(1, 701):
        g = [torch.randn(40, 30, generator=gen), torch.randn(30, generator=gen)]
        g[0][dead] = 1e-15 if step <= 3 else 0.0
        for params in (ref, ours):
            for p, gi in zip(params, g):
                p.grad = gi.clone()
        ref_opt.step()
        our_opt.step()
        if step % FLUSH_EVERY == 0:
            assert flush_tiny_moments(our_opt) > 0
        ref_denormals += _denormals(ref_opt)
        assert _denormals(our_opt) == 0, f"a denormal moment at step {step}"
    assert ref_denormals > 0  # torch's optimizer does produce them here: the test would see ours
    for p, q in zip(ref, ours):
        assert torch.equal(p, q)  # every parameter bit for bit
    for p, q in zip(ref, ours):
        for key, floor in MOMENT_FLOORS.items():
            if key in ref_opt.state[p]:
                r, o = ref_opt.state[p][key], our_opt.state[q][key]
                big = r.abs() > floor
                assert torch.equal(o[big], r[big]) and torch.all(o[~big].abs() <= floor)


@pytest.mark.parametrize("eps", [1e-8, 1e-12])
def test_a_group_with_an_eps_below_1e9_keeps_its_second_moments(eps):
    p = nn.Parameter(torch.ones(8))
    opt = torch.optim.Adam([p], lr=1e-3, eps=eps)
    p.grad = torch.ones(8)
    opt.step()
    st = opt.state[p]
    st["exp_avg"].fill_(1e-33)
    st["exp_avg_sq"].fill_(1e-37)
    flush_tiny_moments(opt)
    assert torch.all(st["exp_avg"] == 0)
    # sqrt(1e-37) could round into a 1e-12 denominator, not into a 1e-8 one
    assert torch.all(st["exp_avg_sq"] == 1e-37) if eps < 1e-9 else torch.all(st["exp_avg_sq"] == 0)


def _model_and_optimizer():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.ones(1, 4)).sum().backward()
    opt.step()  # state exists; input 3 is zero in every training sample, so its weights' gradient stays zero
    opt.zero_grad()
    opt.state[model.weight]["exp_avg"][:, 3] = 1e-36  # normal now, denormal after ~44 steps at x0.9
    return model, opt


@pytest.mark.parametrize("flush", [True, False])
def test_fit_flushes_tiny_moments_every_32_steps_unless_told_not_to(flush):
    x = torch.randn(96, 4, generator=torch.Generator().manual_seed(1))
    x[:, 3] = 0
    data = torch.utils.data.TensorDataset(x, torch.randint(0, 2, (96,), generator=torch.Generator().manual_seed(2)))
    model, opt = _model_and_optimizer()
    fit(model, data, epochs=1, batch_size=1, optimizer=opt, progress=False, flush_tiny_moments=flush)
    exp_avg = opt.state[model.weight]["exp_avg"][:, 3]
    if flush:
        assert torch.all(exp_avg == 0)
    else:  # torch's AdamW as it is: 1e-36 * 0.9**96 ~ 4e-41, denormal
        assert torch.all((exp_avg > 0) & (exp_avg < TINY))


def test_the_flush_changes_no_parameter_of_a_fit_run():
    x = torch.randn(96, 4, generator=torch.Generator().manual_seed(1))
    x[:, 3] = 0
    data = torch.utils.data.TensorDataset(x, torch.randint(0, 2, (96,), generator=torch.Generator().manual_seed(2)))
    weights = []
    for flush in (True, False):
        model, opt = _model_and_optimizer()
        fit(model, data, epochs=1, batch_size=1, optimizer=opt, progress=False, flush_tiny_moments=flush)
        weights.append(copy.deepcopy(model.state_dict()))
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_a_resumed_run_flushes_on_the_same_steps_as_one_that_ran_through(tmp_path):
    # 20 steps an epoch, 2 epochs: the run that goes through flushes at step 32; one that counted from its
    # resume (step 20) would flush at step 52, after the end, and keep the tiny moments
    x = torch.randn(20, 4, generator=torch.Generator().manual_seed(1))
    x[:, 3] = 0
    data = torch.utils.data.TensorDataset(x, torch.randint(0, 2, (20,), generator=torch.Generator().manual_seed(2)))
    straight, opt = _model_and_optimizer()
    fit(straight, data, epochs=2, batch_size=1, optimizer=opt, progress=False)
    resumed, opt2 = _model_and_optimizer()
    fit(resumed, data, epochs=1, batch_size=1, optimizer=opt2, progress=False, checkpoint_dir=tmp_path)
    resumed, opt2 = _model_and_optimizer()
    fit(resumed, data, epochs=2, batch_size=1, optimizer=opt2, progress=False, checkpoint_dir=tmp_path, resume=True)
    a, b = opt.state[straight.weight], opt2.state[resumed.weight]
    assert torch.all(a["exp_avg"][:, 3] == 0)
    assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])
    assert torch.equal(straight.weight, resumed.weight)


# --- the gradients of the model's outputs -----------------------------------------------------------------


class GradRecordingSGD(torch.optim.SGD):
    """SGD that keeps a copy of every gradient it steps with."""

    def __init__(self, params, **kw):
        super().__init__(params, **kw)
        self.seen: list[torch.Tensor] = []

    def step(self, closure=None):
        self.seen.append(self.param_groups[0]["params"][1].grad.clone())  # the output layer's bias
        return super().step(closure)


@pytest.mark.parametrize("flush", [True, False, None])  # None: fit's default, which does not floor
def test_fit_zeroes_output_gradients_below_the_floor_unless_told_not_to(flush):
    # one sample, logits (0, -57.5, -34.5): the gradient of the cross entropy at the bias is softmax - onehot,
    # (0, 1.1e-25, 1.0e-15) in fp32; the floor (1e-20) zeroes the second entry and keeps the third
    model = nn.Linear(1, 3)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.copy_(torch.tensor([0.0, -57.5, -34.5]))
    opt = GradRecordingSGD(model.parameters(), lr=0.0)
    data = torch.utils.data.TensorDataset(torch.zeros(1, 1), torch.zeros(1, dtype=torch.long))
    told = {} if flush is None else {"flush_tiny_grads": flush}
    fit(model, data, epochs=1, batch_size=1, optimizer=opt, progress=False, amp=None, **told)
    grad = opt.seen[0]
    assert grad[2] == pytest.approx(torch.exp(torch.tensor(-34.5)).item(), rel=1e-3)
    assert (grad[1] == 0) if flush else (grad[1] == pytest.approx(torch.exp(torch.tensor(-57.5)).item(), rel=1e-3))


def test_the_output_gradient_floor_changes_no_parameter_of_a_confident_fit_run():
    # separable data trained to certainty: from the second epoch on the wrong classes' probabilities are far
    # below the floor, and zeroing their gradients leaves every parameter as it was
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 8, generator=g)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    weights, tiny = [], []
    for flush in (True, False):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
        seen = []
        model[2].register_forward_hook(lambda m, i, out, seen=seen: seen.append(out.detach().softmax(1).min().item()))
        fit(model, (x, y), epochs=12, batch_size=16, lr=0.1, progress=False, amp=None, seed=0, flush_tiny_grads=flush)
        weights.append(copy.deepcopy(model.state_dict()))
        tiny.append(min(seen))
    assert tiny[0] < 1e-20  # the floor had work to do
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
