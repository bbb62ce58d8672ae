"""Fuzzing the UCF101 split-file readers: random damage to the official split files (../shared/data when
present, else files made here in the same format) either reads as consistent entries or raises
SplitFileError -- never another exception. 200 derandomised examples; ZOO_FUZZ_EXAMPLES / ZOO_FUZZ_RANDOM=1
explore further."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from zoo.video.splits import SplitFileError, read_class_index, read_split

FUZZ = settings(max_examples=int(os.environ.get("ZOO_FUZZ_EXAMPLES", "200")), deadline=None, database=None,
                derandomize="ZOO_FUZZ_RANDOM" not in os.environ,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SHARED = Path(os.environ.get("ZOO_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
FILES = ("classInd.txt", "trainlist01.txt", "testlist01.txt")
LINES = 120  # of each list: enough classes and both line forms, small enough for 200 examples a second


@functools.cache
def seeds() -> dict[str, str]:
    """The real split files (CRLF as shipped), their first lines; a made-up copy when they are absent."""
    real = SHARED / "ucf101" / "ucfTrainTestlist"
    if all((real / f).is_file() for f in FILES):
        raw = {f: (real / f).read_bytes().decode() for f in FILES}
        return {f: "".join(t.splitlines(keepends=True)[: None if f == "classInd.txt" else LINES])
                for f, t in raw.items()}
    classes = ["ApplyEyeMakeup", "HandstandPushups", "YoYo"]
    index = "".join(f"{i} {c}\r\n" for i, c in enumerate(classes, 1))
    clip = lambda c, g: f"{c}/v_{c.replace('Handstand', 'HandStand')}_g{g:02d}_c01.avi"
    train = "".join(f"{clip(c, g)} {i}\r\n" for i, c in enumerate(classes, 1) for g in (8, 9))
    test = "".join(f"{clip(c, 1)}\r\n" for c in classes)
    return {"classInd.txt": index, "trainlist01.txt": train, "testlist01.txt": test}


def _write(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (folder / name).write_bytes(data)


def test_seed_split_files_read():
    """The undamaged seeds read (real files: the HandstandPushups / HandStandPushups spelling included)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _write(Path(tmp), {f: t.encode() for f, t in seeds().items()})
        classes = read_class_index(tmp)
        assert read_split(tmp, 1, True) and read_split(tmp, 1, False)
        assert "HandstandPushups" in classes


@FUZZ
@given(data=st.data())
def test_split_files_fuzz(tmp_path, mutations, data):
    target = data.draw(st.sampled_from(FILES), label="file")
    files = {f: t.encode() for f, t in seeds().items()}
    files[target] = data.draw(mutations.text(seeds()[target], values=("1", "0", "102", "ApplyEyeMakeup",
                                                                      "Nope/x.avi", "a b c", "\\", "/")),
                              label="damaged")
    _write(tmp_path, files)
    try:
        classes = read_class_index(tmp_path)
        for train in (True, False):
            for entry in read_split(tmp_path, 1, train):
                assert 0 <= entry.label < len(classes) and entry.class_name == classes[entry.label]
                assert entry.path.split("/")[0].lower() == entry.class_name.lower() and not entry.path.endswith("/")
    except SplitFileError as err:
        event("refused: " + re.sub(r"'[^']*'|[0-9]+", "_", str(err).split(": ", 1)[-1])[:40])  # the kind of defect
        return
    event("read")


def test_split_file_errors_name_the_line(tmp_path):
    files = {f: t.encode() for f, t in seeds().items()}
    files["classInd.txt"] = files["classInd.txt"].replace(b"1 ", b"\xb2 ", 1)  # a non-UTF-8 byte
    _write(tmp_path, files)
    with pytest.raises(SplitFileError, match=r"classInd.txt is not UTF-8 text \(byte 0"):
        read_class_index(tmp_path)
    files["classInd.txt"] = "²".encode() + seeds()["classInd.txt"].encode()[1:]  # isdigit() but not int()
    _write(tmp_path, files)
    with pytest.raises(SplitFileError, match=r"classInd.txt:1: expected '<label> <ClassName>'"):
        read_class_index(tmp_path)
