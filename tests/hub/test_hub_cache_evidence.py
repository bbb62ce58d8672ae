"""What `zoo cache info|clean` take as zoo's: only a file where a download puts it that carries zoo's own evidence
(a manifest entry's file, zoo's ``.verified`` marker, a ``.part``'s ``.resume`` record); an empty ``--cache-dir``;
the Hugging Face Hub's folder, of which only huggingface_hub's layout is zoo's."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

import zoo
from zoo import hub
from zoo.cli import main


def _publish(tiny_model: str, tag: str = "v1"):
    torch.manual_seed(0)
    return hub.add_weights(zoo.build(tiny_model), name=f"{tiny_model}.{tag}", config={"num_classes": 3})


def _write(folder, rels: tuple[str, ...]) -> None:
    for rel in rels:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(f"mine: {rel}")


# the user's own files, in folders whose names look like the cache's keys (the audit's t1)
_MINE = ("20240131/report-20240131.txt", "20240131/draft.part", "deadbeef/firmware-deadbeef.bin",
         f"{'1' * 64}/model.bin", "urls/0123456789abcdef/bookmark.html", "notes/keep.txt")


def test_clean_of_a_folder_deletes_only_what_a_pull_put_there(tiny_model, weights_home, tmp_path, capsys):
    """``zoo cache clean --cache-dir DIR`` deleted 20240131/report-20240131.txt (a hex folder holding a file that
    carries its name), deadbeef/firmware-deadbeef.bin, urls/<16 hex>/bookmark.html and any file of a 64-digit
    folder; `cache info` listed them as weights."""
    entry = _publish(tiny_model)
    folder = tmp_path / "mydata"
    _write(folder, _MINE)
    path = zoo.pull(entry.name, cache_dir=folder, progress=False)
    assert {(i.path, i.kind) for i in hub.cache_info(folder)} == {(path, "weights")}
    assert main(["cache", "clean", "--cache-dir", str(folder)]) == 0
    assert "removed 1 item(s)" in capsys.readouterr().out
    assert not path.exists() and all((folder / rel).read_text() == f"mine: {rel}" for rel in _MINE)


def test_the_default_cache_keeps_what_zoo_did_not_download(url_file, weights_home, server, tmp_path):
    """In $ZOO_HOME/weights too: a URL's file (its marker) and an interrupted URL download (its ``.resume``
    record) are zoo's, the same names without that evidence are not."""
    name = url_file.name
    shutil.copy(url_file, server.state.root / name)
    local, _ = hub.resolve(f"{server.url}/{name}")
    server.state.cut_after, server.state.cuts_left, server.state.range_support = 1000, 1000, False
    with pytest.raises(hub.DownloadError, match="failed after"):
        hub.resolve(f"{server.url}/{name}?second")
    (part,) = [p for p in hub.cache_root().rglob("*.part")]
    root = hub.cache_root()
    _write(root, _MINE)
    assert {i.path: i.kind for i in hub.cache_info()} == {local: "weights", part: "partial"}
    assert hub.clean_cache(stale_only=True) == (1, 1000)
    assert not part.exists() and local.is_file()
    size = local.stat().st_size
    assert hub.clean_cache() == (1, size)
    assert not local.exists() and all((root / rel).read_text() == f"mine: {rel}" for rel in _MINE)


@pytest.fixture
def url_file(tmp_path):
    """A weights file of a user's own, served at a URL (no manifest entry)."""
    torch.manual_seed(0)
    return hub.save_weights({"layer.weight": torch.randn(64, 512), "layer.bias": torch.randn(64)},
                            tmp_path / "agent.safetensors")


def test_an_empty_cache_dir_is_refused_not_taken_for_the_working_directory(tiny_model, weights_home, tmp_path,
                                                                           monkeypatch, capsys):
    """``--cache-dir "$UNSET"`` pulled into the working directory (printing a relative path) and cleaned it:
    cafe1234/IMG-cafe1234.jpg went."""
    entry = _publish(tiny_model)
    cwd = tmp_path / "cwd"
    _write(cwd, ("cafe1234/IMG-cafe1234.jpg",))
    monkeypatch.chdir(cwd)
    assert main(["pull", entry.name, "-q", "--cache-dir", ""]) == 2
    assert main(["cache", "clean", "--cache-dir", ""]) == 2
    assert "cache_dir (--cache-dir) must name a folder, got ''" in capsys.readouterr().err
    assert sorted(p.name for p in cwd.rglob("*") if p.is_file()) == ["IMG-cafe1234.jpg"]
    with pytest.raises(ValueError, match="must name a folder"):
        zoo.pull(entry.name, cache_dir="", progress=False)
    path = zoo.pull(entry.name, cache_dir="rel", progress=False)  # a relative folder, from here
    assert path.is_absolute() and path == cwd / "rel" / entry.sha256 / entry.url
    assert hub.cache_root("rel") == cwd / "rel"


def test_clean_removes_only_huggingface_hubs_own_folders(weights_home, tmp_path, monkeypatch, capsys):
    """``zoo cache clean`` deleted everything under $ZOO_HOME/hf, a model of the user's own too, and named only
    the weights folder in its summary."""
    home = tmp_path / "home"
    monkeypatch.setenv("ZOO_HOME", str(home))
    hf = home / "hf"
    _write(hf, ("my-finetune/pytorch_model.bin", "notes.txt"))
    blob = hf / "models--org--repo" / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"x" * 100)
    (hf / "models--org--repo" / "snapshots" / "c0ffee").mkdir(parents=True)
    os.symlink(blob, hf / "models--org--repo" / "snapshots" / "c0ffee" / "model.safetensors")
    _write(hf, (".locks/models--org--repo/0123abcd.lock",))
    (item,) = hub.cache_info()
    assert (item.path, item.kind, item.name, item.size) == (hf / "models--org--repo", "hf", "org/repo", 100)
    assert main(["cache", "clean"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"from {home / 'weights'} and {hf}")
    assert sorted(p.relative_to(hf).as_posix() for p in hf.rglob("*")) == [
        "my-finetune", "my-finetune/pytorch_model.bin", "notes.txt"]


def test_cache_info_says_which_temp_files_clean_removes(weights_home):
    """Every zoo temp name was listed "left by a killed writer", also a live writer's and another host's, which
    ``clean`` keeps (a day for another host's): the two disagreed without a word. A user's file that merely starts
    with the prefix was listed too."""
    from zoo import fs

    root = hub.cache_root()
    root.mkdir(parents=True, exist_ok=True)
    dead = root / f"{fs.TEMP_PREFIX}{fs._HOST}-{2**22 + 12345}-0123abcd-a.safetensors"
    live = root / f"{fs.TEMP_PREFIX}{fs._HOST}-{os.getpid()}-0123abcd-b.safetensors"
    foreign = root / f"{fs.TEMP_PREFIX}ffffffff-1-0123abcd-c.safetensors"
    mine = root / f"{fs.TEMP_PREFIX}notes.txt"
    for path in (dead, live, foreign, mine):
        path.write_text("torn")
    said = {item.path: item.status for item in hub.cache_info() if item.kind == "temp"}
    assert said == {dead: "left by a killed writer", live: "being written now (kept)",
                    foreign: "another host's or PID namespace's writer's (kept until 24 h old)"}
    assert hub.clean_cache(stale_only=True)[0] == 1
    assert not dead.exists() and live.exists() and foreign.exists() and mine.exists()
