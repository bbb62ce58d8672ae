"""Video data: split files, the header-only index, keyframe seeking, sampling, corrupt files, transforms."""

from __future__ import annotations

import itertools
import os
import platform
import shutil
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from av.video.reformatter import VideoReformatter

from zoo.video import decoding, sampling
from zoo.video import transforms as VT
from zoo.video.decoding import CorruptVideoError, probe, read_all_frames, read_frames
from zoo.video.splits import read_class_index, read_split
from zoo.video.synthetic import CLASSES, SyntheticConfig, make_synthetic_actions, render_clip, write_video
from zoo.video.ucf101 import UCF101

TINY = SyntheticConfig(size=32, num_frames=12, train_per_class=2, test_per_class=1, seed=1)


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory):
    return make_synthetic_actions(tmp_path_factory.mktemp("synthetic"), TINY, progress=False)


@pytest.fixture(scope="module")
def ucf_dir(shared_data) -> Path:
    d = shared_data / "ucf101"
    if not (d / "ucfTrainTestlist" / "classInd.txt").is_file():
        pytest.skip(f"UCF101 split files not found under {d}")
    return d


@pytest.fixture(scope="module")
def real_clips(ucf_dir) -> list[Path]:
    clips = sorted((ucf_dir / "clips").glob("*/*.avi"))
    if not clips:
        pytest.skip(f"no real UCF101 clips under {ucf_dir / 'clips'}")
    return clips


# --- split files ---------------------------------------------------------------------------------


def test_split_files_crlf_case_mismatch_and_three_folds(ucf_dir):
    splits = ucf_dir / "ucfTrainTestlist"
    assert b"\r\n" in (splits / "trainlist01.txt").read_bytes()  # the quirk under test is really there
    classes = read_class_index(splits)
    assert len(classes) == 101 and classes[0] == "ApplyEyeMakeup" and classes[36] == "HandstandPushups"
    assert not any("\r" in c for c in classes)
    for fold in (1, 2, 3):
        train, test = read_split(splits, fold, True), read_split(splits, fold, False)
        assert len(train) + len(test) == 13320
        assert {e.label for e in train} == set(range(101)) == {e.label for e in test}
        assert not ({e.path for e in train} & {e.path for e in test})
        assert all(not e.path.endswith("\r") and e.path.endswith(".avi") for e in train + test)
    # classInd "HandstandPushups" vs file names "v_HandStandPushups_...": same class, label 37 (0-based 36)
    hs = [e for e in read_split(splits, 1, False) if "HandStandPushups" in e.path]
    assert hs and all(e.label == 36 and e.class_name == "HandstandPushups" for e in hs)
    # the real clips are all in testlist01 (groups g01-g07)
    basket = [e for e in read_split(splits, 1, False) if e.path == "Basketball/v_Basketball_g01_c01.avi"]
    assert basket and basket[0].label == 7
    with pytest.raises(ValueError, match="fold must be one of"):
        read_split(splits, 4)


def test_split_errors_name_the_line(tmp_path):
    (tmp_path / "classInd.txt").write_bytes(b"1 Walk\r\n2 Run\r\n")
    (tmp_path / "trainlist01.txt").write_bytes(b"Walk/v_Walk_g01_c01.avi 2\r\n")
    with pytest.raises(ValueError, match=r"trainlist01.txt:1: label '2' does not match class 'Walk'"):
        read_split(tmp_path, 1, True)
    (tmp_path / "testlist01.txt").write_bytes(b"Swim/v_Swim_g01_c01.avi\r\n")
    with pytest.raises(ValueError, match="class from classInd"):
        read_split(tmp_path, 1, False)


def test_a_video_listed_twice_in_a_split_file_is_taken_once_with_a_warning(tmp_path):
    """A repeated line (two lists merged by hand) made the video twice as many items an epoch and, in a testlist,
    scored it twice; torchvision's UCF101 reads the lines as a set."""
    (tmp_path / "classInd.txt").write_bytes(b"1 Walk\r\n2 Run\r\n")
    (tmp_path / "trainlist01.txt").write_bytes(b"Run/v_Run_g01_c01.avi 2\r\nWalk/v_Walk_g01_c01.avi 1\r\n"
                                               b"Run/v_Run_g01_c01.avi 2\r\n")
    with pytest.warns(UserWarning, match=r"lists 1 video\(s\) more than once, e.g. Run/v_Run_g01_c01.avi \(lines 1 "
                                         r"and 3\): each is taken once"):
        entries = read_split(tmp_path, 1, True)
    assert [e.path for e in entries] == ["Run/v_Run_g01_c01.avi", "Walk/v_Walk_g01_c01.avi"]


