"""Vision commands: ``zoo finetune``, ``zoo predict``, ``zoo export``, the ``zoo train/eval`` data adapter, the demo step."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from zoo.cli import UsageError, command, data_adapter, demo, parse_kv

WEIGHTS = "resnet18.cifar10"
RECIPE = "flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/cifar10_resnet18.py --epochs 15"


def _build(name: str, weights: str | None, model_kv: list[str] | None, **extra: Any):
    import zoo

    return zoo.build(name, weights=weights, **{**parse_kv(model_kv), **extra})


# --- zoo train / zoo eval ---------------------------------------------------------------------------


@data_adapter("vision")
def _adapter(args: argparse.Namespace, model: Any) -> tuple[Any, dict[str, Any]]:
    """``--data DIR`` (DIR/train + DIR/val class folders) -> (train set, {"val_data": val set}); transforms
    come from the model's weights; ``zoo eval`` scores DIR/val (or DIR itself without train/val)."""
    from zoo.vision.data import ImageFolderDataset, find_split, load_image_folders
    from zoo.vision.transforms import transforms_for

    if not args.data:
        raise UsageError(f"{args.name}: --data DIR is required (DIR/train/<class>/... and DIR/val/<class>/...)")
    eval_tf = transforms_for(model, train=False)
    training = hasattr(args, "epochs")
    if not training:
        root = Path(args.data)
        folder = find_split(root, "val") or root
        return ImageFolderDataset(folder, eval_tf, classes=(model.pretrained_cfg or {}).get("classes")), {}
    train, val = load_image_folders(args.data, train_transform=transforms_for(model, train=True), eval_transform=eval_tf)
    if model.fc.out_features != len(train.classes):
        raise UsageError(f"{args.name} has {model.fc.out_features} outputs but {args.data} has {len(train.classes)} "
                         f"classes; pass --model num_classes={len(train.classes)} or use `zoo finetune`")
    return train, ({"val_data": val} if val is not None else {})


# --- zoo finetune -----------------------------------------------------------------------------------


def _configure_finetune(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a registered model (resnet18)")
    p.add_argument("--data", required=True, help="image folder: DIR/train/<class>/... and DIR/val/<class>/...")
    p.add_argument("--weights", default=None, help="pretrained weights: cifar10, imagenet1k-v1, a path (default: none)")
    p.add_argument("--strategy", choices=["head", "full", "gradual"], default="head")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--backbone-lr-mult", type=float, default=0.1, help="backbone lr / head lr (full, gradual)")
    p.add_argument("--image-size", type=int, help="crop size (default: the weights' input size)")
    p.add_argument("--amp", choices=["auto", "bf16", "none"], default="auto",
                   help="precision (auto: bf16 only where this CPU computes it fast)")
    p.add_argument("--no-augment", dest="augment", action="store_false",
                   help="train on the eval transform (with --strategy head: features are computed once)")
    p.add_argument("--strict", action="store_true", help="fail on a corrupt image instead of skipping it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", nargs="*", metavar="KEY=VALUE", help="builder config, e.g. in_chans=3")
    p.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="extra zoo.engine.fit options (schedule=cosine ...)")
    p.add_argument("--out-dir", default="runs/finetune", help="writes model.safetensors, metrics.json, confusion.png")


