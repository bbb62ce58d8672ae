"""The video family on the command line.

- ``zoo train video-tsn --data UCF-101 --splits ucfTrainTestlist [--set fold=2 num_segments=8 size=112]``
  (and ``r2plus1d_18``, and ``zoo eval``): the data adapter builds the UCF101 train/test sets;
  data-set keys given with ``--set`` (``fold``, ``frames_per_clip``, ``step_between_clips``,
  ``num_segments``, ``frame_rate``, ``size``, ``num_workers``, ``strict``) are taken out of it, the
  rest goes to the training loop;
- ``zoo video-synthetic OUT``: write the generated action data set;
- the ``zoo demo`` step: generate one action clip and classify it with ``video-tsn.synthetic-actions``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from zoo.cli import UsageError, command, data_adapter, demo, parse_kv

_DATA_KEYS = ("fold", "frames_per_clip", "step_between_clips", "num_segments", "frame_rate", "size",
              "num_workers", "strict", "short_video")


def _pop_data_options(args: argparse.Namespace) -> dict[str, Any]:
    """Take the data-set keys out of ``--set`` (the rest is for the loop)."""
    pairs = list(getattr(args, "set", None) or [])
    keep, data = [], {}
    for pair in pairs:
        key = pair.partition("=")[0]
        if key in _DATA_KEYS:
            data.update(parse_kv([pair]))
        else:
            keep.append(pair)
    args.set = keep
    return data


def _transforms(model, size: int, train: bool):
    from zoo.video import transforms as VT
    from zoo.video.tsn import VideoTSN

    mean, std = (VT.IMAGENET_MEAN, VT.IMAGENET_STD) if isinstance(model, VideoTSN) else (VT.KINETICS_MEAN, VT.KINETICS_STD)
    resize = round(size * 128 / 112)
    crop = [VT.Resize(resize), VT.RandomCrop(size), VT.RandomHorizontalFlip()] if train else [
        VT.Resize(resize), VT.CenterCrop(size)]
    return VT.Compose([*crop, VT.ToFloat(), VT.Normalize(mean, std)])


@data_adapter("video")
def _ucf101_adapter(args: argparse.Namespace, model) -> tuple[Any, dict[str, Any]]:
    from zoo.video.evaluation import video_eval_fn
    from zoo.video.tsn import VideoTSN
    from zoo.video.ucf101 import UCF101

    if not args.data or not args.splits:
        raise UsageError(
            "video models need --data (the UCF-101 folder of <Class>/*.avi) and --splits (ucfTrainTestlist)"
        )
    opts = _pop_data_options(args)
    fold = int(opts.get("fold", 1))
    size = int(opts.get("size", 112))
    workers = int(opts.get("num_workers", 2))
    common = {"frame_rate": opts.get("frame_rate"), "strict": bool(opts.get("strict", False)),
              "short_video": opts.get("short_video", "loop")}
    tsn = isinstance(model, VideoTSN)
    if tsn:
        clip_opts = {"sampling": "segments", "num_segments": int(opts.get("num_segments", 8))}
        train_opts, test_opts = clip_opts, clip_opts
    else:
        t = int(opts.get("frames_per_clip", 16))
        train_opts = {"sampling": "random", "frames_per_clip": t}
        test_opts = {"sampling": "uniform", "frames_per_clip": t,
                     "step_between_clips": int(opts.get("step_between_clips", t))}
    test = UCF101(args.data, args.splits, fold=fold, train=False, transform=_transforms(model, size, False),
                  **test_opts, **common)
    extra: dict[str, Any] = {"num_workers": workers}
    if args.batch_size is None:
        extra["batch_size"] = 8
    if test.sampling == "uniform":
        extra["eval_fn"] = video_eval_fn(batch_size=args.batch_size or 8, num_workers=workers)
    if not hasattr(args, "epochs"):  # zoo eval
        return test, extra
    train = UCF101(args.data, args.splits, fold=fold, train=True, transform=_transforms(model, size, True),
                   seed=args.seed, **train_opts, **common)
    return train, {**extra, "val_data": test, "seed": args.seed}


def _configure_synthetic(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="folder to write videos/ and splits/ into")
    p.add_argument("--size", type=int, default=64, help="frame size in pixels (default 64)")
    p.add_argument("--frames", type=int, default=32, help="frames per clip (default 32)")
    p.add_argument("--train-per-class", type=int, default=40)
    p.add_argument("--test-per-class", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)


@command("video-synthetic", "write the generated action data set (UCF101 layout, mpeg4 .avi)", _configure_synthetic)
def _cmd_synthetic(args: argparse.Namespace) -> int:
    from zoo.video.synthetic import SyntheticConfig, make_synthetic_actions

    cfg = SyntheticConfig(size=args.size, num_frames=args.frames, train_per_class=args.train_per_class,
                          test_per_class=args.test_per_class, seed=args.seed)
    videos, splits = make_synthetic_actions(args.out, cfg)
    print(f"videos: {videos}\nsplits: {splits}\ntrain with: zoo train video-tsn --data {videos} --splits {splits}")
    return 0


DEMO_WEIGHTS = "video-tsn.synthetic-actions"


@demo("video: generate an action clip and classify it (video-tsn.synthetic-actions)", order=80)
def _demo() -> None:
    import numpy as np

    import zoo
    from zoo import hub
    from zoo.video import transforms as VT
    from zoo.video.predict import predict_video
    from zoo.video.synthetic import CLASSES, render_clip, write_video

    try:
        entry = hub.get_entry(DEMO_WEIGHTS)
    except KeyError:
        print(f"{DEMO_WEIGHTS} is not in the weights manifest; produce it with "
              "`flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/video_synthetic.py`")
        return
    spec = entry.meta.get("input", {})
    size, frames, segments = int(spec.get("size", 64)), int(spec.get("num_frames", 32)), int(spec.get("num_segments", 8))
    model = zoo.build("video-tsn", weights=DEMO_WEIGHTS)
    transform = VT.Compose([VT.ToFloat(), VT.Normalize(spec.get("mean", VT.IMAGENET_MEAN), spec.get("std", VT.IMAGENET_STD))])
    rng = np.random.default_rng()
    label = int(rng.integers(len(CLASSES)))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_video(Path(tmp) / f"v_{CLASSES[label]}_demo.avi", render_clip(label, rng, size, frames))
        probs = predict_video(model, path, num_segments=segments, transform=transform)
    pred = int(probs.argmax())
    top = ", ".join(f"{CLASSES[i]} {float(probs[i]):.2f}" for i in probs.argsort(descending=True)[:3].tolist())
    verdict = "correct" if pred == label else "WRONG"
    print(f"generated a {size}x{size} {frames}-frame '{CLASSES[label]}' clip (mpeg4 .avi); "
          f"video-tsn says '{CLASSES[pred]}' ({verdict}); top-3: {top}")
    metrics = entry.meta.get("metrics", {})
    if metrics:
        print("weights measured: " + ", ".join(f"{k}={v}" for k, v in metrics.items()))
