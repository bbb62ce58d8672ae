"""Pulls against servers whose headers are unusual but readable, local copies this user may not read, a cache
read-only to this user, and a nearly full disk under a resumable download.

Servers are real ones on 127.0.0.1. File modes are met by a child process as a user meets them: as root (whom
CAP_DAC_OVERRIDE lets read and write any file) the child runs under ``setpriv`` without that capability, else
the test is skipped. The full disk is the ``disk_quota`` fixture's (tests/conftest.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from zoo import fs, hub

NAME = "resnet18.served"  # a registered model's name: the child processes register nothing of their own
FILE = "served.safetensors"


@pytest.fixture
def release(tmp_path, monkeypatch):
    """A weights folder whose manifest has one entry, ``NAME``; its bytes are ``release.data`` and lie in
    ``release.served`` (a server's folder), not in the weights folder."""
    folder, served = tmp_path / "weights", tmp_path / "release-files"
    folder.mkdir()
    served.mkdir()
    data = bytes(range(256)) * 1200  # 300 kB: several blocks
    (served / FILE).write_bytes(data)
    entry = {"name": NAME, "model": "resnet18", "url": FILE, "sha256": hashlib.sha256(data).hexdigest(),
             "size": len(data), "format": "safetensors", "config": {}, "meta": {}}
    (folder / "manifest.json").write_text(json.dumps({"schema": 2, "release_url": None, "weights": [entry]}))
    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(folder))
    monkeypatch.setattr(hub.fetch, "BACKOFF_S", 0.01)

    class Release:
        pass

    out = Release()
    out.folder, out.served, out.data, out.entry = folder, served, data, hub.get_entry(NAME)
    return out


class _Headers(BaseHTTPRequestHandler):
    """Serves ``server.data`` with the headers ``server.headers`` names, its body chunked when they say so."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        data, headers = self.server.data, self.server.headers  # type: ignore[attr-defined]
        self.server.gets.append(self.path)  # type: ignore[attr-defined]
        status = self.server.status  # type: ignore[attr-defined]
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Connection", "close")
        self.end_headers()
        if status != 200:
            return
        if "chunked" in headers.get("Transfer-Encoding", ""):
            for i in range(0, len(data), 1 << 16):
                chunk = data[i:i + (1 << 16)]
                self.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.wfile.write(data)


@pytest.fixture
def header_server(release, monkeypatch):
    """``header_server(headers)``: the mirror ``ZOO_WEIGHTS_URL`` serving the release's file with ``headers``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Headers)
    httpd.daemon_threads = True
    httpd.data, httpd.gets = release.data, []
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setenv("ZOO_WEIGHTS_URL", f"http://127.0.0.1:{httpd.server_address[1]}")

    def with_headers(headers: dict[str, str], status: int = 200) -> ThreadingHTTPServer:
        httpd.headers, httpd.status = headers, status
        return httpd

    yield with_headers
    httpd.shutdown()
    httpd.server_close()


def test_a_content_length_a_proxy_folded_into_a_list_is_read_as_its_value(release, header_server):
    """Before: ``Content-Length: 307200, 307200`` (two equal headers a proxy folded into one, which RFC 9110 lets
    a recipient read as the one value) failed the pull with a raw ``ValueError: invalid literal for int()``,
    no source after the server tried; http.client, curl and requests read the file."""
    n = len(release.data)
    header_server({"Content-Length": f"{n}, {n}"})
    path = hub.pull(NAME, progress=False)
    assert hub.sha256_file(path) == release.entry.sha256


def test_a_content_length_that_is_no_number_reads_the_body_to_its_end(release, header_server):
    server = header_server({"Content-Length": "about 300 kB"})
    assert hub.sha256_file(hub.pull(NAME, progress=False)) == release.entry.sha256
    assert len(server.gets) == 1


