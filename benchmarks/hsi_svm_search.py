"""``zoo.train(hsi-pca-svm, search=True)`` on both cores vs scikit-learn's one job (issue 15: no default path
slower than it needs to be).

The grid search of the PCA+SVM pipeline on Indian Pines' published protocol (30 % random training pixels, seed 0;
``pca__n_components`` 30 / 50 / 70 x ``svm__C`` 30 / 100 / 300, 3 stratified folds: 27 fits, then the refit on
every training pixel), with ``zoo.train``'s default ``n_jobs=None`` (the fits on torch's threads, BLAS on one
thread meanwhile) against ``n_jobs=1`` (scikit-learn's default: one job), interleaved in the same run at the
same thread setting, after a warm-up of each. The chosen setting, its cross-validation accuracy and the
training accuracy must be equal.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/hsi_svm_search.py
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _harness import interleave, median, parse_args, write_result

import zoo
from zoo.engine.threads import torch_threads

NAME = "hsi_svm_search"
GRID = {"pca__n_components": [30, 50, 70], "svm__C": [30.0, 100.0, 300.0], "svm__gamma": ["scale"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    args = parse_args(p, argv, __file__)
    from zoo.hyperspectral.datasets import load_dataset

    scene = load_dataset("indian_pines")
    found: dict[str, tuple] = {}

    def search(key: str, n_jobs: int | None) -> Callable[[], float]:
        def case() -> float:
            svm = zoo.build("hsi-pca-svm")
            t0 = time.perf_counter()
            h = zoo.train(svm, scene, split="random", seed=0, search=True, param_grid=GRID, cv=3,
                          n_jobs=n_jobs).history[0]
            found[key] = (h["best_params"], h["cv_accuracy"], h["train_accuracy"])
            return time.perf_counter() - t0
        return case

    with torch_threads(args.threads):  # zoo.train's n_jobs: None (ours) against 1
        times = interleave({"ours": search("ours", None), "one_job": search("one_job", 1)}, repeats=args.repeats)
    best, cv_acc, train_acc = found["ours"]
    metrics = {"search_s": median(times["ours"]), "threads": args.threads, "fits": 27, "best_params": best,
               "cv_accuracy": cv_acc, "train_accuracy": train_acc,
               "same_result_as_one_job": found["ours"] == found["one_job"]}
    peers = {"sklearn_one_job": {"search_s": median(times["one_job"])}}
    ratios = {"search_s": peers["sklearn_one_job"]["search_s"] / metrics["search_s"],
              "search_s_paired": median([b / a for a, b in zip(times["ours"], times["one_job"])])}
    write_result(NAME, metrics=metrics, peers=peers, ratios=ratios,
                 extra={"runs_s": times, "settings": {"grid": GRID, "cv": 3, "split": "random 30 %, seed 0"},
                        "notes": "sklearn_one_job = the same zoo.train with n_jobs=1: scikit-learn's GridSearchCV "
                                 "in one job, its default; ours = n_jobs=None: the fits on torch's threads"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
