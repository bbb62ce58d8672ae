"""The vision commands end to end on a tiny generated folder: finetune -> predict -> export; the demo step."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from zoo.cli import main


def _folder(root):
    for split, n in (("train", 4), ("val", 2)):
        for cls, color in (("red things", (220, 20, 20)), ("blue things", (20, 20, 220))):
            (root / split / cls).mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (20, 18), tuple(c + 5 * i for c in color)).save(root / split / cls / f"{i}.png")
    return root


def test_finetune_reports_on_its_last_validation_without_reading_val_again(tmp_path, monkeypatch):
    """The report (accuracy, per-class recall, confusion matrix) scored DATA/val a second time after the last
    epoch's validation had scored the same weights: a whole extra pass over the validation images."""
    import zoo.vision.data as data_mod

    data = _folder(tmp_path / "data")
    opened: list[str] = []
    real_open = data_mod.open_rgb
    monkeypatch.setattr(data_mod, "open_rgb", lambda path, **kw: opened.append(str(path)) or real_open(path, **kw))
    args = ["finetune", "resnet18", "--data", str(data), "--epochs", "1", "--batch-size", "4", "--image-size", "16",
            "--amp", "none", "--model", "stem=cifar", "--set", f"checkpoint_dir={tmp_path / 'ckpt'}"]
    assert main([*args, "--out-dir", str(tmp_path / "run")]) == 0
    val = sorted(str(p) for p in (data / "val").rglob("*.png"))
    assert sorted(p for p in opened if "/val/" in p) == val  # each validation image read once
    first = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert sum(map(sum, first["confusion_matrix"])) == len(val)
    # a resume with no epoch left scores nothing while training: the report reads DATA/val, same numbers
    opened.clear()
    with pytest.warns(UserWarning, match="nothing is trained"):
        assert main([*args, "--resume", "--out-dir", str(tmp_path / "again")]) == 0
    assert sorted(p for p in opened if "/val/" in p) == val
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert (again["confusion_matrix"], again["accuracy"]) == (first["confusion_matrix"], first["accuracy"])


@pytest.mark.slow
def test_finetune_predict_export_commands(tmp_path, capsys):
    data = _folder(tmp_path / "data")
    out = tmp_path / "run"
    code = main(["finetune", "resnet18", "--data", str(data), "--strategy", "full", "--epochs", "1",
                 "--batch-size", "4", "--image-size", "16", "--amp", "none", "--model", "stem=cifar",
                 "--out-dir", str(out)])
    assert code == 0
    assert (out / "model.safetensors").is_file() and (out / "confusion.png").is_file()
    report = json.loads((out / "metrics.json").read_text())
    assert set(report["per_class_recall"]) == {"blue things", "red things"}
    capsys.readouterr()
    assert main(["predict", "resnet18", str(data / "val"), "--weights", str(out / "model.safetensors"), "--json"]) == 0
    lines = [json.loads(s) for s in capsys.readouterr().out.splitlines()]
    assert len(lines) == 4 and all(r["label"] in ("blue things", "red things") for r in lines)
    assert main(["export", "resnet18", "--weights", str(out / "model.safetensors"), "--format", "torchscript",
                 "--out", str(tmp_path / "m.pt")]) == 0
    assert (tmp_path / "m.pt").is_file()


def test_finetune_command_errors(tmp_path, capsys):
    assert main(["finetune", "resnet18", "--data", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "d" / "train" / "a").mkdir(parents=True)
    (tmp_path / "d" / "train" / "b").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "d" / "train" / "a" / "x.png")
    assert main(["finetune", "resnet18", "--data", str(tmp_path / "d"), "--model", "stem=cifar",
                 "--out-dir", str(tmp_path / "out")]) == 2
    assert "no usable images: ['b']" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["afile", "afile/run"])
def test_finetune_refuses_an_out_dir_it_cannot_make_before_training(tmp_path, capsys, monkeypatch, where):
    import zoo

    (tmp_path / "afile").write_text("not a folder")
    data = _folder(tmp_path / "data")
    monkeypatch.setattr(zoo, "finetune", lambda *a, **k: pytest.fail("trained before checking --out-dir"))
    assert main(["finetune", "resnet18", "--data", str(data), "--model", "stem=cifar",
                 "--out-dir", str(tmp_path / where)]) == 2
    err = capsys.readouterr().err
    assert f"--out-dir {tmp_path / where}" in err


