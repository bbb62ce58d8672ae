"""Reinforcement learning: TD3 on gymnasium (``zoo.build("td3", env="Pendulum-v1")``)."""

from zoo.rl import cli  # noqa: F401  (registers `zoo train td3` options and the demo step)
from zoo.rl import export as _export  # noqa: F401  (registers what zoo.export ships: the policy)
from zoo.rl.buffer import ReplayBuffer
from zoo.rl.config import PRESETS, TD3Config, preset_config
from zoo.rl.td3 import TD3Agent, td3

__all__ = ["PRESETS", "ReplayBuffer", "TD3Agent", "TD3Config", "preset_config", "td3"]
