"""Top-level calls by name, through the API and the CLI: the head a video root with outside splits implies, a
misspelt or other-case model name, model flags in any order, a missing --data, options a plain module would
ignore, unreadable or hidden inputs, and an --out a model cannot write."""

from __future__ import annotations

import warnings

import pytest

import zoo
from zoo import registry
from zoo.cli import main


def _ucf_root_with_splits_outside(tiny, tmp_path):
    """A UCF101-style root holding clips of 2 of the 3 classes that classInd.txt (in a folder outside the
    root, as `--splits` points at) lists."""
    root = tiny.video_folder()  # MoveLeft/, MoveRight/: 2 clips each
    splits = tmp_path / "splits"
    splits.mkdir()
    (splits / "classInd.txt").write_text("1 MoveLeft\n2 MoveRight\n3 Jump\n")
    (splits / "trainlist01.txt").write_text("MoveLeft/v0.avi 1\nMoveRight/v0.avi 2\n")
    (splits / "testlist01.txt").write_text("MoveLeft/v1.avi\nMoveRight/v1.avi\n")
    return root, splits


def test_splits_outside_a_video_root_give_the_class_count_of_classInd(tiny, tmp_path):
    root, splits = _ucf_root_with_splits_outside(tiny, tmp_path)
    assert registry.infer_config("video-tsn", root) == {"num_classes": 2}  # two class folders
    # the labels are classInd.txt's, so the head needs all three outputs
    assert registry.infer_config("video-tsn", root, splits=splits, epochs=1) == {"num_classes": 3}
    assert registry.infer_config("r2plus1d_18", str(root), splits=str(splits)) == {"num_classes": 3}


def test_train_by_name_on_a_video_root_with_splits_builds_the_classInd_head(tiny, tmp_path):
    root, splits = _ucf_root_with_splits_outside(tiny, tmp_path)
    r = zoo.train("video-tsn", root, splits=splits, model_config={"stem": "cifar"}, epochs=1, batch_size=2,
                  size=32, num_segments=2, progress=False)
    assert r.model.num_classes == 3
    assert r.model.video_cfg["classes"] == ["MoveLeft", "MoveRight", "Jump"]


