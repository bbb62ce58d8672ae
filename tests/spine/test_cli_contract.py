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
    assert main(["eval", name, "--weights", out, *evaluate, "--json"]) == 0, capsys.readouterr().err
    metrics = json.loads(capsys.readouterr().out)  # one JSON object: every family's metrics are plain JSON
    assert isinstance(metrics.get("accuracy", metrics.get("return_mean")), float), metrics
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
    assert "--gamma FLOAT" in help_text
    assert "at most 65 % of a layer's do" in " ".join(help_text.split())  # a "%" in a docstring is text, not a format
    with pytest.raises(SystemExit):
        main(["train", "resnet18", "--help"])
    # a literal's values as they are typed: --stem 'IMAGENET'|'CIFAR' was shown, and --stem CIFAR refused
    assert "--stem 'imagenet'|'cifar'" in capsys.readouterr().out


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
    # a folder that is not there: named as one (it said "give NAME.safetensors or a folder" for a folder's name)
    assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--out", str(tmp_path / "runs")]) == 2
    assert f"no folder {tmp_path / 'runs'}; create it (mkdir -p" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_out_as_a_folder_numbers_the_file_as_the_default_does(tmp_path, capsys):
    """Left out, --out numbered NAME-2 beside an earlier model, but the same folder given as --out (runs/train/)
    replaced it. Only a file named as --out is replaced."""
    args = ["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--net-arch", "8,8", "--set", "progress=false"]
    for _ in range(2):
        assert main([*args, "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["td3-2.safetensors", "td3.safetensors"]
    first = (tmp_path / "td3.safetensors").read_bytes()
    assert main([*args, "--seed", "1", "--out", str(tmp_path / "td3.safetensors")]) == 0  # a file: replaced
    assert (tmp_path / "td3.safetensors").read_bytes() != first and len(list(tmp_path.iterdir())) == 2
    capsys.readouterr()


def test_runs_into_one_folder_each_keep_their_model_when_another_saved_meanwhile(tmp_path, capsys, monkeypatch):
    """Before: the numbered name was chosen when the command started and written when it ended: two runs started
    together into one folder (a sweep) both saved td3.safetensors, and the last replaced the first's model."""
    from zoo.cli import train_output

    args = ["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--net-arch", "8,8", "--set", "progress=false"]
    real = train_output.save_trained

    def another_run_saves_first(model, out, run_dir, **kw):  # its run ends while this one trains
        (tmp_path / "td3.safetensors").write_bytes(b"another run's model")
        return real(model, out, run_dir, **kw)

    monkeypatch.setattr("zoo.cli.train.save_trained", another_run_saves_first)
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "td3.safetensors").read_bytes() == b"another run's model"
    assert f"saved to {tmp_path / 'td3-2.safetensors'}" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["td3-2.safetensors", "td3.safetensors"]


_TD3 = ["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--net-arch", "8,8"]


def test_a_second_set_adds_its_pairs_and_a_flag_and_set_of_one_setting_must_agree(tmp_path, capsys):
    """Before: argparse's nargs="*" kept the last --set only (--set eval_episodes=1.5 --set lr=1e-3 trained, the
    refused value dropped), and --steps 30 --set total_steps=60 trained 60 steps without a word."""
    out = ["--out", str(tmp_path / "a.safetensors")]
    assert main([*_TD3, "--set", "eval_episodes=1.5", "--set", "progress=false", *out]) == 2
    assert "eval_episodes" in capsys.readouterr().err
    assert main([*_TD3, "--set", "total_steps=20", *out]) == 2
    assert "--steps 10 and --set total_steps=20 name one setting, total_steps: give one" in capsys.readouterr().err
    assert main([*_TD3, "--set", "total_steps=10", "--set", "progress=false", *out]) == 0  # the same value: fine
    capsys.readouterr()


def test_train_epochs_zero_is_refused_not_saved_as_trained(tmp_path, capsys):
    """Before: `zoo train NAME --epochs 0` saved the untrained network as "the trained model", exit 0."""
    assert main(["train", "td3", "--epochs", "0", "--out", str(tmp_path / "a.safetensors")]) == 2
    assert "--epochs must be >= 1, got 0" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_an_abbreviated_flag_is_refused_as_argparse_would_any_unknown_one(capsys):
    """Before: argparse took --jso for --json, but zoo sends logs to stderr only for the whole word: a log line came
    before the JSON on stdout."""
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "td3.pendulum-v1", "--episodes", "1", "--jso"])
    assert exit_.value.code == 2 and "unrecognized arguments: --jso" in capsys.readouterr().err


