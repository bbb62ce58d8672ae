"""Exploration noise for collecting: Gaussian per step, or an Ornstein-Uhlenbeck process.

The Ornstein-Uhlenbeck process (Uhlenbeck & Ornstein 1930; used for exploration by DDPG, Lillicrap et
al. 2015, https://arxiv.org/abs/1509.02971) is Brownian motion pulled back to its mean: consecutive noises
are correlated, so a car on a hill (MountainCarContinuous) keeps pushing one way long enough to get
somewhere. The discretisation is Stable-Baselines3's ``OrnsteinUhlenbeckActionNoise`` (mean 0):

    x_{t+1} = x_t + theta * (0 - x_t) * dt + sigma * sqrt(dt) * N(0, 1)

with theta 0.15 and dt 0.01, reset to 0 at each episode's end, one state per env of a vector env.
"""

from __future__ import annotations

import math

import torch

__all__ = ["OrnsteinUhlenbeckNoise"]


class OrnsteinUhlenbeckNoise:
    """The process's state for ``(n_envs, act_dim)`` (or ``(act_dim,)`` for a single env) actions.

    Its draws come from the generator passed to :meth:`sample` (the agent's), so a run is reproducible by
    the agent's seed; :meth:`state` / :meth:`load_state` carry the state across a checkpoint.
    """

    def __init__(self, sigma: float, shape: tuple[int, ...], *, theta: float = 0.15, dt: float = 1e-2,
                 device: str | torch.device = "cpu") -> None:
        self.sigma, self.theta, self.dt = float(sigma), float(theta), float(dt)
        # a normal tensor even when made while acting (inference mode), so that an episode's end, outside
        # inference mode, can reset it in place
        with torch.inference_mode(False):
            self.x = torch.zeros(shape, dtype=torch.float32, device=device)  # (n_envs, act_dim) or (act_dim,)

    def sample(self, generator: torch.Generator) -> torch.Tensor:
        """Advance the process one step and return its new value (a copy, shaped like the state)."""
        eps = torch.randn(self.x.shape, generator=generator, device=self.x.device)
        self.x += self.theta * (0.0 - self.x) * self.dt + self.sigma * math.sqrt(self.dt) * eps
        return self.x.clone()

    def reset(self, envs: list[int] | None = None) -> None:
        """Back to 0: every env's state, or only those of ``envs`` (the rows whose episode ended)."""
        if envs is None or self.x.dim() == 1:
            self.x.zero_()
        else:
            self.x[envs] = 0.0

    def state(self) -> torch.Tensor:
        return self.x.detach().cpu().clone()

    def load_state(self, x: torch.Tensor) -> None:
        with torch.inference_mode(False):
            self.x = x.to(self.x.device, torch.float32).clone()