@pytest.mark.parametrize("how", ["--splits", "--set"])
def test_zoo_train_on_a_video_root_with_splits_infers_the_classInd_head(tiny, tmp_path, capsys, how):
    root, splits = _ucf_root_with_splits_outside(tiny, tmp_path)
    given = ["--splits", str(splits)] if how == "--splits" else ["--set", f"splits={splits}", "size=32",
                                                                 "num_segments=2"]
    extra = ["--set", "size=32", "num_segments=2"] if how == "--splits" else []
    code = main(["train", "video-tsn", "--data", str(root), *given, *extra, "--stem", "cifar", "--epochs", "1",
                 "--batch-size", "2", "--out", str(tmp_path / "m.safetensors")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "num_classes=3" in out.out
    assert zoo.build("video-tsn", weights=tmp_path / "m.safetensors").num_classes == 3


def test_a_name_in_other_case_suggests_the_registered_one():
    with pytest.raises(KeyError, match="Did you mean 'td3'"):  # difflib alone finds nothing close to "TD3"
        zoo.build("TD3")


def test_list_weights_of_an_unknown_model_is_an_error_not_an_empty_list():
    assert "td3.pendulum-v1" in zoo.list_weights("td3")
    with pytest.raises(KeyError, match="Did you mean 'td3'"):
        zoo.list_weights("td-3")


def test_list_weights_of_a_weights_name_is_that_name_alone_and_an_unpublished_tag_is_refused(capsys):
    """zoo.list_weights("resnet18.cifar10") (and `zoo weights list --model resnet18.cifar10`) said "unknown model
    'resnet18.cifar10'", where zoo.build and zoo.model_info take the name: it is now the list filtered to that
    name, as timm.list_pretrained("resnet18.a1_in1k") gives ["resnet18.a1_in1k"]; a tag not published is refused
    naming the close ones, as model_info refuses it (an empty list would read as "none published")."""
    assert zoo.list_weights("resnet18.cifar10") == ["resnet18.cifar10"]
    with pytest.raises(KeyError, match=r"no weights named 'resnet18.cifar1'.* Did you mean 'resnet18.cifar10'"):
        zoo.list_weights("resnet18.cifar1")
    assert main(["weights", "list", "--model", "resnet18.cifar10"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [row.split()[0] for row in rows[1:]] == ["resnet18.cifar10"]
    assert main(["weights", "list", "--model", "resnet18.cifar1"]) == 2
    assert "Did you mean 'resnet18.cifar10'" in capsys.readouterr().err


def test_zoo_train_with_a_misspelt_name_and_model_flags_names_the_model(capsys):
    # argparse used to reject the model's flags first ("unrecognized arguments: --stem cifar")
    assert main(["train", "resnet", "--stem", "cifar", "--data", "x"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'resnet'. Did you mean 'resnet18'" in err and "unrecognized" not in err


def test_zoo_train_takes_the_model_flags_with_options_before_the_name(tmp_path, capsys):
    # the model's flags parse; the run then stops at the missing folder, after the build
    code = main(["train", "--data", str(tmp_path / "missing"), "resnet18", "--stem", "cifar"])
    err = capsys.readouterr().err
    assert code == 2 and "unrecognized" not in err and "missing" in err


@pytest.mark.parametrize("argv", [["eval", "resnet18"], ["train", "video-tsn"], ["eval", "video-tsn"], ["eval", "seq2seq-gru"]])
def test_zoo_train_and_eval_without_data_name_the_flag(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{argv[1]} needs --data" in err and "zoo.evaluate(" not in err and "NoneType" not in err


def test_predict_on_a_plain_module_refuses_options_it_would_ignore():
    import torch

    net = torch.nn.Linear(3, 4)
    assert zoo.predict(net, torch.zeros(2, 3)).shape == (2, 4)
    with pytest.raises(TypeError, match="takes no options, got topk"):
        zoo.predict(net, torch.zeros(2, 3), topk=2)


def test_zoo_demo_only_with_a_title_no_step_has_is_an_error(capsys):
    assert main(["demo", "--only", "no-such-family"]) == 2
    err = capsys.readouterr().err
    assert "--only no-such-family: no demo step" in err and "video" in err


def test_zoo_predict_exits_non_zero_when_an_input_cannot_be_read(tmp_path, capsys):
    from PIL import Image

    weights = zoo.save(zoo.build("resnet18", num_classes=2, stem="cifar"), tmp_path / "m.safetensors")
    folder = tmp_path / "inputs"
    folder.mkdir()
    Image.new("RGB", (32, 32)).save(folder / "ok.png")
    (folder / "broken.jpg").write_text("not an image")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        code = main(["predict", "resnet18", "--weights", str(weights), str(folder)])
    assert not [w for w in seen if "cannot decode" in str(w.message)]  # its ERROR row says it, once
    out = capsys.readouterr()
    assert code == 1 and "ok.png" in out.out and "broken.jpg\tERROR" in out.out
    assert "1 input(s) could not be read" in out.err
    assert main(["predict", "resnet18", "--weights", str(weights), str(folder / "ok.png")]) == 0


def test_input_folders_skip_hidden_entries_as_the_training_data_sets_do(tmp_path):
    from zoo.inputs import collect_files

    for rel in ("a.png", "._a.png", ".ipynb_checkpoints/b.png", "sub/c.png"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    assert collect_files(tmp_path, (".png",)) == [tmp_path / "a.png", tmp_path / "sub" / "c.png"]
    hidden = tmp_path / ".ipynb_checkpoints"
    assert collect_files(hidden, (".png",)) == [hidden / "b.png"]  # a folder named on purpose is read
    assert collect_files([tmp_path / "._a.png"], (".png",)) == [tmp_path / "._a.png"]  # so is a file


def test_zoo_predict_out_for_a_model_without_a_file_output_is_an_error(tmp_path, capsys):
    assert main(["predict", "td3", "--weights", "pendulum-v1", "[1, 0, 0]", "--out", str(tmp_path / "a.json")]) == 2
    assert "only a scene's label map" in capsys.readouterr().err


def test_train_td3_by_name_with_env_builds_the_agent_for_that_env():
    # zoo.train(agent, env=...) is the loop's documented form; by name it built a Pendulum agent and failed
    r = zoo.train("td3", env="MountainCarContinuous-v0", total_steps=40, eval_every=40, eval_episodes=1,
                  progress=False, model_config={"learning_starts": 20, "batch_size": 8, "net_arch": [16, 16]})
    assert r.model.env_id == "MountainCarContinuous-v0" and r.history[-1]["step"] == 40


def test_weights_list_for_a_misspelt_model_is_an_error_naming_the_right_one(capsys):
    from zoo.cli import main

    assert main(["weights", "list", "--model", "td-3"]) != 0
    assert "Did you mean 'td3'" in capsys.readouterr().err
