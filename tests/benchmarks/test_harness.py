"""benchmarks/_harness.py: interleaving, medians, result JSON format, README regeneration."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "_harness.py"


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("zoo_bench_harness", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_interleave_rotates_order_and_drops_warmup(harness):
    calls = []
    counter = iter(range(100))

    def case(name):
        def run():
            calls.append(name)
            return next(counter)
        return run

    out = harness.interleave({"a": case("a"), "b": case("b")}, repeats=3, warmup=1, progress=False)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert out == {"a": [3, 4, 7], "b": [2, 5, 6]}
    assert harness.median([3.0, 1.0, 2.0]) == 2.0
    with pytest.raises(ValueError):
        harness.interleave({"a": case("a")}, repeats=0)


def test_results_json_and_readme_from_all_results(harness, tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n\nhand-written intro\n")
    kw = {"results_dir": tmp_path / "results", "readme": readme, "command": "python benchmarks/x.py"}
    path = harness.write_result("alpha", metrics={"fps": 10.0, "cfg": {"bs": 4}}, peers={"torch": {"fps": 8.0}},
                                ratios={"fps": 1.25, "other": 2.0}, **kw)
    data = json.loads(path.read_text())
    assert set(data) >= {"benchmark", "date", "machine", "command", "metrics", "peers", "ratios"}
    assert set(data["machine"]) >= {"cpu", "cores", "torch", "threads"}
    assert "| fps | 10 | 8 | 1.25 |" in capsys.readouterr().out
    harness.write_result("beta", metrics={"acc": 0.5}, **kw)
    harness.write_result("alpha", metrics={"fps": 12.0}, **kw)  # rerun replaces only its own table
    text = readme.read_text()
    assert text.startswith("# Benchmarks\n\nhand-written intro\n")
    assert text.count("### alpha") == 1 and text.count("### beta") == 1
    assert "| fps | 12 |" in text and "| fps | 10 |" not in text
    assert "| cfg.bs |" not in text  # the rerun's metrics only
    assert not [p for p in tmp_path.rglob(".*.tmp")]


def test_results_record_one_threads_gemm_throughput_when_written(harness, monkeypatch, tmp_path):
    """The VMs change speed between and within runs: each result says how fast the CPU multiplied when it was
    written (fp32, and bf16 only where the CPU has it natively), and its README table shows it."""
    import torch

    pulse = harness.gemm_pulse(rounds=2, min_time=0.01)
    assert set(pulse) == ({"fp32", "bf16"} if harness.native_bf16() else {"fp32"})
    assert all(v > 0.5 for v in pulse.values()), pulse  # GFLOP/s: any CPU torch runs on does more than this
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        monkeypatch.setattr(harness, "native_bf16", lambda: False)
        assert set(harness.gemm_pulse(rounds=1, min_time=0.0)) == {"fp32"}
        assert torch.get_num_threads() == 2  # timed on one thread, the caller's setting given back
    finally:
        torch.set_num_threads(before)
    monkeypatch.setattr(harness, "gemm_pulse", lambda: {"fp32": 126.04, "bf16": 431.0})
    readme = tmp_path / "README.md"
    path = harness.write_result("gamma", metrics={"fps": 1.0}, results_dir=tmp_path / "results", readme=readme,
                                command="python benchmarks/g.py")
    assert json.loads(path.read_text())["machine"]["gemm_gflops_1thread"] == {"fp32": 126.04, "bf16": 431.0}
    assert "one thread's GEMM at the end: fp32 126, bf16 431 GFLOP/s" in readme.read_text()


@pytest.mark.parametrize(("ident", "uarch"), [
    ("AuthenticAMD family 25 model 1 stepping 1", "zen3"),
    ("AuthenticAMD family 25 model 17 stepping 1", "zen4"),
    ("AuthenticAMD family 25 model 97 stepping 2", "zen4"),
    ("AuthenticAMD family 26 model 2 stepping 1", "zen5"),
    ("AuthenticAMD family 23 model 49 stepping 0", "zen2"),
    ("AuthenticAMD family 23 model 1 stepping 2", "zen1"),
    ("GenuineIntel family 6 model 143 stepping 8", "spr"),
    ("GenuineIntel family 6 model 207 stepping 2", "emr"),
    ("GenuineIntel family 6 model 158 stepping 10", "model158"),
    ("GenuineIntel family 6 model 167 stepping 1", "model167"),
    ("", ""),
])
def test_cpu_uarch_from_family_and_model(harness, ident, uarch):
    assert harness.cpu_uarch(ident) == uarch


def test_result_kind_files_a_second_microarchitecture_of_a_kind_apart(harness):
    # the kind's first CPU keeps the plain name; Zen 4 and Zen 5 are both avx512_bf16 but must not overwrite
    assert harness.result_kind("avx512_bf16", "zen5") == "avx512_bf16"
    assert harness.result_kind("avx512_bf16", "zen4") == "avx512_bf16-zen4"
    assert harness.result_kind("avx2", "zen3") == "avx2"
    assert harness.result_kind("avx2-emulated", "zen4") == "avx2-zen4-emulated"
    assert harness.result_kind("amx", "") == "amx"
    assert harness.result_kind("avx512_bf16", "") == "avx512_bf16"
    # an Emerald Rapids VM that hides AMX is avx512_bf16 too: it must not overwrite the Zen 5's results
    assert harness.result_kind("avx512_bf16", "emr") == "avx512_bf16-emr"
    assert harness.result_kind("amx", "emr") == "amx"
    assert harness.result_kind("avx512", "emr") == "avx512"
    assert harness.result_kind("avx2-emulated", "emr") == "avx2-emulated"
    # an Intel model not in the table is not known to be the kind's first CPU (the AMX Xeon VM of 2026-12-07
    # reported model 167): its results must not replace the reference kind's
    assert harness.result_kind("amx", "model167") == "amx-model167"


def test_readme_groups_results_by_result_kind(harness):
    def result(name, **machine):
        return {"benchmark": name, "machine": {"cpu": "AMD EPYC", "cores": 2, **machine}, "metrics": {"x": 1}}

    text = harness._tables_by_kind([result("a", cpu_kind="avx512_bf16"),
                                    result("b", cpu_kind="avx512_bf16", result_kind="avx512_bf16-zen4")])
    assert "## CPU kind: avx512_bf16\n" in text and "## CPU kind: avx512_bf16-zen4\n" in text
    assert text.index("### a") < text.index("## CPU kind: avx512_bf16-zen4") < text.index("### b")


@pytest.mark.parametrize(("kind", "expected"), [("amx", "x.png"), ("avx2", "x.avx2.png"),
                                                ("avx512_bf16-zen4", "x.avx512_bf16-zen4.png")])
def test_result_file_files_plots_by_cpu_kind_like_results(harness, monkeypatch, tmp_path, kind, expected):
    # a Zen 3 run of finetune_resnet18 wrote its JSON apart but its plot over the reference one
    monkeypatch.setattr(harness, "result_kind", lambda *a: kind)
    assert harness.result_file("x", "png", tmp_path) == tmp_path / expected
    assert harness.result_file("x") == harness.RESULTS_DIR / expected.replace(".png", ".json")


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module's code (f-string parts included), docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_benchmarks_name_their_result_files_through_result_file():
    # a file name spelled out by hand is the same on every CPU: another kind's run overwrites the committed
    # plot, or merges the reference kind's figures into its own result
    found = [f"{p.name}:{line}: {s!r}" for p in sorted(HARNESS.parent.glob("*.py")) if p != HARNESS
             for line, s in _code_strings(p) if s.rstrip().endswith((".png", ".json"))]
    assert not found, "name results with _harness.result_file(name, ext) / output_file: " + "; ".join(found)


@pytest.fixture
def bench_dirs(harness, monkeypatch, tmp_path):
    """A recorded result of ``x.py --repeats 9`` and its README table, in folders of the test's own."""
    results, trial, readme = tmp_path / "results", tmp_path / "trial", tmp_path / "README.md"
    results.mkdir()
    for name, value in (("RESULTS_DIR", results), ("TRIAL_DIR", trial), ("README", readme), ("_DECIDED", {})):
        monkeypatch.setattr(harness, name, value)
    monkeypatch.delenv(harness.RECORD_ENV, raising=False)
    monkeypatch.setattr(harness, "machine_info", lambda: {"cpu": "test"})
    # the reference kind's file names (x.json), whatever CPU runs the test: another kind writes x.<kind>.json
    monkeypatch.setattr(harness, "result_kind", lambda *a: harness.REFERENCE_KIND)
    monkeypatch.setattr(harness.sys, "argv", ["benchmarks/x.py", "--repeats", "9"])
    monkeypatch.setenv(harness.RECORD_ENV, "1")
    harness.write_result("x", metrics={"ms": 1.0}, results_dir=results, readme=readme)
    monkeypatch.delenv(harness.RECORD_ENV)
    harness._DECIDED.clear()
    return results, trial, readme


