"""Claims of issue 5 about attention and decoding speed, measured on this CPU in one run, same weights.

(a) greedy decoding of 128 new tokens, batch 32, with the KV cache vs recomputing the whole prefix each
    step (what tutorials built on ``nn.TransformerDecoder`` do); the tokens must be identical.
    Goal: >= 5x faster.
(b) forward + backward of one attention layer at training shapes (self-attention with a key padding
    mask): ours (SDPA) vs ``torch.nn.MultiheadAttention`` (need_weights=False, its fast path) vs our
    plain reference path; peak extra memory of one fwd+bwd measured as the RSS high-water mark of a
    fresh subprocess (tracemalloc does not see torch's CPU allocations).
    Goal: at least as fast as nn.MultiheadAttention and >= 1.5x the reference.
(c) the same in bf16 autocast. ``ours_sdpa`` dispatches bf16 *training* on CPU to the explicit path
    at short sequences, because torch's fused CPU kernel has a slow bf16 backward there;
    ``ours_sdpa_always`` (SDPA forced) is measured too, so the JSON shows that choice.
(d) long sequences (issue 15: at 32 tokens both paths are two small GEMMs): self-attention fwd+bwd at
    512 and 2,048 tokens, fp32 and ``amp="auto"`` (bf16 where this CPU has native bf16 GEMMs, else
    fp32), ours vs the explicit-score reference: time, peak extra memory (fresh process), and the
    largest difference of outputs and input gradients. Goal: ours >= 1.5x faster or >= 3x less memory.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/attention_decode.py            # full (~3-5 min)
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/attention_decode.py --quick    # smoke

Weights: the published ``seq2seq-transformer.multi30k-de-en`` when present, else the default
``seq2seq-transformer`` built with seed 0 (speed does not depend on the values; the JSON says which).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import _harness

import zoo
from zoo.engine.precision import auto_amp
from zoo.seq2seq.attention import MultiHeadAttention

RESULTS = ROOT / "benchmarks" / "results"
NAME = "attention_decode"


def machine() -> dict:
    return _harness.machine_info()


def write_json(payload: dict) -> Path:
    return _harness.save_result_json(NAME, payload, RESULTS)  # one file per CPU kind


# --- (a) decoding -------------------------------------------------------------------------------------------


def load_model() -> tuple[torch.nn.Module, str]:
    from zoo import hub

    name = "seq2seq-transformer.multi30k-de-en"
    if name in hub.list_weights("seq2seq-transformer"):
        return zoo.build("seq2seq-transformer", weights=name).eval(), name
    torch.manual_seed(0)
    return zoo.build("seq2seq-transformer").eval(), "seq2seq-transformer defaults, seed 0 (no published weights)"


def decode_cached(model, src: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy with the KV cache; EOS is banned so that every row makes exactly ``new_tokens`` tokens."""
    state = model.start(src)
    tok = torch.full((src.shape[0],), model.bos_id, dtype=torch.long)
    out = []
    for _ in range(new_tokens):
        logits = model.step(state, tok)
        logits[:, [model.pad_id, model.bos_id, model.eos_id]] = float("-inf")
        tok = logits.argmax(-1)
        out.append(tok)
    return torch.stack(out, 1)


