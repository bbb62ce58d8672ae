"""Files as users have them: cuts that start mid-GOP, a truncated file read inside a DataLoader."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
import torch

from zoo.video.decoding import probe, read_all_frames, read_frames
from zoo.video.synthetic import render_clip


def _frames(n: int, seed: int = 3) -> np.ndarray:
    # a moving shape over a rolling noise texture: every frame differs from its neighbours
    clip = render_clip(0, np.random.default_rng(seed), size=32, num_frames=n)
    noise = np.random.default_rng(seed).integers(0, 40, (32, 32, 3), dtype=np.uint8)
    return np.stack([np.clip(c.astype(np.int16) + np.roll(noise, t, axis=1), 0, 255).astype(np.uint8)
                     for t, c in enumerate(clip)])


def _cut_mid_gop(src: Path, dst: Path, drop: int) -> Path:
    """``src``'s packets from the ``drop``-th on, copied (``ffmpeg -ss ... -c copy`` without a keyframe there):
    the stream starts with frames that refer to a keyframe the file no longer holds. AVI: the timestamps moved
    back to start at 0 (as ffmpeg writes them; AVI's chunk counter starts there)."""
    shift = drop if dst.suffix == ".avi" else 0
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        stream = inp.streams.video[0]
        copy = out.add_stream_from_template(stream)
        for k, packet in enumerate(p for p in inp.demux(stream) if p.dts is not None):
            if k >= drop:
                packet.dts -= shift
                packet.pts = None if packet.pts is None else packet.pts - shift
                packet.stream = copy
                out.mux(packet)
    return dst


@pytest.mark.parametrize("codec", ["mpeg4", "libx264"])
def test_an_mp4_that_starts_with_non_keyframes_reads_its_first_frames(encode_clip, tmp_path, codec):
    # MP4's demuxer refuses a seek to before the first keyframe (EPERM); every read of frames 2-5 failed with
    # "CorruptVideoError: decoding ... failed: [Errno 1] Operation not permitted" and the video was skipped
    src = encode_clip(tmp_path / "src.mp4", _frames(30), gop=10, codec=codec)
    path = _cut_mid_gop(src, tmp_path / "cut.mp4", drop=5)
    meta, full = probe(path), read_all_frames(path)
    assert meta.num_frames == 25
    # MPEG-4 part 2 decodes the frames before the keyframe (against a grey reference); H.264 drops them, and
    # the frames at their times show the first frame it gives (as a variable-rate gap would)
    dropped = meta.num_frames - full.shape[0]
    assert dropped == (0 if codec == "mpeg4" else 5)
    for k in range(meta.num_frames):
        got = read_frames(path, [k], meta, thread_count=1)
        assert torch.equal(got[0], full[max(k - dropped, 0)]), f"frame {k}"
    idx = [1, 4, 8, 12, 16, 20, 24]
    assert torch.equal(read_frames(path, idx, meta), full[[max(k - dropped, 0) for k in idx]])


def test_an_avi_that_starts_with_non_keyframes_places_frames_read_from_the_start_as_seeks_do(encode_clip, tmp_path):
    # H.264 drops the 5 frames before the first keyframe. Reads from the start counted the first frame out as
    # frame 0, seeks placed it by its chunk (5): a clip of frames 0-7 held frames 5-12 and the full clip failed
    # as "truncated" (ends at frame 29 but frame 34 was asked for), while frame 8 alone came right.
    src = encode_clip(tmp_path / "src.avi", _frames(40), gop=10, codec="libx264")
    path = _cut_mid_gop(src, tmp_path / "cut.avi", drop=5)
    meta, full = probe(path), read_all_frames(path)
    assert (meta.num_frames, full.shape[0]) == (35, 30)
    want = full[[max(k - 5, 0) for k in range(35)]]  # frame k is chunk k; the dropped ones show the first frame
    for k in range(35):
        assert torch.equal(read_frames(path, [k], meta, thread_count=1)[0], want[k]), f"frame {k}"
    assert torch.equal(read_frames(path, list(range(35)), meta), want)
    assert torch.equal(read_frames(path, list(range(8)), meta), want[:8])


@pytest.mark.skipif(not hasattr(BaseException, "add_note"), reason="exception notes need Python >= 3.11")
@pytest.mark.parametrize("num_workers", [0, 1])
def test_an_undecodable_clip_names_the_item_inside_a_data_loader(encode_clip, tmp_path, num_workers):
    from zoo.video.decoding import CorruptVideoError
    from zoo.video.ucf101 import VideoClipDataset

    good = encode_clip(tmp_path / "good.mkv", _frames(40), gop=10, codec="libx264")
    data = good.read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(data[: len(data) // 2])  # the header still says 40 frames; the reads past the cut fail
    # FFmpeg's own thread count: the failed reads below leave threaded decoders to the garbage collector before
    # the DataLoader forks its worker, which then hung at times (test_video_fork.py pins that down)
    ds = VideoClipDataset([(str(good), 0), (str(cut), 0)], ["a"], frames_per_clip=8, step_between_clips=8,
                          strict=True, progress=False)
    failing = []
    for item in range(len(ds)):
        try:
            ds.read_clip(item)
        except CorruptVideoError:
            failing.append(item)
    assert failing and failing[0] >= 5  # clips of the cut video (items 5-9), past the cut
    loader = torch.utils.data.DataLoader(torch.utils.data.Subset(ds, [failing[0]]), num_workers=num_workers)
    with pytest.raises(CorruptVideoError) as info:
        next(iter(loader))
    # the file and what was wrong, and (before: nothing) which item of the data set the sampler asked for
    shown = str(info.value) + "\n".join(getattr(info.value, "__notes__", []))
    assert "cut.mkv" in shown and "truncated" in shown
    assert f"reading item {failing[0]} of this VideoClipDataset (video 1" in shown
