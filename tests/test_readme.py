"""Every Python and shell block of README.md runs: a README line that does not work is a failing test.

Each block runs on its own (a fresh interpreter or shell) in a temporary folder, with ``../shared/data``
pointed at the real data sets; a block that needs them skips with a reason when they are absent. A block
is skipped only when the line before it says ``<!-- readme-test: skip REASON -->`` (the set-up commands
``make demo`` / ``make test``, which would run this very suite).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ZOO_SHARED_DATA", ROOT.parent / "shared" / "data"))
README = ROOT / "README.md"
_FENCE = re.compile(r"(?P<before>[^\n]*)\n```(?P<lang>python|bash|sh)\n(?P<body>.*?)\n```", re.DOTALL)
_SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*(?P<why>.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int
    skip: str | None

    @property
    def id(self) -> str:
        return f"README.md:{self.line}:{self.lang}"


def readme_blocks(text: str) -> list[Block]:
    blocks = []
    for m in _FENCE.finditer(text):
        skip = _SKIP.search(m.group("before"))
        line = text.count("\n", 0, m.start("body"))
        blocks.append(Block(m.group("lang"), m.group("body"), line, skip.group("why") if skip else None))
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_blocks_for_every_family():
    text = "\n".join(b.body for b in BLOCKS)
    import zoo

    for name in zoo.list_models():
        assert name in text, f"README shows no block using {name!r}"


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_readme_block_runs(block, tmp_path, subprocess_tmpdir):
    if block.skip is not None:
        pytest.skip(block.skip)
    body = block.body
    if "../shared/data" in body:
        if not SHARED_DATA.is_dir():
            pytest.skip(f"needs the real data sets ({SHARED_DATA} not found)")
        body = body.replace("../shared/data", str(SHARED_DATA))
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT), "TMPDIR": str(subprocess_tmpdir),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if block.lang == "python":
        cmd = [sys.executable, "-c", body]
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", body]
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, f"{block.id} failed:\n{body}\n--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-3000:]}"
