"""DistributedDataParallel under ``torchrun``: read its env, start the process group, gather results.

Launch with torchrun, no home-made launcher::

    torchrun --nproc_per_node=2 -m zoo train resnet18 --data ...

torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
:func:`init_distributed` reads them and initialises ``gloo`` (CPU) or ``nccl`` (CUDA, one device per
local rank). Without those variables everything here is a no-op and ``fit`` runs in one process.
``batch_size`` in ``fit`` is per process: the global batch is ``batch_size * WORLD_SIZE``.
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from zoo.engine.devices import usable_device

__all__ = [
    "DistInfo",
    "all_gather_objects",
    "all_reduce_mean",
    "barrier",
    "broadcast_buffers",
    "broadcast_object",
    "dist_info",
    "init_distributed",
    "sampler_place",
    "shutdown",
    "wrap_ddp",
]


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def dist_info() -> DistInfo:
    """The process's place in the job: from the live process group, else torchrun's env, else single."""
    if dist.is_available() and dist.is_initialized():
        return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as err:
        raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK must be integers (as torchrun sets them): {err}") from err
    if not 0 <= rank < max(world, 1):
        raise ValueError(f"RANK={rank} is outside WORLD_SIZE={world}")
    return DistInfo(rank, world, local)


def init_distributed(device: str | torch.device) -> tuple[DistInfo, torch.device, bool]:
    """Start the process group if torchrun asked for one; returns (info, this rank's device, created).

    ``created`` is True when this call initialised the group; it is destroyed at interpreter exit.
    """
    info = dist_info()
    device = usable_device(device)
    if device.type == "cuda" and info.enabled:
        device = usable_device(torch.device("cuda", info.local_rank))  # this rank's GPU: the machine must have it
    if device.type == "cuda":
        if device.index is None:  # set_device needs an index: "cuda" means the current one
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    if not info.enabled or dist.is_initialized():
        return info, device, False
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        raise RuntimeError("WORLD_SIZE > 1 but MASTER_ADDR/MASTER_PORT are not set; launch with torchrun")
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size,
                            device_id=device if device.type == "cuda" else None)
    # The group lives until the process exits: a second fit / evaluate in the same torchrun job reuses
    # it (re-creating a group on torchrun's store is not supported).
    atexit.register(shutdown, True)
    return info, device, True


def wrap_ddp(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DDP around ``model`` (already on ``device``). Parameters frozen now stay out of DDP's buckets, so
    under DDP a gradual-unfreezing schedule needs ``find_unused_parameters``; see ``fit``'s docs."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [device.index] if device.type == "cuda" else None
    return DDP(model, device_ids=ids)


def all_reduce_mean(x: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over ranks (in place on a copy); identity outside DDP."""
    if not (dist.is_available() and dist.is_initialized()):
        return x
    y = x.detach().clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y / dist.get_world_size()


def all_gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (picklable), rank order; ``[obj]`` outside DDP."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank; ``obj`` outside DDP."""
    if not (dist.is_available() and dist.is_initialized()):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def broadcast_buffers(module: torch.nn.Module, src: int = 0) -> None:
    """Rank ``src``'s buffers of ``module`` on every rank, one broadcast per dtype; nothing outside DDP or for
    a module without buffers."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for buf in module.buffers():
        by_dtype.setdefault(buf.dtype, []).append(buf)
    for bufs in by_dtype.values():
        flat = torch.cat([b.reshape(-1) for b in bufs])
        dist.broadcast(flat, src)
        start = 0
        for b in bufs:
            b.copy_(flat[start:start + b.numel()].view(b.shape))
            start += b.numel()


def live_place() -> tuple[int, int]:
    """``(rank, world_size)`` of the live process group, ``(0, 1)`` without one: where the ranks' results can
    be gathered (torchrun's environment alone, before a group starts, cannot gather anything)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def sampler_place(rank: int | None, world_size: int | None, *, training: bool) -> tuple[int, int]:
    """``(rank, world_size)`` a sampler shares its samples out by: as given, else this process's own. Training
    reads torchrun's env or the process group; evaluation shares out only in a live group, the one that gathers
    the ranks' results (torchrun's env alone cannot: each process then scores every sample)."""
    if rank is None or world_size is None:
        info = dist_info() if training or live_place()[1] > 1 else DistInfo()
        rank, world_size = (info.rank if rank is None else rank), (info.world_size if world_size is None else world_size)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank={rank} is outside world_size={world_size}: give 0 <= rank < world_size, or leave "
                         "both out to take torchrun's RANK / WORLD_SIZE")
    return rank, world_size


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def shutdown(created: bool) -> None:
    """Destroy the process group if this module created it."""
    if created and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
