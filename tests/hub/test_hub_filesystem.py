"""The weights cache against a hostile or full filesystem (issue #20): planted links, a full disk during a
pull, stale partial downloads of other files, orphaned temp files, and `zoo cache info|clean`.

A full disk is simulated at the OS boundary by the ``disk_quota`` fixture (tests/conftest.py): ``os.write``
to files under the cache fails with ENOSPC past a byte budget, and ``shutil.disk_usage`` reports it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import zoo
from zoo import fs, hub
from zoo.cli import main


def _publish(tiny_model: str, tag: str, num_classes: int = 3):
    torch.manual_seed(0)
    return hub.add_weights(zoo.build(tiny_model, num_classes=num_classes), name=f"{tiny_model}.{tag}",
                           config={"num_classes": num_classes}, meta={"dataset": "synthetic"})


def _serve(entry, weights_home, server, monkeypatch) -> None:
    """The file is only on the HTTP mirror now."""
    shutil.move(weights_home / entry.url, server.state.root / entry.url)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_planted_part_link_is_refused_and_the_victim_untouched(tiny_model, weights_home, server, monkeypatch,
                                                               tmp_path):
    entry = _publish(tiny_model, "v1")
    _serve(entry, weights_home, server, monkeypatch)
    victim = tmp_path / "victim.txt"
    victim.write_text("another user's file")
    dest = hub.cached_path(entry)
    dest.parent.mkdir(parents=True)
    part = dest.with_name(dest.name + ".part")
    part.symlink_to(victim)
    with pytest.raises(fs.UnsafePathError) as err:
        zoo.pull(entry.name, progress=False)
    assert str(part) in str(err.value) and "\n" not in str(err.value)
    assert victim.read_text() == "another user's file" and not dest.exists()
    assert server.state.requests == []  # refused before anything was downloaded


def test_planted_lock_link_is_a_one_line_error(tiny_model, weights_home, server, monkeypatch, tmp_path, capsys):
    entry = _publish(tiny_model, "v1")
    _serve(entry, weights_home, server, monkeypatch)
    dest = hub.cached_path(entry)
    dest.parent.mkdir(parents=True)
    lock = dest.with_name(dest.name + ".lock")
    lock.symlink_to(tmp_path / "elsewhere.lock")
    with pytest.raises(fs.UnsafePathError, match="lock file"):
        zoo.pull(entry.name, progress=False)
    assert main(["pull", entry.name, "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(lock) in err[0] and "Traceback" not in err[0]


def test_cache_entry_that_is_a_link_is_refused(tiny_model, weights_home, tmp_path):
    entry = _publish(tiny_model, "v1")
    dest = hub.cached_path(entry)
    dest.parent.mkdir(parents=True)
    fake = tmp_path / "fake.safetensors"
    shutil.copy(weights_home / entry.url, fake)  # even the right bytes: the link itself is the problem
    dest.symlink_to(fake)
    with pytest.raises(fs.UnsafePathError) as err:
        zoo.build(tiny_model, weights="v1")
    assert str(dest) in str(err.value) and "symbolic link" in str(err.value)


def test_a_cache_folder_that_is_a_link_is_refused_and_the_root_may_be_one(tiny_model, weights_home, tmp_path,
                                                                         monkeypatch):
    """A linked <sha256>/ folder was followed: the file, its lock and its verified marker went outside the cache.
    A ZOO_HOME that is itself a link (a cache on another disk) stays fine."""
    entry = _publish(tiny_model, "v1")
    dest = hub.cached_path(entry)
    dest.parent.parent.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    dest.parent.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(fs.UnsafePathError, match=rf"cache folder {dest.parent}: it is a symbolic link"):
        zoo.pull(entry.name, progress=False)
    with pytest.raises(fs.UnsafePathError, match="cache folder"):  # a path to a file in it is matched to its entry
        zoo.build(tiny_model, weights="v1")
    assert list((tmp_path / "elsewhere").iterdir()) == []
    (tmp_path / "disk").mkdir()
    (tmp_path / "linked_home").symlink_to(tmp_path / "disk")
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "linked_home"))
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256


def test_a_cache_that_cannot_be_made_says_to_set_zoo_home(tiny_model, weights_home, tmp_path, monkeypatch):
    """A container's read-only or missing home: the error names the folder and how to move the cache."""
    entry = _publish(tiny_model, "v1")
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "file" / "home"))  # no folder can be made under a file
    with pytest.raises(fs.FsError, match=r"cannot create folder .*set ZOO_HOME to a folder you can write"):
        zoo.build(tiny_model, weights="v1")
    with pytest.raises(fs.FsError, match=r"cannot create folder .*; pass a cache_dir you can write$"):
        zoo.pull(entry.name, cache_dir=tmp_path / "file" / "cache", progress=False)


