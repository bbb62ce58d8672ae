"""Sparse reads (TSN's segment centres): a seek per run of nearby frames, every frame as a full decode's."""

from __future__ import annotations

import bisect
import subprocess
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import av
import av.logging
import numpy as np
import pytest
import torch

from zoo.video import decoding
from zoo.video import sampling as S
from zoo.video.decoding import probe, read_all_frames, read_frames
from zoo.video.synthetic import render_clip

# PyAV >= 17 shows the demuxer's keyframe index (Stream.index_entries), by which a sparse read cuts its
# frames into runs and seeks to each; older PyAV reads them in one pass: the same frames, more decoding
SEEKS_BY_INDEX = hasattr(av.video.stream.VideoStream, "index_entries")
_NO_INDEX = "this PyAV shows no keyframe index (index_entries: PyAV >= 17): one pass, no seek per run"


def _frames(n: int, seed: int = 3) -> np.ndarray:
    # a moving shape over a rolling noise texture: every frame differs from its neighbours
    clip = render_clip(0, np.random.default_rng(seed), size=32, num_frames=n)
    noise = np.random.default_rng(seed).integers(0, 40, (32, 32, 3), dtype=np.uint8)
    return np.stack([np.clip(c.astype(np.int16) + np.roll(noise, t, axis=1), 0, 255).astype(np.uint8)
                     for t, c in enumerate(clip)])