def test_a_trial_run_leaves_the_recorded_results_readme_and_weights_alone(harness, bench_dirs, monkeypatch, capsys):
    # a smoke run (one repeat) replaced the recorded result and the README's table, with nothing marking it
    results, trial, readme = bench_dirs
    recorded, table = (results / "x.json").read_text(), readme.read_text()
    assert "python benchmarks/x.py --repeats 9" in recorded and "| ms |" in table
    monkeypatch.setattr(harness.sys, "argv", ["/repo/benchmarks/x.py", "--repeats", "1"])
    capsys.readouterr()
    path = harness.write_result("x", metrics={"ms": 99.0}, results_dir=results, readme=readme)
    assert path == trial / "x.json" and json.loads(path.read_text())["metrics"] == {"ms": 99.0}
    assert (results / "x.json").read_text() == recorded and readme.read_text() == table
    assert harness.output_file("x", "png") == trial / "x.png"
    assert harness.save_result_json("y", {"benchmark": "y"}) == trial / "y.json" and not (results / "y.json").exists()
    assert harness.may_publish_weights("x.tag") is False
    err = capsys.readouterr().err
    assert err.count("trial run: '--repeats 1' are not x.py's defaults") == 1 and "ZOO_BENCH_RECORD=1" in err
    assert "not publishing x.tag" in err