@pytest.mark.parametrize("what", ["folder", "model file"])
def test_finetune_refuses_an_out_dir_it_cannot_write_before_training(tmp_path, capsys, monkeypatch, what):
    """An existing --out-dir this user may not write in (chmod 555), or whose model.safetensors is write-protected,
    passed the check, which only made the folder: the run trained to its end, then failed to save, and the tuned
    model was lost. Simulated where files are created and modes read (root writes anywhere)."""
    import errno
    import os

    import zoo

    data = _folder(tmp_path / "data")
    out = tmp_path / "taken"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"an earlier model")
    real_open, real_access = os.open, os.access

    def read_only(path, flags, *args, **kwargs):
        if what == "folder" and str(path).startswith(str(out)) and flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    def protected(path, mode, **kwargs):
        return not (what == "model file" and str(path) == str(out / "model.safetensors") and mode & os.W_OK) \
            and real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    monkeypatch.setattr(os, "access", protected)
    monkeypatch.setattr(zoo, "finetune", lambda *a, **k: pytest.fail("trained before checking --out-dir"))
    assert main(["finetune", "resnet18", "--data", str(data), "--model", "stem=cifar", "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert (f"--out-dir {out} is not writable (Permission denied)" if what == "folder" else
            f"cannot write {out / 'model.safetensors'}: it is write-protected") in err
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]


def test_finetunes_started_together_without_out_dir_each_keep_their_model(tmp_path, capsys, monkeypatch):
    """A run's default folder stays empty until its end, and an empty runs/finetune was taken as free: a second
    run started while the first trained took the same folder, and the later to finish replaced the other's model
    (and metrics.json). The folder is claimed for the whole run now."""
    from types import SimpleNamespace

    import zoo
    from zoo.vision import cli as vision_cli

    data = _folder(tmp_path / "data")
    args = ["finetune", "resnet18", "--data", str(data), "--model", "stem=cifar", "--image-size", "16", "--amp", "none"]
    runs: list[int] = []

    def finetune(model, data, **options):  # while the first run trains, a second one starts and ends
        runs.append(len(runs))
        if len(runs) == 1:
            assert main(args) == 0
        return SimpleNamespace(model=model, best_metric=None)

    monkeypatch.setattr(zoo, "finetune", finetune)
    assert main(args) == 0
    first, second = vision_cli.FINETUNE_RUNS, vision_cli.FINETUNE_RUNS.with_name("finetune-2")
    said = [line.split("  ")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("weights: ")]
    assert said == [f"weights: {second / 'model.safetensors'}", f"weights: {first / 'model.safetensors'}"]
    for folder in (first, second):  # each its own, and no claim left behind
        assert sorted(p.name for p in folder.iterdir()) == ["confusion.png", "metrics.json", "model.safetensors"]


def test_finetune_without_out_dir_never_overwrites_an_earlier_run(tmp_path, capsys):
    """Every run without --out-dir wrote runs/finetune: a second fine-tune replaced the first's model,
    metrics.json and confusion.png. Now runs/finetune-2 ..., as zoo train numbers runs/train/NAME-2."""
    from zoo.vision import cli as vision_cli

    data = _folder(tmp_path / "data")
    args = ["finetune", "resnet18", "--data", str(data), "--epochs", "1", "--batch-size", "4", "--image-size", "16",
            "--amp", "none", "--model", "stem=cifar", "--no-augment"]
    for strategy in ("head", "full"):
        assert main([*args, "--strategy", strategy]) == 0, capsys.readouterr().err
    runs = vision_cli.FINETUNE_RUNS
    reports = [json.loads((d / "metrics.json").read_text()) for d in (runs, runs.with_name(runs.name + "-2"))]
    assert [r["strategy"] for r in reports] == ["head", "full"]
    assert str(runs.with_name(runs.name + "-2") / "model.safetensors") in capsys.readouterr().out


