"""Vision commands: ``zoo finetune`` and the demo step (``zoo train/eval/predict/export resnet18`` are the
spine's commands, with an image folder as ``--data``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoo.cli import UsageError, add_device_and_amp, amp_option, command, demo, json_plain, model_kv, parse_kv

if TYPE_CHECKING:
    from zoo.fs import FileLock

WEIGHTS = "resnet18.cifar10"
RECIPE = "python benchmarks/cifar10_resnet18.py --epochs 15"
FINETUNE_RUNS = Path("runs") / "finetune"  # zoo finetune's default --out-dir (numbered -2, -3 ... when taken)
FINETUNE_OUTPUTS = ("model.safetensors", "metrics.json", "confusion.png")  # what a run writes to its --out-dir
CLAIM_NAME = ".zoo-finetune-lock"  # a default --out-dir's claim: a lock apart from the one fit takes on a folder


def _build(name: str, weights: str | None, model_pairs: list[str] | None, **extra: Any):
    import zoo

    return zoo.build(name, weights=weights, **{**model_kv(name, model_pairs), **extra})


# --- zoo finetune -----------------------------------------------------------------------------------


def _configure_finetune(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a registered model (resnet18)")
    p.add_argument("--data", required=True, help="image folder: DIR/train/<class>/... and DIR/val/<class>/...")
    p.add_argument("--weights", default=None, help="pretrained weights: cifar10, imagenet1k-v1, a path (default: none)")
    # no argparse defaults (_finetune_defaults fills them): a flag given is told from one left out, so that a --set
    # pair naming the same setting is refused where the two differ (_finetune_options)
    p.add_argument("--strategy", choices=["head", "top", "full", "gradual"], help="(default: head)")
    p.add_argument("--epochs", type=int, help="(default: 5)")
    p.add_argument("--batch-size", type=int, help="(default: 32)")
    p.add_argument("--lr", type=float, help="(default: 0.001)")
    p.add_argument("--backbone-lr-mult", type=float, help="backbone lr / head lr (full, gradual; default: 0.1)")
    p.add_argument("--image-size", type=int, help="crop size (default: the weights' input size)")
    add_device_and_amp(p)  # as zoo train has them: --device cuda, --amp fp16 (a finetune had neither)
    p.set_defaults(amp=None)  # auto, when neither --amp nor --set amp= is given
    p.add_argument("--no-augment", dest="augment", action="store_false", default=None,
                   help="train on the eval transform (with --strategy head: features are computed once)")
    p.add_argument("--strict", action="store_true", default=None,
                   help="fail on a corrupt image instead of skipping it")
    p.add_argument("--seed", type=int, help="(default: 0)")
    # extend, as zoo train's: a second --set / --model adds its pairs (it replaced the first's, whose settings,
    # checkpoint_dir=DIR among them, were dropped without a word)
    p.add_argument("--model", nargs="*", action="extend", metavar="KEY=VALUE", help="builder config, e.g. in_chans=3")
    p.add_argument("--set", nargs="*", action="extend", metavar="KEY=VALUE",
                   help="extra zoo.engine.fit options (schedule=cosine ...)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run whose checkpoints are in --set checkpoint_dir=DIR (as after a Ctrl-C)")
    p.add_argument("--out-dir", default=None,
                   help=f"writes model.safetensors, metrics.json, confusion.png (default: {FINETUNE_RUNS}, numbered "
                        f"{FINETUNE_RUNS}-2 ... beside an earlier run's)")


@contextlib.contextmanager
def _out_dir(given: str | None) -> Iterator[Path]:
    """The run's output folder, checked before any training: ``--out-dir`` made if missing and tried for writing
    (a read-only folder failed only once the model was tuned, which was then lost), or the default, held for the
    whole run (:func:`_default_out_dir`)."""
    from zoo import fs

    if given is not None:
        yield fs.check_writable(Path(given).expanduser(), "--out-dir", FINETUNE_OUTPUTS)
        return
    out, claim = _default_out_dir()
    try:
        yield out
    finally:
        claim.release()


def _default_out_dir() -> tuple[Path, FileLock]:
    """``runs/finetune``, or ``runs/finetune-2``, ``-3`` ...: the first that holds no tuned model and no other run
    (a default never overwrites a model; two runs started together each make their own), with the lock that
    claims it until the caller releases it. A run's folder stays empty until its end, so emptiness alone let a
    second run take the folder of one still training, and the later to finish replaced the other's model."""
    base, k = FINETUNE_RUNS.expanduser(), 1
    while True:
        out = base if k == 1 else base.with_name(f"{base.name}-{k}")
        try:
            out.mkdir(parents=True)
        except FileExistsError:
            pass  # taken, or empty: a run that failed before writing, or one still training (its claim says)
        except OSError as err:
            raise UsageError(f"no --out-dir given and {out} cannot be made ({err}): give --out-dir DIR") from err
        claim = _claim(out)
        if claim is not None:
            return out, claim
        k += 1