def test_a_split_line_stepping_out_of_its_class_folder_is_refused(tmp_path):
    """Labelled by its first folder, 'Walk/../Run/v.avi' was a Run video taught as Walk."""
    (tmp_path / "classInd.txt").write_bytes(b"1 Walk\r\n2 Run\r\n")
    (tmp_path / "trainlist01.txt").write_bytes(b"Run/v_Run_g01_c01.avi 2\r\nWalk/../Run/v_Run_g01_c01.avi 1\r\n")
    with pytest.raises(ValueError, match=r"trainlist01.txt:2: 'Walk/\.\./Run/v_Run_g01_c01.avi' steps out of its class "
                                         r"folder \('\.\.'\)"):
        read_split(tmp_path, 1, True)
    (tmp_path / "trainlist01.txt").write_bytes(b"Walk/./v_Walk_g01_c01.avi 1\r\nWalk/sub/v.avi 1\r\n")
    assert [e.label for e in read_split(tmp_path, 1, True)] == [0, 0]  # inside the class folder: taken
    with pytest.raises(FileNotFoundError, match="testlist02.txt"):
        read_split(tmp_path, 2, False)


def test_missing_split_entries_are_an_error_with_count_and_paths(tiny_set, tmp_path):
    videos, splits = tiny_set
    root = tmp_path / "partial"
    shutil.copytree(videos, root)
    gone = sorted(root.glob("*/*.avi"))[:3]
    for p in gone:
        p.unlink()
    n_train = len(read_split(splits, 1, True))
    expected = sum(1 for p in gone if "_g01_" not in p.name)  # test clips are groups g01-g05
    with pytest.raises(FileNotFoundError, match=rf"{expected} of the {n_train} videos in trainlist01.txt are missing"):
        UCF101(root, splits, train=True, progress=False)


def test_a_classind_class_with_no_training_video_is_named_in_a_warning(tiny_set, tmp_path):
    """Before: a class of classInd.txt that the trainlist never lists trained without a word: the network has an
    output for it (num_classes from classInd.txt) that nothing teaches, and its test videos all score wrong."""
    import warnings

    videos, splits = tiny_set
    mine = tmp_path / "splits"
    shutil.copytree(splits, mine)
    trainlist = mine / "trainlist01.txt"
    trainlist.write_bytes(b"".join(ln for ln in trainlist.read_bytes().splitlines(True) if b"Grow/" not in ln))
    with pytest.warns(UserWarning, match=r"1 of the 5 classes of .*classInd\.txt have no video in trainlist01\.txt "
                                         r"\(Grow\): the network has an output for each class but never learns"):
        ds = UCF101(videos, mine, train=True, progress=False)
    assert ds.classes == list(CLASSES) and CLASSES.index("Grow") not in ds.labels
    with warnings.catch_warnings():  # every class listed, or a testlist (scoring only): nothing to say
        warnings.simplefilter("error")
        UCF101(videos, splits, train=True, progress=False)
        UCF101(videos, mine, train=False, progress=False)


def test_split_files_saved_with_a_byte_order_mark_are_read(tmp_path):
    """Before: classInd.txt saved by Windows Notepad (UTF-8 with a BOM) failed at its first line:
    "expected '<label> <ClassName>', got '\\ufeff1 ApplyEyeMakeup'"."""
    bom = b"\xef\xbb\xbf"
    (tmp_path / "classInd.txt").write_bytes(bom + b"1 ApplyEyeMakeup\r\n2 Biking\r\n\r\n")
    (tmp_path / "trainlist01.txt").write_bytes(bom + b"Biking/v_Biking_g01_c01.avi 2\r\n")
    (tmp_path / "testlist01.txt").write_bytes(bom + b"ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi\r\n")
    assert read_class_index(tmp_path) == ["ApplyEyeMakeup", "Biking"]
    assert [(e.path, e.label) for e in read_split(tmp_path, 1, True)] == [("Biking/v_Biking_g01_c01.avi", 1)]
    assert read_split(tmp_path, 1, False)[0].path == "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi"


def test_a_class_folder_differing_in_case_from_the_split_files_is_named(tiny_set, tmp_path):
    """Before: a class folder ``moveright`` for the split files' ``MoveRight`` gave only "N of the M videos in
    trainlist01.txt are missing under ..., e.g. .../MoveRight/v_MoveRight_g02_c01.avi"."""
    videos, splits = tiny_set
    root = tmp_path / "root_case"
    shutil.copytree(videos, root)
    (root / "MoveRight").rename(root / "moveright")
    if (root / "MoveRight").is_dir():
        pytest.skip("a case-insensitive file system finds the folder anyway")
    with pytest.raises(FileNotFoundError, match=r"are missing under .*root_case, e.g. .*MoveRight/v_MoveRight_.*; "
                                                r".*root_case/moveright exists for 'MoveRight', differing only in "
                                                r"case: rename it"):
        UCF101(root, splits, train=True, progress=False)

