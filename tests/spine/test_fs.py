"""zoo/fs.py, the one writer every module uses: atomic, never through a planted link, the user's umask,
free space checked, ENOSPC named, orphans swept, one run per folder."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from zoo import fs


@pytest.fixture
def umask():
    """Set the process umask for one test (restored after)."""
    saved = []

    def set_(mask: int) -> None:
        saved.append(os.umask(mask))

    yield set_
    for old in saved[:1]:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, want", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_files_get_the_users_umask(tmp_path, umask, mask, want):
    umask(mask)
    assert _mode(fs.write_text(tmp_path / "a.txt", "x")) == want
    with fs.atomic_path(tmp_path / "b.bin") as tmp:
        tmp.write_bytes(b"y")  # a writer that opens the path itself (matplotlib, spectral)
    assert _mode(tmp_path / "b.bin") == want


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path):
    target = fs.write_text(tmp_path / "t.txt", "old")
    with pytest.raises(RuntimeError, match="boom"), fs.atomic_write(target) as fh:
        fh.write(b"half of the new")
        raise RuntimeError("boom")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]
    with fs.atomic_write(target, text=True) as fh:
        fh.write("new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]


def test_enospc_is_named_and_leaves_nothing(tmp_path, disk_quota):
    """ENOSPC simulated by patching os.write (the OS boundary zoo writes through)."""
    disk_quota(tmp_path, 1000)
    target = fs.write_bytes(tmp_path / "keep.bin", b"k" * 100)
    # no size given: the write itself hits the wall
    with pytest.raises(fs.NoSpaceError) as err, fs.atomic_write(tmp_path / "big.bin") as fh:
        fh.write(b"x" * 5000)
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "big.bin") in msg and "free" in msg and "removed" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.bin"] and target.read_bytes() == b"k" * 100


def test_free_space_is_checked_before_the_first_byte(tmp_path, disk_quota):
    """shutil.disk_usage patched to report the quota: the write fails before any file is created."""
    disk_quota(tmp_path, 1000)
    with pytest.raises(fs.NoSpaceError) as err:
        fs.write_bytes(tmp_path / "big.bin", b"x" * 4096)
    msg = str(err.value)
    assert str(tmp_path) in msg and "4.0 KiB" in msg and "1000 B free" in msg
    assert list(tmp_path.iterdir()) == []


def test_links_are_refused_never_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "planted"
    link.symlink_to(victim)
    with pytest.raises(fs.UnsafePathError, match="symbolic link"):
        fs.open_nofollow(link, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with pytest.raises(fs.UnsafePathError) as err:
        fs.refuse_symlink(link)
    assert str(link) in str(err.value) and "\n" not in str(err.value)
    assert victim.read_text() == "precious"
    # a link of the user's own is written through, as open() writes it (one of another user's is refused:
    # test_a_link_of_another_user_is_refused_not_written_through)
    fs.write_text(link, "replaced")
    assert victim.read_text() == "replaced" and link.is_symlink()


def test_private_temp_folder_commits_in_order_and_cleans_up(tmp_path):
    staging = fs.PrivateTemp(tmp_path, "pair")
    assert _mode(staging.dir) == 0o700 and staging.dir.name.startswith(fs.TEMP_PREFIX)
    staging.path_for(tmp_path / "x.img").write_bytes(b"data")
    staging.path_for(tmp_path / "x.hdr").write_text("header")
    staging.commit(tmp_path / "x.img", tmp_path / "x.hdr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.hdr", "x.img"]
    with pytest.raises(fs.FsError, match="did not produce"), fs.atomic_path(tmp_path / "never.bin"):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.hdr", "x.img"]


@pytest.mark.parametrize("name", ["n" * 211 + ".safetensors", "模型" * 37 + ".onnx", "x" * 243 + ".safetensors"],
                         ids=["223-bytes", "234-bytes-utf8", "255-bytes"])
def test_a_name_near_the_file_systems_limit_is_written(tmp_path, name):
    """The temp name put ~33 bytes before the target's: names of 223 bytes and more, legal ones, failed
    "File name too long" (zoo.save, checkpoints, exports). The temp name keeps the suffix (a writer may pick a
    format by it) and what sweep_temps reads."""
    temp = fs._temp_name(name)
    assert len(os.fsencode(temp)) <= 255 - 9 and temp.endswith(os.path.splitext(name)[1]) and fs._TEMP_RE.match(temp)
    fs.write_bytes(tmp_path / name, b"data")  # atomic_write: a temp file beside the target
    other = "y" + name[1:]
    with fs.atomic_path(tmp_path / other) as tmp:  # atomic_paths: a staging folder named after the target
        assert tmp.name == other and fs._TEMP_RE.match(tmp.parent.name)
        tmp.write_bytes(b"y")
    assert (tmp_path / name).read_bytes() == b"data" and (tmp_path / other).read_bytes() == b"y"
    assert len(list(tmp_path.iterdir())) == 2


def test_ensure_dir_names_a_file_in_the_way(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(fs.FsError, match="exists and is not a folder"):
        fs.ensure_dir(tmp_path / "f", "checkpoint_dir")
    with pytest.raises(fs.FsError, match=rf"{re.escape(str(tmp_path / 'f'))} is a file, where a folder was expected"):
        fs.ensure_dir(tmp_path / "f" / "run", "checkpoint_dir")


def test_ensure_dir_names_a_dangling_link_and_its_missing_target(tmp_path):
    """A link to a disk that is not mounted, in the path or as the path, was "a parent is a file, not a folder"."""
    link, target = tmp_path / "runs", tmp_path / "not-mounted" / "runs"
    link.symlink_to(target)
    for path in (link / "a", link):
        with pytest.raises(fs.FsError, match=rf"checkpoint_dir {re.escape(str(path))}: {re.escape(str(link))} is a "
                                             rf"symbolic link to {re.escape(str(target))}, which does not exist "
                                             r"\(an unmounted disk\?\)"):
            fs.ensure_dir(path, "checkpoint_dir")
    assert not target.parent.exists()  # named, not made


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_orphans_of_dead_writers_only(tmp_path):
    host = fs._HOST
    dead = tmp_path / f"{fs.TEMP_PREFIX}{host}-{_dead_pid()}-0123abcd-epoch-0002.pt"
    dead.write_bytes(b"torn")
    dead_dir = tmp_path / f"{fs.TEMP_PREFIX}{host}-{_dead_pid()}-0123abcd-w.safetensors.x1"
    dead_dir.mkdir()
    (dead_dir / "w.safetensors").write_bytes(b"torn")
    live = tmp_path / f"{fs.TEMP_PREFIX}{host}-{os.getpid()}-0123abcd-live.pt"
    live.write_bytes(b"being written")
    foreign_new = tmp_path / f"{fs.TEMP_PREFIX}ffffffff-1-0123abcd-other-host.pt"
    foreign_new.write_bytes(b"maybe alive over NFS")
    foreign_old = tmp_path / f"{fs.TEMP_PREFIX}ffffffff-2-0123abcd-other-host-old.pt"
    foreign_old.write_bytes(b"a day old")
    old = time.time() - fs.FOREIGN_TEMP_AGE_S - 60
    os.utime(foreign_old, (old, old))
    user = tmp_path / ".zoo-tmp-notes.txt"  # the prefix alone is not enough: a user's file is kept
    user.write_text("mine")
    removed = fs.sweep_temps(tmp_path)
    assert sorted(removed) == sorted([dead, dead_dir, foreign_old])
    assert live.exists() and foreign_new.exists() and user.exists()


def test_a_temp_file_whose_pid_means_nothing_here_is_kept_a_day(tmp_path):
    """A writer in another PID namespace under this host's name (a container on the host's network, unshare -p)
    named its temp files as this namespace's writers do: its pid, judged dead here, had its live temp file
    deleted under it."""
    try:
        key = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c", _FS_ALONE + "print(fs._HOST)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no process can be started in a PID namespace of its own here (unshare -p)")
    temp = tmp_path / f"{fs.TEMP_PREFIX}{key}-{_dead_pid()}-0123abcd-model.safetensors"
    temp.write_bytes(b"being written")
    assert fs.sweep_temps(tmp_path) == [] and temp.exists()
    old = time.time() - fs.FOREIGN_TEMP_AGE_S - 60
    os.utime(temp, (old, old))
    assert fs.sweep_temps(tmp_path) == [temp]  # as another host's: a day later its writer is gone


def test_a_temp_file_named_before_the_namespace_was_in_the_key_is_this_hosts(tmp_path):
    """A name this host's zoo wrote before the PID namespace was part of the key is judged by its pid, as it was:
    read as another host's, it stayed a day, listed by ``zoo cache info`` as a killed writer's while ``zoo cache
    clean`` left it without a word."""
    key = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    dead = tmp_path / f"{fs.TEMP_PREFIX}{key}-{_dead_pid()}-0123abcd-model.safetensors"
    live = tmp_path / f"{fs.TEMP_PREFIX}{key}-{os.getpid()}-0123abcd-model.safetensors"
    for path in (dead, live):
        path.write_bytes(b"torn")
    assert (fs.temp_state(dead), fs.temp_state(live)) == ("stale", "live")
    assert fs.sweep_temps(tmp_path) == [dead] and live.exists()


# zoo/fs.py imports nothing of zoo: load it alone, so the child starts in milliseconds, not seconds
_FS_ALONE = textwrap.dedent(f"""
    import importlib.util, sys, time
    spec = importlib.util.spec_from_file_location("zoo_fs", {fs.__file__!r})
    fs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fs)