def test_a_chunked_body_beside_a_stale_content_length_is_read_by_its_chunks(release, header_server):
    """Before: a chunked answer that also carried a Content-Length of twice the file (RFC 9112 6.3: ignored beside
    Transfer-Encoding; http.client reads the chunks) was refused as "the server announced 614400 bytes for a file
    of 307200: not this file"."""
    header_server({"Transfer-Encoding": "chunked", "Content-Length": str(2 * len(release.data))})
    assert hub.sha256_file(hub.pull(NAME, progress=False)) == release.entry.sha256


def test_a_redirect_loop_is_the_servers_failure_said_in_one_line_not_a_missing_file(release, header_server):
    """Before: urllib's three-line reason ("... would lead to an infinite loop.\\nThe last 30x error message
    was:\\nFound") was taken for the mirror's answer that it lacks the file: "The mirror ZOO_WEIGHTS_URL=... does
    not have it: add the file there"."""
    server = header_server({"Location": f"/{FILE}", "Content-Length": "0"}, status=302)
    with pytest.raises(hub.DownloadError) as err:
        hub.pull(NAME, progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "does not have it" not in msg, msg
    assert msg.endswith(f"{os.environ['ZOO_WEIGHTS_URL']}/{FILE}: HTTP 302: the server's redirects never reach a file "
                        "(The HTTP server returned a redirect error that would lead to an infinite loop): a "
                        "misconfigured server or URL; check where the URL leads (curl -IL), or use another source"), msg
    assert len(server.gets) == 5  # urllib's own limit on a loop (4 redirects); nothing asked again on top




_CHILD = textwrap.dedent("""
    import sys, warnings
    warnings.simplefilter("always")
    from zoo import hub

    for what in sys.argv[1:]:
        try:
            with warnings.catch_warnings(record=True) as said:
                done = hub.clean_cache(stale_only=True) if what == "clean" else hub.pull(what, progress=False)
            print("ok", done, *[str(w.message) for w in said], sep="\\n  ")
        except Exception as err:
            print(type(err).__name__, err)
""")


def _child(prefix: list[str], *args: str, env: dict[str, str]) -> list[str]:
    proc = subprocess.run([*prefix, sys.executable, "-c", _CHILD, *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split("\n")


def test_a_local_copy_this_user_may_not_read_falls_through_to_the_mirror(release, tmp_path, server, as_a_user):
    """Before: a copy in the weights folder that this user may not read (another user's ``0600`` file, in a
    folder a team shares; torch.hub's cache is one such source too) failed the pull with a raw
    ``PermissionError``, and the mirror after it, which has the file, was never asked."""
    unreadable = release.folder / FILE
    shutil.copy(release.served / FILE, unreadable)
    unreadable.chmod(0o000)
    shutil.copy(release.served / FILE, server.state.root / FILE)
    said = _child(as_a_user, NAME, env={"ZOO_WEIGHTS_URL": server.url, "ZOO_HOME": str(tmp_path / "home")})
    assert said[:2] == ["ok", f"  {tmp_path / 'home' / 'weights' / release.entry.sha256 / FILE}"], said
    assert said[2] == (f"  {unreadable}: cannot read it (Permission denied); trying the next source "
                       f"({server.url}/{FILE})"), said
    assert server.gets(FILE) == [None]
    # without a mirror the unreadable copy is the only source: the error says why it was not taken
    said = _child(as_a_user, NAME, env={"ZOO_HOME": str(tmp_path / "home2")})
    assert said == [(f"DownloadError could not get {FILE}: {unreadable}: cannot read it (Permission denied). Without "
                     "a network, set ZOO_WEIGHTS_URL to a mirror (http(s)://, file:// or a folder)")], said


def test_a_cache_read_only_to_this_user_with_a_killed_writers_temp_file_still_serves_its_files(release, tmp_path,
                                                                                               monkeypatch, as_a_user):
    """A team's cache, filled by its owner and read-only to the others, where one of the owner's pulls was killed
    (its temp file left beside the file). Before: every pull of the cached, verified file failed with a raw
    ``PermissionError`` on the temp file, which the pull's sweep of killed writers' files tried to delete; and
    ``zoo cache clean`` said the same raw error, where it names its other failures."""
    shutil.copy(release.served / FILE, release.folder / FILE)
    home = tmp_path / "team-cache"
    monkeypatch.setenv("ZOO_HOME", str(home))
    path = hub.pull(NAME, progress=False)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = path.with_name(f"{fs.TEMP_PREFIX}{fs._HOST}-{dead.pid}-0123abcd-{FILE}.verified")
    orphan.write_text("{")
    for folder in (home, home / "weights", path.parent):
        folder.chmod(0o555)
    try:
        said = _child(as_a_user, NAME, "clean", env={"ZOO_HOME": str(home), "ZOO_OFFLINE": "1"})
    finally:
        for folder in (home, home / "weights", path.parent):
            folder.chmod(0o755)
    assert said[:2] == ["ok", f"  {path}"], said
    assert said[2] == (f"FsError cannot remove {orphan}: Permission denied; zoo cache clean needs a cache it can "
                       "write: run it where the cache is writable, or point ZOO_HOME at another cache"), said
    assert orphan.exists()
    assert hub.clean_cache(stale_only=True) == (1, 1) and not orphan.exists()  # its owner's clean removes it


def _tiny_file(path, seed: int):
    """A real safetensors weights file; two seeds give two versions of the same size."""
    generator = torch.Generator().manual_seed(seed)
    return hub.save_weights({"layer.weight": torch.randn(64, 512, generator=generator)}, path)


def test_a_changed_url_on_a_nearly_full_disk_never_joins_the_old_head_to_the_new_tail(weights_home, server,
                                                                                      tmp_path, disk_quota):
    """A URL pull (no published sha256: only the server's ETag keeps a resume to one version) kept half of the
    old file; the file behind the URL changed. The next pull's If-Range got the new file whole, and its resume
    record was rewritten with the new ETag before the free-space check refused the whole file beside the kept
    half. Before: the record vouched for the old half as the new version's, so the pull after that resumed it
    with the new version's tail and the cache took the join (same size, a whole-looking archive) as the file.
    The kept bytes of an old version are useless once the whole file comes: they are dropped first, which also
    frees the room the new file needs."""
    name = "agent.safetensors"
    old, new = _tiny_file(tmp_path / "old.safetensors", 0), _tiny_file(tmp_path / "new.safetensors", 1)
    assert old.stat().st_size == new.stat().st_size and old.read_bytes() != new.read_bytes()
    size, half = old.stat().st_size, old.stat().st_size // 2
    shutil.copy(old, server.state.root / name)
    server.state.etag = True
    server.state.cut_after, server.state.cuts_left, server.state.range_support = half, 1000, False
    url = f"{server.url}/{name}"
    with pytest.raises(hub.DownloadError, match="failed after"):
        hub.resolve(url)
    [part] = hub.cache_root().rglob(name + ".part")
    assert part.stat().st_size == half
    shutil.copy(new, server.state.root / name)  # the publisher replaces the file behind the URL
    server.state.cuts_left, server.state.range_support = 0, True
    disk_quota(hub.cache_root(), size + half // 2)  # room for the file, not for the file beside the old half
    local, _ = hub.resolve(url)
    assert local.read_bytes() == new.read_bytes()
    assert server.state.if_ranges[-1] == f'"{hub.sha256_file(old)}"'  # asked for the old version's rest
    assert hub.resolve(url)[0].read_bytes() == new.read_bytes()
    assert not [p for p in hub.cache_root().rglob(name + ".*") if p.suffix in (".part", ".resume")]


def test_a_download_refused_for_space_leaves_no_resume_record(release, header_server, disk_quota):
    """Before: the resume record of the response was written, then the free-space check refused the download:
    a ``<file>.resume`` of bytes never written stayed in the cache, which no pull nor ``zoo cache clean`` removes."""
    header_server({"Content-Length": str(len(release.data)), "ETag": '"v1"'})
    folder = hub.cached_path(release.entry).parent
    disk_quota(hub.cache_root(), len(release.data) // 2)
    with pytest.raises(fs.NoSpaceError):
        hub.fetch.fetch([f"{os.environ['ZOO_WEIGHTS_URL']}/{FILE}"], folder / FILE, check=None, expected="(none)",
                        progress=False)
    assert sorted(p.name for p in folder.iterdir()) == []


@pytest.mark.parametrize("kept", ["the-file", "other-bytes"])
def test_a_part_that_holds_every_byte_is_checked_not_downloaded_again(kept, release, server, monkeypatch):
    """A pull killed after its last byte reached ``<file>.part`` but before the rename (while it hashed the last
    block, or synced a large file to a slow disk). Before: the next pull asked for the bytes past the end, the
    server answered 416, and the whole file was downloaded again (wget -c and curl -C - say it is complete). Kept
    bytes that are not the file fail the sha256 and the file comes whole, once."""
    shutil.copy(release.served / FILE, server.state.root / FILE)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    dest = hub.cached_path(release.entry)
    dest.parent.mkdir(parents=True)
    dest.with_name(FILE + ".part").write_bytes(release.data if kept == "the-file" else bytes(len(release.data)))
    assert hub.sha256_file(hub.pull(NAME, progress=False)) == release.entry.sha256
    assert server.gets(FILE) == ([] if kept == "the-file" else [None])
    assert sorted(p.name for p in dest.parent.iterdir()) == [FILE, FILE + ".verified"]


_HOMELESS = textwrap.dedent("""
    import os
    from zoo import hub

    for zoo_home in (os.environ["ZOO_HOME"], None):
        if zoo_home is None:
            del os.environ["ZOO_HOME"]
        try:
            hub.pull("resnet18.imagenet1k-v1", progress=False)
        except Exception as err:
            print(type(err).__name__, err)
""")


def test_a_user_without_a_home_folder_gets_zoo_home_or_a_named_error(tmp_path):
    """A container run under an arbitrary user id, HOME unset: the id has no home in the password database.
    Before: every pull of an upstream file failed with pathlib's bare "RuntimeError: Could not determine home
    directory." (torch.hub's cache, a source, was looked up with pathlib), ZOO_HOME set or not; and without
    ZOO_HOME that was all the error said. Now torch.hub's cache is found as torch.hub finds it (os.path leaves the
    ``~``) and the missing home is named with its fix."""
    cmd = ["unshare", "--user", "--map-user=54321", sys.executable, "-c", _HOMELESS]
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME", "TORCH_HOME")}
    env.update(ZOO_HOME=str(tmp_path / "home"), ZOO_OFFLINE="1")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    except OSError:
        pytest.skip("unshare is not installed")
    if proc.returncode and "unshare" in proc.stderr:
        pytest.skip(f"no user namespace here to run under a user id without a home ({proc.stderr.strip()})")
    said = proc.stdout.strip().split("\n")
    assert len(said) == 2, (said, proc.stderr)
    assert said[0].startswith("OfflineError weights 'resnet18.imagenet1k-v1' (resnet18-f37072fd.pth) are not in the "
                              f"cache at {tmp_path / 'home'}"), said
    assert said[0].endswith("(tried: ~/.cache/torch/hub/checkpoints/resnet18-f37072fd.pth: "
                            "~/.cache/torch/hub/checkpoints/resnet18-f37072fd.pth does not exist)"), said
    assert said[1] == ("FsError the zoo cache ~/.cache/zoo is in the home folder, and there is none: HOME is unset "
                       "and user id 54321 has no home in the password database (a container run under an arbitrary "
                       "user id); set ZOO_HOME to a folder this user can write (a path without ~), or HOME"), said
