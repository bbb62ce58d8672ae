"""Pulling over real HTTP (a server on 127.0.0.1 started here): hashes, corruption, cut connections,
resumption, concurrent pulls, offline mode, the mirror variable, and upstream-layout .pth files."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import shutil

import pytest
import torch
import torchvision

import zoo
from zoo import hub


def _publish_tiny(tiny_model: str, tag: str = "v1", num_classes: int = 3):
    torch.manual_seed(0)
    module = zoo.build(tiny_model, num_classes=num_classes)
    entry = hub.add_weights(module, name=f"{tiny_model}.{tag}", config={"num_classes": num_classes},
                            meta={"dataset": "synthetic", "metrics": {"acc": 0.5}})
    return module, entry


def _to_mirror(entry, weights_home, server):
    """Move a shipped file from weights/ to the served folder: it can only come over HTTP now."""
    shutil.move(weights_home / entry.url, server.state.root / entry.url)


@pytest.fixture(scope="module")
def resnet18_pth(tmp_path_factory):
    """A torchvision ResNet18 state dict saved with torch.save under an upstream-style name,
    resnet18-<first 8 hex of its own sha256>.pth, like download.pytorch.org's files."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18()
    folder = tmp_path_factory.mktemp("upstream")
    tmp = folder / "resnet18.pth"
    torch.save(model.state_dict(), tmp)
    prefix = hub.sha256_file(tmp)[:8]
    path = tmp.rename(folder / f"resnet18-{prefix}.pth")
    return path, prefix, model


def test_pull_over_http_matches_hash(tiny_model, weights_home, server, monkeypatch):
    module, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url + "/")
    path = zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(path) == entry.sha256 and path.stat().st_size == entry.size
    assert server.gets(entry.url) == [None]
    assert path == hub.cached_path(entry) and path.parent.name == entry.sha256
    assert (path.parent / (path.name + ".verified")).is_file()
    # the cache is reused: no second request (the keyword is design.md's `weights_name`)
    assert zoo.pull(weights_name=entry.name, progress=False) == path and len(server.gets(entry.url)) == 1
    loaded = zoo.build(tiny_model, weights="v1")
    assert torch.equal(loaded.head.weight, module.head.weight)


