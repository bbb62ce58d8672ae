"""What a video network offers zoo's contract: video folders as data, ``zoo.predict`` on video files,
``zoo.save`` with the class names and input recipe inside the file.

Data forms, the same for ``zoo.train`` and ``zoo.evaluate``:

- a folder of class folders, ``DIR/<class>/<video>`` (or ``DIR/train/...`` + ``DIR/val/...``), like an
  image folder;
- a UCF101-style root with its split files: ``zoo.train(model, "UCF-101", splits="ucfTrainTestlist",
  fold=1)``;
- a Dataset or DataLoader of ``(clip (C, T, H, W), label)``.

A validation set (``val_data=``, or ``{"train": DIR, "val": DIR}``) takes the same forms; a folder is read
with the training data's classes before training starts, so a bad one fails before an epoch is spent.

``video_cfg`` (as the vision family's ``pretrained_cfg``) holds the input recipe the network expects: frame
``size`` (the centre crop) and ``resize`` (an int: the shorter side, aspect kept; ``[height, width]``: both),
``antialias`` (absent: True; torchvision's Kinetics weights were trained on frames resized without it),
``mean``/``std``, and one of ``num_segments`` (TSN's sparse frames; the TSN default) or ``frames_per_clip``
(consecutive frames; the 3D models' default), plus the ``classes`` once known. Training with the other key
replaces the default one, so training, evaluation and prediction always sample clips the same way. Training on
a clip data set of zoo's (``UCF101``, ``VideoClipDataset``) records the data set's own sampling.

Training mirrors clips left-right at random (``hflip=True``, as UCF101 recipes do); ``hflip=False`` turns that
off for classes a mirror turns into one another (the synthetic ``MoveRight`` / ``MoveLeft``). It is recorded
with the recipe in the checkpoints (``data.hflip``), so a resume with the other value is refused.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zoo._stacklevel import user_stacklevel
from zoo.engine.head import ClassifierHead
from zoo.engine.network import Network
from zoo.engine.options import FitConfig
from zoo.inputs import class_folders, split_folder, visible_files, whole_number
from zoo.video.sizes import size_pair

if TYPE_CHECKING:
    import torch

__all__ = ["VIDEO_EXTENSIONS", "VideoClassifierMixin", "scan_video_folder"]

VIDEO_EXTENSIONS = (".avi", ".mp4", ".mkv", ".mov", ".webm", ".m4v", ".mpg", ".mpeg")
CLIP_KEYS = ("num_segments", "frames_per_clip")
log = logging.getLogger(__name__)


def clip_recipe(cfg: dict[str, Any]) -> tuple[str, int]:
    """``("num_segments", T)`` or ``("frames_per_clip", T)``: how a ``video_cfg`` samples a clip.

    A cfg holds one of the two; files saved before that rule could hold both, and were then trained on
    ``num_segments``, so it wins.
    """
    key = next((k for k in CLIP_KEYS if k in cfg), "frames_per_clip")
    # int() read num_segments=2.5 (a hand-edited video_cfg, a file of another tool) as 2 segments without a word
    return key, whole_number(cfg.get(key, 16), f"video_cfg[{key!r}]", hint="frames")


def recipe_sizes(cfg: dict[str, Any]) -> tuple[int, int | list[int]]:
    """``(size, resize)`` of a ``video_cfg``, checked: the crop an int, the resize an int (the shorter side) or
    ``[height, width]``. ``int()`` read a ``size`` of 16.7 as 16 and ``True`` as 1, without a word."""
    size = whole_number(cfg["size"], "video_cfg['size']", hint="the centre crop, pixels")
    return size, _resize_option(cfg.get("resize", size), "video_cfg['resize']")


def set_clip_recipe(cfg: dict[str, Any], updates: dict[str, Any]) -> None:
    """Update ``cfg`` from ``updates``; a clip key in ``updates`` replaces the other one in ``cfg``."""
    given = [k for k in CLIP_KEYS if updates.get(k) is not None]
    if len(given) > 1:
        raise ValueError(f"give num_segments (one frame from each of T segments) or frames_per_clip (T consecutive "
                         f"frames), not both: got num_segments={updates['num_segments']!r}, "
                         f"frames_per_clip={updates['frames_per_clip']!r}")
    if given:
        for k in CLIP_KEYS:
            cfg.pop(k, None)
    cfg.update(updates)


def scan_video_folder(root: str | os.PathLike, classes: list[str] | None = None) -> tuple[list[tuple[str, int]], list[str]]:
    """``root/<class>/<video>`` -> ``([(path, label), ...], classes)`` (sorted; other files and hidden files
    and folders ignored).

    A class folder without a video file is an error, as in torchvision's ``DatasetFolder`` and the vision
    family's image folders: a class nothing teaches, or videos of a kind not read. ``classes`` given
    (evaluation), a folder may hold some of them; a warning names the others."""
    root = Path(root)
    found = class_folders(root)
    given = classes is not None
    classes = list(classes) if classes is not None else found
    unknown = sorted(set(found) - set(classes))
    if unknown:
        lower = {c.lower(): c for c in classes}
        cased = [f"{u!r} for {lower[u.lower()]!r}" for u in unknown if u.lower() in lower]
        hint = f" ({', '.join(cased)} differ only in case: rename the folder as the model names the class)" \
            if cased else ""
        raise ValueError(f"{root}: class folder(s) {unknown} are not among the model's classes {classes}{hint}")
    # hidden entries (macOS "._v.mp4" forks) are no videos of the class: evaluate and predict score the same videos
    files = {c: visible_files(root / c, VIDEO_EXTENSIONS) for c in classes if (root / c).is_dir()}
    if not any(files.values()):
        raise ValueError(f"{root}: no video files ({', '.join(VIDEO_EXTENSIONS)}) in class folders")
    empty = [c for c, fs in files.items() if not fs]
    if empty:
        raise ValueError(f"{root}: class folder(s) with no video file: {empty}; every class needs at least one "
                         f"({', '.join(VIDEO_EXTENSIONS)}): add videos or remove the folder")
    absent = [c for c in classes if c not in files]
    if given and absent:
        warnings.warn(f"{root}: {len(absent)} of the {len(classes)} classes have no folder here "
                      f"({absent[:10]}{' ...' if len(absent) > 10 else ''}): the videos of the other "
                      f"{len(classes) - len(absent)} are scored", stacklevel=user_stacklevel())
    return [(str(f), i) for i, c in enumerate(classes) for f in files.get(c, ())], classes


class VideoClassifierMixin(ClassifierHead, Network):
    """Mixed into a video ``nn.Module`` taking ``(B, C, T, H, W)``; subclasses set ``registry_name``,
    ``default_video_cfg()`` and a ``config`` property, and define timm's ``forward_features`` /
    ``forward_head`` (:mod:`zoo.engine.head`: ``get_classifier`` and ``reset_classifier`` come from there)."""

    # where zoo_evaluate's **config goes (zoo.registry.call_options reads it for the options it names)
    zoo_options_of: ClassVar[dict[str, str]] = {"zoo_evaluate": "zoo.video.evaluation.evaluate_classifier"}

    registry_name = ""
    video_cfg: dict[str, Any]

    # -- data ----------------------------------------------------------------------------------------------
    def _transform(self, train: bool, hflip: bool = True):
        from zoo.video import transforms as VT

        cfg = self.video_cfg
        size, resize = recipe_sizes(cfg)
        flip = [VT.RandomHorizontalFlip()] if hflip else []
        crop = [VT.RandomCrop(size), *flip] if train else [VT.CenterCrop(size)]
        return VT.Compose([VT.Resize(resize, antialias=bool(cfg.get("antialias", True))), *crop, VT.ToFloat(),
                           VT.Normalize(cfg["mean"], cfg["std"])])

    def predict_inputs(self) -> tuple[dict[str, int], Any]:
        """``({"num_segments" or "frames_per_clip": T}, eval transform)``: how ``zoo.predict`` reads a video for this
        network, from its recorded recipe (``video_cfg``); :func:`zoo.video.predict.predict_video` defaults to it."""
        key, t = clip_recipe(self.video_cfg)
        return {key: t}, self._transform(False)

    def _clip_options(self, train: bool) -> dict[str, Any]:
        key, t = clip_recipe(self.video_cfg)
        if key == "num_segments":
            return {"sampling": "segments", "num_segments": t}
        return {"sampling": "random", "frames_per_clip": t} if train else \
            {"sampling": "uniform", "frames_per_clip": t, "step_between_clips": t}

    def _dataset(self, root: Path, train: bool, splits: Any, fold: int, extra: dict[str, Any], hflip: bool = True):
        from zoo.video.ucf101 import UCF101, VideoClipDataset

        common = {"transform": self._transform(train, hflip), **self._clip_options(train), **extra}
        if splits is not None:
            return UCF101(root, splits, fold=fold, train=train, **common)
        videos, classes = scan_video_folder(root, None if train else self.video_cfg.get("classes"))
        return VideoClipDataset(videos, classes, train=train, **common)

    def zoo_recipe(self, *, train: bool) -> dict[str, Any]:
        return {"metrics": ("accuracy", "top5") if self.num_classes >= 5 else ("accuracy",), "batch_size": 8}

    def min_clip_frames(self) -> tuple[int, str]:
        """``(fewest frames a clip may have, why)``: any clip of at least one frame, unless a network's input
        needs more (TSN's ``rgbdiff``)."""
        return 1, ""

    def zoo_train(self, data: Any, **config: Any):
        """``zoo.train(network, data)`` (:meth:`zoo.engine.network.Network.zoo_train`). A run that fails before
        its weights change (no optimizer step, no checkpoint resumed) leaves ``video_cfg`` as it was: the recipe
        the call set fed no weights, and kept, it fed ``zoo.predict`` frames the network never learned on (a
        ``resize`` smaller than the crop zero-padded every clip)."""
        before = copy.deepcopy(self.video_cfg)
        watch = _WeightsWatch(self)
        with watch:
            try:
                return super().zoo_train(data, **config)
            except BaseException:
                if not watch.changed:
                    self.video_cfg.clear()
                    self.video_cfg.update(before)
                raise

    def zoo_data(self, data: Any, *, train: bool, splits: str | os.PathLike | None = None, fold: int | None = None,
                 frame_rate: float | None = None, strict: bool = False, size: int | None = None,
                 resize: int | Sequence[int] | None = None, num_segments: int | None = None,
                 frames_per_clip: int | None = None, hflip: bool = True,
                 **options: Any) -> tuple[Any, dict[str, Any]]:
        """A video folder (see the module docs) -> clip datasets with the network's input recipe.

        Training may set that recipe (``size``, ``resize`` >= ``size``: the shorter side or ``[height, width]``,
        ``num_segments`` / ``frames_per_clip``;
        a clip data set of zoo's brings its own sampling); it is kept in ``video_cfg``, so prediction and a saved
        file feed the network the same way. ``hflip`` (training only; default True): mirror training clips
        left-right at random, recorded in the checkpoints. A ``val_data``
        folder (or UCF101 root, with ``splits=``) replaces the training folder's own ``val/`` split.
        ``fold`` (1, 2 or 3) picks UCF101's split files; training records it, and an evaluation without one
        scores the fold trained on (UCF101's folds overlap: another fold's testlist holds training videos).
        """
        recipe = {"size": size, "resize": resize if resize is not None else size, "num_segments": num_segments,
                  "frames_per_clip": frames_per_clip}
        recipe = {k: v for k, v in recipe.items() if v is not None}
        if recipe and not train:
            raise ValueError(f"{sorted(recipe)} set how the network is fed; they are fixed once it is trained "
                             f"(video_cfg: {self.video_cfg})")
        if splits is not None and not isinstance(splits, (str, os.PathLike)):  # splits=1 meant as the fold
            raise TypeError(f"splits= is the folder of UCF101's split files (classInd.txt, trainlist01.txt, ...), "
                            f"got {splits!r} ({type(splits).__name__}); the split number is fold=1, 2 or 3")
        # checked before video_cfg takes them (a bad one would stay there for good), as plain ints for its JSON;
        # resize as video_cfg holds it: the shorter side, or [height, width] (torchvision's Kinetics 128x171)
        recipe = {key: _resize_option(value) if key == "resize" else
                  whole_number(value, key, hint="pixels" if key == "size" else "frames")
                  for key, value in recipe.items()}
        if not isinstance(hflip, bool):
            raise TypeError(f"hflip must be True (mirror training clips left-right at random) or False (never), got "
                            f"{hflip!r} ({type(hflip).__name__}): pass hflip=True or hflip=False")
        if train and not isinstance(data, (str, os.PathLike)):
            recipe = _with_dataset_sampling(data, recipe)
        if recipe:
            self._refuse_unfit_recipe(recipe)
        if splits is None and isinstance(data, (str, os.PathLike)) and (inner := split_folder_in(data)) is not None:
            # a UCF101 root with ucfTrainTestlist/ inside: the split files are taken, as classes_in takes their
            # classes (else it fails: 'class folder(s) with no video file: [ucfTrainTestlist]')
            log.info("splits: %s (the split folder inside %s)", inner, data)
            splits = inner
        fold = self._fold(fold, splits, data, train)
        before = dict(self.video_cfg)
        set_clip_recipe(self.video_cfg, recipe)
        try:
            return self._clip_data(data, train, splits, fold, frame_rate, strict, hflip, options)
        except BaseException:
            self.video_cfg.clear()  # a call that fails leaves the network fed as before it
            self.video_cfg.update(before)
            raise

    def _refuse_unfit_recipe(self, recipe: dict[str, Any]) -> None:
        """Refuse a recipe no clip can be made with (checked before ``video_cfg`` takes it: it failed in the
        first batch, and a shipped model kept it and failed on every later ``zoo.predict``)."""
        cfg = dict(self.video_cfg)
        set_clip_recipe(cfg, recipe)
        size, resize = recipe_sizes(cfg)
        shorter = min(resize) if isinstance(resize, list) else resize
        if shorter < size:
            raise ValueError(f"resize={resize} is smaller than size={size}: frames are resized (resize: the shorter "
                             f"side) and then cropped to {size}x{size}, so resize must be >= size; pass a resize of "
                             f"at least {size}, or size={shorter} or less")
        key, count = clip_recipe(cfg)
        need, why = self.min_clip_frames()
        if count < need:
            raise ValueError(f"{key}={count} gives clips of {count} frame(s), but this {self.registry_name} needs at "
                             f"least {need} ({why}): pass {key}={need} or more")

    def _fold(self, fold: Any, splits: Any, data: Any, train: bool) -> int:
        """The UCF101 fold a call reads: ``fold`` checked, else the one the network trained on, else 1."""
        trained = self.video_cfg.get("fold")
        if fold is None:
            return int(trained) if trained is not None and not train else 1
        fold = whole_number(fold, "fold", hint="UCF101's split 1, 2 or 3")
        if splits is None:  # a fold of no split files: ignored, it read the folder it would not choose
            raise ValueError(f"fold={fold} picks UCF101's split files (trainlist0{fold}.txt, testlist0{fold}.txt), "
                             f"and {data if isinstance(data, (str, os.PathLike)) else type(data).__name__} is read "
                             "without any: pass splits=DIR (the folder of classInd.txt), or leave fold out")
        if not train and trained is not None and fold != trained:
            warnings.warn(f"this network trained on UCF101's fold {trained} (trainlist0{trained}.txt), and "
                          f"testlist0{fold}.txt holds videos of that list (the folds overlap): the score counts "
                          f"videos it trained on; evaluate fold={trained}", stacklevel=user_stacklevel())
        return fold

    def _clip_data(self, data: Any, train: bool, splits: Any, fold: int, frame_rate: float | None, strict: bool,
                   hflip: bool, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """:meth:`zoo_data` once ``video_cfg`` holds the recipe."""
        # the loop's progress default: bars while training, none while evaluating (zoo.engine)
        # the clips a training run samples follow its seed; none given is the loop's default (0), as in fit
        extra = {"frame_rate": frame_rate, "strict": strict,
                 "seed": (options.get("seed", FitConfig.seed) if train else None),
                 "progress": bool(options.get("progress", train))}
        val_data = options.pop("val_data", None) if train else None
        _refuse_path_list(data, "data")
        _refuse_path_list(val_data, "val_data")
        if not isinstance(data, (str, os.PathLike)):
            if isinstance(val_data, (str, os.PathLike)):  # read now: a bad folder fails before an epoch is spent
                options["val_data"] = self._eval_folder(val_data, splits, fold, extra, "val_data")[0]
            elif val_data is not None:
                options["val_data"] = self._transformed(val_data, False)
            theirs = _data_classes(data)
            named = train and len(theirs) == self.num_classes
            if named:  # its outputs' names, as a folder's, kept in video_cfg and in the checkpoints
                self.video_cfg["classes"] = theirs
            ours = self.video_cfg.get("classes")
            if not train and theirs and ours and theirs != list(ours):  # as vision's: labels are indices
                warnings.warn(f"{type(data).__name__}'s classes {theirs[:5]} are not the network's {list(ours)[:5]}: "
                              f"its labels are scored by index (label i as output i); give the videos as a folder "
                              f"to match classes by name", stacklevel=user_stacklevel())
            recorded = self._recorded(options, hflip=hflip, **({"classes": self.video_cfg["classes"]} if named else {}))
            fed = self._transformed(data, train, hflip)
            if train and not hflip and fed is data:  # else hflip=False would be taken and do nothing
                raise ValueError(f"hflip=False leaves the flip out of zoo's training transform, but this "
                                 f"{type(data).__name__} is fed as it is (it brings its own transform, or is not a "
                                 "clip data set of zoo's): leave hflip out, and make its transform without a flip")
            return fed, (recorded if train else options)
        if not train:
            return self._eval_folder(data, splits, fold, extra, "video folder")[0], options
        root = Path(data)
        if not root.is_dir():
            raise FileNotFoundError(f"video folder not found: {root} (expected DIR/<class>/<video files>)")
        train_root = root if splits is not None else (split_folder(root, "train") or root)
        train_ds = self._dataset(train_root, True, splits, fold, extra, hflip)
        if splits is not None:  # the fold its evaluations default to
            self.video_cfg["fold"] = fold
        else:
            self.video_cfg.pop("fold", None)
        if len(train_ds.classes) < 2:
            raise ValueError(f"{train_root}: one class ({train_ds.classes[0]!r}); a classifier learns to tell classes "
                             "apart: give it at least 2 (DIR/<class>/<videos>, one folder per class)")
        self._check_classes(train_ds.classes, train_root)
        ours = self.video_cfg.get("classes")
        if ours and sorted(str(c).lower() for c in ours) == sorted(c.lower() for c in train_ds.classes):
            # the network's own classes in another order (trained on a class folder, trained on with classInd.txt's
            # order): labelled by name, as its evaluation is; renamed, its outputs swapped meaning without a word
            self._label_by_name(train_ds, train_root)
        else:
            self.video_cfg["classes"] = list(train_ds.classes)
        if isinstance(val_data, (str, os.PathLike)):
            # read as the training data is, labelled with its classes, before training starts
            val, val_root = self._eval_folder(val_data, splits, fold, extra, "val_data")
        else:
            val_root = root if splits is not None else (split_folder(root, "val") if train_root != root else None)
            val = self._dataset(val_root, False, splits, fold, extra) if val_root is not None else None
            if val is not None:
                self._label_by_name(val, val_root)
            if val_data is not None:
                options["val_data"] = val_data  # given, it replaces the root's own val split
        from zoo.engine.resume import files_fingerprint

        read = {"train_videos": files_fingerprint((m.path for m in train_ds.videos), root=train_root),
                "val_videos": None if val is None else files_fingerprint((m.path for m in val.videos), root=val_root),
                "classes": list(train_ds.classes)}  # so a network built from a checkpoint names its outputs
        options = self._recorded(options, frame_rate=frame_rate, strict=strict, hflip=hflip, **read)
        return train_ds, ({"val_data": val} if val is not None else {}) | options

    def _eval_folder(self, data: str | os.PathLike, splits: Any, fold: int, extra: dict[str, Any],
                     what: str) -> tuple[Any, Path]:
        """An evaluation or validation folder -> ``(dataset, folder read)``: ``DIR/<class>/<video>`` (or its
        ``val/`` split; a UCF101 root's testlist with ``splits=``) labelled with the network's classes."""
        root = Path(data)
        if not root.is_dir():
            raise FileNotFoundError(f"{what} not found: {root} (expected DIR/<class>/<video files>, or a UCF101 "
                                    "root with splits=)")
        folder = root if splits is not None else (split_folder(root, "val") or root)
        ds = self._dataset(folder, False, splits, fold, extra)
        self._check_classes(ds.classes, folder)  # else labels past the head fail deep in the loss
        if splits is not None:
            self._label_by_name(ds, folder)
        return ds, folder

    def _label_by_name(self, ds: Any, where: Any) -> None:
        """A UCF101 testlist is labelled in classInd.txt's order, and the network's outputs may be in another: a
        network trained on a class folder sorts its classes case-sensitively, classInd.txt ignores case
        (``HammerThrow`` / ``Hammering``), and every video of such a pair was scored against the other's output.
        Its labels are mapped to the network's classes by name (case aside, as the split files' names are)."""
        ours = self.video_cfg.get("classes")
        if not ours or list(ours) == list(ds.classes):
            return
        index = {str(c).lower(): i for i, c in enumerate(ours)}
        unknown = [c for c in ds.classes if c.lower() not in index]
        if unknown:
            raise ValueError(f"{where}: class(es) {unknown[:5]} of classInd.txt are not among the network's classes "
                             f"{list(ours)[:5]}{' ...' if len(ours) > 5 else ''}: evaluate it on the classes it "
                             "was trained on")
        to_ours = [index[c.lower()] for c in ds.classes]
        ds.labels = [to_ours[label] for label in ds.labels]
        ds.classes, ds.class_to_idx = list(ours), {c: i for i, c in enumerate(ours)}

    def _transformed(self, data: Any, train: bool, hflip: bool = True) -> Any:
        """A clip dataset of zoo's without a transform (``UCF101(root, splits)``: uint8 ``(C, T, H, W)`` clips) as a
        copy with the network's own, as a data set of PIL images gets the vision network's transforms (the uint8
        clips would fail in the first convolution, 'expected scalar type Byte but found BFloat16')."""
        from torch.utils.data import ConcatDataset, DataLoader, Subset

        from zoo.video.ucf101 import VideoClipDataset

        if isinstance(data, Subset):  # a split of one (random_split): the same copy under the same indices
            inner = self._transformed(data.dataset, train, hflip)
            return data if inner is data.dataset else Subset(inner, data.indices)
        if isinstance(data, ConcatDataset):  # each of its data sets, as it would be alone (they failed in the
            # first convolution, "expected scalar type Byte but found Float")
            parts = [self._transformed(d, train, hflip) for d in data.datasets]
            return data if all(a is b for a, b in zip(parts, data.datasets)) else ConcatDataset(parts)
        bare = [ds for ds in _clip_datasets_in(data) if ds.transform is None] if isinstance(data, DataLoader) else []
        if bare:  # a loader is not rebuilt for it
            raise ValueError(f"the DataLoader's {type(bare[0]).__name__} has no transform: its clips are uint8 (C, T, "
                             f"H, W), which the network does not take; give the dataset itself (it gets the "
                             f"network's transform), or make it with transform=")
        if not isinstance(data, VideoClipDataset) or data.transform is not None:
            return data
        data = copy.copy(data)  # the user's stays as it is
        data.transform = self._transform(train, hflip)
        return data

    def _recorded(self, options: dict[str, Any], **data: Any) -> dict[str, Any]:
        """``options`` for fit recording the input recipe training feeds the network (``video_cfg``) and what
        the data step read: a resume with another is refused (``strict``, what a corrupt file does, may change)."""
        from zoo.engine.resume import with_recipe

        cfg = self.video_cfg
        # fold too: a network rebuilt from a checkpoint evaluates, as the trained one does, on its own fold
        recipe = {"size": cfg.get("size"), "resize": cfg.get("resize", cfg.get("size")),
                  "antialias": bool(cfg.get("antialias", True)), "mean": cfg.get("mean"), "std": cfg.get("std"),
                  "clip": "{}={}".format(*clip_recipe(cfg)), "fold": cfg.get("fold"), **data}
        return with_recipe(options, data=recipe, may_change=("strict",) if "strict" in data else ())

    def _check_classes(self, classes: list[str], where: Any) -> None:
        if len(classes) != self.num_classes:
            raise ValueError(f"{where} has {len(classes)} classes but the network has {self.num_classes} outputs: "
                             f"build it with num_classes={len(classes)}")

    # -- zoo.evaluate --------------------------------------------------------------------------------------
    def zoo_evaluate(self, data: Any, **config: Any) -> dict[str, float]:
        """``zoo.evaluate(network, data)``: ``loss``, ``accuracy`` (and ``top5`` from 5 classes) over videos,
        each counted once. A folder's (or UCF101 root's) videos are scored by the clip ``zoo.predict``
        classifies them by, so the two agree video by video; a clip data set's by the mean softmax of its
        clips, with ``clip_accuracy``. See :func:`zoo.video.evaluation.evaluate_classifier` for ``loss``."""
        from zoo.video.evaluation import PredictedClips, evaluate_classifier

        if data is None:
            raise ValueError(f"zoo.evaluate({type(self).__name__}, data): data is required")
        folder = isinstance(data, (str, os.PathLike))
        if folder and config.get("frame_rate") is not None:
            raise ValueError(f"frame_rate={config['frame_rate']!r}: zoo.evaluate on a folder scores each video by "
                             "the frames zoo.predict reads, on the video's own timeline; leave frame_rate out (it "
                             "resamples training clips), or evaluate a clip dataset built with it")
        data, options = self.zoo_data(data, train=False, **config)
        if folder:  # the dataset's own clips (uniform, for training's validation) would weigh long videos more
            key, t = clip_recipe(self.video_cfg)
            data = PredictedClips(data, **{key: t})
        return evaluate_classifier(self, data, **{**self.zoo_recipe(train=False), **options})

    # -- zoo.predict ---------------------------------------------------------------------------------------
    def zoo_predict(self, inputs: Any, *, topk: int = 1, batch_size: int = 8, device: str | torch.device | None = None,
                    amp: str | None = "auto", classes: Sequence[str] | None = None,
                    progress: bool = False) -> list[dict[str, Any]]:
        """Video files or folders of them -> one dict per video: ``{"input", "label", "index", "prob", "topk"}``.

        ``inputs``: a video file, a folder (recursively), a list of both, or an already preprocessed float
        clip ``(C, T, H, W)`` / batch ``(N, C, T, H, W)`` (rows named ``tensor[i]``). A file that cannot be
        decoded gets an ``error`` entry instead of a label, so one bad file does not lose the others'
        predictions; one :class:`zoo.inputs.UnreadableInputWarning` names them all (their count and the first
        five). ``batch_size`` clips go through the network at once, on the model's device
        (``device=`` moves the model there), at ``amp="auto"``: bf16 where this device computes the network's
        convolutions (2-D for TSN, 3-D for R(2+1)D) faster in it; ``amp=None`` is exact fp32. Labels are
        ``classes`` (one name per output), else the class names the model records, else the indices.
        ``progress=True`` shows a bar over the videos.
        """
        import torch

        from zoo._progress import ProgressBar
        from zoo.engine.devices import inference_placement
        from zoo.inputs import check_predict_options, class_names, class_rows, collect_files, warn_unreadable
        from zoo.video.predict import forward_probs

        topk, batch_size = check_predict_options(topk, batch_size)
        _, dtype = inference_placement(self, device, amp)
        names = class_names(classes, self.video_cfg.get("classes"))
        if isinstance(inputs, torch.Tensor):
            if inputs.ndim not in (4, 5) or not inputs.is_floating_point() or not inputs.numel():
                decoded = "" if inputs.is_floating_point() else (
                    "; a decoded clip goes through the network's eval transform first: recipe, transform = "
                    "model.predict_inputs(); load_clip(path, transform=transform, **recipe) (or pass the path)")
                raise ValueError(f"a tensor input must be a preprocessed float clip (C, T, H, W) or batch "
                                 f"(N, C, T, H, W), got {inputs.dtype} {tuple(inputs.shape)}{decoded}")
            if inputs.ndim == 4:
                inputs = inputs.unsqueeze(0)
            takes = next(m.in_channels for m in self.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d)))
            if inputs.shape[1] != takes:  # else a convolution's error about weights and groups, deep inside
                raise ValueError(f"the clips have {inputs.shape[1]} channels (shape {tuple(inputs.shape)}, read as "
                                 f"(N, C, T, H, W)) but the network takes {takes}")
            probs = [forward_probs(self, inputs[i:i + batch_size], dtype) for i in range(0, len(inputs), batch_size)]
            return class_rows([f"tensor[{i}]" for i in range(len(inputs))], torch.cat(probs), topk, names)
        if isinstance(inputs, (str, os.PathLike)):
            items = [inputs]
        else:
            items = list(inputs) if isinstance(inputs, Iterable) else None
        if items is None or not all(isinstance(i, (str, os.PathLike)) for i in items):
            got = type(inputs).__name__ if items is None else \
                f"a {type(inputs).__name__} of {sorted({type(i).__name__ for i in items})}"
            raise TypeError(f"zoo.predict on a video network takes a video file or folder path, a list of them, or "
                            f"a preprocessed float tensor (C, T, H, W) / (N, C, T, H, W); got {got}")
        paths = collect_files(items, VIDEO_EXTENSIONS, "video")
        with ProgressBar(total=len(paths), desc="predict", unit="video", disable=not progress) as bar:
            rows = self._predict_paths(paths, batch_size, dtype, topk, names, bar)
        warn_unreadable(rows, "videos")
        return rows

    def _predict_paths(self, paths: list[Path], batch_size: int, dtype: Any, topk: int, names: Any,
                       bar: Any) -> list[dict[str, Any]]:
        """:meth:`zoo_predict`'s rows for video files, in their order, ``batch_size`` clips at a time."""
        import torch
        from torchvision.datasets.folder import IMG_EXTENSIONS

        from zoo.inputs import class_rows, unreadable_row
        from zoo.video.decoding import CorruptVideoError
        from zoo.video.predict import forward_probs, load_clip

        recipe, transform = self.predict_inputs()
        results: list[tuple[int, dict[str, Any]]] = []  # (position in paths, row): a path may be given twice
        for start in range(0, len(paths), batch_size):
            clips, ok = [], []
            for pos, path in enumerate(paths[start:start + batch_size], start):
                try:
                    if path.suffix.lower() in IMG_EXTENSIONS:  # FFmpeg reads a photo as a one-frame video,
                        # and the network would give it a confident label (0.999) without a word
                        raise CorruptVideoError(f"{path} is an image, not a video: a video network classifies "
                                                "clips (an image network, zoo.build('resnet18', ...), photos)")
                    clips.append(load_clip(path, transform=transform, **recipe))
                except (CorruptVideoError, OSError) as err:
                    results.append((pos, unreadable_row(str(path), err)))
                    continue
                ok.append((pos, str(path)))
            if clips:
                rows = class_rows([p for _, p in ok], forward_probs(self, torch.stack(clips), dtype), topk, names)
                results += zip((pos for pos, _ in ok), rows)
            bar.update(len(paths[start:start + batch_size]))
        return [row for _, row in sorted(results, key=lambda r: r[0])]

    # -- zoo.save ------------------------------------------------------------------------------------------
    def zoo_state(self):
        from dataclasses import asdict

        from zoo.api import ModelState

        return ModelState(self.registry_name, asdict(self.config), self.state_dict(),
                          {"zoo.video_cfg": json.dumps(self.video_cfg)})

    def load_video_cfg(self, path: Path, entry: Any) -> None:
        """The input recipe and classes a weights file carries: its metadata, else the manifest entry's meta
        (``input``, the recipe of weights trained here, or ``transforms``, torchvision's preprocessing for
        its own weights, as the vision family reads it)."""
        from zoo import hub

        saved = hub.read_metadata(path).get("zoo.video_cfg") if str(path).endswith(".safetensors") else None
        if not saved and (run := hub.training_config(path)) is not None:  # a checkpoint of zoo.train
            saved = json.dumps(_checkpoint_video_cfg(run))
        if saved:
            set_clip_recipe(self.video_cfg, _one_clip_key(json.loads(saved)))
            if len(self.video_cfg.get("classes") or ()) not in (0, self.num_classes):
                # a head of another size was built beside the file (a new num_classes): its names name
                # the file's outputs, not these
                del self.video_cfg["classes"]
            return
        meta = dict(getattr(entry, "meta", None) or {})
        spec = {**_from_transforms(meta.get("transforms")), **dict(meta.get("input") or {})}
        keys = ("size", "resize", "antialias", "mean", "std", *CLIP_KEYS)
        set_clip_recipe(self.video_cfg, _one_clip_key({k: spec[k] for k in keys if k in spec}))
        if "size" in spec and "resize" not in spec:
            self.video_cfg["resize"] = spec["size"]  # the clips were trained at their stored size
        # meta["classes"], else torchvision's categories for its own weights (WeightsEntry.classes)
        classes = meta.get("classes") or getattr(entry, "classes", None)
        if classes and len(classes) == self.num_classes:
            self.video_cfg["classes"] = classes


