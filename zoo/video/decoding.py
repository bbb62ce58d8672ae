"""PyAV video reading that decodes only the frames it returns.

Two operations, both on one video stream (audio is never touched):

- :func:`probe` reads the container header (frame count, duration, time base, average rate, size) and
  the timestamps of the first few *packets*; it never runs the decoder, so indexing 13,320 UCF101
  files takes seconds, not the full decoding pass of torchvision's ``VideoClips``
  (https://github.com/pytorch/vision/pull/2475). Containers whose header lacks the rate (MPEG-PS/TS) are
  probed by FFmpeg, and those without an exact length (MPEG-PS/TS, a WebM written to a pipe) have the
  timestamps of all their packets read (demuxing, not decoding).
- :func:`read_frames` seeks to the keyframe at or before the first wanted frame, decodes forward and
  stops after the last wanted frame, converting only the frames it returns to RGB. Frames far apart
  (TSN's segment centres) are read in *runs*: where the demuxer's keyframe index shows that seeking
  again skips more than a few frames, the next run starts with a seek of its own, so a sparse read of
  a long video costs about a keyframe interval per frame, not every frame of the video (a 10-minute
  25 fps AVI with a keyframe every second: 104 frames decoded for 8 centres, not 13,138).

Frames are addressed by their *display index* ``0 .. num_frames-1``. For most containers that index
comes from the frame's pts. AVI stores no timestamps at all (FFmpeg synthesises pts from the chunk
counter), and for DivX/Xvid files with packed B-frames — many UCF101 clips, e.g.
``v_ApplyEyeMakeup_g01_c01.avi`` — those synthetic pts come out of the decoder *swapped* between
neighbouring frames, while the decoder's output order is the true display order. Sorting by pts (as
torchvision's ``read_video`` does) therefore shuffles such videos. For AVI we count frames from the
keyframe we landed on instead (exact, since AVI is constant-rate by construction). A dropped frame is an
empty chunk, which FFmpeg's demuxer does not deliver; a packet's dts is its chunk number, empty chunks
included, so frames are placed by it and an empty chunk's slot shows the frame before (in files with
B-frames, whose chunks are in decode order, this is approximate).

MPEG-PS/TS files have no seek index: FFmpeg seeks by searching the byte stream for timestamps, lands inside a
PES packet, and the parser then gives frames timestamps half a frame off (an MPEG-2 PS: frame 24 read with
the pts of 24.5), or lands after the last keyframe and decodes nothing. Their pts are no index even read
from the start (frames of an MPEG-2 PS whose pictures share PES packets: pts ..., 23, 24, 26, 27, ..., 31, 31).
Reads of these decode from the start and count frames as in AVI (frame ``k`` costs the ``k`` frames before
it, less the skipped B-frames).

Frames before a wanted one are only decoded when later frames need them: until a few frames before
it (the first of a run, or the next one inside a run), the decoder skips non-reference pictures
(``skip_frame="NONREF"``, i.e. B-frames), which are two thirds of the frames of the B-frame clips in
UCF101. Skipped frames leave no output, so AVI cannot count decoder outputs there; it counts
*packets* instead (one AVI chunk per frame slot, the ``N-VOP`` placeholders of packed B-frames
included): the frame that comes out while packet ``n`` is sent has display index
``keyframe + n - delay``, where ``delay`` (the B-frame reorder plus frame threading) is how many
packets went in before the keyframe came out. A packet that yields two frames breaks that rule; the
read then starts again without skipping and counts outputs. Skipping is only for decoders that read
``skip_frame`` at each picture (MPEG-4 part 2, H.264, HEVC, MPEG-1/2: ``_SKIP_SWITCHABLE``); others (AV1's
libdav1d) may keep the value they opened with and drop every B-frame of the read. A run that reaches the end
of the video before a wanted frame while skipping is read again without skipping: the skipped frames may be
its last ones, which the tail tolerance (``_TAIL_TOLERANCE``) and the error measure from.
"""

from __future__ import annotations

