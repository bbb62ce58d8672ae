"""Command line of the hyperspectral family: ``zoo hsi-fetch`` and the ``zoo demo`` step (Indian Pines with
the shipped weights, else a generated scene). ``zoo train/eval/predict hsi-pca-svm|hybridsn --data SCENE``
pass the scene file or data set name to ``zoo.train`` / ``zoo.evaluate`` / ``zoo.predict``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from zoo.cli import command, demo, family_options

__all__: list[str] = []


def _configure_fetch(p: argparse.ArgumentParser) -> None:
    from zoo.hyperspectral.datasets import DATASETS

    p.add_argument("name", choices=sorted(DATASETS), help="public scene to download into $ZOO_HOME/datasets")
    p.add_argument("--allow-unverified", action="store_true",
                   help="download files whose sha256 zoo does not pin (their hash is recorded beside the file, "
                        "and a changed file is refused when the scene loads)")
    p.add_argument("--force", action="store_true", help="download again even if cached")


@command("hsi-fetch", "download a public hyperspectral scene (sha256-verified) into the zoo cache", _configure_fetch)
def _cmd_fetch(args: argparse.Namespace) -> int:
    from zoo.hyperspectral.datasets import fetch

    folder = fetch(args.name, allow_unverified=args.allow_unverified, force=args.force)
    print(f"{args.name}: {folder}")
    return 0


def _configure_scene(p: argparse._ActionsContainer) -> None:
    p.add_argument("--labels", help="ground truth for --data (.npy, .mat, ENVI, PNG/TIFF label map)")


@family_options("hyperspectral", _configure_scene)
def _scene_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--labels FILE`` becomes ``labels=FILE`` for ``zoo.train`` / ``zoo.evaluate``; ``--set split=...`` and
    ``--set train_mask=FILE`` (a disjoint training mask) go there as they are."""
    return {"labels": args.labels} if getattr(args, "labels", None) else {}


def _demo_out() -> Path:
    """Where the demo's maps go: ``$ZOO_HOME/demo``, or a new folder in the system's temp folder when that
    cannot be written (a read-only home whose weights are cached: the whole step failed for its PNGs)."""
    import os
    import tempfile

    from zoo.hub import zoo_home

    out = zoo_home() / "demo"
    try:
        out.mkdir(parents=True, exist_ok=True)
        if os.access(out, os.W_OK):
            return out
    except OSError:
        pass
    elsewhere = Path(tempfile.mkdtemp(prefix="zoo-demo-"))
    print(f"(cannot write to {out}: the maps go to {elsewhere})")
    return elsewhere


@demo("hyperspectral: classify Indian Pines (PCA+SVM and HybridSN maps)", order=40)
def _demo() -> None:

    import zoo
    from zoo.hyperspectral.datasets import load_dataset
    from zoo.hyperspectral.evaluation import plot_classification_map, score_map
    from zoo.hyperspectral.splits import random_split

    t0 = time.perf_counter()
    try:
        scene = load_dataset("indian_pines")
    except FileNotFoundError as err:
        print(f"Indian Pines not found ({err}).")
        print("Get it with: zoo hsi-fetch indian_pines   -- running the PCA+SVM pipeline on a generated scene.")
        _demo_synthetic()
        return
    out = _demo_out()
    split = random_split(scene.labels, 0.3, seed=0)
    have = set(zoo.list_weights("hsi-pca-svm"))
    if "hsi-pca-svm.indian-pines" in have:
        svm = zoo.build("hsi-pca-svm", weights="indian-pines")
        pred = svm.predict_scene(scene)
        s = score_map(pred, scene.labels, split.test, n_classes=16)
        png = plot_classification_map(pred, scene.labels, out / "indian_pines_pca_svm_map.png",
                                      class_names=scene.class_names, test_mask=split.test,
                                      title=f"PCA+SVM (shipped weights): OA {s['overall_accuracy']:.2f} %")
        print(f"hsi-pca-svm.indian-pines: OA {s['overall_accuracy']:.2f}  AA {s['average_accuracy']:.2f}  "
              f"kappa {s['kappa']:.2f} on {s['n_test']} test pixels (30 % random split, seed 0); map: {png}")
    else:
        print("hsi-pca-svm.indian-pines is not in the weights manifest (benchmarks/hsi_indian_pines.py publishes it)")
    if "hybridsn.indian-pines" in set(zoo.list_weights("hybridsn")):
        net = zoo.build("hybridsn", weights="indian-pines")
        t1 = time.perf_counter()
        pred = net.predict_scene(scene)  # every pixel in one dense pass (amp="auto": bf16 only where fast)
        dt = time.perf_counter() - t1
        s = score_map(pred, scene.labels, split.test, n_classes=16)
        png = plot_classification_map(pred, scene.labels, out / "indian_pines_hybridsn_map.png",
                                      class_names=scene.class_names, test_mask=split.test,
                                      title=f"HybridSN (shipped weights): OA {s['overall_accuracy']:.2f} %")
        print(f"hybridsn.indian-pines: OA {s['overall_accuracy']:.2f}  AA {s['average_accuracy']:.2f}  kappa "
              f"{s['kappa']:.2f} on {s['n_test']} test pixels; the full {scene.shape[0]}x{scene.shape[1]} map "
              f"in {dt:.1f} s; map: {png}")
    else:
        print("hybridsn.indian-pines is not in the weights manifest (benchmarks/hsi_indian_pines.py publishes it)")
    print(f"({time.perf_counter() - t0:.1f} s)")


def _demo_synthetic() -> None:
    import zoo
    from zoo.hyperspectral.evaluation import plot_classification_map
    from zoo.hyperspectral.synthetic import make_scene

    scene = make_scene(64, 64, 60, 5, seed=0)
    svm = zoo.build("hsi-pca-svm", n_components=10)
    zoo.train(svm, scene, split="random", train_fraction=0.2)
    m = zoo.evaluate(svm, scene)
    png = plot_classification_map(svm.predict_scene(scene), scene.labels, _demo_out() / "synthetic_pca_svm_map.png",
                                  class_names=scene.class_names, title="PCA+SVM on a generated scene")
    print(f"generated 64x64x60 scene, 5 classes: OA {100 * m['overall_accuracy']:.2f} %  kappa {m['kappa']:.3f}; map: {png}")
