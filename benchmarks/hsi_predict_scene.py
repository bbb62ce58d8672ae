"""HybridSN over a whole scene: one dense pass vs one 25x25 window per pixel (issue 15).

The shipped ``hybridsn.indian-pines`` weights predict every pixel of the 145x145 Indian Pines scene
(21,025 pixels) with ``predict_scene(method="dense")`` (the convolutions once over the padded scene, the
dense head as convolutions) and with ``method="windows"`` (a window per pixel, batches of 256, the path
every pixel took before), in the same run, interleaved, at ``amp="auto"`` (bf16 where this CPU has
native bf16 convolutions, else fp32) and at fp32. Also recorded: the share of pixels on which the two
maps agree, and the largest logit difference of the two paths on a sample of pixels (fp32).
Goal: the full map in <= 10 s on 2 cores of either CPU kind.

The shipped ``hsi-pca-svm.indian-pines`` pipeline labels the same 21,025 pixels with ``predict_scene`` (its
rows shared out over torch's threads: libsvm releases the GIL) and with scikit-learn's own
``Pipeline.predict`` on the same pixels, extracted beforehand, interleaved in the same run at the same thread
setting; the labels must be identical.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/hsi_predict_scene.py
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \\
        flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/hsi_predict_scene.py      # an AVX2-only CPU
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _harness import interleave, median, parse_args, write_result

import zoo
from zoo.engine.precision import auto_amp, model_op_kind
from zoo.engine.threads import torch_threads

NAME = "hsi_predict_scene"


def logit_gap(net, scene, n: int = 256) -> float:
    """Largest |dense - window| logit over ``n`` random pixels, fp32, eval mode (dropout off)."""
    from zoo.hyperspectral.patches import PatchDataset, pad_cube

    net.eval()
    reduced = net.reduce(scene)
    r = net.config.window // 2
    rng = np.random.default_rng(0)
    coords = np.stack([rng.integers(0, s, n) for s in scene.shape[:2]], 1)
    padded = torch.from_numpy(np.ascontiguousarray(pad_cube(reduced, r, net.padding).transpose(2, 0, 1)))
    ds = PatchDataset(reduced, coords, window=net.config.window, padding=net.padding)
    with torch.inference_mode():
        dense = net.dense_forward(padded)[:, coords[:, 0], coords[:, 1]].T  # (n, classes)
        windows = net(torch.stack([ds[i][0] for i in range(n)]))
    return float((dense - windows).abs().max())


def svm_maps(scene, repeats: int) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    """Seconds per full map of the shipped PCA+SVM, ours (``predict_scene``) and scikit-learn's
    ``Pipeline.predict`` of the same pixels, interleaved after a warm-up, and the labels each gave."""
    from sklearn.pipeline import Pipeline

    svm = zoo.build("hsi-pca-svm", weights="indian-pines")
    pixels = scene.pixels()
    runs = {"ours": lambda: svm.predict_scene(scene), "sklearn": lambda: Pipeline.predict(svm, pixels)}
    labels = {}

    def timed(key: str) -> Callable[[], float]:
        def case() -> float:
            t0 = time.perf_counter()
            labels[key] = runs[key]()
            return time.perf_counter() - t0
        return case

    return interleave({key: timed(key) for key in runs}, repeats=repeats), labels


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3, help="dense-pass repeats (the window path runs once)")
    p.add_argument("--no-windows-fp32", action="store_true", help="skip the (slow) fp32 window path")
    args = parse_args(p, argv, __file__)
    from zoo.hyperspectral.datasets import load_dataset

    scene = load_dataset("indian_pines")
    net = zoo.build("hybridsn", weights="indian-pines")
    auto = auto_amp("cpu", model_op_kind(net)) or "fp32"  # what predict_scene resolves "auto" to
    times: dict[str, list[float]] = {"dense_auto": [], "dense_fp32": [], "windows_auto": [], "windows_fp32": []}
    maps = {}
    runs = {"dense_auto": ("dense", "auto"), "dense_fp32": ("dense", None), "windows_auto": ("windows", "auto"),
            "windows_fp32": ("windows", None)}
    if auto == "fp32":  # then "auto" and fp32 are the same computation: time it once
        for k in ("dense_auto", "windows_auto"):
            runs.pop(k)
    if args.no_windows_fp32:
        runs.pop("windows_fp32")
    with torch_threads(args.threads):
        net.predict_scene(scene, method="dense")  # warm-up: kernel selection, weight packing
        for r in range(args.repeats):
            for key, (method, amp) in runs.items():
                if method == "windows" and r > 0:
                    continue
                t0 = time.perf_counter()
                maps[key] = net.predict_scene(scene, method=method, amp=amp, batch_size=256)
                times[key].append(time.perf_counter() - t0)
                print(f"repeat {r + 1}: {key} {times[key][-1]:.2f} s", file=sys.stderr, flush=True)
        gap = logit_gap(net, scene)
        svm_times, svm_labels = svm_maps(scene, args.repeats)
    med = {k: median(v) for k, v in times.items() if v}
    tag = "auto" if "dense_auto" in med else "fp32"
    metrics = {"auto_precision": auto, "pixels": int(np.prod(scene.shape[:2])), "threads": args.threads,
               "full_map_s": med[f"dense_{tag}"], "full_map_fp32_s": med["dense_fp32"],
               "max_logit_diff_dense_vs_windows_fp32": gap}
    peers = {"per_window": {"full_map_s": med.get(f"windows_{tag}"), "full_map_fp32_s": med.get("windows_fp32")}}
    ratios = {k: peers["per_window"][k] / metrics[k] for k in ("full_map_s", "full_map_fp32_s")
              if peers["per_window"].get(k)}
    metrics["svm_full_map_s"] = median(svm_times["ours"])
    peers["sklearn_predict"] = {"svm_full_map_s": median(svm_times["sklearn"])}
    ratios["svm_full_map_s"] = peers["sklearn_predict"]["svm_full_map_s"] / metrics["svm_full_map_s"]
    ratios["svm_full_map_s_paired"] = median([b / a for a, b in zip(svm_times["ours"], svm_times["sklearn"])])
    metrics["svm_labels_identical"] = bool((svm_labels["ours"].reshape(-1) == svm_labels["sklearn"]).all())
    times.update({f"svm_{k}": v for k, v in svm_times.items()})
    for a in ("auto", "fp32"):
        if f"dense_{a}" in maps and f"windows_{a}" in maps:
            metrics[f"maps_agree_{a}"] = float((maps[f"dense_{a}"] == maps[f"windows_{a}"]).mean())
    write_result(NAME, metrics=metrics, peers=peers, ratios=ratios,
                 extra={"runs_s": times, "goals": {"full_map_s": "<= 10 on 2 cores"},
                        "notes": "per_window = predict_scene(method='windows'), the per-pixel path; "
                                 "sklearn_predict = scikit-learn's Pipeline.predict of hsi-pca-svm on the "
                                 "scene's pixels (ours: its predict_scene)"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