""")
_HOLD = _FS_ALONE + textwrap.dedent("""
    lock = fs.FolderLock(sys.argv[1], "training run").acquire()
    print("locked", flush=True)
    time.sleep(60)
""")


def test_folder_lock_names_the_holder_and_dies_with_it(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(fs.FolderLockedError) as err:
            fs.FolderLock(tmp_path, "training run").acquire()
        msg = str(err.value)
        assert f"pid {holder.pid}" in msg and "started 20" in msg and "training run" in msg and "\n" not in msg
    finally:
        holder.send_signal(signal.SIGKILL)  # no cleanup: the kernel drops the lock
        holder.wait()
    with fs.FolderLock(tmp_path, "training run") as lock:
        assert lock.holder()["pid"] == os.getpid()
        with pytest.raises(fs.FolderLockedError):  # a second run in this very process is refused too
            fs.FolderLock(tmp_path).acquire()
    assert not (tmp_path / fs.LOCK_NAME).exists()  # released: the folder is left clean


def test_own_folders_takes_one_folder_once_however_it_is_spelled(tmp_path, monkeypatch):
    """A run's checkpoint_dir and log_dir spelled as one folder two ways were locked twice, and the second
    lock failed against the first (the run's own pid named as "another training run")."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "alias").symlink_to(tmp_path / "run", target_is_directory=True)
    named = [("checkpoint_dir", tmp_path / "run"), ("log_dir", "run"), ("log_dir", tmp_path / "alias"),
             ("log_dir", None), ("log_dir", tmp_path / "logs")]
    with fs.own_folders(named, "training run") as folders:
        assert folders == [tmp_path / "logs", tmp_path / "run"]  # created; the first spelling is kept
        with pytest.raises(fs.FolderLockedError):  # still locked against anyone else
            fs.FolderLock(tmp_path / "alias").acquire()
    assert not (tmp_path / "run" / fs.LOCK_NAME).exists() and not (tmp_path / "logs" / fs.LOCK_NAME).exists()


def test_a_planted_lock_link_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / fs.LOCK_NAME).symlink_to(victim)
    with pytest.raises(fs.UnsafePathError):
        fs.FolderLock(tmp_path / "run").acquire()
    assert victim.read_text() == "precious"


