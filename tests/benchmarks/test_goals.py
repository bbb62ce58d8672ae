"""benchmarks/_goals.py: issue 15's goals per CPU kind, read from the recorded results into the README."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def goals():
    return _load("zoo_bench_goals", "_goals.py")


@pytest.fixture(scope="module")
def harness():
    return _load("zoo_bench_harness_goals", "_harness.py")


def _machine(kind: str) -> dict:
    return {"cpu": "AMD EPYC", "cpu_kind": kind, "cpu_id": "AuthenticAMD family 25 model 1 stepping 1"}


def _update(kind: str, one: float, two: float, date: str = "2026-12-06T12:00:00Z") -> dict:
    return {"benchmark": "td3_update", "date": date, "machine": _machine(kind),
            "metrics": {"auto_precision": "fp32", "1t.auto.roofline_fraction": 0.79,
                        "2t.auto.roofline_fraction": 0.69},
            "ratios": {"1t.auto.ms_per_update": one, "2t.auto.ms_per_update": two,
                       "1t.auto.paired": one, "2t.auto.paired": two}}


def _learning(name: str, kind: str, ours: list[float], sb3: list[float], date: str) -> dict:
    return {"benchmark": name, "date": date, "machine": _machine(kind), "settings": {"threads": 2},
            "metrics": {"variant": "zoo-auto", "learn_steps_per_s_per_seed": ours,
                        "final_return_per_seed": [-120.0] * len(ours)},
            "peers": {"sb3": {"learn_steps_per_s_per_seed": sb3, "final_return_per_seed": [-121.0] * len(sb3)}}}


def _rows(table: str) -> dict[str, list[str]]:
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    return {cells[0]: cells[1:] for cells in (line.strip("| ").split(" | ") for line in lines)}


def test_each_kind_gets_a_column_read_from_its_own_results(goals):
    results = [
        _update("avx2", 1.43, 1.66),
        _update("amx", 4.2, 4.1, date="2026-12-05T12:00:00Z"),
        _update("avx512_bf16", 2.9, 2.9),
        _learning("td3_vs_sb3_pendulum_v1_2threads", "avx2", [100.0, 90.0], [50.0, 60.0], "2026-12-06T13:00:00Z"),
        _learning("td3_vs_sb3_pendulum_v1_2threads_seeds345", "avx2", [96.0], [40.0], "2026-12-04T03:00:00Z"),
        {"benchmark": "td3_update", "machine": {"cpu": "?"}, "metrics": {}},  # predates recording its CPU: left out
    ]
    table = goals.goals_table(results, reference="amx")
    header = table.splitlines()[0]
    assert header.index("| amx (") < header.index("| avx2 (") < header.index("| avx512_bf16 (")
    assert "family 25 model 1)" in header and "stepping" not in header
    rows = _rows(table)
    update = rows["TD3 update vs SB3, 1 / 2 threads, Pendulum rl-zoo preset (`td3_update.py`)"]
    amx, avx2, zen5 = update[1:]
    assert amx.startswith("4.20x / 4.10x") and amx.endswith("**met** · 2026-12-05")
    assert avx2.startswith("1.43x / 1.66x") and "**not met**" in avx2  # 1.6x at both thread counts
    assert "met" not in zen5  # no target for this kind
    roof = rows["TD3 update, fraction of the GEMM roofline measured in the run, 1 / 2 threads (`td3_update.py`)"]
    assert roof[2].startswith("0.79 / 0.69 (fp32) **not met**")
    # every seed of the kind's runs pooled: medians 96 vs 50 (1.92x); per seed 2.0 / 1.5 / 2.4, median 2.0
    learn = rows["TD3 learning vs SB3 with both cores, Pendulum-v1, 20k steps (`td3_vs_sb3.py --threads 2`)"]
    assert learn[2] == ("1.92x over 3 seeds (96.0 vs 50.0 learn steps/s), per seed 1.50-2.40x, median 2.00x "
                        "**met** · 2026-12-04, 2026-12-06")
    assert learn[1] == "-" and learn[3] == "-"  # amx and the Zen 5 ran no learning here
    returns = rows["TD3 final return minus SB3's, with both cores (median of seeds)"]
    assert returns[2].startswith("+1.0 (per seed +1.0 to +1.0)") and "met" not in returns[2]


def test_a_result_without_the_figure_is_said_not_a_crash(goals):
    broken = _update("avx2", 1.5, 1.5)
    del broken["metrics"]["1t.auto.roofline_fraction"]
    fp32_run = _learning("td3_vs_sb3_pendulum_v1_2threads", "avx2", [100.0], [50.0], "2026-12-06T13:00:00Z")
    fp32_run["metrics"]["variant"] = "zoo-fp32"
    one_thread = _learning("td3_vs_sb3_pendulum_v1", "avx2", [60.0], [40.0], "2026-12-06T13:00:00Z")  # on 2
    rows = _rows(goals.goals_table([broken, fp32_run, one_thread]))
    assert rows["TD3 update, fraction of the GEMM roofline measured in the run, 1 / 2 threads (`td3_update.py`)"][1] \
        .startswith("unreadable (KeyError: '1t.auto.roofline_fraction')")
    learn = rows["TD3 learning vs SB3 with both cores, Pendulum-v1, 20k steps (`td3_vs_sb3.py --threads 2`)"][1]
    assert learn.startswith("unreadable (ValueError: td3_vs_sb3_pendulum_v1_2threads timed zoo-fp32")
    learn = rows["TD3 learning vs SB3, 1 thread (`td3_vs_sb3.py`)"][1]
    assert learn.startswith("unreadable (ValueError: td3_vs_sb3_pendulum_v1 ran on 2 threads, not 1)")


def test_auto_precision_fails_where_it_picked_a_slower_bf16(goals):
    def ops(pick: str, speed: float) -> dict:
        keys = goals._PRECISION_OPS.values()
        return {"benchmark": "precision_ops", "date": "2026-12-06T00:00:00Z", "machine": _machine("avx2"),
                "metrics": {"auto": {"matmul": pick, "conv": "fp32", "conv3d": "fp32"}},
                "ratios": dict.fromkeys(keys, speed)}

    what = '`amp="auto"`\'s pick per op kind, bf16\'s speed over fp32\'s at 1 thread (`precision_ops.py`)'
    assert "**not met**" in _rows(goals.goals_table([ops("bf16", 0.03)]))[what][1]
    assert "**met**" in _rows(goals.goals_table([ops("fp32", 0.03)]))[what][1]


def test_the_readme_block_opens_with_the_goals_table(harness, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "td3_update.avx2.json").write_text(json.dumps(_update("avx2", 1.7, 1.8)))
    readme = harness.refresh_readme(tmp_path / "README.md", results)
    text = readme.read_text()
    assert text.index("## Issue 15: goals per CPU kind") < text.index("| TD3 update vs SB3") \
        < text.index("## CPU kind: avx2") < text.index("### td3_update")
    assert "1.70x / 1.80x (paired 1.70x / 1.80x; fp32) **met** · 2026-12-06" in text


def test_every_goal_reads_the_committed_results_of_the_reference_kind_and_the_zen_3(goals):
    results = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((BENCH / "results").glob("*.json"))]
    rows = _rows(goals.goals_table([r for r in results if isinstance(r, dict) and "benchmark" in r]))
    header = rows.pop("goal (issue 15)")
    columns = {h.split(" ")[0]: i for i, h in enumerate(header)}
    for goal in goals.GOALS:
        for kind in ("amx", "avx2"):
            cell = rows[goal.what][columns[kind]]
            assert cell != "-" and not cell.startswith("unreadable"), (goal.what, kind, cell)