import bisect
import gc
import math
import operator
import os
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import av
import av.logging
import numpy as np
import torch
from av.video.reformatter import VideoReformatter

from zoo._stacklevel import user_stacklevel
from zoo.video.sizes import size_pair

__all__ = [
    "CorruptVideoError",
    "DecodeStats",
    "VideoMeta",
    "check_thread_type",
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
# A read seeks again for a later wanted frame when the seek skips more than this many frames that reading
# on would decode. Measured (PyAV 18, FFmpeg 8.1, 2 shared cores; reading frames K-G and K+2 around a
# keyframe K): skipping G=1-2 frames costs as much as it saves (the seek, the decoder flush and, with frame
# threads, the pipeline's refill), G=8 saves 4-22% of the read on one thread (320x240 to 640x360), more
# beyond. A dense clip (consecutive frames) is never cut.
_RUN_GAP = 8
# Decoders that read skip_frame at each picture, so a read can skip B-frames and then turn skipping off
# a few frames before a wanted one (FFmpeg's h263dec/mpeg4, mpeg12dec, h264 and hevc check it per picture
# or slice). Others may honour only the value set when the decoder opens: libdav1d (AV1) then drops every
# non-reference frame of the read and the wanted frame silently became its predecessor. Those decode all.
_SKIP_SWITCHABLE = frozenset({"mpeg4", "h263", "h264", "hevc", "mpeg1video", "mpeg2video"})
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
    count_frames: bool  # True for AVI, MPEG-PS/TS: frame index = frames counted from the keyframe
    # False for MPEG-PS/TS: reads decode from the start, counting frames (module docstring)
    seekable: bool = True

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


# PyAV before 19 raises on container metadata that is not UTF-8 (some UCF101 AVIs) unless told to ignore it;
# 19 removed the argument (a TypeError) and decodes such bytes with surrogateescape
_OPEN_KWARGS = {"metadata_errors": "ignore"} if int(av.__version__.split(".")[0]) < 19 else {}


def _open(path: str | os.PathLike, options: dict[str, str] | None = None):
    path = os.fspath(path)
    # FFmpeg reads the text before a ':' as a protocol: "file:x.avi" opened x.avi, "12:30:00.avi" found no protocol
    # "12". A file that exists here opens by its absolute path, which FFmpeg reads as a file whatever the name
    # holds; other text (a URL such as "https://host/v.mp4") goes to FFmpeg as it is, as before.
    where = os.path.abspath(path) if os.path.exists(path) else path
    try:
        return av.open(where, options=options or {}, **_OPEN_KWARGS)
    except (av.error.FFmpegError, OSError) as err:
        # FFmpeg calls an empty file "Invalid data found when processing input", which hides the cause
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            raise CorruptVideoError(f"cannot open video {path!r}: the file is empty (0 bytes)") from err
        raise CorruptVideoError(f"cannot open video {path!r}: {err}") from err


def probe(path: str | os.PathLike) -> VideoMeta:
    """Read one video's header; raise :class:`CorruptVideoError` if it is unreadable or truncated.

    Never decodes a frame where the header holds the rate and the length: the frame count, rate and time
    base come from the container, and the first displayed pts from the first few demuxed packets. A header
    without an average rate (MPEG-PS/TS) is probed by FFmpeg, which decodes a frame or two; a container
    whose header gives no exact length (MPEG-PS/TS, a WebM or Matroska file written to a pipe) has its
    frames counted from the timestamps of all its packets (demuxed, not decoded).
    """
    path = os.fspath(path)
    try:
        return _probe(path, _HEADER_ONLY)
    except CorruptVideoError:
        # Some containers need a real probe to find their rate or length; a broken file fails again.
        return _probe(path, None)


# Containers whose header has no frame count and whose duration FFmpeg estimates, from the bitrate or from
# timestamps near the end of the file (an MPEG-PS of 100 frames at 25 fps: 3.90 s header-only, 3.92 s probed):
# their frames are counted. They have no seek index either (module docstring): reads decode from the start.
_ESTIMATED_LENGTH = frozenset({"mpeg", "mpegts", "mpegvideo"})


def _probe(path: str, options: dict[str, str] | None) -> VideoMeta:
    with _open(path, options) as container:
        if not container.streams.video:
            raise CorruptVideoError(f"{path!r} has no video stream")
        stream = container.streams.video[0]
        if options is not None and stream.average_rate is None:
            # Without FFmpeg's probing an MPEG-PS/TS stream's only rate is MPEG-2's field rate, twice the
            # frame rate (r_frame_rate: 50 for 25 fps video); frames would be addressed on that timeline
            raise CorruptVideoError(f"{path!r}: the header gives no average frame rate")
        tb = stream.time_base
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        if tb is None or rate is None or float(rate) <= 0:
            raise CorruptVideoError(f"{path!r}: the header gives no time base or frame rate")
        fps = float(rate)
        estimated = container.format.name in _ESTIMATED_LENGTH
        count_frames = estimated or "avi" in container.format.name.split(",")
        pts = first = None
        if "matroska" in container.format.name.split(",") and container.duration is not None:
            # Matroska's duration is the end time on the segment's clock, which starts at 0, not at the first
            # frame (a cut that kept its timestamps starts at 5 s); a header-only open leaves start_time unset
            pts, _ = _scan_packets(path, container, stream, _PROBE_PACKETS)
            first = float(min(pts) * tb)
        num_frames = None if estimated else _header_frames(path, container, stream, fps, first)
        if num_frames is None:
            pts, packets = _scan_packets(path, container, stream, None)
            # frames counted by read_frames (AVI, MPEG-PS/TS) are one a packet; other frames are indexed by
            # their pts on the frame-rate grid, so the last packet's pts gives the count
            num_frames = packets if count_frames else round((max(pts) - min(pts)) * fps * float(tb)) + 1
        elif pts is None:
            pts, _ = _scan_packets(path, container, stream, _PROBE_PACKETS)
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
            count_frames=count_frames,
            seekable=not estimated,
        )