@command("finetune", "fine-tune a pretrained classifier on an image folder (head / full / gradual)", _configure_finetune)
def _cmd_finetune(args: argparse.Namespace) -> int:
    import zoo
    from zoo import hub
    from zoo.vision.data import ImageFolderDataset, find_split
    from zoo.vision.evaluate import evaluate_classifier
    from zoo.vision.transforms import transforms_for

    if not Path(args.data).is_dir():
        raise UsageError(f"--data {args.data}: no such folder (expected DIR/train/<class>/... and DIR/val/<class>/...)")
    model = _build(args.name, args.weights, args.model)
    result = zoo.finetune(model, args.data, strategy=args.strategy, epochs=args.epochs, batch_size=args.batch_size,
                          lr=args.lr, backbone_lr_mult=args.backbone_lr_mult, image_size=args.image_size,
                          amp=None if args.amp == "none" else args.amp, augment=args.augment, strict=args.strict,
                          seed=args.seed, **parse_kv(args.set))
    model = result.model
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    classes = model.pretrained_cfg.get("classes")
    cfg = {k: v for k, v in model.pretrained_cfg.items() if k != "weights"}
    hub.save_weights(model, out / "model.safetensors", metadata={"zoo.pretrained_cfg": json.dumps(cfg)})
    report: dict[str, Any] = {"strategy": args.strategy, "epochs": args.epochs, "best_metric": result.best_metric}
    val_dir = find_split(Path(args.data), "val")
    if val_dir is not None:
        val = ImageFolderDataset(val_dir, transforms_for(model, image_size=args.image_size), classes=classes)
        ev = evaluate_classifier(model, val, class_names=classes, confusion_png=out / "confusion.png")
        report.update(ev)
        print(f"val accuracy {ev['accuracy']:.4f}; per-class recall: "
              + ", ".join(f"{k} {v:.3f}" for k, v in ev["per_class_recall"].items()))
        print(f"confusion matrix: {out / 'confusion.png'}")
    (out / "metrics.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    print(f"weights: {out / 'model.safetensors'}  (zoo predict {args.name} --weights {out / 'model.safetensors'} IMAGES...)")
    return 0


# --- zoo predict ------------------------------------------------------------------------------------


def _configure_predict(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a registered model (resnet18)")
    p.add_argument("inputs", nargs="+", help="image files and/or folders")
    p.add_argument("--weights", required=True, help="cifar10, a fine-tuned model.safetensors, ...")
    p.add_argument("--topk", type=int, default=1)
    p.add_argument("--model", nargs="*", metavar="KEY=VALUE", help="builder config")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")


def _load_for_predict(args: argparse.Namespace):
    """A manifest tag builds directly; a fine-tuned file saved by ``zoo finetune`` carries its head size,
    stem and classes in its metadata."""
    from zoo import hub

    path = Path(args.weights)
    extra: dict[str, Any] = {}
    cfg = None
    if path.is_file():
        meta = hub.read_metadata(path)
        if "zoo.pretrained_cfg" in meta:
            cfg = json.loads(meta["zoo.pretrained_cfg"])
        state = hub.load_state_dict(path)
        if "fc.weight" in state:
            extra["num_classes"] = int(state["fc.weight"].shape[0])
        if "conv1.weight" in state:
            extra["in_chans"] = int(state["conv1.weight"].shape[1])
            extra["stem"] = "cifar" if state["conv1.weight"].shape[-1] == 3 else "imagenet"
    extra.update(parse_kv(args.model))
    model = _build(args.name, args.weights, None, **extra)
    if cfg:
        model.pretrained_cfg = {**model.pretrained_cfg, **cfg}
    return model


@command("predict", "classify image files or folders with a (fine-tuned) model", _configure_predict)
def _cmd_predict(args: argparse.Namespace) -> int:
    from zoo.vision.predict import predict

    model = _load_for_predict(args)
    for r in predict(model, args.inputs, topk=args.topk):
        if args.json:
            print(json.dumps(r))
        elif "error" in r:
            print(f"{r['input']}\tERROR {r['error']}")
        else:
            print(f"{r['input']}\t" + "  ".join(f"{lbl} {p:.3f}" for lbl, p in r["topk"]))
    return 0


# --- zoo export -------------------------------------------------------------------------------------


def _configure_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a registered model (resnet18)")
    p.add_argument("--weights", required=True, help="a tag or a fine-tuned model.safetensors")
    p.add_argument("--format", choices=["torchscript", "onnx"], default="onnx")
    p.add_argument("--out", required=True, help="output file (.pt for TorchScript, .onnx)")
    p.add_argument("--model", nargs="*", metavar="KEY=VALUE", help="builder config")


@command("export", "export a model to TorchScript or ONNX and check its outputs", _configure_export)
def _cmd_export(args: argparse.Namespace) -> int:
    import torch

    from zoo.vision.export import export_onnx, export_torchscript

    args.topk, args.json = 1, False
    model = _load_for_predict(args).eval()
    c, h, w = model.pretrained_cfg["input_size"]
    x = torch.randn(2, c, h, w)
    res = (export_onnx if args.format == "onnx" else export_torchscript)(model, args.out, x)
    print(f"exported {args.format}: {res}")
    return 0


# --- zoo demo ---------------------------------------------------------------------------------------


def _demo_images() -> tuple[list[Any], list[str], str]:
    """A few CIFAR-10 test images (one per class) when ../shared/data is there, else sklearn's photos."""
    import os

    root = Path(os.environ.get("ZOO_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
    test = root / "cifar10" / "test"
    if test.is_dir():
        from zoo.vision.data import open_rgb

        files = [min((test / c).glob("*.jpg")) for c in sorted(p.name for p in test.iterdir() if p.is_dir())]
        return [open_rgb(f) for f in files], [f.parent.name for f in files], f"CIFAR-10 test images from {test}"
    from PIL import Image
    from sklearn.datasets import load_sample_images

    imgs = load_sample_images()
    return ([Image.fromarray(a) for a in imgs.images], [Path(f).name for f in imgs.filenames],
            "scikit-learn's sample photos (../shared/data not found)")


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
