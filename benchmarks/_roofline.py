"""The GEMM roofline of a piece of work: every matrix product it runs, replayed alone at the same shapes,
strides and dtype, timed, and summed.

    gemms = capture_gemms(lambda: agent.update(2))      # what the work multiplies
    roof = gemm_roofline(gemms, per=2)                   # per update: seconds, FLOPs, GFLOP/s
    fraction = roof["seconds"] / measured_seconds_per_update

The sum of the isolated GEMM times is what the work would take if everything but its GEMMs were free,
at the throughput this CPU reaches *at those shapes and precision* (small and skinny products included),
so ``fraction`` is the share of the work's time that is matrix arithmetic.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from _harness import per_call
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["capture_gemms", "gemm_roofline"]

_aten = torch.ops.aten
_GEMMS = {_aten.mm, _aten.addmm, _aten.bmm, _aten.baddbmm, _aten.mv, _aten.addmv}  # matrix-vector products too


def _spec(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), tuple(x.stride()), x.dtype, x.storage_offset() > 0 and x.is_contiguous())
    if isinstance(x, (list, tuple)):
        return tuple(_spec(v) for v in x)
    return x


def _flops(packet, args: tuple) -> int:
    shapes = [a[1] for a in args if isinstance(a, tuple) and a and a[0] == "T"]
    if packet in (_aten.mv, _aten.addmv):
        (m, k), _ = shapes[-2], shapes[-1]
        return 2 * m * k
    if packet in (_aten.mm, _aten.addmm):
        (m, k), (_, n) = shapes[-2], shapes[-1]
        return 2 * m * k * n
    (b, m, k), (_, _, n) = shapes[-2], shapes[-1]
    return 2 * b * m * k * n


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket in _GEMMS:
            key = (func, tuple(_spec(a) for a in args), tuple(sorted((k, _spec(v)) for k, v in kwargs.items())))
            self.calls[key] += 1
        return func(*args, **kwargs)


def capture_gemms(work: Callable[[], Any]) -> Counter:
    """Run ``work`` once and return ``{(op, arg specs, kwarg specs): calls}`` of its GEMMs."""
    rec = _Recorder()
    with rec:
        work()
    return rec.calls


def _make(spec: Any) -> Any:
    if isinstance(spec, tuple) and spec and spec[0] == "T":
        _, shape, stride, dtype, _ = spec
        size = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
        base = torch.randn(max(size, 1)).to(dtype)
        return base.as_strided(shape, stride)
    if isinstance(spec, tuple):
        return tuple(_make(s) for s in spec)
    return spec


def gemm_roofline(calls: Counter, per: int = 1, min_time: float = 0.05) -> dict[str, Any]:
    """Time every captured GEMM alone (fresh operands of the same layout); totals divided by ``per``."""
    total_s, total_flops, rows = 0.0, 0, []
    for (func, arg_specs, kw_specs), count in calls.items():
        args = [_make(s) for s in arg_specs]
        kwargs = {k: _make(s) for k, s in kw_specs}
        with torch.no_grad():
            seconds = per_call(functools.partial(func, *args, **kwargs), min_time, min_calls=5)
        flops = _flops(func.overloadpacket, arg_specs)
        total_s += seconds * count
        total_flops += flops * count
        shapes = " x ".join("x".join(map(str, s[1])) for s in arg_specs if isinstance(s, tuple) and s and s[0] == "T")
        rows.append({"op": str(func), "shapes": shapes, "calls": count / per, "us": seconds * 1e6,
                     "gflops": flops / seconds / 1e9})
    return {"seconds": total_s / per, "flops": total_flops / per,
            "gflop_per_s": total_flops / total_s / 1e9 if total_s else float("nan"), "gemms": rows}