def test_write_result_and_the_readme_follow_the_folders_as_they_are_when_called(harness, bench_dirs, monkeypatch):
    # defaults bound at import sent a test's result (and its README section) into the real benchmarks/results
    results, _, readme = bench_dirs
    monkeypatch.setenv(harness.RECORD_ENV, "1")
    assert harness.write_result("z", metrics={"fps": 2.0}) == results / "z.json" == harness.result_file("z")
    assert "### z" in readme.read_text() and harness.refresh_readme() == readme


@pytest.mark.parametrize(("argv", "env", "records"), [
    (["x.py"], None, True),  # the script's defaults
    (["x.py", "--repeats", "9"], None, True),  # a recorded command, rerun
    (["x.py", "--repeats=9"], None, True),  # the same, spelled with "="
    (["x.py", "--repeats", "1"], None, False),
    (["x.py", "--repeats", "9", "--quick"], None, False),
    (["y.py", "--repeats", "9"], None, False),  # another script's options
    (["x.py", "--repeats", "1"], "1", True),
    (["x.py"], "0", False),
])
def test_a_run_records_with_its_defaults_a_recorded_command_or_when_told(harness, bench_dirs, monkeypatch, argv,
                                                                          env, records):
    if env is not None:
        monkeypatch.setenv(harness.RECORD_ENV, env)
    assert harness.recording(argv, bench_dirs[0]) is records


def test_recorded_commands_are_read_behind_a_lock_and_variables(harness):
    assert harness.script_argv("ATEN_CPU_CAPABILITY=avx2 flock /tmp/zoo-cpu.lock .venv/bin/python "
                               "benchmarks/td3_update.py --repeats 9") == ["td3_update.py", "--repeats", "9"]
    assert harness.script_argv("python benchmarks/x.py") == ["x.py"]
    assert harness.script_argv("make demo") is None


def test_a_record_setting_other_than_0_or_1_is_refused(harness, bench_dirs, monkeypatch):
    monkeypatch.setenv(harness.RECORD_ENV, "yes")
    with pytest.raises(SystemExit, match=r"ZOO_BENCH_RECORD='yes': expected 1 .* or 0"):
        harness.recording(["x.py"], bench_dirs[0])


def test_every_benchmark_that_publishes_weights_asks_the_harness_first():
    # a trial run (td3_vs_sb3 --steps 300 --publish TAG) wrote weights/ while it said weights/ stays as it is
    publishing = [p for p in sorted(HARNESS.parent.glob("*.py")) if p != HARNESS and "add_weights(" in p.read_text()]
    assert len(publishing) >= 5
    missing = [p.name for p in publishing if "may_publish_weights(" not in p.read_text()]
    assert not missing, f"publish only from a recorded run (_harness.may_publish_weights): {missing}"


def _x_parser():
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    return p


@pytest.mark.parametrize(("options", "records"), [
    ([], True),
    (["--repeats", "5"], True),  # the default, spelled out: the defaults' run
    (["--repeats", "9"], True),
    (["--quick", "--repeats=9"], False),  # options the recorded command did not set
    (["--repeats", "09"], True),  # the recorded command's value, as the script reads it
    (["--repeats", "1"], False),
])
def test_a_run_is_judged_by_what_its_options_set(harness, bench_dirs, monkeypatch, options, records):
    # '--repeats 5' (the default) was a trial: runs were compared as written
    monkeypatch.setattr(harness.sys, "argv", ["benchmarks/x.py"])
    harness.parse_args(_x_parser(), options, "/repo/benchmarks/x.py")
    assert harness.recording() is records


def test_main_argv_not_the_process_argv_decides_and_is_recorded(harness, bench_dirs, monkeypatch, capsys):
    # main(["--repeats", "1"]) from a wrapper whose own command line was bare recorded as the defaults' run
    monkeypatch.setattr(harness.sys, "argv", ["wrapper.py"])
    args = harness.parse_args(_x_parser(), ["--repeats", "1"], "/repo/benchmarks/x.py")
    assert args.repeats == 1 and harness.recording() is False
    assert "trial run: '--repeats 1' are not x.py's defaults" in capsys.readouterr().err
    monkeypatch.setenv(harness.RECORD_ENV, "1")
    harness.parse_args(_x_parser(), ["--repeats", "1"], harness.BENCH_DIR / "x.py")
    assert harness.recording() is True and harness.command_line() == "python benchmarks/x.py --repeats 1"
