"""``zoo pull``, ``zoo weights list|verify|add|readme|release|export-hf`` and ``zoo cache info|clean``:
the hub on the command line.

Imported by :func:`zoo.cli.build_parser`, so the hub itself never imports the CLI.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from zoo.cli.arguments import parse_kv
from zoo.cli.commands import command
from zoo.cli.errors import UsageError

_DTYPES = {"float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16",
           "bf16": "bfloat16", "float32": "float32", "fp32": "float32"}


def _configure_pull(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", metavar="NAME", help="weights names, MODEL.TAG (see `zoo weights list`)")
    p.add_argument("--all", action="store_true",
                   help="every weights file the project ships (from the checkout, a mirror, offline too)")
    p.add_argument("--upstream", action="store_true",
                   help="with --all: also the upstream (https) files, which need a network or a mirror")
    p.add_argument("--force", action="store_true", help="download again even when cached")
    p.add_argument("--cache-dir", help="cache folder (default: $ZOO_HOME/weights)")
    p.add_argument("--local-files-only", action="store_true",
                   help="never open a network connection (cache, checkout and file:// mirror only)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


@command("pull", "download weights into the cache, verified by sha256", _configure_pull)
def _cmd_pull(args: argparse.Namespace) -> int:
    from zoo import hub

    entries = hub.read_manifest()
    if args.all == bool(args.names):
        raise UsageError("give weights names or --all (not both); see `zoo weights list`")
    if args.upstream and not args.all:
        raise UsageError("--upstream goes with --all")
    if args.all:
        names = [n for n, e in sorted(entries.items()) if args.upstream or not e.upstream]
        skipped = [n for n, e in sorted(entries.items()) if e.upstream and not args.upstream]
    else:
        names, skipped = list(args.names), []
        for name in names:
            hub.get_entry(name)  # unknown names fail before any download
    failed = 0
    for name in names:
        try:
            how = _pull_one(hub, entries[name], args)
        except hub.OfflineError as err:
            failed += 1
            print(f"{name}: {err}", file=sys.stderr)
            continue
        except (hub.DownloadError, hub.HashMismatchError, OSError) as err:
            failed += 1
            print(f"{name}: error: {err}", file=sys.stderr)
            continue
        print(f"{name}: {how}")
    if not names and args.all:
        print("the project ships no weights files yet")
    for name in skipped:
        print(f"{name}: skipped (upstream file {entries[name].url}: needs a network or a mirror; "
              f"`zoo pull {name}` or `zoo pull --all --upstream`)")
    return 1 if failed else 0


def _pull_one(hub, entry, args: argparse.Namespace) -> str:
    """Pull one entry and say truthfully how its hash was checked."""
    ok = "sha256 ok" if entry.sha256 else f"sha256 prefix {entry.sha256_prefix} ok"
    path, origin = hub.store.pull_entry_reporting(entry, cache_dir=args.cache_dir, force=args.force,
                                                  progress=not args.quiet, local_files_only=args.local_files_only)
    return f"{path} (" + {
        "fetched": f"downloaded, {ok}",
        "arrived": f"fetched by another process while this one waited, {ok} on its arrival",
        "re-hashed": f"cached, {ok} (re-hashed now)",
        "cached": f"cached, {ok} (verified on arrival, file unchanged since)",
    }[origin] + ")"


def _configure_weights(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    q = sub.add_parser("list", help="the published weights: name, size, dataset, metrics, cached or not")
    q.add_argument("--model", help="only this model's weights (a weights name, MODEL.TAG, lists that one)")
    q.add_argument("--wide", action="store_true",
                   help="every column whole on a terminal too (piped output always is)")
    q = sub.add_parser("verify", help="re-hash every file in the cache and report")
    q.add_argument("--cache-dir", help="cache folder (default: $ZOO_HOME/weights)")
    q.add_argument("--shipped", action="store_true",
                   help="also check the checkout's own weights files against the manifest")
    q = sub.add_parser("add", help="publish a state dict: convert to safetensors, hash, write the manifest entry")
    q.add_argument("file", help="a .safetensors file or a torch.save state dict (.pt/.pth, weights only)")
    q.add_argument("--name", required=True, help="MODEL.TAG, e.g. resnet18.cifar10")
    q.add_argument("--config", nargs="*", action="extend", metavar="KEY=VALUE", help="builder config the file needs")
    q.add_argument("--meta", nargs="*", action="extend", metavar="KEY=VALUE",
                   help="dataset=..., metrics='{\"acc\": 0.9}', command=..., license=...")
    q.add_argument("--dtype", choices=sorted(_DTYPES), help="storage dtype of floating tensors (e.g. float16)")
    q.add_argument("--force", action="store_true", help="replace weights already published under --name")
    sub.add_parser("readme", help="regenerate weights/README.md from the manifest")
    q = sub.add_parser("release", help="gather the project's files + manifest as the release host serves them")
    q.add_argument("out_dir", metavar="OUT_DIR", help="folder to fill (upload its files to the release_url)")
    q = sub.add_parser("export-hf", help="write a Hugging Face Hub repo folder (safetensors, config, model card)")
    q.add_argument("name", metavar="NAME", help="MODEL.TAG of the project's own weights")
    q.add_argument("out_dir", metavar="DIR", help="folder to write (then `hf upload ORG/REPO DIR`)")
    q.add_argument("--repo", default="ORG/REPO", help="the repo id, shown in the model card's example")


def _size(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**20:.1f} MiB"


def _print_table(rows: list[tuple[str, ...]], shrink: tuple[int, ...], wide: bool) -> None:
    """Columns two spaces apart. On a terminal, the widest of the ``shrink`` columns is cut, one character at
    a time, down to 12, with "…" where a cell is cut, until rows fit its width and none wraps; piped output
    and ``wide`` keep every cell whole, for scripts."""
    import shutil

    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    over = sum(widths) + 2 * (len(widths) - 1) - shutil.get_terminal_size().columns
    while over > 0 and not wide and sys.stdout.isatty():
        i = max(shrink, key=lambda j: widths[j])
        if widths[i] <= 12:
            break
        widths[i] -= 1
        over -= 1
    for row in rows:
        cells = [c if len(c) <= w else c[:w - 1] + "…" for c, w in zip(row, widths)]
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())


@command("weights", "list, verify and publish pretrained weights", _configure_weights)
def _cmd_weights(args: argparse.Namespace) -> int:
    from zoo import hub

    if args.action == "list":
        entries = hub.read_manifest()
        from zoo.api import list_weights

        names = list_weights(args.model)  # an unknown model is an error naming the close ones, not "none"
        rows = [("NAME", "SIZE", "CACHED", "DATASET", "METRICS")]
        for name in names:
            e = entries[name]
            metrics = ", ".join(f"{k}={v}" for k, v in (e.meta.get("metrics") or {}).items()) or "-"
            cached = "yes" if hub.cached_path(e).is_file() else ("upstream" if e.upstream else "no")
            rows.append((name, _size(e.size), cached, str(e.meta.get("dataset", "-")), metrics))
        _print_table(rows, shrink=(3, 4), wide=args.wide)
        if not names:
            print("(no weights published" + (f" for {args.model})" if args.model else ")"))
        return 0
    if args.action == "verify":
        if args.shipped and hub.weights_dir() is None:  # before the cache is hashed and printed as if all went on
            raise UsageError("--shipped checks a source checkout's weights/ folder; this zoo is installed")
        checks = hub.verify_cache(args.cache_dir)
        for c in checks:
            print(f"{c.status:<15} {c.path}  {c.detail}")
        bad = sum(c.failed for c in checks)
        if args.shipped:
            for name, e in sorted(hub.read_manifest().items()):
                if e.upstream:
                    continue
                path = hub.weights_dir() / e.url
                if not path.is_file():
                    bad += 1
                    print(f"{'MISSING':<15} {path}  {name}: shipped file absent from the checkout")
                    continue
                digest = hub.sha256_file(path)
                ok = e.hash_matches(digest) and path.stat().st_size == e.size
                bad += not ok
                print(f"{'ok' if ok else 'MISMATCH':<15} {path}  {name} (shipped)")
        root = hub.cache_root(args.cache_dir)
        print(f"{len(checks)} cached file(s) in {root}: {bad} problem(s)")
        return 1 if bad else 0
    if args.action == "add":
        import torch

        dtype = getattr(torch, _DTYPES[args.dtype]) if args.dtype else None
        entry = hub.add_weights(args.file, name=args.name, config=parse_kv(args.config),
                                meta=parse_kv(args.meta), dtype=dtype, force=args.force)
        print(f"added {entry.name}: {hub.weights_dir() / entry.url} ({_size(entry.size)}, sha256 {entry.sha256})")
        return 0
    if args.action == "readme":
        print(hub.write_readme())
        return 0
    if args.action == "release":
        written = hub.release(args.out_dir)
        total = sum(p.stat().st_size for p in written)
        print(f"{len(written)} files ({total / 2**20:.1f} MiB) in {args.out_dir}; the release host serves them "
              f"at {hub.release_url() or '(no release_url in the manifest)'}/<name>")
        return 0
    if args.action == "export-hf":
        from zoo.hub.hf import export_hf

        for path in export_hf(args.name, args.out_dir, repo_hint=args.repo):
            print(path)
        print(f"upload with: hf upload {shlex.quote(args.repo)} {shlex.quote(str(args.out_dir))}  "
              "(huggingface_hub < 1.0: huggingface-cli upload)")
        return 0
    raise UsageError(f"unknown action {args.action!r}")


def _configure_cache(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    q = sub.add_parser("info", help="what zoo downloaded: weights, data sets, Hub repos, partial downloads, temp "
                                    "files, sizes")
    q.add_argument("--cache-dir", help="cache folder (default: $ZOO_HOME/weights, with $ZOO_HOME/datasets and "
                                       "$ZOO_HOME/hf)")
    q = sub.add_parser("clean", help="delete what zoo downloaded (downloads in progress are left alone)")
    q.add_argument("--cache-dir", help="cache folder (default: $ZOO_HOME/weights, with $ZOO_HOME/datasets and "
                                       "$ZOO_HOME/hf); only files a download put there are deleted")
    q.add_argument("--stale", action="store_true", help="only partial downloads and temp files of killed writers")


@command("cache", "show (info) or free (clean) what zoo downloaded: weights, data sets, Hub repos", _configure_cache)
def _cmd_cache(args: argparse.Namespace) -> int:
    from zoo import hub

    places = [str(p) for p in hub.cache.cache_places(args.cache_dir)]  # the Hub's and the data sets' folders named too
    where = places[0] if len(places) == 1 else ", ".join(places[:-1]) + " and " + places[-1]
    if args.action == "info":
        items = hub.cache_info(args.cache_dir)
        for item in items:
            print(f"{_size(item.size):>10}  {item.kind:<8} {item.name:<40} {item.status:<11} {item.path}")
        total = sum(i.size for i in items)
        print(f"{len(items)} item(s), {_size(total)} in {where}")
        return 0
    removed, freed = hub.clean_cache(args.cache_dir, stale_only=args.stale)
    print(f"removed {removed} item(s), freed {_size(freed)} from {where}")
    return 0
