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
