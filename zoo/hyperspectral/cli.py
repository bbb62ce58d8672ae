"""Command line of the hyperspectral family: ``zoo hsi-fetch``, what ``zoo predict`` does with a scene (one per
command; its label map written by ``--out`` as .npy and .png) and the ``zoo demo`` step (Indian Pines with
the shipped weights, else a generated scene). ``zoo train/eval/predict hsi-pca-svm|hybridsn --data SCENE``
pass the scene file or data set name to ``zoo.train`` / ``zoo.evaluate`` / ``zoo.predict``."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from zoo.cli import PredictRules, UsageError, command, demo, family_options, json_line, predict_rules

__all__ = ["label_map_paths", "label_map_png", "show_label_map", "write_label_map"]


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


# --- zoo predict: a scene's label map --------------------------------------------------------------


def label_map_paths(out: str | None, scene: str = "-") -> tuple[Path, Path] | None:
    """``--out`` as the .npy and .png it writes: a .npy / .png suffix is replaced, any other kept (``map.v2`` is
    ``map.v2.npy``, not ``map.npy``); a folder (one that exists, or written with a trailing ``/``) gets
    ``SCENE_map.npy`` and ``.png`` inside, named after the scene predicted (``outs/`` wrote ``outs.npy``). A
    folder that is not there is refused, as ``zoo train --out`` does, rather than made for a mistyped path."""
    if out is None:
        return None
    path = Path(out).expanduser()
    if out.endswith(("/", os.sep)) or path.is_dir():
        if not path.is_dir():
            raise UsageError(f"--out {out}: folder {path} does not exist")
        name = Path(scene).stem if scene not in ("-", "") else "label"
        path = path / f"{name}_map"
    stem = path.with_suffix("") if path.suffix.lower() in (".npy", ".png") else path
    folder = stem.parent if str(stem.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"--out {out}: folder {folder} does not exist")
    npy, png = stem.with_name(stem.name + ".npy"), stem.with_name(stem.name + ".png")
    from zoo import fs

    try:  # now, not after the whole scene is predicted
        fs.check_writable(folder, "--out folder", (npy.name, png.name))
    except fs.FsError as err:
        raise UsageError(f"--out {out}: {err}") from None
    return npy, png


def write_label_map(label_map: Any, out: str | os.PathLike, scene: str = "-",
                     quiet: bool = False) -> tuple[Path, Path]:
    """Write ``--out``'s .npy and .png (see :func:`label_map_paths`); says where unless ``quiet``."""
    import io

    import numpy as np

    from zoo import fs

    npy, png = label_map_paths(os.fspath(out), scene)
    buf = io.BytesIO()  # np.save seeks; the atomic writer streams
    np.save(buf, label_map)
    fs.write_bytes(npy, buf.getbuffer())
    label_map_png(np.asarray(label_map), png)
    if not quiet:
        print(f"label map {label_map.shape[0]}x{label_map.shape[1]} written to {npy} and {png}")
    return npy, png


def label_map_png(label_map: Any, path: Path) -> Path:
    """The map as a picture, one pixel per scene pixel in the family's class colours (0, unlabelled,
    black): what `--out` promises besides the .npy, for a look without loading the array."""
    import io

    import numpy as np
    from PIL import Image

    from zoo import fs
    from zoo.hyperspectral.evaluation import class_colors

    palette = np.round(class_colors(max(int(label_map.max()), 1)) * 255).astype(np.uint8)  # (n + 1, 3)
    buf = io.BytesIO()
    Image.fromarray(palette[np.clip(label_map, 0, None)]).save(buf, format="PNG")
    fs.write_bytes(path, buf.getbuffer())
    return path


def show_label_map(result: Any, args: argparse.Namespace) -> int | None:
    """``zoo predict``'s lines for a scene's label map (pixels per class), written to ``--out`` when given;
    None for a result that is not a label map."""
    import numpy as np

    arr = np.asarray(result)
    # a scene of one row or column (a single scan line) has a label map too: its --out was not written
    if not (arr.ndim == 2 and arr.dtype.kind in "iu"):
        return None
    written = write_label_map(arr, args.out, str(args.inputs[0]), quiet=args.json) if args.out else None
    classes, counts = np.unique(arr, return_counts=True)
    if args.json:  # what the lines say, and the map itself where no file holds it
        row = {"shape": list(arr.shape), "pixels_per_class": dict(zip(map(str, classes.tolist()), counts.tolist()))}
        row.update({"npy": str(written[0]), "png": str(written[1])} if written else {"label_map": arr.tolist()})
        print(json_line(row))
    elif not written:
        print(f"label map {arr.shape[0]}x{arr.shape[1]}; pixels per class: "
              + ", ".join(f"{c}: {n}" for c, n in zip(classes.tolist(), counts.tolist()))
              + " (--out FILE writes it as .npy and .png)")
    return 0


predict_rules("hyperspectral", PredictRules(one_input="scene", out="a scene's label map", check_out=label_map_paths,
                                            show=show_label_map))


def _demo_out() -> Path:
    """Where the demo's maps go: ``$ZOO_HOME/demo``, or a new folder in the system's temp folder when that
    cannot be written (a read-only home whose weights are cached: else the whole step would fail for its PNGs)."""
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
        s = score_map(pred, scene.labels, split.test, num_classes=16)
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
        s = score_map(pred, scene.labels, split.test, num_classes=16)
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