def test_a_lock_in_a_read_only_folder_is_zoos_named_error(tmp_path, monkeypatch):
    """A read-only checkpoint folder (simulated at the OS boundary: root ignores permissions) fails with the
    one-line FsError naming the file, before any training starts."""
    import errno

    real_open = os.open

    def read_only(path, flags, *args, **kwargs):  # shutil.rmtree passes dir_fd= (Python 3.13)
        if str(path).startswith(str(tmp_path)) and flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(fs.FsError, match=r"cannot write .*\.zoo-lock: Read-only file system"):
        fs.FolderLock(tmp_path, "training run").acquire()


@pytest.mark.parametrize("code", ["ENOLCK", "EOPNOTSUPP", "EIO"])
def test_a_file_system_without_locks_still_runs_with_a_warning(tmp_path, monkeypatch, code):
    """NFS without its lock daemon answers flock with ENOLCK, some FUSE and network file systems with
    EOPNOTSUPP (simulated at the OS boundary): the raw OSError stopped every training run that had a
    checkpoint folder there. Such a run now goes on and says what it cannot guard; another error is zoo's
    one-line error."""
    import errno
    import fcntl

    def no_locks(fd, op):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    if code == "EIO":
        with pytest.raises(fs.FsError, match=r"cannot lock .*\.zoo-lock: Input/output error"):
            fs.FolderLock(tmp_path, "training run").acquire()
        return
    with pytest.warns(RuntimeWarning, match=r"cannot lock .*\.zoo-lock: its file system has no locks .*the training "
                                            r"run goes on, but nothing stops another process"):
        lock = fs.FolderLock(tmp_path, "training run").acquire()
    assert lock.holder()["pid"] == os.getpid()
    lock.release()
    assert not (tmp_path / fs.LOCK_NAME).exists()