def _header_frames(path: str, container, stream, fps: float, first: float | None = None) -> int | None:
    """The frame count the header gives (its count, else its duration); None where it gives neither.
    ``first``: the first frame's time in seconds, where the header's duration is the end time (Matroska)."""
    tb = stream.time_base
    dur_frames = None
    if first is not None and container.duration is not None:
        dur_frames = (container.duration / av.time_base - first) * fps
    elif stream.duration is not None:
        dur_frames = float(stream.duration * tb) * fps
    elif container.duration is not None:
        dur_frames = container.duration / av.time_base * fps
    num_frames = int(stream.frames or 0)
    if num_frames <= 0:
        if dur_frames is None:
            return None  # a WebM written to a pipe (MediaRecorder, OBS) has no duration in its header
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
    return num_frames


def _scan_packets(path: str, container, stream, limit: int | None) -> tuple[list[int], int]:
    """The timestamps (pts, else dts) of the first ``limit`` video packets (None: all), demuxed, not decoded,
    and how many of the packets read hold data."""
    pts = []
    packets = 0
    try:
        for packet in container.demux(stream):
            packets += packet.size > 0
            if packet.pts is not None:
                pts.append(packet.pts)
            elif packet.dts is not None:
                pts.append(packet.dts)
            if limit is not None and len(pts) >= limit:
                break
    except av.error.FFmpegError as err:
        raise CorruptVideoError(f"{path!r}: cannot read its packets: {err}") from err
    if not pts:
        raise CorruptVideoError(f"{path!r}: no video packets")
    return pts, packets


def _decode_packet(stream, packet) -> list[av.VideoFrame]:
    """The one place frames leave the decoder: the frames that sending ``packet`` puts out."""
    return stream.decode(packet)


_LOCAL = threading.local()  # per thread: its one-thread swscale context (contexts are not thread-safe)

