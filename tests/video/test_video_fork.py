"""A DataLoader worker forked while a threaded decoder waits for the parent's cyclic garbage collector."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

_FORK = textwrap.dedent("""
    import gc, os, sys, time
    import av
    import zoo.video.decoding  # its fork hooks

    gc.disable()  # the cycle below must still be there at the fork, as one the collector has not reached yet
    container = av.open(sys.argv[1])
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    stream.codec_context.thread_count = 2
    for i, _ in enumerate(container.decode(stream)):
        if i == 3:
            break
    cycle = [container, stream]
    cycle.append(cycle)  # left to the cyclic collector, as a failed read's traceback leaves its decoder
    del container, stream, cycle
    pid = os.fork()
    if pid == 0:
        gc.collect()  # the worker's collector, which freed the parent's decoder
        os._exit(0)
    for _ in range(200):
        if os.waitpid(pid, os.WNOHANG)[0]:
            print("exited")
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        print("hung")
""")


def test_a_child_forked_beside_a_threaded_decoder_in_cyclic_garbage_exits(encode_clip, tmp_path):
    """Before: the child's collector freed the decoder it inherited, and FFmpeg's free waited for decoder threads
    that stayed in the parent: a DataLoader worker forked after a failed read (whose traceback held the decoder in
    a cycle) hung for good. Objects a child inherits are now left to the parent (``gc.freeze`` at the fork)."""
    frames = np.random.default_rng(0).integers(0, 256, (12, 32, 32, 3), dtype=np.uint8)
    path = encode_clip(tmp_path / "v.avi", frames, gop=4, codec="mpeg4")
    said = subprocess.run([sys.executable, "-c", _FORK, str(path)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == "exited", said.stdout