def _claim(out: Path) -> FileLock | None:
    """A lock on ``out`` when it is a folder holding nothing but a claim no live run holds (a killed run's); None
    when it is taken. The look is repeated under the lock: a run may have finished there in between."""
    from zoo import fs

    def free() -> bool:
        return out.is_dir() and all(p.name == CLAIM_NAME for p in out.iterdir())

    if not free():
        return None
    claim = fs.FileLock(out / CLAIM_NAME, "zoo finetune run", subject=out)
    try:
        claim.acquire()
    except fs.FolderLockedError:
        return None
    except OSError as err:
        raise UsageError(f"no --out-dir given and {out} cannot be written ({err}): give --out-dir DIR") from err
    if free():
        return claim
    claim.release()
    return None


# the zoo.finetune options zoo finetune has flags for; unset, they take zoo.finetune's own defaults
_FINETUNE_FLAG_KEYS = ("strategy", "epochs", "batch_size", "lr", "backbone_lr_mult", "image_size", "amp", "augment",
                       "strict")


def _finetune_defaults() -> dict[str, Any]:
    """The flags' defaults: read from :func:`zoo.vision.finetune.finetune`'s signature (a copy here could drift
    from it), and seed 0, as zoo train by name seeds."""
    import inspect

    from zoo.vision.finetune import finetune

    params = inspect.signature(finetune).parameters
    return {**{key: params[key].default for key in _FINETUNE_FLAG_KEYS}, "seed": 0}


def _finetune_options(args: argparse.Namespace, sets: dict[str, Any]) -> dict[str, Any]:
    """The options for zoo.finetune: the flags given, the ``--set`` pairs, then the defaults. A flag and a pair
    naming one setting with two values are refused, as zoo train refuses them (``--epochs 2 --set epochs=3``
    trained 3 epochs without a word)."""
    from zoo.cli import config_flag, merge_sets

    given = {key: getattr(args, key) for key in (*_FINETUNE_FLAG_KEYS, "seed", "device")
             if getattr(args, key) is not None}
    if "amp" in given:
        given["amp"] = amp_option(given["amp"])
    merge_sets(given, sets, {key: "--no-augment" if key == "augment" else config_flag(key) for key in given})
    return {**_finetune_defaults(), **given}


# zoo.finetune's on/off options: --set reads true / false (JSON, or Python's True / False) as bools, and any other word
# as a str, which is truthy (freeze_bn=no kept BatchNorm frozen)
_FINETUNE_FLAGS = ("freeze_bn", "augment", "cache_features", "strict")