# The one swscale context that runs slice threads (frames of _THREADED_MIN_PIXELS and more), shared by all
# threads under a lock; ``threads_arg``: PyAV >= 17 takes ``reformat(threads=...)``. The threaded context is
# module-level, not per thread, for fork: a child frees the states of the threads it does not copy, and a
# context whose slice threads stayed in the parent waits for them, used or freed, even at the child's
# exit (a DataLoader worker forked after an HD read hung for good). The child leaks it instead.
_SWS = SimpleNamespace(reformatter=None, lock=threading.Lock(), threads_arg=True)


def _leave_threaded_context_to_the_parent() -> None:
    # Decoders too: one with frame or slice threads that the parent had left to its cyclic collector (a failed
    # read's traceback holds its container in a cycle) was freed by the child's collector, and FFmpeg's free
    # waited for threads that stayed in the parent: a DataLoader worker forked after such a read hung for good.
    # What the child inherits is left out of its collections (what Python's docs advise for forked workers).
    gc.freeze()
    _SWS.lock = threading.Lock()  # a thread of the parent may have held it; that thread did not fork
    if _SWS.reformatter is not None:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(_SWS.reformatter))  # one reference more, never given back
        _SWS.reformatter = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_leave_threaded_context_to_the_parent)

# Frames with fewer pixels than this are converted to RGB on one thread, as PyAV did before 17; since 17
# swscale takes one thread per CPU by default, which costs more than it saves on small frames (PyAV 18 /
# FFmpeg 8.1, a 2-core AMD Zen 4, one process): yuv420p -> rgb24 took 290-320 us a 320x240 frame against
# 52 us on one thread (640x480: 301 vs 134 us), while at 1280x720 threads win (286 vs 390 us).
_THREADED_MIN_PIXELS = 1280 * 720


def check_thread_type(thread_type: Any) -> Any:
    """``thread_type`` as given where PyAV takes it (a name of ``av.codec.context.ThreadType``, as spelt there, or
    a member); anything else is refused now, naming the choices: PyAV only looks the name up when a file opens,
    and a data set made with ``"frame"`` failed at its first read with ``KeyError: 'frame'``."""
    from av.codec.context import ThreadType

    names = list(ThreadType.__members__)
    if isinstance(thread_type, ThreadType) or (isinstance(thread_type, str) and thread_type in names):
        return thread_type
    from zoo.inputs import did_you_mean, either

    raise ValueError(f"thread_type must be one of PyAV's decoder thread types {either(names)}, got "
                     f"{thread_type!r}{did_you_mean(str(thread_type), names)}")


_WARNED_LOG_THREADS = False  # the warning below, once per process


def decoder_thread_count(thread_count: int | None = None) -> int:
    """The decoder's thread count: ``thread_count`` when given (0: FFmpeg's choice), else 1 inside a
    DataLoader worker (its siblings already decode on the other cores; more threads per worker only
    oversubscribe them, the reason torch runs workers on one intra-op thread too) and FFmpeg's choice (0)
    elsewhere.

    Always 1 while PyAV hands FFmpeg's log messages to Python (an ``av.logging.set_level`` call, which
    torchvision up to 0.2x makes when ``torchvision.io`` is imported): a decoder thread that logs waits for
    the GIL, and freeing its codec context waits, holding the GIL, for that thread; the read hung for good
    (PyAV-Org/PyAV#751). ``av.logging.set_level(None)`` gives the threads back."""
    if av.logging.get_level() is not None:
        global _WARNED_LOG_THREADS
        if thread_count not in (None, 1) and not _WARNED_LOG_THREADS:
            _WARNED_LOG_THREADS = True
            warnings.warn(f"decoding on one thread, not thread_count={thread_count}: PyAV is forwarding FFmpeg's "
                          "log to Python (av.logging level set; torchvision <= 0.2x's io module does on import), and "
                          "a threaded decoder that logs while it is freed deadlocks. av.logging.set_level(None) "
                          "allows threads again", RuntimeWarning, stacklevel=user_stacklevel())
        return 1
    if thread_count is not None:
        return thread_count
    return 1 if torch.utils.data.get_worker_info() is not None else 0


def _sws_threads(frame, decoder_threads: int) -> int:
    """swscale threads for ``frame``: 1 where the decoder runs on one thread or the frame is small,
    otherwise FFmpeg's choice (0)."""
    return 1 if decoder_threads == 1 or frame.width * frame.height < _THREADED_MIN_PIXELS else 0