def test_full_disk_is_refused_before_the_download(tiny_model, weights_home, server, monkeypatch, disk_quota):
    entry = _publish(tiny_model, "big", num_classes=3000)
    _serve(entry, weights_home, server, monkeypatch)
    disk_quota(hub.cache_root(), entry.size // 2)
    with pytest.raises(fs.NoSpaceError) as err:
        zoo.pull(entry.name, progress=False)
    msg = str(err.value)
    assert str(hub.cached_path(entry).parent) in msg and fs.human_size(entry.size) in msg
    # the free space is read while the pull holds its lock, whose file (in the quota's folder) names the holder
    free = {fs.human_size(entry.size // 2 - n) + " free" for n in range(1024)}
    assert any(f in msg for f in free)
    assert server.state.requests == []


def test_disk_filling_during_a_pull_removes_the_part_and_the_next_pull_works(
        tiny_model, weights_home, server, monkeypatch, disk_quota):
    big = _publish(tiny_model, "big", num_classes=3000)  # ~100 KB
    small = _publish(tiny_model, "small")  # ~2 KB
    for e in (big, small):
        _serve(e, weights_home, server, monkeypatch)
    disk_quota(hub.cache_root(), big.size // 2)
    # the free-space check passed, then another process filled the disk: the write itself meets ENOSPC
    monkeypatch.setattr(hub.fetch, "_ensure_space", lambda *a, **k: None)
    monkeypatch.setattr(fs, "check_free", lambda *a, **k: None)
    with pytest.raises(fs.NoSpaceError) as err:
        zoo.pull(big.name, progress=False)
    part = hub.cached_path(big).with_name(big.filename + ".part")
    assert str(part) in str(err.value) and "\n" not in str(err.value)
    assert not part.exists() and not hub.cached_path(big).exists()
    assert hub.sha256_file(zoo.pull(small.name, progress=False)) == small.sha256  # not blocked by the first


def test_stale_part_of_another_file_never_blocks_a_pull(tiny_model, weights_home, server, monkeypatch,
                                                        disk_quota):
    big = _publish(tiny_model, "big", num_classes=3000)
    small = _publish(tiny_model, "small")
    for e in (big, small):
        _serve(e, weights_home, server, monkeypatch)
    stale = hub.cached_path(big).with_name(big.filename + ".part")
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"\0" * (big.size - 100))  # an interrupted download nobody is resuming
    # the user's own .part files in the folder (it may be any folder: --cache-dir): no pull put them there
    mine = [hub.cache_root() / "notes.part", hub.cache_root() / "20240131" / "report-20240131.txt.part"]
    for path in mine:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"draft")
    disk_quota(hub.cache_root(), big.size)  # the stale part leaves less room than the small file needs
    assert hub.sha256_file(zoo.pull(small.name, progress=False)) == small.sha256
    assert not stale.exists()
    assert all(path.read_bytes() == b"draft" for path in mine)  # before: deleted with the stale one


def test_orphaned_temp_files_are_swept_at_the_next_pull(tiny_model, weights_home):
    entry = _publish(tiny_model, "v1")
    folder = hub.cached_path(entry).parent
    folder.mkdir(parents=True)
    orphan = folder / f"{fs.TEMP_PREFIX}{fs._HOST}-{_dead_pid()}-0123abcd-{entry.filename}.verified"
    orphan.write_text("torn")
    zoo.pull(entry.name, progress=False)
    assert not orphan.exists()


_DIE_IN_SAVE = textwrap.dedent("""
    import os, sys, torch
    from zoo import hub
    real = os.write
    def dying(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(sys.argv[1]):
            real(fd, bytes(data[:64]))
            os._exit(9)
        return real(fd, data)
    os.write = dying
    hub.save_weights({"w": torch.zeros(10000)}, os.path.join(sys.argv[1], "w.safetensors"))
""")


def test_kill_during_save_weights_leaves_an_orphan_the_next_publish_sweeps(tiny_model, weights_home):
    proc = subprocess.run([sys.executable, "-c", _DIE_IN_SAVE, str(weights_home)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"}, check=False)
    assert proc.returncode == 9, proc.stderr
    orphans = [p for p in weights_home.iterdir() if p.name.startswith(fs.TEMP_PREFIX)]
    assert len(orphans) == 1 and not (weights_home / "w.safetensors").exists()
    _publish(tiny_model, "v1")
    assert not orphans[0].exists()


def test_cache_info_and_clean(tiny_model, weights_home, capsys):
    entry = _publish(tiny_model, "v1")
    path = zoo.pull(entry.name, progress=False)
    part = path.with_name(path.name + ".part")  # a pull --force that was interrupted
    part.write_bytes(b"x" * 10)
    orphan = path.parent / f"{fs.TEMP_PREFIX}{fs._HOST}-{_dead_pid()}-0123abcd-x.pt"
    orphan.write_bytes(b"y" * 20)
    kinds = {i.path: (i.kind, i.name, i.status) for i in hub.cache_info()}
    assert kinds[path] == ("weights", entry.name, "verified")
    assert kinds[part][0] == "partial" and kinds[orphan][0] == "temp"
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert entry.name in out and "partial" in out and "3 item(s)" in out
    assert main(["cache", "clean", "--stale"]) == 0
    assert path.exists() and not part.exists() and not orphan.exists()
    assert main(["cache", "clean"]) == 0
    assert "removed 1 item(s)" in capsys.readouterr().out.splitlines()[-1]
    assert not path.exists() and hub.cache_info() == []


def test_cache_clean_on_a_folder_that_is_not_a_cache_deletes_nothing_of_its_own(tiny_model, weights_home, tmp_path):
    """``--cache-dir`` may name any folder: only files where a pull puts them are zoo's to list and delete."""
    entry = _publish(tiny_model, "v1")
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    (folder / "src" / "main.py").write_text("print('mine')")
    (folder / "deadbeef00" / "x").mkdir(parents=True)  # a hex-named folder, but one level too deep
    (folder / "deadbeef00" / "x" / "data.bin").write_bytes(b"z")
    path = zoo.pull(entry.name, cache_dir=folder, progress=False)
    assert {i.path for i in hub.cache_info(folder)} == {path}
    assert main(["cache", "clean", "--cache-dir", str(folder)]) == 0
    assert not path.exists()
    assert (folder / "notes.txt").read_text() == "mine" and (folder / "src" / "main.py").exists()
    assert (folder / "deadbeef00" / "x" / "data.bin").exists()


def test_cache_clean_leaves_a_dated_folder_that_only_looks_like_a_hash(tiny_model, weights_home, tmp_path):
    """A folder named with 8 or more hex digits was taken for a content key: ``20240131/report.txt`` in a folder
    given as ``--cache-dir`` was listed as weights and deleted; then one whose files carry the hex in their names
    (``20240131/report-20240131.txt``), or any file in a 64-digit one. A name proves nothing: only zoo's evidence
    (a manifest entry's file, zoo's ``.verified`` marker) does."""
    entry = _publish(tiny_model, "v1")
    folder = tmp_path / "project"
    mine = ("20240131/report.txt", "deadbeef/notes.md", f"{'1' * 64}/model.bin", "f37072fd/resnet18-f37072fd.pth")
    for rel in mine:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("mine")
    path = zoo.pull(entry.name, cache_dir=folder, progress=False)
    assert {i.path for i in hub.cache_info(folder)} == {path}
    assert main(["cache", "clean", "--cache-dir", str(folder)]) == 0
    assert not path.exists() and all((folder / rel).read_text() == "mine" for rel in mine)


def test_a_pull_leaves_no_lock_file_behind(tiny_model, weights_home, server, monkeypatch):
    """Each pull left its ``<file>.lock`` in the cache for good, one per file ever pulled."""
    local = _publish(tiny_model, "local")
    served = _publish(tiny_model, "served", num_classes=4)
    _serve(served, weights_home, server, monkeypatch)
    for entry in (local, served):
        assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256
    assert main(["pull", local.name, "-q", "--force"]) == 0
    assert sorted(p.name for p in hub.cache_root().rglob("*.lock")) == []


def test_a_pull_that_waits_too_long_names_the_download_it_waited_for(tiny_model, weights_home, monkeypatch):
    """A pull gave up after LOCK_TIMEOUT_S with "cannot lock ...: The file lock ... could not be acquired",
    naming neither the file nor who held it."""
    entry = _publish(tiny_model, "v1")
    dest = hub.cached_path(entry)
    monkeypatch.setattr(hub.fetch, "LOCK_TIMEOUT_S", 0.1)
    busy = rf"{dest} is in use by another download \(waited 0.1 s\): pid {os.getpid()} on "
    with fs.FolderLock(dest.parent, "download", name=dest.name + ".lock"), \
            pytest.raises(fs.FolderLockedError, match=busy):  # another pull of the file holds its lock
        zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256


@pytest.mark.parametrize("code", ["ENOLCK", "ENOSYS"])
def test_the_cache_on_a_file_system_without_locks(tiny_model, weights_home, monkeypatch, code):
    """NFS without its lock daemon (ENOLCK), some FUSE file systems (ENOSYS): a pull failed with "cannot
    lock" (or a traceback), `zoo cache clean` with "needs a cache it can write". A pull now goes on with a
    warning, clean cleans, but a stale-looking .part is never reclaimed: it may be a live download's."""
    import errno
    import fcntl

    entry = _publish(tiny_model, "v1")

    def no_locks(fd, op):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.warns(RuntimeWarning, match=r"its file system has no locks .*the download goes on"):
        path = zoo.pull(entry.name, progress=False)
    part = path.with_name(path.name + ".part")
    part.write_bytes(b"x" * 10)
    assert hub.fetch.reclaim_stale_parts(hub.cache_root(), keep=path) == 0 and part.is_file()
    assert hub.clean_cache() == (2, entry.size + 10)
    assert not path.exists() and not part.exists()


def test_cache_clean_removes_free_lock_files_and_keeps_held_ones(tiny_model, weights_home, tmp_path):
    """The lock files earlier pulls left (one per file pulled) stayed through `zoo cache clean`; one whose
    download is in progress must stay, and a .lock that is not where a pull locks, or carries no evidence of zoo
    (beside none of its files, recording no download), is not zoo's."""
    import json

    entry = _publish(tiny_model, "v1")
    path = zoo.pull(entry.name, progress=False)
    root = hub.cache_root()
    left = [path.with_name(path.name + ".lock"), root / "urls" / "0123456789abcdef" / "gone.bin.lock"]
    for lock in left:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text("")
    # the second as a killed pull leaves it: the holder's record, which FileLock writes
    left[1].write_text(json.dumps({"pid": _dead_pid(), "host": "h", "started": 0.0, "command": "zoo pull"}))
    (root / "notes.lock").write_text("mine")
    (root / "urls" / "fedcba9876543210").mkdir()
    (root / "urls" / "fedcba9876543210" / "mine.lock").write_text("")
    busy = path.with_name("busy.safetensors")
    with fs.FolderLock(busy.parent, "download", name=busy.name + ".lock"):  # a download in progress
        assert hub.clean_cache(stale_only=True) == (0, 0)
        assert busy.with_name(busy.name + ".lock").is_file()
    assert not any(lock.exists() for lock in left) and path.is_file()
    assert (root / "notes.lock").read_text() == "mine"
    assert (root / "urls" / "fedcba9876543210" / "mine.lock").is_file()


def test_shared_data_root_follows_the_working_directory_then_the_checkout(tmp_path, monkeypatch):
    """An installed zoo has no checkout beside it: `../shared/data` means what the README's relative
    paths mean, from the working directory; ZOO_SHARED_DATA overrides both."""
    monkeypatch.delenv("ZOO_SHARED_DATA", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert hub.shared_data_root() == tmp_path / "shared" / "data"
    monkeypatch.setenv("ZOO_SHARED_DATA", str(tmp_path / "elsewhere"))
    assert hub.shared_data_root() == tmp_path / "elsewhere"


def test_a_relative_zoo_home_gives_absolute_paths_that_survive_a_chdir(tiny_model, weights_home, tmp_path,
                                                                       monkeypatch):
    """ZOO_HOME=cache (relative): pull returned cache/weights/..., a path that named another file, or none, once
    the script changed its working directory."""
    from zoo.hub.store import zoo_home

    entry = _publish(tiny_model, "v1")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("ZOO_HOME", "cache")
    assert zoo_home() == tmp_path / "work" / "cache"
    path = zoo.pull(entry.name, progress=False)
    assert path.is_absolute() and path.is_relative_to(tmp_path / "work" / "cache")
    monkeypatch.chdir(tmp_path)
    assert path.is_file()


def test_the_default_cache_follows_xdg_cache_home_as_torch_hub_and_huggingface_hub_do(tiny_model, weights_home,
                                                                                      tmp_path, monkeypatch, capsys):
    """Before: with ZOO_HOME unset, zoo's cache was ~/.cache/zoo whatever XDG_CACHE_HOME said, while torch.hub and
    huggingface_hub put theirs under it: a user who moved the caches off a small home filled it with zoo's."""
    from zoo.hub.store import zoo_home

    entry = _publish(tiny_model, "v1")
    monkeypatch.delenv("ZOO_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert zoo_home() == tmp_path / "home" / ".cache" / "zoo"  # unset: as before
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert zoo_home() == tmp_path / "xdg" / "zoo"
    path = zoo.pull(entry.name, progress=False)
    assert path.is_relative_to(tmp_path / "xdg" / "zoo" / "weights") and path.is_file()
    assert main(["cache", "info"]) == 0
    assert f"in {tmp_path / 'xdg' / 'zoo' / 'weights'}" in capsys.readouterr().out
    assert not (tmp_path / "home").exists()
    monkeypatch.setenv("ZOO_HOME", str(tmp_path / "zoo-home"))  # still wins
    assert hub.cache_root() == tmp_path / "zoo-home" / "weights"


def test_a_path_object_written_with_a_tilde_is_the_home_folder(tiny_model, weights_home, tmp_path, monkeypatch):
    """weights="~/a.safetensors" was the home folder's file, weights=Path("~/a.safetensors") "not found"."""
    from pathlib import Path

    monkeypatch.setenv("HOME", str(tmp_path))
    torch.manual_seed(0)
    zoo.save(zoo.build(tiny_model, num_classes=3), tmp_path / "a.safetensors")
    as_str = zoo.build(tiny_model, weights="~/a.safetensors")
    as_path = zoo.build(tiny_model, weights=Path("~/a.safetensors"))
    assert all(torch.equal(a, b) for a, b in zip(as_str.state_dict().values(), as_path.state_dict().values()))


@pytest.mark.parametrize("fails", ["write_manifest", "write_readme"])
def test_a_forced_republish_whose_manifest_write_fails_keeps_the_file_the_manifest_names(tiny_model, weights_home,
                                                                                       monkeypatch, fails):
    """Before: the new file replaced the published one, then the manifest write failed (the new file took the
    disk's last bytes): the manifest held the old hash over the new bytes, every load refused it, and the good
    file was gone."""
    import errno

    from zoo.hub import publish

    first = _publish(tiny_model, "v1")
    torch.manual_seed(1)
    other = zoo.build(tiny_model, num_classes=3)

    def full_disk(entries):
        raise fs.NoSpaceError(errno.ENOSPC, "no space left writing (simulated)")

    with monkeypatch.context() as m, pytest.raises(fs.NoSpaceError):
        m.setattr(publish, fails, full_disk)
        hub.add_weights(other, name=f"{tiny_model}.v1", config={"num_classes": 3}, force=True)
    named = hub.read_manifest()[f"{tiny_model}.v1"]
    assert hub.sha256_file(weights_home / named.url) == named.sha256  # the file and its entry agree
    # the manifest not written: the old file and entry; written (the README failed after it): the new ones
    assert (named.sha256 == first.sha256) == (fails == "write_manifest")
    zoo.build(tiny_model, weights="v1")
    assert sorted(p.name for p in weights_home.iterdir() if p.name.startswith(".")) == []