def test_a_file_lock_waits_for_its_holder_then_names_it(tmp_path):
    """The one lock of downloads, folders and the amp.json record: a second taker waits ``wait`` seconds,
    then is told who holds it; the holder's release removes the file."""
    path, subject = tmp_path / "w.safetensors.lock", tmp_path / "w.safetensors"
    with fs.FileLock(path, "download", subject=subject) as held:
        assert held.locked and path.is_file()
        with pytest.raises(fs.FolderLockedError, match=rf"w.safetensors is in use by another download \(waited "
                                                       rf"0.1 s\): pid {os.getpid()} on .*Wait for it to finish"):
            fs.FileLock(path, "download", subject=subject, wait=0.1).acquire()
    assert not path.exists()
    with fs.FileLock(path) as again:  # free again, on a new file
        assert again.locked and path.is_file()
    assert not path.exists()


def test_a_waiter_on_a_lock_file_its_holder_removed_locks_the_new_one(tmp_path, monkeypatch):
    """Removing the lock file on release is safe: a waiter that opened the file before its holder removed it
    gets that lock, on a file no longer at the path; it must not count as holding the path, or the next taker
    (who creates a new file there) would hold it at the same time."""
    path = tmp_path / "x.lock"
    first = fs.FileLock(path).acquire()
    real_lock = fs._lock_fd
    tries: list[int] = []

    def holder_releases_then_lock(fd):
        if not tries:  # the waiter has opened the holder's file; the holder lets go and removes it now
            first.release()
        tries.append(fd)
        real_lock(fd)

    monkeypatch.setattr(fs, "_lock_fd", holder_releases_then_lock)
    second = fs.FileLock(path, wait=10).acquire()
    monkeypatch.setattr(fs, "_lock_fd", real_lock)
    assert len(tries) == 2 and second.locked and path.is_file()
    with pytest.raises(fs.FolderLockedError):  # held by the second, under its path
        fs.FileLock(path).acquire()
    second.release()
    assert not path.exists()


def test_a_planted_lock_file_link_is_refused_by_name(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "w.lock").symlink_to(victim)
    with pytest.raises(fs.UnsafePathError, match=r"refusing lock file .*w\.lock: it is a symbolic link"):
        fs.FileLock(tmp_path / "w.lock").acquire()
    assert victim.read_text() == "precious"


def test_a_file_size_limit_is_not_called_a_full_disk(tmp_path):
    """`ulimit -f` (EFBIG) said "no space left ... (21.3 MiB needed, 70.5 GiB free)", contradicting itself."""
    import errno

    err = fs.write_error(OSError(errno.EFBIG, "File too large"), tmp_path / "w.safetensors", 100)
    assert isinstance(err, fs.NoSpaceError) and "ulimit -f" in str(err) and "no space left" not in str(err)
    full = fs.write_error(OSError(errno.ENOSPC, "No space left"), tmp_path / "w.safetensors", 100)
    assert "no space left writing" in str(full)


