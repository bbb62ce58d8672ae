"""What ``zoo.export`` ships for a TD3 agent: its deterministic policy, in the environment's units.

The exported graph is ``observation (B, obs_dim) float32 -> action (B, act_dim) float32`` (an observation space of
another shape, ``(2, 3)`` say, is fed flat: ``obs.reshape(B, -1)``): the actor's tanh
output rescaled to the action Box (``center + tanh(...) * half_range``, clamped into it), i.e. exactly ``agent.act(obs)`` without
exploration noise, so a deployment needs no zoo code and no knowledge of the bounds. An agent trained behind
``NormalizeObservation`` takes normalised observations, as ``agent.act`` does: the metadata then says so and
holds the statistics. The critics, target networks and optimiser state are training-only and are not
exported. Tolerance: ``atol = rtol = 1e-5`` (actions in the env's units).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from zoo.exporting import ExportSpec, Graph, check_int, dtype_name, floating_dtype, register_exporter
from zoo.rl import normalization
from zoo.rl.td3 import TD3Agent

__all__ = ["DeterministicPolicy"]


class DeterministicPolicy(nn.Module):
    """``obs (B, obs_dim) -> action (B, act_dim)`` in the env's Box: the actor plus the tanh rescale."""

    def __init__(self, actor: nn.Module, low: torch.Tensor, high: torch.Tensor) -> None:
        super().__init__()
        self.actor = actor
        self.register_buffer("center", ((high + low) / 2).float())
        self.register_buffer("half_range", ((high - low) / 2).float())
        self.register_buffer("low", low.float())
        self.register_buffer("high", high.float())

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        action = self.center + self.actor(observation).float() * self.half_range  # (B, act_dim)
        # into the Box as agent.act clamps it (float32 rounding can put center + half one step past high)
        return torch.minimum(torch.maximum(action, self.low), self.high)


def _observations(agent: TD3Agent, n: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``n`` observations drawn from the agent's observation space (normal where it is unbounded), in the
    actor's floating dtype (an actor cast with ``.half()`` refuses float32 observations)."""
    space = copy.deepcopy(agent.observation_space)
    space.seed(seed)
    # (n, obs_dim): an observation space of another shape is read flat, row-major, as the agent reads it
    obs = torch.as_tensor(np.stack([space.sample() for _ in range(n)]).astype(np.float32)).reshape(n, agent.obs_dim)
    return obs.to(dtype)


def _normalized_input(agent: TD3Agent) -> dict[str, object]:
    """An agent trained behind ``NormalizeObservation`` takes normalised observations, and so does its
    graph: the metadata says so, with the statistics (each wrapper's, outermost first; the innermost
    applies first), which the deployment applies as the wrapper does."""
    stats = agent.normalization
    n = normalization.counts(stats).get("obs_rms", 0)
    if not n:
        return {}
    return {"observation_normalization": (
        "the policy takes observations as the training env's NormalizeObservation hands them: "
        "(obs - mean) / sqrt(var + epsilon), epsilon the wrapper's (gymnasium's default 1e-8)"),
        "observation_mean": [stats[f"obs_rms.{i}.mean"].reshape(-1).tolist() for i in range(n)],
        "observation_var": [stats[f"obs_rms.{i}.var"].reshape(-1).tolist() for i in range(n)]}


@register_exporter(TD3Agent)
def export_td3(agent: TD3Agent, batch: int = 2) -> ExportSpec:
    """The deterministic policy with a dynamic batch axis; checked at batch ``batch``, 1 and 7. Observations
    come in the actor's floating dtype (float32 unless it was cast), actions leave in float32."""
    batch = check_int("batch", batch)
    dtype = floating_dtype(agent.actor)
    low = agent.scale_action(-torch.ones(agent.act_dim, device=agent.device)).cpu()
    high = agent.scale_action(torch.ones(agent.act_dim, device=agent.device)).cpu()
    policy = DeterministicPolicy(agent.actor, low, high)
    graph = Graph("policy", policy, (_observations(agent, batch, 0, dtype),), ("observation",), ("action",),
                  {0: {0: "batch"}}, checks=[(_observations(agent, 1, 1, dtype),), (_observations(agent, 7, 2, dtype),)])
    meta = {"model": "td3", "env": agent.env_id, "observation": f"(B, {agent.obs_dim}) {dtype_name(dtype)}",
            "action": f"(B, {agent.act_dim}) float32 in the env's units",
            "action_low": low.tolist(), "action_high": high.tolist(), **_normalized_input(agent)}
    return ExportSpec([graph], atol=1e-5, rtol=1e-5, metadata=meta)
