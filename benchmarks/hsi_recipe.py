"""Claim (issue 18): a HybridSN training recipe that generalises across fields on Indian Pines.

On the spatially disjoint split (``indianpines_disjoint_dset.mat``: whole fields train, other fields test)
the paper's recipe overfits (train loss 0.008, test OA 79.45 against PCA+SVM's 83.38). Each change a
practitioner would try is one *variant* (``key=value,...`` on top of the old recipe), trained on the same
split with the same seeds; PCA+SVM (3-fold CV over components and C, as in hsi_indian_pines.py) is
measured in the same run. Goal: the best zoo network >= SVM + 5 OA on the disjoint split; >= 99.5 OA on
the 30 % random split (HybridSN protocol, PCA fitted on training pixels only).

Variant keys: model ``window``, ``dropout``, ``n_bands``, ``spectral_norm`` (``l2``: unit spectra); training
``epochs``, ``lr``, ``batch_size``, ``weight_decay``, ``label_smoothing``, ``augment`` (quarter turns + mirrors), ``noise_std`` (Gaussian
noise on the whitened PCA components), ``val_fraction`` / ``val_block`` (held-out training tiles, best
epoch kept), ``early_stopping_patience``, ``ema_decay`` (the run ends with an exponential moving average of
its weights). ``--tta`` also scores every trained network with test-time augmentation (``<variant>+tta``).
``baseline`` is the old recipe (window 25, dropout 0.4, weight decay 1e-4, 15 epochs, no augmentation);
``recipe`` is the new default recipe (RECIPE below: window 15 + augmentation + unit spectra),
``recipe-v2`` and ``recipe-v1`` the ones before it (v1: window 15 + augmentation; v2: v1 + weight average +
weight decay 0.05).
Results accumulate per split / variant / seed in results/hsi_recipe.json (a rerun of the same triple
replaces it). ``--publish`` adds the seed-0 ``recipe`` run as ``hybridsn.indian-pines-disjoint`` (fp16)
when it scores a higher OA than the published file on the same test pixels (``--publish-anyway``: always).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/hsi_recipe.py --variants baseline augment=true window=15
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/hsi_recipe.py --variants recipe --seeds 0 1 2 --publish
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/hsi_recipe.py --split random --variants recipe
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import command_line, may_publish_weights, parse_args, result_file, write_result

import zoo
from zoo.hyperspectral import load_dataset, resolve_split

NAME = "hsi_recipe"
PUBLISHED = "hybridsn.indian-pines-disjoint"  # what --publish writes
MODEL_KEYS = ("window", "dropout", "n_bands", "spectral_norm")
# the recipe of the published hybridsn.indian-pines disjoint figure (benchmarks/hsi_indian_pines.py)
BASELINE: dict[str, Any] = {"window": 25, "dropout": 0.4, "n_bands": 30, "spectral_norm": "none", "epochs": 15,
                            "batch_size": 64, "lr": 1e-3, "weight_decay": 1e-4, "schedule": "cosine", "warmup_steps": 20,
                            "amp": "auto"}
# measured 2026-12-01, disjoint split, seed 0 (results/hsi_recipe.json): window 25 -> 15 OA 75.3 -> 83.6;
# + augment 87.6 (AA 86.5, the best balance); + noise_std 0.2 87.8 but AA 82.4; + label smoothing 0.1 88.0
# but AA 71.4; held-out tiles (val_fraction 0.2) 82.0; 30 epochs 86.4; window 11 81.0. Seeds 0-2 of window 15 +
# augment ("recipe-v1"): 85.75 +- 1.98. Held-out tiles showed the validation loss rising after epoch 4 while the
# training loss fell to 0.004: the weights wander; their moving average (ema_decay) was the next change, and a
# weight decay that is more than nominal (AdamW 0.05, as timm's recipes) the one after it.
# Exploration on 2026-12-01 (an ad-hoc script: recipe-v1 on the scene with every spectrum divided by its L2
# norm) gave 89.87 / 90.72 / 89.43 for seeds 0-2: brightness differs from field to field, and unit spectra
# make the network see the shape of a spectrum only. PCA+SVM on the same unit spectra: 84.44 (raw 83.38).
RECIPE_V1: dict[str, Any] = {"window": 15, "augment": True}
RECIPE_V2: dict[str, Any] = {**RECIPE_V1, "ema_decay": 0.998, "weight_decay": 0.05}
RECIPE: dict[str, Any] = {**RECIPE_V1, "spectral_norm": "l2"}
TRAIN_KEYS = ("epochs", "batch_size", "lr", "weight_decay", "schedule", "warmup_steps", "amp", "label_smoothing",
              "augment", "noise_std", "val_fraction", "val_block", "early_stopping_patience", "ema_decay")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_variant(spec: str) -> dict[str, Any]:
    """``baseline`` / ``recipe`` / ``key=value,key=value`` -> the settings on top of BASELINE."""
    if spec == "baseline":
        return dict(BASELINE)
    if spec == "recipe":
        return {**BASELINE, **RECIPE}
    if spec == "recipe-v1":
        return {**BASELINE, **RECIPE_V1}
    if spec == "recipe-v2":
        return {**BASELINE, **RECIPE_V2}
    from zoo.cli import parse_kv

    items = parse_kv(spec.split(","))
    unknown = [k for k in items if k not in MODEL_KEYS + TRAIN_KEYS]
    if unknown:
        raise SystemExit(f"variant keys {unknown}: expected key=value with key in {MODEL_KEYS + TRAIN_KEYS}")
    return {**BASELINE, **items}


def train_one(scene, split: str, settings: dict[str, Any], seed: int) -> tuple[Any, dict[str, Any]]:
    net = zoo.build("hybridsn", **{k: settings[k] for k in MODEL_KEYS})
    t0 = time.perf_counter()
    res = zoo.train(net, scene, split=split, seed=seed, progress=False,
                    **{k: settings[k] for k in TRAIN_KEYS if k in settings})
    train_s = time.perf_counter() - t0
    return net, {**score(net, scene, settings, seed, tta=False), **run_facts(res, train_s)}


def score(net, scene, settings: dict[str, Any], seed: int, tta: bool) -> dict[str, Any]:
    """OA / AA / kappa / per-class accuracy on the split's test pixels (fractions)."""
    t0 = time.perf_counter()
    m = zoo.evaluate(net, scene, amp=settings["amp"], tta=tta)
    return {"seed": seed, "overall_accuracy": m["overall_accuracy"], "average_accuracy": m["average_accuracy"],
            "kappa": m["kappa"], "per_class_accuracy": [per_class(m, c) for c in range(1, 17)],
            "eval_s": round(time.perf_counter() - t0, 1), "tta": tta}


