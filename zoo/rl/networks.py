"""TD3's networks: a deterministic tanh actor and twin Q critics evaluated in one batched forward.

The twin critics keep their weights stacked, ``(n_critics, in, out)``, so both run as one
``baddbmm`` per layer instead of two separate MLPs: half the kernel launches and autograd nodes,
which is what dominates an update at these sizes on a CPU.
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Actor", "TwinCritic"]


class Actor(nn.Module):
    """``obs (B, obs_dim) -> action (B, act_dim)`` in [-1, 1] (tanh); the agent rescales to the env's Box."""

    def __init__(self, obs_dim: int, act_dim: int, net_arch: tuple[int, ...] = (400, 300)) -> None:
        super().__init__()
        dims = (obs_dim, *net_arch)
        self.hidden = nn.ModuleList(nn.Linear(i, o) for i, o in itertools.pairwise(dims))
        self.out = nn.Linear(dims[-1], act_dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs
        for layer in self.hidden:
            x = F.relu(layer(x))
        # the output layer may be kept in fp32 when the rest runs in bf16 (see TD3Agent)
        return torch.tanh(self.out(x.to(self.out.weight.dtype)))


class TwinCritic(nn.Module):
    """``n`` independent Q networks ``(obs, act) -> Q`` with stacked weights.

    Parameters ``weight{i}`` are ``(n, in, out)`` and ``bias{i}`` are ``(n, 1, out)``; each critic is
    initialised exactly like an ``nn.Linear`` stack (uniform in +-1/sqrt(fan_in)).
    """

    def __init__(self, obs_dim: int, act_dim: int, net_arch: tuple[int, ...] = (400, 300), n: int = 2) -> None:
        super().__init__()
        self.n = n
        dims = (obs_dim + act_dim, *net_arch, 1)
        self.num_layers = len(dims) - 1
        for i, (fan_in, fan_out) in enumerate(itertools.pairwise(dims)):
            bound = 1.0 / math.sqrt(fan_in)
            w = torch.empty(n, fan_in, fan_out).uniform_(-bound, bound)
            b = torch.empty(n, 1, fan_out).uniform_(-bound, bound)
            self.register_parameter(f"weight{i}", nn.Parameter(w))
            self.register_parameter(f"bias{i}", nn.Parameter(b))

    def _layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(getattr(self, f"weight{i}"), getattr(self, f"bias{i}")) for i in range(self.num_layers)]

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """All critics: ``(B, obs_dim), (B, act_dim) -> (n, B)``."""
        x = torch.cat([obs, act], dim=-1).to(self.weight0.dtype)  # (B, in)
        layers = self._layers()
        w, b = layers[0]
        # the first layer shares its input across critics: one (B, in) @ (in, n*out) matmul
        h = torch.addmm(b.transpose(0, 1).reshape(1, -1), x, w.transpose(0, 1).reshape(w.shape[1], -1))
        h = F.relu(h).view(x.shape[0], self.n, -1).transpose(0, 1)  # (n, B, h1)
        for w, b in layers[1:-1]:
            h = F.relu(torch.baddbmm(b, h, w))  # (n, B, h)
        w, b = layers[-1]
        # the output layer may be fp32 under bf16 (Q values need more than bf16's 8 bits of mantissa)
        return torch.baddbmm(b, h.to(w.dtype), w).squeeze(-1)  # (n, B)

    def q1(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """The first critic only (the actor's objective): ``-> (B,)``."""
        h = torch.cat([obs, act], dim=-1).to(self.weight0.dtype)
        layers = self._layers()
        for w, b in layers[:-1]:
            h = F.relu(torch.addmm(b[0], h, w[0]))
        w, b = layers[-1]
        return torch.addmm(b[0], h.to(w.dtype), w[0]).squeeze(-1)


# --- the update's explicit forward and backward ---------------------------------------------------------
# TD3's update differentiates three fixed MLP expressions; writing their backward out (the same GEMMs
# autograd runs) saves autograd's graph, its per-node bookkeeping and its layout copies, and lets the
# weight gradients land directly in the flat gradient buffer (zoo.rl.flat). ``w`` / ``g`` map the
# modules' parameter names to the compute views of the weights / their gradients. Each layer runs in
# its weight's dtype (bf16 only for the large hidden-to-hidden layers, see ``lowp_layers``): its input
# is cast to it, and ``ins`` keeps what each GEMM read, ``outs`` each ReLU output (the backward's mask).
# ReLUs and their masks are fp32 (``_relu``): elementwise bf16 ops cost twice fp32 ones on CPU.


def lowp_layers(dims: tuple[int, ...], min_width: int = 64) -> list[bool]:
    """Which layers of an MLP with widths ``dims`` run in bf16: those with both widths >= ``min_width``.
    A GEMM with a handful of inputs or outputs (the observation layer, the one-unit Q head) is 3-4x
    *slower* in bf16 than in fp32 on CPU (oneDNN's bf16 path has a fixed cost; measured 72 vs 26 us
    for 256x4 @ 4x400), and elementwise bf16 ops are 2x slower than fp32, so everything else stays fp32."""
    return [min(i, o) >= min_width for i, o in itertools.pairwise(dims)]


def _cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x if x.dtype == dtype else x.to(dtype)


def _relu(z: torch.Tensor) -> torch.Tensor:
    return _cast(z, torch.float32).relu_()


def _relu_grad(dh: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.threshold_backward(_cast(dh, out.dtype), out, 0)


def actor_forward(w: dict[str, torch.Tensor], obs: torch.Tensor, n_hidden: int) -> tuple[torch.Tensor, tuple]:
    """``obs (B, obs_dim)`` -> ``(a (B, act_dim), (ins, outs))``."""
    ins, outs = [], []
    h = obs
    for i in range(n_hidden):
        W = w[f"hidden.{i}.weight"]
        x = _cast(h, W.dtype)
        h = _relu(torch.addmm(w[f"hidden.{i}.bias"], x, W.t()))
        ins.append(x)
        outs.append(h)
    W = w["out.weight"]
    x = _cast(h, W.dtype)
    ins.append(x)
    return torch.addmm(w["out.bias"], x, W.t()).tanh_(), (ins, outs)


_NARROW = 16
"""A weight gradient ``dz^T @ x`` with fewer input columns than this is computed as ``(x^T @ dz)^T``: MKL
runs ``(400, 256) @ (256, 3)`` at 7 GFLOP/s (93 us, AMD Zen 5, 1 thread), its transpose in 14 us."""


MAX_LIVE_FRACTION = 0.65
"""With ``TD3Config.skip_silent_units`` the backward multiplies only the units of a hidden layer that some row
of the batch activates once at most this fraction of them does (see :func:`live_units`). Above it the gathers
cost more than the products save: the critics' backward of a 400x300 layer on an AMD Zen 3 (2026-12-06,
ad-hoc script, medians of 15 paired samples) took 1.07x the dense time with 80 % of the units live and 0.89x
with 70 % at 1 thread; 1.05x with 70 % and 0.93x with 60 % at 2 threads."""


def live_units(out: torch.Tensor, W: torch.Tensor, max_live: float) -> torch.Tensor | None:
    """``(h,)`` or ``(n, a)`` unit indices: for a ReLU output ``out (B, h)`` (or ``(n, B, h)``, one network
    per leading index) the units that are non-zero in some row of the batch, or None where the dense backward
    is the one to run: where more than the fraction ``max_live`` of them are live (``max_live=0``: always
    dense). For ``(n, B, h)`` each row of the answer holds that network's units, padded with some of its
    silent ones to the longest row, so that the networks still multiply as one batch.

    A unit that is zero in every row passes no gradient: its column of ``dz`` is exactly zero, and so are its
    row of the weight gradient and its share of ``dh``. On Pendulum half of the critics' second hidden layer
    and 60 % of the actor's are such units within 2,000 updates (and stay so), so the backward's two big
    products per layer can skip them: the same gradients (up to the order of the sums), at about half the
    arithmetic. Only for fp32 weights on the CPU: bf16 products (AMX) and GPU kernels are fast enough that the
    gathers would cost more than they save, and choosing the units reads their count on the host."""
    if max_live <= 0 or W.dtype != torch.float32 or out.device.type != "cpu":
        return None
    live = out.amax(dim=-2) > 0  # (h,) or (n, h)
    most = int(live.sum(dim=-1).max())
    if most > max_live * out.shape[-1]:
        return None
    if live.dim() == 1:
        return live.nonzero().squeeze(1)
    return torch.argsort(~live, dim=-1, stable=True)[:, :most]  # each row: its live units first


def _live_backward(x: torch.Tensor, dz: torch.Tensor, W: torch.Tensor, gW: torch.Tensor,
                   live: torch.Tensor) -> torch.Tensor:
    """A layer's weight gradient and input gradient over its ``live`` units only, for ``W`` and ``gW`` laid
    out ``(out, in)`` (a Linear's): ``gW`` gets ``dz^T @ x`` in those rows and
    zeros elsewhere; returns ``dz @ W`` (B, in)."""
    d = dz.index_select(1, live)  # (B, a)
    gW.zero_()
    gW.index_copy_(0, live, d.t() @ x)  # (a, in)
    return d @ W.index_select(0, live)


def _live_backward_stacked(x: torch.Tensor, dz: torch.Tensor, W: torch.Tensor, gW: torch.Tensor,
                           live: torch.Tensor) -> torch.Tensor:
    """:func:`_live_backward` for ``n`` stacked networks, ``x (n, B, in)``, ``dz (n, B, out)``, ``W`` and
    ``gW`` ``(n, in, out)``, ``live (n, a)``: the products stay batched, as the dense backward's are."""
    n, batch, a = dz.shape[0], dz.shape[1], live.shape[1]
    d = torch.empty(n, batch, a, dtype=dz.dtype, device=dz.device)
    w_live = torch.empty(n, a, W.shape[1], dtype=W.dtype, device=W.device)
    for i in range(n):
        torch.index_select(dz[i], 1, live[i], out=d[i])
        torch.index_select(W[i].t(), 0, live[i], out=w_live[i])
    rows = torch.bmm(d.transpose(1, 2), x)  # (n, a, in)
    gW.zero_()
    for i in range(n):
        gW[i].t().index_copy_(0, live[i], rows[i])
    return torch.bmm(d, w_live)  # (n, B, in)


def actor_backward(w, g, saved: tuple, a: torch.Tensor, da: torch.Tensor, n_hidden: int,
                   max_live: float = 0.0) -> None:
    """Write ``dL/dparams`` into ``g`` given ``da = dL/da``, for ``a, saved = actor_forward(...)``; over the live
    units only where at most ``max_live`` of a layer's are (:func:`live_units`)."""
    ins, outs = saved
    W = w["out.weight"]
    dz = _cast(da * (1.0 - a * a), W.dtype)  # through tanh
    torch.mm(dz.t(), ins[-1], out=g["out.weight"])
    torch.sum(dz, 0, out=g["out.bias"])
    dh = dz @ W  # (B, h_n)
    for i in reversed(range(n_hidden)):
        W = w[f"hidden.{i}.weight"]  # (out, in)
        dz = _cast(_relu_grad(dh, outs[i]), W.dtype)
        torch.sum(dz, 0, out=g[f"hidden.{i}.bias"])
        live = live_units(outs[i], W, max_live) if i else None
        if live is not None:
            dh = _live_backward(ins[i], dz, W, g[f"hidden.{i}.weight"], live)
            continue
        if ins[i].shape[1] < _NARROW:  # the observation layer: (out, B) @ (B, obs_dim) is a skinny GEMM
            g[f"hidden.{i}.weight"].copy_(torch.mm(ins[i].t(), dz).t())
        else:
            torch.mm(dz.t(), ins[i], out=g[f"hidden.{i}.weight"])
        if i:
            dh = dz @ W


def critic_forward(w: dict[str, torch.Tensor], x: torch.Tensor, num_layers: int) -> tuple[torch.Tensor, tuple]:
    """All critics on ``x (B, in)``: ``-> (q (n, B), (ins, outs))`` with activations ``(n, B, h)``."""
    W = w["weight0"]
    n = W.shape[0]
    x = _cast(x, W.dtype)
    h = torch.empty(n, x.shape[0], W.shape[2], dtype=W.dtype, device=x.device)
    for i in range(n):  # the input is shared: no need to expand it for a batched product
        torch.addmm(w[f"bias0.{i}"], x, w[f"weight0.{i}"], out=h[i])
    h = _relu(h)
    ins, outs = [x], [h]
    for k in range(1, num_layers):
        W = w[f"weight{k}"]
        inp = _cast(h, W.dtype)
        ins.append(inp)
        if W.shape[2] == 1:  # the Q head: one matrix-vector product per critic (see _gemv_head)
            return _gemv_head(w, k, inp), (ins, outs)
        h = torch.baddbmm(w[f"bias{k}"], inp, W)
        if k < num_layers - 1:
            h = _relu(h)
            outs.append(h)
    return h.squeeze(-1), (ins, outs)


def _gemv_head(w: dict[str, torch.Tensor], k: int, inp: torch.Tensor) -> torch.Tensor:
    """``inp (n, B, h) @ weight{k} (n, h, 1) + bias{k}`` -> ``(n, B)`` as ``n`` matrix-vector products: a
    batched GEMM with one output column runs at 3 GFLOP/s in MKL (122 us for 2x256x300 on an AMD Zen 5,
    1 thread) against 16 us for two ``addmv``."""
    n, batch = inp.shape[0], inp.shape[1]
    q = torch.empty(n, batch, dtype=inp.dtype, device=inp.device)
    for i in range(n):
        torch.addmv(w[f"bias{k}.{i}"].view(1), inp[i], w[f"weight{k}.{i}"].view(-1), out=q[i])
    return q


def critic_backward(w, g, saved: tuple, dq: torch.Tensor, num_layers: int, max_live: float = 0.0) -> None:
    """Write ``dL/dparams`` of every critic into ``g`` given ``dq = dL/dq (n, B)`` (``max_live``: as
    :func:`actor_backward`'s)."""
    ins, outs = saved
    last = num_layers - 1
    W = w[f"weight{last}"]
    dz = _cast(dq, W.dtype).unsqueeze(-1)  # (n, B, 1)
    # (n, h, 1) and (n, 1, h) share one memory layout: the one-row product dz^T @ ins (9 us) writes the
    # gradient that ins^T @ dz, a one-column batched GEMM, takes 120 us to (2x256x300, Zen 5, 1 thread)
    gw = g[f"weight{last}"]
    torch.bmm(dz.transpose(1, 2), ins[last], out=gw.view(gw.shape[0], 1, gw.shape[1]))
    torch.sum(dz, 1, keepdim=True, out=g[f"bias{last}"])
    dh = dz * W.transpose(1, 2)  # (n, B, h_last): an outer product, (n, B, 1) x (n, 1, h_last)
    for k in reversed(range(last)):
        W = w[f"weight{k}"]
        dz = _cast(_relu_grad(dh, outs[k]), W.dtype)
        torch.sum(dz, 1, keepdim=True, out=g[f"bias{k}"])
        live = live_units(outs[k], W, max_live) if k else None
        if live is not None:
            dh = _live_backward_stacked(ins[k], dz, W, g[f"weight{k}"], live)
        elif k:
            torch.bmm(ins[k].transpose(1, 2), dz, out=g[f"weight{k}"])
            dh = torch.bmm(dz, W.transpose(1, 2))
        else:
            for i in range(dz.shape[0]):
                torch.mm(ins[0].t(), dz[i], out=g[f"weight0.{i}"])


def q1_forward(w: dict[str, torch.Tensor], x: torch.Tensor, num_layers: int) -> tuple[torch.Tensor, list]:
    """The first critic only: ``x (B, in) -> (q1 (B,), [relu outputs])``."""
    h = x
    outs = []
    for k in range(num_layers):
        W = w[f"weight{k}.0"]
        h = torch.addmm(w[f"bias{k}.0"], _cast(h, W.dtype), W)
        if k < num_layers - 1:
            h = _relu(h)
            outs.append(h)
    return h.squeeze(-1), outs


def q1_input_grad(w, outs: list[torch.Tensor], dq1: torch.Tensor, num_layers: int,
                  max_live: float = 0.0) -> torch.Tensor:
    """``dL/dx (B, in)`` of the first critic given ``dq1 = dL/dq1 (B,)`` (no weight gradients; ``max_live``: as
    :func:`actor_backward`'s)."""
    last = num_layers - 1
    W = w[f"weight{last}.0"]  # (h_last, 1)
    dh = _cast(dq1, W.dtype).unsqueeze(-1) * W.t()  # (B, h_last)
    for k in reversed(range(last)):
        W = w[f"weight{k}.0"]  # (in, out)
        dz = _cast(_relu_grad(dh, outs[k]), W.dtype)
        live = live_units(outs[k], W, max_live) if k else None
        dh = dz @ W.t() if live is None else dz.index_select(1, live) @ W.index_select(1, live).t()
    return dh