def _checkpoint_video_cfg(run: dict[str, Any]) -> dict[str, Any]:
    """The input recipe (and class names) a ``zoo.train`` checkpoint records as ``data.*`` (see
    ``VideoClassifier._recorded``), as ``video_cfg`` keys: without them a network built from ``best.pt`` would take
    the defaults (112 px, 8 segments for one trained on 32 px and 2), name its outputs '0', '1', ..., and score a
    fold-2 network on testlist01 (which holds its training videos)."""
    cfg = {k: run[f"data.{k}"] for k in ("size", "resize", "antialias", "mean", "std", "classes", "fold")
           if run.get(f"data.{k}") is not None}
    key, _, count = str(run.get("data.clip") or "").partition("=")
    if key in CLIP_KEYS and count.isdigit():
        cfg[key] = int(count)
    return cfg


class _WeightsWatch:
    """Open around a call: ``changed`` tells whether the network's weights changed meanwhile, by an optimizer
    step over its parameters (torch's global step hook: the loop's optimizer is made inside ``fit``) or a
    ``load_state_dict`` (a resumed checkpoint)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.changed = False
        self._handles: list[Any] = []

    def __enter__(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        ours = {id(p) for p in self.model.parameters()}

        def stepped(optimizer: Any, args: Any, kwargs: Any) -> None:
            # every optimizer in the process calls it: another network's steps change nothing here
            if not self.changed:
                self.changed = any(id(p) in ours for group in optimizer.param_groups for p in group["params"])

        def loaded(module: Any, keys: Any) -> None:
            self.changed = True

        self._handles = [register_optimizer_step_post_hook(stepped),
                         self.model.register_load_state_dict_post_hook(loaded)]

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()


def _clip_datasets_in(data: Any) -> list[Any]:
    """The ``VideoClipDataset`` s ``data`` is or holds: through a DataLoader, ``Subset`` s and ``ConcatDataset`` s
    (each once, in order)."""
    from torch.utils.data import ConcatDataset, DataLoader, Subset

    from zoo.video.ucf101 import VideoClipDataset

    found: dict[int, Any] = {}
    pending = [data.dataset if isinstance(data, DataLoader) else data]
    while pending:
        ds = pending.pop(0)
        if isinstance(ds, Subset):
            pending.insert(0, ds.dataset)
        elif isinstance(ds, ConcatDataset):
            pending[:0] = ds.datasets
        elif isinstance(ds, VideoClipDataset):
            found.setdefault(id(ds), ds)
    return list(found.values())


def _data_classes(data: Any) -> list[str]:
    """The class names of a Dataset or DataLoader: its own ``classes``, else those of the clip datasets it holds
    where they all name the same (a ``random_split`` piece or a ``ConcatDataset`` of UCF101 folds was trained on
    without them, and the network named its outputs '0', '1', ...); else none."""
    own = getattr(data, "classes", None)
    if own:
        return [str(c) for c in own]
    named = {tuple(str(c) for c in ds.classes) for ds in _clip_datasets_in(data)}
    return list(named.pop()) if len(named) == 1 else []


def _with_dataset_sampling(data: Any, recipe: dict[str, Any]) -> dict[str, Any]:
    """``recipe`` with the clip sampling of the clip data set trained on: the network learns on its clips, and
    ``video_cfg`` must feed ``zoo.predict`` the same (it kept the call's or the default 8 segments for a
    data set of 4 consecutive frames; a ``ConcatDataset`` of them too). A clip option of the call that says
    otherwise is refused, as are data sets (of a ``ConcatDataset``) that sample clips in different ways."""
    held = _clip_datasets_in(data)
    if not held:
        return recipe
    sampled = {("num_segments", ds.num_segments) if ds.sampling == "segments" else ("frames_per_clip",
                                                                                     ds.frames_per_clip)
               for ds in held}
    if len(sampled) > 1:
        said = " and ".join(sorted(f"{k}={v}" for k, v in sampled))
        raise ValueError(f"the data sets trained on sample clips in different ways ({said}), and video_cfg records "
                         "one way, the one zoo.predict reads a video by: make them with the same sampling")
    ((key, count),) = sampled
    ds = held[0]
    asked = {k: recipe[k] for k in CLIP_KEYS if k in recipe}
    if asked and asked != {key: count}:
        given = ", ".join(f"{k}={v}" for k, v in asked.items())
        raise ValueError(f"the data set ({type(ds).__name__}) samples clips of {key}={count} (sampling="
                         f"{ds.sampling!r}), but the call asks for {given}: the network trains on the data set's "
                         f"clips, and video_cfg records how they were sampled; leave {' and '.join(asked)} out, or "
                         "make the data set with the sampling to train on")
    return {**recipe, key: int(count)}


def _resize_option(value: Any, name: str = "resize") -> int | list[int]:
    """``resize=`` of a training call or a ``video_cfg``: an int (the shorter side) or ``[height, width]`` as
    ``video_cfg`` holds it (a pair was refused, "resize must be an int", though a Kinetics recipe holds one)."""
    resize = size_pair(value, name, int_means="the shorter side, aspect kept")
    return list(resize) if isinstance(resize, tuple) else resize


def _refuse_path_list(data: Any, name: str) -> None:
    """A list or tuple of paths is no video data set (the engine would batch the path strings); name the forms."""
    if isinstance(data, (list, tuple)) and data and all(isinstance(d, (str, os.PathLike)) for d in data):
        pair = " (for training and validation sets: val_data=DIR or {'train': DIR, 'val': DIR})" if len(data) == 2 else ""
        raise TypeError(f"{name}: a video network reads a folder (DIR/<class>/<video files>), a UCF101 root with "
                        f"splits=, or a Dataset of (clip, label); got a {type(data).__name__} of {len(data)} "
                        f"paths{pair}")


def _from_transforms(tf: Any) -> dict[str, Any]:
    """A manifest entry's ``meta["transforms"]`` (``{"resize", "crop", "mean", "std"}``, torchvision's
    ``weights.transforms()`` written down) as ``video_cfg`` keys. torchvision's video transform
    (``VideoClassification``) resizes without antialiasing, so that is the default here; an antialiased
    resize gives Kinetics-400 R(2+1)D inputs up to 0.7 off in normalised units."""
    tf = dict(tf or {})
    spec = {k: tf[k] for k in ("resize", "mean", "std") if k in tf}
    if "crop" in tf:
        spec["size"] = int(tf["crop"])
    if spec:
        spec["antialias"] = bool(tf.get("antialias", False))
    return spec


def _one_clip_key(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` without the clip key :func:`clip_recipe` would not pick (files saved holding both)."""
    if all(k in cfg for k in CLIP_KEYS):
        return {k: v for k, v in cfg.items() if k != "frames_per_clip"}
    return cfg


