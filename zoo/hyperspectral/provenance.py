"""Which pixels a model was trained on, stored with its weights, so that no evaluation scores them.

A :class:`TrainingRecord` holds the training scene's fingerprint (its size, band count and a hash of
spectra sampled on a fixed grid, so the same scene matches whatever file format or dtype it was read
from), the split that was asked for (``{"split": "random", "train_fraction": 0.3, "seed": 0}``) and the
training mask itself as packed bits (2.6 kB for Indian Pines' 145 x 145 pixels). Evaluating saved or
shipped weights on a scene with that fingerprint checks the test pixels against the mask:
``on_overlap="error"`` (the default) refuses, ``"exclude"`` scores the other test pixels and says how many
were left out. A scene with another fingerprint shares no pixel with the training scene.
"""

from __future__ import annotations

import base64
import hashlib
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zoo._stacklevel import user_stacklevel
from zoo.hyperspectral.scene import Scene


def forget_training_split(model: Any) -> None:
    """Drop the scene split a ``zoo.train`` recorded (``split_``, the split, ``training_record_``): a fit on other
    pixels or windows may train on that split's test pixels, which no evaluation may then take as held out."""
    model.split_, model.last_split_, model.training_record_ = None, None, None

__all__ = ["ON_OVERLAP", "TrainingRecord", "scene_fingerprint", "screen_test_pixels"]

ON_OVERLAP = ("error", "exclude")
_GRID = 16  # 16 x 16 sampled spectra: cheap on any file, different for any two real scenes