def test_finetune_resume_continues_the_run_a_ctrl_c_names(tmp_path, capsys):
    """A Ctrl-C in zoo finetune said to continue with `--resume`, which zoo finetune did not take."""
    data = _folder(tmp_path / "data")
    args = ["finetune", "resnet18", "--data", str(data), "--batch-size", "4", "--image-size", "16", "--amp", "none",
            "--model", "stem=cifar", "--no-augment", "--out-dir", str(tmp_path / "out")]
    ck = f"checkpoint_dir={tmp_path / 'ck'}"
    assert main([*args, "--epochs", "1", "--set", ck]) == 0, capsys.readouterr().err
    assert main([*args, "--epochs", "2", "--set", ck, "--resume"]) == 0, capsys.readouterr().err
    assert max(p.name for p in (tmp_path / "ck").glob("epoch-*.pt")) == "epoch-0002.pt"
    assert main([*args, "--resume"]) == 2 and "--set checkpoint_dir=DIR" in capsys.readouterr().err


def test_finetune_reports_on_the_val_data_it_validated_on(tmp_path, capsys):
    """With --set val_data=OTHER the report and confusion.png scored DATA/val, not the set the run validated on."""
    data, other = _folder(tmp_path / "data"), _folder(tmp_path / "other")
    Image.new("RGB", (20, 18), (200, 30, 30)).save(other / "val" / "red things" / "extra.png")  # 5 images, not 4
    out = tmp_path / "out"
    assert main(["finetune", "resnet18", "--data", str(data), "--epochs", "1", "--batch-size", "4", "--image-size",
                 "16", "--amp", "none", "--model", "stem=cifar", "--no-augment", "--out-dir", str(out),
                 "--set", f"val_data={other}"]) == 0, capsys.readouterr().err
    matrix = json.loads((out / "metrics.json").read_text())["confusion_matrix"]
    assert sum(map(sum, matrix)) == 5


def test_demo_step_runs_or_says_which_command_makes_the_weights(capsys):
    from zoo.vision.cli import _demo

    _demo()
    out = capsys.readouterr().out
    assert "resnet18.cifar10 is not published yet" in out and "cifar10_resnet18.py" in out or "->" in out


def test_generic_train_and_eval_take_an_image_folder(tmp_path, capsys):
    data = _folder(tmp_path / "data")
    out = tmp_path / "w.safetensors"
    assert main(["train", "resnet18", "--data", str(data), "--epochs", "1", "--batch-size", "4",
                 "--model", "stem=cifar", "num_classes=2", "--out", str(out)]) == 0
    assert out.is_file()
    capsys.readouterr()
    assert main(["eval", "resnet18", "--weights", str(out), "--data", str(data), "--model", "stem=cifar",
                 "num_classes=2"]) == 0
    assert "accuracy" in capsys.readouterr().out
    # the folder decides the head size when the command does not, and says so
    assert main(["train", "resnet18", "--data", str(data), "--epochs", "1", "--model", "stem=cifar"]) == 0
    assert "num_classes=2 (inferred from --data)" in capsys.readouterr().out
    # a head size that contradicts the folder is an error that says how to fix the call
    assert main(["train", "resnet18", "--data", str(data), "--epochs", "1", "--model", "stem=cifar",
                 "num_classes=3"]) == 2
    assert "num_classes=2" in capsys.readouterr().err


def test_demo_step_classifies_images_when_the_weights_exist(monkeypatch, capsys):
    import zoo
    from zoo import hub
    from zoo.vision import cli as vcli

    real_build = zoo.build
    monkeypatch.setattr(hub, "get_entry", lambda name: object())
    monkeypatch.setattr(zoo, "build", lambda name, weights=None, **kw: real_build(name, stem="cifar", num_classes=10))
    vcli._demo()
    out = capsys.readouterr().out
    assert ("CIFAR-10 test images" in out or "scikit-learn's sample photos" in out) and out.count("->") >= 2


