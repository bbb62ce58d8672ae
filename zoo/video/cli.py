"""The video family on the command line.

- ``zoo train video-tsn --data UCF-101 --splits ucfTrainTestlist [--fold 2]`` (and ``r2plus1d_18``, and
  ``zoo eval``), or ``--data DIR`` with ``DIR/<class>/<video>`` folders: ``--splits``/``--fold`` are this
  family's options, the rest goes to ``zoo.train`` / ``zoo.evaluate``;
- ``zoo predict video-tsn --weights synthetic-actions clip.mp4``: top-k classes per video;
- ``zoo video-synthetic OUT``: write the generated action data set;
- the ``zoo demo`` step: generate one action clip and classify it with ``video-tsn.synthetic-actions``.
"""

from __future__ import annotations

import argparse
import shlex
import tempfile
from pathlib import Path
from typing import Any

from zoo.cli import command, demo, family_options


def _configure_video(p: argparse._ActionsContainer) -> None:
    p.add_argument("--splits", help="UCF101 split files folder (classInd.txt, trainlist0N.txt); without it --data "
                                    "is a folder of class folders")
    p.add_argument("--fold", type=int, help="UCF101 fold (1-3, default 1)")


@family_options("video", _configure_video)
def _video_options(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in ("splits", "fold") if getattr(args, k, None) is not None}


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
    # hflip=false: a mirrored MoveRight clip is a MoveLeft one, and training's default flips half the clips
    print(f"videos: {videos}\nsplits: {splits}\ntrain with: zoo train video-tsn --data "
          f"{shlex.quote(str(videos))} --splits {shlex.quote(str(splits))} --set hflip=false")
    return 0


DEMO_WEIGHTS = "video-tsn.synthetic-actions"


@demo("video: generate an action clip and classify it (video-tsn.synthetic-actions)", order=80)
def _demo() -> None:
    import numpy as np

    import zoo
    from zoo import hub
    from zoo.video.synthetic import CLASSES, render_clip, write_video

    try:
        entry = hub.get_entry(DEMO_WEIGHTS)
    except KeyError:
        print(f"{DEMO_WEIGHTS} is not in the weights manifest; produce it with "
              "`python benchmarks/video_synthetic.py`")
        return
    model = zoo.build("video-tsn", weights=DEMO_WEIGHTS)
    size, frames = int(model.video_cfg["size"]), int(entry.meta.get("input", {}).get("num_frames", 32))
    rng = np.random.default_rng()
    label = int(rng.integers(len(CLASSES)))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_video(Path(tmp) / f"v_{CLASSES[label]}_demo.avi", render_clip(label, rng, size, frames))
        (r,) = zoo.predict(model, path, topk=3)
    verdict = "correct" if r["label"] == CLASSES[label] else "WRONG"
    top = ", ".join(f"{name} {p:.2f}" for name, p in r["topk"])
    print(f"generated a {size}x{size} {frames}-frame '{CLASSES[label]}' clip (mpeg4 .avi); "
          f"video-tsn says '{r['label']}' ({verdict}); top-3: {top}")
    metrics = entry.meta.get("metrics", {})
    if metrics:
        print("weights measured: " + ", ".join(f"{k}={v}" for k, v in metrics.items()))
