"""The manifest: schema validation, the shipped zoo/hub/manifest.json (every entry, as families add
them), publishing with add_weights (locked, atomic, no silent replacement), README generation, and the
`zoo` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import zoo
from zoo import hub, registry
from zoo.hub.manifest import PACKAGE_MANIFEST, ManifestError, WeightsEntry

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT_WEIGHTS = ROOT / "weights"


def test_the_checkouts_weights_folder_holds_the_manifest_as_design_md_lays_it_out():
    """design.md: "weights/ manifest.json + the project's own small weights"; the manifest lived only in the
    package (zoo/hub/manifest.json, which ships in the wheel): weights/manifest.json is that file, one copy."""
    link = CHECKOUT_WEIGHTS / "manifest.json"
    assert link.is_symlink() and link.resolve() == hub.manifest.PACKAGE_MANIFEST
    assert hub.read_manifest(link) == SHIPPED


def test_a_manifest_written_through_the_checkouts_link_stays_one_file(tmp_path, monkeypatch):
    """With ZOO_WEIGHTS_DIR=<checkout>/weights (a folder laid out as a release), an atomic write of the manifest
    replaced the link with a copy, and the package's manifest (the wheel's) was no longer updated."""
    real = tmp_path / "pkg" / "manifest.json"
    real.parent.mkdir()
    real.write_bytes(PACKAGE_MANIFEST.read_bytes())
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "manifest.json").symlink_to(os.path.relpath(real, folder))
    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(folder))
    hub.update_manifest(lambda e: e.pop("td3.pendulum-v1"))
    assert (folder / "manifest.json").is_symlink() and "td3.pendulum-v1" not in hub.read_manifest(real)


def _good() -> dict:
    return {"name": "resnet18.x", "model": "resnet18", "url": "resnet18.x.safetensors", "sha256": "a" * 64,
            "size": 10, "format": "safetensors", "config": {}, "meta": {"dataset": "d"}}


@pytest.mark.parametrize("change, message", [
    ({"sha256": None}, "need a full sha256"),
    ({"sha256": "abc"}, "64 lowercase hex"),
    ({"name": "resnet18"}, "look like 'model.tag'"),
    ({"model": "td3"}, "the name says 'resnet18'"),
    ({"url": "../escape.safetensors"}, "stay inside weights/"),
    ({"url": "ftp://x/y"}, "relative or http"),
    ({"size": 0}, r"size must be an int >= 1 or None \(bytes\), got 0"),
    ({"size": None}, "need a size"),
    ({"format": "pth"}, "must be safetensors"),
    ({"format": "pickle"}, "format must be one of"),
    ({"config": []}, "config must be an object"),
    ({"meta": {"num_params": "many"}}, "meta.num_params must be int"),
    ({"extra": 1}, "unknown key"),
    ({"url": "https://h/r-1234abcd.pth", "format": "pth", "sha256": None}, "sha256_prefix"),
    ({"url": "https://h/r-1234abcd.pth", "format": "pth", "sha256": None, "sha256_prefix": "12"}, "8-63"),
])
def test_schema_rejects(change, message):
    d = {**_good(), **change}
    with pytest.raises(ManifestError, match=message):
        WeightsEntry.from_dict(d)


@pytest.mark.parametrize("key", ["name", "model", "url", "sha256", "size", "format", "config", "meta"])
def test_schema_requires(key):
    d = _good()
    d.pop(key)
    with pytest.raises(ManifestError, match=f"missing required key.*{key}"):
        WeightsEntry.from_dict(d)


def test_schema_round_trip_and_prefix_entries():
    e = WeightsEntry.from_dict(_good())
    assert WeightsEntry.from_dict(e.to_dict()) == e and e.tag == "x"
    up = WeightsEntry.from_dict({**_good(), "url": "https://h/resnet18-1234abcd.pth", "format": "pth",
                                 "sha256": None, "sha256_prefix": "1234abcd", "size": None})
    assert up.upstream and up.hash_matches("1234abcd" + "0" * 56) and not up.hash_matches("f" * 64)
    assert list(up.to_dict())[:5] == ["name", "model", "url", "sha256", "sha256_prefix"]


# --- the shipped manifest: every entry, whatever families have published by now -----------------------

SHIPPED = hub.read_manifest(PACKAGE_MANIFEST)
LOCAL = [e for e in SHIPPED.values() if not e.upstream]
UPSTREAM = [e for e in SHIPPED.values() if e.upstream]


def test_shipped_manifest_is_valid_and_readme_is_current():
    assert SHIPPED, "zoo/hub/manifest.json lists no weights"
    assert (CHECKOUT_WEIGHTS / "README.md").read_text() == hub.render_readme(SHIPPED), (
        "weights/README.md is stale: run `zoo weights readme`")
    for e in SHIPPED.values():
        assert e.model in registry._REGISTRY, f"{e.name}: model {e.model!r} is not registered"
        assert e.name in zoo.model_info(e.model).weights


@pytest.mark.parametrize("entry", LOCAL, ids=[e.name for e in LOCAL])
def test_shipped_file_hash_size_and_strict_load(entry, monkeypatch, tmp_path):
    monkeypatch.delenv("ZOO_WEIGHTS_DIR", raising=False)
    # building td3.halfcheetah-v5 makes its MuJoCo env, and MuJoCo writes the warning gymnasium's half_cheetah.xml
    # raises to MUJOCO_LOG.TXT in the working folder: here, not the checkout the suite runs in
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    path = CHECKOUT_WEIGHTS / entry.url
    assert path.is_file(), f"{entry.name}: {path} is listed but not shipped"
    assert path.stat().st_size == entry.size
    assert hub.sha256_file(path) == entry.sha256
    assert hub.state.file_format(path) == "safetensors"
    assert entry.meta.get("dtype") == _storage_dtype(hub.load_state_dict(path)), (
        f"{entry.name}: meta.dtype is not the dtype most of the file's floating values are stored in")
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("error")  # no head re-initialisation: the file must fit exactly
        # (another scikit-learn than the one that wrote hsi-pca-svm's file is the user's choice, and warns)
        __import__("warnings").filterwarnings("ignore", "hsi-pca-svm weights were written with scikit-learn")
        obj = zoo.build(entry.model, weights=entry.name)
    if isinstance(obj, torch.nn.Module):
        assert sum(p.numel() for p in obj.parameters()) == entry.meta["num_params"]


def _storage_dtype(sd: dict[str, torch.Tensor]) -> str:
    counts: dict[str, int] = {}
    for t in sd.values():
        if t.is_floating_point():
            name = str(t.dtype).removeprefix("torch.")
            counts[name] = counts.get(name, 0) + t.numel()
    return max(counts, key=counts.__getitem__)


_REFERENCE = {  # upstream file stem -> torchvision constructor with the same state-dict layout
    "resnet18": "torchvision.models.resnet18",
    "r2plus1d_18": "torchvision.models.video.r2plus1d_18",
}


@pytest.mark.parametrize("entry", UPSTREAM, ids=[e.name for e in UPSTREAM])
def test_upstream_entry_layout_loads_through_the_hub(entry, tmp_path):
    """The real loading code, on a local file of the upstream layout (torch.save of the torchvision
    model's state dict, named like the official file): no network here, so not the official bytes."""
    import importlib

    stem, _, prefix = Path(entry.filename).stem.rpartition("-")
    assert prefix == entry.sha256_prefix, f"{entry.name}: file name prefix {prefix} != {entry.sha256_prefix}"
    assert entry.meta.get("license") and entry.meta.get("transforms") and entry.meta.get("num_params")
    if entry.model not in registry._REGISTRY:
        pytest.skip(f"model {entry.model!r} is not registered yet")
    module_name, _, fn = _REFERENCE[stem].rpartition(".")
    reference = getattr(importlib.import_module(module_name), fn)(**entry.config)
    assert sum(p.numel() for p in reference.parameters()) == entry.meta["num_params"]
    path = tmp_path / entry.filename
    torch.save(reference.state_dict(), path)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = zoo.build(entry.model, weights=str(path), **entry.config)
    got = model.state_dict()
    for key, value in reference.state_dict().items():
        assert torch.equal(got[key], value), key


# --- publishing --------------------------------------------------------------------------------------


def test_add_weights_fp16_then_build(tiny_model, weights_home):
    torch.manual_seed(1)
    module = zoo.build(tiny_model, num_classes=5)
    entry = hub.add_weights(module, name=f"{tiny_model}.fp16", config={"num_classes": 5},
                            meta={"dataset": "synthetic", "metrics": {"acc": 0.75}, "command": "pytest"},
                            dtype=torch.float16)
    path = weights_home / entry.url
    assert entry.sha256 == hub.sha256_file(path) and entry.size == path.stat().st_size
    assert entry.meta["dtype"] == "float16" and entry.meta["num_params"] == sum(p.numel() for p in module.parameters())
    assert hub.read_metadata(path)["zoo.name"] == entry.name
    doc = json.loads((weights_home / "manifest.json").read_text())
    assert [w["name"] for w in doc["weights"]] == [entry.name]
    assert entry.name in (weights_home / "README.md").read_text() and "acc=0.75" in hub.render_readme()
    assert zoo.list_weights(tiny_model) == [entry.name] and tiny_model in str(zoo.model_info(tiny_model))
    loaded = zoo.build(tiny_model, weights="fp16")
    assert loaded.head.weight.dtype == torch.float32
    assert torch.equal(loaded.head.weight, module.head.weight.half().float())
    assert not [p for p in weights_home.iterdir() if p.name.startswith(".")]  # no staged files left


def test_add_weights_records_the_dtype_most_values_are_stored_in(tiny_model, weights_home, tmp_path):
    """A network stored in fp16 beside a small fp32 array (HybridSN's preprocessing) is fp16 storage,
    whichever tensor comes first in the file."""
    sd = zoo.build(tiny_model).state_dict()
    first = min(k for k, v in sd.items() if v.is_floating_point() and v.numel() < 100)
    sd = {k: v.half() if v.is_floating_point() and k != first else v for k, v in sorted(sd.items())}
    src = hub.save_weights(sd, tmp_path / "mixed.safetensors")
    entry = hub.add_weights(src, name=f"{tiny_model}.mixed", config={})
    assert entry.meta["dtype"] == "float16"


def test_add_weights_of_a_file_zoo_save_wrote_takes_its_config_and_model(tiny_model, weights_home, tmp_path):
    """`zoo train NAME --stem cifar --out X` then `zoo weights add X`: the entry must rebuild what X holds
    (its config travels in the file), and a file of another model is refused naming it, before any write."""
    # what zoo.save writes for a registered model: its name and builder config in the metadata
    saved = hub.save_weights(zoo.build(tiny_model, num_classes=5, width=4), tmp_path / "trained.safetensors",
                             metadata={"zoo.model": tiny_model, "zoo.config": json.dumps({"num_classes": 5, "width": 4})})
    entry = hub.add_weights(saved, name=f"{tiny_model}.trained")
    assert entry.config == {"num_classes": 5, "width": 4}
    assert zoo.build(tiny_model, weights="trained").head.out_features == 5
    with pytest.raises(ValueError, match=r"trained.safetensors holds a '.*' model, not 'resnet18'"):
        hub.add_weights(saved, name="resnet18.wrong")
    assert [p.name for p in weights_home.iterdir() if p.name.startswith(".zoo-tmp")] == []


def test_add_weights_keeps_a_safetensors_files_metadata(tiny_model, weights_home, tmp_path):
    """Non-network objects keep their JSON config in the metadata; publishing must not drop it."""
    src = hub.save_weights(zoo.build(tiny_model), tmp_path / "agent.safetensors",
                           metadata={"family.config": '{"gamma": 0.99}'})
    entry = hub.add_weights(src, name=f"{tiny_model}.meta", config={})
    meta = hub.read_metadata(weights_home / entry.url)
    assert meta["family.config"] == '{"gamma": 0.99}' and meta["zoo.name"] == entry.name


def test_add_weights_refuses_a_file_that_does_not_fit(tiny_model, weights_home):
    other = zoo.build(tiny_model, width=4)
    with pytest.raises(ValueError, match="features.0.weight: file"):
        hub.add_weights(other, name=f"{tiny_model}.bad", config={})
    with pytest.raises(TypeError, match="unknown config key"):
        hub.add_weights(other, name=f"{tiny_model}.bad", config={"widht": 4})
    assert hub.list_weights() == [] and [p.name for p in weights_home.iterdir()] == []  # no staging left


def _publish_many(k: int) -> None:
    for i in range(8):
        n = f"resnet18.p{k}-{i}"
        e = WeightsEntry.from_dict({"name": n, "model": "resnet18", "url": n + ".safetensors", "sha256": "a" * 64,
                                    "size": 1, "format": "safetensors", "config": {}, "meta": {}})
        hub.update_manifest(lambda d, n=n, e=e: d.update({n: e}))


def test_concurrent_publishers_do_not_lose_entries(weights_home, tmp_path, monkeypatch):
    """Two processes each add 8 entries at once; the manifest lock keeps all 16, and leaves no file behind,
    beside the manifest or in the temp folder (it left one zoo-manifest-*.lock there per manifest, for good)."""
    import multiprocessing as mp
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_publish_many, args=(k,)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(hub.read_manifest()) == 16
    assert sorted(p.name for p in weights_home.iterdir()) == ["README.md", "manifest.json"]
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_held_manifest_lock_makes_the_next_publisher_wait_then_names_the_holder(weights_home):
    import threading

    from zoo import fs
    from zoo.hub.manifest import manifest_lock

    done = []
    with manifest_lock():  # another publisher, mid-update
        assert (weights_home / ".manifest.json.lock").is_file()
        waiter = threading.Thread(target=lambda: done.append(_publish_many(0)))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and done == []  # waiting, not failing and not writing
        lock = manifest_lock()
        lock.wait = 0.1
        with pytest.raises(fs.FolderLockedError, match=rf"in use by another manifest update \(waited 0.1 s\): "
                                                       rf"pid {os.getpid()}"):
            lock.acquire()
    waiter.join(30)
    assert done == [None] and len(hub.read_manifest()) == 8
    assert not (weights_home / ".manifest.json.lock").exists()


def test_cli_weights_add_list_pull_verify(tiny_model, weights_home, tmp_path, capsys, monkeypatch):
    from zoo.cli import main

    torch.manual_seed(2)
    src = tmp_path / "trained.pt"
    torch.save({"state_dict": zoo.build(tiny_model).state_dict(), "epoch": 3}, src)
    assert main(["weights", "add", str(src), "--name", f"{tiny_model}.cli", "--meta", "dataset=toy",
                 'metrics={"acc": 0.9}', "--dtype", "fp16"]) == 0
    assert main(["weights", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{tiny_model}.cli" in out and "toy" in out and "acc=0.9" in out
    assert main(["info", tiny_model]) == 0
    assert f"{tiny_model}.cli: toy  acc=0.9" in capsys.readouterr().out
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    assert main(["pull", "--all", "-q"]) == 0
    assert main(["weights", "verify", "--shipped"]) == 0
    out = capsys.readouterr().out
    assert "ok " in out and "0 problem(s)" in out
    cached = hub.cached_path(hub.get_entry(f"{tiny_model}.cli"))
    data = bytearray(cached.read_bytes())
    data[-1] ^= 1
    cached.write_bytes(bytes(data))
    assert main(["weights", "verify"]) == 1 and "MISMATCH" in capsys.readouterr().out
    assert main(["pull", "nope.nothing"]) == 2


@pytest.mark.slow
def test_cli_pull_all_against_the_checkout(tmp_path):
    """`zoo pull --all` on this checkout, offline: every shipped file pulled and verified; upstream
    entries reported as skipped, not failures. Then `zoo weights verify --shipped` passes.
    (One interpreter runs both commands: importing zoo costs seconds on a busy machine.)"""
    env = {k: v for k, v in os.environ.items() if k not in ("ZOO_WEIGHTS_DIR", "ZOO_WEIGHTS_URL")}
    env.update(ZOO_HOME=str(tmp_path / "home"), ZOO_OFFLINE="1", OMP_NUM_THREADS="1")
    code = ("import sys; from zoo.cli import main\n"
            "a = main(['pull', '--all', '-q']); print('=== verify', flush=True)\n"
            "b = main(['weights', 'verify', '--shipped']); sys.exit(10 * a + b)")
    run = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    pulled, verified = run.stdout.split("=== verify")
    for e in LOCAL:
        assert f"{e.name}: " in pulled and "sha256 ok" in pulled
        assert (tmp_path / "home" / "weights" / e.sha256 / e.filename).is_file()  # keyed by content
    for e in UPSTREAM:
        assert f"{e.name}: skipped (upstream" in pulled
    assert f"{len(LOCAL)} cached file(s)" in verified and "0 problem(s)" in verified


def test_shipped_accuracy_metrics_are_fractions():
    """Metrics are fractions in [0, 1] under the same names in every family; a percent beside a fraction
    (86.411 next to 0.89132) makes `zoo weights list` compare apples with oranges. Names that say
    ``percent`` are the only exception."""
    doc = json.loads(PACKAGE_MANIFEST.read_text())
    bad = []
    for e in doc["weights"]:
        for key, value in (e["meta"].get("metrics") or {}).items():
            rate = any(w in key for w in ("accuracy", "kappa")) or key.startswith("acc@")
            if rate and "percent" not in key and isinstance(value, (int, float)) and not 0 <= value <= 1:
                bad.append(f"{e['name']}: {key}={value}")
    assert not bad, "metrics given as percent, expected fractions: " + ", ".join(bad)


def test_weights_list_fits_the_terminal_and_pipes_whole(capsys, monkeypatch):
    """The shipped list was 564 characters wide: on a terminal each row wrapped over several lines and the
    CACHED column landed past the end of them. Now the dataset and metrics cells are cut to fit; piped output
    (and --wide) keeps them whole."""
    import sys

    from zoo.cli import main

    assert main(["weights", "list"]) == 0
    piped = capsys.readouterr().out.splitlines()
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["weights", "list"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert max(map(len, piped)) > 100 and max(map(len, shown)) <= 100
    assert [r.split()[:2] for r in shown] == [r.split()[:2] for r in piped]  # names and sizes whole
    assert shown[0].split()[:3] == ["NAME", "SIZE", "CACHED"] and any(r.endswith("…") for r in shown)
    assert main(["weights", "list", "--wide"]) == 0
    assert capsys.readouterr().out.splitlines() == piped


def test_pulling_a_model_name_lists_its_weights_and_read_metadata_names_what_it_reads(tmp_path):
    """zoo.pull('td3') said only 'no weights named td3' (its tags unnamed); zoo.exporting.read_metadata of a
    weights file failed in torch.jit.load ('failed finding central directory')."""
    import zoo
    from zoo.exporting import read_metadata

    with pytest.raises(KeyError, match=r"'td3' is a model; its weights: td3\.halfcheetah-v5, .*td3\.pendulum-v1"):
        zoo.pull("td3")
    weights = tmp_path / "w.safetensors"
    zoo.save(torch.nn.Linear(2, 2), weights)
    with pytest.raises(ValueError, match=r"is no export .*; a weights file's metadata: zoo\.hub\.read_metadata"):
        read_metadata(weights)
