"""datasets.fetch against a local HTTP server: verified download into the zoo cache, mismatch rejected."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading

import numpy as np
import pytest

from zoo.hyperspectral import datasets
from zoo.hyperspectral.datasets import DataFile, DatasetInfo


@pytest.fixture()
def server(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fetch_verifies_and_caches(server, monkeypatch, tmp_path):
    root, url = server
    cube = np.arange(4 * 5 * 6, dtype=np.uint16).reshape(4, 5, 6)
    gt = (np.arange(20).reshape(4, 5) % 3).astype(np.uint8)
    np.save(root / "cube.npy", cube)
    np.save(root / "gt.npy", gt)
    info = DatasetInfo("toy", (DataFile("cube.npy", f"{url}/cube.npy", _sha(root / "cube.npy"), "cube"),
                               DataFile("gt.npy", f"{url}/gt.npy", _sha(root / "gt.npy"), "gt")),
                       license="test", citation="test")
    monkeypatch.setitem(datasets.DATASETS, "toy", info)
    folder = datasets.fetch("toy", progress=False)
    assert folder == datasets.dataset_root() / "toy"
    scene = datasets.load_dataset("toy")
    np.testing.assert_array_equal(scene.cube, cube)
    np.testing.assert_array_equal(scene.labels, gt)
    # cached: a second fetch does not need the server
    (root / "cube.npy").unlink()
    assert datasets.fetch("toy", progress=False) == folder


def test_fetch_rejects_hash_mismatch_and_unpinned(server, monkeypatch):
    from zoo.hub import HashMismatchError

    root, url = server
    (root / "a.bin").write_bytes(b"tampered bytes")
    info = DatasetInfo("bad", (DataFile("a.bin", f"{url}/a.bin", "0" * 64, "cube"),), license="", citation="")
    monkeypatch.setitem(datasets.DATASETS, "bad", info)
    with pytest.raises(HashMismatchError):
        datasets.fetch("bad", progress=False)
    assert not (datasets.dataset_root() / "bad" / "a.bin").exists()
    unpinned = DatasetInfo("free", (DataFile("a.bin", f"{url}/a.bin", None, "cube"),), license="", citation="")
    monkeypatch.setitem(datasets.DATASETS, "free", unpinned)
    with pytest.raises(ValueError, match="allow_unverified"):
        datasets.fetch("free", progress=False)
    path = datasets.fetch("free", progress=False, allow_unverified=True) / "a.bin"
    assert path.read_bytes() == b"tampered bytes"
    # offline: a clear error naming the missing file and how to get it
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="ZOO_OFFLINE"):
        datasets.fetch("bad", progress=False)
    with pytest.raises(KeyError, match="unknown data set"):
        datasets.fetch("nope")


def test_indian_pines_pins_match_shared_copy(shared_data):
    sums = dict(reversed(line.split()) for line in (shared_data / "hyperspectral" / "SHA256SUMS").read_text().splitlines())
    for f in datasets.DATASETS["indian_pines"].files:
        assert sums["indian_pines/" + f.filename] == f.sha256
    scene = datasets.load_dataset("indian_pines")
    assert scene.shape == (145, 145, 200) and "train_mask" in scene.metadata


def test_a_data_set_that_cannot_be_fetched_names_the_data_mirror_variable(server, monkeypatch, tmp_path):
    """The error said 'set ZOO_WEIGHTS_URL to a mirror', which data sets do not read; following it failed
    again, claiming that mirror had been tried. ZOO_DATA_URL, the one they read, works."""
    from zoo.hub import DownloadError

    _root, url = server
    info = DatasetInfo("gone", (DataFile("a.bin", f"{url}/missing/a.bin", _sha_bytes(b"scene"), "cube"),),
                       license="", citation="")
    monkeypatch.setitem(datasets.DATASETS, "gone", info)
    monkeypatch.delenv("ZOO_WEIGHTS_URL", raising=False)
    monkeypatch.delenv("ZOO_DATA_URL", raising=False)
    with pytest.raises(DownloadError, match="set ZOO_DATA_URL to a mirror") as err:
        datasets.fetch("gone", progress=False)
    assert "ZOO_WEIGHTS_URL" not in str(err.value)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    monkeypatch.setenv("ZOO_DATA_URL", str(mirror))
    with pytest.raises(DownloadError, match=f"The mirror ZOO_DATA_URL={mirror} does not have it: add the file there"):
        datasets.fetch("gone", progress=False)
    (mirror / "a.bin").write_bytes(b"scene")
    assert (datasets.fetch("gone", progress=False) / "a.bin").read_bytes() == b"scene"


def _sha_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_cached_file_that_changed_is_fetched_again_with_a_warning(server, monkeypatch):
    """``zoo hsi-fetch NAME`` said OK for a cached file that no longer had its pinned sha256 (bit rot): the fetch
    took any file already there as done, and only the load refused it."""
    root, url = server
    (root / "a.bin").write_bytes(b"scene")
    info = DatasetInfo("rot", (DataFile("a.bin", f"{url}/a.bin", _sha_bytes(b"scene"), "cube"),), license="",
                       citation="")
    monkeypatch.setitem(datasets.DATASETS, "rot", info)
    path = datasets.fetch("rot", progress=False) / "a.bin"
    for marker in (True, False):  # checked against its marker, or its pin when it has none (placed by hand)
        if not marker:
            path.with_name("a.bin.verified").unlink()
        path.write_bytes(b"scenf")
        with pytest.warns(UserWarning, match=r"a.bin changed on disk after it was verified .*; fetched it again"):
            datasets.fetch("rot", progress=False)
        assert path.read_bytes() == b"scene"
    path.write_bytes(b"scenf")
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=r"a.bin changed on disk after it was verified .*`zoo hsi-fetch rot`"):
        datasets.fetch("rot", progress=False)


def test_cache_info_and_clean_cover_the_data_sets_fetched(server, monkeypatch, capsys):
    """``zoo cache info|clean`` never saw $ZOO_HOME/datasets, where ``zoo hsi-fetch`` downloads "into the zoo
    cache"; only what a fetch put there is zoo's (its marker, a partial download's resume record)."""
    import json

    from zoo import hub
    from zoo.cli import main

    root, url = server
    (root / "a.bin").write_bytes(b"scene")
    info = DatasetInfo("toy", (DataFile("a.bin", f"{url}/a.bin", _sha_bytes(b"scene"), "cube"),), license="",
                       citation="")
    monkeypatch.setitem(datasets.DATASETS, "toy", info)
    folder = datasets.fetch("toy", progress=False)
    part = folder / "b.bin.part"  # an interrupted download, as the hub's fetch leaves it
    part.write_bytes(b"x" * 10)
    folder.joinpath("b.bin.resume").write_text(json.dumps({"url": f"{url}/b.bin", "validator": None, "total": 20}))
    mine = [datasets.dataset_root() / "notes.txt", folder / "mine.txt", folder / "c.bin.part"]
    for p in mine:
        p.write_text("mine")
    assert {i.path: (i.kind, i.name) for i in hub.cache_info()} == {folder / "a.bin": ("dataset", "toy"),
                                                                   part: ("partial", "-")}
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"and {datasets.dataset_root()}")
    assert hub.clean_cache(stale_only=True) == (1, 10) and not part.exists() and (folder / "a.bin").is_file()
    assert main(["cache", "clean"]) == 0
    assert "removed 1 item(s)" in capsys.readouterr().out
    assert sorted(p.name for p in folder.iterdir()) == ["c.bin.part", "mine.txt"]
    assert all(p.read_text() == "mine" for p in mine)


def test_a_missing_data_set_says_whether_zoo_shared_data_named_the_folder_it_looked_in(monkeypatch, tmp_path):
    """The folder it looked in was always labelled "(ZOO_SHARED_DATA)", also when the variable was unset and the
    folder was ../shared/data: read as if a setting had pointed there."""
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ZOO_SHARED_DATA", raising=False)
    monkeypatch.setattr(datasets, "local_dataset_dir", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"indian_pines \(set ZOO_SHARED_DATA to look elsewhere\)"):
        datasets.load_dataset("indian_pines")
    monkeypatch.setenv("ZOO_SHARED_DATA", str(tmp_path / "data"))
    with pytest.raises(FileNotFoundError, match=r"indian_pines \(from ZOO_SHARED_DATA\)"):
        datasets.load_dataset("indian_pines")
