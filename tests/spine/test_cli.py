"""The `zoo` command, through a real subprocess as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

import zoo
from zoo.cli import build_parser


def run_zoo(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zoo", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_list_prints_registered_models():
    out = run_zoo("list")
    assert out.returncode == 0, out.stderr
    for name in zoo.list_models():
        assert name in out.stdout


def test_version_names_zoo_torch_and_python(capsys):
    import platform
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"zoo {zoo.__version__} (torch {version('torch')}, Python {platform.python_version()})")
    assert version("zoo") == zoo.__version__  # the installed metadata reads the same one place


def test_help_on_every_command(capsys):
    out = run_zoo("--help")
    assert out.returncode == 0
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # every registered subcommand
    for cmd in ("list", "info", "train", "eval", "bench", "demo", "pull", "weights"):
        assert cmd in out.stdout and cmd in commands
    for cmd in commands:  # in-process: one interpreter start per command would cost minutes
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args([cmd, "--help"])
        assert exit_.value.code == 0
        assert f"usage: zoo {cmd}" in capsys.readouterr().out


def test_user_error_is_one_line_without_traceback():
    out = run_zoo("info", "no-such-model")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2 and "unknown model 'no-such-model'" in lines[0]  # the error, then a hint
    assert "--debug" in lines[1]


def test_bench_lists_scripts():
    out = run_zoo("bench")
    assert out.returncode == 0, out.stderr
    assert "engine_throughput" in out.stdout.split()
    assert not any(name.startswith("_") for name in out.stdout.split())


def test_unknown_benchmark_is_a_usage_error():
    out = run_zoo("bench", "no_such_bench")
    assert out.returncode == 2 and "unknown benchmark 'no_such_bench'" in out.stderr


def test_bench_of_an_installed_package_never_looks_beside_it(monkeypatch, tmp_path, capsys):
    """Installed, the folder above zoo/ is site-packages: its `benchmarks` (another distribution's) was run."""
    from zoo.cli import main
    from zoo.hub import manifest

    monkeypatch.setattr(manifest, "checkout_root", lambda: None)  # what an installed package finds
    assert main(["bench"]) == 2
    assert "runs the benchmark scripts of a source checkout, and this zoo is installed" in capsys.readouterr().err


def test_verify_shipped_of_an_installed_package_refuses_before_it_hashes_the_cache(monkeypatch, tmp_path, capsys):
    """Before: it re-hashed and printed every cached file as "ok", then failed as installed (exit 2)."""
    from zoo import hub
    from zoo.cli import main

    monkeypatch.setenv("ZOO_HOME", str(tmp_path))
    monkeypatch.setenv("ZOO_OFFLINE", "1")  # the file comes from the checkout's weights/
    zoo.pull("td3.pendulum-v1", progress=False)
    monkeypatch.setattr(hub, "weights_dir", lambda: None)  # what an installed zoo has
    assert main(["weights", "verify", "--shipped"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--shipped checks a source checkout's weights/ folder; this zoo is installed" in err


@pytest.mark.parametrize("written", ["(16, 8)", "[16, 8]", "16 8", "16,8"])
def test_a_tuple_option_takes_the_forms_a_shell_user_types(written, tmp_path, capsys):
    from zoo.cli import main

    out = tmp_path / "td3.safetensors"
    assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "20", "--net-arch", written, "--out", str(out),
                 "--set", "eval_episodes=1", "progress=false"]) == 0
    assert zoo.build("td3", weights=str(out)).config.net_arch == (16, 8)


def test_a_malformed_tuple_option_names_the_option_the_value_and_the_form(capsys):
    from zoo.cli import main

    assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "20", "--net-arch", "(16, x)"]) == 2
    err = capsys.readouterr().err
    assert "--net-arch expects tuple[int, ...], got '(16, x)'" in err and "--net-arch 32,32" in err
    assert "Expecting value" not in err and "Traceback" not in err