# --- the index: headers only ----------------------------------------------------------------------


def test_index_is_built_without_decoding(tiny_set, monkeypatch):
    videos, splits = tiny_set
    counts = {"open": 0, "decode": 0}
    real_open, real_decode = av.open, decoding._decode_packet

    def counting_open(*a, **k):
        counts["open"] += 1
        return real_open(*a, **k)

    def counting_decode(*a, **k):  # every packet the decoder is sent passes here
        counts["decode"] += 1
        return real_decode(*a, **k)

    monkeypatch.setattr(av, "open", counting_open)
    monkeypatch.setattr(decoding, "_decode_packet", counting_decode)
    ds = UCF101(videos, splits, train=True, frames_per_clip=4, step_between_clips=4, progress=False)
    n_videos = len(read_split(splits, 1, True))
    assert counts == {"open": n_videos, "decode": 0}
    assert ds.stats.frames_decoded == 0
    assert ds.num_videos == n_videos and len(ds) == n_videos * 3  # 12 frames -> 3 clips of 4
    assert all(m.num_frames == TINY.num_frames and m.width == TINY.size for m in ds.videos)
    # the counter is live: reading one clip does decode
    ds[0]
    assert counts["decode"] > 0 and ds.stats.frames_decoded > 0


# --- seeking == full decode ---------------------------------------------------------------------


def _check_seek_matches_full_decode(path: Path, rng: np.random.Generator, trials: int = 12) -> float:
    meta = probe(path)
    full = read_all_frames(path)  # (N, H, W, 3)
    assert full.shape[0] == meta.num_frames, (path, full.shape, meta)
    stats = decoding.DecodeStats()
    picks = [[0], [meta.num_frames - 1], list(range(meta.num_frames))]
    for _ in range(trials):
        start = int(rng.integers(meta.num_frames))
        picks.append(sorted(rng.choice(np.arange(start, meta.num_frames), size=min(5, meta.num_frames - start),
                                       replace=False).tolist()))
    picks.append([5, 2, 2, 9])  # any order, repeats
    for idx in picks:
        idx = [i for i in idx if i < meta.num_frames]
        got = read_frames(path, idx, meta, stats=stats)
        assert torch.equal(got, full[idx]), f"{path.name}: frames {idx} differ from the full decode"
    return stats.decoded_per_returned


def test_seek_returns_exactly_the_full_decode_frames_real_clips(real_clips):
    rng = np.random.default_rng(0)
    for clip in real_clips:
        _check_seek_matches_full_decode(clip, rng, trials=6)
    # the packed-B-frame AVI: FFmpeg's synthetic pts are swapped, decoder order is display order
    meta = probe(real_clips[0])
    assert meta.count_frames


def test_real_clips_with_packed_b_frames_skip_them_and_stay_exact(real_clips):
    packed = [c for c in real_clips if "B" in _pict_types(c)]
    assert packed, "the shared clips hold B-frame AVIs (ApplyEyeMakeup, Shotput)"
    for clip in packed:
        meta, full = probe(clip), read_all_frames(clip)
        for threads in (1, 0):
            for start in range(0, meta.num_frames - 16, 11):  # the loader benchmark's 16-frame clips
                got = read_frames(clip, range(start, start + 16), meta, thread_count=threads)
                assert torch.equal(got, full[start : start + 16]), f"{clip.name} threads={threads} start {start}"
        # one keyframe at 0: a late frame costs the I/P-frames before it, a third of the frames
        stats = decoding.DecodeStats()
        read_frames(clip, [meta.num_frames - 1], meta, thread_count=1, stats=stats)
        assert stats.frames_decoded < 0.45 * meta.num_frames, (clip.name, stats)


@pytest.mark.parametrize("suffix", [".avi", ".mp4"])
def test_seek_returns_exactly_the_full_decode_frames_generated(encode_clip, tmp_path, suffix):
    frames = render_clip(0, np.random.default_rng(3), size=32, num_frames=40)
    path = encode_clip(tmp_path / f"clip{suffix}", frames, gop=6)
    meta = probe(path)
    assert meta.count_frames == (suffix == ".avi")  # .mp4 goes through the pts path
    _check_seek_matches_full_decode(path, np.random.default_rng(1))
    # a late clip is reached by seeking, not by decoding from the start
    stats = decoding.DecodeStats()
    read_frames(path, [30, 31, 32, 33], meta, stats=stats)
    assert stats.seeks == 1 and stats.frames_decoded <= 4 + 6


def _pict_types(path: Path) -> str:
    with av.open(str(path)) as c:
        return "".join("IPB"[int(f.pict_type) - 1] for f in c.decode(video=0))