def _reformat(reformatter, frame, threads: int, **kwargs):
    """``reformatter.reformat(frame, **kwargs)`` on ``threads`` swscale threads (0: one per CPU)."""
    # PyAV >= 17 converts on several threads by default (``threads=0``); older versions have no
    # ``threads`` argument and convert on one.
    if _SWS.threads_arg:
        try:
            return reformatter.reformat(frame, threads=threads, **kwargs)
        except TypeError as err:
            if "threads" not in str(err):
                raise
            _SWS.threads_arg = False
    return reformatter.reformat(frame, **kwargs)


def _quarter_turns(frame) -> int:
    """Counter-clockwise quarter turns that show ``frame`` upright, from the display matrix its container
    gave it (a phone's portrait video is stored landscape with a -90 degree matrix); 0 without one. A PyAV
    whose frames have no ``rotation`` does not expose the matrix: its frames come as stored."""
    degrees = getattr(frame, "rotation", 0) or 0
    turns = round(degrees / 90)
    return turns % 4 if abs(degrees - 90 * turns) < 1 else 0  # a skew no quarter turn matches: as stored


def _to_array(frame, size: tuple[int, int] | None = None, decoder_threads: int = 0) -> np.ndarray:
    """RGB ``(H, W, 3)`` uint8, upright as its display matrix says (as FFmpeg's player and OpenCV show it);
    with ``size=(h, w)`` (of the upright frame) scaled in the same swscale pass (bilinear).
    ``decoder_threads``: the decoder's thread count (1 in DataLoader workers), which sets swscale's."""
    turns = _quarter_turns(frame)
    if size is not None and turns % 2:
        size = (size[1], size[0])  # scaled as stored, then turned
    rgb = _converted(frame, size, decoder_threads)
    return np.ascontiguousarray(np.rot90(rgb, turns)) if turns else rgb


