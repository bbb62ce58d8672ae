"""What a user of the installed package (no checkout, no weights/ folder) is told when a local copy of a weights
file is wrong, and what a release that cannot be whole leaves behind.

Every wrong local copy was blamed on git-lfs ("run `git lfs pull` in the checkout") with the advice to "set
ZOO_WEIGHTS_URL to a mirror that holds the right one": for a damaged file in the very mirror ZOO_WEIGHTS_URL named,
or in torch.hub's download folder, neither a checkout nor that advice applies."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo import hub
from zoo.hub.store import torch_hub_checkpoints


def _publish_then_unship(tiny_model: str, weights_home):
    """A published entry whose file only a mirror can serve, as for an installed zoo (no local weights/)."""
    torch.manual_seed(0)
    entry = hub.add_weights(zoo.build(tiny_model), name=f"{tiny_model}.v1", config={"num_classes": 3},
                            meta={"dataset": "synthetic"})
    good = (weights_home / entry.url).read_bytes()
    (weights_home / entry.url).unlink()
    return entry, good


@pytest.mark.parametrize("as_url", [False, True], ids=["folder", "file-url"])
def test_a_damaged_file_in_the_mirror_is_blamed_on_the_mirror_not_on_git_lfs(tiny_model, weights_home, tmp_path,
                                                                             monkeypatch, as_url):
    entry, good = _publish_then_unship(tiny_model, weights_home)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF  # the same size: hashed, then refused
    (mirror / entry.url).write_bytes(bytes(damaged))
    named = mirror.as_uri() if as_url else str(mirror)
    monkeypatch.setenv("ZOO_WEIGHTS_URL", named)
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(hub.HashMismatchError) as err:
        zoo.pull(entry.name, progress=False)
    msg = str(err.value)
    assert f"The mirror ZOO_WEIGHTS_URL={named} holds another file under this name" in msg, msg
    assert "zoo weights release writes a mirror's files" in msg
    assert "git lfs" not in msg and "set ZOO_WEIGHTS_URL to a mirror" not in msg, msg


def test_a_git_lfs_pointer_in_the_mirror_is_named_as_one(tiny_model, weights_home, tmp_path, monkeypatch):
    """A mirror folder that is a clone made without git-lfs: the pointer is what to fix, with git-lfs."""
    entry, _ = _publish_then_unship(tiny_model, weights_home)
    mirror = tmp_path / "clone"
    mirror.mkdir()
    pointer = mirror / entry.url
    pointer.write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{entry.sha256}\nsize {entry.size}\n")
    monkeypatch.setenv("ZOO_WEIGHTS_URL", str(mirror))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(hub.HashMismatchError) as err:
        zoo.pull(entry.name, progress=False)
    msg = str(err.value)
    assert f"{pointer}: a git-lfs pointer, not the file; run `git lfs pull`" in msg, msg
    assert "holds another file" not in msg


def test_a_damaged_torch_hub_copy_of_an_upstream_file_is_named_without_git_lfs(weights_home, monkeypatch):
    """Upstream files are taken from torch.hub's folder too ($TORCH_HOME, isolated per test): a damaged one there
    is the user's own download, in no checkout."""
    filename = "resnet18-f37072fd.pth"
    entry = {"name": "resnet18.upstream-test", "model": "resnet18",
             "url": f"https://download.pytorch.org/models/{filename}", "sha256": None, "sha256_prefix": "f37072fd",
             "size": None, "format": "pth", "config": {}, "meta": {}}
    (weights_home / "manifest.json").write_text(json.dumps({"schema": 2, "release_url": None, "weights": [entry]}))
    damaged = torch_hub_checkpoints() / filename
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"a download torch.hub never finished")
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(hub.HashMismatchError) as err:
        zoo.pull(entry["name"], progress=False)
    msg = str(err.value)
    assert f"The local copy {damaged} is another file (stale or damaged): replace or delete it" in msg, msg
    assert "git lfs" not in msg and "checkout" not in msg, msg


def test_a_release_that_cannot_be_whole_writes_nothing(tiny_model, weights_home, tmp_path):
    """An installed zoo with an empty cache: `zoo weights release OUT` failed on the first file and left OUT
    behind, an empty folder (or, with some files cached, a partial release)."""
    entry, _ = _publish_then_unship(tiny_model, weights_home)
    out = tmp_path / "dist" / "weights"
    with pytest.raises(FileNotFoundError, match=rf"{entry.name}: .*`zoo pull {entry.name}` first") as err:
        hub.release(out, progress=False)
    assert not out.exists()
    assert f"({out} was not written)" in str(err.value)
