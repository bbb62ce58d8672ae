"""Shared fixtures: the real data sets beside the checkout, and a clean zoo cache per test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config) -> None:
    """Under ``pytest -n N`` each worker takes its share of the cores for torch's thread pool: N workers that
    each start one thread per core oversubscribe them, and loops of small ops slow down several-fold (the
    GRU reverse-task test: 13 s alone, 153-162 s beside another worker in `make test`)."""
    # Module- and session-scoped fixtures run before the per-test home below: they get a private one too, so
    # that nothing a test run does (pulls, the amp.json timing record) lands in the user's ~/.cache/zoo.
    import tempfile

    os.environ["ZOO_HOME"] = tempfile.mkdtemp(prefix="zoo-tests-home-")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        share = max(1, (os.cpu_count() or 1) // workers)
        torch.set_num_threads(share)
        # the processes a test starts (README blocks, CLI runs) inherit the share unless the caller chose: each
        # with one OpenMP thread per core beside the other workers' made the README blocks 1.4x slower
        os.environ.setdefault("OMP_NUM_THREADS", str(share))


def pytest_unconfigure(config) -> None:
    import shutil
    import tempfile

    home = os.environ.get("ZOO_HOME", "")
    if Path(home).name.startswith("zoo-tests-home-") and Path(home).parent == Path(tempfile.gettempdir()):
        shutil.rmtree(home, ignore_errors=True)


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


TEST_SEED = 0


@pytest.fixture(autouse=True)
def _seeded_generators() -> int:
    """Every test starts from the same state of Python's, NumPy's and torch's global generators, whatever its
    xdist worker ran before it. A network a test builds outside a seeded run draws its weights from them (zoo's
    runs seed for themselves and give the caller's state back), so a learning test's score hung on the order
    of the tests: HybridSN's scored 0.817 against its 0.85 floor in one ordering (2026-12-06). Returns the seed,
    for a test that asks for this fixture by name."""
    from zoo.engine.seed import set_seed

    set_seed(TEST_SEED)
    return TEST_SEED


@pytest.fixture(autouse=True)
def _isolated_zoo_home(tmp_path_factory, monkeypatch):
    """Every test gets its own empty weights cache and no mirror, so no test sees another's downloads."""
    monkeypatch.setenv("ZOO_HOME", str(tmp_path_factory.mktemp("zoo_home")))
    monkeypatch.delenv("ZOO_WEIGHTS_URL", raising=False)
    monkeypatch.delenv("ZOO_OFFLINE", raising=False)
    # torch.hub's cache is a source of upstream weights: the machine's own copies must not change a test
    monkeypatch.setenv("TORCH_HOME", str(tmp_path_factory.mktemp("torch_home")))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # zoo train without --out saves under runs/train: in the test's own folder, not the checkout's
    runs = tmp_path_factory.mktemp("runs")
    monkeypatch.setattr("zoo.cli.train_output.TRAIN_RUNS", runs / "train")
    monkeypatch.setattr("zoo.vision.cli.FINETUNE_RUNS", runs / "finetune")  # zoo finetune without --out-dir


class Mutations:
    """Hypothesis strategies that damage a real file, for the reader fuzz tests (``mutations`` fixture).

    ``binary(seed, hot=...)`` applies 1-4 byte edits: flips, interesting values at random places or at the
    ``hot`` offsets where a format keeps its sizes and codes, truncation, insertion, deletion.
    ``text(seed, values=...)`` edits lines (drop, duplicate, swap, replace a value after ``=`` or a field
    with one of ``values``) and sometimes the bytes too, so invalid UTF-8 appears as well.
    """

    INTS = (0, 1, -1, 2, 7, 255, 256, 2**15 - 1, 2**16 - 1, 2**16, 2**31 - 1, -(2**31), 2**32 - 1, 10**9)

    @classmethod
    def binary(cls, seed: bytes, hot: tuple[int, ...] = (), max_ops: int = 4):
        from hypothesis import strategies as st

        n = len(seed)
        pos = st.integers(0, max(n - 1, 0))
        field_pos = st.sampled_from(hot) if hot else pos
        op = st.one_of(
            st.tuples(st.just("xor"), pos, st.integers(1, 255)),
            st.tuples(st.just("put"), field_pos, st.sampled_from((1, 2, 4, 8)),
                      st.one_of(st.sampled_from(cls.INTS), st.integers(-(2**63), 2**64 - 1))),
            st.tuples(st.just("truncate"), st.integers(0, n)),
            st.tuples(st.just("insert"), st.integers(0, n), st.binary(min_size=1, max_size=64)),
            st.tuples(st.just("delete"), pos, st.integers(1, 256)),
        )
        return st.lists(op, min_size=1, max_size=max_ops).map(lambda ops: cls._apply(seed, ops))

    @staticmethod
    def _apply(data: bytes, ops) -> bytes:
        buf = bytearray(data)
        for op in ops:
            kind, at = op[0], min(op[1], len(buf))
            if kind == "xor" and at < len(buf):
                buf[at] ^= op[2]
            elif kind == "put":
                size, value = op[2], op[3] % (1 << (8 * op[2]))
                buf[at:at + size] = value.to_bytes(size, "little")
            elif kind == "truncate":
                del buf[at:]
            elif kind == "insert":
                buf[at:at] = op[2]
            elif kind == "delete":
                del buf[at:at + op[2]]
        return bytes(buf)

    @classmethod
    def text(cls, seed: str, values: tuple[str, ...] = (), max_ops: int = 4):
        from hypothesis import strategies as st

        lines = seed.splitlines(keepends=True)
        n = len(lines)
        idx = st.integers(0, max(n - 1, 0))
        value = st.one_of(st.sampled_from(values + ("", "-1", "0", "abc", "{", "1e9", "99999999999999999999", "²")),
                          st.text(max_size=12), st.integers(-(2**40), 2**40).map(str))
        op = st.one_of(
            st.tuples(st.just("drop"), idx), st.tuples(st.just("dup"), idx), st.tuples(st.just("swap"), idx, idx),
            st.tuples(st.just("value"), idx, value), st.tuples(st.just("line"), idx, st.text(max_size=40)),
        )
        edited = st.lists(op, min_size=1, max_size=max_ops).map(lambda ops: cls._edit(lines, ops).encode())
        return st.one_of(edited, edited.flatmap(lambda b: cls.binary(b, max_ops=2)))

    @staticmethod
    def _edit(lines: list[str], ops) -> str:
        out = list(lines)
        for op in ops:
            if not out:
                break
            i = min(op[1], len(out) - 1)
            if op[0] == "drop":
                del out[i]
            elif op[0] == "dup":
                out.insert(i, out[i])
            elif op[0] == "swap":
                j = min(op[2], len(out) - 1)
                out[i], out[j] = out[j], out[i]
            elif op[0] == "value":  # the value after "=", else the last whitespace-separated field
                head, sep, _ = out[i].partition("=")
                fields = out[i].split()
                out[i] = (f"{head}= {op[2]}\n" if sep else " ".join([*fields[:-1], op[2]]) + "\n")
            elif op[0] == "line":
                out.insert(i, op[2] + "\n")
        return "".join(out)


@pytest.fixture(scope="session")
def mutations() -> type[Mutations]:
    return Mutations
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
def as_a_user() -> list[str]:
    """The command prefix that runs a child under file modes as a user meets them: none for a user; for root, whom
    CAP_DAC_OVERRIDE lets write any file, setpriv without that capability (else the test is skipped)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return []
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
    try:
        subprocess.run([*drop, "true"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("root, and setpriv cannot drop CAP_DAC_OVERRIDE here: file modes would not bite")
    return drop


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


def _flip_pickle_opcode(src: Path, dst: Path) -> Path:
    """A copy of the torch.save archive ``src`` whose pickle holds a byte no unpickler knows: a corrupt file
    (not a malicious one) that torch.load rejects with "Unsupported operand 43"."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            raw = bytearray(zin.read(name))
            if name.endswith("data.pkl"):
                raw[5] = 43
            zout.writestr(name, bytes(raw))
    return dst


@pytest.fixture
def flip_pickle_opcode():
    """``flip_pickle_opcode(src, dst)`` -> ``dst``: see :func:`_flip_pickle_opcode`."""
    return _flip_pickle_opcode


def _top_probs(model, x) -> tuple[list[float], list[float]]:
    import torch

    from zoo.engine.layout import channels_last_input

    # each precision on the input laid out as zoo.predict lays it out for that precision on this CPU: channels-last
    # kernels round differently (zoo.engine.layout)
    with torch.no_grad():
        fp32 = model(channels_last_input(x, model, None)).softmax(1).max(1).values.tolist()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(channels_last_input(x, model, torch.bfloat16))
    bf16 = logits.float().softmax(1).max(1).values.tolist()
    assert bf16 != fp32  # else a test could not tell the precisions apart
    return fp32, bf16


@pytest.fixture
def top_probs_fp32_bf16():
    """``top_probs_fp32_bf16(model, x)`` -> (fp32, bf16) top-class probabilities of a classifier, computed
    directly (the model's own forward, on ``x`` laid out as ``zoo.engine.layout.channels_last_input`` lays it out
    for that precision on this CPU), for checking which precision a predict ran at."""
    return _top_probs


@pytest.fixture
def subprocess_tmpdir(tmp_path_factory):
    """A temp folder (their ``TMPDIR``) for the processes a test starts, under pytest's (which keeps its last three
    runs). torchrun writes its processes' logs to a new ``torchelastic_*`` folder in the temp folder and never
    removes it: the suite left four in /tmp at every run. At teardown, checks that none appeared there."""
    import glob
    import tempfile

    left = os.path.join(tempfile.gettempdir(), "torchelastic_*")
    before = set(glob.glob(left))
    yield tmp_path_factory.mktemp("subprocess-tmp")
    new = set(glob.glob(left)) - before
    assert not new, f"a process this test started left {sorted(new)} in the system temp folder"


@pytest.fixture
def torchrun(subprocess_tmpdir):
    """``torchrun(args, cwd) -> CompletedProcess``: ``torch.distributed.run --standalone --nproc_per_node=2 ARGS``
    (a script and its arguments, or ``-m zoo ...``) in a clean environment: one thread a process, no rank
    variables of an outer job, and a temp folder of its own (:func:`subprocess_tmpdir`)."""
    import subprocess
    import sys

    def run(args, cwd, timeout: int = 280):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(subprocess_tmpdir)}
        for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(key, None)
        return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                               *map(str, args)], check=False, capture_output=True, text=True, timeout=timeout,
                              env=env, cwd=cwd)

    return run