def _converted(frame, size: tuple[int, int] | None, decoder_threads: int) -> np.ndarray:
    # frame.to_ndarray() builds a new swscale context for every frame, which costs more than decoding
    # a 320x240 frame; a reformatter keeps its context cached across frames and videos.
    kwargs: dict[str, Any] = {"format": "rgb24"}
    if size is not None:
        kwargs.update(height=size[0], width=size[1], interpolation="BILINEAR")
    threads = _sws_threads(frame, decoder_threads)
    if threads == 1 or not _SWS.threads_arg:
        reformatter = getattr(_LOCAL, "reformatter", None)
        if reformatter is None:
            reformatter = _LOCAL.reformatter = VideoReformatter()
        return _reformat(reformatter, frame, 1, **kwargs).to_ndarray()
    with _SWS.lock:
        if _SWS.reformatter is None:
            _SWS.reformatter = VideoReformatter()
        return _reformat(_SWS.reformatter, frame, threads, **kwargs).to_ndarray()


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
    ``max(indices)``; where a later index lies past a keyframe far enough ahead (``_RUN_GAP``), it seeks
    again instead of decoding the frames in between. Indices beyond the last decodable frame by at most
    a couple of frames (header rounding) repeat the last frame; more than that raises
    :class:`CorruptVideoError`. ``size=(h, w)`` scales the returned frames while converting them to RGB
    (one swscale pass, bilinear).
    ``thread_count``: decoder threads (0: FFmpeg's choice); None: :func:`decoder_thread_count`.
    """
    path = os.fspath(path)
    idx = [_frame_index(i) for i in indices]
    if not idx:
        raise ValueError("read_frames: indices is empty")
    if min(idx) < 0:
        raise ValueError(f"read_frames: negative frame index {min(idx)}")
    # (16.7, 20) went to swscale, which truncated it to 16 rows; (True, 20) scaled every frame to one row
    size = size_pair(size, "read_frames size", int_means=None, allow_none=True)
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


def _frame_index(value: Any) -> int:
    """A display index as a Python int: an int, a NumPy integer or an integer tensor of one value. ``int()`` read
    1.7 as frame 1 and True as frame 1, without a word."""
    try:
        if not isinstance(value, bool):
            return operator.index(value)
    except TypeError:
        pass
    raise TypeError(f"read_frames: frame indices must be ints (display indices 0, 1, ...), got {value!r}")


class _SkippedTail(Exception):
    """The video ended before a wanted frame while B-frames were skipped: its last frames may be among them."""


class _SlotRuleBroken(Exception):
    """An AVI packet yielded more than one frame: packets cannot index this file's frames."""


def _read_sorted(
    path: str, wanted: list[int], meta: VideoMeta, thread_type: str, thread_count: int, stats: DecodeStats,
    size: tuple[int, int] | None = None, options: dict[str, str] | None = None,
) -> np.ndarray:
    try:
        return _read_positioned(path, wanted, meta, thread_type, thread_count, stats, size, options, skip=True)
    except _SlotRuleBroken:
        return _read_positioned(path, wanted, meta, thread_type, thread_count, stats, size, options, skip=False)


def _seek_target(meta: VideoMeta, first: int, ticks_per_frame: float) -> int:
    """The demuxer timestamp to seek to for display index ``first``."""
    # Seek a little before the wanted time: the demuxer's seek timestamps (AVI: dts) may lead the
    # displayed pts by the B-frame delay, and landing one keyframe early only costs decoding.
    margin = meta.start_pts - meta.seek_origin + math.ceil(ticks_per_frame)
    return meta.seek_origin + int(first * ticks_per_frame) - margin


def _split_runs(stream, wanted: list[int], meta: VideoMeta, ticks_per_frame: float) -> list[list[int]]:
    """``wanted`` cut into runs, each read by one seek: a cut wherever the keyframe that a seek to the
    next frame lands on lies more than ``_RUN_GAP`` frames past the frame before it (reading on would
    decode those frames). One run where the demuxer has no keyframe index (or PyAV cannot show it)."""
    entries = getattr(stream, "index_entries", None)  # newer PyAV only (18 has it)
    if not meta.seekable or len(wanted) < 2 or entries is None or len(entries) == 0:
        return [wanted]
    runs = [[wanted[0]]]
    for f in wanted[1:]:
        last = runs[-1][-1]
        if f - last > _RUN_GAP:  # consecutive frames (a dense clip) never look the index up
            target = _seek_target(meta, f, ticks_per_frame)
            k = -1 if target <= meta.seek_origin else entries.search_timestamp(target, backward=True)
            if k >= 0 and (entries[k].timestamp - meta.seek_origin) / ticks_per_frame > last + _RUN_GAP:
                runs.append([f])
                continue
        runs[-1].append(f)
    return runs


class _Source:
    """The video stream one read decodes its runs from: seeks reuse the open container (a seek flushes
    the decoder); decoding from the start opens the file again once it has been read."""

    def __init__(self, path: str, options: dict[str, str] | None, thread_type: str,
                 thread_count: int) -> None:
        self.path, self.options, self.thread_type, self.thread_count = path, options, thread_type, thread_count
        self.container = None
        self._reopen()

    def _reopen(self) -> None:
        self.close()
        # options=_HEADER_ONLY: the index's meta already holds what probing would learn (and probing
        # decodes a frame of its own); the decoder finds the pixel format in the first packet
        self.container = _open(self.path, self.options)
        self.stream = self.container.streams.video[0]
        self.stream.thread_type = self.thread_type
        if self.thread_count:
            self.stream.codec_context.thread_count = self.thread_count
        self.used = False

    def position(self, target: int | None, meta: VideoMeta, stats: DecodeStats) -> bool:
        """Go to the keyframe at or before ``target`` (None: the start); True when decoding from there."""
        from_start = target is None or target <= meta.seek_origin  # nothing to skip: decode from the start
        if not from_start:
            self.used = True  # set first: after a failed seek, decoding from the start opens the file again
            self.container.seek(target, stream=self.stream, backward=True, any_frame=False)
            stats.seeks += 1
        elif self.used:
            self._reopen()
        self.used = True
        return from_start

    def close(self) -> None:
        if self.container is not None:
            self.container.close()
            self.container = None


def _read_positioned(
    path: str, wanted: list[int], meta: VideoMeta, thread_type: str, thread_count: int, stats: DecodeStats,
    size: tuple[int, int] | None, options: dict[str, str] | None, skip: bool,
) -> np.ndarray:
    ticks_per_frame = 1.0 / (meta.fps * float(meta.time_base))  # pts units per frame
    rows = _Rows(path, len(wanted), size, thread_count)
    source = _Source(path, options, thread_type, thread_count)
    skip = skip and source.stream.codec_context.name in _SKIP_SWITCHABLE
    try:
        row = 0
        for run in _split_runs(source.stream, wanted, meta, ticks_per_frame):
            _read_run(source, run, row, rows, meta, ticks_per_frame, stats, skip)
            row += len(run)
    finally:
        source.close()
    return rows.array


def _read_run(
    source: _Source, run: list[int], row: int, rows: _Rows, meta: VideoMeta, ticks_per_frame: float,
    stats: DecodeStats, skip: bool,
) -> None:
    """Fill ``rows[row : row + len(run)]`` with the frames at ``run`` (sorted), from one seek."""
    first = run[0]
    targets: list[int | None] = []
    if meta.seekable:
        targets.append(_seek_target(meta, first, ticks_per_frame))
        targets.append(targets[0] - int(2 * meta.fps * ticks_per_frame))  # 2 s further back, if we overshot
    targets.append(None)  # from the start
    for target in targets:
        for skipping in (skip, False) if skip else (False,):
            try:
                from_start = source.position(target, meta, stats)
            except av.error.FFmpegError:
                # MP4's demuxer refuses a seek to before the stream's first keyframe ("Operation not
                # permitted"): a cut that starts mid-GOP has frames there. Seek earlier, or read from the start.
                break
            frames = _indexed_frames(source.container, source.stream, meta, run, ticks_per_frame, from_start,
                                     stats, skipping)
            try:
                if _decode_run(frames, run, meta, from_start, rows, row, skipping):
                    return
                break  # landed after the first wanted frame: seek earlier
            except _SkippedTail:
                continue  # read the run again, every frame decoded, to find the video's real last frame
            finally:
                frames.close()  # before the next seek: the stopped read lets go of its demuxer position
    raise CorruptVideoError(f"{source.path!r}: could not position the decoder at frame {first}")


def _indexed_frames(container, stream, meta, wanted, ticks_per_frame, from_start, stats, skip):
    """``(display index, frame)`` in display order from the current position (module docstring).

    With ``skip``, non-reference frames more than ``_SKIP_MARGIN`` frames before the next frame of
    ``wanted`` (sorted) are not decoded; without it (the fallback), AVI frames are indexed by counting
    decoder outputs.
    """
    ctx = stream.codec_context
    slots = meta.count_frames and skip  # AVI with skipping: count packets
    # AVI: a packet's dts is its chunk's number, empty chunks (dropped frames) included, which FFmpeg's
    # demuxer does not deliver; MPEG-PS/TS dts are no index, their packets are counted
    by_dts = meta.count_frames and meta.seekable
    offsets: list[int] = []  # counted containers: display index of each data packet sent, less base
    first_dts = None
    base = None  # display index of the first frame out (the keyframe we landed on)
    delay = 0  # data packets sent before the first frame came out
    last = None  # display index of the latest frame out
    ordinal = None  # counted containers: which data packet's slot the latest frame out fills
    ctx.skip_frame = "DEFAULT"  # a run before this one may have left the decoder skipping
    skipping = False
    for packet in container.demux(stream):
        flushing = packet.pts is None and packet.dts is None  # the demuxer's final, empty packet
        if meta.count_frames and not flushing:
            if packet.size == 0:
                continue  # an empty chunk (a dropped frame) is a slot the decoder never fills
            if by_dts and packet.dts is not None:
                first_dts = packet.dts if first_dts is None else first_dts
                offsets.append(round((packet.dts - first_dts) / ticks_per_frame))
            else:
                offsets.append(offsets[-1] + 1 if offsets else 0)
        sent = len(offsets) - (0 if flushing else 1)  # data packets sent before this one
        if skip:
            # Frames not out yet follow `last` in display order: the next wanted one is after it. Between
            # wanted frames of one run (no keyframe to seek to in the gap) B-frames are skipped as well.
            ahead = 0 if last is None else bisect.bisect_right(wanted, last)
            nxt = wanted[ahead] if ahead < len(wanted) else None
            if nxt is None:
                early = False
            elif meta.count_frames:
                # the packet's own frame has display index <= its slot's (a B-frame is shown before
                # the reference decoded ahead of it); until the keyframe is out, base is unknown
                early = base is not None and not flushing and base + offsets[-1] < nxt - _SKIP_MARGIN
            else:
                edge = meta.start_pts + (nxt - _SKIP_MARGIN) * ticks_per_frame
                early = packet.pts is not None and packet.pts < edge
            if early != skipping:
                ctx.skip_frame = "NONREF" if early else "DEFAULT"
                skipping = early
        frames = _decode_packet(stream, packet)
        if slots and len(frames) > 1 and not flushing:
            raise _SlotRuleBroken
        for frame in frames:
            stats.frames_decoded += 1
            if base is None:
                delay = sent
                p = frame.pts if frame.pts is not None else frame.dts
                if meta.count_frames:
                    # From the start too, AVI's first frame out is placed by its pts (its chunk's number):
                    # a cut that starts mid-GOP holds frames before its first keyframe, which H.264 drops;
                    # counted from 0, a read from the start put every frame as many frames early as were
                    # dropped (seeks were right). MPEG-PS/TS pts are no index: counted from 0.
                    base = 0 if (p is None or (from_start and not meta.seekable)) else \
                        round((p - meta.start_pts) / ticks_per_frame)
            if meta.count_frames:
                # skipping: the frame out while data packet `sent` goes in fills packet `sent - delay`'s slot;
                # otherwise (and for the frames the flush lets out) the slot after the previous frame's
                ordinal = sent - delay if slots and not flushing else (0 if ordinal is None else ordinal + 1)
                i = base + offsets[ordinal] if ordinal < len(offsets) else last + 1
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


def _decode_run(frames, wanted, meta, from_start, rows: _Rows, row: int = 0, skipping: bool = False) -> bool:
    """Put the frames at ``wanted`` into ``rows[row : row + len(wanted)]`` from ``(index, frame)`` pairs;
    False if we landed after ``wanted[0]`` (then seek earlier). ``skipping``: ``frames`` skip B-frames, so
    the video ending before a wanted frame raises :class:`_SkippedTail` (the last frames may be skipped ones)."""
    j = 0
    prev = None  # (index, frame) of the latest frame before the next wanted one
    for i, frame in frames:
        if prev is None and i > wanted[0] and not from_start:
            return False
        # Wanted indices this frame has passed show the previous frame (variable-rate gaps).
        while j < len(wanted) and wanted[j] < i:
            rows.put(row + j, prev[1] if prev is not None else frame)
            j += 1
        if j < len(wanted) and wanted[j] == i:
            rows.put(row + j, frame)
            j += 1
        if j == len(wanted):
            return True
        prev = (i, frame)
    # End of stream before the last wanted frame.
    if prev is None:
        raise CorruptVideoError(f"{meta.path!r}: the decoder returned no frames")
    if skipping:
        raise _SkippedTail
    missing = wanted[j:]
    if missing[-1] - prev[0] > _TAIL_TOLERANCE:
        raise CorruptVideoError(
            f"{meta.path!r} ends at frame {prev[0]} but frame {missing[-1]} was asked for "
            f"(header: {meta.num_frames} frames); the file is probably truncated"
        )
    rows.put(row + j, prev[1])
    rows.array[row + j + 1 : row + len(wanted)] = rows.array[row + j]
    return True


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
