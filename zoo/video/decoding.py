"""PyAV video reading that decodes only the frames it returns.

Two operations, both on one video stream (audio is never touched):

- :func:`probe` reads the container header (frame count, duration, time base, average rate, size) and
  the timestamps of the first few *packets*; it never runs the decoder, so indexing 13,320 UCF101
  files takes seconds, not the full decoding pass of torchvision's ``VideoClips``
  (https://github.com/pytorch/vision/pull/2475).
- :func:`read_frames` seeks to the keyframe at or before the first wanted frame, decodes forward and
  stops after the last wanted frame, converting only the frames it returns to RGB.

Frames are addressed by their *display index* ``0 .. num_frames-1``. For most containers that index
comes from the frame's pts. AVI stores no timestamps at all (FFmpeg synthesises pts from the chunk
counter), and for DivX/Xvid files with packed B-frames — many UCF101 clips, e.g.
``v_ApplyEyeMakeup_g01_c01.avi`` — those synthetic pts come out of the decoder *swapped* between
neighbouring frames, while the decoder's output order is the true display order. Sorting by pts (as
torchvision's ``read_video`` does) therefore shuffles such videos. For AVI we count frames from the
keyframe we landed on instead (exact, since AVI is constant-rate by construction).

Frames before the first wanted one are only decoded when later frames need them: until a few frames
before it, the decoder skips non-reference pictures (``skip_frame="NONREF"``, i.e. B-frames), which
are two thirds of the frames of the B-frame clips in UCF101. Skipped frames leave no output, so AVI
cannot count decoder outputs there; it counts *packets* instead (one AVI chunk per frame slot, the
``N-VOP`` placeholders of packed B-frames included): the frame that comes out while packet ``n`` is
sent has display index ``keyframe + n - delay``, where ``delay`` (the B-frame reorder plus frame
threading) is how many packets went in before the keyframe came out. A packet that yields two frames
breaks that rule; the read then starts again without skipping and counts outputs.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import av
import numpy as np
import torch
from av.video.reformatter import VideoReformatter

__all__ = [
    "CorruptVideoError",
    "DecodeStats",
    "VideoMeta",
    "decoder_thread_count",
    "probe",
    "read_all_frames",
    "read_frames",
]

# How many packets `probe` demuxes to find the first displayed pts (B-frame delay makes the first
# packet's pts differ from the first frame's); demuxing is not decoding.
_PROBE_PACKETS = 8
# Non-reference frames are skipped up to this many frames before the first wanted one: the skip
# choice is made when a packet is sent, and a packed B-frame is decoded a packet or two after the
# packet that holds it.
_SKIP_MARGIN = 3
# Header frame counts may overstate the decodable frames by a frame or two (rounding of
# duration-derived counts); a larger shortfall is a truncated file.
_TAIL_TOLERANCE = 2


class CorruptVideoError(RuntimeError):
    """A video that cannot be opened, has no video stream, or is truncated."""


@dataclass(frozen=True)
class VideoMeta:
    """What :func:`probe` learns about one video from its header (no decoding)."""

    path: str
    num_frames: int
    fps: float
    time_base: Fraction
    start_pts: int  # pts of the first frame in display order
    seek_origin: int  # the stream's start_time, the origin of the demuxer's seek timestamps
    width: int
    height: int
    count_frames: bool  # True for AVI: frame index = frames counted from the keyframe

    @property
    def duration(self) -> float:
        return self.num_frames / self.fps


@dataclass
class DecodeStats:
    """Counters that show how much decoding a read cost (frames decoded per frame returned).

    ``frames_decoded`` counts the frames the decoder put out; skipped B-frames are not among them.
    """

    frames_decoded: int = 0
    frames_returned: int = 0
    reads: int = 0
    seeks: int = 0

    def add(self, other: DecodeStats) -> None:
        self.frames_decoded += other.frames_decoded
        self.frames_returned += other.frames_returned
        self.reads += other.reads
        self.seeks += other.seeks

    @property
    def decoded_per_returned(self) -> float:
        return self.frames_decoded / max(self.frames_returned, 1)


# FFmpeg's stream probing (avformat_find_stream_info, run by every open) decodes a first frame to learn
# the pixel format unless the probe budget is tiny; the index needs no pixel format, so it asks for none.
_HEADER_ONLY = {"probesize": "32", "analyzeduration": "0"}


def _open(path: str | os.PathLike, options: dict[str, str] | None = None):
    try:
        return av.open(os.fspath(path), metadata_errors="ignore", options=options or {})
    except (av.error.FFmpegError, OSError) as err:
        raise CorruptVideoError(f"cannot open video {os.fspath(path)!r}: {err}") from err


def probe(path: str | os.PathLike) -> VideoMeta:
    """Read one video's header; raise :class:`CorruptVideoError` if it is unreadable or truncated.

    Never decodes a frame: the frame count, rate and time base come from the container, and the first
    displayed pts from the first few demuxed packets.
    """
    path = os.fspath(path)
    try:
        return _probe(path, _HEADER_ONLY)
    except CorruptVideoError:
        # Some containers need a real probe to find their rate or length; a broken file fails again.
        return _probe(path, None)


def _probe(path: str, options: dict[str, str] | None) -> VideoMeta:
    with _open(path, options) as container:
        if not container.streams.video:
            raise CorruptVideoError(f"{path!r} has no video stream")
        stream = container.streams.video[0]
        tb = stream.time_base
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        if tb is None or rate is None or float(rate) <= 0:
            raise CorruptVideoError(f"{path!r}: the header gives no time base or frame rate")
        fps = float(rate)
        dur_frames = None
        if stream.duration is not None:
            dur_frames = float(stream.duration * tb) * fps
        elif container.duration is not None:
            dur_frames = container.duration / av.time_base * fps
        num_frames = int(stream.frames or 0)
        if num_frames <= 0:
            if dur_frames is None:
                raise CorruptVideoError(f"{path!r}: the header gives neither a frame count nor a duration")
            num_frames = math.floor(dur_frames + 1e-6)
        elif dur_frames is not None and dur_frames < num_frames - max(_TAIL_TOLERANCE, 0.02 * num_frames):
            # The header's count was written before the data; the demuxer's index (or its scan of a
            # file without one) sees fewer frames: the file was cut short.
            raise CorruptVideoError(
                f"{path!r} looks truncated: the header says {num_frames} frames but the stream holds "
                f"about {dur_frames:.0f}"
            )
        if num_frames <= 0:
            raise CorruptVideoError(f"{path!r} holds no video frames")
        pts = []
        try:
            for packet in container.demux(stream):
                if packet.pts is not None:
                    pts.append(packet.pts)
                elif packet.dts is not None:
                    pts.append(packet.dts)
                if len(pts) >= _PROBE_PACKETS:
                    break
        except av.error.FFmpegError as err:
            raise CorruptVideoError(f"{path!r}: cannot read its first packets: {err}") from err
        if not pts:
            raise CorruptVideoError(f"{path!r}: no video packets")
        origin = stream.start_time if stream.start_time is not None else min(pts)
        return VideoMeta(
            path=path,
            num_frames=num_frames,
            fps=fps,
            time_base=Fraction(tb),
            start_pts=int(min(pts)),
            seek_origin=int(origin),
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            count_frames="avi" in container.format.name.split(","),
        )


def _decode_packet(stream, packet) -> list[av.VideoFrame]:
    """The one place frames leave the decoder: the frames that sending ``packet`` puts out."""
    return stream.decode(packet)


_LOCAL = threading.local()  # per thread: swscale contexts are not thread-safe

# Frames with fewer pixels than this are converted to RGB on one thread, as PyAV did before 17; since 17
# swscale takes one thread per CPU by default, which costs more than it saves on small frames (PyAV 18 /
# FFmpeg 8.1, a 2-core AMD Zen 4, one process): yuv420p -> rgb24 took 290-320 us a 320x240 frame against
# 52 us on one thread (640x480: 301 vs 134 us), while at 1280x720 threads win (286 vs 390 us).
_THREADED_MIN_PIXELS = 1280 * 720


def decoder_thread_count(thread_count: int | None = None) -> int:
    """The decoder's thread count: ``thread_count`` when given (0: FFmpeg's choice), else 1 inside a
    DataLoader worker (its siblings already decode on the other cores; more threads per worker only
    oversubscribe them, the reason torch runs workers on one intra-op thread too) and FFmpeg's choice (0)
    elsewhere."""
    if thread_count is not None:
        return thread_count
    return 1 if torch.utils.data.get_worker_info() is not None else 0


def _sws_threads(frame, decoder_threads: int) -> int:
    """swscale threads for ``frame``: 1 where the decoder runs on one thread or the frame is small,
    otherwise FFmpeg's choice (0)."""
    return 1 if decoder_threads == 1 or frame.width * frame.height < _THREADED_MIN_PIXELS else 0