def test_finetune_set_overrides_a_flag_and_the_hint_is_shell_quoted(tmp_path, capsys, monkeypatch):
    """``--set batch_size=4`` failed with "got multiple values for keyword argument 'batch_size'" (the command
    passed its flags' defaults too); zoo train lets --set override. The printed predict command broke on an
    --out-dir with a space."""
    import shlex
    from types import SimpleNamespace

    import zoo

    seen = {}

    def finetune(model, data, **options):  # the options the command passes; the training itself is tested above
        seen.update(options)
        return SimpleNamespace(model=model, best_metric=None)

    monkeypatch.setattr(zoo, "finetune", finetune)
    data = _folder(tmp_path / "data")
    out = tmp_path / "out dir" / "ants"
    assert main(["finetune", "resnet18", "--data", str(data), "--model", "stem=cifar", "--image-size", "16",
                 "--amp", "none", "--out-dir", str(out), "--set", "batch_size=4", "lr=0.5", "image_size=16"]) == 0
    assert seen["batch_size"] == 4 and seen["lr"] == 0.5 and seen["epochs"] == 5
    hint = capsys.readouterr().out.splitlines()[-1]
    assert f"--weights {shlex.quote(str(out / 'model.safetensors'))} IMAGES" in hint


def test_train_without_out_saves_to_runs_train_never_over_an_earlier_model(tmp_path, capsys, monkeypatch):
    """Without --out the trained model was thrown away after the run, whatever its length."""
    import zoo.cli.train_output

    monkeypatch.setattr(zoo.cli.train_output, "TRAIN_RUNS", tmp_path / "runs" / "train")
    data = _folder(tmp_path / "data")
    args = ["train", "resnet18", "--data", str(data), "--epochs", "1", "--batch-size", "4", "--amp", "none",
            "--model", "stem=cifar", "num_classes=2", "--set", "image_size=16"]
    assert main(args) == 0 and main(args) == 0
    first, second = tmp_path / "runs" / "train" / "resnet18.safetensors", tmp_path / "runs" / "train" / "resnet18-2.safetensors"
    assert first.is_file() and second.is_file()
    assert f"saved to {second}" in capsys.readouterr().out
    assert len(zoo.predict(zoo.build("resnet18", weights=str(first)), [str(data / "val")])) == 4


def test_finetune_set_unknown_classes_skip_holds_for_the_report_on_val_too(tmp_path, capsys, monkeypatch):
    """The error on a val class train lacks says "pass unknown_classes='skip'"; with --set unknown_classes=skip
    the run trained, wrote model.safetensors, then failed with that same error when the command read val/ for
    its report (exit 2, no metrics.json)."""
    import warnings
    from types import SimpleNamespace

    import zoo

    def finetune(model, data, **options):  # the training itself is tested above
        model.pretrained_cfg = {**model.pretrained_cfg, "classes": ["blue things", "red things"]}
        return SimpleNamespace(model=model, best_metric=None)

    monkeypatch.setattr(zoo, "finetune", finetune)
    data = _folder(tmp_path / "data")
    (data / "val" / "wasps").mkdir()
    Image.new("RGB", (20, 18)).save(data / "val" / "wasps" / "w.png")
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        code = main(["finetune", "resnet18", "--data", str(data), "--model", "stem=cifar", "num_classes=2",
                     "--image-size", "16", "--amp", "none", "--out-dir", str(out), "--set", "unknown_classes=skip"])
    assert code == 0, capsys.readouterr().err
    assert any("skipped class folder(s) unknown to the given classes: 'wasps'" in str(w.message) for w in seen)
    assert (out / "metrics.json").is_file() and (out / "confusion.png").is_file()
    assert set(json.loads((out / "metrics.json").read_text())["per_class_recall"]) == {"blue things", "red things"}