@pytest.mark.parametrize("threads", [1, 0])
@pytest.mark.parametrize("suffix", [".avi", ".mp4"])
def test_b_frames_before_the_clip_are_skipped_and_every_frame_is_exact(encode_clip, tmp_path, suffix, threads):
    frames = render_clip(0, np.random.default_rng(3), size=32, num_frames=48)
    path = encode_clip(tmp_path / f"clip{suffix}", frames, gop=30, b_frames=2)
    assert _pict_types(path)[:7] == "IBBPBBP"  # display order: two B-frames between references
    meta = probe(path)
    full = read_all_frames(path)
    for start in range(meta.num_frames - 3):  # every start, inside and across the two GOPs
        got = read_frames(path, range(start, start + 4), meta, thread_count=threads)
        assert torch.equal(got, full[start : start + 4]), f"{suffix} threads={threads}: frames {start}..{start + 3}"
    # frames 26..28 sit in the first GOP (keyframe 0): before frame 26 - margin only the I- and P-frames
    # (0, 3, ..., 21) are decoded, 8 of the 23 frames, then every frame up to 28
    stats = decoding.DecodeStats()
    read_frames(path, [26, 27, 28], meta, thread_count=threads, stats=stats)
    assert stats.seeks <= 1 and stats.frames_decoded <= 8 + 9, stats


@pytest.mark.parametrize("suffix", [".avi", ".mp4"])
def test_a_frame_or_two_past_the_end_repeats_the_last_and_order_is_the_callers(encode_clip, tmp_path, suffix):
    path = encode_clip(tmp_path / f"clip{suffix}", render_clip(2, np.random.default_rng(5), 32, 12), gop=4, b_frames=2)
    full = read_all_frames(path)
    n = full.shape[0]
    # header rounding: up to two frames past the end show the last frame
    assert torch.equal(read_frames(path, [n - 2, n - 1, n, n + 1]), full[[n - 2, n - 1, n - 1, n - 1]])
    # any order and repeats come back as asked, from one decoded copy of each frame
    assert torch.equal(read_frames(path, [7, 3, 7, 0]), full[[7, 3, 7, 0]])
    with pytest.raises(CorruptVideoError, match="truncated"):
        read_frames(path, [n + 5])


def test_a_frame_size_change_mid_clip_is_named():
    rows = decoding._Rows("clip.mp4", 2, None)
    rows.put(0, av.VideoFrame(32, 24, "yuv420p"))
    with pytest.raises(CorruptVideoError, match=r"frame size changes mid-stream \(48x24 after 32x24\)"):
        rows.put(1, av.VideoFrame(48, 24, "yuv420p"))


class _DecoderThreads(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, i):
        return decoding.decoder_thread_count()


def test_dataloader_workers_decode_on_one_thread(encode_clip, tmp_path, pyav_logging_off):
    path = encode_clip(tmp_path / "clip.avi", render_clip(0, np.random.default_rng(1), size=32, num_frames=6), gop=6)
    assert decoding.decoder_thread_count() == 0  # the main process: FFmpeg's choice
    assert decoding.decoder_thread_count(0) == 0 and decoding.decoder_thread_count(3) == 3  # kept when given
    # inside a DataLoader worker one thread: the sibling workers use the other cores
    loader = torch.utils.data.DataLoader(_DecoderThreads(), batch_size=None, num_workers=1)
    assert list(loader) == [1]
    # the default gives the same frames as FFmpeg's threading and as one thread
    meta = probe(path)
    assert torch.equal(read_frames(path, [1, 4], meta), read_frames(path, [1, 4], meta, thread_count=0))
    assert torch.equal(read_frames(path, [1, 4], meta), read_frames(path, [1, 4], meta, thread_count=1))
    assert torch.equal(read_all_frames(path), read_all_frames(path, thread_count=0))


class _HeapKept(UCF101):
    def __getitem__(self, item):
        from zoo.engine import heap

        video, _ = super().__getitem__(item)
        return video, heap._applied_pid == os.getpid()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
def test_dataloader_workers_keep_the_memory_a_batch_frees(tiny_set):
    # glibc would return a batch's freed clips to the OS and fault them in again (zoo/engine/heap.py)
    videos, splits = tiny_set
    ds = _HeapKept(videos, splits, fold=1, train=True, frames_per_clip=4, sampling="random", seed=0,
                   progress=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1)
    kept = torch.cat([k for _, k in loader])
    assert len(kept) == len(ds) and bool(kept.all())


