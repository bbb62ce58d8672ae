"""What limits the gain of fine-tuning resnet18.cifar10 on ants vs bees (issue 18)?

The gain is the accuracy of ``resnet18.cifar10`` fine-tuned on hymenoptera (244 train / 153 val images)
minus a network trained from scratch *under the same settings* (image size, epochs, learning rate,
augmentation, batch size): a change that helps both is not a transfer gain. Each tried change is one
*variant* (``key=value,...`` on top of finetune_resnet18.py's published recipe: full fine-tuning, 32 px,
12 epochs, AdamW lr 1e-3, backbone lr x0.1, batch 16, weight decay 1e-4, padded-crop + flip), measured
with the same seeds. Keys:

* pretrained-only: ``strategy`` (head / top / full / gradual), ``top_stages``, ``backbone_lr_mult``,
  ``freeze_bn`` (pretrained BN statistics kept);
* shared with the scratch run: ``size`` (crop; images decoded at size*256/224, the CIFAR stem kept),
  ``epochs``, ``lr``, ``batch_size``, ``weight_decay``, ``label_smoothing``, ``aug`` (``crop``: padded
  crop + flip; ``rrc``: random resized crop, scale 0.35-1, + flip; ``rrc-jitter``: and brightness /
  contrast / saturation jitter of +-0.3), ``eval_flip`` (average the logits of the image and its mirror).

The scratch run of a settings group is measured once per seed and reused by every variant that shares
it. Results accumulate in results/finetune_study.json (a rerun of a variant and seed replaces it).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/finetune_study.py --variants base epochs=30 freeze_bn=true
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import command_line, parse_args, result_file, write_result
from finetune_resnet18 import Data, build

import zoo
from zoo.hub import shared_data_root
from zoo.vision.tensor_data import TensorImageDataset, tensor_loader

NAME = "finetune_study"
BASE: dict[str, Any] = {"strategy": "full", "top_stages": 1, "backbone_lr_mult": 0.1, "freeze_bn": False,
                        "size": 32, "epochs": 12, "lr": 1e-3, "batch_size": 16, "weight_decay": 1e-4,
                        "label_smoothing": 0.0, "aug": "crop", "eval_flip": False}
PRETRAINED_ONLY = ("strategy", "top_stages", "backbone_lr_mult", "freeze_bn")
AUGS = ("crop", "rrc", "rrc-jitter")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_variant(spec: str) -> dict[str, Any]:
    out = dict(BASE)
    if spec == "base":
        return out
    for item in spec.split(","):
        key, sep, raw = item.partition("=")
        if not sep or key not in BASE:
            raise SystemExit(f"variant item {item!r}: expected key=value with key in {sorted(BASE)}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    if out["aug"] not in AUGS:
        raise SystemExit(f"aug must be one of {AUGS}, got {out['aug']!r}")
    return out


def scratch_key(settings: dict[str, Any]) -> str:
    """The settings a scratch run depends on, as a stable string."""
    return ",".join(f"{k}={json.dumps(settings[k])}" for k in sorted(settings) if k not in PRETRAINED_ONLY)


class ResizedCropDataset(TensorImageDataset):
    """Training batches with a random resized crop (area scale 0.35-1, aspect 3/4-4/3) + flip, and optional
    colour jitter, applied per image on the uint8 tensors (the stronger augmentation a practitioner tries)."""

    def __init__(self, *args: Any, jitter: float = 0.0, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.jitter = jitter

    def __getitem__(self, item):
        from torchvision.transforms.v2 import functional as F

        indices, seed = item
        g = torch.Generator().manual_seed(seed)
        idx = torch.as_tensor(indices)
        H, W = self.images.shape[2:]
        out = []
        for i in idx.tolist():
            area = float(torch.empty(1).uniform_(0.35, 1.0, generator=g)) * H * W
            ratio = float(torch.exp(torch.empty(1).uniform_(-0.2877, 0.2877, generator=g)))  # log(3/4), log(4/3)
            h = min(H, max(8, round((area / ratio) ** 0.5)))
            w = min(W, max(8, round((area * ratio) ** 0.5)))
            top = int(torch.randint(0, H - h + 1, (1,), generator=g))
            left = int(torch.randint(0, W - w + 1, (1,), generator=g))
            x = F.resized_crop(self.images[i], top, left, h, w, [self.crop, self.crop], antialias=True)
            if float(torch.rand(1, generator=g)) < 0.5:
                x = x.flip(2)
            if self.jitter:
                f = 1 + (torch.rand(3, generator=g) * 2 - 1) * self.jitter
                x = F.adjust_saturation(F.adjust_contrast(F.adjust_brightness(x, float(f[0])), float(f[1])), float(f[2]))
            out.append(x)
        x = (torch.stack(out).float() - self.mean) / self.std
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x, self.targets[idx]


def loaders(model: nn.Module, data: Data, s: dict[str, Any], seed: int):
    cfg = model.pretrained_cfg
    kw = {"mean": cfg["mean"], "std": cfg["std"], "crop": data.size, "channels_last": True}
    if s["aug"] == "crop":
        train = tensor_loader(data.xtr, data.ytr, batch_size=s["batch_size"], train=True, seed=seed, drop_last=False,
                              **kw)
    else:
        from torch.utils.data import DataLoader

        from zoo.vision.tensor_data import EpochBatchSampler

        ds = ResizedCropDataset(data.xtr, data.ytr, train=True, jitter=0.3 if s["aug"] == "rrc-jitter" else 0.0, **kw)
        train = DataLoader(ds, sampler=EpochBatchSampler(len(ds), s["batch_size"], shuffle=True, seed=seed),
                           batch_size=None)
    val = tensor_loader(data.xva, data.yva, batch_size=64, train=False, **kw)
    return train, val


@torch.no_grad()
def accuracy(model: nn.Module, loader, eval_flip: bool) -> float:
    model.eval()
    correct = total = 0
    for x, y in loader:
        x = x.float()
        logits = model(x) + (model(x.flip(3)) if eval_flip else 0)
        correct += int((logits.argmax(1) == y).sum())
        total += len(y)
    return correct / total


def run(source: str, s: dict[str, Any], data: Data, seed: int) -> dict[str, Any]:
    model = build(source, None, seed)
    train, val = loaders(model, data, s, seed)
    scratch = source == "scratch"
    t0 = time.perf_counter()
    zoo.finetune(model, (train, val), strategy="full" if scratch else s["strategy"], epochs=s["epochs"], lr=s["lr"],
                 batch_size=s["batch_size"], backbone_lr_mult=1.0 if scratch else s["backbone_lr_mult"],
                 top_stages=s["top_stages"], freeze_bn=False if scratch else s["freeze_bn"], amp="auto",
                 channels_last=True, cache_features=False, schedule="cosine", seed=seed, progress=False,
                 weight_decay=s["weight_decay"], label_smoothing=s["label_smoothing"])
    return {"accuracy": accuracy(model, val, s["eval_flip"]), "seconds": round(time.perf_counter() - t0, 1)}


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=shared_data_root() / "hymenoptera_data")
    ap.add_argument("--variants", nargs="+", default=["base"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parse_args(ap, argv, __file__)
    if not args.data.is_dir():
        raise SystemExit(f"hymenoptera_data not found at {args.data} (expected train/ants, train/bees, val/ants, "
                         "val/bees with JPEGs, as the PyTorch transfer-learning tutorial unpacks it); pass --data")
    torch.set_num_threads(os.cpu_count() or 1)
    path = result_file(NAME)
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    variants: dict[str, Any] = old.get("variants", {})
    scratch: dict[str, Any] = old.get("scratch", {})
    datasets: dict[int, Data] = {}
    for spec in args.variants:
        s = parse_variant(spec)
        if s["size"] not in datasets:
            datasets[s["size"]] = Data(args.data, s["size"], None, None)
        data = datasets[s["size"]]
        entry = variants.setdefault(spec, {"settings": s, "runs": {}})
        entry["settings"], key = s, scratch_key(s)
        entry["scratch_key"] = key
        for seed in args.seeds:
            r = run("cifar10", s, data, seed)
            entry["runs"][str(seed)] = {**r, "command": command_line()}
            sc = scratch.setdefault(key, {})
            if str(seed) not in sc:
                sc[str(seed)] = {**run("scratch", s, data, seed), "command": command_line()}
            log(f"{spec} seed {seed}: cifar10 {r['accuracy']:.3f} ({r['seconds']:.0f} s), scratch "
                f"{sc[str(seed)]['accuracy']:.3f}")
    metrics: dict[str, Any] = {}
    for spec, entry in variants.items():
        seeds = sorted(entry["runs"])
        ours = [entry["runs"][k]["accuracy"] for k in seeds]
        base = [scratch[entry["scratch_key"]][k]["accuracy"] for k in seeds if k in scratch[entry["scratch_key"]]]
        (m, sd), (bm, bsd) = mean_std(ours), mean_std(base)
        metrics[spec] = {"cifar10": round(m, 4), "cifar10_std": round(sd, 4), "scratch": round(bm, 4),
                         "scratch_std": round(bsd, 4), "gain_points": round(100 * (m - bm), 1), "seeds": len(seeds),
                         "train_s": statistics.median(entry["runs"][k]["seconds"] for k in seeds)}
    best = max(metrics, key=lambda k: metrics[k]["gain_points"])
    best_acc = max(metrics, key=lambda k: metrics[k]["cifar10"])
    write_result(NAME, metrics=metrics, ratios={"best_gain_variant": best, "best_gain_points": metrics[best]["gain_points"],
                                                "best_accuracy_variant": best_acc},
                 command=command_line(), extra={"variants": variants, "scratch": scratch, "base": BASE,
                                                "goal": "cifar10 fine-tuning - scratch >= +10 points"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
