"""Shared fixtures: the real data sets beside the checkout, and a clean zoo cache per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ZOO_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need a real data set skip with a reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data sets not found at {SHARED_DATA} (set ZOO_SHARED_DATA)")
    return SHARED_DATA


def require(path: Path) -> Path:
    """Skip the calling test when ``path`` (inside the shared data) is missing."""
    if not path.exists():
        pytest.skip(f"data not found: {path}")
    return path


@pytest.fixture(autouse=True)
def _isolated_zoo_home(tmp_path_factory, monkeypatch):
    """Every test gets its own empty weights cache and no mirror, so no test sees another's downloads."""
    monkeypatch.setenv("ZOO_HOME", str(tmp_path_factory.mktemp("zoo_home")))
    monkeypatch.delenv("ZOO_WEIGHTS_URL", raising=False)
    monkeypatch.delenv("ZOO_OFFLINE", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")


class DiskQuota:
    """A folder that behaves like a small disk, simulated at the OS boundary (no root, no tmpfs):
    ``os.write`` to a file under ``folder`` fails with ENOSPC once the files there would exceed ``quota``
    bytes (writing what still fits first, as a real disk does), and ``shutil.disk_usage`` reports the
    bytes left. zoo's writers go through ``os.write`` (zoo/fs.py), so this is the disk they see."""

    def __init__(self, folder: Path, quota: int) -> None:
        self.folder, self.quota = Path(folder).resolve(), quota

    def used(self) -> int:
        return sum(p.lstat().st_size for p in self.folder.rglob("*") if p.is_file() and not p.is_symlink())

    def free(self) -> int:
        return max(0, self.quota - self.used())

    def owns_fd(self, fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(str(self.folder) + os.sep)
        except OSError:
            return False


@pytest.fixture
def disk_quota(monkeypatch):
    """``disk_quota(folder, quota_bytes)`` -> :class:`DiskQuota`; see there. Linux only (/proc/self/fd)."""
    import errno
    import shutil
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("the disk quota simulation reads /proc/self/fd")
    quotas: list[DiskQuota] = []
    real_write, real_usage = os.write, shutil.disk_usage

    def write(fd, data):
        for q in quotas:
            if q.owns_fd(fd):
                room = q.free()
                if len(data) > room:
                    if room:
                        real_write(fd, bytes(memoryview(data)[:room]))
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    def disk_usage(path):
        resolved = str(Path(path).resolve())
        for q in quotas:
            if resolved == str(q.folder) or resolved.startswith(str(q.folder) + os.sep):
                return shutil._ntuple_diskusage(q.quota, q.used(), q.free())
        return real_usage(path)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(shutil, "disk_usage", disk_usage)

    def install(folder, quota: int) -> DiskQuota:
        Path(folder).mkdir(parents=True, exist_ok=True)
        quotas.append(DiskQuota(Path(folder), quota))
        return quotas[-1]

    return install
