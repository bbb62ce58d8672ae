"""A replay buffer of preallocated tensors: O(1) batched adds, uniform sampling with ``torch.randint``.

Only ``terminated`` is stored as the "done" of the Bellman target: a time-limit truncation is not a
terminal state of the MDP, so its transition still bootstraps from ``next_obs`` (Pardo et al. 2018,
https://arxiv.org/abs/1712.00378). The caller stores the true final observation of a truncated
episode as ``next_obs`` (gymnasium vector envs give it in ``info["final_obs"]``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

__all__ = ["Batch", "ReplayBuffer"]


class Batch(NamedTuple):
    obs: torch.Tensor  # (B, obs_dim)
    act: torch.Tensor  # (B, act_dim), normalised to [-1, 1]
    reward: torch.Tensor  # (B,)
    next_obs: torch.Tensor  # (B, obs_dim)
    not_done: torch.Tensor  # (B,) 0.0 where the episode terminated (no bootstrap), 1.0 otherwise


class ReplayBuffer:
    """Ring buffer of ``capacity`` transitions on ``device``."""

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, device: str | torch.device = "cpu") -> None:
        if capacity < 1:
            raise ValueError(f"replay buffer capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        self.device = torch.device(device)
        # one (capacity, D) table so that sampling is a single row gather; the fields are column views
        o, a = self.obs_dim, self.act_dim
        self._cols = {"obs": slice(0, o), "act": slice(o, o + a), "reward": o + a,
                      "next_obs": slice(o + a + 1, 2 * o + a + 1), "not_done": 2 * o + a + 1}
        self.data = torch.zeros(self.capacity, 2 * o + a + 2, dtype=torch.float32, device=self.device)
        for key, cols in self._cols.items():
            setattr(self, key, self.data[:, cols])
        self.pos = 0  # next slot to write
        self.size = 0
        # on CPU a numpy view of the same memory makes a single-env add a few array copies (no torch ops)
        self._np = self.data.numpy() if self.device.type == "cpu" else None

    def add_one(self, obs: np.ndarray, act: np.ndarray, reward: float, next_obs: np.ndarray,
                terminated: bool) -> None:
        """Add one transition from a single env (the hot path of the interaction loop)."""
        if self._np is None:
            self.add(obs, act, reward, next_obs, terminated)
            return
        o, a = self.obs_dim, self.act_dim
        row = self._np[self.pos]
        row[:o] = obs.reshape(-1)  # an observation of any shape, read flat (a view: no copy)
        row[o:o + a] = act
        row[o + a] = reward
        row[o + a + 1:2 * o + a + 1] = next_obs.reshape(-1)
        row[2 * o + a + 1] = 0.0 if terminated else 1.0
        self.pos = (self.pos + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def __len__(self) -> int:
        return self.size

    def add(self, obs, act, reward, next_obs, terminated) -> None:
        """Add one transition or a batch ``(N, ...)`` of them (from a vector env); arrays or tensors."""
        obs_t = torch.as_tensor(np.asarray(obs, dtype=np.float32) if not torch.is_tensor(obs) else obs)
        obs_t = obs_t.to(torch.float32).reshape(-1, self.obs_dim)
        n = obs_t.shape[0]
        if n > self.capacity:
            raise ValueError(f"cannot add {n} transitions at once to a buffer of capacity {self.capacity}")

        def col(x, width: int | None) -> torch.Tensor:
            t = x if torch.is_tensor(x) else torch.as_tensor(np.asarray(x, dtype=np.float32))
            return t.to(torch.float32).reshape(n, width) if width else t.to(torch.float32).reshape(n)

        act_t, rew_t = col(act, self.act_dim), col(reward, None)
        nxt_t, term_t = col(next_obs, self.obs_dim), col(terminated, None)
        end = self.pos + n
        if end <= self.capacity:
            idx = slice(self.pos, end)
        else:  # wraps around: scatter to the row indices modulo capacity
            idx = torch.arange(self.pos, end, device=self.device) % self.capacity
        rows = torch.cat([obs_t, act_t, rew_t[:, None], nxt_t, 1.0 - term_t[:, None]], dim=1)  # (n, D)
        self.data[idx] = rows.to(self.device)
        self.pos = end % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` transitions drawn uniformly with replacement."""
        if self.size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = torch.randint(0, self.size, (batch_size,), generator=generator, device=self.device)
        rows = torch.index_select(self.data, 0, idx)  # (B, D); half the time of data[idx] (advanced indexing)
        c = self._cols
        return Batch(rows[:, c["obs"]], rows[:, c["act"]], rows[:, c["reward"]], rows[:, c["next_obs"]],
                     rows[:, c["not_done"]])

    # --- persistence: plain tensors and ints, loadable with torch.load(weights_only=True) ---------

    def state_dict(self) -> dict:
        return {"capacity": self.capacity, "pos": self.pos, "size": self.size,
                "obs_dim": self.obs_dim, "act_dim": self.act_dim, "data": self.data[: self.size].clone()}

    def load_state_dict(self, state: dict) -> None:
        # the spaces first: a row's width alone let a buffer of obs_dim 3, act_dim 1 (rows of 9) load into one of
        # obs_dim 2, act_dim 3 (rows of 9 too), every transition split at the wrong columns, without a word
        saved = (int(state.get("obs_dim", self.obs_dim)), int(state.get("act_dim", self.act_dim)))
        if saved != (self.obs_dim, self.act_dim):
            raise ValueError(f"the saved replay buffer holds transitions of obs_dim {saved[0]}, act_dim {saved[1]}; "
                             f"this buffer's are obs_dim {self.obs_dim}, act_dim {self.act_dim}: load it into the "
                             "buffer of an agent built for the env it was filled on")
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"buffer capacity mismatch: saved {state['capacity']}, this buffer {self.capacity}")
        n = int(state["size"])
        src = state["data"]
        if tuple(src.shape) != (n, self.data.shape[1]):
            raise ValueError(f"saved buffer has shape {tuple(src.shape)}; this buffer stores rows of "
                             f"{self.data.shape[1]} (obs_dim {self.obs_dim}, act_dim {self.act_dim})")
        self.data[:n] = src.to(self.device)
        self.size, self.pos = n, int(state["pos"])

    def save(self, path) -> None:
        """Write the filled part atomically through :mod:`zoo.fs`."""
        from zoo.engine.checkpoint import save_with_digest

        save_with_digest(self.state_dict(), path)

    def load(self, path) -> None:
        """Read what :meth:`save` wrote; an unreadable or corrupt file is a ``zoo.engine.CheckpointError``."""
        from zoo.engine.checkpoint import check_digest, load_plain

        state = load_plain(path, self.device, what="replay buffer")
        check_digest(state, path, "replay buffer")
        self.load_state_dict({k: v for k, v in state.items() if k != "digest"})