def test_finetune_writes_strict_json_and_names_its_monitor(tmp_path, capsys):
    """A class the val folder lacks has no recall: metrics.json held a bare NaN, which strict JSON parsers refuse;
    best_metric did not say which metric it was. Without a val folder, the thinner report is said."""
    import shutil

    data = _folder(tmp_path / "data")
    shutil.rmtree(data / "val" / "blue things")
    args = ["finetune", "resnet18", "--data", str(data), "--epochs", "1", "--batch-size", "4", "--image-size", "16",
            "--amp", "none", "--model", "stem=cifar"]
    with pytest.warns(UserWarning):  # the class val lacks is named
        assert main([*args, "--out-dir", str(tmp_path / "run")]) == 0
    text = (tmp_path / "run" / "metrics.json").read_text()

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    report = json.loads(text, parse_constant=refuse)
    assert report["per_class_recall"]["blue things"] is None and report["monitor"] == "val_loss"
    capsys.readouterr()
    assert main([*args[:3], str(data / "train"), *args[4:], "--out-dir", str(tmp_path / "noval")]) == 0
    assert "no validation folder" in capsys.readouterr().out
    assert json.loads((tmp_path / "noval" / "metrics.json").read_text())["monitor"] == "train_loss"


def test_finetune_takes_device_and_amp_as_zoo_train_does(tmp_path, capsys, monkeypatch):
    """Before: `zoo finetune ... --device cpu` was "unrecognized arguments" (the README's "the shell takes --device
    cuda") and --amp fp16 was not a choice; --set device=cuda was the only way."""
    import zoo

    seen = []
    monkeypatch.setattr(zoo, "finetune", lambda *a, **k: seen.append(k) or pytest.fail("ran"))
    data = _folder(tmp_path / "data")
    with pytest.raises(pytest.fail.Exception):
        main(["--debug", "finetune", "resnet18", "--data", str(data), "--model", "stem=cifar", "--device", "cpu",
              "--amp", "none", "--out-dir", str(tmp_path / "o")])
    assert seen[-1]["device"] == "cpu" and seen[-1]["amp"] is None
    with pytest.raises(pytest.fail.Exception):
        main(["--debug", "finetune", "resnet18", "--data", str(data), "--model", "stem=cifar", "--amp", "fp16",
              "--out-dir", str(tmp_path / "o")])
    assert seen[-1]["amp"] == "fp16" and "device" not in seen[-1]
    with pytest.raises(SystemExit) as stop:  # refused by the parser, before anything is built
        main(["finetune", "resnet18", "--data", str(data), "--device", "cuda:64"])
    assert stop.value.code == 2 and "argument --device: device 'cuda:64' is not available" in capsys.readouterr().err


def test_finetune_under_torchrun_claims_saves_and_reports_on_rank_0_only(tmp_path, capsys, monkeypatch, caplog):
    """Under torchrun each process claimed an output folder of its own (runs/finetune, runs/finetune-2) and
    printed the report; with --out-dir both wrote the same files at once. The other ranks only train now."""
    import logging
    from types import SimpleNamespace

    import zoo
    from zoo.vision import cli as vision_cli

    data = _folder(tmp_path / "data")
    trained: list[str] = []

    def finetune(model, data, **options):
        trained.append("x")
        logging.getLogger("zoo.vision.finetune").info("finetune: replacing the head")  # as the real one says
        return SimpleNamespace(model=model, best_metric=None)

    monkeypatch.setattr(zoo, "finetune", finetune)
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = ["finetune", "resnet18", "--data", str(data), "--model", "stem=cifar", "--image-size", "16", "--amp", "none"]
    for rank in ("1", "0"):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("LOCAL_RANK", rank)
        assert main(args) == 0
        assert main([*args, "--out-dir", str(tmp_path / "out")]) == 0
        said = [r.getMessage() for r in caplog.records]
        caplog.clear()
        assert said == ([] if rank == "1" else ["finetune: replacing the head"] * 2)
        if rank == "1":
            assert capsys.readouterr().out == ""
            assert not vision_cli.FINETUNE_RUNS.exists() and not (tmp_path / "out").exists()
    assert len(trained) == 4  # every rank trains: DDP needs them all
    assert "weights: " in capsys.readouterr().out
    assert not vision_cli.FINETUNE_RUNS.with_name("finetune-2").exists()
    for folder in (vision_cli.FINETUNE_RUNS, tmp_path / "out"):
        assert sorted(p.name for p in folder.iterdir()) == ["confusion.png", "metrics.json", "model.safetensors"]
