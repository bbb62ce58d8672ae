"""``weights/README.md``: the table users read before they pull, generated from the manifest."""

from __future__ import annotations

from pathlib import Path

from zoo.hub.manifest import ManifestError, WeightsEntry, read_manifest, weights_dir

__all__ = ["render_readme", "write_readme"]

_HEADER = """\
# Pretrained weights

<!-- Generated from zoo/hub/manifest.json by zoo.hub (`zoo weights readme`); edit the manifest, not this file. -->

The manifest ships inside the package (`zoo/hub/manifest.json`; `manifest.json` here links to it, so this
folder is laid out as a release is); this folder holds the project's own files in a source checkout. Every file
below is checked by sha256 before it enters the cache (`$ZOO_HOME/weights`, default `$XDG_CACHE_HOME/zoo/weights`, else `~/.cache/zoo/weights`, one
folder per sha256), and a cached file is re-hashed before a load whenever
it changed since it was verified. Metrics are as measured by the command in the manifest entry's
`meta.command` (upstream entries quote the publisher's figures and say so); accuracies and kappa are
fractions in [0, 1], as `zoo.evaluate` returns them (BLEU and episode returns keep their usual scales).

```bash
zoo weights list                     # this table, with what is cached
zoo pull resnet18.imagenet1k-v1      # one file (upstream files need a network or a mirror)
zoo pull --all                       # every file the project ships (from the checkout, a mirror or the release host)
zoo pull --all --upstream            # ... and the upstream files too
zoo weights verify                   # re-hash the whole cache
zoo cache info                       # what the cache holds; `zoo cache clean` frees it
zoo weights release OUT_DIR          # the files + manifest exactly as the release host serves them
zoo weights export-hf NAME OUT_DIR   # a Hugging Face Hub repo folder (safetensors, config, model card)
```

```python
import zoo
model = zoo.build("resnet18", weights="imagenet1k-v1")   # a tag, "model.tag", a path, a URL or "hf-hub:org/repo"
```

"""

_FOOTER = """
## Mirrors and offline use

- Sources of the project's own files, in order: a source checkout's `weights/<url>`, then
  `$ZOO_WEIGHTS_URL/<url>` (a mirror: `https://internal/zoo`, `file:///srv/zoo` or a plain folder), then the
  release host, the manifest's `release_url`. Upstream files come from `$ZOO_WEIGHTS_URL/<file name>`, then
  torch.hub's cache (`$TORCH_HOME/hub/checkpoints`, where torchvision put them; offline too), then their
  official URL. To fill a mirror, run `zoo weights release DIR` and add the upstream files (their names
  as in the table).
- `ZOO_OFFLINE=1` (or `true`/`yes`/`on`; `0`/`false`/`no`/`off`/empty mean online), or `local_files_only=True`
  on one call (`zoo.pull`, `zoo.build`): no connection is ever opened. A file that is not cached and has no
  local source fails with one line naming the file, the cache path, the `zoo pull` command to run on a
  connected machine, and the mirror variable.
- Downloads resume after an interrupted connection (HTTP Range), retry with backoff, and are locked per
  file, so parallel jobs pulling the same weights download them once. A server silent for `$ZOO_TIMEOUT`
  seconds (default 20) fails the pull at once; the bytes received are kept and the next pull resumes.
- Free space is checked before a download; a full disk fails with the folder, the size needed and the size
  free, and removes the partial file. Links planted in the cache are refused, never followed.

## Manifest schema (`zoo/hub/manifest.json`)

`{"schema": 2, "release_url": BASE, "weights": [entry, ...]}`; `release_url` is the base URL the project's own
files are served from (`BASE/<url>`); each entry has:

| key | meaning |
|---|---|
| `name` | `"model.tag"`; `model` is a registered model name |
| `model` | the registered model the file loads into |
| `url` | relative to this folder and to `release_url` (the project's own files) or an `https://` URL (upstream files) |
| `sha256` | the full sha256 (64 hex), or `null` for an upstream file whose full hash could not be computed when the entry was written |
| `sha256_prefix` | only with `"sha256": null`: the hash prefix the publisher puts in the file name (`resnet18-f37072fd.pth` -> `f37072fd`). The download's sha256 must start with it; `zoo weights verify` reports such files as `prefix-verified`. Verification is never skipped. |
| `size` | bytes; `null` only for upstream files not measured here |
| `format` | `safetensors` (all of the project's files) or `pth` (upstream `torch.save` files, read with `torch.load(weights_only=True)`: a pickle that would run code is refused) |
| `config` | builder arguments the file needs, merged under the user's (`zoo.build(model, weights=..., **config)`) |
| `meta` | `dataset`, `metrics` (as measured), `command` (the benchmark that produced the file), `license`, `num_params`, `dtype` (storage), `transforms` |

Benchmarks publish with `zoo.hub.add_weights(model_or_file, name="model.tag", config=..., meta=...)` or
`zoo weights add FILE --name MODEL.TAG --meta KEY=VALUE ...`, which writes the safetensors file, its hash and
size, the manifest entry (under a lock) and this README. A name that is already published is refused unless
`force=True` / `--force`.
"""


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def _metrics(entry: WeightsEntry) -> str:
    metrics = entry.meta.get("metrics") or {}
    text = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()) or "-"
    if metrics and "metrics_source" in entry.meta:  # e.g. the publisher's figures, not measured here
        text += " (publisher's)"
    return text


def _cell(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render_readme(entries: dict[str, WeightsEntry] | None = None) -> str:
    entries = read_manifest() if entries is None else entries
    rows = ["| name | dataset | metrics | size | storage | params | license | source | sha256 |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in sorted(entries):
        e = entries[name]
        source = f"[upstream]({e.url})" if e.upstream else f"[{e.url}]({e.url})"
        digest = f"`{e.sha256[:12]}…`" if e.sha256 else f"`{e.sha256_prefix}…` (prefix)"
        params = e.meta.get("num_params")
        rows.append("| " + " | ".join(_cell(c) for c in (
            f"`{name}`", e.meta.get("dataset", "-"), _metrics(e), _size(e.size), e.meta.get("dtype", "-"),
            f"{params / 1e6:.2f} M" if isinstance(params, int) else "-", e.meta.get("license", "-"),
            source, digest)) + " |")
    if len(rows) == 2:
        rows.append("| (none yet) | | | | | | | | |")
    return _HEADER + "\n".join(rows) + "\n" + _FOOTER


def write_readme(entries: dict[str, WeightsEntry] | None = None, path: Path | None = None) -> Path:
    from zoo import fs

    if path is None:
        folder = weights_dir()
        if folder is None:
            raise ManifestError("weights/README.md lives in a source checkout; this zoo is an installed package")
        path = folder / "README.md"
    return fs.write_text(path, render_readme(entries))