def _index_sets(n: int, seed: int = 0) -> list[list[int]]:
    """TSN-like sparse sets (fixed and random segment frames), random sparse sets, dense 16-frame clips,
    and any order with repeats."""
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    sets = [S.segment_indices(n, k, random=False).tolist() for k in (3, 8)]
    sets += [S.segment_indices(n, 8, random=True, generator=g).tolist() for _ in range(3)]
    sets += [sorted(rng.choice(n, size=5, replace=False).tolist()) for _ in range(3)]
    sets += [list(range(s, s + 16)) for s in (0, n // 3, n - 16)]
    sets += [[n - 1, 0, n // 2, n // 2]]
    return sets


def _check_against_full_decode(path: Path, sets: list[list[int]],
                               threads_list=(1, 0)) -> decoding.DecodeStats:
    meta, full = probe(path), read_all_frames(path)
    assert full.shape[0] == meta.num_frames, (path.name, full.shape, meta.num_frames)
    stats = decoding.DecodeStats()
    for idx in sets:
        for threads in threads_list:
            got = read_frames(path, idx, meta, thread_count=threads, stats=stats)
            assert torch.equal(got, full[idx]), f"{path.name} threads={threads}: frames {idx} differ"
    return stats


def _pict_types(path: Path) -> str:
    with av.open(str(path)) as c:
        return "".join("IPB"[int(f.pict_type) - 1] for f in c.decode(video=0))


_FORMATS = [("mpeg4", ".avi", 0), ("mpeg4", ".avi", 2), ("mpeg4", ".mp4", 0), ("mpeg4", ".mp4", 2),
            ("libx264", ".mp4", 0), ("libx264", ".mp4", 2), ("mpeg4", ".mkv", 2)]


@pytest.mark.parametrize(("codec", "suffix", "b_frames"), _FORMATS)
def test_sparse_and_dense_reads_equal_the_full_decode(encode_clip, tmp_path, codec, suffix, b_frames):
    if codec not in av.codecs_available:
        pytest.skip(f"this FFmpeg build has no {codec} encoder")
    path = encode_clip(tmp_path / f"clip{suffix}", _frames(120), codec=codec, gop=10, b_frames=b_frames)
    assert ("B" in _pict_types(path)) == (b_frames > 0)
    _check_against_full_decode(path, _index_sets(120))


@pytest.mark.parametrize("suffix", [".avi", ".mp4"])
def test_far_apart_frames_are_reached_by_one_seek_each(encode_clip, tmp_path, suffix):
    path = encode_clip(tmp_path / f"clip{suffix}", _frames(200), codec="mpeg4", gop=10, b_frames=0)
    meta, full = probe(path), read_all_frames(path)
    idx = S.segment_indices(200, 8, random=False).tolist()  # 12, 37, ..., 187: a keyframe between each two
    stats = decoding.DecodeStats()
    assert torch.equal(read_frames(path, idx, meta, thread_count=1, stats=stats), full[idx])
    if not SEEKS_BY_INDEX:
        pytest.skip(_NO_INDEX)
    # one forward pass from the keyframe before frame 12 would decode ~180 frames; a seek per frame
    # decodes at most the keyframe interval for each
    assert stats.seeks == 8 and stats.frames_decoded <= 8 * 10, stats
    # a dense clip across keyframes is one run: one seek, every frame from its keyframe on
    stats = decoding.DecodeStats()
    assert torch.equal(read_frames(path, range(95, 111), meta, thread_count=1, stats=stats), full[95:111])
    assert stats.seeks == 1 and stats.frames_decoded <= 16 + 10, stats


@pytest.mark.parametrize("suffix", [".avi", ".mp4"])
def test_b_frames_between_wanted_frames_of_one_run_are_skipped(encode_clip, tmp_path, suffix):
    path = encode_clip(tmp_path / f"clip{suffix}", _frames(90), codec="mpeg4", gop=300, b_frames=2)
    assert _pict_types(path).count("I") == 1
    meta, full = probe(path), read_all_frames(path)
    idx = [5, 35, 65, 85]
    stats = decoding.DecodeStats()
    assert torch.equal(read_frames(path, idx, meta, thread_count=1, stats=stats), full[idx])
    # no keyframe to seek to: one pass, but between the wanted frames only I- and P-frames (a third) and the
    # few frames before each wanted one are decoded (44 here), not all 86 frames up to frame 85
    assert stats.seeks <= 1 and stats.frames_decoded <= 0.7 * 86, stats


@pytest.mark.parametrize("suffix", [".avi", ".mp4"])
def test_runs_past_the_end_and_in_any_order_come_back_as_asked(encode_clip, tmp_path, suffix):
    path = encode_clip(tmp_path / f"clip{suffix}", _frames(80), codec="mpeg4", gop=10, b_frames=2)
    full = read_all_frames(path)
    n = full.shape[0]
    stats = decoding.DecodeStats()
    # header rounding: the last run reads up to two frames past the end as the last frame
    got = read_frames(path, [n + 1, 3, n - 1, 40, 3], thread_count=1, stats=stats)
    assert torch.equal(got, full[[n - 1, 3, n - 1, 40, 3]])
    # frame 3 from the start, 40 and the end by a seek each (one pass without the keyframe index)
    assert stats.seeks >= (2 if SEEKS_BY_INDEX else 1), stats


def test_decoding_from_the_start_after_a_seek_opens_the_file_again(encode_clip, tmp_path):
    path = encode_clip(tmp_path / "clip.avi", _frames(60), codec="mpeg4", gop=10, b_frames=0)
    meta, full = probe(path), read_all_frames(path)
    source = decoding._Source(str(path), None, "AUTO", 1)
    try:
        stats = decoding.DecodeStats()
        target = decoding._seek_target(meta, 35, 1.0)  # AVI at 25 fps: one pts tick a frame
        assert source.position(target, meta, stats) is False and stats.seeks == 1
        first = source.container
        frame = next(iter(source.container.decode(source.stream)))
        assert np.array_equal(frame.to_ndarray(format="rgb24"), full[30].numpy())  # the keyframe before 35
        # a run the seeks overshot decodes from the start: a fresh container, the first frame first
        assert source.position(None, meta, stats) is True and source.container is not first
        frame = next(iter(source.container.decode(source.stream)))
        assert np.array_equal(frame.to_ndarray(format="rgb24"), full[0].numpy())
    finally:
        source.close()


# --- the real UCF101 clips: packed B-frames, 25 and 29.97 fps ------------------------------------------


@pytest.fixture(scope="module")
def real_clips(shared_data) -> list[Path]:
    clips = sorted((shared_data / "ucf101" / "clips").glob("*/*.avi"))
    if not clips:
        pytest.skip(f"no real UCF101 clips under {shared_data / 'ucf101' / 'clips'}")
    return clips


def _repeat(src: Path, dst: Path, times: int) -> Path:
    """``src``'s packets ``times`` times in a row: a packed-B-frame AVI with ``times`` keyframes."""
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        s = inp.streams.video[0]
        o = out.add_stream_from_template(s)
        packets = [p for p in inp.demux(s) if p.size]
        span = max(p.dts for p in packets) + 1
        for r in range(times):
            for p in packets:
                q = av.Packet(bytes(p))
                q.dts, q.pts = p.dts + r * span, None if p.pts is None else p.pts + r * span
                q.is_keyframe, q.stream, q.time_base = p.is_keyframe, o, p.time_base
                out.mux(q)
    return dst


def test_sparse_reads_of_real_clips_equal_the_full_decode(real_clips, tmp_path):
    # one decoder thread, as in the DataLoader workers; both thread counts on the tripled clip below
    for clip in real_clips:
        _check_against_full_decode(clip, _index_sets(probe(clip).num_frames), threads_list=(1,))
    # packed B-frames and several keyframes, so that the reads are cut into runs
    packed = next(c for c in real_clips if "B" in _pict_types(c))
    tripled = _repeat(packed, tmp_path / "tripled.avi", 3)
    assert probe(tripled).count_frames and _pict_types(tripled).count("I") == 3
    stats = _check_against_full_decode(tripled, _index_sets(probe(tripled).num_frames))
    assert stats.seeks > stats.reads or not SEEKS_BY_INDEX, stats


def test_threads_give_way_while_pyav_logs_to_python(monkeypatch, pyav_logging_off):
    monkeypatch.setattr(decoding, "_WARNED_LOG_THREADS", False)
    assert decoding.decoder_thread_count(0) == 0 and decoding.decoder_thread_count(4) == 4
    av.logging.set_level(av.logging.ERROR)  # what `import torchvision` did up to 0.2x
    assert decoding.decoder_thread_count() == 1
    with pytest.warns(RuntimeWarning, match="decoding on one thread, not thread_count=0"):
        assert decoding.decoder_thread_count(0) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert decoding.decoder_thread_count(4) == 1  # said once per process


_LOGGING_READS = """
import sys
import av.logging
av.logging.set_level(av.logging.ERROR)
from zoo.video.decoding import probe, read_frames
path = sys.argv[1]
meta = probe(path)
for start in range(50):
    read_frames(path, [start % 100, start % 100 + 7, 110], meta, thread_count=0)
print("done")
"""


def test_threaded_reads_with_pyav_logging_on_do_not_hang(encode_clip, tmp_path):
    # h264 frame threads log while decoding from a seek; with PyAV's Python log callback on, the first few
    # reads hung for good in avcodec_free_context (the main thread held the GIL the logging thread waited for)
    if "libx264" not in av.codecs_available:
        pytest.skip("this FFmpeg build has no libx264 encoder")
    path = encode_clip(tmp_path / "clip.mp4", _frames(120), codec="libx264", gop=10, b_frames=2)
    root = Path(__file__).resolve().parents[2]
    try:
        run = subprocess.run([sys.executable, "-c", _LOGGING_READS, str(path)], check=False, capture_output=True, text=True,
                             timeout=120, cwd=root)
    except subprocess.TimeoutExpired:
        pytest.fail("threaded reads with av.logging on hung")
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr[-2000:]


_FORK_AFTER_READS = """
import gc, os, sys, time
import av
gc.disable()  # what the gc has not freed yet when a DataLoader forks its workers
from zoo.video.decoding import _to_array, probe, read_all_frames, read_frames
path = sys.argv[1]
read_frames(path, [1, 40, 90], probe(path), thread_count=0)
read_all_frames(path, thread_count=0)
import threading
hd = av.VideoFrame(1280, 720, "yuv420p")
_to_array(hd)  # converted on swscale's slice threads (frames of 1280x720 and more)
done, release = threading.Event(), threading.Event()
def convert_and_wait():  # a thread alive at the fork, which the child does not copy
    _to_array(hd)
    done.set()
    release.wait()
threading.Thread(target=convert_and_wait, daemon=True).start()
done.wait()
pid = os.fork()
if pid == 0:
    _to_array(hd)  # the worker converts too: its reformatter's threads must be its own
    gc.collect()  # the worker's gc frees what the parent left: a decoder whose threads did not fork
    sys.exit(0)  # and its exit frees what is left
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    if os.waitpid(pid, os.WNOHANG)[0]:
        print("done")
        sys.exit(0)
    time.sleep(0.05)
os.kill(pid, 9)
print("the forked child hung")
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_a_process_forked_after_threaded_reads_does_not_hang(encode_clip, tmp_path):
    # PyAV 13 and 17.0.0 left a closed container in a reference cycle: a DataLoader worker forked before the
    # gc freed it hung freeing its codec context, waiting for frame threads that exist only in the parent.
    # The same for the per-thread reformatter after an HD frame: its swscale threads stayed in the parent
    path = encode_clip(tmp_path / "clip.mp4", _frames(100), codec="mpeg4", gop=10, b_frames=2)
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", _FORK_AFTER_READS, str(path)], check=False, capture_output=True,
                         text=True, timeout=120, cwd=root)
    assert run.returncode == 0 and run.stdout.strip() == "done", (run.stdout + run.stderr)[-2000:]


def test_a_clip_whose_metadata_is_not_utf8_is_read(tmp_path):
    """Container metadata in another encoding (latin-1 in some AVIs) must not fail the read. PyAV < 19 raised
    unless told to ignore it; PyAV 19 removed that argument, and passing it failed every open."""
    path = tmp_path / "latin.avi"
    frames = np.stack([np.full((16, 16, 3), 40 * i, np.uint8) for i in range(4)])
    with av.open(str(path), mode="w") as out:
        out.metadata["title"] = "QQQQ"
        s = out.add_stream("mpeg4", rate=25)
        s.width, s.height, s.pix_fmt = 16, 16, "yuv420p"
        for img in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    data = path.read_bytes()
    assert data.count(b"QQQQ") == 1
    path.write_bytes(data.replace(b"QQQQ", "Caf\xe9".encode("latin-1")))  # not UTF-8: 0xE9 then 0x00
    info = probe(path)
    assert info.num_frames == 4
    assert read_frames(path, [0, 3]).shape[0] == 2


@pytest.mark.parametrize("degrees, corner", [(0, "top left"), (90, "bottom left"), (-90, "top right"),
                                             (180, "bottom right")])
def test_a_phone_video_is_read_upright(tmp_path, degrees, corner):
    """A phone stores a portrait video as landscape frames with a display matrix that turns them (-90
    degrees): read as stored, every frame lay on its side. Frames now come upright, as FFmpeg's player and
    OpenCV show them, and size=(h, w) is the upright frame's."""
    from av.video.stream import VideoStream

    if not hasattr(VideoStream, "set_display_rotation") or not hasattr(av.VideoFrame, "rotation"):
        pytest.skip(f"PyAV {av.__version__} cannot write or read a display matrix")
    path = tmp_path / "phone.mp4"
    stored = np.zeros((32, 64, 3), np.uint8)
    stored[:8, :16] = 255  # a white block in the stored frame's top left corner
    with av.open(str(path), mode="w") as out:
        s = out.add_stream("mpeg4", rate=10)
        s.width, s.height, s.pix_fmt = 64, 32, "yuv420p"
        if degrees:
            s.set_display_rotation(float(degrees))  # counter-clockwise, as FFmpeg's matrix means it
        for _ in range(4):
            for p in s.encode(av.VideoFrame.from_ndarray(stored, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    upright = (64, 32) if degrees in (90, -90) else (32, 64)
    for frames in (read_frames(path, [0, 3]), read_all_frames(path)):
        assert tuple(frames.shape[1:3]) == upright
        img = frames[0].float().mean(-1)
        corners = {"top left": img[:4, :4], "top right": img[:4, -4:], "bottom left": img[-4:, :4],
                   "bottom right": img[-4:, -4:]}
        assert max(corners, key=lambda k: float(corners[k].mean())) == corner
    scaled = read_frames(path, [1], size=(upright[0] // 2, upright[1] // 2))
    assert tuple(scaled.shape[1:3]) == (upright[0] // 2, upright[1] // 2)


@pytest.mark.parametrize(("codec", "suffix", "b_frames"), [("mpeg2video", ".mpg", 0), ("mpeg2video", ".mpg", 2),
                                                           ("mpeg1video", ".mpeg", 2), ("mpeg2video", ".ts", 2)])
def test_mpeg_program_and_transport_streams_are_read_at_their_frame_rate_frame_exact(
        encode_clip, tmp_path, codec, suffix, b_frames):
    """A header-only open of MPEG-PS/TS gives no average rate, and its fallback was MPEG-2's field rate: a
    25 fps .mpg probed as 50 fps with a bitrate-estimated length (about twice its frames), so a 16-frame clip
    held 8 frames, most twice. Their seeks land half a frame off and their pts skip and repeat frames: reads
    decode from the start and count frames."""
    path = encode_clip(tmp_path / f"clip{suffix}", _frames(60), codec=codec, gop=12, b_frames=b_frames)
    meta = probe(path)
    assert (meta.fps, meta.num_frames) == (25.0, 60)
    _check_against_full_decode(path, _index_sets(60), threads_list=(1,))


class _Pipe:
    """A write-only, unseekable file: the muxer cannot go back to write the duration into the header."""

    def __init__(self, fh) -> None:
        self.fh = fh

    def write(self, data) -> int:
        return self.fh.write(data)

    def seekable(self) -> bool:
        return False


@pytest.mark.parametrize(("fmt", "codec", "suffix"), [("webm", "libvpx-vp9", ".webm"), ("webm", "libvpx", ".webm"),
                                                      ("matroska", "mpeg4", ".mkv")])
def test_a_webm_written_to_a_pipe_without_a_duration_is_read(tmp_path, fmt, codec, suffix):
    """MediaRecorder, OBS and ffmpeg to a pipe write WebM without a duration: it was 'unreadable' (the header
    gives neither a frame count nor a duration); its packets' timestamps give the count."""
    if codec not in av.codecs_available:
        pytest.skip(f"this FFmpeg build has no {codec} encoder")
    path = tmp_path / f"live{suffix}"
    with open(path, "wb") as fh:
        out = av.open(_Pipe(fh), "w", format=fmt)
        s = out.add_stream(codec, rate=25)
        s.width, s.height, s.pix_fmt = 32, 32, "yuv420p"
        for img in _frames(30):
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
        out.close()
    with av.open(str(path)) as c:
        assert c.duration is None and not c.streams.video[0].frames  # the case: no length in the header
    assert probe(path).num_frames == 30
    _check_against_full_decode(path, _index_sets(30), threads_list=(1,))


def test_an_empty_file_is_said_to_be_empty(tmp_path):
    """Before: a 0-byte .mp4 (a failed download) gave "cannot open video 'zero.mp4': [Errno 1094995529] Invalid
    data found when processing input", FFmpeg's words for any unreadable input."""
    from zoo.video.decoding import CorruptVideoError

    (tmp_path / "zero.mp4").write_bytes(b"")
    with pytest.raises(CorruptVideoError, match=r"cannot open video '.*zero.mp4': the file is empty \(0 bytes\)"):
        probe(tmp_path / "zero.mp4")
    (tmp_path / "junk.mp4").write_bytes(b"not a video at all" * 8)  # bytes that are no video keep FFmpeg's words
    with pytest.raises(CorruptVideoError, match=r"cannot open video '.*junk.mp4': (?!the file is empty)"):
        probe(tmp_path / "junk.mp4")


# --- audit regressions: AV1, Matroska start offsets, the end of a packed-B-frame clip, AVI dropped frames ---


def _write(path: Path, frames: np.ndarray, codec: str, *, gop: int, options: dict | None = None,
           slots: list[int] | None = None, fmt: str | None = None) -> Path:
    """``frames`` encoded with ``codec``; ``slots``: each frame's pts in frames (1/25 s), for gaps or offsets."""
    with av.open(str(path), "w", format=fmt) as out:
        s = out.add_stream(codec, rate=25, options=options or {})
        s.width, s.height = frames.shape[2], frames.shape[1]
        s.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        s.codec_context.gop_size = gop
        for k, img in enumerate(frames):
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            if slots is not None:
                f.pts, f.time_base = slots[k], Fraction(1, 25)
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path


_AV1_ENCODERS = {"libsvtav1": {"g": "10", "svtav1-params": "verbosity=0"}, "libaom-av1": {"g": "10", "cpu-used": "8"}}


@pytest.mark.parametrize("suffix", [".mp4", ".webm"])
def test_av1_reads_return_the_frame_asked_for(tmp_path, suffix):
    """dav1d reads skip_frame only when it opens: a read that skipped B-frames until a few frames before its
    first wanted frame dropped every non-reference frame of the read, and the gap rule returned the frame
    before (frame 5 read as frame 4). Skipping is now for decoders that switch it per picture only."""
    encoder = next((e for e in _AV1_ENCODERS if e in av.codecs_available), None)
    if encoder is None:
        pytest.skip(f"this FFmpeg build has no AV1 encoder ({', '.join(_AV1_ENCODERS)})")
    frames = np.repeat(np.repeat(_frames(40), 2, axis=1), 2, axis=2)  # 64x64: AV1 encoders' minimum
    try:
        path = _write(tmp_path / f"clip{suffix}", frames, encoder, gop=10, options=_AV1_ENCODERS[encoder])
        full = read_all_frames(path)
    except av.error.FFmpegError as err:
        pytest.skip(f"this FFmpeg build cannot encode and decode AV1 here: {err}")
    meta = probe(path)
    assert full.shape[0] == meta.num_frames == 40
    for i in range(40):
        assert torch.equal(read_frames(path, [i], meta, thread_count=1)[0], full[i]), f"frame {i}"
    _check_against_full_decode(path, _index_sets(40), threads_list=(1,))


@pytest.mark.parametrize(("codec", "suffix"), [("mpeg4", ".mkv"), ("libvpx-vp9", ".webm"), ("mpeg4", ".mp4")])
def test_a_cut_that_kept_its_timestamps_counts_only_its_frames(tmp_path, codec, suffix):
    """Matroska's duration is the end time: 40 frames shown from 5 s on probed as 165 frames, and a TSN clip of
    the video raised 'probably truncated'. MP4 (duration = length) worked and must stay so."""
    if codec not in av.codecs_available:
        pytest.skip(f"this FFmpeg build has no {codec} encoder")
    path = _write(tmp_path / f"cut{suffix}", _frames(40), codec, gop=10, slots=[125 + i for i in range(40)])
    with av.open(str(path)) as c:
        assert c.start_time == 5 * av.time_base  # the case: the first frame at 5 s
    assert probe(path).num_frames == 40
    _check_against_full_decode(path, _index_sets(40), threads_list=(1,))


def test_reads_past_the_end_of_a_packed_b_frame_clip_do_not_depend_on_the_other_indices(real_clips):
    """v_ApplyEyeMakeup_g01_c01.avi (frames 0-163): read_frames([165]) raised 'ends at frame 161 ... probably
    truncated' (frames 162-163 were skipped B-frames) while [163, 165] gave frame 163 twice."""
    for clip in real_clips:
        full = read_all_frames(clip)
        meta, last = probe(clip), full.shape[0] - 1
        for threads in (1, 0):
            for i in (last + 1, last + 2):
                got = read_frames(clip, [i], meta, thread_count=threads)[0]
                assert torch.equal(got, full[last]), (clip.name, threads, i)
                got = read_frames(clip, [last, i], meta, thread_count=threads)
                assert torch.equal(got, full[[last, last]]), (clip.name, threads, i)
            # the error names the real last frame, not the last one the B-frame skip let through
            with pytest.raises(decoding.CorruptVideoError, match=rf"ends at frame {last} but frame {last + 5} "):
                read_frames(clip, [last + 5], meta, thread_count=threads)


@pytest.mark.parametrize("codec", ["mpeg4", "mjpeg"])
def test_an_avi_with_dropped_frames_shows_the_frame_before_each_drop(tmp_path, codec):
    """FFmpeg's AVI muxer writes an empty chunk for each timestamp gap and its demuxer skips them: counting
    packets put every frame after a drop one slot early per drop, and a dense read to the end raised
    'probably truncated'. The chunk number (dts) gives each frame's slot; an empty slot shows the frame before."""
    drops = set(range(10, 55, 7))
    kept = [i for i in range(60) if i not in drops]
    path = _write(tmp_path / "drops.avi", _frames(60)[kept], codec, gop=12, slots=kept)
    meta, full = probe(path), read_all_frames(path)  # full: the 52 frames written, in order
    assert meta.num_frames == 60 and full.shape[0] == len(kept)
    shown = [bisect.bisect_right(kept, i) - 1 for i in range(60)]  # row of `full` on screen at slot i
    for i in range(60):
        assert torch.equal(read_frames(path, [i], meta, thread_count=1)[0], full[shown[i]]), f"slot {i}"
    for idx in _index_sets(60):
        for threads in (1, 0):
            got = read_frames(path, idx, meta, thread_count=threads)
            assert torch.equal(got, full[[shown[i] for i in idx]]), f"threads={threads}: slots {idx}"


def test_a_file_named_with_a_colon_is_read_itself_not_as_a_protocol(encode_clip, tmp_path, monkeypatch):
    """FFmpeg read the text before a ':' as a protocol: 'file:x.avi' decoded x.avi, another video, without a word,
    and '12:30:00.avi' failed with 'Protocol not found'."""
    monkeypatch.chdir(tmp_path)
    encode_clip(tmp_path / "x.avi", _frames(6, seed=1), gop=3)
    for name, n in (("file:x.avi", 9), ("12:30:00.avi", 7)):
        frames = _frames(n, seed=2)
        encode_clip(tmp_path / name, frames, gop=3)
        meta = probe(name)
        assert meta.num_frames == n, name
        got = read_frames(name, [0, n - 1], meta)
        assert torch.equal(got, read_all_frames(tmp_path / name)[[0, n - 1]]), name
