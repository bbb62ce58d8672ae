"""Inference latency of the ``zoo.export`` ONNX graphs in onnxruntime vs the same model in PyTorch (eager),
per family, at batch 1 and a typical batch, in one run on this CPU.

Each family's model (shipped weights where they exist) is exported with ``zoo.export(..., "onnx")`` (not
timed; the export time is recorded), then the two paths are timed interleaved on the same inputs, the
way a user calls them, numpy in and out on both sides:

* vision ``resnet18.cifar10``: ``model(x)`` vs the classifier graph, 32x32 images, batch 1 / 64;
* seq2seq ``seq2seq-transformer.multi30k-de-en``: greedy translation of Multi30k test sentences,
  ``model.translate(s, beam_size=1)`` vs :class:`zoo.seq2seq.ExportedTranslator` (encoder + cached step
  graphs; the texts must agree), 1 / 32 sentences;
* rl ``td3.halfcheetah-v5``: ``agent.act(obs)`` vs the policy graph, batch 1 / 256;
* hyperspectral ``hybridsn.indian-pines``: raw 25x25x200 windows through standardise + PCA + network,
  batch 1 / 256; ``hsi-pca-svm.indian-pines``: scikit-learn's ``predict`` vs the skl2onnx graph, 1 / 4096 pixels;
* video ``video-tsn.synthetic-actions`` (8 segments, 64x64; batch 1 / 8) and ``r2plus1d_18``
  (default build, 16 frames at 112x112; batch 1 / 4).

onnxruntime gets as many intra-op threads as torch has (``--threads N`` sets both; on a machine shared with
other work, one thread each is the fairer comparison: torch's spinning OpenMP workers suffer most from
oversubscription, and the 1-minute load average before and after is recorded). Reported: median milliseconds per call over
``--repeats`` interleaved repeats (each repeat times enough calls to last ~0.3 s), and the ratio
PyTorch / onnxruntime (> 1: the export is faster).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/export_latency.py             # ~10 min on 2 cores
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/export_latency.py --threads 1
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/export_latency.py --quick     # smoke: small inputs, 2 repeats
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import _harness

import zoo
from zoo.hub import shared_data_root

NAME = "export_latency"
Case = tuple[Callable[[], object], Callable[[], object]]  # (pytorch call, onnxruntime call)


def _session(path: Path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = torch.get_num_threads()
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _export(model, path: Path, **options) -> tuple[Path, float]:
    """``zoo.export`` (verified against PyTorch on the way), and how long it took."""
    t0 = time.perf_counter()
    res = zoo.export(model, path, **options)
    return res.path, time.perf_counter() - t0


def _tensor_cases(module, session, inputs: dict[int, np.ndarray]) -> dict[int, Case]:
    """``module(x).numpy()`` vs ``session.run`` for each batch size."""
    name = session.get_inputs()[0].name

    def torch_call(x):
        with torch.inference_mode():
            return module(torch.from_numpy(x)).numpy()

    return {b: ((lambda x=x: torch_call(x)), (lambda x=x: session.run(None, {name: x})[0])) for b, x in inputs.items()}


def vision(out: Path, quick: bool) -> tuple[dict[int, Case], float]:
    model = zoo.build("resnet18", weights="cifar10").eval()
    path, elapsed = _export(model, out / "resnet18.onnx")
    rng = np.random.default_rng(0)
    inputs = {b: rng.standard_normal((b, 3, 32, 32), dtype=np.float32) for b in (1, 8 if quick else 64)}
    return _tensor_cases(model, _session(path), inputs), elapsed


def _sentences(n: int) -> list[str]:
    from zoo.seq2seq import load_multi30k

    root = shared_data_root() / "multi30k"
    try:
        return load_multi30k(root, "test_2016_flickr", "de-en").src[:n]
    except (FileNotFoundError, OSError):
        base = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball im Park.",
                "Eine Frau mit einem roten Hut liest ein Buch."]
        return (base * n)[:n]


def seq2seq(out: Path, quick: bool) -> tuple[dict[int, Case], float]:
    from zoo.seq2seq import ExportedTranslator

    model = zoo.build("seq2seq-transformer", weights="multi30k-de-en").eval()
    path, elapsed = _export(model, out / "de_en")
    runner = ExportedTranslator(path, threads=torch.get_num_threads())
    cases = {}
    for n in (1, 8 if quick else 32):
        sents = _sentences(n)
        # fp32 on both sides: onnxruntime runs the fp32 graph
        same = runner.translate(sents) == model.translate(sents, beam_size=1, amp=None)
        print(f"seq2seq: {n} sentences, onnxruntime text == PyTorch greedy text: {same}", file=sys.stderr)
        if not same:
            raise SystemExit("the exported translator disagrees with PyTorch greedy decoding")
        cases[n] = ((lambda s=sents: model.translate(s, beam_size=1, batch_size=64, amp=None)),
                    (lambda s=sents: runner.translate(s, batch_size=64)))
    return cases, elapsed


def rl(out: Path, quick: bool) -> tuple[dict[int, Case], float]:
    agent = zoo.build("td3", weights="halfcheetah-v5")
    path, elapsed = _export(agent, out / "policy.onnx")
    session = _session(path)
    rng = np.random.default_rng(0)
    cases = {}
    for b in (1, 256):
        obs = rng.standard_normal((b, agent.obs_dim), dtype=np.float32)
        cases[b] = ((lambda o=obs: agent.act(o)), (lambda o=obs: session.run(None, {"observation": o})[0]))
    return cases, elapsed


def hybridsn(out: Path, quick: bool) -> tuple[dict[int, Case], float]:
    from zoo.hyperspectral.export import RawWindowClassifier

    model = zoo.build("hybridsn", weights="indian-pines").eval()
    path, elapsed = _export(model, out / "hybridsn.onnx")
    mean, scale = model.pre_mean.numpy(), model.pre_scale.numpy()
    rng = np.random.default_rng(0)
    inputs = {b: (mean + scale * rng.standard_normal((b, 25, 25, mean.size))).astype(np.float32)
              for b in (1, 32 if quick else 256)}
    return _tensor_cases(RawWindowClassifier(model).eval(), _session(path), inputs), elapsed


def pca_svm(out: Path, quick: bool) -> tuple[dict[int, Case], float]:
    pipe = zoo.build("hsi-pca-svm", weights="indian-pines")
    path, elapsed = _export(pipe, out / "svm.onnx")
    session = _session(path)
    scaler = pipe.steps[0][1]
    rng = np.random.default_rng(0)
    cases = {}
    for b in (1, 512 if quick else 4096):
        px = (scaler.mean_ + scaler.scale_ * rng.standard_normal((b, scaler.n_features_in_))).astype(np.float32)
        cases[b] = ((lambda x=px: pipe.predict(x)), (lambda x=px: session.run(["label"], {"pixels": x})[0]))
    return cases, elapsed


def tsn(out: Path, quick: bool) -> tuple[dict[int, Case], float]:
    model = zoo.build("video-tsn", weights="synthetic-actions").eval()
    path, elapsed = _export(model, out / "tsn.onnx", frames=8, size=64)
    rng = np.random.default_rng(0)
    inputs = {b: rng.standard_normal((b, 3, 8, 64, 64), dtype=np.float32) for b in (1, 2 if quick else 8)}
    return _tensor_cases(model, _session(path), inputs), elapsed


def r2plus1d(out: Path, quick: bool) -> tuple[dict[int, Case], float]:
    torch.manual_seed(0)
    model = zoo.build("r2plus1d_18").eval()
    frames, size = (8, 56) if quick else (16, 112)
    path, elapsed = _export(model, out / "r2plus1d.onnx", frames=frames, size=size)
    rng = np.random.default_rng(0)
    inputs = {b: rng.standard_normal((b, 3, frames, size, size), dtype=np.float32) for b in (1, 2 if quick else 4)}
    return _tensor_cases(model, _session(path), inputs), elapsed


FAMILIES = {"vision": vision, "seq2seq": seq2seq, "rl": rl, "hybridsn": hybridsn, "hsi-pca-svm": pca_svm,
            "video-tsn": tsn, "r2plus1d_18": r2plus1d}
PEER_NAME = {"hsi-pca-svm": "scikit-learn"}


def _per_call_ms(fn: Callable[[], object], calls: int) -> Callable[[], float]:
    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls * 1e3

    return run


def _calls_for(fn: Callable[[], object], budget_s: float = 0.3) -> int:
    t = _harness.timed(fn)  # also a warm-up: first-call allocations stay out of the repeats
    return max(1, min(200, int(budget_s / max(t, 1e-6))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", nargs="*", choices=sorted(FAMILIES), help="measure only these")
    ap.add_argument("--quick", action="store_true", help="smoke run: smaller inputs and 2 repeats")
    ap.add_argument("--threads", type=int, help="torch and onnxruntime intra-op threads (default: torch's); "
                    "results go to export_latency_<N>threads.json when given")
    args = _harness.parse_args(ap, None, __file__)
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = 2 if args.quick else args.repeats
    load_before = os.getloadavg()  # other work on the machine slows torch's spinning threads most: recorded
    metrics, peers, ratios, export_s = {}, {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="zoo-export-bench-") as tmp:
        for fam in args.only or list(FAMILIES):
            print(f"== {fam}", file=sys.stderr, flush=True)
            cases, export_s[fam] = FAMILIES[fam](Path(tmp), args.quick)
            for batch, (pt, ox) in cases.items():
                calls = max(_calls_for(pt), _calls_for(ox))
                samples = _harness.interleave({"pytorch": _per_call_ms(pt, calls), "onnxruntime": _per_call_ms(ox, calls)},
                                              repeats=repeats, warmup=1)
                key = f"{fam}.batch{batch}_ms"
                ours, peer = _harness.median(samples["onnxruntime"]), _harness.median(samples["pytorch"])
                metrics[key] = round(ours, 4)
                peers.setdefault(PEER_NAME.get(fam, "pytorch"), {})[key] = round(peer, 4)
                ratios[key] = round(peer / ours, 3)
    import onnxruntime

    _harness.write_result(
        NAME + (f"_{args.threads}threads" if args.threads else ""), metrics=metrics, peers=peers, ratios=ratios,
        extra={"export_seconds": {k: round(v, 2) for k, v in export_s.items()}, "onnxruntime": onnxruntime.__version__,
               "repeats": repeats, "quick": args.quick,
               "loadavg_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
               "notes": "ours = the zoo.export ONNX graph in onnxruntime (ms per call, median); peer = the same "
                        "model in PyTorch eager (scikit-learn for hsi-pca-svm); ratio = peer / ours (> 1: the "
                        "export is faster)"})


if __name__ == "__main__":
    main()
