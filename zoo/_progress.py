"""Progress bars that suit where they are drawn.

In a terminal or a notebook a tqdm bar redraws in place. Written to a file or a pipe (a SLURM log, CI, ``2> log``)
every redraw stays in the log as another line, and tqdm's default of a redraw every 0.1 s writes tens of
thousands of them an hour of training. There the bars redraw every :data:`LOG_INTERVAL_S` seconds, still
saying how far a run is.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from tqdm.std import TqdmExperimentalWarning

# tqdm.auto's choice of a notebook widget or a terminal bar, without its asyncio layer: tqdm_asyncio's constructor
# calls iter() on what it wraps, so every epoch's DataLoader would be iterated twice, the first iterator thrown
# away after it had started its workers, prefetched their batches and drawn a base seed from the loader's generator
with warnings.catch_warnings():
    warnings.simplefilter("ignore", category=TqdmExperimentalWarning)
    from tqdm.autonotebook import tqdm

__all__ = ["LOG_INTERVAL_S", "ProgressBar"]

LOG_INTERVAL_S = 30.0
"""Seconds between redraws of a bar written to a file or pipe (a log)."""


class ProgressBar(tqdm):
    """``tqdm.auto.tqdm`` (without its asyncio layer) that redraws every :data:`LOG_INTERVAL_S` seconds when its
    stream is no terminal (and no notebook widget); an explicit ``mininterval`` is kept."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "mininterval" not in kwargs and not _redraws_in_place(kwargs.get("file")):
            # maxinterval too: tqdm's monitor thread would otherwise force a redraw every 10 s
            kwargs.update(mininterval=LOG_INTERVAL_S, maxinterval=LOG_INTERVAL_S)
        super().__init__(*args, **kwargs)


def _redraws_in_place(file: Any) -> bool:
    # tqdm.auto chose the notebook widget: its class then derives from tqdm.notebook's (it is tqdm.auto's own)
    if any(c.__module__.startswith("tqdm.notebook") for c in tqdm.__mro__):
        return True
    stream = file if file is not None else sys.stderr
    if type(stream).__module__.startswith("ipykernel"):  # a notebook's output cell draws "\r" in place too
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