def _reformat(reformatter, frame, decoder_threads: int, **kwargs):
    """``reformatter.reformat(frame, **kwargs)`` on the threads :func:`_sws_threads` picks."""
    # PyAV >= 17 converts on several threads by default (``threads=0``); older versions have no
    # ``threads`` argument and convert on one.
    if getattr(_LOCAL, "sws_threads_arg", True):
        try:
            return reformatter.reformat(frame, threads=_sws_threads(frame, decoder_threads), **kwargs)
        except TypeError as err:
            if "threads" not in str(err):
                raise
            _LOCAL.sws_threads_arg = False
    return reformatter.reformat(frame, **kwargs)


def _to_array(frame, size: tuple[int, int] | None = None, decoder_threads: int = 0) -> np.ndarray:
    """RGB ``(H, W, 3)`` uint8; with ``size=(h, w)`` scaled in the same swscale pass (bilinear).
    ``decoder_threads``: the decoder's thread count (1 in DataLoader workers), which sets swscale's."""
    # frame.to_ndarray() builds a new swscale context for every frame, which costs more than decoding
    # a 320x240 frame; one reformatter per thread keeps its context cached across frames and videos.
    reformatter = getattr(_LOCAL, "reformatter", None)
    if reformatter is None:
        reformatter = _LOCAL.reformatter = VideoReformatter()
    if size is None:
        return _reformat(reformatter, frame, decoder_threads, format="rgb24").to_ndarray()
    h, w = size
    return _reformat(reformatter, frame, decoder_threads, width=w, height=h, format="rgb24",
                     interpolation="BILINEAR").to_ndarray()