def test_corrupted_byte_is_a_mismatch_and_leaves_a_clean_cache(tiny_model, weights_home, server, monkeypatch,
                                                                cached):
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.corrupt_at = entry.size // 2
    with pytest.raises(hub.HashMismatchError) as err:
        zoo.pull(entry.name, progress=False)
    msg = str(err.value)
    assert f"{server.url}/{entry.url}" in msg and entry.sha256 in msg
    bad = bytearray((server.state.root / entry.url).read_bytes())
    bad[entry.size // 2] ^= 0xFF
    assert hashlib.sha256(bad).hexdigest() in msg
    assert [p for p in cached() if not p.name.endswith(".lock")] == []


def test_cut_connection_is_resumed_with_range(tiny_model, weights_home, server, monkeypatch, cached):
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.cut_after, server.state.cuts_left = entry.size // 3, 1
    path = zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(path) == entry.sha256
    assert server.gets(entry.url) == [None, f"bytes={entry.size // 3}-"]  # resumed, not restarted
    assert not [p for p in cached() if p.suffix == ".part"]


def test_cut_connection_without_range_support_retries_cleanly(tiny_model, weights_home, server, monkeypatch):
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.range_support = False
    server.state.cut_after, server.state.cuts_left = entry.size // 2, 2
    path = zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(path) == entry.sha256 and len(server.gets(entry.url)) == 3


def test_a_link_that_keeps_dropping_but_brings_bytes_each_time_finishes(tiny_model, weights_home, server,
                                                                        monkeypatch):
    """Every response cut after a sixth of the file: each attempt resumed with Range and brought more, yet the
    pull gave up after 4 ("the .part holds 1.2 of 1.4 MB"); the count of failures restarts on progress."""
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.cut_after, server.state.cuts_left = entry.size // 6, 1000
    path = zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(path) == entry.sha256 and len(server.gets(entry.url)) >= 6


def test_failing_server_leaves_no_file_then_a_later_pull_resumes(tiny_model, weights_home, server, monkeypatch):
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.cut_after, server.state.cuts_left = 100, 1000
    server.state.range_support = False
    with pytest.raises(hub.DownloadError, match="failed after"):
        zoo.pull(entry.name, progress=False)
    dest = hub.cached_path(entry)
    assert not dest.exists()
    part = dest.with_name(dest.name + ".part")
    assert part.stat().st_size == 100  # kept only under the .part name, for resumption
    server.state.cuts_left, server.state.range_support = 0, True
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256
    assert server.gets(entry.url)[-1] == "bytes=100-" and not part.exists()


def test_kept_bytes_go_once_a_later_pull_copies_the_file_from_a_local_source(tiny_model, weights_home, server,
                                                                             monkeypatch, cached):
    """The ``.part`` a failed HTTP pull kept stayed beside the file a later pull copied from the checkout (or a
    file:// mirror), for good, and ``zoo cache info`` went on calling it a download the next pull resumes."""
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.cut_after, server.state.cuts_left, server.state.range_support = 100, 1000, False
    with pytest.raises(hub.DownloadError, match="failed after"):
        zoo.pull(entry.name, progress=False)
    assert [p.name for p in cached() if p.suffix == ".part"] == [entry.filename + ".part"]
    shutil.copy(server.state.root / entry.url, weights_home / entry.url)  # the checkout has it again
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256
    assert not [p for p in cached() if p.suffix == ".part"]
    assert [i.kind for i in hub.cache_info()] == ["weights"]


def _pull_in_child(name: str, queue) -> None:
    try:
        path = hub.pull(name, progress=False)
        queue.put(("ok", str(path), hub.sha256_file(path)))
    except Exception as err:  # noqa: BLE001  (any failure is reported, so the parent never hangs)
        queue.put(("error", repr(err), ""))


def test_two_processes_pulling_the_same_file(tiny_model, weights_home, server, monkeypatch):
    _, entry = _publish_tiny(tiny_model, num_classes=500)  # ~40 KB
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.delay_s = 0.3  # the first download takes a while, so the second process must wait on it
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_pull_in_child, args=(entry.name, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert [r[0] for r in results] == ["ok", "ok"], results
    assert {r[1] for r in results} == {str(hub.cached_path(entry))}
    assert {r[2] for r in results} == {entry.sha256}
    assert len(server.gets(entry.url)) == 1  # one download; the other process reused it


def test_offline_never_connects_and_says_how_to_get_the_file(tiny_model, weights_home, server, monkeypatch,
                                                              no_network):
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(hub.OfflineError) as err:
        zoo.pull(entry.name, progress=False)
    msg = str(err.value)
    assert "\n" not in msg
    for needle in (entry.url, str(hub.cached_path(entry)), f"zoo pull {entry.name}", "ZOO_WEIGHTS_URL"):
        assert needle in msg
    assert server.state.requests == []
    with pytest.raises(hub.OfflineError):
        zoo.build(tiny_model, weights="v1")
    assert server.state.requests == []


def test_offline_uses_local_sources(tiny_model, weights_home, tmp_path, monkeypatch, no_network):
    """Offline, the checkout's weights/ and a file:// mirror still work: neither is a connection."""
    _, entry = _publish_tiny(tiny_model)
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256  # from the checkout
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    shutil.move(weights_home / entry.url, mirror / entry.url)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", mirror.as_uri())
    path = zoo.pull(entry.name, force=True, progress=False)
    assert hub.sha256_file(path) == entry.sha256


def _upstream_entry(name: str, url: str, prefix: str, num_classes: int = 1000) -> dict:
    return {"name": name, "model": "resnet18", "url": url, "sha256": None, "sha256_prefix": prefix,
            "size": None, "format": "pth", "config": {"num_classes": num_classes},
            "meta": {"license": "BSD-3-Clause"}}


def test_upstream_pth_over_http_prefix_verified_and_loaded(resnet18_pth, weights_home, server):
    path, prefix, reference = resnet18_pth
    shutil.copy(path, server.state.root / path.name)
    url = f"{server.url}/{path.name}"
    hub.update_manifest(lambda e: e.update({
        "resnet18.test-v1": hub.WeightsEntry.from_dict(_upstream_entry("resnet18.test-v1", url, prefix)),
        "resnet18.wrong-v1": hub.WeightsEntry.from_dict(_upstream_entry("resnet18.wrong-v1", url, "0" * 8)),
    }))
    model = zoo.build("resnet18", weights="test-v1").eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.allclose(model(x), reference.eval()(x))
    checks = {c.path: c.status for c in hub.verify_cache()}
    assert checks[hub.cached_path(hub.get_entry("resnet18.test-v1"))] == "prefix-verified"
    with pytest.raises(hub.HashMismatchError, match="expected 00000000"):
        zoo.pull("resnet18.wrong-v1", progress=False)
    # a different num_classes re-initialises the head (the vision family passes reinit=("fc.",))
    with pytest.warns(UserWarning, match="fc.weight"):
        small = zoo.build("resnet18", weights="test-v1", num_classes=5)
    assert small.fc.out_features == 5 and torch.equal(small.conv1.weight, reference.conv1.weight)


def test_upstream_weights_in_torch_hubs_cache_are_taken_offline_verified(resnet18_pth, weights_home, monkeypatch):
    """A torchvision user has the file in ~/.cache/torch/hub/checkpoints already: offline, zoo.build(...,
    weights="imagenet1k-v1") said it was not in zoo's cache. It is taken from there, checked by its hash."""
    path, prefix, reference = resnet18_pth
    url = f"https://download.example.invalid/models/{path.name}"
    hub.update_manifest(lambda e: e.update({
        "resnet18.test-v1": hub.WeightsEntry.from_dict(_upstream_entry("resnet18.test-v1", url, prefix))}))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    torch_cache = hub.store.torch_hub_checkpoints()
    with pytest.raises(hub.OfflineError, match=f"torch.hub's copy is taken too, from {torch_cache}"):
        zoo.pull("resnet18.test-v1", progress=False)
    torch_cache.mkdir(parents=True)
    (torch_cache / path.name).write_bytes(path.read_bytes()[:-1] + b"x")  # a damaged copy is refused
    with pytest.raises(hub.HashMismatchError):
        zoo.pull("resnet18.test-v1", progress=False)
    shutil.copy(path, torch_cache / path.name)
    model = zoo.build("resnet18", weights="test-v1").eval()
    assert torch.equal(model.conv1.weight, reference.conv1.weight)
    assert (torch_cache / path.name).is_file()  # torch's copy stays where torch keeps it


def test_weights_given_by_url(resnet18_pth, tiny_model, weights_home, server):
    path, prefix, _ = resnet18_pth
    shutil.copy(path, server.state.root / path.name)
    url = f"{server.url}/{path.name}"
    # not in the manifest: cached under a hash of the URL, fetched once
    local, entry = hub.resolve(url, model="resnet18")
    assert entry is None and local.parent.parent.name == "urls" and local.name == path.name
    assert hub.resolve(url, model="resnet18")[0] == local and len(server.gets(path.name)) == 1
    # no published sha256 checked it: cache info must not call it verified
    assert {i.path: i.status for i in hub.cache_info()}[local] == "unpublished"
    by_url = zoo.build("resnet18", weights=url)  # cached: still one request
    by_file_url = zoo.build("resnet18", weights=path.as_uri())
    assert len(server.gets(path.name)) == 1
    assert torch.equal(by_url.fc.weight, by_file_url.fc.weight)
    # in the manifest: verified against its entry (and a corrupted file is refused)
    hub.update_manifest(lambda e: e.update({
        "resnet18.test-v1": hub.WeightsEntry.from_dict(_upstream_entry("resnet18.test-v1", url, prefix))}))
    server.state.corrupt_at = 1000
    with pytest.raises(hub.HashMismatchError):
        hub.resolve(url, model="resnet18")
    with pytest.raises(ValueError, match="are for model 'resnet18', not"):
        hub.resolve("resnet18.test-v1", model=tiny_model)


def test_a_url_download_cut_short_without_a_length_never_enters_the_cache(resnet18_pth, weights_home, server):
    """With no Content-Length and no sha256 to check, a dropped connection looks like the end of the file:
    the archive's own structure must say it is whole before it is cached (and marked verified)."""
    path, _, _ = resnet18_pth
    shutil.copy(path, server.state.root / path.name)
    url = f"{server.url}/{path.name}"
    server.state.no_length, server.state.cut_after, server.state.cuts_left = True, path.stat().st_size // 2, 1
    with pytest.raises(hub.DownloadError, match="not a whole weights file") as err:
        hub.resolve(url, model="resnet18")
    assert "ZOO_WEIGHTS_URL" not in str(err.value)  # a mirror serves the manifest's files, not the user's URL
    assert not [p for p in hub.cache_root().rglob(path.name + "*") if not p.name.endswith(".lock")]
    local, _ = hub.resolve(url, model="resnet18")  # the server now sends it whole: one clean download
    assert hub.sha256_file(local) == hub.sha256_file(path)


def test_a_web_page_served_for_a_weights_url_is_called_what_it_may_be(weights_home, server):
    """A 200 HTML page was 'not whole' (it is no truncation) and the error said to set ZOO_WEIGHTS_URL."""
    (server.state.root / "agent.safetensors").write_bytes(b"<html><body>Sign in to download</body></html>")
    with pytest.raises(hub.DownloadError) as err:
        hub.resolve(f"{server.url}/agent.safetensors")
    said = str(err.value)
    assert "not a whole weights file" in said and "a server's web page" in said and "ZOO_WEIGHTS_URL" not in said
    assert not [p for p in hub.cache_root().rglob("agent.safetensors*") if not p.name.endswith(".lock")]


def test_unknown_weights_name_lists_published_tags(tiny_model, weights_home):
    _publish_tiny(tiny_model, tag="cifar10")
    with pytest.raises(KeyError, match="Did you mean 'cifar10'"):
        zoo.build(tiny_model, weights="cifar1O")
    with pytest.raises(KeyError, match="Did you mean 'cifar10'"):  # case aside: it said only "unknown weights"
        zoo.build(tiny_model, weights="CIFAR10")
    # a name typed in part or out of order is found as a model's name is (it said only "no weights named")
    with pytest.raises(KeyError, match=f"Did you mean '{tiny_model}.cifar10'"):
        hub.get_entry("cifar10-tiny")
    with pytest.raises(FileNotFoundError):
        zoo.build(tiny_model, weights="nowhere/w.safetensors")
    for folder in (weights_home, weights_home.as_uri()):  # it exists: "weights file not found" misled
        with pytest.raises(IsADirectoryError, match="is a folder, not a weights file"):
            zoo.build(tiny_model, weights=folder)


@pytest.mark.parametrize(("errno_name", "asked"), [("EAI_NONAME", 1), ("EAI_AGAIN", None)])
def test_a_host_the_resolver_says_does_not_exist_is_asked_once(errno_name, asked, weights_home, monkeypatch):
    """Offline, the resolver answers "Name or service not known" at once: retrying it only made every pull (and
    each `zoo demo` step of an installed package) wait 7 s; a temporary failure is still retried."""
    import socket

    from zoo.hub import fetch

    calls = []

    def resolver(host, *args, **kwargs):
        calls.append(host)
        raise socket.gaierror(getattr(socket, errno_name), "resolver says no")

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    monkeypatch.setattr(fetch, "BACKOFF_S", 0.0)
    with pytest.raises(hub.DownloadError) as err:
        hub.resolve("http://weights.example.invalid/w.safetensors", model="resnet18")
    assert len(calls) == (asked or fetch.RETRIES)
    assert ("cannot resolve host 'weights.example.invalid'" in str(err.value)) == (asked == 1)


def test_a_url_pins_its_file_with_a_sha256_fragment(resnet18_pth, weights_home, server):
    """pip's `#sha256=` on a weights URL: a user's own URL is checked by full sha256 too (it was only recorded on
    arrival), and so is the cached file on a later load."""
    path, _, _ = resnet18_pth
    shutil.copy(path, server.state.root / path.name)
    good = hub.sha256_file(path)
    url = f"{server.url}/{path.name}"
    local, _ = hub.resolve(f"{url}#sha256={good.upper()}", model="resnet18")  # as sha256sum or a web page gives it
    assert hub.sha256_file(local) == good and len(server.gets(path.name)) == 1
    assert hub.resolve(f"{url}#sha256={good}", model="resnet18")[0] == local  # cached, and its arrival hash agrees
    assert len(server.gets(path.name)) == 1
    wrong = "0" * 64
    with pytest.raises(hub.HashMismatchError, match=f"expected {wrong}"):
        hub.resolve(f"{url}#sha256={wrong}", model="resnet18")  # the cached copy is not it, nor is the served file
    assert hub.resolve(f"{url}#sha256={good}", model="resnet18")[0] == local  # the good copy stayed in the cache
    assert hub.sha256_file(local) == good
    with pytest.raises(ValueError, match=r"pins its file as #sha256=<64 hex digits>.*got #md5=abc"):
        hub.resolve(f"{url}#md5=abc", model="resnet18")
    assert zoo.build("resnet18", weights=f"{path.as_uri()}#sha256={good}") is not None
    with pytest.raises(hub.HashMismatchError, match=f"is not the file .* pins: sha256 {good}, expected {wrong}"):
        zoo.build("resnet18", weights=f"{path.as_uri()}#sha256={wrong}")


def test_a_pinned_url_waiting_on_an_unpinned_pull_of_it_still_checks_its_pin(resnet18_pth, weights_home, server):
    """A pinned pull that waited for an unpinned pull of the same URL took the file that pull brought (whatever the
    server sent) without checking it against its pin; alone, the same pin was refused."""
    import threading
    import time

    path, _, _ = resnet18_pth
    shutil.copy(path, server.state.root / path.name)
    served = hub.sha256_file(path)
    url = f"{server.url}/{path.name}"
    server.state.delay_s = 0.002  # about 1.5 s for the file: the pinned call starts while it downloads
    got = {}
    unpinned = threading.Thread(target=lambda: got.setdefault("path", hub.resolve(url, model="resnet18")[0]))
    unpinned.start()
    while not server.gets(path.name) and unpinned.is_alive():
        time.sleep(0.005)
    assert unpinned.is_alive(), "the unpinned pull finished before the pinned one started: slow the server down"
    wrong = "0" * 64
    with pytest.raises(hub.HashMismatchError, match=f"expected {wrong}"):
        hub.resolve(f"{url}#sha256={wrong}", model="resnet18")
    unpinned.join()
    assert hub.sha256_file(got["path"]) == served  # the unpinned pull's file stayed as it came
    assert len(server.gets(path.name)) == 2  # the pinned call asked the server again, and refused what came


def test_a_body_cut_short_without_a_length_is_resumed_to_the_files_size(tiny_model, weights_home, server,
                                                                         monkeypatch, cached):
    """With no Content-Length, a dropped connection looked like the end of the body: the manifest's size was not
    consulted, the short file failed its hash and was thrown away as wrong bytes, with no retry and no Range."""
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.no_length, server.state.cut_after, server.state.cuts_left = True, entry.size // 3, 1
    path = zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(path) == entry.sha256
    assert server.gets(entry.url) == [None, f"bytes={entry.size // 3}-"]  # resumed, not restarted
    assert not [p for p in cached() if p.suffix == ".part"]


def test_a_server_whose_file_is_shorter_without_a_length_is_given_up(tiny_model, weights_home, server, monkeypatch):
    """Each whole short body counts as cut short; the resume past its end answers 416 and restarts from 0, so an
    attempt that only brings back as many bytes as before is no progress, and the pull ends."""
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    served = server.state.root / entry.url
    served.write_bytes(served.read_bytes()[: entry.size // 2])
    server.state.no_length = True
    with pytest.raises(hub.DownloadError, match=f"closed after {entry.size // 2} of the file's {entry.size} bytes"):
        zoo.pull(entry.name, progress=False)
    from zoo.hub import fetch

    assert len(server.gets(entry.url)) <= 2 * (fetch.RETRIES + 1)


def test_a_file_mirror_in_the_home_folder_and_one_that_names_a_host(tiny_model, weights_home, tmp_path,
                                                                      monkeypatch):
    """ZOO_WEIGHTS_URL=file://~/mirror read "~" as a host and looked in /mirror; file://relative/x looked in /x,
    without a word."""
    _, entry = _publish_tiny(tiny_model)
    home = tmp_path / "home"
    (home / "mirror").mkdir(parents=True)
    shutil.move(weights_home / entry.url, home / "mirror" / entry.url)  # only the mirror has it now
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ZOO_WEIGHTS_URL", "file://~/mirror")
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256
    monkeypatch.setenv("ZOO_WEIGHTS_URL", "file://mirror/x")
    with pytest.raises(ValueError, match=r"names a host \('mirror'\).*file:///absolute/path"):
        zoo.pull(entry.name, progress=False, force=True)


def test_a_mirror_that_lacks_the_file_is_named_not_suggested(monkeypatch):
    """With ZOO_WEIGHTS_URL set to a mirror that lacked the file, the error said to set ZOO_WEIGHTS_URL."""
    from zoo.hub.fetch import _no_source_error

    monkeypatch.delenv("ZOO_WEIGHTS_URL", raising=False)
    assert "set ZOO_WEIGHTS_URL to a mirror" in str(_no_source_error("w", "0" * 64, ["HTTP 404"], False, False, 0, ""))
    monkeypatch.setenv("ZOO_WEIGHTS_URL", "file:///srv/mirror")
    said = str(_no_source_error("w", "0" * 64, ["file:///srv/mirror/w: HTTP 404"], False, False, 0, "",
                                not_found=["file:///srv/mirror/w"]))
    assert "The mirror ZOO_WEIGHTS_URL=file:///srv/mirror does not have it: add the file there" in said
    assert "set ZOO_WEIGHTS_URL to a mirror" not in said


def test_a_mirror_whose_transfer_failed_is_not_said_to_lack_the_file(tiny_model, weights_home, server, monkeypatch):
    """A mirror answering HTTP 500 (or dropping the connection) was said not to have the file, with the hint to
    unset it and download from the original URL, which the same call had tried."""
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.cut_after, server.state.cuts_left, server.state.range_support = 10, 1000, False
    with pytest.raises(hub.DownloadError) as err:
        zoo.pull(entry.name, progress=False)
    assert "failed after" in str(err.value) and "does not have it" not in str(err.value)
    assert "unset it" not in str(err.value)


def test_a_server_sending_more_than_the_file_is_stopped_at_its_size(tiny_model, weights_home, server, monkeypatch,
                                                                    cached):
    """A server streaming without end (no Content-Length) was read to its end before the hash refused it: a
    wrong mirror could fill the disk, and the error then blamed the free space."""
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    served = server.state.root / entry.url
    served.write_bytes(served.read_bytes() * 40)  # 40x the manifest's size
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    server.state.no_length = True
    with pytest.raises(hub.DownloadError, match=rf"the server sent more than the file's {entry.size} bytes"):
        zoo.pull(entry.name, progress=False)
    assert cached() == [] or all(p.suffix == ".lock" for p in cached())  # nothing kept, not even a .part
    server.state.no_length = False  # announced: refused before a byte
    with pytest.raises(hub.DownloadError, match=rf"announced {40 * entry.size} bytes for a file of {entry.size}"):
        zoo.pull(entry.name, progress=False)


def test_the_running_hash_is_hashlibs_over_blocks_of_every_size(tmp_path):
    """Large blocks are hashed on a helper thread while the next one streams in: the digest must still see every
    block once, in order (a small block hashed while a large one is in flight would reorder them), and a reset or
    a re-sync from the .part file starts over from what is on disk."""
    from zoo.hub.fetch import CHUNK, OVERLAP_MIN, _Digest

    rng = torch.Generator().manual_seed(0)
    sizes = [1, OVERLAP_MIN - 1, OVERLAP_MIN, 7, CHUNK, 3, 2 * CHUNK + 5, OVERLAP_MIN + 1, 0, 11]
    blocks = [bytes(torch.randint(0, 256, (n,), dtype=torch.uint8, generator=rng).tolist()) for n in sizes]
    with _Digest() as digest:
        for block in blocks:
            digest.update(block)
        assert digest.n == sum(sizes) and digest.hexdigest() == hashlib.sha256(b"".join(blocks)).hexdigest()
        digest.reset()
        digest.update(blocks[4])
        part = tmp_path / "file.part"
        part.write_bytes(blocks[6])  # the file on disk is not what the running hash saw: sync re-reads it
        digest.sync(part)
        assert digest.hexdigest() == hashlib.sha256(blocks[6]).hexdigest()


def test_a_pull_that_fails_its_hash_leaves_no_hashing_thread(resnet18_pth, weights_home, server):
    """The helper thread of the running hash ends with the pull, the failed ones included."""
    import threading

    path, _, _ = resnet18_pth
    shutil.copy(path, server.state.root / path.name)
    with pytest.raises(hub.HashMismatchError):
        hub.resolve(f"{server.url}/{path.name}#sha256={'0' * 64}", model="resnet18")
    assert [t.name for t in threading.enumerate() if t.name.startswith("zoo-sha256")] == []


def test_a_corrupt_cached_file_offline_is_called_corrupt_not_missing(tiny_model, weights_home, server, monkeypatch):
    """The mend (fetch it again) cannot run offline: the error said the file was 'not in the cache', under a
    chained CorruptCacheError, for a file that is there with other bytes."""
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    path = zoo.pull(entry.name, progress=False)
    with open(path, "r+b") as fh:
        fh.seek(entry.size - 3)
        byte = fh.read(1)
        fh.seek(entry.size - 3)
        fh.write(bytes([byte[0] ^ 0x01]))
    requests = len(server.state.requests)
    for offline in ({"local_files_only": True}, {}):
        if not offline:
            monkeypatch.setenv("ZOO_OFFLINE", "1")
        with pytest.raises(hub.CorruptCacheError) as err:
            zoo.pull(entry.name, progress=False, **offline)
        msg = str(err.value)
        why = "local_files_only=True" if offline else "ZOO_OFFLINE=1"
        assert "not in the cache" not in msg and err.value.__cause__ is None and err.value.__suppress_context__
        for needle in (str(path), "changed on disk", f"{why} forbids fetching it again",
                       f"zoo pull {entry.name} --force", "ZOO_WEIGHTS_URL"):
            assert needle in msg
    assert len(server.state.requests) == requests  # offline: no connection
    monkeypatch.delenv("ZOO_OFFLINE")
    with pytest.warns(UserWarning, match="changed on disk after it was verified; fetched it again"):
        assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256


def test_offline_with_a_file_mirror_that_lacks_the_file_names_what_was_tried(tiny_model, weights_home, tmp_path,
                                                                              server, monkeypatch, no_network):
    """The message said to set ZOO_WEIGHTS_URL to a mirror that holds the file, not that the one set was tried."""
    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    doc = json.loads((weights_home / "manifest.json").read_text())
    doc["release_url"] = server.url + "/"  # a network source, which offline leaves untried
    (weights_home / "manifest.json").write_text(json.dumps(doc))
    (tmp_path / "empty_mirror").mkdir()
    monkeypatch.setenv("ZOO_WEIGHTS_URL", (tmp_path / "empty_mirror").as_uri())
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(hub.OfflineError, match=rf"\(tried: .*empty_mirror/{entry.url}: .*does not exist"):
        zoo.pull(entry.name, progress=False)


def test_a_download_is_synced_to_disk_before_it_is_renamed_into_the_cache(tiny_model, weights_home, server,
                                                                          monkeypatch):
    """Before: the .part was renamed unsynced, then the .verified marker beside it synced: after a power cut the
    cache could hold a durable name and marker over bytes that never reached the disk."""
    from zoo import fs

    _, entry = _publish_tiny(tiny_model)
    _to_mirror(entry, weights_home, server)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url + "/")
    events = []
    real_fsync, real_replace = fs.fsync_file, __import__("os").replace
    monkeypatch.setattr(fs, "fsync_file", lambda p: (events.append(("fsync", str(p))), real_fsync(p))[1])
    monkeypatch.setattr("zoo.hub.fetch.os.replace", lambda a, b: (events.append(("replace", str(a))), real_replace(a, b))[1])
    zoo.pull(entry.name, progress=False)
    part = next(a for kind, a in events if kind == "replace" and a.endswith(".part"))
    assert events.index(("fsync", part)) < events.index(("replace", part))


def test_a_shipped_file_copied_elsewhere_is_its_entry_by_path_file_url_or_http_url(tiny_model, weights_home, server,
                                                                                   tmp_path, monkeypatch):
    """Before: an entry was found by where its file sits (the cache, the checkout), never by its bytes: a copy
    (a release or mirror folder, a manual download, an HF export, a URL) loaded with no entry, so without its
    class names and preprocessing (resnet18.cifar10 by path: ImageNet's statistics; td3 files' amp="bf16")."""
    _, entry = _publish_tiny(tiny_model)
    copy = tmp_path / "elsewhere" / "downloaded.safetensors"
    copy.parent.mkdir()
    shutil.copy(weights_home / entry.url, copy)
    assert hub.resolve(copy, model=tiny_model)[1] == entry
    assert hub.resolve(copy.as_uri(), model=tiny_model)[1] == entry
    assert hub.resolve(f"{copy.as_uri()}#sha256={entry.sha256}", model=tiny_model)[1] == entry
    shutil.copy(copy, server.state.root / "some-name.safetensors")
    assert hub.resolve(server.url + "/some-name.safetensors", model=tiny_model)[1] == entry
    with pytest.raises(ValueError, match=rf"weights {entry.name!r} are for model {tiny_model!r}, not 'resnet18'"):
        hub.resolve(copy, model="resnet18")
    other = tmp_path / "other.safetensors"  # another file of the same size is no entry's
    other.write_bytes(bytes(copy.stat().st_size))
    assert hub.resolve(other, model=tiny_model) == (other, None)


def _tiny_file(path, seed: int):
    """A real safetensors weights file; two seeds give two versions of the same size."""
    generator = torch.Generator().manual_seed(seed)
    return hub.save_weights({"layer.weight": torch.randn(64, 512, generator=generator),
                             "layer.bias": torch.randn(64, generator=generator)}, path)


@pytest.mark.parametrize("etag", [False, True], ids=["no-validator", "etag"])
def test_a_url_whose_file_changed_is_downloaded_again_not_joined_to_the_kept_bytes(etag, weights_home, server, tmp_path):
    """Before: the bytes an interrupted pull of a URL kept (no sha256 to check them) were resumed with a Range
    request after the file behind the URL changed: the cache got the old file's first half joined to the new one's
    second half (same size, a whole-looking archive), marked verified. A server that sends an ETag is asked with
    If-Range and sends the new file whole; one that sends no validator cannot say, so the pull starts again."""
    name = "agent.safetensors"
    old, new = _tiny_file(tmp_path / "old.safetensors", 0), _tiny_file(tmp_path / "new.safetensors", 1)
    assert old.stat().st_size == new.stat().st_size and old.read_bytes() != new.read_bytes()
    shutil.copy(old, server.state.root / name)
    server.state.etag = etag
    half = old.stat().st_size // 2
    server.state.cut_after, server.state.cuts_left, server.state.range_support = half, 1000, False
    url = f"{server.url}/{name}"
    with pytest.raises(hub.DownloadError, match="failed after"):
        hub.resolve(url)
    assert [p.stat().st_size for p in hub.cache_root().rglob(name + ".part")] == [half]  # the old file's first half
    shutil.copy(new, server.state.root / name)  # the publisher replaces the file behind the URL
    server.state.cuts_left, server.state.range_support = 0, True
    local, _ = hub.resolve(url)
    assert local.read_bytes() == new.read_bytes()
    assert not [p for p in hub.cache_root().rglob(name + ".*") if p.suffix in (".part", ".resume")]
    last_range, last_if_range = server.gets(name)[-1], server.state.if_ranges[-1]
    if etag:  # asked for the rest of the same version; the server said it changed and sent the new one whole
        assert last_range == f"bytes={half}-" and last_if_range == f'"{hub.sha256_file(old)}"'
    else:  # nothing to tell the versions apart: the kept bytes were not resumed
        assert last_range is None


@pytest.mark.parametrize("rows", [64, 80], ids=["same-size", "other-size"])
def test_a_server_that_ignores_if_range_gets_the_changed_file_restarted_not_joined(rows, weights_home, server,
                                                                                   tmp_path):
    """A server (or a cache before it) that ignores If-Range answers a resume with the rest of the file as it is
    now. Its 206 names the new version (ETag) and, if the size changed, the new size (Content-Range): either tells
    the kept bytes are another version's. Before: a new file of the same size was joined to the old one's first
    half and marked verified (the URL has no sha256 to catch it)."""
    name = "agent.safetensors"
    generator = torch.Generator().manual_seed(1)
    old = _tiny_file(tmp_path / "old.safetensors", 0)
    new = hub.save_weights({"layer.weight": torch.randn(rows, 512, generator=generator),
                            "layer.bias": torch.randn(rows, generator=generator)}, tmp_path / "new.safetensors")
    assert (old.stat().st_size == new.stat().st_size) == (rows == 64)
    shutil.copy(old, server.state.root / name)
    server.state.etag, server.state.ignore_if_range = True, True
    half = old.stat().st_size // 2
    server.state.cut_after, server.state.cuts_left, server.state.range_support = half, 1000, False
    url = f"{server.url}/{name}"
    with pytest.raises(hub.DownloadError, match="failed after"):  # keeps the old file's first half
        hub.resolve(url)
    shutil.copy(new, server.state.root / name)
    server.state.cuts_left, server.state.range_support = 0, True
    local, _ = hub.resolve(url)
    assert local.read_bytes() == new.read_bytes()
    assert [r for _, r in server.state.requests[-2:]] == [f"bytes={half}-", None]  # resumed, refused, restarted


def test_an_upstream_file_known_by_its_hash_prefix_is_its_entry_by_path_or_by_a_url_with_a_query(
        resnet18_pth, weights_home, server, tmp_path):
    """Before: an upstream entry with only a hash prefix (no sha256, no size: torchvision's resnet18-<prefix>.pth)
    was never found for a downloaded copy given by path, and its URL with ``?download=1`` was not its URL: the
    model loaded without the entry, so without its class names (label '238' for 'Greater Swiss Mountain dog')."""
    path, prefix, _ = resnet18_pth
    shutil.copy(path, server.state.root / path.name)
    url = f"{server.url}/{path.name}"
    hub.update_manifest(lambda e: e.update({
        "resnet18.test-v1": hub.WeightsEntry.from_dict(_upstream_entry("resnet18.test-v1", url, prefix))}))
    entry = hub.get_entry("resnet18.test-v1")
    copy = tmp_path / "downloads" / path.name  # a manual download, under the publisher's file name
    copy.parent.mkdir()
    shutil.copy(path, copy)
    assert hub.resolve(copy, model="resnet18") == (copy, entry)
    renamed = copy.with_name("resnet18.pth")  # no name to tie it to the entry: the prefix alone proves nothing
    copy.rename(renamed)
    assert hub.resolve(renamed, model="resnet18") == (renamed, None)
    assert hub.resolve(f"{url}?download=1", model="resnet18") == (hub.cached_path(entry), entry)
    assert hub.resolve(f"{url}#sha256={hub.sha256_file(path)}", model="resnet18")[1] == entry
    with pytest.raises(hub.HashMismatchError, match=f"pins sha256 {'0' * 64}, but it is the file of resnet18.test-v1"):
        hub.resolve(f"{url}#sha256={'0' * 64}", model="resnet18")


def test_a_signed_mirror_url_keeps_its_query_after_the_file_name(tiny_model, weights_home, server, monkeypatch):
    """Before: ZOO_WEIGHTS_URL=https://host/zoo?sig=abc got the file name appended inside the query
    (``/zoo?sig=abc/<file>``): the server saw the folder, answered 404, and the mirror was said to lack the file."""
    _, entry = _publish_tiny(tiny_model)
    (server.state.root / "zoo").mkdir()
    shutil.move(weights_home / entry.url, server.state.root / "zoo" / entry.url)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", f"{server.url}/zoo?sig=abc")
    path = zoo.pull(entry.name, progress=False)
    assert hub.sha256_file(path) == entry.sha256
    assert [p for p, _ in server.state.requests] == [f"/zoo/{entry.url}?sig=abc"]
    (server.state.root / "zoo" / entry.url).unlink()  # a mirror that lacks it is still said to
    with pytest.raises(hub.DownloadError, match=rf"The mirror ZOO_WEIGHTS_URL={server.url}/zoo\?sig=abc does not "):
        zoo.pull(entry.name, progress=False, force=True)
