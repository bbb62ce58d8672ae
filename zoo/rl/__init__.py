"""Reinforcement learning: TD3 on gymnasium (``zoo.build("td3", env="Pendulum-v1")``)."""

from zoo._lazy import lazy_exports
from zoo.registry import declare
from zoo.rl import cli as _cli  # noqa: F401  (registers the observation parser of `zoo predict` and the demo step)

declare("td3", family="rl", module="zoo.rl.td3",
        summary="TD3 agent for continuous-control gymnasium envs (preset hyperparameters, overridable)")

_EXPORTS = {
    "ReplayBuffer": "zoo.rl.buffer",
    "PRESETS": "zoo.rl.config",
    "TD3Config": "zoo.rl.config",
    "preset_config": "zoo.rl.config",
    "suggested_total_steps": "zoo.rl.config",
    "OrnsteinUhlenbeckNoise": "zoo.rl.noise",
    "TD3Agent": "zoo.rl.td3",
    "td3": "zoo.rl.td3",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "PRESETS",
    "OrnsteinUhlenbeckNoise",
    "ReplayBuffer",
    "TD3Agent",
    "TD3Config",
    "preset_config",
    "suggested_total_steps",
    "td3",
]
