"""Fixtures for the hub tests: a real HTTP server on 127.0.0.1, a private weights folder, a tiny model."""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from torch import nn

import zoo.hub.fetch as fetch_mod
from zoo import registry

TINY = "hubtest-tiny"


class TinyNet(nn.Module):
    """A real network with a conv, a BatchNorm (buffers, an int64 counter) and a head."""

    def __init__(self, num_classes: int = 3, width: int = 8) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3), nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W) -> (B, num_classes)
        return self.head(self.features(x))


def _load_tiny(model: TinyNet, path: Path, entry) -> TinyNet:
    from zoo import hub

    hub.load_into(model, hub.load_state_dict(path), reinit=("head.",))
    return model


@pytest.fixture
def tiny_model() -> str:
    """Registers ``hubtest-tiny`` for one test and removes it after, so that tests of other modules
    running in the same process never see a stray model in ``zoo.list_models()``."""

    @registry.register(TINY, family="hubtest", summary="tiny net for the hub tests", load_weights=_load_tiny)
    def _build(num_classes: int = 3, width: int = 8) -> TinyNet:
        return TinyNet(num_classes, width)

    yield TINY
    registry._REGISTRY.pop(TINY, None)


@pytest.fixture
def weights_home(tmp_path, monkeypatch) -> Path:
    """A private weights/ folder (manifest + shipped files), so tests never touch the checkout's."""
    folder = tmp_path / "weights"
    folder.mkdir()
    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(folder))
    monkeypatch.setattr(fetch_mod, "BACKOFF_S", 0.01)
    return folder


@dataclass
class ServerState:
    root: Path
    range_support: bool = True
    cut_after: int | None = None  # send only this many body bytes, then drop the connection...
    cuts_left: int = 0  # ...for this many requests
    corrupt_at: int | None = None  # flip the byte at this offset
    delay_s: float = 0.0  # sleep per 64 KiB block (to make downloads overlap)
    stalls: list[int] = field(default_factory=list)  # per request: send this many body bytes, then go silent
    stall_s: float = 0.0
    no_length: bool = False  # send no Content-Length (HTTP/1.0: the body ends where the connection does)
    etag: bool = False  # send an ETag (the file's sha256) and honour If-Range: another ETag gets the whole file
    ignore_if_range: bool = False  # a server (or cache) that answers a Range with the current file's bytes regardless
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    if_ranges: list[str | None] = field(default_factory=list)  # the If-Range header of each request
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        st: ServerState = self.server.state  # type: ignore[attr-defined]
        rng = self.headers.get("Range")
        with st.lock:
            st.requests.append((self.path, rng))
            st.if_ranges.append(self.headers.get("If-Range"))
            cut = st.cut_after if st.cuts_left > 0 else None
            if cut is not None:
                st.cuts_left -= 1
            stall = st.stalls.pop(0) if st.stalls else None
        path = st.root / self.path.lstrip("/").split("?")[0]
        if not path.is_file():
            self.send_error(404, "not found")
            return
        data = bytearray(path.read_bytes())
        if st.corrupt_at is not None:
            data[st.corrupt_at] ^= 0xFF
        start = 0
        etag = f'"{hashlib.sha256(data).hexdigest()}"' if st.etag else None
        if etag is not None and not st.ignore_if_range and self.headers.get("If-Range") not in (None, etag):
            rng = None  # RFC 9110: the file changed since the client's copy began, so it gets the whole new one
        if rng and st.range_support and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(data):
                self.send_error(416, "range not satisfiable")
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        if not st.no_length:
            self.send_header("Content-Length", str(len(data) - start))
        if etag is not None:
            self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes" if st.range_support else "none")
        self.end_headers()
        body = memoryview(data)[start:]
        if cut is not None:
            body = body[:cut]
        if stall is not None:
            body = body[:stall]
        try:
            for i in range(0, len(body), 1 << 16):
                self.wfile.write(body[i:i + (1 << 16)])
                if st.delay_s:
                    import time

                    time.sleep(st.delay_s)
            self.wfile.flush()
            if stall is not None:  # a server that stops sending but keeps the connection open
                import time

                time.sleep(st.stall_s)
                self.close_connection = True
                return
        except (BrokenPipeError, ConnectionResetError):
            return
        if cut is not None:
            self.close_connection = True
            self.connection.shutdown(2)


class Server:
    def __init__(self, root: Path, handler: type[BaseHTTPRequestHandler] = _Handler) -> None:
        self.state = ServerState(root)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.state = self.state  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def gets(self, name: str) -> list[str | None]:
        """Range headers of the requests for ``name`` (None: a plain GET)."""
        return [r for p, r in self.state.requests if p.lstrip("/") == name]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path) -> Server:
    root = tmp_path / "served"
    root.mkdir()
    srv = Server(root)
    yield srv
    srv.close()


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open an internet socket fails the test (offline mode must never connect)."""
    import socket

    real_connect = socket.socket.connect

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"a network connection was opened to {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


def cache_files(home: str | os.PathLike | None = None) -> list[Path]:
    root = Path(home or os.environ["ZOO_HOME"]) / "weights"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.fixture
def cached():
    """``cached()`` -> every file under $ZOO_HOME/weights (to assert nothing partial landed)."""
    return cache_files


# --- a loopback Hugging Face Hub ------------------------------------------------------------------------

HF_COMMIT = "0123456789abcdef0123456789abcdef01234567"


class _HubHandler(BaseHTTPRequestHandler):
    """The Hub's file-resolve protocol, as huggingface_hub speaks it: ``HEAD``/``GET
    /{org}/{repo}/resolve/{revision}/{file}``, answered with ``X-Repo-Commit``, an ``ETag`` (the git blob
    sha1 of a small file; for a large "LFS" file, ``X-Linked-Etag`` = its sha256 and ``X-Linked-Size``),
    Range support, and ``X-Error-Code`` on a 404. Repos are folders ``root/{org}/{repo}/``."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args) -> None:
        pass

    def _resolve(self):
        import hashlib
        from urllib.parse import unquote

        st = self.server.state  # type: ignore[attr-defined]
        parts = unquote(self.path.split("?")[0]).lstrip("/").split("/")
        with st.lock:
            st.requests.append((self.command, "/".join(parts)))
        if len(parts) < 5 or parts[2] != "resolve":
            return self._error(404, "RepoNotFound")
        repo = st.root / parts[0] / parts[1]
        if not repo.is_dir():
            return self._error(404, "RepoNotFound")
        if parts[3] not in ("main", HF_COMMIT):
            return self._error(404, "RevisionNotFound")
        path = repo.joinpath(*parts[4:])
        if not path.is_file():
            return self._error(404, "EntryNotFound")
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("X-Repo-Commit", HF_COMMIT)
        if path.suffix == ".safetensors":  # stored with LFS on the real Hub
            self.send_header("X-Linked-Etag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        else:
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            self.send_header("ETag", f'"{blob}"')
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        return data

    def _error(self, code: int, error_code: str):
        self.send_response(code)
        self.send_header("X-Error-Code", error_code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self._resolve()

    def do_GET(self) -> None:
        data = self._resolve()
        if data is not None:
            self.wfile.write(data)


@pytest.fixture
def hf_server(tmp_path, monkeypatch):
    """A loopback Hub on 127.0.0.1 reached through HF_ENDPOINT; ``hf_server.state.root/org/repo/`` are repos."""
    root = tmp_path / "hub"
    root.mkdir()
    srv = Server(root, _HubHandler)
    monkeypatch.setenv("HF_ENDPOINT", srv.url)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield srv
    srv.close()
