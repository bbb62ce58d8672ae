"""Progress bars redraw in place in a terminal, and seldom in a log: a file or pipe keeps every redraw."""

from __future__ import annotations

import io

from zoo._progress import LOG_INTERVAL_S, ProgressBar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_written_to_a_log_redraws_every_log_interval():
    log = io.StringIO()
    bar = ProgressBar(total=10, file=log)
    assert bar.mininterval == LOG_INTERVAL_S and bar.maxinterval == LOG_INTERVAL_S
    for _ in range(10):
        bar.update()
    bar.close()
    assert log.getvalue().count("\r") <= 3  # the start and the end; tqdm's 0.1 s redraws could write one per update


def test_a_bar_in_a_terminal_keeps_tqdms_interval_and_an_explicit_one_is_kept():
    assert ProgressBar(total=1, file=_Terminal()).mininterval == 0.1
    assert ProgressBar(total=1, file=io.StringIO(), mininterval=2.0).mininterval == 2.0


def test_a_text_bar_in_a_notebook_cell_keeps_tqdms_interval():
    """Jupyter without ipywidgets gets tqdm's text bar on the kernel's stream, which is no TTY but draws
    "\\r" in place."""
    OutStream = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})
    assert ProgressBar(total=1, file=OutStream()).mininterval == 0.1


def test_tqdm_autos_notebook_widget_keeps_tqdms_interval(monkeypatch):
    """In a notebook with ipywidgets tqdm.auto's class derives from tqdm.notebook's: a widget, drawn in place."""
    from tqdm.notebook import tqdm as notebook_tqdm

    import zoo._progress as progress

    widget = type("tqdm", (notebook_tqdm,), {"__module__": "tqdm.auto"})
    monkeypatch.setattr(progress, "tqdm", widget)
    assert progress._redraws_in_place(io.StringIO())
    monkeypatch.setattr(progress, "tqdm", type("tqdm", (), {"__module__": "tqdm.auto"}))
    assert not progress._redraws_in_place(io.StringIO())


class _Counted:
    """A map-style dataset that counts its reads in a file (DataLoader workers are other processes)."""

    def __init__(self, log):
        self.log = log

    def __len__(self):
        return 8

    def __getitem__(self, i):
        with open(self.log, "a", encoding="utf-8") as f:
            f.write(f"{i}\n")
        return i


def test_a_bar_over_a_dataloader_reads_each_item_once(tmp_path):
    """tqdm.auto's class is tqdm_asyncio, whose constructor calls iter() on what it wraps: every epoch's DataLoader
    was iterated twice, the first iterator thrown away after it had started its workers and prefetched their
    batches (a 4-epoch fit with 2 workers took 1.6x as long) and drawn a base seed from the loader's generator."""
    from torch.utils.data import DataLoader

    from zoo._progress import ProgressBar

    log = tmp_path / "reads.txt"
    loader = DataLoader(_Counted(log), batch_size=2, num_workers=2)  # with none, the thrown-away one read nothing
    for disable in (True, False):
        log.write_text("")
        assert sum(len(b) for b in ProgressBar(loader, disable=disable)) == 8
        assert sorted(int(x) for x in log.read_text().split()) == list(range(8))
