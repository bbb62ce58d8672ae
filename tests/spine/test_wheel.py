"""zoo as a real package (issue #14): the wheel, installed where the checkout is not importable, lists every
weights entry, pulls each of the project's files from a loopback release host, builds each with its
weights, and runs `zoo demo`. The wheel holds no weights, stays under 1 MB, and declares what it imports.

The install is `pip install --no-deps --target DIR` (a fresh venv with torch costs ~5 GB and minutes):
the venv's interpreter then runs with DIR first on PYTHONPATH, from a folder outside the checkout."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import zoo
from zoo import hub

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, from PyPI (the dev extra has it)
    import tomli as tomllib
ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
_NAME = re.compile(r"^[A-Za-z0-9_.-]+")


def _dist(requirement: str) -> str:
    return _NAME.match(requirement.strip())[0].lower().replace("_", "-")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of what a source distribution holds, so the checkout gets no build/ folder."""
    import shutil

    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "zoo", src / "zoo", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                          "-q", "-w", str(out), str(src)], capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    (path,) = out.glob("zoo-*.whl")
    return path


@pytest.mark.slow
def test_the_wheel_holds_the_manifest_no_weights_and_is_small(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "zoo/hub/manifest.json" in names
    assert not [n for n in names if n.endswith((".safetensors", ".pt", ".pth", ".npz")) or n.startswith("weights/")]
    assert wheel.stat().st_size < 1 << 20, f"{wheel.name}: {wheel.stat().st_size} bytes"
    print(f"wheel {wheel.name}: {wheel.stat().st_size / 1024:.0f} KiB")


def test_the_wheel_carries_the_license_its_metadata_names(wheel):
    assert wheel.name.startswith(f"zoo-{zoo.__version__}-")  # the version: zoo.__version__, read at build time
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if ".dist-info/" in n and n.endswith("LICENSE")], names


# API zoo calls -> the first release of its distribution that has it: the declared floor must not be older
_NEWEST_API_NEEDED = [
    ("sklearn.utils.validation", "validate_data", "scikit-learn", "1.6"),
    ("torch.compiler", "is_exporting", "torch", "2.7"),
    ("gymnasium.vector", "AutoresetMode", "gymnasium", "1.1"),
    ("threadpoolctl", "ThreadpoolController", "threadpoolctl", "3.0"),
]


@pytest.mark.parametrize("module, attr, dist, first", _NEWEST_API_NEEDED)
def test_declared_floors_are_releases_that_have_what_zoo_calls(module, attr, dist, first):
    import importlib

    from packaging.requirements import Requirement
    from packaging.version import Version

    assert hasattr(importlib.import_module(module), attr)
    req = next(Requirement(r) for r in PYPROJECT["project"]["dependencies"] if _dist(r) == _dist(dist))
    floors = [Version(s.version) for s in req.specifier if s.operator == ">="]
    assert floors and min(floors) >= Version(first), f"{req}: {module}.{attr} needs {dist}>={first}"