def test_train_out_expands_the_home_folder_and_exits_1_when_it_falls_back(tmp_path, monkeypatch, capsys):
    """A save that failed after training went to a fallback file, and the command still exited 0: a script
    `zoo train ... --out m.safetensors && deploy m.safetensors` went on with a missing or old file."""
    import errno

    from zoo.cli import main

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    args = ["train", "td3", "--env", "Pendulum-v1", "--steps", "20", "--net-arch", "8,8",
            "--set", "eval_episodes=1", "progress=false"]
    assert main([*args, "--out", "~/td3.safetensors"]) == 0
    assert (tmp_path / "td3.safetensors").is_file() and not (tmp_path / "~").exists()
    real_save = zoo.save

    def full_disk_at_out(model, path):
        if "unsaved" not in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_save(model, path)

    monkeypatch.setattr(zoo, "save", full_disk_at_out)
    assert main([*args, "--out", "again.safetensors", "--checkpoint-dir", "~/run"]) == 1
    assert "the trained model is in" in capsys.readouterr().err
    assert not (tmp_path / "again.safetensors").exists() and list((tmp_path / "run").glob("again.unsaved-*.safetensors"))


def test_train_saves_out_when_the_learning_curve_png_cannot_be_written(tmp_path):
    """A full disk at the end-of-run plot (here a folder where the PNG goes) threw the finished run away:
    `zoo train ... --out m.safetensors` exited with the error and never wrote m.safetensors."""
    from zoo.cli import main

    (tmp_path / "run" / "learning_curves.png").mkdir(parents=True)
    out = tmp_path / "td3.safetensors"
    with pytest.warns(RuntimeWarning, match="learning curves were not written to"):
        assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "20", "--net-arch", "8,8", "--set",
                     "eval_episodes=1", "progress=false", "--checkpoint-dir", str(tmp_path / "run"),
                     "--out", str(out)]) == 0
    assert out.is_file() and (tmp_path / "run" / "metrics.csv").is_file()