def run_facts(res, train_s: float) -> dict[str, Any]:
    hist = res.history
    return {
        "train_s": round(train_s, 1), "epochs_run": len(hist),
        "best_epoch": res.best_epoch if "val_loss" in hist[-1] else None,
        "train_loss": [round(h["train_loss"], 4) for h in hist],
        "val_loss": [round(h["val_loss"], 4) for h in hist if "val_loss" in h] or None,
        "held_out_pixels": hist[-1].get("held_out_pixels"),
    }


def record(split_runs: dict[str, Any], variant: str, settings: dict[str, Any], seed: int, run: dict[str, Any]) -> None:
    """File one seed's run under its variant (a rerun of the same seed replaces it)."""
    entry = split_runs.setdefault(variant, {"settings": settings, "seeds": {}})
    entry["settings"] = settings
    entry["seeds"][str(seed)] = run


def per_class(m: dict[str, float], c: int) -> float | None:
    """Class ``c``'s accuracy (fraction), None where the test pixels hold no pixel of it."""
    v = m.get(f"class_{c}_accuracy")
    return None if v is None else round(v, 4)


def svm_peer(scene, split: str) -> dict[str, Any]:
    svm = zoo.build("hsi-pca-svm")
    t0 = time.perf_counter()
    zoo.train(svm, scene, split=split, search=True, cv=3,
              param_grid={"pca__n_components": [30, 50, 70], "svm__C": [30.0, 100.0, 300.0], "svm__gamma": ["scale"]})
    m = zoo.evaluate(svm, scene)
    return {"overall_accuracy": m["overall_accuracy"], "average_accuracy": m["average_accuracy"], "kappa": m["kappa"],
            "per_class_accuracy": [per_class(m, c) for c in range(1, 17)],
            "train_s": round(time.perf_counter() - t0, 1)}


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Mean +- std over seeds, in % (OA / AA / kappa), of one variant's runs."""
    rs = list(runs.values())
    out: dict[str, Any] = {}
    for key, short in (("overall_accuracy", "OA"), ("average_accuracy", "AA"), ("kappa", "kappa")):
        vals = [100 * r[key] for r in rs]
        out[short] = round(statistics.fmean(vals), 2)
        out[f"{short}_std"] = round(statistics.stdev(vals), 2) if len(vals) > 1 else None
    out["seeds"] = len(rs)
    out["train_s"] = round(statistics.median(r["train_s"] for r in rs), 1)
    return out


