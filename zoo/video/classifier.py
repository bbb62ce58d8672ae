"""What a video network offers zoo's contract: video folders as data, ``zoo.predict`` on video files,
``zoo.save`` with the class names and input recipe inside the file.

Data forms, the same for ``zoo.train`` and ``zoo.evaluate``:

- a folder of class folders, ``DIR/<class>/<video>`` (or ``DIR/train/...`` + ``DIR/val/...``), like an
  image folder;
- a UCF101-style root with its split files: ``zoo.train(model, "UCF-101", splits="ucfTrainTestlist",
  fold=1)``;
- a Dataset or DataLoader of ``(clip (C, T, H, W), label)``.

``video_cfg`` (as the vision family's ``pretrained_cfg``) holds the input recipe the network expects: frame
``size`` and ``resize``, ``mean``/``std``, and ``num_segments`` (TSN) or ``frames_per_clip`` (3D models),
plus the ``classes`` once known.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from zoo.engine.network import Network

__all__ = ["VIDEO_EXTENSIONS", "VideoClassifierMixin", "scan_video_folder"]

VIDEO_EXTENSIONS = (".avi", ".mp4", ".mkv", ".mov", ".webm", ".m4v", ".mpg", ".mpeg")
_SPLITS = {"train": ("train", "training"), "val": ("val", "valid", "validation", "test")}


def _split_dir(root: Path, split: str) -> Path | None:
    return next((root / n for n in _SPLITS[split] if (root / n).is_dir()), None)


def scan_video_folder(root: str | os.PathLike, classes: list[str] | None = None) -> tuple[list[tuple[str, int]], list[str]]:
    """``root/<class>/<video>`` -> ``([(path, label), ...], classes)`` (sorted; other files ignored)."""
    root = Path(root)
    found = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    classes = list(classes) if classes is not None else found
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise ValueError(f"{root}: class folder(s) {unknown} are not among the model's classes {classes}")
    videos = [(str(f), i) for i, c in enumerate(classes) if (root / c).is_dir()
              for f in sorted((root / c).rglob("*")) if f.suffix.lower() in VIDEO_EXTENSIONS]
    if not videos:
        raise ValueError(f"{root}: no video files ({', '.join(VIDEO_EXTENSIONS)}) in class folders")
    return videos, classes


class VideoClassifierMixin(Network):
    """Mixed into a video ``nn.Module`` taking ``(B, C, T, H, W)``; subclasses set ``registry_name``,
    ``default_video_cfg()`` and a ``config`` property."""

    registry_name = ""
    video_cfg: dict[str, Any]

    # -- data ----------------------------------------------------------------------------------------------
    def _transform(self, train: bool):
        from zoo.video import transforms as VT

        cfg = self.video_cfg
        size, resize = int(cfg["size"]), int(cfg.get("resize", cfg["size"]))
        crop = [VT.RandomCrop(size), VT.RandomHorizontalFlip()] if train else [VT.CenterCrop(size)]
        return VT.Compose([VT.Resize(resize), *crop, VT.ToFloat(), VT.Normalize(cfg["mean"], cfg["std"])])

    def _clip_options(self, train: bool) -> dict[str, Any]:
        cfg = self.video_cfg
        if "num_segments" in cfg:
            return {"sampling": "segments", "num_segments": int(cfg["num_segments"])}
        t = int(cfg.get("frames_per_clip", 16))
        return {"sampling": "random", "frames_per_clip": t} if train else \
            {"sampling": "uniform", "frames_per_clip": t, "step_between_clips": t}

    def _dataset(self, root: Path, train: bool, splits: Any, fold: int, extra: dict[str, Any]):
        from zoo.video.ucf101 import UCF101, VideoClipDataset

        common = {"transform": self._transform(train), **self._clip_options(train), **extra}
        if splits is not None:
            return UCF101(root, splits, fold=fold, train=train, **common)
        videos, classes = scan_video_folder(root, None if train else self.video_cfg.get("classes"))
        return VideoClipDataset(videos, classes, train=train, **common)

    def zoo_recipe(self, *, train: bool) -> dict[str, Any]:
        return {"metrics": ("accuracy", "top5") if self.num_classes >= 5 else ("accuracy",), "batch_size": 8}

    def zoo_data(self, data: Any, *, train: bool, splits: str | os.PathLike | None = None, fold: int = 1,
                 frame_rate: float | None = None, strict: bool = False, size: int | None = None,
                 resize: int | None = None, num_segments: int | None = None, frames_per_clip: int | None = None,
                 **options: Any) -> tuple[Any, dict[str, Any]]:
        """A video folder (see the module docs) -> clip datasets with the network's input recipe.

        Training may set that recipe (``size``, ``resize``, ``num_segments`` / ``frames_per_clip``); it is
        kept in ``video_cfg``, so prediction and a saved file feed the network the same way.
        """
        recipe = {"size": size, "resize": resize or size, "num_segments": num_segments,
                  "frames_per_clip": frames_per_clip}
        recipe = {k: v for k, v in recipe.items() if v is not None}
        if recipe and not train:
            raise ValueError(f"{sorted(recipe)} set how the network is fed; they are fixed once it is trained "
                             f"(video_cfg: {self.video_cfg})")
        self.video_cfg.update(recipe)
        if not isinstance(data, (str, os.PathLike)):
            return data, options
        root = Path(data)
        if not root.is_dir():
            raise FileNotFoundError(f"video folder not found: {root} (expected DIR/<class>/<video files>)")
        extra = {"frame_rate": frame_rate, "strict": strict, "seed": options.get("seed") if train else None}
        if not train:
            folder = root if splits is not None else (_split_dir(root, "val") or root)
            return self._dataset(folder, False, splits, fold, extra), options
        train_root = root if splits is not None else (_split_dir(root, "train") or root)
        train_ds = self._dataset(train_root, True, splits, fold, extra)
        self._check_classes(train_ds.classes, train_root)
        self.video_cfg["classes"] = list(train_ds.classes)
        val_root = root if splits is not None else (_split_dir(root, "val") if train_root != root else None)
        val = self._dataset(val_root, False, splits, fold, extra) if val_root is not None else None
        return train_ds, ({"val_data": val} if val is not None else {}) | options

    def _check_classes(self, classes: list[str], where: Any) -> None:
        if len(classes) != self.num_classes:
            raise ValueError(f"{where} has {len(classes)} classes but the network has {self.num_classes} outputs: "
                             f"build it with num_classes={len(classes)}")

    # -- zoo.predict ---------------------------------------------------------------------------------------
    def zoo_predict(self, inputs: Any, *, topk: int = 1) -> list[dict[str, Any]]:
        """Video files or folders of them -> one dict per video: ``{"input", "label", "index", "prob", "topk"}``."""
        from zoo.inputs import collect_files
        from zoo.video.predict import predict_video

        paths = collect_files(inputs, VIDEO_EXTENSIONS, "video")
        names = self.video_cfg.get("classes")
        clip = {k: self.video_cfg[k] for k in ("num_segments", "frames_per_clip") if k in self.video_cfg}
        out = []
        for path in paths:
            probs = predict_video(self, path, transform=self._transform(False),
                                  num_segments=clip.get("num_segments"), frames_per_clip=clip.get("frames_per_clip"))
            top_p, top_i = probs.topk(min(topk, len(probs)))
            labels = [names[i] if names and i < len(names) else str(i) for i in top_i.tolist()]
            out.append({"input": str(path), "label": labels[0], "index": int(top_i[0]), "prob": float(top_p[0]),
                        "topk": list(zip(labels, top_p.tolist()))})
        return out

    # -- zoo.save ------------------------------------------------------------------------------------------
    def zoo_state(self):
        from dataclasses import asdict

        from zoo.api import ModelState

        return ModelState(self.registry_name, asdict(self.config), self.state_dict(),
                          {"zoo.video_cfg": json.dumps(self.video_cfg)})

    def load_video_cfg(self, path: Path, entry: Any) -> None:
        """The input recipe and classes a weights file carries (its metadata, or the manifest entry's meta)."""
        from zoo import hub

        saved = hub.read_metadata(path).get("zoo.video_cfg") if str(path).endswith(".safetensors") else None
        if saved:
            self.video_cfg.update(json.loads(saved))
            return
        meta = dict(getattr(entry, "meta", None) or {})
        spec = dict(meta.get("input") or {})
        for key in ("size", "resize", "mean", "std", "num_segments", "frames_per_clip"):
            if key in spec:
                self.video_cfg[key] = spec[key]
        if "size" in spec and "resize" not in spec:
            self.video_cfg["resize"] = spec["size"]  # the clips were trained at their stored size
        if meta.get("classes") and len(meta["classes"]) == self.num_classes:
            self.video_cfg["classes"] = list(meta["classes"])


def classes_in(data: Any) -> dict[str, Any]:
    """A video folder implies ``num_classes`` (its class folders; a UCF101 root: its 101 class folders)."""
    if not isinstance(data, (str, os.PathLike)) or not Path(data).is_dir():
        return {}
    root = _split_dir(Path(data), "train") or Path(data)
    n = sum(1 for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    return {"num_classes": n} if n else {}