def _linked(tmp_path):
    """``proj/model.safetensors`` a link (the user's own) to ``big/model.safetensors``, holding b"OLD"."""
    (tmp_path / "big").mkdir()
    (tmp_path / "proj").mkdir()
    (tmp_path / "big" / "model.safetensors").write_bytes(b"OLD")
    link = tmp_path / "proj" / "model.safetensors"
    link.symlink_to(tmp_path / "big" / "model.safetensors")
    return link


@pytest.mark.parametrize("writer", ["atomic_write", "atomic_path", "zoo.save"])
def test_a_link_of_the_users_own_is_written_through_as_open_writes_it(tmp_path, writer):
    """Before: os.replace swapped the link for a copy: the linked file (on the bigger disk) stayed old."""
    import torch

    import zoo

    link = _linked(tmp_path)
    if writer == "atomic_write":
        with fs.atomic_write(link) as fh:
            fh.write(b"NEW")
    elif writer == "atomic_path":
        with fs.atomic_path(link) as tmp:
            tmp.write_bytes(b"NEW")
    else:
        zoo.save(torch.nn.Linear(2, 2), link)
    assert link.is_symlink()
    assert (tmp_path / "big" / "model.safetensors").read_bytes() != b"OLD"
    assert not [p for p in (tmp_path / "proj").iterdir() if p != link]


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give a link another owner")
def test_a_link_of_another_user_is_refused_not_written_through(tmp_path):
    link = _linked(tmp_path)
    os.lchown(link, 12345, -1)
    with pytest.raises(fs.UnsafePathError, match=r"symbolic link .* of another user \(uid 12345\)"), \
            fs.atomic_write(link) as fh:
        fh.write(b"NEW")
    assert (tmp_path / "big" / "model.safetensors").read_bytes() == b"OLD" and link.is_symlink()


def test_a_file_written_again_keeps_its_mode(tmp_path):
    """Before: a chmod 600 file came back 0644 (the umask's), readable by everyone; open() keeps the mode."""
    target = tmp_path / "private.bin"
    target.write_bytes(b"OLD")
    target.chmod(0o600)
    with fs.atomic_write(target) as fh:
        fh.write(b"NEW")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with fs.atomic_path(target) as tmp:
        tmp.write_bytes(b"NEWER")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_bytes() == b"NEWER"


def test_a_pair_whose_second_target_is_a_folder_replaces_neither_and_names_it(tmp_path):
    """Before: the data file was replaced, then the header's rename failed, in an error naming the data file."""
    (tmp_path / "scene.img").write_bytes(b"OLD")
    (tmp_path / "scene.hdr").mkdir()
    with pytest.raises(fs.FsError, match=r"cannot write .*scene\.hdr: a folder of that name is in the way"), \
            fs.atomic_paths(tmp_path / "scene.img", tmp_path / "scene.hdr") as (img, hdr):
        img.write_bytes(b"NEW")
        hdr.write_text("ENVI")
    assert (tmp_path / "scene.img").read_bytes() == b"OLD"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scene.hdr", "scene.img"]




_OVERWRITE = _FS_ALONE + textwrap.dedent("""
    def by_path(path):
        with fs.atomic_path(path) as tmp:
            tmp.write_bytes(b"NEW")

    for write in (lambda path: fs.write_bytes(path, b"NEW"), by_path):
        try:
            write(sys.argv[1])
            print("replaced")
        except fs.FsError as err:
            print(err)
""")


