"""Benchmark: fine-tuning ResNet18 on ants vs bees (hymenoptera_data, 244 train / 153 val).

Claims (issue 4):
1. Accuracy, 3 seeds (mean ± std): from scratch vs ``head`` / ``full`` / ``gradual`` from ``resnet18.cifar10``,
   and from ``imagenet1k-v1`` when that file is in the zoo cache. Goal: cifar10 fine-tuning beats scratch by
   >= 10 points. Anchor: the PyTorch transfer-learning tutorial reports 0.935 (all layers) and 0.948 (fixed
   feature extractor) from ImageNet weights, single runs on these 153 images.
2. Training throughput (images/s) of each strategy through ``zoo.finetune`` (bf16 autocast, channels_last,
   JPEGs decoded once and augmented on tensors, feature cache for ``head``) against a plain tutorial-style
   loop (fp32, PIL decode + torchvision transforms every epoch, DataLoader workers, no feature cache), same
   model, same data, same image size, same epochs and batch size, interleaved in the same run. Goal: >= 2x
   at equal or better accuracy. The head's feature-cache speed-up is measured against ``zoo.finetune``'s
   own uncached head (same augmentation-free data).

Writes benchmarks/results/finetune_resnet18.json and finetune_resnet18.png (accuracy and throughput bars).

    # full run (needs weights/resnet18.cifar10.safetensors; imagenet1k-v1 is used when `zoo pull` cached it):
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/finetune_resnet18.py
    # smoke (< 3 min): one seed, 2 epochs, 32 px, 64 train / 32 val images, weights from a file:
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/finetune_resnet18.py --smoke --cifar-weights FILE
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _harness import output_file, parse_args, write_result  # benchmarks/ is on sys.path when the script runs

import zoo
from zoo.engine.logs import atomic_savefig
from zoo.hub import shared_data_root
from zoo.vision.tensor_data import load_or_decode, tensor_loader

WORK = ROOT / "benchmarks" / "_work"
RESULTS = ROOT / "benchmarks" / "results"
NAME = "finetune_resnet18"


def build(source: str, cifar_weights: str | None, seed: int) -> nn.Module:
    """A 2-class ResNet18 from ``source`` (scratch / cifar10 / imagenet1k-v1); the head init depends on seed."""
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "fc re-initialised": expected here, 2 classes
        if source == "scratch":
            return zoo.build("resnet18", num_classes=2, stem="cifar")
        if source == "cifar10":
            if cifar_weights:
                m = zoo.build("resnet18", weights=cifar_weights, num_classes=2, stem="cifar")
                m.pretrained_cfg.update(mean=[0.4914, 0.4822, 0.4465], std=[0.2470, 0.2435, 0.2616])
                return m
            return zoo.build("resnet18", weights="cifar10", num_classes=2)
        return zoo.build("resnet18", weights="imagenet1k-v1", num_classes=2)


def imagenet_available() -> tuple[bool, str]:
    """Can ``resnet18.imagenet1k-v1`` load without a network (the zoo cache, or a ``file://`` mirror in
    ``ZOO_WEIGHTS_URL``)? ``(True, where)``, or ``(False, why and how to get it)``; never downloads."""
    from zoo import hub

    try:
        path, _ = hub.resolve("imagenet1k-v1", model="resnet18", local_files_only=True)
    except KeyError:
        return False, "resnet18.imagenet1k-v1 is not in this zoo's manifest"
    except (FileNotFoundError, hub.DownloadError, hub.HashMismatchError) as err:
        return False, (f"resnet18.imagenet1k-v1 is not available offline ({type(err).__name__}): run "
                       "`zoo pull resnet18.imagenet1k-v1` on a connected machine, or set ZOO_WEIGHTS_URL to a mirror "
                       "holding resnet18-f37072fd.pth; the ImageNet rows are skipped")
    return True, f"resnet18.imagenet1k-v1 from {path}"


class Data:
    """hymenoptera decoded once at ``resize`` (short side, centre square) into uint8 tensors."""

    def __init__(self, root: Path, size: int, n_train: int | None, n_val: int | None) -> None:
        self.size, self.resize = size, round(size * 256 / 224)
        tr = load_or_decode(root / "train", WORK / f"hymenoptera_train_{self.resize}.npz", size=self.resize, progress=False)
        va = load_or_decode(root / "val", WORK / f"hymenoptera_val_{self.resize}.npz", size=self.resize,
                            classes=tr[2], progress=False)
        g = torch.Generator().manual_seed(0)
        def pick(x, y, n):
            if n is None:
                return x, y
            i = torch.randperm(len(x), generator=g)[:n]
            return x[i], y[i]

        (self.xtr, self.ytr), (self.xva, self.yva) = pick(tr[0], tr[1], n_train), pick(va[0], va[1], n_val)
        self.classes = tr[2]
        self.root = root

    def loaders(self, model: nn.Module, batch_size: int, seed: int, train_aug: bool):
        cfg = model.pretrained_cfg
        kw = {"mean": cfg["mean"], "std": cfg["std"], "crop": self.size, "channels_last": True}
        train = tensor_loader(self.xtr, self.ytr, batch_size=batch_size, train=train_aug, seed=seed, drop_last=False, **kw)
        val = tensor_loader(self.xva, self.yva, batch_size=64, train=False, **kw)
        return train, val


def run_ours(model, data: Data, strategy: str, args, seed: int, *, cache: bool, augment: bool,
             backbone_lr_mult: float) -> dict:
    train, val = data.loaders(model, args.batch_size, seed, train_aug=augment)
    lr = args.lr_head if strategy == "head" else args.lr
    t0 = time.perf_counter()
    result = zoo.finetune(model, (train, val), strategy=strategy, epochs=args.epochs, lr=lr, batch_size=args.batch_size,
                          backbone_lr_mult=backbone_lr_mult, amp="auto", channels_last=True,
                          cache_features=cache if strategy == "head" else None, schedule="cosine", seed=seed,
                          progress=False, weight_decay=1e-4)
    seconds = time.perf_counter() - t0
    acc = evaluate(model, val)
    return {"accuracy": acc, "seconds": seconds, "images_per_s": args.epochs * len(data.ytr) / seconds,
            "history_val_accuracy": [h.get("val_accuracy") for h in result.history]}


@torch.no_grad()
def evaluate(model: nn.Module, loader) -> float:
    model.eval()
    correct = total = 0
    for x, y in loader:
        correct += int((model(x.float()).argmax(1) == y).sum())
        total += len(y)
    return correct / total


def run_tutorial(model, data: Data, strategy: str, args, seed: int) -> dict:
    """The PyTorch transfer-learning tutorial's loop: ImageFolder + PIL transforms each epoch, fp32, SGD
    momentum, StepLR; the same parameters frozen per epoch as the strategy (no feature cache)."""
    from torch.utils.data import DataLoader, Subset
    from torchvision import datasets
    from torchvision import transforms as T

    from zoo.vision.finetune import plan_strategy

    cfg = model.pretrained_cfg
    norm = T.Normalize(cfg["mean"], cfg["std"])
    tf_train = T.Compose([T.Resize(data.resize), T.RandomCrop(data.size), T.RandomHorizontalFlip(), T.ToTensor(), norm])
    tf_val = T.Compose([T.Resize(data.resize), T.CenterCrop(data.size), T.ToTensor(), norm])
    train_ds = datasets.ImageFolder(str(data.root / "train"), tf_train)
    val_ds = datasets.ImageFolder(str(data.root / "val"), tf_val)
    if args.n_train:
        g = torch.Generator().manual_seed(0)
        train_ds = Subset(train_ds, torch.randperm(len(train_ds), generator=g)[:args.n_train].tolist())
        val_ds = Subset(val_ds, torch.randperm(len(val_ds), generator=g)[:args.n_val].tolist())
    torch.manual_seed(seed)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True, num_workers=args.peer_workers)
    val_loader = DataLoader(val_ds, batch_size=64, shuffle=False, num_workers=args.peer_workers)
    plan = plan_strategy(model, strategy, args.epochs)
    lr = args.lr_head if strategy == "head" else args.lr
    params = [p for n in (["fc"] if strategy == "head" else ["fc", *plan.stages, *plan.stem]) for p in getattr(model, n).parameters()]
    opt = torch.optim.SGD(params, lr=lr * 10, momentum=0.9)  # the tutorial's optimizer (its lr=0.001 at bs 4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, args.epochs * 7 // 25), gamma=0.1)
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        active = set(plan.trainable(epoch))
        for name, child in model.named_children():
            for p in child.parameters():
                p.requires_grad_(name in active)
        model.train()
        for x, y in train_loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        sched.step()
        evaluate(model, val_loader)  # the tutorial validates every epoch; part of its time
    seconds = time.perf_counter() - t0
    for p in model.parameters():
        p.requires_grad_(True)
    return {"accuracy": evaluate(model, val_loader), "seconds": seconds,
            "images_per_s": args.epochs * len(train_ds) / seconds}


def summarize(values: list[float]) -> dict:
    return {"mean": statistics.mean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "runs": values}


def plot(metrics: dict, peers: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = list(metrics["accuracy"])
    means = [metrics["accuracy"][n]["mean"] for n in names]
    stds = [metrics["accuracy"][n]["std"] for n in names]
    a1.bar(range(len(names)), means, yerr=stds, color="tab:blue", capsize=3)
    a1.set_xticks(range(len(names)), names, rotation=30, ha="right")
    a1.set_ylim(0.4, 1.0)
    a1.set_ylabel("val accuracy (mean ± std over seeds)")
    a1.set_title("hymenoptera: accuracy by source / strategy")
    tp = metrics["train_images_per_s"]
    keys = list(tp)
    x = torch.arange(len(keys)).float()
    a2.bar(x - 0.2, [tp[k] for k in keys], 0.4, label="zoo.finetune")
    a2.bar(x + 0.2, [peers["tutorial_loop"]["train_images_per_s"].get(k, 0) for k in keys], 0.4, label="tutorial loop")
    a2.set_xticks(x.tolist(), keys, rotation=30, ha="right")
    a2.set_ylabel("training images/s (median)")
    a2.legend()
    a2.set_title("training throughput")
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=shared_data_root() / "hymenoptera_data")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=12)
    # 32 px: the scale resnet18.cifar10 was trained at. Measured (seed 0, full): cifar10 - scratch was
    # +1.3 pts at 64 px and +6.5 pts at 32 px.
    p.add_argument("--size", type=int, default=32, help="crop size for scratch / cifar10 runs (resize = size*256/224)")
    p.add_argument("--imagenet-size", type=int, default=224, help="crop size for imagenet1k-v1 runs")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW lr of full / gradual / scratch (head's)")
    p.add_argument("--lr-head", type=float, default=3e-3, help="AdamW lr of the head strategy")
    p.add_argument("--backbone-lr-mult", type=float, default=0.1)
    p.add_argument("--strategies", nargs="+", default=["head", "full", "gradual"])
    p.add_argument("--cifar-weights", help="a resnet18 stem=cifar weights file instead of the published resnet18.cifar10")
    p.add_argument("--no-imagenet", action="store_true")
    p.add_argument("--no-peer", dest="peer", action="store_false", help="skip the tutorial-loop peer")
    p.add_argument("--peer-workers", type=int, default=2, help="DataLoader workers of the tutorial loop")
    p.add_argument("--n-train", type=int, help="use a random subset of the train images (smoke)")
    p.add_argument("--n-val", type=int, help="use a random subset of the val images (smoke)")
    p.add_argument("--smoke", action="store_true", help="1 seed, 2 epochs, 32 px, 64/32 images, no imagenet")
    args = parse_args(p, argv, __file__)
    command = "flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/finetune_resnet18.py " + shlex.join(argv or sys.argv[1:])
    if args.smoke:
        args.seeds, args.epochs, args.size = args.seeds[:1], 2, 32
        args.n_train, args.n_val, args.no_imagenet = args.n_train or 64, args.n_val or 32, True
    if not args.data.is_dir():
        raise SystemExit(f"hymenoptera_data not found at {args.data} (expected train/ants, train/bees, val/ants, "
                         "val/bees with JPEGs, as the PyTorch transfer-learning tutorial unpacks it); pass --data")
    torch.set_num_threads(os.cpu_count() or 1)
    have_cifar = bool(args.cifar_weights)
    if not have_cifar:
        try:
            zoo.hub.get_entry("resnet18.cifar10")
            have_cifar = True
        except KeyError:
            raise SystemExit("resnet18.cifar10 is not published yet: run benchmarks/cifar10_resnet18.py first, "
                             "or pass --cifar-weights FILE") from None
    use_imagenet, imagenet_note = imagenet_available()
    if args.no_imagenet:
        use_imagenet, imagenet_note = False, "ImageNet rows not requested (--no-imagenet)"
    print(f"imagenet1k-v1: {imagenet_note}", flush=True)
    data = Data(args.data, args.size, args.n_train, args.n_val)
    data_in = Data(args.data, args.imagenet_size, args.n_train, args.n_val) if use_imagenet else None

    plans = [("scratch", "full")] + [("cifar10", s) for s in args.strategies]
    if use_imagenet:
        plans += [("imagenet1k-v1", s) for s in args.strategies]
    acc: dict[str, list[float]] = {}
    tput: dict[str, list[float]] = {}
    peer_acc: dict[str, list[float]] = {}
    peer_tput: dict[str, list[float]] = {}
    for seed in args.seeds:  # interleaved: every configuration, ours then the peer, once per seed
        for source, strategy in plans:
            key = f"{source}/{strategy}"
            d = data_in if source == "imagenet1k-v1" else data
            # head: features cached, so no augmentation; scratch trains every layer at the full lr
            r = run_ours(build(source, args.cifar_weights, seed), d, strategy, args, seed, cache=strategy == "head",
                         augment=strategy != "head",
                         backbone_lr_mult=1.0 if source == "scratch" else args.backbone_lr_mult)
            acc.setdefault(key, []).append(r["accuracy"])
            tput.setdefault(key, []).append(r["images_per_s"])
            print(f"seed {seed} {key:>24} zoo.finetune: acc {r['accuracy']:.3f}  {r['images_per_s']:7.1f} img/s", flush=True)
            if strategy == "head" and source != "scratch":
                # the same augmentation-free head, but the backbone runs every epoch: the cache's speed-up
                u = run_ours(build(source, args.cifar_weights, seed), d, "head", args, seed, cache=False,
                             augment=False, backbone_lr_mult=args.backbone_lr_mult)
                k2 = f"{source}/head_uncached"
                acc.setdefault(k2, []).append(u["accuracy"])
                tput.setdefault(k2, []).append(u["images_per_s"])
                print(f"seed {seed} {k2:>24} zoo.finetune: acc {u['accuracy']:.3f}  {u['images_per_s']:7.1f} img/s", flush=True)
            if args.peer and source != "scratch":
                q = run_tutorial(build(source, args.cifar_weights, seed), d, strategy, args, seed)
                peer_acc.setdefault(key, []).append(q["accuracy"])
                peer_tput.setdefault(key, []).append(q["images_per_s"])
                print(f"seed {seed} {key:>24} tutorial:     acc {q['accuracy']:.3f}  {q['images_per_s']:7.1f} img/s", flush=True)

    med = {k: statistics.median(v) for k, v in tput.items()}
    peer_med = {k: statistics.median(v) for k, v in peer_tput.items()}
    acc_s = {k: summarize(v) for k, v in acc.items()}
    ratios = {f"{k}_speedup_vs_tutorial": med[k] / peer_med[k] for k in peer_med}
    for src in ("cifar10", "imagenet1k-v1"):
        if f"{src}/head" in med and f"{src}/head_uncached" in med:
            ratios[f"{src}/head_feature_cache_speedup"] = med[f"{src}/head"] / med[f"{src}/head_uncached"]
    best_cifar = max((acc_s[k]["mean"] for k in acc_s if k.startswith("cifar10/")), default=float("nan"))
    ratios["cifar10_best_minus_scratch_points"] = 100 * (best_cifar - acc_s["scratch/full"]["mean"])
    metrics = {"accuracy": acc_s, "train_images_per_s": med,
               "settings": {"seeds": args.seeds, "epochs": args.epochs, "size": args.size, "batch_size": args.batch_size,
                            "lr": args.lr, "lr_head": args.lr_head, "backbone_lr_mult": args.backbone_lr_mult,
                            "n_train": len(data.ytr), "n_val": len(data.yva),
                            "cifar_weights": args.cifar_weights or "resnet18.cifar10",
                            "imagenet1k_v1": imagenet_note}}
    peers = {"tutorial_loop": {"accuracy": {k: summarize(v) for k, v in peer_acc.items()},
                               "train_images_per_s": peer_med,
                               "what": "fp32, ImageFolder + PIL transforms each epoch, SGD momentum + StepLR, "
                                       f"{args.peer_workers} DataLoader workers, same frozen parameters per epoch"}}
    # a smoke run proves the script works; its numbers are not results, so they stay out of results/
    name = NAME + ("_smoke" if args.smoke else "")
    folder = WORK if args.smoke else RESULTS
    out = write_result(name, command=command, metrics=metrics, peers=peers, ratios=ratios, results_dir=folder,
                       readme=None if args.smoke else ROOT / "benchmarks" / "README.md")
    if args.peer:
        plot(metrics, peers, output_file(name, "png", folder))
    print("\n| run | val accuracy | images/s | tutorial acc | tutorial images/s | speed-up |\n|---|---|---|---|---|---|")
    for k, s in acc_s.items():
        pa = peers["tutorial_loop"]["accuracy"].get(k)
        print(f"| {k} | {s['mean']:.3f} ± {s['std']:.3f} | {med[k]:.1f} | "
              + (f"{pa['mean']:.3f} ± {pa['std']:.3f} | {peer_med[k]:.1f} | {med[k] / peer_med[k]:.2f}x |" if pa else "| | |"))
    print(f"\ncifar10 fine-tuning vs scratch: {ratios['cifar10_best_minus_scratch_points']:+.1f} points; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