def test_zoo_debug_zero_is_off(monkeypatch, capsys):
    """Before: any value of ZOO_DEBUG, 0 too, turned an error into a traceback."""
    monkeypatch.setenv("ZOO_DEBUG", "0")
    assert main(["info", "no-such-model"]) == 2
    monkeypatch.setenv("ZOO_DEBUG", "1")
    with pytest.raises(Exception, match="no-such-model"):
        main(["info", "no-such-model"])
    capsys.readouterr()


def test_td3_predict_prints_one_action_per_line(monkeypatch, capsys):
    """Before: several observations printed one line of a nested list, one printed [a]: the shape depended on the
    count, against the rows' contract (one line per input) the other families keep."""
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    assert main(["predict", "td3.pendulum-v1", "1,0,0", "0,1,0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(len(json.loads(line)) == 1 for line in lines)
    assert main(["predict", "td3.pendulum-v1", "1,0,0"]) == 0
    assert capsys.readouterr().out.splitlines() == lines[:1]


def test_a_hint_to_run_quotes_a_path_with_spaces(tmp_path, capsys):
    """Before: `create it (mkdir -p r08 new)` made two folders."""
    assert main([*_TD3, "--out", str(tmp_path / "new dir")]) == 2
    assert f"mkdir -p '{tmp_path / 'new dir'}'" in capsys.readouterr().err


def test_info_of_a_weights_name_that_is_not_there_prints_nothing_but_the_error(capsys):
    """It printed the model's whole card to stdout, then failed with exit code 2."""
    assert main(["info", "td3.nosuch"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no weights named 'td3.nosuch'" in err


def test_model_pairs_read_values_as_their_flags_do(capsys):
    """``--model KEY=VALUE`` is 'an alternative to --KEY VALUE': a tuple typed as the flag takes it
    (net_arch=32,32 was "net_arch expects tuple[int, ...], got '32,32' (str)")."""
    from zoo.cli import model_kv

    for text in ("32,32", "[32, 32]", "(32, 32)", "32 32"):
        assert model_kv("td3", [f"net_arch={text}"]) == {"net_arch": (32, 32)}
    assert model_kv("td3", ["net_arch=32", "gamma=0.9", "amp=null"]) == {"net_arch": (32,), "gamma": 0.9, "amp": None}
    assert model_kv("resnet18.cifar10", ["num-classes=3"]) == {"num_classes": 3}  # MODEL.TAG: the model's keys
    assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--model", "net_arch=a,b"]) == 2
    assert "--net-arch expects tuple[int, ...], got 'a,b'; write it as --net-arch 32,32" in capsys.readouterr().err
    assert main(["train", "td3", "--env", "Pendulum-v1", "--steps", "10", "--model", "nope=1"]) == 2
    assert "td3: unknown config key 'nope'; keys: " in capsys.readouterr().err


@pytest.mark.parametrize("seed", [["--seed", "1"], []], ids=["seed-1", "no-seed"])
def test_train_seed_repeats_the_run(seed, tiny, tmp_path, capsys):
    """`zoo train NAME --seed S` built NAME from the unseeded global generator: two runs, two networks; without
    --seed too (the loop's default seed is 0, as for zoo.train by name)."""
    import torch
    from safetensors.torch import load_file

    outs = []
    for run in ("a", "b"):
        torch.rand(100 if run == "a" else 7)  # the global generators differ between the two runs
        out = tmp_path / f"{run}.safetensors"
        assert main(["train", "resnet18", "--data", str(tiny.image_folder()), "--stem", "cifar", "--epochs", "1",
                     "--batch-size", "4", "--amp", "none", *seed, "--set", "image_size=32", "progress=false",
                     "--out", str(out)]) == 0, capsys.readouterr().err
        outs.append(load_file(out))
    assert outs[0].keys() == outs[1].keys() and all(torch.equal(outs[0][k], outs[1][k]) for k in outs[0])


@pytest.fixture
def saved(tmp_path):
    """Untrained resnet18 and td3 files: what `--weights` needs."""
    paths = {"resnet18": tmp_path / "r.safetensors", "td3": tmp_path / "t.safetensors"}
    zoo.save(zoo.build("resnet18", stem="cifar", num_classes=2), paths["resnet18"])
    zoo.save(zoo.build("td3", net_arch=(16, 16)), paths["td3"])
    return paths


def _error(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err and "Traceback" not in "\n".join(err)
    return err[0]


@pytest.mark.parametrize(("name", "flags", "said"), [
    ("resnet18", ["--seed", "1"], "--seed is not an option of resnet18's predict (it takes topk, batch_size"),
    ("td3", ["--batch-size", "8"], ("--batch-size is not an option of td3's predict (it takes explore); --batch-size "
                                   "is a training setting of td3")),
    ("td3", ["--amp", "bf16"], "--amp is not an option of td3's predict"),
    ("td3", ["--topk", "2"], "--topk is not an option of td3's predict"),
    ("td3", ["--seed", "2"], "--seed is not an option of td3's predict"),
])
def test_predict_refuses_a_flag_the_model_does_not_take(name, flags, said, saved, tiny, capsys):
    """They were listed in `zoo predict --help` and dropped unseen (td3: --batch-size set its training batch)."""
    inputs = [str(tiny.image_folder() / "val" / "dog")] if name == "resnet18" else ["[1.0, 0.0, 0.0]"]
    assert main(["predict", name, "--weights", str(saved[name]), *inputs, *flags]) == 2
    assert said in _error(capsys)


def test_predict_hands_the_flags_its_predict_takes_to_it(saved, tiny, capsys):
    image = str(tiny.image_folder() / "val" / "dog" / "0.png")
    assert main(["predict", "resnet18", "--weights", str(saved["resnet18"]), image, "--batch-size", "0"]) == 2
    assert "batch_size must be an int >= 1, got 0" in _error(capsys)  # it reached predict, which checks it
    assert main(["predict", "resnet18", "--weights", str(saved["resnet18"]), image, "--batch-size", "1",
                 "--device", "cpu", "--amp", "none"]) == 0
    assert "0.png" in capsys.readouterr().out
    # td3 runs where it was built: --device builds it there, and predict (which takes no device) runs there
    assert main(["predict", "td3", "--weights", str(saved["td3"]), "[1.0, 0.0, 0.0]", "--device", "cpu"]) == 0


@pytest.mark.parametrize(("name", "flags", "said"), [
    ("resnet18", ["--seed", "1"], "--seed is not an option of resnet18's evaluate (it takes amp, augment, batch_size,"),
    ("resnet18", ["--episodes", "2"], "--episodes is not an option of resnet18's evaluate"),
    ("resnet18", ["--set", "beam=3"], "--set beam is not an option of resnet18's evaluate"),
    ("td3", ["--batch-size", "8"], ("--batch-size is not an option of td3's evaluate (it takes device, env, episodes, "
                                   "max_steps, progress, seed); --batch-size is a training setting of td3 "
                                   "(`zoo train td3 --batch-size ...`)")),
    ("td3", ["--amp", "bf16"], "--amp is not an option of td3's evaluate"),
])
def test_eval_refuses_a_flag_the_model_does_not_take(name, flags, said, saved, tiny, capsys):
    """A raw "evaluate() got an unexpected keyword argument 'seed'" with a hint about config keys, or (td3) the
    flag silently set the training config."""
    data = ["--data", str(tiny.image_folder())] if name == "resnet18" else ["--env", "Pendulum-v1", "--episodes", "1"]
    assert main(["eval", name, "--weights", str(saved[name]), *data, *flags]) == 2
    assert said in _error(capsys)


def test_eval_hands_the_flags_its_evaluate_takes_to_it(saved, tiny, capsys):
    assert main(["eval", "td3", "--weights", str(saved["td3"]), "--env", "Pendulum-v1", "--episodes", "1",
                 "--seed", "5", "--device", "cpu"]) == 0
    assert "episodes: 1" in capsys.readouterr().out
    assert main(["eval", "resnet18", "--weights", str(saved["resnet18"]), "--data", str(tiny.image_folder()),
                 "--batch-size", "3", "--amp", "none", "--device", "cpu"]) == 0
    assert "accuracy" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "flags", "said"), [
    ("hsi-pca-svm", ["--steps", "5"], "--steps is not an option of hsi-pca-svm's train (it takes block, "),
    ("hsi-pca-svm", ["--set", "split=random", "bogus=1"], "--set bogus is not an option of hsi-pca-svm's train"),
    ("td3", ["--overfit-batches", "1"], "--overfit-batches is not an option of td3's train (it takes amp, batch_size,"),
    # a config setting given to --set was told to be left out, though --KEY sets it
    ("td3", ["--set", "learning_starts=5"], ("learning_starts is a setting of td3's config, which the model takes "
                                            "when it is built: --learning-starts VALUE (or --model learning_starts=")),
])
def test_train_refuses_a_flag_the_loop_does_not_take_in_the_words_typed(name, flags, said, tiny, capsys):
    """zoo eval / predict named the flag; zoo train said the loop's Python name ("unknown option(s) 'total_steps'",
    "train() got an unexpected keyword argument 'overfit_batches'") with a hint about config keys."""
    data = (["--data", str(tiny.scene_file()), "--n-components", "3"] if name == "hsi-pca-svm"
            else ["--env", "Pendulum-v1", "--steps", "10", "--net-arch", "8,8"])
    assert main(["train", name, *data, *flags]) == 2
    err = capsys.readouterr().err
    assert said in err.splitlines()[0] and "zoo info" not in err and "Traceback" not in err and "))" not in err


@pytest.fixture
def scene_model(tiny, tmp_path, capsys):
    out = tmp_path / "svm.safetensors"
    assert main(["train", "hsi-pca-svm", "--data", str(tiny.scene_file()), "--n-components", "3",
                 "--set", "split=random", "--out", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return out


def test_predict_label_map_out_is_checked_first_and_keeps_a_suffix_it_does_not_own(scene_model, tiny, tmp_path,
                                                                                  capsys, monkeypatch):
    """--out made a missing folder (zoo train --out refuses one), and --out map.v2 wrote map.npy / map.png."""
    monkeypatch.chdir(tmp_path)
    scene = str(tiny.scene_file())
    assert main(["predict", "hsi-pca-svm", "--weights", str(scene_model), scene, "--out", "nodir/map"]) == 2
    assert "--out nodir/map: folder nodir does not exist" in _error(capsys)
    assert not (tmp_path / "nodir").exists()
    assert main(["predict", "hsi-pca-svm", "--weights", str(scene_model), scene, "--out", "map.v2"]) == 0
    assert (tmp_path / "map.v2.npy").is_file() and (tmp_path / "map.v2.png").is_file()
    assert main(["predict", "hsi-pca-svm", "--weights", str(scene_model), scene, "--out", "m.png"]) == 0
    assert (tmp_path / "m.npy").is_file() and (tmp_path / "m.png").is_file()
    # a folder gets the scene's map inside: "outs/" wrote outs.npy and outs.png beside it
    (tmp_path / "outs").mkdir()
    for out in ("outs/", "outs"):
        assert main(["predict", "hsi-pca-svm", "--weights", str(scene_model), scene, "--out", out]) == 0
        stem = tmp_path / "outs" / f"{tiny.scene_file().stem}_map"
        assert stem.with_suffix(".npy").is_file() and stem.with_suffix(".png").is_file()
        assert not (tmp_path / "outs.npy").exists()
    assert main(["predict", "hsi-pca-svm", "--weights", str(scene_model), scene, "--out", "nodir/"]) == 2
    assert "--out nodir/: folder nodir does not exist" in _error(capsys)


def test_predict_of_several_scenes_is_one_line_naming_the_count(scene_model, tiny, capsys):
    """It was "expected a Scene, a scene path or a data set name; got list" and a hint about config keys."""
    scene = str(tiny.scene_file())
    assert main(["predict", "hsi-pca-svm", "--weights", str(scene_model), scene, scene]) == 2
    assert "hsi-pca-svm predicts one scene per command, got 2" in _error(capsys)


def test_export_refuses_an_unknown_set_option_without_the_config_key_hint(saved, tmp_path, capsys):
    assert main(["export", "td3", "--weights", str(saved["td3"]), "--out", str(tmp_path / "t.onnx"),
                 "--set", "bogus=1"]) == 2
    err = capsys.readouterr().err
    assert "--set: zoo.export of TD3Agent: unknown option(s) 'bogus'" in err and "zoo info" not in err


def test_info_of_weights_without_a_dataset_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(tmp_path / "w"))
    src = tmp_path / "t.safetensors"
    zoo.save(zoo.build("td3", net_arch=(8, 8)), src)
    assert main(["weights", "add", str(src), "--name", "td3.bare"]) == 0
    capsys.readouterr()
    assert main(["info", "td3"]) == 0
    assert "    td3.bare: dataset not recorded\n" in capsys.readouterr().out


def test_predict_reads_its_inputs_from_standard_input_for_a_dash(saved, tiny, capsys, monkeypatch):
    """`find . -name '*.png' | zoo predict resnet18 ... -`: '-' was taken for an image path (and translated as
    a sentence by seq2seq models)."""
    import io

    images = sorted(str(p) for p in (tiny.image_folder() / "val" / "dog").iterdir())
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(images[:2]) + "\n\n"))  # a blank line is no path
    assert main(["predict", "resnet18", "--weights", str(saved["resnet18"]), images[2], "-"]) == 0
    printed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert printed == [images[2], *images[:2]]
    monkeypatch.setattr("sys.stdin", io.StringIO("\ufeff[1, 0, 0]\r\n[0, 1, 0.5]\r\n"))  # a Windows tool's BOM, CRLF
    assert main(["predict", "td3", "--weights", str(saved["td3"]), "-"]) == 0
    assert len([json.loads(line) for line in capsys.readouterr().out.splitlines()]) == 2  # an action a line
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["predict", "td3", "--weights", str(saved["td3"]), "-"]) == 2
    assert "standard input ('-') was empty" in _error(capsys)
    assert main(["predict", "td3", "--weights", str(saved["td3"]), "-", "-"]) == 2
    assert "may be given once" in _error(capsys)


def test_translating_standard_input_keeps_its_blank_lines(tiny, tmp_path, capsys, monkeypatch):
    import io

    out = str(tmp_path / "gru.safetensors")
    gru = zoo.build("seq2seq-gru", src_vocab=300, tgt_vocab=300, emb_dim=8, hidden=16, max_len=32)
    zoo.save(zoo.train(gru, tiny.corpus(), direction="de-en", epochs=1, progress=False).model, out)
    monkeypatch.setattr("sys.stdin", io.StringIO("ein hund läuft .\n\nzwei katzen schlafen .\n"))
    assert main(["predict", "seq2seq-gru", "--weights", out, "-"]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # three rows: one per input line, then the end


def test_an_unknown_option_is_matched_against_the_familys_data_options_too(tiny, capsys):
    """zoo.train(resnet18, folder, imagesize=32) was refused by fit, whose list has no image_size (nor
    seq2seq's bleu_sentences), with no did-you-mean; --set image-size=32, spelled as the flags are, got that
    raw text."""
    import torch
    from torch.utils.data import TensorDataset

    data = TensorDataset(torch.randn(4, 3, 16, 16), torch.arange(4) % 2)
    net = zoo.build("resnet18", num_classes=2)
    for call in (zoo.train, zoo.evaluate):
        with pytest.raises(TypeError, match=r"on resnet18: unknown option\(s\) 'imagesize' \(did you mean "
                                            r"'image_size'\?\); it takes .*image_size"):
            call(net, data, imagesize=32)
    gru = zoo.build("seq2seq-gru", src_vocab=300, tgt_vocab=300, hidden=16, emb_dim=8)
    with pytest.raises(TypeError, match=r"'bleu_sentence' \(did you mean 'bleu_sentences'\?\)"):
        zoo.train(gru, [("ein hund", "a dog")] * 4, epochs=1, bleu_sentence=3)
    folder = tiny.image_folder()
    assert main(["train", "resnet18", "--data", str(folder), "--epochs", "1", "--batch-size", "4", "--stem", "cifar",
                 "--set", "image-size=32", "--out", str(folder.parent / "m.safetensors")]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["seq2seq-transformer", "--weights", "multi30k-de-en"],
    ["seq2seq-transformer.multi30k-de-en"],
    ["--weights", "seq2seq-transformer.multi30k-de-en"],
    ["--beam-size", "1", "seq2seq-transformer.multi30k-de-en"],  # before: the name was translated as a sentence
])
def test_translate_takes_the_model_name_first_as_every_command_does(argv, capsys):
    """`zoo translate seq2seq-transformer --weights multi30k-de-en "Ein Hund."` read the name as the first
    sentence and refused the sentence after --weights ('unrecognized arguments: Ein Hund.')."""
    assert main(["translate", *argv, "Ein Hund läuft.", "--beam-size", "1"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip().splitlines() == ["A dog is running."]


@pytest.mark.slow
def test_under_torchrun_one_process_reports_and_saves(tiny, tmp_path, torchrun):
    """With --out, each of torchrun's processes printed the summary and saved the same file (a race)."""
    out = tmp_path / "m.safetensors"
    proc = torchrun(["-m", "zoo", "train", "resnet18", "--data", tiny.image_folder(), "--stem", "cifar", "--epochs",
                     "1", "--batch-size", "2", "--amp", "none", "--set", "image_size=16", "--out", out], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("trained resnet18") == 1 and proc.stdout.count(str(out)) == 1, proc.stdout
    assert proc.stdout.count("(inferred from --data)") == 1, proc.stdout  # each process said it
    assert zoo.build("resnet18", weights=out).fc.out_features == 2


def test_predict_json_of_a_scene_prints_the_label_map_as_json(tiny, tmp_path, capsys):
    """``zoo predict hsi-pca-svm ... --json`` printed the text line ('label map 24x24; pixels per class: ...'), and
    with --out 'written to ...': standard output was no JSON."""
    import numpy as np

    scene, out = str(tiny.scene_file()), str(tmp_path / "m.safetensors")
    assert main(["train", "hsi-pca-svm", "--data", scene, "--n-components", "5", "--set", "split=random",
                 "--out", out]) == 0
    capsys.readouterr()
    assert main(["predict", "hsi-pca-svm", "--weights", out, scene, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    label_map = np.asarray(row["label_map"])
    assert row["shape"] == [24, 24] == list(label_map.shape)
    assert row["pixels_per_class"] == {str(c): int((label_map == c).sum()) for c in np.unique(label_map)}
    assert main(["predict", "hsi-pca-svm", "--weights", out, scene, "--json", "--out", str(tmp_path / "map")]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["npy"].endswith("map.npy") and "label_map" not in written
    np.testing.assert_array_equal(np.load(written["npy"]), label_map)
