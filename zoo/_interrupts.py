"""SIGTERM as Ctrl-C: what the ``zoo`` command installs, and what the training loops recognise.

``kill``, ``timeout``, a batch scheduler's time limit and ``scancel`` send SIGTERM, whose Python default ends the
process on the spot with nothing saved or said. The command has it stop a run as Ctrl-C does, whether or not
the process takes Ctrl-C itself: a job started with ``&`` from a script has SIGINT ignored, and SIGTERM must
still stop its run after the step in progress, with the checkpoint named.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["SIGTERM_STOP", "sigterm_as_ctrl_c", "sigterm_is_ctrl_c", "stopped_by"]

SIGTERM_STOP = "stopped by SIGTERM"  # the KeyboardInterrupt's text where no handler of a loop caught SIGTERM


def sigterm_as_ctrl_c() -> None:
    """SIGTERM runs the SIGINT handler (TD3's "stop after this step" while it learns), or raises
    KeyboardInterrupt(:data:`SIGTERM_STOP`) where Python's own or none is there. Only in the main thread of
    a process that leaves SIGTERM at its default."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def as_ctrl_c(signum, frame) -> None:
        on_ctrl_c = signal.getsignal(signal.SIGINT)
        if not callable(on_ctrl_c) or on_ctrl_c is signal.default_int_handler:
            raise KeyboardInterrupt(SIGTERM_STOP)
        on_ctrl_c(signum, frame)  # a loop's own: it names SIGTERM from signum

    as_ctrl_c.zoo_as_ctrl_c = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGTERM, as_ctrl_c)


def sigterm_is_ctrl_c() -> bool:
    """Whether SIGTERM is :func:`sigterm_as_ctrl_c`'s, so a loop may take it where SIGINT is ignored."""
    return getattr(signal.getsignal(signal.SIGTERM), "zoo_as_ctrl_c", False)


def stopped_by(err: KeyboardInterrupt) -> str | None:
    """"SIGTERM" or "Ctrl-C" for an interrupt nothing explained yet; None for one that says more already."""
    text = str(err)
    return "SIGTERM" if text == SIGTERM_STOP else "Ctrl-C" if not text else None