def split_folder_in(root: str | os.PathLike) -> Path | None:
    """The folder of UCF101's split files (``classInd.txt`` ...) directly inside a root of class folders (the
    official archive's ``ucfTrainTestlist/`` unpacked there), else None."""
    root = Path(root)
    if not root.is_dir():
        return None
    return next((d for d in sorted(root.iterdir()) if d.is_dir() and (d / "classInd.txt").is_file()
                 and (d / "trainlist01.txt").is_file()), None)


def classes_in(data: Any, splits: str | os.PathLike | None = None) -> dict[str, Any]:
    """A video folder implies ``num_classes``: its class folders, or for a UCF101 root the classes its
    ``classInd.txt`` lists (in ``splits`` when given, else a split folder inside the root)."""
    if not isinstance(data, (str, os.PathLike)) or not Path(data).is_dir():
        return {}
    from zoo.video.splits import SplitFileError, read_class_index

    if splits is not None and not isinstance(splits, (str, os.PathLike)):
        return {}  # splits=1 meant as the fold: zoo_data says so
    if splits is not None:
        # the labels are classInd.txt's, wherever it lives; a root holds only the class folders it has clips of
        try:
            return {"num_classes": len(read_class_index(splits))}
        except (SplitFileError, OSError):
            return {}  # zoo_data names the problem with the split folder
    root = split_folder(Path(data), "train") or Path(data)
    dirs = [root / name for name in class_folders(root)]
    # the split folder is no class, and a root with only some class folders still trains on all the classes
    # of classInd.txt
    split = next((d for d in (root, *dirs) if (d / "classInd.txt").is_file()), None)
    if split is not None:
        try:
            return {"num_classes": len(read_class_index(split))}
        except SplitFileError:
            pass  # not a usable split folder: zoo_data names the problem if splits= points at it
    return {"num_classes": len(dirs)} if dirs else {}