def read_frames(
    path: str | os.PathLike,
    indices: Sequence[int],
    meta: VideoMeta | None = None,
    *,
    thread_type: str = "AUTO",
    thread_count: int | None = None,
    stats: DecodeStats | None = None,
    size: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Frames at display ``indices`` (any order, repeats allowed) as a ``(T, H, W, 3)`` uint8 tensor.

    Seeks to the keyframe at or before ``min(indices)``, decodes forward, and stops after
    ``max(indices)``. Indices beyond the last decodable frame by at most a couple of frames (header
    rounding) repeat the last frame; more than that raises :class:`CorruptVideoError`. ``size=(h, w)``
    scales the returned frames while converting them to RGB (one swscale pass, bilinear).
    ``thread_count``: decoder threads (0: FFmpeg's choice); None: :func:`decoder_thread_count`.
    """
    path = os.fspath(path)
    idx = [int(i) for i in indices]
    if not idx:
        raise ValueError("read_frames: indices is empty")
    if min(idx) < 0:
        raise ValueError(f"read_frames: negative frame index {min(idx)}")
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise ValueError(f"read_frames: size must be (height, width) >= 1, got {size!r}")
    meta = meta or probe(path)
    thread_count = decoder_thread_count(thread_count)
    wanted = sorted(set(idx))
    local = DecodeStats(reads=1)
    try:
        try:
            got = _read_sorted(path, wanted, meta, thread_type, thread_count, local, size, _HEADER_ONLY)
        except (CorruptVideoError, av.error.FFmpegError):
            # a container whose decoder needs FFmpeg's full stream probing: open it the slow way
            got = _read_sorted(path, wanted, meta, thread_type, thread_count, local, size, None)
    except av.error.FFmpegError as err:
        raise CorruptVideoError(f"decoding {path!r} failed: {err}") from err
    finally:
        if stats is not None:
            stats.add(local)
    if idx == wanted:
        out = torch.from_numpy(got)  # (T, H, W, 3): the rows were filled in this order, no copy
    else:
        row = {w: r for r, w in enumerate(wanted)}
        out = torch.from_numpy(got[[row[i] for i in idx]])
    if stats is not None:
        stats.frames_returned += len(idx)
    return out


class _SlotRuleBroken(Exception):
    """An AVI packet yielded more than one frame, or none by design: packets cannot index this file's frames."""


def _read_sorted(
    path: str, wanted: list[int], meta: VideoMeta, thread_type: str, thread_count: int, stats: DecodeStats,
    size: tuple[int, int] | None = None, options: dict[str, str] | None = None,
) -> np.ndarray:
    try:
        return _read_positioned(path, wanted, meta, thread_type, thread_count, stats, size, options, skip=True)
    except _SlotRuleBroken:
        return _read_positioned(path, wanted, meta, thread_type, thread_count, stats, size, options, skip=False)


def _read_positioned(
    path: str, wanted: list[int], meta: VideoMeta, thread_type: str, thread_count: int, stats: DecodeStats,
    size: tuple[int, int] | None, options: dict[str, str] | None, skip: bool,
) -> np.ndarray:
    first = wanted[0]
    ticks_per_frame = 1.0 / (meta.fps * float(meta.time_base))  # pts units per frame
    # Seek a little before the wanted time: the demuxer's seek timestamps (AVI: dts) may lead the
    # displayed pts by the B-frame delay, and landing one keyframe early only costs decoding.
    margin = meta.start_pts - meta.seek_origin + math.ceil(ticks_per_frame)
    targets = [meta.seek_origin + int(first * ticks_per_frame) - margin]
    targets.append(targets[0] - int(2 * meta.fps * ticks_per_frame))  # 2 s further back, if we overshot
    targets.append(None)  # from the start
    for target in targets:
        # options=_HEADER_ONLY: the index's meta already holds what probing would learn (and probing
        # decodes a frame of its own); the decoder finds the pixel format in the first packet
        with _open(path, options) as container:
            stream = container.streams.video[0]
            stream.thread_type = thread_type
            if thread_count:
                stream.codec_context.thread_count = thread_count
            if target is not None and target > meta.seek_origin:
                container.seek(target, stream=stream, backward=True, any_frame=False)
                stats.seeks += 1
            elif target is not None:
                target = None  # nothing to skip: decode from the start
            frames = _indexed_frames(container, stream, meta, first, ticks_per_frame, target is None, stats, skip)
            result = _decode_run(frames, wanted, meta, target is None, size, thread_count)
        if result is not None:
            return result
    raise CorruptVideoError(f"{path!r}: could not position the decoder at frame {first}")


def _indexed_frames(container, stream, meta, first, ticks_per_frame, from_start, stats, skip):
    """``(display index, frame)`` in display order from the current position (module docstring).

    With ``skip``, non-reference frames more than ``_SKIP_MARGIN`` frames before ``first`` are not
    decoded; without it (the fallback), AVI frames are indexed by counting decoder outputs.
    """
    ctx = stream.codec_context
    counted = meta.count_frames and not skip  # AVI without skipping: count outputs
    slots = meta.count_frames and skip  # AVI with skipping: count packets
    base = None  # display index of the first frame out (the keyframe we landed on)
    delay = 0  # packets sent before the first frame came out
    last = None  # display index of the latest frame out
    skipping = False
    for sent, packet in enumerate(container.demux(stream)):  # sent: packets sent before this one
        if skip:
            if meta.count_frames:
                # the packet's own frame has display index <= base + sent (a B-frame is shown before
                # the reference decoded ahead of it); until the keyframe is out, base is unknown
                early = base is not None and base + sent < first - _SKIP_MARGIN
            else:
                early = packet.pts is not None and packet.pts < meta.start_pts + (first - _SKIP_MARGIN) * ticks_per_frame
            if early != skipping:
                ctx.skip_frame = "NONREF" if early else "DEFAULT"
                skipping = early
        flushing = packet.pts is None and packet.dts is None  # the demuxer's final, empty packet
        if slots and not flushing and packet.size == 0:
            raise _SlotRuleBroken  # an empty chunk (a dropped frame) is a slot the decoder never fills
        frames = _decode_packet(stream, packet)
        if slots and len(frames) > 1 and not flushing:
            raise _SlotRuleBroken
        for frame in frames:
            stats.frames_decoded += 1
            if base is None:
                delay = sent
                p = frame.pts if frame.pts is not None else frame.dts
                if meta.count_frames:
                    base = 0 if (from_start or p is None) else round((p - meta.start_pts) / ticks_per_frame)
            if counted or (slots and flushing):
                i = base if last is None else last + 1
            elif slots:
                i = base + sent - delay
            else:
                p = frame.pts if frame.pts is not None else frame.dts
                if p is None:
                    raise CorruptVideoError(f"{meta.path!r}: a frame without timestamps in a timestamped container")
                i = round((p - meta.start_pts) / ticks_per_frame)
            last = i
            yield i, frame


class _Rows:
    """The wanted frames as rows of one ``(len(wanted), H, W, 3)`` array, converted straight into place.

    One array for the clip, allocated at the first frame, instead of a fresh array per frame stacked at
    the end: converted frames do not pile up (their buffers are reused) and the clip is not copied again.
    """

    def __init__(self, path: str, n: int, size: tuple[int, int] | None, decoder_threads: int = 0) -> None:
        self.path, self.n, self.size, self.decoder_threads = path, n, size, decoder_threads
        self.array: np.ndarray | None = None

    def put(self, row: int, frame) -> None:
        rgb = _to_array(frame, self.size, self.decoder_threads)
        if self.array is None:
            self.array = np.empty((self.n, *rgb.shape), rgb.dtype)
        elif rgb.shape != self.array.shape[1:]:
            raise CorruptVideoError(f"{self.path!r}: the frame size changes mid-stream ({rgb.shape[1]}x{rgb.shape[0]} "
                                    f"after {self.array.shape[2]}x{self.array.shape[1]}); pass size=(h, w) to scale "
                                    "every frame to one size")
        self.array[row] = rgb


def _decode_run(frames, wanted, meta, from_start, size=None, decoder_threads=0):
    """The ``(len(wanted), H, W, 3)`` frames from ``(index, frame)`` pairs; None if we landed after
    ``wanted[0]`` (then seek earlier)."""
    rows = _Rows(meta.path, len(wanted), size, decoder_threads)
    j = 0
    prev = None  # (index, frame) of the latest frame before the next wanted one
    for i, frame in frames:
        if prev is None and i > wanted[0] and not from_start:
            return None
        # Wanted indices this frame has passed show the previous frame (variable-rate gaps).
        while j < len(wanted) and wanted[j] < i:
            rows.put(j, prev[1] if prev is not None else frame)
            j += 1
        if j < len(wanted) and wanted[j] == i:
            rows.put(j, frame)
            j += 1
        if j == len(wanted):
            return rows.array
        prev = (i, frame)
    # End of stream before the last wanted frame.
    if prev is None:
        raise CorruptVideoError(f"{meta.path!r}: the decoder returned no frames")
    missing = wanted[j:]
    if missing[-1] - prev[0] > _TAIL_TOLERANCE:
        raise CorruptVideoError(
            f"{meta.path!r} ends at frame {prev[0]} but frame {missing[-1]} was asked for "
            f"(header: {meta.num_frames} frames); the file is probably truncated"
        )
    rows.put(j, prev[1])
    rows.array[j + 1 :] = rows.array[j]
    return rows.array


def read_all_frames(
    path: str | os.PathLike, *, thread_type: str = "AUTO", thread_count: int | None = None,
    stats: DecodeStats | None = None,
) -> torch.Tensor:
    """Decode the whole video in display order: ``(N, H, W, 3)`` uint8. ``thread_count`` as in
    :func:`read_frames`.

    The reference for :func:`read_frames` (frame ``i`` here is display index ``i`` there) and the
    "decode everything, then slice" baseline of the loader benchmark.
    """
    frames = []
    with _open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = thread_type
        thread_count = decoder_thread_count(thread_count)
        if thread_count:
            stream.codec_context.thread_count = thread_count
        try:
            for packet in container.demux(stream):
                frames.extend(_to_array(frame, decoder_threads=thread_count) for frame in _decode_packet(stream, packet))
        except av.error.FFmpegError as err:
            raise CorruptVideoError(f"decoding {os.fspath(path)!r} failed: {err}") from err
        # Decoders emit frames in display order; AVI's synthetic pts may disagree (module docstring),
        # so position in the output, not pts, is the display index here.
    if not frames:
        raise CorruptVideoError(f"{os.fspath(path)!r}: the decoder returned no frames")
    if stats is not None:
        stats.frames_decoded += len(frames)
        stats.reads += 1
    return torch.from_numpy(np.stack(frames))
