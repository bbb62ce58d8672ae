"""benchmarks/td3_vs_sb3.py: its zoo variants build what they say, and ratios pair the runs of one seed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def script(monkeypatch, tmp_path):
    """td3_vs_sb3 with its harness writing into the test's own folders (a trial run's)."""
    pytest.importorskip("gymnasium")
    monkeypatch.syspath_prepend(str(BENCH))
    import _harness
    import td3_vs_sb3

    for name, value in (("RESULTS_DIR", tmp_path / "results"), ("TRIAL_DIR", tmp_path / "trial"),
                        ("README", tmp_path / "README.md"), ("_DECIDED", {})):
        monkeypatch.setattr(_harness, name, value)
    monkeypatch.setattr(td3_vs_sb3, "RESULTS_DIR", _harness.RESULTS_DIR)  # imported by name: plots are named from it
    monkeypatch.delenv(_harness.RECORD_ENV, raising=False)
    monkeypatch.setattr(_harness, "machine_info", lambda: {"cpu": "test"})
    monkeypatch.setattr(sys, "argv", ["benchmarks/td3_vs_sb3.py"])
    return td3_vs_sb3, tmp_path / "trial"


def test_the_skip_variant_runs_beside_the_default_with_ratios_paired_by_seed(script, monkeypatch):
    module, trial = script
    if module.auto_amp("cpu", "matmul"):
        pytest.skip("amp='auto' picks bf16 on this CPU: zoo-skip is refused there (tested below)")
    built = []
    real_build = module.zoo.build
    monkeypatch.setattr(module.zoo, "build", lambda *a, **kw: built.append(kw) or real_build(*a, **kw))
    module.main(["--steps", "260", "--learning-starts", "200", "--eval-every", "130", "--eval-episodes", "1",
                 "--seeds", "0", "1", "--variants", "zoo-auto", "zoo-skip", "--name", "t"])
    # seed 0 runs zoo-auto first, seed 1 zoo-skip first (the order rotates per seed)
    assert [(kw["amp"], kw.get("skip_silent_units", False)) for kw in built] == [
        ("auto", False), ("auto", True), ("auto", True), ("auto", False)]
    (path,) = trial.glob("t*.json")
    res = json.loads(path.read_text())
    assert res["metrics"]["variant"] == "zoo-auto" and set(res["peers"]) == {"zoo-skip"}
    ours, skip = res["metrics"]["learn_steps_per_s_per_seed"], res["peers"]["zoo-skip"]["learn_steps_per_s_per_seed"]
    per_seed = sorted(a / b for a, b in zip(ours, skip))
    # two seeds: the median of the per-seed ratios is their mean (the file rounds steps/s to 0.1)
    assert res["ratios"]["learn_steps_per_s_vs_zoo-skip_paired"] == pytest.approx(sum(per_seed) / 2, rel=0.01)
    assert res["ratios"]["learn_steps_per_s_vs_zoo-skip"] == pytest.approx(
        res["metrics"]["learn_steps_per_s"] / res["peers"]["zoo-skip"]["learn_steps_per_s"])


def test_the_skip_variant_is_refused_where_auto_picks_bf16(script, monkeypatch):
    module, trial = script
    monkeypatch.setattr(module, "auto_amp", lambda *a: "bf16")
    with pytest.raises(SystemExit, match="zoo-skip: amp='auto' picks bf16 on this CPU"):
        module.main(["--steps", "260", "--variants", "zoo-auto", "zoo-skip"])
    assert not trial.exists()
