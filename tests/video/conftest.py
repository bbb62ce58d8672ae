"""Fixtures of the video tests."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest


def _encode_clip(path: Path, frames: np.ndarray, *, gop: int, b_frames: int = 0, fps: int = 25,
                 codec: str = "mpeg4") -> Path:
    """``frames`` ((T, H, W, 3) uint8) encoded with a keyframe every ``gop`` frames and ``b_frames`` B-frames
    between references; the container follows the suffix (.avi or .mp4)."""
    with av.open(str(path), mode="w") as out:
        s = out.add_stream(codec, rate=fps)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        s.codec_context.gop_size = gop
        s.codec_context.max_b_frames = b_frames
        if codec == "libx264":  # no scene-cut keyframes: keyframes exactly every `gop` frames
            s.codec_context.options = {"g": str(gop), "keyint_min": str(gop), "sc_threshold": "0",
                                       "bf": str(b_frames)}
        for img in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path


@pytest.fixture
def encode_clip():
    """:func:`_encode_clip`: a test clip with a chosen keyframe interval, B-frames, rate and codec."""
    return _encode_clip


@pytest.fixture
def pyav_logging_off():
    """PyAV's Python log callback off for the test, restored after: torchvision up to 0.2x turns it on when
    imported, and while it is on zoo decodes on one thread (zoo.video.decoding.decoder_thread_count)."""
    import av.logging

    level = av.logging.get_level()
    av.logging.set_level(None)
    yield
    av.logging.set_level(level)