def scene_fingerprint(scene: Scene) -> str:
    """sha256 of the scene's size and of ``16 x 16`` spectra on a fixed grid, as float64."""
    h, w, c = scene.shape
    rows = np.linspace(0, h - 1, min(h, _GRID)).astype(int)
    cols = np.linspace(0, w - 1, min(w, _GRID)).astype(int)
    spectra = np.asarray(scene.cube[rows[:, None], cols[None, :], :], dtype=np.float64)
    digest = hashlib.sha256(f"{h}x{w}x{c}|".encode())
    digest.update(np.ascontiguousarray(spectra).tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class TrainingRecord:
    """The training pixels of a model: scene fingerprint, split request, and the ``(H, W)`` mask."""

    scene: str
    shape: tuple[int, int]
    n_bands: int
    fingerprint: str
    train_bits: bytes = field(repr=False)  # np.packbits of the (H, W) mask, row-major
    split: dict[str, Any] = field(default_factory=dict)
    # np.packbits of where the given training mask of a disjoint split is non-zero: its pixels that the
    # ground truth labels otherwise are no training pixels, yet no test pixels either (they lie in training fields)
    mask_bits: bytes | None = field(default=None, repr=False)

    @classmethod
    def from_mask(cls, scene: Scene, train: np.ndarray, split: dict[str, Any] | None = None,
                  given_mask: np.ndarray | None = None) -> TrainingRecord:
        """The record of training pixels ``train``; ``given_mask``: the training mask a disjoint split was cut
        from, so that evaluating the saved model on the scene tests the same pixels as right after training."""
        train = np.asarray(train, bool)
        for name, mask in (("training mask", train), ("given training mask", given_mask)):
            if mask is not None and np.shape(mask) != scene.shape[:2]:
                raise ValueError(f"{name} {np.shape(mask)} does not match scene (H, W) = {scene.shape[:2]}")
        bits = None if given_mask is None else np.packbits(np.asarray(given_mask) > 0).tobytes()
        return cls(scene.name, tuple(train.shape), scene.n_bands, scene_fingerprint(scene),
                   np.packbits(train).tobytes(), dict(split or {}), bits)

    @property
    def train_mask(self) -> np.ndarray:
        return self._unpack(self.train_bits)

    @property
    def split_mask(self) -> np.ndarray:
        """The disjoint split's given training mask (as 0/1), else the training pixels: the mask that cuts the
        same test set again."""
        return self._unpack(self.mask_bits if self.mask_bits is not None else self.train_bits)

    def _unpack(self, bits: bytes) -> np.ndarray:
        h, w = self.shape
        return np.unpackbits(np.frombuffer(bits, np.uint8), count=h * w).reshape(h, w).astype(bool)

    @property
    def n_train(self) -> int:
        return int(self.train_mask.sum())

    def matches(self, scene: Scene) -> bool:
        """Is ``scene`` the training scene (same size, bands and sampled spectra)?"""
        return (tuple(scene.shape[:2]) == tuple(self.shape) and scene.n_bands == self.n_bands
                and scene_fingerprint(scene) == self.fingerprint)

    def to_json(self) -> dict[str, Any]:
        out = {"scene": self.scene, "shape": list(self.shape), "n_bands": self.n_bands,
               "fingerprint": self.fingerprint, "train_mask_packbits": base64.b64encode(self.train_bits).decode(),
               "n_train": self.n_train, "split": self.split}
        if self.mask_bits is not None:
            out["given_mask_packbits"] = base64.b64encode(self.mask_bits).decode()
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrainingRecord:
        try:
            rec = cls(str(d["scene"]), (int(d["shape"][0]), int(d["shape"][1])), int(d["n_bands"]),
                      str(d["fingerprint"]), base64.b64decode(d["train_mask_packbits"], validate=True),
                      dict(d.get("split") or {}),
                      None if d.get("given_mask_packbits") is None  # weights saved before it was kept
                      else base64.b64decode(d["given_mask_packbits"], validate=True))
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise ValueError(f"weights carry a malformed training record: {err!r}") from None
        for bits in (rec.train_bits, rec.mask_bits):
            if bits is not None and len(bits) != -(-rec.shape[0] * rec.shape[1] // 8):
                raise ValueError(f"weights' training record: {len(bits)} mask bytes for {rec.shape} pixels")
        return rec

    def describe(self) -> str:
        spec = ", ".join(f"{k}={v!r}" for k, v in self.split.items()) or "a given mask"
        return f"{self.n_train} pixels of scene {self.scene!r} ({self.shape[0]}x{self.shape[1]}; split {spec})"


def screen_test_pixels(model: Any, scene: Scene, test: np.ndarray, on_overlap: str = "error") -> tuple[np.ndarray, int]:
    """``(test mask, excluded)``: ``test`` checked against the training pixels recorded in ``model``.

    Overlap raises with ``on_overlap="error"``; with ``"exclude"`` those pixels leave the test set and a
    warning says how many. A model without a record (trained on arrays, or weights saved before records
    existed) is scored with a warning that the check could not be made.
    """
    if on_overlap not in ON_OVERLAP:
        raise ValueError(f"on_overlap must be one of {ON_OVERLAP}; got {on_overlap!r}")
    test = np.asarray(test, bool)
    record: TrainingRecord | None = getattr(model, "training_record_", None)
    if record is None:
        warnings.warn(f"{type(model).__name__} records no training pixels (trained on arrays, or saved before "
                      "training records existed): its test pixels cannot be checked against them",
                      stacklevel=user_stacklevel())
        return test, 0
    if not record.matches(scene):
        return test, 0
    overlap = test & record.train_mask
    n, m = int(overlap.sum()), int(test.sum())
    if n == 0:
        return test, 0
    what = f"{n} of the {m} test pixels ({n / max(m, 1):.0%}) were training pixels of this model ({record.describe()})"
    if on_overlap == "error":
        own = ", ".join(f"{k}={v!r}" for k, v in record.split.items() if k in ("split", "train_fraction", "seed"))
        raise ValueError(f"{what}; scoring them would inflate the result. Evaluate on the model's own split "
                         f"({own or 'its training mask'}), or pass on_overlap='exclude' (CLI: --set on_overlap=exclude)"
                         f" to score the other {m - n} test pixels")
    warnings.warn(f"{what}: excluded, scoring the other {m - n}", stacklevel=user_stacklevel())
    return test & ~overlap, n