def test_a_weights_name_as_name_is_that_model_with_those_weights(capsys):
    from zoo.cli import main, weights_name_argv

    assert weights_name_argv(["eval", "td3.pendulum-v1", "--episodes", "1"]) == [
        "eval", "td3", "--weights", "td3.pendulum-v1", "--episodes", "1"]
    assert weights_name_argv(["predict", "td3.pendulum-v1", "--weights=pendulum-v1", "[0, 0, 0]"]) == [
        "predict", "td3", "--weights=pendulum-v1", "[0, 0, 0]"]
    assert weights_name_argv(["info", "td3.pendulum-v1"]) == ["info", "td3.pendulum-v1"]
    assert weights_name_argv(["eval", "td3", "--weights", "pendulum-v1"]) == ["eval", "td3", "--weights", "pendulum-v1"]
    assert main(["predict", "td3.pendulum-v1", "[1, 0, 0]"]) == 0
    assert capsys.readouterr().out.strip().startswith("[")
    assert main(["eval", "td3.pendulum-v1", "--weights", "halfcheetah-v5", "--episodes", "1"]) == 2
    assert "names the weights 'pendulum-v1' but weights='halfcheetah-v5'" in capsys.readouterr().err
    # before: the --weights put last came after `--`, where it was read as two observations
    assert main(["predict", "td3.pendulum-v1", "--", "-1,0,0"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1


def test_a_weights_name_after_options_is_that_model_with_those_weights(capsys):
    """`zoo predict --json td3.pendulum-v1 -- -1,0,0` said td3.pendulum-v1 needed trained weights, "or NAME as
    MODEL.TAG (zoo predict td3.pendulum-v1.TAG ...)": the weights name was read only right after the command."""
    from zoo.cli import main, weights_name_argv

    assert weights_name_argv(["eval", "--episodes", "1", "td3.pendulum-v1", "--json"]) == [
        "eval", "--episodes", "1", "td3", "--weights", "td3.pendulum-v1", "--json"]
    # --weights' own value is not NAME; a MODEL.TAG after `--` is an input
    assert weights_name_argv(["export", "--weights", "td3.pendulum-v1", "td3"]) == [
        "export", "--weights", "td3.pendulum-v1", "td3"]
    assert weights_name_argv(["predict", "--json", "td3", "--", "td3.x"]) == ["predict", "--json", "td3", "--", "td3.x"]
    assert main(["predict", "--json", "td3.pendulum-v1", "--", "-1,0,0"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1


def test_a_warning_is_one_plain_line_and_an_unreadable_input_is_said_once(tmp_path):
    """At a prompt a warning read `/path/to/bin/zoo:8: UserWarning: ...` plus `  sys.exit(main())`, and
    `zoo predict` said each unreadable image twice (a warning, then its ERROR row)."""
    out = run_zoo("train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--model", "net_arch=[8,8]",
                  "learning_starts=100", "--set", "eval_every=0", "progress=false", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "zoo train: warning: TD3 on Pendulum-v1: total_steps=10 does not pass learning_starts=100" in out.stderr
    assert "UserWarning" not in out.stderr and "sys.exit" not in out.stderr
    debug = run_zoo("--debug", "train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--model", "net_arch=[8,8]",
                    "learning_starts=100", "--set", "eval_every=0", "progress=false", "--out", str(tmp_path))
    assert "UserWarning: TD3 on Pendulum-v1" in debug.stderr  # --debug: Python's own form, file and line

    weights = zoo.save(zoo.build("resnet18", num_classes=3), tmp_path / "tiny.safetensors")
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg")
    out = run_zoo("predict", "resnet18", "--weights", str(weights), str(bad))
    assert out.returncode == 1
    assert out.stdout.count("cannot identify image file") == 1 and "ERROR" in out.stdout
    assert "cannot decode" not in out.stderr and "1 input(s) could not be read" in out.stderr


@pytest.mark.parametrize("device, said", [
    ("cuda:99", (r"device 'cuda:99' is not available: (torch .* finds no CUDA GPU on this machine; leave --device "
                 r"out|this machine has \d+ CUDA device)")),
    ("gpu", r"'gpu' is not a device: expected auto, cpu, cuda, cuda:1"),
])
def test_a_device_this_machine_lacks_is_refused_before_any_work(device, said, capsys):
    """torch's "Found no NVIDIA driver" came after the model was built and named no flag."""
    from zoo.cli import main

    for argv in (["predict", "resnet18.cifar10", "missing.png"], ["train", "td3", "--steps", "10"]):
        with pytest.raises(SystemExit) as exit_:
            main([*argv, "--device", device])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "argument --device: " in err and re.search(said, err), err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_the_python_calls_refuse_a_missing_gpu_as_train_does():
    """zoo.predict / zoo.evaluate / zoo.build gave torch's "Found no NVIDIA driver on your system" (from the
    first tensor moved there); zoo.train said "device=cuda requested but CUDA is not available"."""
    import zoo

    said = r"device 'cuda' is not available: torch .* finds no CUDA GPU on this machine; leave device out to run on the CPU"
    for call in (lambda: zoo.predict("td3.pendulum-v1", [1.0, 0.0, 0.0], device="cuda"),
                 lambda: zoo.evaluate("td3.pendulum-v1", episodes=1, device="cuda"),
                 lambda: zoo.build("td3", device="cuda"),
                 lambda: zoo.train(torch.nn.Linear(3, 2), (torch.randn(4, 3), torch.tensor([0, 1, 0, 1])),
                                   device="cuda", progress=False)):
        with pytest.raises(RuntimeError, match=said):
            call()


@pytest.mark.parametrize("device, said", [
    ("cuda:3", r"device 'cuda:3' is not available: this machine has 1 CUDA device \(cuda:0\); pass one of those"),
    ("gpu", r"'gpu' is not a device: expected auto, cpu, cuda, cuda:1"),
])
def test_the_python_calls_refuse_a_gpu_past_the_last_and_a_name_torch_does_not_know(device, said, monkeypatch):
    """Every entry point reads device= one way (zoo.engine.devices.usable_device): a CUDA index past the last GPU
    passed the old check (it asked only whether CUDA was there) and failed in torch at the first tensor moved
    there, and a name torch does not know gave torch's "Expected one of cpu, cuda, ipu, xpu, ..." list."""
    import zoo
    from zoo.rl.td3 import TD3Agent

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a machine with one GPU, as the check sees it
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    agent = zoo.build("td3.pendulum-v1")
    for call in (lambda: zoo.build("td3", device=device),
                 lambda: TD3Agent(agent.observation_space, agent.action_space, agent.config, device=device),
                 lambda: zoo.predict(agent, [1.0, 0.0, 0.0], device=device),
                 lambda: zoo.evaluate(agent, episodes=1, device=device),
                 lambda: agent.zoo_evaluate(episodes=1, device=device),
                 lambda: zoo.train(torch.nn.Linear(3, 2), (torch.randn(4, 3), torch.tensor([0, 1, 0, 1])),
                                   device=device, progress=False)):
        with pytest.raises(RuntimeError, match=said):
            call()


def test_an_observation_that_starts_with_a_minus_is_an_input_not_an_option(capsys):
    """``zoo predict td3 --weights pendulum-v1 -1,0,0`` said "the following arguments are required: inputs"
    (argparse reads only "-1" and "-.5" as numbers); after another input, "unrecognized arguments"."""
    from zoo.cli import main

    assert main(["predict", "td3.pendulum-v1", "-1,0,0", "0.5,-0.2,1e-3", "-.5,0.1,0"]) == 0
    negative = capsys.readouterr().out
    assert main(["predict", "td3.pendulum-v1", "[-1, 0, 0]", "[0.5, -0.2, 1e-3]", "[-0.5, 0.1, 0]"]) == 0
    assert capsys.readouterr().out == negative
    with pytest.raises(SystemExit):  # an option's shape stays an option
        main(["predict", "td3.pendulum-v1", "[0, 0, 0]", "-x"])
    assert "unrecognized arguments: -x" in capsys.readouterr().err


def test_set_reads_pythons_constants_as_theirs_and_leaves_other_words_strings(capsys):
    """``--set max_len=None`` failed "max_len must be an int ... or None; got 'None'": the message's own
    spelling. JSON's null/true/false read as before; "none" stays a string (spectral_norm="none")."""
    from zoo.cli import main, parse_kv
    from zoo.config import coerce_value

    assert coerce_value("m", "k", "None", int | None) is None  # --model k=None, --k None
    assert coerce_value("m", "k", "none", str) == "none"
    assert parse_kv(["a=None", "b=True", "c=False", "d=null", "e=none", "f=NONE"]) == {
        "a": None, "b": True, "c": False, "d": None, "e": "none", "f": "NONE"}
    assert main(["predict", "seq2seq-transformer.multi30k-en-de", "Two dogs.", "--set", "max_len=None"]) == 0
    python = capsys.readouterr().out
    assert main(["predict", "seq2seq-transformer.multi30k-en-de", "Two dogs.", "--set", "max_len=null"]) == 0
    assert capsys.readouterr().out == python and python.strip()


def test_predict_shows_weights_optional_in_its_usage_and_asks_for_them_when_neither_form_gives_them(capsys):
    """``zoo predict --help`` showed ``--weights WEIGHTS`` as required, though NAME as MODEL.TAG gives them too;
    without either, the error names both forms."""
    from zoo.cli import main

    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    usage = capsys.readouterr().out
    assert "[--weights WEIGHTS]" in usage
    assert main(["predict", "td3", "1,0,0"]) == 2
    err = capsys.readouterr().err
    assert "zoo predict td3 needs trained weights: --weights TAG" in err and "zoo predict td3.TAG" in err
    assert main(["predict", "td3.pendulum-v1", "1,0,0"]) == 0


def test_eval_json_prints_the_metrics_the_lines_print(capsys):
    """``zoo eval`` printed ``key: value`` lines only, where ``zoo predict`` has ``--json``; ``--json`` prints the
    same metrics as one JSON object."""
    from zoo.cli import main

    command = ["eval", "td3.pendulum-v1", "--episodes", "1", "--seed", "3"]
    assert main(command) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert main([*command, "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert set(metrics) == set(lines) and "return_mean" in metrics
    assert {k: f"{v:.6g}" if isinstance(v, float) else str(v) for k, v in metrics.items()} == lines


def test_python_m_zoo_cli_knows_every_command_the_zoo_script_knows():
    """``python -m zoo.cli finetune --help`` was "invalid choice: 'finetune' (choose from 'bench', 'demo', 'eval',
    'info', 'list', 'predict', 'train')": the file ran as a second module, without the families' commands."""
    done = subprocess.run([sys.executable, "-m", "zoo.cli", "--help"], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    for command in ("finetune", "translate", "pull", "export", "weights", "cache", "train", "predict"):
        assert f"    {command} " in done.stdout, command