def test_the_floors_file_pins_every_dependency_at_its_declared_floor():
    """`make test-floors` installs .ci/floors.txt: one pin per dependency of the package and of its dev, export
    and hdf5 extras, each admitted by pyproject and in the release series its floor names (numpy>=1.24:
    1.24.x), so that a floor raised in one place and not the other fails here."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    pins: dict[str, Version] = {}
    for line in (ROOT / ".ci" / "floors.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and _dist(name) not in pins, f".ci/floors.txt: {line!r}: expected one NAME==VERSION per line"
            pins[_dist(name)] = Version(version)
    extras = PYPROJECT["project"]["optional-dependencies"]
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"] + extras["dev"] + extras["export"]
            + extras["hdf5"]]
    assert sorted(pins) == sorted({_dist(r.name) for r in reqs})
    for req in reqs:
        pin = pins[_dist(req.name)]
        (floor,) = [Version(s.version) for s in req.specifier if s.operator == ">="]
        assert req.specifier.contains(pin), f"{req}: .ci/floors.txt pins {pin}"
        assert pin.release[:len(floor.release)] == floor.release, (
            f"{req}: .ci/floors.txt pins {pin}, not a release of the series its floor names")


@pytest.mark.slow
def test_the_wheel_declares_exactly_the_projects_dependencies(wheel):
    meta = zipfile.ZipFile(wheel).read(next(n for n in zipfile.ZipFile(wheel).namelist()
                                            if n.endswith(".dist-info/METADATA"))).decode()
    required = {_dist(line.split(":", 1)[1]) for line in meta.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line}
    assert required == {_dist(r) for r in PYPROJECT["project"]["dependencies"]}


def _third_party_imports() -> set[str]:
    """Top-level modules zoo imports that are neither the standard library nor zoo itself."""
    found: set[str] = set()
    for path in (ROOT / "zoo").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            found |= {n.split(".")[0] for n in names}
    return {n for n in found if n not in sys.stdlib_module_names and n != "zoo"}


def _installing(module: str) -> list[str]:
    """The distributions whose files hold ``module``: Python 3.10's ``packages_distributions`` reads only
    ``top_level.txt``, which wheels built with meson (scikit-learn's) do not have."""
    return [d.metadata["Name"] for d in md.distributions() if any(f.parts[0] == module for f in d.files or ())]


def test_every_package_zoo_imports_is_declared():
    """Nothing zoo imports comes only as a side effect of another package: each is a dependency (or,
    for optional features imported lazily, in an extra)."""
    declared = {_dist(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = {_dist(r) for reqs in PYPROJECT["project"]["optional-dependencies"].values() for r in reqs}
    by_module = md.packages_distributions()
    missing = {}
    for module in sorted(_third_party_imports()):
        dists = {d.lower().replace("_", "-") for d in by_module.get(module) or _installing(module) or [module]}
        if not dists & (declared | extras):
            missing[module] = sorted(dists)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


_INSTALLED = """
import json, os, sys
import zoo
from zoo import hub
target, expected, own = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
assert zoo.__file__.startswith(target), zoo.__file__
assert hub.weights_dir() is None and hub.checkout_root() is None
assert zoo.list_weights() == expected, zoo.list_weights()
for name in own:
    entry = hub.get_entry(name)
    path = zoo.pull(name, progress=False)
    assert hub.sha256_file(path) == entry.sha256
    zoo.build(entry.model, weights=name)
    print("built", name, flush=True)
for name in sorted(set(expected) - set(own)):  # upstream files: their publisher hosts them
    try:
        zoo.pull(name, progress=False, local_files_only=True)
    except hub.OfflineError as err:
        assert name in str(err)
from zoo.cli import main
sys.exit(main(["demo"]))
"""


@pytest.mark.slow
def test_installed_wheel_pulls_builds_and_demos_from_a_release_host(wheel, tmp_path):
    target = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                          str(target), str(wheel)], capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    release = tmp_path / "release"
    hub.release(release, progress=False)  # what the release host serves, from this checkout
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(release)))
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    entries = hub.read_manifest()
    own = sorted(n for n, e in entries.items() if not e.upstream)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "PYTHON"))}
    env.update(PYTHONPATH=str(target), ZOO_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="2", MPLBACKEND="Agg",
               ZOO_WEIGHTS_URL=f"http://127.0.0.1:{httpd.server_address[1]}",
               ZOO_SHARED_DATA=str(tmp_path / "no-shared-data"))  # demo steps fall back to generated data
    try:
        proc = subprocess.run([sys.executable, "-c", _INSTALLED, str(target), json.dumps(sorted(entries)),
                               json.dumps(own)], cwd=outside, env=env, capture_output=True, text=True,
                              timeout=900, check=False)
    finally:
        httpd.shutdown()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("built ")] == own
    assert "demo step times:" in proc.stdout and "demo step failed" not in proc.stderr


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.mark.slow
def test_the_sdist_holds_the_package_and_no_stray_test_files(tmp_path):
    """setuptools put tests/test_cuda.py, test_export.py and test_readme.py in the sdist (its default
    tests/test*.py), without the conftest files and folders they need."""
    import shutil
    import tarfile

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("zoo", "tests"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    build = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    run = subprocess.run([sys.executable, "-c", build, str(tmp_path)], cwd=src, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    with tarfile.open(tmp_path / run.stdout.split()[-1]) as sdist:
        names = sdist.getnames()
    assert any(n.endswith("/zoo/hub/manifest.json") for n in names) and any(n.endswith("/zoo/api.py") for n in names)
    assert not [n for n in names if "/tests/" in n]