def _finetune_sets(pairs: list[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs for zoo.finetune, its on/off options refused unless true or false."""
    sets = parse_kv(pairs)
    for key in _FINETUNE_FLAGS:
        if key in sets and not isinstance(sets[key], bool) and not (key == "cache_features" and sets[key] is None):
            raise UsageError(f"--set {key}={sets[key]}: {key} is on or off, written true or false (True, False); "
                             f"give --set {key}=true or --set {key}=false")
    return sets


@command("finetune", "fine-tune a pretrained classifier on an image folder (head / full / gradual)", _configure_finetune)
def _cmd_finetune(args: argparse.Namespace) -> int:
    if not Path(args.data).is_dir():
        raise UsageError(f"--data {args.data}: no such folder (expected DIR/train/<class>/... and DIR/val/<class>/...)")
    options = _finetune_options(args, _finetune_sets(args.set))
    from zoo.api import finetune_refusal, seeded_build

    # as zoo train builds by name: a resume (and a rerun) builds the same network; --set seed=N seeds it too, as
    # zoo.finetune(NAME, data, seed=N) does (the build was seeded with --seed's 0 and the training with N)
    with seeded_build(options["seed"]):
        model = _build(args.name, args.weights, args.model)
    if not hasattr(model, "zoo_finetune"):  # said as a command line: the Python call zoo.finetune names is no help here
        raise UsageError(finetune_refusal(model, args.name, args.data, command=True))
    from zoo.engine.distributed import dist_info

    if not dist_info().is_main:
        # under torchrun one process claims the folder, saves and reports, as zoo train does: each claimed a
        # runs/finetune-N of its own (or wrote one --out-dir at once) and said everything once per process
        with _quiet_info():
            _finetune_run(args, model, options)
        return 0
    # before training: a folder that cannot be written must fail now, not lose the tuned model at the end
    with _out_dir(args.out_dir) as out:
        return _finetune_into(out, args, model, options)


@contextlib.contextmanager
def _quiet_info() -> Iterator[None]:
    """zoo's log records below warnings dropped within (what finetune says it does, rank 0 says once)."""
    import logging

    logger = logging.getLogger("zoo")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def _finetune_run(args: argparse.Namespace, model: Any,
                  options: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(result, options, ended)`` of ``zoo finetune``'s training with ``options`` (:func:`_finetune_options`):
    ``ended["predictions"]`` holds the run's last validation (every rank's, gathered), scored on the weights it
    ends with."""
    import zoo
    from zoo.engine.callbacks import LambdaCallback

    options = dict(options)
    if args.resume:
        if options.get("checkpoint_dir") is None:
            raise UsageError("--resume continues the run in a checkpoint folder: give it with --set checkpoint_dir=DIR")
        options["resume"] = True
    ended: dict[str, Any] = {}
    keep = LambdaCallback(on_train_end=lambda state: ended.update(predictions=state.val_predictions))
    return zoo.finetune(model, args.data, callbacks=[keep], **options), options, ended


def _finetune_into(out: Path, args: argparse.Namespace, model: Any, options: dict[str, Any]) -> int:
    """``zoo finetune``'s run once its output folder is checked (and, the default one, claimed)."""
    import zoo
    from zoo import fs
    from zoo.vision.data import find_split, scored_folder
    from zoo.vision.evaluate import classifier_report, evaluate_classifier
    from zoo.vision.transforms import transforms_for

    result, options, ended = _finetune_run(args, model, options)
    model = result.model
    classes = model.pretrained_cfg.get("classes")
    zoo.save(model, out / "model.safetensors")
    report: dict[str, Any] = {"strategy": options["strategy"], "epochs": options["epochs"],
                              "monitor": getattr(result, "monitor", None), "best_metric": result.best_metric}
    # the folder finetune validated on (--set val_data=DIR, else DATA/val), read as it read it: --strict and
    # --set unknown_classes=skip hold here too; else the report would score DATA/val whatever val_data is
    val_dir = options.get("val_data") or find_split(Path(args.data), "val")
    if isinstance(val_dir, (str, Path)):
        scored = ended.get("predictions")
        if scored is not None and len(scored.targets):  # the last validation's: scoring DATA/val again repeated it
            ev = classifier_report(scored.top[:, 0], scored.targets, scored.num_classes, class_names=classes,
                                   confusion_png=out / "confusion.png")
        else:  # a resumed run that had no epoch left: nothing was scored in this process
            val = scored_folder(val_dir, transforms_for(model, image_size=options["image_size"]), classes,
                                strict=options["strict"], unknown_classes=options.get("unknown_classes", "error"),
                                what="--set val_data")
            ev = evaluate_classifier(model, val, class_names=classes, confusion_png=out / "confusion.png")
        report.update(ev)
        print(f"val accuracy {ev['accuracy']:.4f}; per-class recall: "
              + ", ".join(f"{k} {v:.3f}" for k, v in ev["per_class_recall"].items()))
        print(f"confusion matrix: {out / 'confusion.png'}")
    else:
        print(f"no validation folder ({Path(args.data) / 'val'}, or --set val_data=DIR): metrics.json holds the "
              "training run's figures only, no accuracy, per-class recall or confusion matrix")
    # strict JSON: a class the validation folder lacks has no recall (NaN, which JSON.parse and jq --strict refuse)
    fs.write_text(out / "metrics.json", json.dumps(json_plain(report), indent=2, allow_nan=False) + "\n")
    weights = out / "model.safetensors"  # quoted as a shell reads it: an --out-dir may hold spaces
    print(f"weights: {weights}  (zoo predict {args.name} --weights {shlex.quote(str(weights))} IMAGES...)")
    return 0


# --- zoo demo ---------------------------------------------------------------------------------------


def _demo_images() -> tuple[list[Any], list[str], str]:
    """A few CIFAR-10 test images (one per class) when ../shared/data is there, else sklearn's photos."""
    from zoo.hub import shared_data_root

    test = shared_data_root() / "cifar10" / "test"
    if test.is_dir():
        from zoo.vision.data import open_rgb

        files = [min((test / c).glob("*.jpg")) for c in sorted(p.name for p in test.iterdir() if p.is_dir())]
        return [open_rgb(f) for f in files], [f.parent.name for f in files], f"CIFAR-10 test images from {test}"
    from PIL import Image
    from sklearn.datasets import load_sample_images

    imgs = load_sample_images()
    return ([Image.fromarray(a) for a in imgs.images], [Path(f).name for f in imgs.filenames],
            f"scikit-learn's sample photos ({test} not found; set ZOO_SHARED_DATA to the data folder)")


@demo("vision: resnet18.cifar10 classifies images", order=20)
def _demo() -> None:
    from zoo import hub
    from zoo.vision.predict import predict

    try:
        hub.get_entry(WEIGHTS)
    except KeyError:
        print(f"{WEIGHTS} is not published yet; make it with: {RECIPE}")
        return
    import zoo

    model = zoo.build("resnet18", weights="cifar10")
    images, truths, source = _demo_images()
    print(source)
    for truth, r in zip(truths, predict(model, images, topk=1)):
        print(f"  {truth:>12} -> {r['label']:<12} ({r['prob']:.2f})")
