"""Pulls against servers whose headers are unusual but readable, local copies this user may not read, a cache
read-only to this user, and a nearly full disk under a resumable download.

Servers are real ones on 127.0.0.1. File modes are met by a child process as a user meets them: as root (whom
CAP_DAC_OVERRIDE lets read and write any file) the child runs under ``setpriv`` without that capability, else
the test is skipped. The full disk is the ``disk_quota`` fixture's (tests/conftest.py)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import socket
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
                done = (hub.clean_cache(stale_only=True) if what == "clean" else hub.clean_cache() if what == "clean-all"
                        else hub.pull(what, progress=False))
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


@pytest.mark.parametrize("code", [401, 403])
def test_a_mirror_that_refuses_access_is_said_to_refuse_and_the_next_source_is_tried(release, header_server,
                                                                                     server, code, monkeypatch):
    """Before: a 401 or 403 was read as a 404, "The mirror ZOO_WEIGHTS_URL=... does not have it: add the file
    there", and the source after it was taken without a word about the refusal. A server that refuses access may
    well have the file: the error says it wants credentials, which zoo does not send."""
    reason = {401: "Unauthorized", 403: "Forbidden"}[code]
    header_server({"Content-Length": "0"}, status=code)
    mirror = os.environ["ZOO_WEIGHTS_URL"]
    with pytest.raises(hub.DownloadError) as err:
        hub.pull(NAME, progress=False)
    msg = str(err.value)
    assert f"{mirror}/{FILE}: HTTP {code} {reason} (access refused). The mirror ZOO_WEIGHTS_URL={mirror} refused " \
           "access: it wants credentials" in msg, msg
    assert "does not have it" not in msg and "not found" not in msg, msg
    with pytest.raises(hub.DownloadError, match=rf"/theirs.safetensors: HTTP {code} {reason} \(access refused\)\. "
                                                r"The server refused access: it wants credentials"):
        hub.resolve(f"{mirror}/theirs.safetensors")  # a URL of the user's own, no manifest entry's
    # a source after the refusing one is still tried, and the warning says why the mirror was passed over
    doc = json.loads((release.folder / "manifest.json").read_text())
    doc["release_url"] = server.url
    (release.folder / "manifest.json").write_text(json.dumps(doc))
    shutil.copy(release.served / FILE, server.state.root / FILE)
    with pytest.warns(UserWarning, match=rf"{mirror}/{FILE}: HTTP {code} {reason} \(access refused\); trying the "
                                         rf"next source \({server.url}/{FILE}\)"):
        path = hub.pull(NAME, progress=False)
    assert hub.sha256_file(path) == release.entry.sha256


class _Parts(BaseHTTPRequestHandler):
    """Serves ``server.data``, honouring ``Range: bytes=N-`` where ``server.ranges``; every answer stops at the
    file's byte ``server.cut`` (the connection then closes, short of the Content-Length it announced), or where
    ``server.part`` is set, covers at most that many bytes (a 206 for part of what was asked, RFC 9110 14.2)."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        srv = self.server
        data, n, rng = srv.data, len(srv.data), self.headers.get("Range")  # type: ignore[attr-defined]
        srv.gets.append(rng)  # type: ignore[attr-defined]
        start = int(rng[len("bytes="):-1]) if rng and srv.ranges else 0  # type: ignore[attr-defined]
        end = min(n, start + srv.part) if srv.part else n  # type: ignore[attr-defined]
        self.send_response(206 if start or end < n else 200)
        if start or end < n:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{n}")
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        cut = srv.cut  # type: ignore[attr-defined]
        self.wfile.write(data[start:end if cut is None else min(end, max(start, cut))])
        self.wfile.flush()
        if cut is not None:
            self.connection.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def parts_server(release, monkeypatch):
    """The mirror ``ZOO_WEIGHTS_URL`` serving the release's file through :class:`_Parts` (set ``ranges``, ``cut``,
    ``part`` on it; ``gets``: the Range header of each request)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Parts)
    httpd.daemon_threads = True
    httpd.data, httpd.gets, httpd.ranges, httpd.cut, httpd.part = release.data, [], True, None, None
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setenv("ZOO_WEIGHTS_URL", f"http://127.0.0.1:{httpd.server_address[1]}")
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("ranges", [True, False])
def test_a_download_cut_short_says_how_far_it_got_and_what_becomes_of_the_bytes(release, parts_server, ranges):
    """Before: a server that kept closing the connection 100 kB into a 300 kB file ended the pull with "failed after 5
    attempts ... (IncompleteRead: IncompleteRead(0 bytes read, 204800 more expected))": 0 bytes read, though
    100 kB were, and nothing said that they are kept, nor whether the next pull can resume them."""
    n, cut = len(release.data), 100 * 1024
    parts_server.ranges, parts_server.cut = ranges, cut
    part = hub.cached_path(release.entry).with_name(FILE + ".part")
    with pytest.raises(hub.DownloadError) as err:
        hub.pull(NAME, progress=False)
    msg = str(err.value)
    assert f"the download was cut short, failed after 5 attempts, the last 4 without a byte more: the connection " \
           f"closed after {cut} of the file's {n} bytes; the {cut} bytes (100.0 KiB) received are kept in {part}" in msg
    assert msg.endswith("and the next pull resumes from there. Retry later, or use another source" if ranges else
                        ", but this server does not resume (it answered a request for the rest with the whole file): "
                        "the next pull starts from byte 0 again. Retry later, or use another source"), msg
    assert part.read_bytes() == release.data[:cut]
    parts_server.cut, parts_server.gets = None, []
    assert hub.sha256_file(hub.pull(NAME, progress=False)) == release.entry.sha256
    assert parts_server.gets == [f"bytes={cut}-"]  # resumed where the kept bytes end (the whole file without ranges)


def test_a_server_that_sends_the_file_in_parts_is_asked_for_each_part(release, parts_server):
    """Before: a 206 for the first 100 kB of a 300 kB file (a server that caps its ranges) was taken for the whole
    body, and the pull failed with "sha256 mismatch"."""
    parts_server.part = 100_000
    assert hub.sha256_file(hub.pull(NAME, progress=False)) == release.entry.sha256
    assert parts_server.gets == [None, "bytes=100000-", "bytes=200000-", "bytes=300000-"]


def test_a_body_compressed_against_the_request_is_named_not_called_a_mismatch(release, header_server):
    """Before: a server that gzipped the file though zoo asked for ``Accept-Encoding: identity`` failed the pull with
    "sha256 mismatch", its cause unsaid."""
    body = gzip.compress(release.data)
    header_server({"Content-Encoding": "gzip", "Content-Length": str(len(body))}).data = body
    with pytest.raises(hub.DownloadError) as err:
        hub.pull(NAME, progress=False)
    msg = str(err.value)
    assert f"{FILE}: the server sent the file gzip-encoded (Content-Encoding: gzip), though zoo asked for its bytes " \
           "as they are (Accept-Encoding: identity)" in msg and "mismatch" not in msg, msg
    assert not list(hub.cache_root().rglob(FILE))


def test_a_download_lock_another_user_left_is_used_or_named_with_its_owner(release, tmp_path, as_a_user):
    """A team's cache where another user's pull left its ``.lock`` (their umask's 0644, or 0600). Before: a pull of a
    file not yet cached failed with "cannot write <file>.lock: Permission denied; ... set ZOO_HOME to a folder you
    can write", though the folder is writable and a lock file needs no writing to lock. A readable one is used now
    (flock locks a read-only file); one this user may not open is named, with its owner and who may remove it. A
    cached file needs no lock: it is served either way."""
    if os.geteuid() != 0:
        pytest.skip("leaving a file as another user (chown) needs root")
    shutil.copy(release.served / FILE, release.folder / FILE)
    home = tmp_path / "home"
    dest = home / "weights" / release.entry.sha256 / FILE
    lock = dest.with_name(FILE + ".lock")

    def theirs(mode: int) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text('{"pid": 4242, "host": "their-host"}')
        os.chown(lock, 65534, 65534)
        lock.chmod(mode)

    theirs(0o644)
    assert _child(as_a_user, NAME, env={"ZOO_HOME": str(home)}) == ["ok", f"  {dest}"]
    theirs(0o600)
    said = _child(as_a_user, NAME, "clean-all", env={"ZOO_HOME": str(home)})
    assert said[0] == "ok" and said[1] == f"  {dest}", said  # cached: no lock taken
    # clean must take the lock to delete: it names the lock file as the pull does, not "a cache it can write"
    assert said[2].startswith(f"ForeignLockError cannot remove {dest}: cannot use the lock file {lock}: "), said
    assert said[2].endswith("once no download of theirs is running") and dest.is_file(), said
    dest.unlink()
    said = _child(as_a_user, NAME, env={"ZOO_HOME": str(home)})
    assert said[0].startswith(f"ForeignLockError cannot use the lock file {lock}: it is another user's, "), said
    assert "(uid 65534), mode 600, and this user may not open it (Permission denied);" in said[0], said
    assert said[0].endswith(f"or an administrator to remove it (rm {lock}) once no download of theirs is running; "
                            "or set ZOO_HOME to a cache of your own"), said
