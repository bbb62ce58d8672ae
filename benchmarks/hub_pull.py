"""How long a verified pull of a real weights file takes over HTTP, against torch.hub's downloader.

The file: a torchvision ResNet18 state dict as safetensors (fp32, ~45 MB: the size of the largest
file the zoo ships or pulls for vision), served by a local ``http.server`` on 127.0.0.1 (no network
here). Ours: ``zoo.pull`` (stream to .part, full sha256 on a helper thread, atomic rename, per-file lock). Peer:
``torch.hub.download_url_to_file(url, dst, hash_prefix=...)`` (stream, sha256 prefix check, move).
Repeats are interleaved, their order rotated, after one warmup pull each, with a cold cache each time; medians
and the ratio.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/hub_pull.py --repeats 5
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = _harness.parse_args(parser, None, __file__)

    import torch
    import torchvision

    from zoo import hub

    work = Path(tempfile.mkdtemp(prefix="zoo-hub-bench-"))
    served, weights = work / "served", work / "weights"
    served.mkdir()
    weights.mkdir()
    os.environ["ZOO_WEIGHTS_DIR"] = str(weights)
    torch.manual_seed(0)
    model = torchvision.models.resnet18()
    src = hub.save_weights(model, served / "resnet18.bench.safetensors")
    digest, size = hub.sha256_file(src), src.stat().st_size
    entry = hub.WeightsEntry.from_dict({"name": "resnet18.bench", "model": "resnet18",
                                        "url": src.name, "sha256": digest, "size": size,
                                        "format": "safetensors", "config": {}, "meta": {}})
    hub.update_manifest(lambda e: e.update({entry.name: entry}))

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(served)))
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    os.environ["ZOO_WEIGHTS_URL"] = url

    def ours(i: int) -> float:
        home = work / f"ours{i}"
        t0 = time.perf_counter()
        path = hub.pull(entry.name, cache_dir=home, progress=False)
        dt = time.perf_counter() - t0
        assert hub.sha256_file(path) == digest
        return dt

    def peer(i: int) -> float:
        dst = work / f"peer{i}" / src.name
        dst.parent.mkdir()
        t0 = time.perf_counter()
        torch.hub.download_url_to_file(f"{url}/{src.name}", str(dst), hash_prefix=digest[:8], progress=False)
        dt = time.perf_counter() - t0
        assert hub.sha256_file(dst) == digest
        return dt

    runs = itertools.count()  # every pull into a folder of its own: a cold cache each time
    # rotated, after one warmup pull each: ours first every time met the server and page cache colder
    times = _harness.interleave({"zoo.pull": lambda: ours(next(runs)), "torch.hub": lambda: peer(next(runs))},
                                repeats=args.repeats, warmup=1)
    httpd.shutdown()

    med = {k: statistics.median(v) for k, v in times.items()}
    mb = size / 1e6
    result = {
        "benchmark": "hub_pull",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": _harness.machine_info(),  # CPU model, kind and flags
        "command": _harness.command_line(),
        "metrics": {"file_mb": round(mb, 2), "seconds_median": round(med["zoo.pull"], 4),
                    "mb_per_s": round(mb / med["zoo.pull"], 1), "repeats": args.repeats,
                    "seconds_all": [round(t, 4) for t in times["zoo.pull"]]},
        "peers": {"torch.hub.download_url_to_file": {
            "seconds_median": round(med["torch.hub"], 4), "mb_per_s": round(mb / med["torch.hub"], 1),
            "seconds_all": [round(t, 4) for t in times["torch.hub"]]}},
        "ratios": {"zoo_over_torch_hub_time": round(med["zoo.pull"] / med["torch.hub"], 3)},
    }
    out = _harness.save_result_json("hub_pull", result)
    print(f"| pull of a {mb:.1f} MB safetensors over local HTTP | zoo.pull | torch.hub | ratio |")
    print("|---|---|---|---|")
    print(f"| median seconds ({args.repeats} interleaved repeats) | {med['zoo.pull']:.3f} | "
          f"{med['torch.hub']:.3f} | {result['ratios']['zoo_over_torch_hub_time']:.2f} |")
    print(f"wrote {out}")
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
