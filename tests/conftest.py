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