class _RecordingReformatter:
    """Wraps PyAV's reformatter and records the swscale thread count it was asked for."""

    def __init__(self, accepts_threads: bool = True) -> None:
        self.real, self.accepts_threads, self.threads = VideoReformatter(), accepts_threads, []

    def reformat(self, frame, **kwargs):
        if "threads" in kwargs:
            if not self.accepts_threads:  # PyAV < 17 has no threads argument
                raise TypeError("reformat() got an unexpected keyword argument 'threads'")
            self.threads.append(kwargs.pop("threads"))  # recorded; PyAV < 17 would refuse it
        return self.real.reformat(frame, **kwargs)


def test_rgb_conversion_threads_follow_the_decoder_and_frame_size(monkeypatch):
    small, large = av.VideoFrame(320, 240, "yuv420p"), av.VideoFrame(1280, 720, "yuv420p")
    one, shared = _RecordingReformatter(), _RecordingReformatter()
    monkeypatch.setattr(decoding._LOCAL, "reformatter", one, raising=False)
    monkeypatch.setattr(decoding._SWS, "reformatter", shared)
    monkeypatch.setattr(decoding._SWS, "threads_arg", True)
    assert decoding._to_array(small, decoder_threads=0).shape == (240, 320, 3)
    decoding._to_array(large, decoder_threads=0)
    decoding._to_array(large, decoder_threads=1)
    decoding._to_array(large, (90, 160), decoder_threads=0)
    # one-thread conversions on the calling thread's own context; threaded ones on the shared context
    assert one.threads == [1, 1] and shared.threads == [0, 0]
    # an older PyAV without the argument converts on its one thread, and is not asked again
    old = _RecordingReformatter(accepts_threads=False)
    monkeypatch.setattr(decoding._LOCAL, "reformatter", old)
    want = VideoReformatter().reformat(small, format="rgb24").to_ndarray()
    assert np.array_equal(decoding._to_array(small), want) and np.array_equal(decoding._to_array(small), want)
    assert decoding._SWS.threads_arg is False and old.threads == []
    decoding._to_array(large)  # ...large frames too, on the calling thread's context
    assert shared.threads == [0, 0]
    # any other TypeError is the caller's and is raised, not taken for an old PyAV
    monkeypatch.setattr(decoding._SWS, "threads_arg", True)
    with pytest.raises(TypeError):
        decoding._reformat(one, small, 1, format="rgb24", no_such_argument=1)
    assert decoding._SWS.threads_arg is True


def test_a_decoder_that_bunches_frames_falls_back_to_counting_them(encode_clip, tmp_path, monkeypatch):
    frames = render_clip(1, np.random.default_rng(4), size=32, num_frames=30)
    path = encode_clip(tmp_path / "clip.avi", frames, gop=30, b_frames=2)
    full = read_all_frames(path)
    real = decoding._decode_packet
    state = {"stream": None, "held": [], "sent": 0}

    def bunching(stream, packet):  # every other packet's frames come out with the next packet's
        if stream is not state["stream"]:
            state.update(stream=stream, held=[], sent=0)
        out = state["held"] + list(real(stream, packet))
        state["sent"] += 1
        if state["sent"] % 2 and packet.pts is not None:
            state["held"] = out
            return []
        state["held"] = []
        return out

    monkeypatch.setattr(decoding, "_decode_packet", bunching)
    # the packet count no longer says which frame came out: the read starts again and counts frames
    assert torch.equal(read_frames(path, [20, 21, 22], thread_count=1), full[20:23])


# --- sampling --------------------------------------------------------------------------------------


def test_sampling_indices():
    # uniform: torchvision's clips (start every `step`), at least one clip for a short video
    assert sampling.num_uniform_clips(10, 4, 3) == 3
    assert sampling.uniform_clip(10, 4, 3, 2).tolist() == [6, 7, 8, 9]
    with pytest.raises(IndexError):
        sampling.uniform_clip(10, 4, 3, 3)
    assert sampling.num_uniform_clips(3, 4, 1) == 1
    assert sampling.uniform_clip(3, 5, 1, 0, "loop").tolist() == [0, 1, 2, 0, 1]
    assert sampling.uniform_clip(3, 5, 1, 0, "pad").tolist() == [0, 1, 2, 2, 2]
    # random: consecutive, in range, and every start is reachable
    g = torch.Generator().manual_seed(0)
    starts = set()
    for _ in range(200):
        idx = sampling.random_clip(10, 4, g)
        assert idx.tolist() == list(range(int(idx[0]), int(idx[0]) + 4))
        starts.add(int(idx[0]))
    assert starts == set(range(7))
    # segments: one frame per equal segment; centre when testing, inside the segment when training
    assert sampling.segment_indices(100, 4, random=False).tolist() == [12, 37, 62, 87]
    for _ in range(50):
        idx = sampling.segment_indices(100, 4, random=True, generator=g)
        assert all(25 * k <= int(i) < 25 * (k + 1) for k, i in enumerate(idx))
    assert sampling.segment_indices(3, 5, random=False).tolist() == [0, 0, 1, 2, 2]
    # frame_rate: a 30 fps video seen at 15 fps takes every other frame
    assert sampling.resampled_length(30, 30.0, 15.0) == 15
    assert sampling.to_source_indices(torch.arange(4), 30, 30.0, 15.0).tolist() == [0, 2, 4, 6]
    assert sampling.to_source_indices(torch.arange(3), 30, 25.0, 10.0).tolist() == [0, 2, 5]


