"""``zoo train`` / ``zoo eval`` / ``zoo predict`` for every registered name, on tiny inputs, as a user
types them: the command does what the API does, and says what it inferred from the data."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo.cli import main


def _commands(name: str, tiny, out: str) -> tuple[list[str], list[str], list[str]]:
    """(train, eval, predict) arguments for ``name``."""
    if name == "resnet18":
        data = tiny.image_folder()
        return (["--data", str(data), "--epochs", "1", "--batch-size", "4", "--stem", "cifar"],
                ["--data", str(data)], [str(data / "val" / "dog"), "--topk", "2"])
    if name.startswith("seq2seq"):
        data = tiny.corpus()
        tiny_cfg = (["--d-model", "32", "--n-heads", "2", "--n-layers", "1", "--d-ff", "64"]
                    if name == "seq2seq-transformer" else ["--emb-dim", "16", "--hidden", "32"])
        return (["--data", str(data), "--epochs", "1", "--src-vocab", "300", "--tgt-vocab", "300", "--max-len", "32",
                 *tiny_cfg, "--set", "direction=de-en", "warmup_steps=2"],
                ["--data", str(data), "--set", "bleu_sentences=4"], ["ein hund läuft ."])
    if name == "td3":
        return (["--env", "Pendulum-v1", "--steps", "300", "--learning-starts", "100", "--batch-size", "32",
                 "--net-arch", "32,32", "--set", "eval_episodes=1", "progress=false"],
                ["--env", "Pendulum-v1", "--episodes", "1"], ["[1.0, 0.0, 0.0]"])
    if name in ("hsi-pca-svm", "hybridsn"):
        data = tiny.scene_file()
        cfg = ["--n-components", "5"] if name == "hsi-pca-svm" else ["--n-bands", "15", "--window", "9", "--epochs", "1"]
        # random pixels: the 24x24 scene is too small for the spatial blocks a user's scene gets by default
        return (["--data", str(data), *cfg, "--set", "split=random"], ["--data", str(data)],
                [str(data), "--out", out.replace(".safetensors", "")])
    if name in ("video-tsn", "r2plus1d_18"):
        data = tiny.video_folder()
        clip = "num_segments=2" if name == "video-tsn" else "frames_per_clip=4"
        stem = ["--stem", "cifar"] if name == "video-tsn" else []
        return (["--data", str(data), "--epochs", "1", "--batch-size", "2", *stem, "--set", "size=32", clip],
                ["--data", str(data)], [str(data / "MoveLeft" / "v0.avi")])
    raise AssertionError(f"no CLI case for {name!r}: every registered name needs one")


@pytest.mark.parametrize("name", zoo.list_models())
def test_train_eval_predict_commands_for_every_model(name, tiny, tmp_path, capsys):
    out = str(tmp_path / "model.safetensors")
    train, evaluate, predict = _commands(name, tiny, out)
    assert main(["train", name, *train, "--out", out]) == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    assert f"trained {name}" in said and f"saved to {out}" in said
    assert main(["eval", name, "--weights", out, *evaluate]) == 0, capsys.readouterr().err
    metrics = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines() if ": " in line)
    assert "accuracy" in metrics or "return_mean" in metrics
    assert main(["predict", name, "--weights", out, *predict]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out.strip()
    assert printed, "predict prints its result"
    if name == "td3":
        action = json.loads(printed)
        assert len(action) == 1 and -2.0 <= action[0] <= 2.0  # Pendulum's torque bounds
    if name in ("hsi-pca-svm", "hybridsn"):
        assert "label map 24x24 written" in printed


def test_env_builds_the_agent_for_that_env_and_says_so(capsys):
    assert main(["train", "td3", "--env", "InvertedPendulum-v5", "--steps", "60", "--learning-starts", "20",
                 "--batch-size", "16", "--net-arch", "16,16", "--set", "eval_episodes=1", "progress=false"]) == 0
    out = capsys.readouterr().out
    assert "env='InvertedPendulum-v5' (inferred from --env)" in out and "trained td3" in out


def test_a_run_that_makes_no_update_says_so_and_reports_no_best(capsys):
    with pytest.warns(UserWarning, match="makes no gradient update"):
        assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "50", "--net-arch", "16,16",
                     "--set", "eval_episodes=1", "progress=false"]) == 0
    out = capsys.readouterr().out
    assert "no evaluation" in out or "no update" in out
    assert "best eval_return_mean" not in out


def test_config_options_are_generated_from_the_config_dataclass(capsys):
    with pytest.raises(SystemExit):
        main(["train", "td3", "--help"])
    help_text = capsys.readouterr().out
    for flag in ("--learning-starts", "--gamma", "--policy-delay", "--preset", "--exploration-noise"):
        assert flag in help_text
    assert "Polyak coefficient" in help_text  # the field's docstring


def test_a_bad_config_value_is_one_line_naming_the_key(capsys):
    assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--gamma", "high"]) == 2
    err = capsys.readouterr().err
    assert "gamma expects float, got 'high'" in err and "Traceback" not in err


def test_out_is_checked_before_training(tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("x")
    assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--out", str(blocked / "m.safetensors")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--out", str(tmp_path / "m.pt")]) == 2
    assert ".safetensors" in capsys.readouterr().err
