"""The Hugging Face Hub: ``zoo.build(name, weights="hf-hub:org/repo[@revision]")`` and
``zoo weights export-hf NAME DIR``.

Downloads go through ``huggingface_hub.hf_hub_download`` (its cache lives under ``$ZOO_HOME/hf``; the
Hub is ``$HF_ENDPOINT`` when set, read at each call). A zoo repo holds three files, written by
:func:`export_hf`:

- ``model.safetensors``: the weights, byte for byte the file the manifest describes;
- ``config.json``: ``{"library_name": "zoo", "zoo": {"name", "model", "config", "sha256", "size",
  "format", "file", "meta"}}`` -- what ``zoo.build`` needs to rebuild the network, and the hash the
  downloaded weights must have;
- ``README.md``: the model card, its YAML front matter (license, datasets, metrics as ``model-index``)
  generated from the manifest's ``meta`` by ``huggingface_hub.ModelCard``.

A download is verified before it is loaded: its sha256 must equal the one in ``config.json`` and, when
the Hub stored the file with LFS, the blob's own sha256 name. Offline (``ZOO_OFFLINE=1`` or
``local_files_only=True``) only the Hub cache is read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from zoo import fs
from zoo.hub.fetch import DownloadError, HashMismatchError, OfflineError, offline, sha256_file
from zoo.hub.manifest import ManifestError, WeightsEntry
from zoo.inputs import env_on

__all__ = ["CONFIG_FILE", "WEIGHTS_FILE", "export_hf", "model_card", "parse_spec", "resolve_hf"]

PREFIX = "hf-hub:"
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
_REPO_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# family -> the Hub's task id for model-index
_TASKS = {"vision": "image-classification", "seq2seq": "translation", "rl": "reinforcement-learning",
          "hyperspectral": "image-segmentation", "video": "video-classification"}
# SPDX-like ids the Hub knows, found in a free-text license (the earliest mention wins)
_LICENSES = [(r"\bMIT\b", "mit"), (r"BSD[- ]3[- ]Clause", "bsd-3-clause"), (r"Apache[- ]2(\.0)?", "apache-2.0"),
             (r"CC[- ]BY[- ]4\.0", "cc-by-4.0"), (r"CC[- ]BY[- ]3\.0", "cc-by-3.0"),
             (r"CC[- ]BY[- ]NC[- ]4\.0", "cc-by-nc-4.0")]


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``"hf-hub:org/repo@rev"`` -> ``("org/repo", "rev")``; a malformed spec names the expected form."""
    body = spec.removeprefix(PREFIX)
    repo, _, revision = body.partition("@")
    if not _REPO_RE.match(repo) or (_ and not revision):
        raise ValueError(f"weights={spec!r}: expected 'hf-hub:ORG/REPO' or 'hf-hub:ORG/REPO@REVISION'")
    return repo, revision or None