def details(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per-seed figures of one variant, kept in the JSON beside the README table."""
    rs = list(runs.values())
    return {"seeds": [r["seed"] for r in rs], "OA_per_seed": [round(100 * r["overall_accuracy"], 2) for r in rs],
            "epochs_run": [r["epochs_run"] for r in rs], "best_epoch": [r["best_epoch"] for r in rs],
            "per_class_mean": [None if any(r["per_class_accuracy"][c] is None for r in rs) else
                               round(100 * statistics.fmean(r["per_class_accuracy"][c] for r in rs), 2)
                               for c in range(16)]}


def load_old() -> dict[str, Any]:
    path = result_file(NAME)
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("benchmark") == NAME:
            return old
    return {}


def class_counts(scene, sp) -> dict[str, list[int]]:
    return {part: [int((scene.labels[mask] == c).sum()) for c in range(1, 17)]
            for part, mask in (("train", sp.train), ("test", sp.test))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="disjoint", choices=["disjoint", "random"])
    ap.add_argument("--variants", nargs="+", default=["baseline", "recipe"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--publish", action="store_true",
                    help="publish the seed-0 'recipe' run as hybridsn.indian-pines-disjoint if it scores a higher "
                         "OA than the published file on the same test pixels")
    ap.add_argument("--publish-anyway", action="store_true",
                    help="with --publish: replace the published file even if the new run scores lower")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--tta", action="store_true",
                    help="also score each trained network with test-time augmentation (the window's eight "
                         "symmetries), filed as the variant '<variant>+tta'")
    args = parse_args(ap, argv, __file__)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.publish and (args.split != "disjoint" or "recipe" not in args.variants or 0 not in args.seeds):
        raise SystemExit("--publish needs --split disjoint and the 'recipe' variant with seed 0")
    settings = {v: parse_variant(v) for v in args.variants}
    scene = load_dataset("indian_pines")
    sp = resolve_split(scene, split=args.split)
    old = load_old()
    runs: dict[str, Any] = old.get("runs", {})
    split_runs = runs.setdefault(args.split, {})
    log(f"{args.split} split: PCA+SVM peer")
    svm = svm_peer(scene, args.split)
    log(f"  PCA+SVM OA {100 * svm['overall_accuracy']:.2f} in {svm['train_s']:.0f} s")
    published = old.get("published")
    for seed in args.seeds:
        for v in args.variants:
            log(f"{args.split} / {v} / seed {seed}: {settings[v]}")
            net, r = train_one(scene, args.split, settings[v], seed)
            log(f"  OA {100 * r['overall_accuracy']:.2f} AA {100 * r['average_accuracy']:.2f} "
                f"in {r['train_s']:.0f} s ({r['epochs_run']} epochs, best {r['best_epoch']})")
            stamp = {"command": command_line(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            record(split_runs, v, settings[v], seed, {**r, **stamp})
            if args.tta:  # the same network, scored with test-time augmentation
                t = {**r, **score(net, scene, settings[v], seed, tta=True), **stamp}
                log(f"  with tta: OA {100 * t['overall_accuracy']:.2f} AA {100 * t['average_accuracy']:.2f}")
                record(split_runs, f"{v}+tta", {**settings[v], "tta": True}, seed, t)
            if args.publish and v == "recipe" and seed == 0 and may_publish_weights(PUBLISHED):
                incumbent = published_oa(scene, sp, settings[v]["amp"])
                if args.publish_anyway or incumbent is None or r["overall_accuracy"] > incumbent:
                    published = publish(net, r, settings[v], svm, scene, sp, args.tta)
                else:  # a worse seed must not replace a better published network
                    log(f"  not published: OA {100 * r['overall_accuracy']:.2f} <= the published file's "
                        f"{100 * incumbent:.2f} on the same pixels (--publish-anyway replaces it)")
    peers = old.get("peers", {})
    peers.setdefault("pca_svm", {})[args.split] = {k: round(100 * svm[k], 2) for k in
                                                   ("overall_accuracy", "average_accuracy", "kappa")}
    metrics = {split: {v: summarise(e["seeds"]) for v, e in vs.items()} for split, vs in runs.items()}
    ratios = {}
    for split, vs in metrics.items():
        best = max(vs, key=lambda v: vs[v]["OA"])
        ratios[f"{split}_best_variant"] = best
        ratios[f"{split}_best_OA_minus_svm"] = round(vs[best]["OA"] - peers["pca_svm"][split]["overall_accuracy"], 2)
    extra = {"summary": {split: {v: details(e["seeds"]) for v, e in vs.items()} for split, vs in runs.items()},
             "runs": runs, "svm_per_class": {**old.get("svm_per_class", {}), args.split: svm["per_class_accuracy"]},
             "class_counts": {**old.get("class_counts", {}), args.split: class_counts(scene, sp)},
             "class_names": list(scene.class_names), "baseline": BASELINE, "recipe": RECIPE,
             "goals": {"disjoint": "best zoo network OA >= PCA+SVM + 5", "random": "OA >= 99.5"}}
    if published:
        extra["published"] = published
    write_result(NAME, metrics=metrics, peers=peers, ratios=ratios, command=command_line(), extra=extra)
    return 0


def published_oa(scene, sp, amp: str) -> float | None:
    """OA of the published ``hybridsn.indian-pines-disjoint`` on ``sp``'s test pixels; None if none is published."""
    from zoo import hub

    if PUBLISHED not in hub.read_manifest(missing_ok=True):
        return None
    loaded = zoo.build("hybridsn", weights=PUBLISHED)
    return zoo.evaluate(loaded, scene, mask=sp.test, amp=amp)["overall_accuracy"]


def publish(net, r: dict[str, Any], settings: dict[str, Any], svm: dict[str, Any], scene, sp,
            tta: bool = False) -> dict[str, Any]:
    """``hybridsn.indian-pines-disjoint``: network fp16 + preprocessing fp32, figures re-measured on the file."""
    from zoo import hub

    name = PUBLISHED
    config = {"n_bands": settings["n_bands"], "num_classes": 16, "window": settings["window"],
              "dropout": settings["dropout"], "spectral_norm": settings["spectral_norm"]}
    counts = class_counts(scene, sp)
    meta = {
        "dataset": "Indian Pines (AVIRIS 1992, 145x145x200 corrected)",
        "split": "spatially disjoint: training pixels = indianpines_disjoint_dset.mat (whole fields, "
                 f"{int(sp.train.sum())} pixels), test = every other labelled pixel ({int(sp.test.sum())})",
        "license": "weights: MIT (zoo); data: CC BY 3.0, doi:10.4231/R7RX991C",
        "command": command_line(),
        "storage": "network fp16, preprocessing (" + ("unit spectra + " if settings["spectral_norm"] == "l2" else "")
                   + f"standardise + PCA whiten, 200->{settings['n_bands']}) fp32",
        "training": {k: settings[k] for k in TRAIN_KEYS if k in settings} | {"seed": 0, "train_s": r["train_s"],
                                                                            "epochs_run": r["epochs_run"]},
        "class_counts": counts,
    }
    hub.add_weights(net.export_state_dict(torch.float16), name, config=config, meta={**meta, "metrics": {}}, dtype=None,
                    force=True)
    loaded = zoo.build("hybridsn", weights=PUBLISHED)
    m = zoo.evaluate(loaded, scene, mask=sp.test, amp=settings["amp"])
    classes = [per_class(m, c) for c in range(1, 17)]
    metrics = {"overall_accuracy": round(m["overall_accuracy"], 5), "average_accuracy": round(m["average_accuracy"], 5),
               "kappa": round(m["kappa"], 5), "OA_percent": round(100 * m["overall_accuracy"], 2),
               "AA_percent": round(100 * m["average_accuracy"], 2), "kappa_percent": round(100 * m["kappa"], 2),
               "per_class_accuracy": classes, "n_test": int(m["n_test"]),
               "pca_svm_same_split_OA_percent": round(100 * svm["overall_accuracy"], 2)}
    if tta:  # zoo.evaluate(..., tta=True): the mean over the window's eight symmetries
        m = zoo.evaluate(loaded, scene, mask=sp.test, amp=settings["amp"], tta=True)
        metrics.update({"tta_OA_percent": round(100 * m["overall_accuracy"], 2),
                        "tta_AA_percent": round(100 * m["average_accuracy"], 2),
                        "tta_kappa_percent": round(100 * m["kappa"], 2)})
    entry = hub.add_weights(net.export_state_dict(torch.float16), name, config=config,
                            meta={**meta, "metrics": metrics}, dtype=None, force=True)
    log(f"published {name}: OA {metrics['OA_percent']} (re-measured on the stored file)")
    return {"name": name, "sha256": entry.sha256, "metrics": metrics}


if __name__ == "__main__":
    sys.exit(main())
