"""`zoo demo`: per-step timing, and single-threaded steps on a machine other processes keep busy."""

from __future__ import annotations

import os

import torch

from zoo import cli
from zoo.cli import demos


def test_each_step_is_timed_and_summed(capsys, monkeypatch):
    monkeypatch.setattr(demos, "_DEMOS", [demos._DemoStep("alpha: one", lambda: print("A ran"), 1),
                                          demos._DemoStep("beta (two)", lambda: print("B ran"), 2)])
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # explicit: no thread policy
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.index("A ran") < out.index("B ran") and out.count("\n-- ") == 2
    assert "demo step times: alpha " in out and ", beta " in out and "; total " in out


def test_a_busy_machine_runs_the_steps_single_threaded(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    try:
        monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
        assert demos._demo_threads() == "" and torch.get_num_threads() == before
        monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 4.0, 3.0))
        assert "load 5.0 on 2 cores" in demos._demo_threads() and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert demos._demo_threads() == ""  # the user's explicit choice wins
    finally:
        torch.set_num_threads(before)
