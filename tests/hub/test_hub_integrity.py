"""Nothing silent in the hub (issue #16): verified loads, non-finite weights, corrupt files, ZOO_OFFLINE and
ZOO_TIMEOUT parsing, a stalled server, no silent re-publish; and (issue #14) the content-keyed cache, the
release host, `zoo weights release` and per-call local_files_only."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

import zoo
from zoo import hub
from zoo.cli import main
from zoo.hub import fetch as fetch_mod


def _publish(tiny_model: str, tag: str = "v1", num_classes: int = 3, seed: int = 0, **kw):
    torch.manual_seed(seed)
    return hub.add_weights(zoo.build(tiny_model, num_classes=num_classes), name=f"{tiny_model}.{tag}",
                           config={"num_classes": num_classes}, meta={"dataset": "synthetic"}, **kw)


def _flip_byte_keep_mtime(path, offset: int) -> None:
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 0x01]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: only the bytes differ


def test_a_flipped_byte_in_the_cache_is_caught_on_load(tiny_model, weights_home, capsys):
    entry = _publish(tiny_model)
    path = zoo.pull(entry.name, progress=False)
    _flip_byte_keep_mtime(path, entry.size - 3)
    with pytest.raises(hub.CorruptCacheError) as err:
        zoo.build(tiny_model, weights="v1")
    msg = str(err.value)
    assert str(path) in msg and entry.sha256 in msg and f"Re-pull it with `zoo pull {entry.name}`" in msg
    # pull mends the cache, saying so (it failed without --force, though the error named pull as the fix)
    with pytest.warns(UserWarning, match="do not match .*fetched it again"):
        assert main(["pull", entry.name, "-q"]) == 0
    assert hub.sha256_file(path) == entry.sha256 and zoo.build(tiny_model, weights="v1") is not None


def test_zoo_pull_says_how_the_hash_was_checked(tiny_model, weights_home, capsys):
    entry = _publish(tiny_model)
    assert main(["pull", entry.name, "-q"]) == 0
    assert "(downloaded, sha256 ok)" in capsys.readouterr().out


def test_zoo_pull_that_waited_on_another_download_does_not_say_it_downloaded(tiny_model, weights_home, tmp_path,
                                                                               capsys):
    import threading

    entry = _publish(tiny_model)
    other = zoo.pull(entry.name, cache_dir=tmp_path / "other", progress=False)  # "another process's" bytes
    dest = hub.cached_path(entry)
    dest.parent.mkdir(parents=True, exist_ok=True)
    codes = []
    with fetch_mod.download_lock(dest):  # the other process holds the download lock
        waiter = threading.Thread(target=lambda: codes.append(main(["pull", entry.name, "-q"])))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive(), "the pull should wait for the lock"
        shutil.copyfile(other, dest)  # ... and puts the file in place before releasing it
    waiter.join(30)
    out = capsys.readouterr().out
    assert codes == [0] and "fetched by another process while this one waited" in out and "downloaded" not in out
    assert main(["pull", entry.name, "-q"]) == 0 and "(cached, sha256 ok" in capsys.readouterr().out
    assert main(["pull", entry.name, "-q"]) == 0
    assert "(cached, sha256 ok (verified on arrival, file unchanged since))" in capsys.readouterr().out
    os.chmod(hub.cached_path(entry), 0o644)  # any change to the file's inode invalidates the marker
    assert main(["pull", entry.name, "-q"]) == 0
    assert "(cached, sha256 ok (re-hashed now))" in capsys.readouterr().out


def test_non_finite_weights_are_refused_with_a_re_pull_hint(tiny_model, weights_home, tmp_path):
    torch.manual_seed(0)
    module = zoo.build(tiny_model)
    with torch.no_grad():
        module.head.weight[0, 0] = float("nan")
        module.head.bias[0] = float("inf")
    path = hub.save_weights(module, tmp_path / "diverged.safetensors")
    with pytest.raises(hub.CorruptWeightsError) as err:
        zoo.build(tiny_model, weights=str(path))
    assert "head.weight (1 values)" in str(err.value) and "head.bias" in str(err.value)
    with pytest.raises(hub.CorruptWeightsError, match="non-finite"):
        hub.add_weights(module, name=f"{tiny_model}.nan", config={})  # never published either
    assert torch.isnan(hub.load_state_dict(path, check_finite=False)["head.weight"][0, 0])


def test_a_td3_file_with_nan_weights_does_not_evaluate_to_nan(tmp_path):
    agent = zoo.build("td3")
    with torch.no_grad():
        next(agent.actor.parameters()).fill_(float("nan"))
    path = tmp_path / "td3-nan.safetensors"
    agent.save(path)
    with pytest.raises(hub.CorruptWeightsError, match="non-finite"):
        zoo.build("td3", weights=str(path))


@pytest.mark.parametrize("damage", ["empty", "truncated", "header"])
def test_corrupt_files_are_named_errors_not_tracebacks(tiny_model, weights_home, tmp_path, damage):
    torch.manual_seed(0)
    good = hub.save_weights(zoo.build(tiny_model), tmp_path / "good.safetensors").read_bytes()
    path = tmp_path / f"{damage}.safetensors"
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    else:  # a header that says JSON but is not
        n = int.from_bytes(good[:8], "little")
        path.write_bytes(good[:8] + b"{" + b"\xff" * (n - 1) + good[8 + n:])
    with pytest.raises(hub.CorruptWeightsError) as err:
        zoo.build(tiny_model, weights=str(path))
    assert str(path) in str(err.value)


def test_a_corrupted_url_download_in_the_cache_is_caught(resnet18_pth_small, server):
    _, url = resnet18_pth_small(server)
    local, _ = hub.resolve(url, model="resnet18")
    _flip_byte_keep_mtime(local, 200)
    with pytest.raises(hub.CorruptCacheError, match="changed on disk"):
        hub.resolve(url, model="resnet18")


@pytest.fixture
def resnet18_pth_small(tmp_path):
    def make(server):
        import torchvision

        torch.manual_seed(0)
        path = server.state.root / "r18.pth"
        torch.save(torchvision.models.resnet18(num_classes=2).state_dict(), path)
        return path, f"{server.url}/{path.name}"

    return make


@pytest.mark.parametrize("value, is_offline", [
    ("1", True), ("true", True), ("YES", True), ("on", True),
    ("0", False), ("false", False), ("no", False), ("off", False), ("", False), (" Off ", False),
])
def test_zoo_offline_values(monkeypatch, value, is_offline):
    monkeypatch.setenv("ZOO_OFFLINE", value)
    assert fetch_mod.offline() is is_offline


def test_zoo_offline_nonsense_is_an_error(tiny_model, weights_home, monkeypatch):
    entry = _publish(tiny_model)
    monkeypatch.setenv("ZOO_OFFLINE", "maybe")
    with pytest.raises(ValueError, match="ZOO_OFFLINE='maybe'"):
        zoo.pull(entry.name, progress=False)


def test_offline_off_means_online(tiny_model, weights_home, server, monkeypatch):
    entry = _publish(tiny_model)
    shutil.move(weights_home / entry.url, server.state.root / entry.url)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    monkeypatch.setenv("ZOO_OFFLINE", "off")
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256


def test_local_files_only_per_call(tiny_model, weights_home, server, monkeypatch, no_network):
    entry = _publish(tiny_model)
    shutil.move(weights_home / entry.url, server.state.root / entry.url)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    with pytest.raises(hub.OfflineError, match="local_files_only=True"):
        zoo.pull(entry.name, progress=False, local_files_only=True)
    with pytest.raises(hub.OfflineError):
        zoo.build(tiny_model, weights="v1", local_files_only=True)
    assert server.state.requests == []


def _stalling(tiny_model, weights_home, server, monkeypatch, stalls):
    entry = _publish(tiny_model, num_classes=3000)
    shutil.move(weights_home / entry.url, server.state.root / entry.url)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    monkeypatch.setenv("ZOO_TIMEOUT", "0.5")
    server.state.stalls, server.state.stall_s = [s if s >= 0 else entry.size // 3 for s in stalls], 3.0
    return entry, hub.cached_path(entry).with_name(entry.filename + ".part")


def test_a_stalled_server_fails_fast_and_the_bytes_are_kept(tiny_model, weights_home, server, monkeypatch):
    # the answer stops after a third of the file, and the server goes silent
    entry, part = _stalling(tiny_model, weights_home, server, monkeypatch, [-1])
    with pytest.raises(hub.DownloadError) as err:
        zoo.pull(entry.name, progress=False)
    msg = str(err.value)
    assert "stalled" in msg and "ZOO_TIMEOUT" in msg and str(part) in msg, msg
    third = entry.size // 3
    assert server.gets(entry.url) == [None]  # silence fails the pull: no second try
    assert part.stat().st_size == third
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256
    assert server.gets(entry.url)[-1] == f"bytes={third}-" and not part.exists()  # resumed from the kept bytes


def test_a_server_silent_after_each_few_bytes_fails_the_pull_at_once(tiny_model, weights_home, server, monkeypatch):
    """Before: a server that sent a few bytes and then went silent was asked again, and again: each answer's bytes
    counted as progress, which reset the retries and the backoff, so a server sending 1000 bytes per silence kept a
    pull going for hours (the README says a server silent for $ZOO_TIMEOUT seconds fails the pull at once)."""
    entry, part = _stalling(tiny_model, weights_home, server, monkeypatch, [200] * 8)
    with pytest.raises(hub.DownloadError) as err:
        zoo.pull(entry.name, progress=False)
    msg = str(err.value)
    for needle in (f"{server.url}/{entry.url}", "200 bytes", "ZOO_TIMEOUT=0.5", str(part)):
        assert needle in msg, msg
    assert len(server.gets(entry.url)) == 1 and part.stat().st_size == 200


def test_zoo_timeout_must_be_a_positive_number(monkeypatch):
    monkeypatch.setenv("ZOO_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="ZOO_TIMEOUT='soon'"):
        fetch_mod.timeout_s()


def test_zoo_timeout_inf_is_no_timeout_and_a_huge_one_is_refused_by_name(tiny_model, weights_home, server,
                                                                           monkeypatch):
    """Before: ZOO_TIMEOUT=inf (or 1e30) reached the socket and every pull failed with a raw OverflowError,
    "timestamp out of range for platform time_t", naming neither the variable nor its value."""
    entry = _publish(tiny_model)
    shutil.move(weights_home / entry.url, server.state.root / entry.url)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", server.url)
    monkeypatch.setenv("ZOO_TIMEOUT", "inf")
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256
    monkeypatch.setenv("ZOO_TIMEOUT", "1e30")
    with pytest.raises(ValueError, match=r"ZOO_TIMEOUT='1e30': expected a positive number of seconds, at most 1e\+09 "
                                         r"\(or inf for no timeout\)"):
        zoo.pull(entry.name, progress=False, force=True)
    assert len(server.gets(entry.url)) == 1  # refused before any connection


def test_publishing_an_existing_name_needs_force(tiny_model, weights_home, tmp_path, capsys):
    first = _publish(tiny_model)
    with pytest.raises(hub.ManifestError, match="already published.*force=True"):
        _publish(tiny_model, seed=1)
    assert hub.get_entry(first.name) == first and hub.sha256_file(weights_home / first.url) == first.sha256
    src = hub.save_weights(zoo.build(tiny_model), tmp_path / "other.safetensors")
    assert main(["weights", "add", str(src), "--name", first.name, "--config", "num_classes=3"]) == 2
    assert "--force" in capsys.readouterr().err
    old_cached = zoo.pull(first.name, progress=False)
    second = _publish(tiny_model, seed=1, force=True)
    assert second.sha256 != first.sha256 and hub.get_entry(first.name) == second
    # keyed by content: the re-published tag has its own place, never confused with the old file
    new_cached = zoo.pull(first.name, progress=False)
    assert new_cached != old_cached and hub.sha256_file(new_cached) == second.sha256
    assert hub.sha256_file(old_cached) == first.sha256


def test_release_folder_served_as_the_release_host(tiny_model, weights_home, server, tmp_path, monkeypatch):
    entry = _publish(tiny_model)
    out = tmp_path / "release"
    assert main(["weights", "release", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(["SHA256SUMS", "manifest.json", entry.url])
    assert (out / "SHA256SUMS").read_text() == f"{entry.sha256}  {entry.url}\n"
    # an installation whose only source is the manifest's release_url
    shutil.copytree(out, server.state.root, dirs_exist_ok=True)
    doc = json.loads((weights_home / "manifest.json").read_text())
    doc["release_url"] = server.url + "/"
    (weights_home / "manifest.json").write_text(json.dumps(doc))
    (weights_home / entry.url).unlink()
    assert hub.release_url() == server.url + "/"
    assert hub.sha256_file(zoo.pull(entry.name, progress=False)) == entry.sha256
    assert server.gets(entry.url) == [None]


def test_a_release_from_a_bad_file_keeps_the_good_one_an_earlier_release_wrote(tiny_model, weights_home, tmp_path,
                                                                                capsys):
    """The release copied the source over ``OUT/<file>`` first and checked its hash after, deleting on a mismatch:
    a second release from a corrupted weights/ lost the good file the first one had put there."""
    entry = _publish(tiny_model)
    out = tmp_path / "release"
    assert main(["weights", "release", str(out)]) == 0
    good = (out / entry.url).read_bytes()
    shipped = weights_home / entry.url
    bad = bytearray(shipped.read_bytes())
    bad[len(bad) // 2] ^= 0xFF  # the same size: only the hash can tell
    shipped.write_bytes(bytes(bad))
    capsys.readouterr()
    assert main(["weights", "release", str(out)]) == 2
    said = capsys.readouterr().err
    assert f"sha256 {hub.sha256_file(shipped)}, the entry {entry.sha256}" in said and "was left as it was" in said
    assert (out / entry.url).read_bytes() == good
    shipped.write_bytes(b"version https://git-lfs.github.com/spec/v1\n")  # a pointer: refused by its size
    assert main(["weights", "release", str(out)]) == 2
    assert f"bytes, the entry {entry.size}" in capsys.readouterr().err
    assert (out / entry.url).read_bytes() == good
    assert sorted(p.name for p in out.iterdir()) == sorted(["SHA256SUMS", "manifest.json", entry.url])


def test_a_missing_manifest_is_an_error_not_an_empty_zoo(monkeypatch, tmp_path):
    from zoo.hub import manifest

    monkeypatch.setattr(manifest, "PACKAGE_MANIFEST", tmp_path / "gone" / "manifest.json")
    with pytest.raises(hub.ManifestError, match="manifest .* is missing .*reinstall"):
        zoo.list_weights()
    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(tmp_path / "typo"))
    with pytest.raises(hub.ManifestError, match="does not exist"):
        zoo.list_weights()
    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(tmp_path))  # a workspace with nothing published yet
    assert zoo.list_weights() == []


def test_publishing_a_file_leaves_the_publishers_run_time_settings_out_of_the_entry(weights_home, tmp_path):
    """Before: `zoo weights add FILE` copied the file's whole config into the entry, the publisher's amp="bf16" and
    device with it: everyone building the tag computed in bf16 (18x slower, with a warning, on a CPU without native
    bf16), unlike the shipped td3 entries, which name only the env and the preset."""
    from safetensors.torch import load_file, save_file

    agent = zoo.build("td3", env="Pendulum-v1", net_arch=(8, 8), amp=None)
    saved = zoo.save(agent, tmp_path / "agent.safetensors")
    meta = hub.read_metadata(saved)
    run = {**json.loads(meta["zoo.config"]), "amp": "bf16", "device": "cpu"}  # as a bf16 run on a CPU wrote it
    save_file(load_file(saved), saved, metadata={**meta, "zoo.config": json.dumps(run)})
    assert main(["weights", "add", str(saved), "--name", "td3.copy-v1"]) == 0
    entry = hub.get_entry("td3.copy-v1")
    assert "amp" not in entry.config and "device" not in entry.config
    assert entry.config["env"] == "Pendulum-v1" and entry.config["net_arch"] == [8, 8]
    assert "amp" not in json.loads(hub.read_metadata(weights_home / entry.url)["zoo.config"])
    assert zoo.build("td3.copy-v1").config.amp == "auto"  # the default: each machine decides
    explicit = hub.add_weights(saved, name="td3.fp32-v1", config={"amp": "fp32"})  # asked for: kept
    assert explicit.config["amp"] == "fp32"