def decode_recompute(model, src: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy by running the decoder over the whole prefix at every step (no cache); the source is
    encoded once, and only the last position is projected to the vocabulary (a strong baseline)."""
    memory, pad = model.encode(src)
    seq = torch.full((src.shape[0], 1), model.bos_id, dtype=torch.long)
    for _ in range(new_tokens):
        x = model._embed(model.tgt_embed, seq)
        for layer in model.decoder_layers:
            x = layer(x, memory, pad)
        logits = model._logits(x[:, -1])
        logits[:, [model.pad_id, model.bos_id, model.eos_id]] = float("-inf")
        seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], dim=1)
    return seq[:, 1:]


def bench_decode(args) -> dict:
    model, weights = load_model()
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, model.config.src_vocab, (args.batch, args.src_len), generator=g)
    src[:, -1] = model.eos_id
    times = {"kv_cache": [], "recompute_prefix": []}
    outputs = {}
    with torch.inference_mode():
        decode_cached(model, src[:2], 4)  # warm-up
        decode_recompute(model, src[:2], 4)
        for r in range(args.repeats):
            for name, fn in (("kv_cache", decode_cached), ("recompute_prefix", decode_recompute)):
                t0 = time.perf_counter()
                outputs[name] = fn(model, src, args.new_tokens)
                times[name].append(time.perf_counter() - t0)
                print(f"(a) round {r + 1}/{args.repeats} {name:>16}: {times[name][-1]:.2f} s", flush=True)
    identical = bool(torch.equal(outputs["kv_cache"], outputs["recompute_prefix"]))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "weights": weights,
        "batch": args.batch,
        "src_len": args.src_len,
        "new_tokens": args.new_tokens,
        "seconds": med,
        "runs": times,
        "tokens_per_s": {k: args.batch * args.new_tokens / v for k, v in med.items()},
        "identical_tokens": identical,
        "speedup": med["recompute_prefix"] / med["kv_cache"],
    }


# --- (b), (c) attention layer fwd+bwd ------------------------------------------------------------------------

IMPLS = ("ours_sdpa", "torch_mha", "ours_reference", "ours_sdpa_always")


def make_layer(impl: str, d: int, h: int) -> nn.Module:
    torch.manual_seed(0)
    if impl == "torch_mha":
        return nn.MultiheadAttention(d, h, dropout=0.0, batch_first=True)
    kind = {"ours_sdpa": "sdpa", "ours_reference": "reference", "ours_sdpa_always": "sdpa-always"}[impl]
    return MultiHeadAttention(d, h, dropout=0.0, impl=kind)


def make_inputs(b: int, t: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, t, d, generator=g)
    lengths = torch.randint(t // 2, t + 1, (b,), generator=g)
    pad = torch.arange(t)[None] >= lengths[:, None]  # (B, T) True = padding
    return x, pad


def fwd_bwd(layer: nn.Module, impl: str, x: torch.Tensor, pad: torch.Tensor, amp: bool) -> None:
    x = x.detach().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        if impl == "torch_mha":
            y, _ = layer(x, x, x, key_padding_mask=pad, need_weights=False)
        else:
            y = layer(x, key_padding_mask=pad)
    y.float().square().mean().backward()


def bench_long(args, length: int, batch: int, amp: bool) -> dict:
    """(d): ours (SDPA dispatch) vs the explicit-score reference at one long shape."""
    impls = ("ours_sdpa", "ours_reference")
    x, pad = make_inputs(batch, length, args.d_model)
    layers = {k: make_layer(k, args.d_model, args.n_heads) for k in impls}
    grads, outs = {}, {}
    for impl, layer in layers.items():  # same answers first
        xx = x.detach().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            y = layer(xx, key_padding_mask=pad)
        y.float().square().mean().backward()
        outs[impl], grads[impl] = y.detach().float(), xx.grad.float()
    times: dict[str, list[float]] = {k: [] for k in impls}
    for r in range(args.repeats):
        for impl in (impls if r % 2 == 0 else impls[::-1]):
            t0 = time.perf_counter()
            fwd_bwd(layers[impl], impl, x, pad, amp)
            times[impl].append((time.perf_counter() - t0) * 1000)
        print(f"(d) {length} tokens, {'bf16' if amp else 'fp32'}, round {r + 1}/{args.repeats}: "
              + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    sub = argparse.Namespace(**{**vars(args), "layer_batch": batch, "layer_len": length})
    peak = {k: peak_memory_mb(k, sub, amp) for k in impls}
    return {
        "shape": {"batch": batch, "len": length, "d_model": args.d_model, "heads": args.n_heads},
        "amp": "bf16" if amp else None,
        "ms_per_fwd_bwd": med, "runs_ms": times, "peak_extra_mb": peak,
        "speedup_vs_reference": med["ours_reference"] / med["ours_sdpa"],
        "memory_ratio_reference_over_ours": peak["ours_reference"] / max(peak["ours_sdpa"], 1e-3),
        "max_abs_diff": {"output": float((outs["ours_sdpa"] - outs["ours_reference"]).abs().max()),
                         "input_grad": float((grads["ours_sdpa"] - grads["ours_reference"]).abs().max())},
    }


def bench_layer(args, amp: bool) -> dict:
    x, pad = make_inputs(args.layer_batch, args.layer_len, args.d_model)
    layers = {k: make_layer(k, args.d_model, args.n_heads) for k in IMPLS}
    for impl, layer in layers.items():  # same answers first: this compares like with like
        for _ in range(2):
            fwd_bwd(layer, impl, x, pad, amp)
    times: dict[str, list[float]] = {k: [] for k in IMPLS}
    for r in range(args.repeats):
        for impl in IMPLS:
            t0 = time.perf_counter()
            for _ in range(args.iters):
                fwd_bwd(layers[impl], impl, x, pad, amp)
            times[impl].append((time.perf_counter() - t0) / args.iters * 1000)
        print(f"({'c' if amp else 'b'}) round {r + 1}/{args.repeats}: "
              + ", ".join(f"{k} {v[-1]:.2f} ms" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    peak = {k: peak_memory_mb(k, args, amp) for k in IMPLS}
    return {
        "shape": {"batch": args.layer_batch, "len": args.layer_len, "d_model": args.d_model, "heads": args.n_heads},
        "amp": "bf16" if amp else None,
        "ms_per_fwd_bwd": med,
        "runs_ms": times,
        "peak_extra_mb": peak,
        "speedup_vs_torch_mha": med["torch_mha"] / med["ours_sdpa"],
        "speedup_vs_reference": med["ours_reference"] / med["ours_sdpa"],
    }


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_memory_mb(impl: str, args, amp: bool) -> float:
    """Peak RSS growth during fwd+bwd, measured in a fresh process (see :func:`memory_child`)."""
    cmd = [sys.executable, __file__, "--_memory-child", impl, "--d-model", str(args.d_model),
           "--n-heads", str(args.n_heads), "--layer-batch", str(args.layer_batch),
           "--layer-len", str(args.layer_len)] + (["--_amp"] if amp else [])
    # Large blocks always mmap'd, so that freeing returns them and the current RSS follows live memory.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def memory_child(args) -> None:
    """Sample the RSS every 0.2 ms from a thread while fwd+bwd runs 3 times; print max - baseline."""
    import threading

    torch.set_num_threads(1)
    layer = make_layer(args._memory_child, args.d_model, args.n_heads)
    xs, ps = make_inputs(2, 8, args.d_model)
    fwd_bwd(layer, args._memory_child, xs, ps, args._amp)  # load kernels at a tiny shape
    x, pad = make_inputs(args.layer_batch, args.layer_len, args.d_model)
    fwd_bwd(layer, args._memory_child, x, pad, args._amp)  # gradients exist from here on
    base, peak, stop = _rss_mb(), [0.0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.0002)

    t = threading.Thread(target=sample)
    t.start()
    for _ in range(3):
        fwd_bwd(layer, args._memory_child, x, pad, args._amp)
    stop.set()
    t.join()
    print(f"{max(0.0, peak[0] - base):.2f}")


# --- main ---------------------------------------------------------------------------------------------------


def markdown(res: dict) -> str:
    a, b, c = res["metrics"]["decode"], res["metrics"]["layer_fp32"], res["metrics"]["layer_bf16"]
    lines = [
        "| claim | ours | peer | ratio | goal |",
        "|---|---|---|---|---|",
        (f"| (a) greedy {a['new_tokens']} tokens, batch {a['batch']} | KV cache {a['seconds']['kv_cache']:.2f} s | "
        f"recompute prefix {a['seconds']['recompute_prefix']:.2f} s | {a['speedup']:.1f}x "
        f"(identical tokens: {a['identical_tokens']}) | >= 5x |"),
    ]
    for tag, r in (("(b) fp32", b), ("(c) bf16", c)):
        ms, mem = r["ms_per_fwd_bwd"], r["peak_extra_mb"]
        lines.append(
            f"| {tag} attention fwd+bwd {r['shape']['batch']}x{r['shape']['len']}x{r['shape']['d_model']} | "
            f"{ms['ours_sdpa']:.2f} ms, {mem['ours_sdpa']:.0f} MB | nn.MHA {ms['torch_mha']:.2f} ms, "
            f"{mem['torch_mha']:.0f} MB; reference {ms['ours_reference']:.2f} ms, {mem['ours_reference']:.0f} MB | "
            f"{r['speedup_vs_torch_mha']:.2f}x vs MHA, {r['speedup_vs_reference']:.2f}x vs reference | >= 1x, >= 1.5x |"
        )
    for key, r in res["metrics"].items():
        if not (key.startswith("long") and isinstance(r, dict)):
            continue
        ms, mem, sh = r["ms_per_fwd_bwd"], r["peak_extra_mb"], r["shape"]
        lines.append(
            f"| (d) {r['amp'] or 'fp32'} self-attention fwd+bwd {sh['batch']}x{sh['len']}x{sh['d_model']} | "
            f"{ms['ours_sdpa']:.1f} ms, {mem['ours_sdpa']:.0f} MB | reference {ms['ours_reference']:.1f} ms, "
            f"{mem['ours_reference']:.0f} MB | {r['speedup_vs_reference']:.2f}x time, "
            f"{r['memory_ratio_reference_over_ours']:.1f}x memory (max diff out {r['max_abs_diff']['output']:.1e}, "
            f"grad {r['max_abs_diff']['input_grad']:.1e}) | >= 1.5x time or >= 3x memory |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small smoke run (nothing written)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--src-len", type=int, default=24)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--iters", type=int, default=10, help="fwd+bwd per timed repeat")
    p.add_argument("--layer-batch", type=int, default=128)
    p.add_argument("--layer-len", type=int, default=32)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--n-heads", type=int, default=8)
    p.add_argument("--long", type=int, nargs="+", default=[512, 2048], help="(d) sequence lengths")
    p.add_argument("--long-batch", type=int, nargs="+", default=[8, 2], help="(d) batch per length")
    p.add_argument("--_memory-child", dest="_memory_child", help=argparse.SUPPRESS)
    p.add_argument("--_amp", dest="_amp", action="store_true", help=argparse.SUPPRESS)
    args = _harness.parse_args(p, argv, __file__)
    if args._memory_child:
        memory_child(args)
        return 0
    if args.quick:
        args.batch, args.new_tokens, args.repeats, args.iters = 4, 16, 1, 2
    t0 = time.perf_counter()
    res = {
        "benchmark": NAME,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": _harness.command_line(),
        "metrics": {},
    }
    res["metrics"]["decode"] = bench_decode(args)
    res["metrics"]["layer_fp32"] = bench_layer(args, amp=False)
    res["metrics"]["layer_bf16"] = bench_layer(args, amp=True)
    auto_bf16 = auto_amp("cpu", "matmul") == "bf16"
    res["metrics"]["long_auto_precision"] = "bf16" if auto_bf16 else "fp32"
    for length, batch in zip(args.long, args.long_batch):
        res["metrics"][f"long{length}_fp32"] = bench_long(args, length, batch, amp=False)
        if auto_bf16:  # "auto" is fp32 where bf16 is not native: then the fp32 row is the auto row
            res["metrics"][f"long{length}_bf16"] = bench_long(args, length, batch, amp=True)
    m = res["metrics"]
    res["peers"] = {
        "recompute_prefix": {"seconds": m["decode"]["seconds"]["recompute_prefix"]},
        "torch.nn.MultiheadAttention": {
            "ms_fp32": m["layer_fp32"]["ms_per_fwd_bwd"]["torch_mha"],
            "ms_bf16": m["layer_bf16"]["ms_per_fwd_bwd"]["torch_mha"],
        },
        "reference_attention": {
            "ms_fp32": m["layer_fp32"]["ms_per_fwd_bwd"]["ours_reference"],
            "ms_bf16": m["layer_bf16"]["ms_per_fwd_bwd"]["ours_reference"],
        },
    }
    res["ratios"] = {
        "kv_cache_speedup": m["decode"]["speedup"],
        "fp32_vs_torch_mha": m["layer_fp32"]["speedup_vs_torch_mha"],
        "fp32_vs_reference": m["layer_fp32"]["speedup_vs_reference"],
        "bf16_vs_torch_mha": m["layer_bf16"]["speedup_vs_torch_mha"],
        "bf16_vs_reference": m["layer_bf16"]["speedup_vs_reference"],
    }
    for key, r in m.items():
        if key.startswith("long") and isinstance(r, dict):
            res["ratios"][f"{key}_speedup_vs_reference"] = r["speedup_vs_reference"]
            res["ratios"][f"{key}_memory_reference_over_ours"] = r["memory_ratio_reference_over_ours"]
            res["peers"]["reference_attention"][f"{key}_ms"] = r["ms_per_fwd_bwd"]["ours_reference"]
            res["peers"]["reference_attention"][f"{key}_peak_mb"] = r["peak_extra_mb"]["ours_reference"]
    res["goals_met"] = {
        "kv_cache_5x_identical": m["decode"]["speedup"] >= 5 and m["decode"]["identical_tokens"],
        "fp32_at_least_torch_mha": m["layer_fp32"]["speedup_vs_torch_mha"] >= 1.0,
        "fp32_1.5x_reference": m["layer_fp32"]["speedup_vs_reference"] >= 1.5,
        "bf16_at_least_torch_mha": m["layer_bf16"]["speedup_vs_torch_mha"] >= 1.0,
        "bf16_1.5x_reference": m["layer_bf16"]["speedup_vs_reference"] >= 1.5,
        **{f"{k}_1.5x_time_or_3x_memory": r["speedup_vs_reference"] >= 1.5 or r["memory_ratio_reference_over_ours"] >= 3
           for k, r in m.items() if k.startswith("long") and isinstance(r, dict)},
    }
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    print()
    print(markdown(res))
    if args.quick:
        print("(quick run: nothing written)")
    else:
        print(f"\nwritten {write_json(res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