def test_dataset_items_follow_the_sampling(tiny_set):
    videos, splits = tiny_set
    uni = UCF101(videos, splits, train=False, frames_per_clip=5, step_between_clips=5, progress=False)
    assert len(uni) == uni.num_videos * 2  # 12 frames: clips at 0 and 5
    assert [uni.video_index(i) for i in range(4)] == [0, 0, 1, 1]
    v, idx = uni.frame_indices(1)
    assert v == 0 and idx.tolist() == [5, 6, 7, 8, 9]
    x, y = uni[1]
    assert x.shape == (3, 5, TINY.size, TINY.size) and x.dtype == torch.uint8
    full = read_all_frames(uni.videos[0].path).permute(3, 0, 1, 2)  # (C, N, H, W)
    assert torch.equal(x, full[:, 5:10]) and y == uni.labels[0]

    seg = UCF101(videos, splits, train=False, sampling="segments", num_segments=4, progress=False)
    assert len(seg) == seg.num_videos and seg.frame_indices(0)[1].tolist() == [1, 4, 7, 10]
    rnd = UCF101(videos, splits, train=True, sampling="random", frames_per_clip=20, seed=0, progress=False)
    idx = rnd.frame_indices(0)[1]
    assert idx.tolist() == [i % 12 for i in range(20)]  # longer than the video: loops
    assert rnd[0][0].shape == (3, 20, TINY.size, TINY.size)
    with pytest.raises(ValueError, match="sampling must be one of"):
        UCF101(videos, splits, sampling="dense", progress=False)


def test_videos_of_different_fps_and_size_batch_after_resampling_and_resize(encode_clip, tmp_path):
    root, splits = tmp_path / "videos", tmp_path / "splits"
    splits.mkdir()
    a, b = "Walk/v_Walk_g01_c01.avi", "Walk/v_Walk_g01_c02.avi"
    (root / "Walk").mkdir(parents=True)
    encode_clip(root / a, render_clip(0, np.random.default_rng(0), 32, 25), gop=5, fps=25)  # 1 s at 25 fps
    frames = render_clip(1, np.random.default_rng(1), 48, 10)[:, :40]  # 40x48, 1 s at 10 fps
    encode_clip(root / b, np.ascontiguousarray(frames), gop=5, fps=10)
    (splits / "classInd.txt").write_bytes(b"1 Walk\r\n")
    (splits / "testlist01.txt").write_bytes(f"{a}\r\n{b}\r\n".encode())
    ds = UCF101(root, splits, train=False, frames_per_clip=5, step_between_clips=5, frame_rate=5,
                transform=VT.Resize((24, 24)), progress=False)
    assert [m.fps for m in ds.videos] == [25.0, 10.0] and (ds.videos[1].height, ds.videos[1].width) == (40, 48)
    assert len(ds) == 2  # both videos: 1 s at 5 fps = 5 frames = one clip
    assert ds.frame_indices(0)[1].tolist() == [0, 5, 10, 15, 20]
    assert ds.frame_indices(1)[1].tolist() == [0, 2, 4, 6, 8]
    batch, labels = next(iter(torch.utils.data.DataLoader(ds, batch_size=2)))
    assert batch.shape == (2, 3, 5, 24, 24) and labels.tolist() == [0, 0]


# --- corrupt and truncated files -------------------------------------------------------------------


