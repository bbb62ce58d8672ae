"""fp32 vs bf16 per kind of op on this CPU: the measurements behind ``amp="auto"`` (issue 15).

``zoo.engine.precision`` decides, per CPU kind (and on AVX512_BF16 CPUs by timing a probe on the machine),
for which kinds of op bf16 beats fp32. This script measures them on the CPU it finds, at the shapes our
models run: a TD3 layer (256x400 @ 400x300 matmul), a ResNet18 3x3 convolution (64 channels, 56x56) and
HybridSN's second 3-D convolution. fp32 and bf16 are interleaved, medians of ``--repeats``; the JSON also
says what ``amp="auto"`` picks here for inference and for training, and whether bf16 gradients passed
the check training needs (``bf16_gradients_ok``).

Other CPU kinds can be emulated on a newer CPU by capping torch's kernels (the JSON records the caps
and files the result under the emulated kind), e.g. an AVX2-only CPU and an AVX512_BF16 CPU without AMX:

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/precision_ops.py
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \\
        flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/precision_ops.py
    ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/precision_ops.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _harness import interleave, median, parse_args, per_call, write_result

from zoo.engine.precision import OP_KINDS, auto_amp, bf16_gradients_ok, cpu_features
from zoo.engine.threads import torch_threads

NAME = "precision_ops"


def _bound(fn, *operands: torch.Tensor):
    """``dtype -> zero-argument callable`` running ``fn`` on the operands cast to that dtype."""
    def make(dt: torch.dtype):
        cast = [t.to(dt) for t in operands]
        return lambda: fn(*cast)
    return make


def cases(g: torch.Generator) -> dict[str, tuple[str, object]]:
    """name -> (op kind, make(dtype) -> zero-argument callable)."""
    a, b = torch.randn(256, 400, generator=g), torch.randn(400, 300, generator=g)
    x2, w2 = torch.randn(8, 64, 56, 56, generator=g), torch.randn(64, 64, 3, 3, generator=g)
    x3, w3 = torch.randn(16, 8, 24, 23, 23, generator=g), torch.randn(16, 8, 5, 3, 3, generator=g)
    return {
        "matmul_256x400x300": ("matmul", _bound(torch.mm, a, b)),
        "conv2d_8x64x56x56_k3": ("conv", _bound(lambda x, w: F.conv2d(x, w, padding=1), x2, w2)),
        "conv3d_hybridsn_16x8x24x23x23_k533": ("conv3d", _bound(F.conv3d, x3, w3)),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--min-time", type=float, default=0.3, help="seconds per timed sample")
    args = parse_args(p, argv, __file__)
    feats = cpu_features()
    metrics: dict[str, dict] = {"cpu_kind": feats.kind, "auto": {}, "bf16_gradients_ok": {}}
    peers: dict[str, dict] = {"fp32": {}}
    ratios: dict[str, float] = {}
    with torch.inference_mode():
        for threads in args.threads:
            with torch_threads(threads):
                for name, (kind, make) in cases(torch.Generator().manual_seed(0)).items():
                    fns = {"bf16": make(torch.bfloat16), "fp32": make(torch.float32)}
                    print(f"{name}, {threads} thread(s):", file=sys.stderr)
                    got = interleave({k: (lambda f=f: per_call(f, args.min_time) * 1e3) for k, f in fns.items()},
                                     repeats=args.repeats, warmup=0)
                    key = f"{name}.{threads}t_ms"
                    metrics[key] = median(got["bf16"])
                    peers["fp32"][key] = median(got["fp32"])
                    ratios[key] = peers["fp32"][key] / metrics[key]  # > 1: bf16 faster
    for kind in OP_KINDS:  # what the defaults run here: inference, and training (gradients checked too)
        metrics["auto"][kind] = auto_amp("cpu", kind) or "fp32"
        metrics["auto"][f"{kind}_training"] = auto_amp("cpu", kind, training=True) or "fp32"
        metrics["bf16_gradients_ok"][kind] = bf16_gradients_ok(kind)
    write_result(NAME, metrics=metrics, peers=peers, ratios=ratios,
                 extra={"notes": "ours = bf16, peer = fp32 on the same op; ratio > 1: bf16 faster",
                        "settings": {"repeats": args.repeats, "threads": args.threads, "min_time_s": args.min_time}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