def _download(repo: str, filename: str, revision: str | None, local_only: bool) -> Path:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import (
        EntryNotFoundError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    from zoo.hub.store import zoo_home

    endpoint = os.environ.get("HF_ENDPOINT") or None
    where = f"{repo}{'@' + revision if revision else ''} on {endpoint or 'https://huggingface.co'}"
    try:
        return Path(hf_hub_download(repo, filename, revision=revision, cache_dir=zoo_home() / "hf",
                                    local_files_only=local_only, endpoint=endpoint))
    except LocalEntryNotFoundError as err:
        if local_only:
            raise OfflineError(f"{filename} of {where} is not in the Hub cache ({zoo_home() / 'hf'}) and "
                               "ZOO_OFFLINE=1 / local_files_only=True forbids downloading it") from None
        if env_on("HF_HUB_OFFLINE"):  # nothing was tried
            raise OfflineError(f"{filename} of {where} is not in the Hub cache ({zoo_home() / 'hf'}) and "
                               "HF_HUB_OFFLINE is set, so huggingface_hub downloads nothing") from None
        cause = (str(err.__cause__ or err).splitlines() or [type(err).__name__])[0]
        raise DownloadError(f"could not reach {where} for {filename} (and it is not cached): {cause}") from None
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as err:
        raise FileNotFoundError(f"{filename} of {where}: {type(err).__name__}") from None
    except HfHubHTTPError as err:
        raise DownloadError(f"{filename} of {where}: {str(err).splitlines()[0]}") from None


def _read_config(path: Path, spec: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        zoo_part = doc["zoo"]
        if not isinstance(zoo_part, dict):
            raise TypeError("zoo is not an object")
        return zoo_part
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ManifestError(f"{spec}: {CONFIG_FILE} is not a zoo config ({err}); repos for zoo are written "
                            "by `zoo weights export-hf`") from None


def resolve_hf(spec: str, *, local_files_only: bool = False) -> tuple[Path, WeightsEntry]:
    """Download (or find in the Hub cache) a zoo repo's weights, verify them, and return them with the
    entry rebuilt from its ``config.json``."""
    repo, revision = parse_spec(spec)
    local_only = local_files_only or offline()
    cfg = _read_config(_download(repo, CONFIG_FILE, revision, local_only), spec)
    entry = WeightsEntry.from_dict({
        "name": cfg.get("name"), "model": cfg.get("model"), "url": cfg.get("file", WEIGHTS_FILE),
        "sha256": cfg.get("sha256"), "size": cfg.get("size"), "format": cfg.get("format", "safetensors"),
        "config": cfg.get("config", {}), "meta": cfg.get("meta", {}),
    })
    path = _download(repo, entry.url, revision, local_only)
    digest = sha256_file(path)
    blob = path.resolve().name  # the Hub cache names an LFS blob by its sha256
    if digest != entry.sha256 or (_HEX64.match(blob) and blob != digest) or path.stat().st_size != entry.size:
        raise HashMismatchError(
            f"{spec}: {entry.url} has sha256 {digest} ({path.stat().st_size} bytes), but its {CONFIG_FILE} "
            f"says {entry.sha256} ({entry.size} bytes); refusing to load it. Delete {path.resolve()} to download again"
        )
    return path, entry


def _license(text: str | None) -> str:
    if not text:
        return "unknown"
    found = [(m.start(), spdx) for pattern, spdx in _LICENSES if (m := re.search(pattern, text, re.IGNORECASE))]
    return min(found)[1] if found else "other"


def _slug(text: str) -> str:
    head = re.split(r"[(,;]", text, maxsplit=1)[0]
    return re.sub(r"[^a-z0-9]+", "-", head.lower()).strip("-") or "dataset"


def model_card(entry: WeightsEntry, family: str, repo_hint: str = "ORG/REPO"):
    """The Hub model card for ``entry``: YAML front matter from its meta, a body saying how to load it."""
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    meta = entry.meta
    dataset = str(meta.get("dataset") or "unspecified")
    metrics = {k: v for k, v in (meta.get("metrics") or {}).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    task = _TASKS.get(family, "other")
    results = [EvalResult(task_type=task, dataset_type=_slug(dataset), dataset_name=dataset, metric_type=k,
                          metric_name=k, metric_value=v) for k, v in metrics.items()]
    license_id = _license(meta.get("license"))
    data = ModelCardData(
        license=license_id, license_name="see-model-card" if license_id == "other" else None,
        library_name="zoo", tags=[family, entry.model, "zoo", "safetensors"], datasets=[_slug(dataset)],
        model_name=entry.name, eval_results=results or None,
    )
    table = "\n".join(f"| {k} | {v} |" for k, v in metrics.items()) or "| (none recorded) | |"
    body = f"""
# {entry.name}

`{entry.model}` weights from the zoo model zoo ({family} family), trained on: {dataset}.

```python
import zoo
model = zoo.build("{entry.model}", weights="hf-hub:{repo_hint}")
```

| metric | value |
|---|---|
{table}

- produced by: `{meta.get("command", "unrecorded")}`
- license: {meta.get("license", "unspecified")}
- file: `{WEIGHTS_FILE}`, {entry.size} bytes, sha256 `{entry.sha256}` (checked by zoo before loading)
- builder config: `{json.dumps(entry.config, sort_keys=True)}`
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")


def export_hf(name: str, out_dir: str | os.PathLike, *, repo_hint: str = "ORG/REPO") -> list[Path]:
    """Write a folder ready for ``hf upload ORG/REPO DIR``: the verified weights file, ``config.json``
    and ``README.md`` (model card). Returns the paths written."""
    from zoo import registry
    from zoo.hub.store import get_entry, pull

    entry = get_entry(name)
    if entry.upstream or entry.format != "safetensors" or entry.sha256 is None:
        raise ValueError(f"{name}: only the project's own safetensors files are exported to the Hub "
                         f"({entry.url} is {'upstream' if entry.upstream else entry.format})")
    family = registry.model_info(entry.model).family
    src = pull(name, progress=False)
    out = fs.ensure_dir(out_dir, "export folder")
    dest = out / WEIGHTS_FILE
    with open(src, "rb") as fin, fs.atomic_write(dest, size=entry.size) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    if sha256_file(dest) != entry.sha256:
        dest.unlink()
        raise HashMismatchError(f"{src} changed while it was copied to {dest}; run the export again")
    cfg = {"library_name": "zoo", "zoo": {"name": entry.name, "model": entry.model, "config": entry.config,
                                         "file": WEIGHTS_FILE, "sha256": entry.sha256, "size": entry.size,
                                         "format": entry.format, "meta": entry.meta}}
    config = fs.write_text(out / CONFIG_FILE, json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    readme = fs.write_text(out / "README.md", str(model_card(entry, family, repo_hint)))
    return [dest, config, readme]
