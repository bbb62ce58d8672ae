"""Split-file errors point at the line meant: a listed video missing on disk, and any error after blank lines."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from zoo.video.splits import SplitFileError, read_split
from zoo.video.synthetic import render_clip, write_video
from zoo.video.ucf101 import UCF101


def _classes(split_dir: Path) -> None:
    split_dir.mkdir(parents=True, exist_ok=True)
    (split_dir / "classInd.txt").write_bytes(b"1 Walk\r\n2 Run\r\n")


def test_a_missing_video_is_named_with_its_split_file_and_line(tmp_path):
    """Before: "1 of the 3 videos in trainlist01.txt are missing under ..., e.g. .../Run/v_Run_g09_c01.avi",
    which left the line to mend to a search of the list (9,537 lines in UCF101's)."""
    root, splits = tmp_path / "videos", tmp_path / "splits"
    rng = np.random.default_rng(0)
    for label, cls in enumerate(("Walk", "Run")):
        write_video(root / cls / f"v_{cls}_g01_c01.avi", render_clip(label, rng, 16, 4))
    _classes(splits)
    (splits / "trainlist01.txt").write_bytes(b"Walk/v_Walk_g01_c01.avi 1\r\n\r\nRun/v_Run_g01_c01.avi 2\r\n"
                                             b"Run/v_Run_g09_c01.avi 2\r\n")
    listed = re.escape(f"{root / 'Run' / 'v_Run_g09_c01.avi'} (line 4 of {splits / 'trainlist01.txt'})")
    with pytest.raises(FileNotFoundError, match=rf"1 of the 3 videos in trainlist01.txt are missing under .*{listed}"):
        UCF101(root, splits, train=True, progress=False)


def test_split_file_lines_are_numbered_as_an_editor_numbers_them(tmp_path):
    """Before: blank lines were dropped before numbering, so the label error of line 5 below was said to be on
    line 2, and a repeated video's lines were as far off."""
    _classes(tmp_path)
    (tmp_path / "trainlist01.txt").write_bytes(b"\r\n\r\nWalk/v_Walk_g01_c01.avi 1\r\n\r\nRun/v_Run_g01_c01.avi 1\r\n")
    with pytest.raises(SplitFileError, match=r"trainlist01.txt:5: label '1' does not match class 'Run'"):
        read_split(tmp_path, 1, True)
    (tmp_path / "classInd.txt").write_bytes(b"\r\n1 Walk\r\n\r\n2 Run\r\n2 Swim\r\n")
    with pytest.raises(SplitFileError, match=r"classInd.txt:5: labels must count up from 1; expected 3, got 2"):
        read_split(tmp_path, 1, True)
    _classes(tmp_path)
    (tmp_path / "testlist01.txt").write_bytes(b"\nWalk/v_Walk_g01_c01.avi\n\n\nWalk/v_Walk_g01_c01.avi\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entries = read_split(tmp_path, 1, False)
    assert [e.line for e in entries] == [2]
    assert any("Walk/v_Walk_g01_c01.avi (lines 2 and 5)" in str(w.message) for w in caught), \
        [str(w.message) for w in caught]
