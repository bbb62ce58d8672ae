"""The Makefile a fresh clone is set up with: every target it declares does what its name says.

`make bench` was declared phony without a rule, so it printed "Nothing to be done for 'bench'" and exited 0:
a user asking for the benchmarks got a success and nothing ran. The targets are read with `make -n` (a dry
run: nothing is installed or removed), and `make bench` runs for real with the interpreter of this session."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "Makefile"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def _phony_targets() -> list[str]:
    text = MAKEFILE.read_text(encoding="utf-8")
    return [t for line in re.findall(r"^\.PHONY:(.*)$", text, re.MULTILINE) for t in line.split()]


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", *args], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("target", _phony_targets())
def test_every_declared_target_has_a_recipe(target):
    dry = _make("-n", target)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "Nothing to be done" not in dry.stdout + dry.stderr, f"make {target}: {dry.stdout}{dry.stderr}"


def test_make_bench_lists_the_benchmark_scripts_and_passes_a_name_and_arguments_on():
    assert _make("-n", "bench", "NAME=hsi_indian_pines", "ARGS=--smoke").stdout.split()[-3:] == [
        "bench", "hsi_indian_pines", "--smoke"]
    # for real: the zoo command beside this interpreter, its install taken as done (STAMP empty: no pip run)
    if not (Path(sys.executable).parent / "zoo").is_file():
        pytest.skip(f"no zoo command beside {sys.executable} (zoo is not installed in this environment)")
    listed = _make("bench", f"BIN={Path(sys.executable).parent}", "STAMP=")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    scripts = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
    assert scripts and listed.stdout.split()[-len(scripts):] == scripts, listed.stdout
