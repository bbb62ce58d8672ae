"""A cached file that changed on disk stays refused (its marker never learns the new hash), and a wrong copy
in one weights source does not hide a right one in the next."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest
import torch

import zoo
from zoo import hub
from zoo.cli import main


def _publish(tiny_model: str, tag: str = "v1"):
    torch.manual_seed(0)
    return hub.add_weights(zoo.build(tiny_model), name=f"{tiny_model}.{tag}", config={"num_classes": 3},
                           meta={"dataset": "synthetic"})


def _flip(path, offset: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 0xFF]))


def _status(path) -> str:
    return {i.path: i.status for i in hub.cache_info()}[path]


def test_a_tampered_url_download_is_refused_on_every_load(tiny_model, weights_home, server):
    torch.manual_seed(0)
    src = hub.save_weights(zoo.build(tiny_model), server.state.root / "mine.safetensors")
    url = f"{server.url}/{src.name}"
    path, entry = hub.resolve(url, model=tiny_model)
    assert entry is None and _status(path) == "unpublished"  # unchanged since arrival; no published hash
    _flip(path, path.stat().st_size // 2)
    for _ in range(3):
        with pytest.raises(hub.CorruptCacheError, match="changed on disk since they arrived"):
            hub.resolve(url, model=tiny_model)
    assert _status(path) == "unchecked"
    assert {c.path: c.status for c in hub.verify_cache()}[path] == "MISMATCH"
    assert len(server.gets(src.name)) == 1  # refused, never silently replaced


def test_a_url_download_without_its_marker_is_downloaded_again(tiny_model, weights_home, server):
    torch.manual_seed(0)
    src = hub.save_weights(zoo.build(tiny_model), server.state.root / "mine.safetensors")
    url = f"{server.url}/{src.name}"
    path, _ = hub.resolve(url)
    path.with_name(path.name + ".verified").unlink()
    _flip(path, path.stat().st_size // 2)  # nothing left to check it against: its hash must not be adopted
    assert hub.resolve(url)[0] == path and len(server.gets(src.name)) == 2
    assert hub.sha256_file(path) == hub.sha256_file(src) and _status(path) == "unpublished"


def test_a_tampered_manifest_file_is_refused_on_every_load_and_never_called_verified(tiny_model, weights_home,
                                                                                       capsys):
    entry = _publish(tiny_model)
    path = zoo.pull(entry.name, progress=False)
    assert _status(path) == "verified"
    _flip(path, entry.size - 3)
    for _ in range(3):
        with pytest.raises(hub.CorruptCacheError, match="do not match"):
            zoo.build(tiny_model, weights="v1")
        assert _status(path) == "unchecked"
    assert main(["cache", "info"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if str(path) in ln)
    assert "verified" not in line
    with pytest.warns(UserWarning, match="do not match .*fetched it again"):
        assert main(["pull", entry.name, "-q"]) == 0
    assert _status(path) == "verified"


def test_a_lfs_pointer_in_the_weights_folder_falls_through_to_the_mirror(tiny_model, weights_home, server,
                                                                         monkeypatch, cached, capsys):
    entry = _publish(tiny_model)
    shutil.copy(weights_home / entry.url, server.state.root / entry.url)
    pointer = (f"version https://git-lfs.github.com/spec/v1\noid sha256:{entry.sha256}\nsize {entry.size}\n")
    (weights_home / entry.url).write_text(pointer)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    with pytest.warns(UserWarning, match=rf"{weights_home / entry.url}.*trying the next source \({server.url}"):
        path = zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(path) == entry.sha256 and len(server.gets(entry.url)) == 1
    assert _status(path) == "verified"
    path.unlink()
    with pytest.warns(UserWarning):
        assert main(["pull", entry.name, "-q"]) == 0
    assert "sha256 ok" in capsys.readouterr().out


def test_when_every_source_is_wrong_the_error_lists_each(tiny_model, weights_home, server, monkeypatch, cached):
    entry = _publish(tiny_model)
    (server.state.root / entry.url).write_bytes(b"not the weights either")
    (weights_home / entry.url).write_text("version https://git-lfs.github.com/spec/v1\n")
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    with pytest.warns(UserWarning), pytest.raises(hub.HashMismatchError) as err:
        zoo.pull(entry.name, progress=False)
    msg = str(err.value)
    size = (weights_home / entry.url).stat().st_size
    assert f"[1] {weights_home / entry.url} is {size} bytes, the file {entry.size}: not this file" in msg  # not hashed
    assert f"[2] sha256 mismatch for {server.url}/{entry.url}" in msg
    assert hashlib.sha256(b"not the weights either").hexdigest() in msg and "git lfs pull" in msg
    assert [p for p in cached() if not p.name.endswith(".lock")] == []


def test_a_link_planted_where_a_pulled_file_goes_is_reported_and_cleaned(tiny_model, weights_home, tmp_path):
    """Pulls refused the link, but `zoo weights verify` said "0 problem(s)", `zoo cache info` listed nothing
    and `zoo cache clean` left it in place."""
    entry = _publish(tiny_model)
    path = zoo.pull(entry.name, progress=False)
    elsewhere = tmp_path / "elsewhere.safetensors"
    shutil.move(path, elsewhere)
    path.symlink_to(elsewhere)
    (item,) = [i for i in hub.cache_info() if i.path == path]
    assert item.kind == "link" and item.name == entry.name and str(elsewhere) in item.status
    (check,) = [c for c in hub.verify_cache(progress=False) if c.path == path]
    assert check.status == "LINK" and check.failed
    assert main(["weights", "verify"]) == 1
    hub.clean_cache(stale_only=True)
    assert not path.is_symlink() and elsewhere.is_file()  # the link went, never what it points to
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256


def test_clean_of_a_cache_it_cannot_write_says_so(tiny_model, weights_home):
    """A read-only cache printed "[Errno 30] Read-only file system: '...safetensors.lock'"; here the lock's
    place is taken by a folder, which fails the same open."""
    entry = _publish(tiny_model)
    path = zoo.pull(entry.name, progress=False)
    lock = path.with_name(path.name + ".lock")
    lock.unlink(missing_ok=True)
    lock.mkdir()
    with pytest.raises(OSError, match=r"cannot remove .*zoo cache clean needs a cache it can write"):
        hub.clean_cache()
    assert path.is_file()


def test_a_huge_wrong_file_in_the_weights_folder_falls_through_to_the_mirror(tiny_model, weights_home, server,
                                                                             monkeypatch):
    """A wrong local copy far larger than the file failed the free-space check ("needs 1024.0 GiB ... Free some
    space") and stopped the pull before the good mirror was tried; one of normal size was copied whole first."""
    entry = _publish(tiny_model)
    shutil.copy(weights_home / entry.url, server.state.root / entry.url)
    os.truncate(weights_home / entry.url, 1 << 40)  # sparse: takes no disk
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    with pytest.warns(UserWarning, match=rf"is {1 << 40} bytes, the file {entry.size}: not this file.*trying the next"):
        path = zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(path) == entry.sha256 and len(server.gets(entry.url)) == 1


def test_a_linked_cache_folder_is_reported_and_cleaned(tiny_model, weights_home, tmp_path):
    """Pulls refuse a linked <sha256>/ folder, but cache info, weights verify and cache clean did not see it."""
    entry = _publish(tiny_model)
    folder = zoo.pull(entry.name, progress=False).parent
    shutil.move(folder, tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (item,) = [i for i in hub.cache_info() if i.path == folder]
    assert item.kind == "link"
    assert [c.status for c in hub.verify_cache(progress=False) if c.path == folder] == ["LINK"]
    hub.clean_cache()
    assert not folder.is_symlink() and (tmp_path / "elsewhere" / entry.url).is_file()  # the target is left


def test_clean_of_hub_downloads_it_cannot_remove_says_so(weights_home, monkeypatch, tmp_path):
    """cache clean counted the Hugging Face downloads as removed, and their bytes as freed, when nothing went."""
    import subprocess

    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    blob = tmp_path / "home" / "hf" / "models--org--repo" / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"x" * 1000)
    if subprocess.run(["chattr", "+i", str(blob)], capture_output=True, check=False).returncode:
        pytest.skip("chattr +i is not available here (the immutable flag stands in for a read-only mount)")
    try:
        with pytest.raises(OSError, match=r"cannot remove the Hugging Face downloads in .*Operation not permitted"):
            hub.clean_cache()
        assert blob.is_file()
    finally:
        subprocess.run(["chattr", "-i", str(blob)], check=False)


def test_a_linked_urls_folder_is_reported_and_a_linked_hub_folder_is_left_alone(tiny_model, weights_home, tmp_path,
                                                                                 monkeypatch):
    """A linked weights/urls/ (which URL pulls refuse) was not listed, verified or cleaned; a linked hf/ failed
    clean with "Cannot call rmtree on a symbolic link ... needs a cache it can write", then was emptied through
    the link: it may be the Hub cache other tools share, so clean leaves it and its target, and says so."""
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "home"))
    urls = tmp_path / "home" / "weights" / "urls"
    urls.parent.mkdir(parents=True)
    (tmp_path / "urls_elsewhere").mkdir()
    urls.symlink_to(tmp_path / "urls_elsewhere", target_is_directory=True)
    blob = tmp_path / "hf_elsewhere" / "models--org--repo" / "blobs" / "b"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"x" * 100)
    (tmp_path / "home" / "hf").symlink_to(tmp_path / "hf_elsewhere", target_is_directory=True)
    assert {i.kind for i in hub.cache_info()} == {"link", "hf"}
    assert [c.status for c in hub.verify_cache(progress=False)] == ["LINK"]
    with pytest.warns(UserWarning, match=r"hf is a symbolic link to .*hf_elsewhere: zoo cache clean leaves it"):
        assert hub.clean_cache() == (1, 0)  # the urls link
    assert not urls.is_symlink() and (tmp_path / "urls_elsewhere").is_dir()
    assert (tmp_path / "home" / "hf").is_symlink() and blob.read_bytes() == b"x" * 100