def test_a_write_protected_file_is_refused_as_open_refuses_it(tmp_path, as_a_user):
    """Before: os.replace asks the folder only, so an atomic write replaced a file the user had chmod 444'd (and
    left the new one read-only), where open() and torch.save refuse it."""
    target = tmp_path / "good.safetensors"
    target.write_bytes(b"OLD")
    target.chmod(0o444)
    said = subprocess.run([*as_a_user, sys.executable, "-c", _OVERWRITE, str(target)], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    assert len(said) == 2 and all(line.startswith(f"cannot write {target}: it is write-protected (-r--r--r--)")
                                  for line in said), said
    assert target.read_bytes() == b"OLD" and [p.name for p in tmp_path.iterdir()] == [target.name]


_SWEEP = _FS_ALONE + textwrap.dedent("""
    try:
        print(fs.sweep_temps(sys.argv[1]))
    except OSError as err:
        print(type(err).__name__, err)
""")


def test_a_killed_writers_temp_file_this_user_may_not_remove_is_left_without_an_error(tmp_path, as_a_user):
    """Before: sweeping a folder read-only to this user (a team's weights cache, filled by its owner, one of whose
    writers was killed) raised the raw ``PermissionError`` of the temp file's unlink, and with it the pull of a
    cached, verified file, or the save beside it, that swept the folder first. Sweeping is housekeeping: what may
    not be removed stays, unlisted."""
    orphan = tmp_path / f"{fs.TEMP_PREFIX}{fs._HOST}-{_dead_pid()}-0123abcd-model.safetensors"
    orphan.write_bytes(b"torn")
    tmp_path.chmod(0o555)
    try:
        said = subprocess.run([*as_a_user, sys.executable, "-c", _SWEEP, str(tmp_path)], capture_output=True,
                              text=True, check=True).stdout.strip()
    finally:
        tmp_path.chmod(0o755)
    assert said == "[]" and orphan.exists()
    assert fs.sweep_temps(tmp_path) == [orphan]  # where it may be removed, it is


def test_a_pair_whose_header_links_to_another_file_system_is_written_whole(tmp_path):
    """A link of the user's own is written where it points, as open() writes it. Before: both files were staged
    beside the first target, and the header's rename onto its target on another file system failed ("Invalid
    cross-device link") after the data file was replaced: a new data file under the old header."""
    import tempfile

    shm = "/dev/shm"
    if not os.path.isdir(shm) or not os.access(shm, os.W_OK) or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second writable file system (/dev/shm) beside the test's temp folder")
    there = tempfile.mkdtemp(dir=shm)
    try:
        (tmp_path / "scene.img").write_bytes(b"OLD")
        with open(os.path.join(there, "scene.hdr"), "w") as fh:
            fh.write("OLD")
        (tmp_path / "scene.hdr").symlink_to(os.path.join(there, "scene.hdr"))
        with fs.atomic_paths(tmp_path / "scene.img", tmp_path / "scene.hdr") as (img, hdr):
            img.write_bytes(b"NEW")
            hdr.write_text("NEW")
        assert (tmp_path / "scene.img").read_bytes() == b"NEW" and (tmp_path / "scene.hdr").read_text() == "NEW"
        assert (tmp_path / "scene.hdr").is_symlink()  # written through, as open() writes it
        assert sorted(os.listdir(tmp_path)) == ["scene.hdr", "scene.img"] and os.listdir(there) == ["scene.hdr"]
    finally:
        shutil.rmtree(there, ignore_errors=True)


@pytest.fixture
def read_only_mount(tmp_path):
    """A folder bind-mounted read-only (needs root's CAP_SYS_ADMIN: skipped elsewhere)."""
    src, mnt = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    mnt.mkdir()
    (src / "m.safetensors").write_bytes(b"old")
    bind = ["mount", "--bind", src, mnt]
    if shutil.which("mount") is None or subprocess.run(bind, check=False, capture_output=True).returncode:
        pytest.skip("bind mounts need root here")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", mnt], check=False, capture_output=True).returncode:
            pytest.skip("cannot remount read-only here")
        yield mnt
    finally:
        subprocess.run(["umount", mnt], check=False, capture_output=True)


def test_a_file_on_a_read_only_mount_is_said_to_be_there_not_told_to_chmod(read_only_mount):
    """An overwrite of a file on a read-only mount said "it is write-protected (-rw-r--r--) ... Make it writable
    (chmod u+w)": its mode was writable already, and chmod fails there too."""
    target = read_only_mount / "m.safetensors"
    with pytest.raises(fs.FsError, match=r"is on a file system mounted read-only; .*write elsewhere") as err:
        fs.refuse_write_protected(target)
    assert "chmod" not in str(err.value)
    assert target.read_bytes() == b"old"
