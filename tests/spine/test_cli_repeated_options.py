"""A KEY=VALUE option given twice adds its pairs on every command, as ``zoo train``'s ``--set`` does: the second
``--set`` of ``zoo finetune`` replaced the first (``--set checkpoint_dir=ck --set schedule=cosine`` wrote no
checkpoints), and the second ``--only`` of ``zoo demo`` skipped the first's steps."""

from __future__ import annotations

from zoo import cli
from zoo.cli import build_parser, demos
from zoo.vision.cli import _finetune_sets


def test_finetune_keeps_every_set_and_model_pair():
    argv = ["finetune", "resnet18", "--data", "imgs", "--set", "checkpoint_dir=ck", "--set", "schedule=cosine",
            "--model", "in_chans=1", "--model", "stem=cifar"]
    args = build_parser(argv).parse_args(argv)
    assert _finetune_sets(args.set) == {"checkpoint_dir": "ck", "schedule": "cosine"}
    assert args.model == ["in_chans=1", "stem=cifar"]


def test_demo_only_given_twice_runs_both_steps(capsys, monkeypatch):
    monkeypatch.setattr(demos, "_DEMOS", [demos._DemoStep("alpha: one", lambda: print("A ran"), 1),
                                          demos._DemoStep("beta: two", lambda: print("B ran"), 2),
                                          demos._DemoStep("gamma: three", lambda: print("C ran"), 3)])
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # explicit: no thread policy
    assert cli.main(["demo", "--only", "alpha", "--only", "gamma"]) == 0
    out = capsys.readouterr().out
    assert "A ran" in out and "C ran" in out and "B ran" not in out


# zoo train refused `--steps 30 --set total_steps=60`; zoo eval ran what --set said and zoo predict what the flag
# said, both without a word
def test_eval_refuses_a_flag_and_a_set_pair_naming_one_setting_two_ways(capsys):
    code = cli.main(["eval", "td3.pendulum-v1", "--env", "Pendulum-v1", "--episodes", "1", "--set", "episodes=2"])
    err = capsys.readouterr().err
    assert code == 2 and "--episodes 1 and --set episodes=2 name one setting, episodes: give one" in err


def test_predict_refuses_a_flag_and_a_set_pair_naming_one_setting_two_ways(capsys, tmp_path):
    code = cli.main(["predict", "resnet18.cifar10", str(tmp_path / "cat.png"), "--topk", "1", "--set", "topk=3"])
    err = capsys.readouterr().err
    assert code == 2 and "--topk 1 and --set topk=3 name one setting, topk: give one" in err


def test_finetune_refuses_a_flag_and_a_set_pair_naming_one_setting_two_ways(capsys, tmp_path):
    # the --set pair won without a word: --epochs 2 --set epochs=3 trained 3 epochs
    code = cli.main(["finetune", "resnet18", "--data", str(tmp_path), "--epochs", "2", "--set", "epochs=3"])
    err = capsys.readouterr().err
    assert code == 2 and "--epochs 2 and --set epochs=3 name one setting, epochs: give one" in err


def test_finetune_set_seed_seeds_the_build_as_zoo_finetune_seed_does(capsys, monkeypatch, tmp_path):
    # zoo.finetune(NAME, data, seed=7) builds (the new head's weights) seeded with 7; zoo finetune --set seed=7
    # built seeded with --seed's default 0 and trained with 7
    import zoo.api

    seeds = []

    def record(seed):
        seeds.append(seed)
        raise RuntimeError("stop before building")

    monkeypatch.setattr(zoo.api, "seeded_build", record)
    assert cli.main(["finetune", "resnet18", "--data", str(tmp_path), "--set", "seed=7"]) == 2
    assert seeds == [7]


def test_a_config_flag_and_a_model_pair_naming_one_key_two_ways_are_refused(capsys, tmp_path):
    # --num-classes won over --model num_classes=7 without a word
    code = cli.main(["eval", "resnet18", "--model", "num_classes=7", "--num-classes", "2", "--data", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--num-classes 2 and --model num_classes=7 name one setting, num_classes: give one" in err


def test_a_common_flag_and_a_model_pair_naming_one_key_two_ways_are_refused(capsys):
    # TD3's batch_size is a config key that zoo train's --batch-size sets: it won over --model batch_size=4
    code = cli.main(["train", "td3", "--env", "Pendulum-v1", "--batch-size", "8", "--model", "batch_size=4"])
    err = capsys.readouterr().err
    assert code == 2 and "--batch-size 8 and --model batch_size=4 name one setting, batch_size: give one" in err