def _truncated_tree(tmp_path: Path, source: Path, class_name: str) -> tuple[Path, Path]:
    """A one-class UCF101 tree with a good generated clip and a half-length copy of ``source``."""
    root, splits = tmp_path / "videos", tmp_path / "splits"
    (root / class_name).mkdir(parents=True)
    splits.mkdir()
    good = f"{class_name}/v_{class_name}_g01_c01.avi"
    bad = f"{class_name}/v_{class_name}_g01_c02.avi"
    write_video(root / good, render_clip(0, np.random.default_rng(0), 32, 12))
    data = source.read_bytes()
    (root / bad).write_bytes(data[: len(data) // 2])
    (splits / "classInd.txt").write_bytes(f"1 {class_name}\r\n".encode())
    (splits / "testlist01.txt").write_bytes(f"{good}\r\n{bad}\r\n".encode())
    return root, splits


def test_truncated_real_clip_is_skipped_and_counted(real_clips, tmp_path):
    source = real_clips[0]
    root, splits = _truncated_tree(tmp_path, source, source.parent.name)
    with pytest.warns(UserWarning, match=r"skipped 1 unreadable video\(s\) of 2"):
        ds = UCF101(root, splits, train=False, frames_per_clip=4, progress=False)
    assert ds.num_videos == 1 and len(ds.skipped) == 1
    assert ds.skipped[0][0].endswith("_c02.avi") and "truncated" in ds.skipped[0][1]
    with pytest.raises(CorruptVideoError, match="truncated"):
        UCF101(root, splits, train=False, frames_per_clip=4, strict=True, progress=False)


def test_garbage_and_truncated_generated_files(tmp_path):
    junk = tmp_path / "junk.avi"
    junk.write_bytes(b"RIFF" + os.urandom(200))
    with pytest.raises(CorruptVideoError, match="cannot open"):
        probe(junk)
    good = write_video(tmp_path / "good.avi", render_clip(1, np.random.default_rng(0), 32, 24))
    cut = tmp_path / "cut.avi"
    data = good.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(CorruptVideoError):
        meta = probe(cut)
        read_frames(cut, [meta.num_frames - 1], meta)


# --- transforms --------------------------------------------------------------------------------------


def test_transforms_keep_shapes_and_dtypes():
    torch.manual_seed(0)
    clip = torch.randint(0, 256, (3, 6, 40, 50), dtype=torch.uint8)  # (C, T, H, W)
    assert VT.Resize(20)(clip).shape == (3, 6, 20, 25) and VT.Resize(20)(clip).dtype == torch.uint8
    assert VT.Resize((16, 24))(clip).shape == (3, 6, 16, 24)
    crop = VT.RandomCrop(32)(clip)
    assert crop.shape == (3, 6, 32, 32) and crop.dtype == torch.uint8
    # one crop window for all frames: every frame of the crop is found at the same offset
    flat = [(i, j) for i in range(9) for j in range(19) if torch.equal(clip[:, 0, i:i + 32, j:j + 32], crop[:, 0])]
    assert len(flat) == 1 and torch.equal(clip[:, :, flat[0][0]:flat[0][0] + 32, flat[0][1]:flat[0][1] + 32], crop)
    assert torch.equal(VT.CenterCrop((20, 30))(clip), clip[:, :, 10:30, 10:40])
    assert torch.equal(VT.RandomHorizontalFlip(p=1.0)(clip), clip.flip(-1))
    f = VT.ToFloat()(clip)
    assert f.dtype == torch.float32 and f.shape == clip.shape and 0.0 <= float(f.min()) <= float(f.max()) <= 1.0
    n = VT.Normalize(VT.KINETICS_MEAN, VT.KINETICS_STD)(f)
    assert n.shape == clip.shape and n.dtype == torch.float32
    assert torch.allclose(n[1], (f[1] - VT.KINETICS_MEAN[1]) / VT.KINETICS_STD[1])
    j = VT.TemporalJitter(2)(clip)
    assert j.shape == clip.shape and j.dtype == torch.uint8
    src = [next(t for t in range(6) if torch.equal(clip[:, t], j[:, k])) for k in range(6)]
    assert src == sorted(src) and all(abs(s - k) <= 2 for k, s in enumerate(src))
    out = VT.kinetics_eval()(torch.randint(0, 256, (3, 4, 240, 320), dtype=torch.uint8))
    assert out.shape == (3, 4, 112, 112) and out.dtype == torch.float32
    assert VT.kinetics_train()(torch.randint(0, 256, (3, 4, 240, 320), dtype=torch.uint8)).shape == (3, 4, 112, 112)
    with pytest.raises(ValueError, match=r"\(C, T, H, W\)"):
        VT.ToFloat()(torch.zeros(3, 32, 32))
    with pytest.raises(ValueError, match="ToFloat first"):
        VT.Normalize(VT.KINETICS_MEAN, VT.KINETICS_STD)(clip)


def test_synthetic_classes_differ_only_over_time():
    a = render_clip(CLASSES.index("MoveRight"), np.random.default_rng(5), 32, 8)
    assert a.shape == (8, 32, 32, 3) and a.dtype == np.uint8
    # the shape's centre of brightness moves right frame by frame
    xs = [(f.mean(-1) > 100).nonzero()[1].mean() for f in a]
    assert all(x1 > x0 for x0, x1 in itertools.pairwise(xs))


def test_resize_of_every_frame_equals_a_per_frame_resize():
    import torchvision.transforms.v2.functional as TF

    torch.manual_seed(0)
    frames = torch.randint(0, 256, (5, 30, 44, 3), dtype=torch.uint8)  # (T, H, W, C) as decoded
    clip = frames.permute(3, 0, 1, 2)  # the loader's (C, T, H, W) view
    for video in (clip, clip.contiguous(), clip.float()):
        out = VT.Resize((17, 23))(video)
        assert out.shape == (3, 5, 17, 23) and out.dtype == video.dtype
        for t in range(5):  # frame t resized alone as a 3-channel image
            ref = TF.resize(video[:, t].contiguous(), [17, 23], antialias=True)
            torch.testing.assert_close(out[:, t], ref, atol=1, rtol=0)


def test_decode_time_resize_keeps_the_frame_indices(encode_clip, tmp_path):
    frames = np.zeros((12, 48, 64, 3), np.uint8)
    for i in range(12):
        frames[i, :, :, :] = 20 * i  # frame i has grey level 20 i: the index is visible after scaling
    path = encode_clip(tmp_path / "grey.avi", frames, gop=5, fps=10)
    meta = probe(path)
    idx = [7, 2, 2, 11, 5]
    full = read_frames(path, idx, meta).float().mean(dim=(1, 2, 3))
    small = read_frames(path, idx, meta, size=(12, 16))
    assert small.shape == (5, 12, 16, 3)
    torch.testing.assert_close(small.float().mean(dim=(1, 2, 3)), full, atol=3.0, rtol=0)
    with pytest.raises(ValueError, match="size must be"):
        read_frames(path, idx, meta, size=(0, 16))


def test_synthetic_set_made_again_with_another_config_has_only_its_clips(tmp_path):
    """A second run into the same folder kept every clip whose name it found: made at the first run's size,
    length and seed."""
    import json

    first = SyntheticConfig(size=16, num_frames=4, train_per_class=2, test_per_class=1, seed=0)
    videos, _ = make_synthetic_actions(tmp_path, first, progress=False)
    kept = videos / "Grow" / "v_Grow_g06_c01.avi"
    stamp_before = kept.stat().st_mtime_ns
    make_synthetic_actions(tmp_path, first, progress=False)  # the same config: the clips are kept
    assert kept.stat().st_mtime_ns == stamp_before
    second = SyntheticConfig(size=32, num_frames=6, train_per_class=1, test_per_class=1, seed=5)
    make_synthetic_actions(tmp_path, second, progress=False)
    clips = sorted(videos.rglob("*.avi"))
    assert len(clips) == 2 * len(CLASSES)  # the first run's second training clips are gone
    assert {(m.width, m.height, m.num_frames) for m in map(probe, clips)} == {(32, 32, 6)}
    assert json.loads((tmp_path / "synthetic.json").read_text())["seed"] == 5


@pytest.mark.parametrize(("option", "field", "value"), [("--train-per-class", "train_per_class", 0),
                                                        ("--train-per-class", "train_per_class", -1),
                                                        ("--test-per-class", "test_per_class", 0),
                                                        ("--frames", "num_frames", 0)])
def test_synthetic_counts_are_checked_before_anything_is_written(tmp_path, option, field, value):
    with pytest.raises(ValueError, match=rf"{field} must be an int >= 1 \({option} on the command line\), got {value}"):
        make_synthetic_actions(tmp_path / "out", SyntheticConfig(**{field: value}), progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"frames_per_clip": 2.5}, TypeError, r"frames_per_clip must be an int >= 1, got 2\.5"),
    ({"sampling": "random", "frames_per_clip": 2.5}, TypeError, r"frames_per_clip must be an int >= 1, got 2\.5"),
    ({"step_between_clips": 0}, ValueError, r"step_between_clips must be an int >= 1 \(frames between .*\), got 0"),
    ({"sampling": "segments", "num_segments": 0}, ValueError, r"num_segments must be an int >= 1 or None .*got 0"),
    ({"sampling": "segments", "num_segments": 2.5}, TypeError, r"num_segments must be an int >= 1 or None .*got 2\.5"),
    ({"thread_type": "frame"}, ValueError, (r"thread_type must be one of PyAV's decoder thread types 'NONE', "
                                            r"'FRAME', 'SLICE' or 'AUTO', got 'frame' \(did you mean 'FRAME'\?\)")),
])
def test_clip_options_are_checked_when_the_data_set_is_made(tiny_set, options, error, message):
    """They were taken as they came and failed (or read 3 frames for 2.5) only when an item was read."""
    from zoo.video.ucf101 import VideoClipDataset

    path = str(next(tiny_set[0].rglob("*.avi")))
    with pytest.raises(error, match=message):
        VideoClipDataset([(path, 0)], ["a"], progress=False, **options)
