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
