"""zoo.rl.flat: FlatAdam keeps its moments out of the denormal range (Intel CPUs run an Adam step over
denormal moments 10-20x slower) without changing a single parameter against torch's own Adam."""

import copy

import torch
from torch import nn

from zoo.engine.denormals import MOMENT_FLOORS
from zoo.rl.flat import FlatAdam, FlatParams

TINY = torch.finfo(torch.float32).tiny  # the smallest normal fp32; below it (and above 0): denormal


def _denormals(t: torch.Tensor) -> int:
    return int(((t != 0) & (t.abs() < TINY)).sum())


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))


def test_moments_of_weights_whose_gradient_stays_zero_never_turn_denormal_and_parameters_match_torch_adam():
    ours, ref = _net(), _net()
    ref.load_state_dict(ours.state_dict())
    flat = FlatParams(ours)
    adam = FlatAdam(torch.optim.Adam(ours.parameters(), lr=1e-3, fused=True), flat)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-3, fused=True)
    gen = torch.Generator().manual_seed(1)
    dead = torch.zeros(flat.grad.numel(), dtype=torch.bool)
    dead[: flat.grad.numel() // 3] = True  # a third of the weights: "dead ReLU units" after step 50
    steps = 1100  # exp_avg (x0.9 a step) of a 1e-3 gradient is denormal from ~800 steps on until ~950
    ref_denormals = ours_denormals = 0
    for step in range(steps):
        g = torch.randn(flat.grad.numel(), generator=gen) * 1e-3
        if step >= 50:
            g[dead] = 0.0
        flat.grad.copy_(g)
        adam.step()
        off = 0
        for p in ref.parameters():
            p.grad = g[off:off + p.numel()].view_as(p).clone()
            off += p.numel()
        ref_opt.step()
        ref_denormals += sum(_denormals(ref_opt.state[p]["exp_avg"]) for p in ref.parameters())
        ours_denormals += _denormals(adam.exp_avg) + _denormals(adam.exp_avg_sq)
    ref_m = torch.cat([ref_opt.state[p]["exp_avg"].flatten() for p in ref.parameters()])
    ref_v = torch.cat([ref_opt.state[p]["exp_avg_sq"].flatten() for p in ref.parameters()])
    assert ref_denormals > 0  # torch's Adam does produce them here: the test would see ours
    assert ours_denormals == 0
    # every parameter bit for bit, every moment torch keeps above the flush thresholds too
    assert torch.equal(flat.master, torch.cat([p.detach().flatten() for p in ref.parameters()]))
    big_m, big_v = ref_m.abs() > MOMENT_FLOORS["exp_avg"], ref_v.abs() > MOMENT_FLOORS["exp_avg_sq"]
    assert torch.equal(adam.exp_avg[big_m], ref_m[big_m]) and torch.equal(adam.exp_avg_sq[big_v], ref_v[big_v])
    assert torch.all(adam.exp_avg[~big_m].abs() <= MOMENT_FLOORS["exp_avg"])


def test_the_flush_depends_only_on_the_step_count_so_a_resumed_optimizer_flushes_on_the_same_steps():
    a_net = _net()
    a = FlatAdam(torch.optim.Adam(a_net.parameters(), lr=1e-3, fused=True), FlatParams(a_net))
    gen = torch.Generator().manual_seed(2)
    # three tiny gradients, then none: exp_avg ~3e-28 falls below the flush threshold (1e-30) from ~step 55
    # on, so the flush at step 64 zeroes it; a flush counted from the resume (step 10) would not come
    # before step 74, and the moments would differ at step 70
    grads = [torch.randn(a.flat.grad.numel(), generator=gen) * 1e-27 for _ in range(3)]
    grads += [torch.zeros_like(grads[0])] * 67
    resume_at = 10
    for g in grads[:resume_at]:
        a.flat.grad.copy_(g)
        a.step()
    b_net = _net()
    b_opt = torch.optim.Adam(b_net.parameters(), lr=1e-3, fused=True)
    b_net.load_state_dict(a_net.state_dict())
    b_opt.load_state_dict(copy.deepcopy(a.opt.state_dict()))
    b = FlatAdam(b_opt, FlatParams(b_net))
    for g in grads[resume_at:]:
        for opt in (a, b):
            opt.flat.grad.copy_(g)
            opt.step()
    assert int(b.step_t) == int(a.step_t) == b.steps == a.steps == len(grads)  # the host's count follows
    assert b.step_t.device == b.flat.master.device  # where a fused kernel reads it (on a GPU too)
    assert (a.exp_avg == 0).float().mean() > 0.5  # the flush at step 64 did zero most moments
    assert torch.equal(a.exp_avg, b.exp_avg) and torch.equal(a.exp_avg_sq, b.exp_avg_sq)
    assert torch.equal(a.flat.master, b.flat.master)
