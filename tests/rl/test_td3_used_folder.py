"""A TD3 run that does not continue its checkpoint_dir's ``td3_last.pt`` (a new run through zoo.train,
agent.learn or the CLI without --resume; a resume from a file in another folder) refuses a folder holding
another run's ``td3_last.pt`` / ``td3_best.safetensors`` before its first step, and ``resume=True`` on a
folder with a best policy but no ``td3_last.pt`` does not start over on top of it, as the engine refuses
both. Each of them replaced the files without a word: the re-run of the command that Ctrl-C stopped, with
--resume forgotten, lost the run it was told would continue."""

from __future__ import annotations

import pytest

import zoo
from zoo.engine.checkpoint import CheckpointError

TINY = {"net_arch": (16, 16), "batch_size": 8, "learning_starts": 20, "buffer_size": 1000}
RUN = {"eval_episodes": 1, "progress": False}
FILES = ("td3_last.pt", "td3_best.safetensors")
USED = r"holds another run's checkpoints \(td3_last.pt, td3_best.safetensors\): resume=True "


def _used(folder) -> dict[str, bytes]:
    """A finished run's files in ``folder`` (the end's evaluation writes td3_best.safetensors)."""
    zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=30, checkpoint_dir=folder, **RUN)
    return _files(folder)


def _files(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in FILES if (folder / name).is_file()}


def test_a_new_run_refuses_a_folder_that_holds_another_run(tmp_path):
    before = _used(tmp_path)
    assert set(before) == set(FILES)
    with pytest.raises(ValueError, match=USED + r".*a new run needs another folder.*\(none is overwritten\)"):
        zoo.train("td3", "Pendulum-v1", model_config=TINY, total_steps=30, checkpoint_dir=tmp_path, seed=1, **RUN)
    agent = zoo.build("td3", **TINY)
    with pytest.raises(ValueError, match=USED):
        agent.learn(30, checkpoint_dir=tmp_path, progress=False)
    assert agent.num_timesteps == 0 and _files(tmp_path) == before  # refused before the first step
    (tmp_path / "td3_last.pt").unlink()  # a best policy alone is another run's too
    with pytest.raises(ValueError, match=r"holds another run's checkpoints \(td3_best.safetensors\)"):
        agent.learn(30, checkpoint_dir=tmp_path, progress=False)
    assert _files(tmp_path) == {"td3_best.safetensors": before["td3_best.safetensors"]}


def test_the_cli_without_resume_refuses_the_folder_and_with_it_continues(tmp_path, monkeypatch, capsys):
    from zoo import cli

    monkeypatch.chdir(tmp_path)
    line = ["train", "td3", "--env", "Pendulum-v1", "--steps", "30", "--model", "net_arch=[16,16]",
            "learning_starts=20", "batch_size=8", "buffer_size=1000", "--checkpoint-dir", "ck",
            "--set", "eval_episodes=1", "progress=false"]
    assert cli.main([*line, "--out", "a.safetensors"]) == 0
    before = _files(tmp_path / "ck")
    capsys.readouterr()
    assert cli.main([*line, "--seed", "1", "--out", "b.safetensors"]) != 0
    err = capsys.readouterr().err
    assert "ck holds another run's checkpoints (td3_last.pt, td3_best.safetensors)" in err, err
    assert "--resume" in err and "another folder" in err
    assert _files(tmp_path / "ck") == before and not (tmp_path / "b.safetensors").exists()
    assert cli.main([*line, "--steps", "40", "--resume", "--out", "b.safetensors"]) == 0


def test_resume_true_does_not_start_over_on_a_best_policy(tmp_path):
    best = _used(tmp_path)["td3_best.safetensors"]
    (tmp_path / "td3_last.pt").unlink()
    with pytest.raises(CheckpointError, match=r"holds no td3_last.pt, but td3_best.safetensors .*another "
                                              r"checkpoint_dir or remove the folder's files"):
        zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=30, checkpoint_dir=tmp_path, resume=True,
                  **RUN)
    assert _files(tmp_path) == {"td3_best.safetensors": best}
    zoo.build("td3", weights=str(tmp_path / "td3_best.safetensors"))  # what the message offers loads


def test_a_resume_from_another_folder_refuses_a_used_checkpoint_dir(tmp_path):
    _used(tmp_path / "a")
    before = _used(tmp_path / "b")
    source = tmp_path / "a" / "td3_last.pt"
    with pytest.raises(ValueError, match=USED + r".*a run continued from .*td3_last.pt \(resume=.*another folder"):
        zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=40, checkpoint_dir=tmp_path / "b",
                  resume=source, **RUN)
    assert _files(tmp_path / "b") == before
    zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=40, checkpoint_dir=tmp_path / "c", resume=source,
              **RUN)  # into a fresh folder, and from the folder's own file, a resume goes on
    zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=40, checkpoint_dir=tmp_path / "b",
              resume=tmp_path / "b" / "td3_last.pt", **RUN)
    assert _files(tmp_path / "b") != before


def test_a_resume_from_another_folder_brings_the_best_policy_along(tmp_path):
    """The result's best step and checkpoint_path name the new folder's files: the best policy stayed in the
    old folder, and the result named the new td3_last.pt (the last step's networks)."""
    best = _used(tmp_path / "a")["td3_best.safetensors"]
    result = zoo.train(zoo.build("td3", **TINY), "Pendulum-v1", total_steps=30, checkpoint_dir=tmp_path / "c",
                       resume=tmp_path / "a" / "td3_last.pt", **RUN)  # at its total: no new evaluation
    assert result.checkpoint_path == tmp_path / "c" / "td3_best.safetensors"
    assert (tmp_path / "c" / "td3_best.safetensors").read_bytes() == best
    assert not list((tmp_path / "c").glob(".*"))  # no temp file left


def test_td3_under_torchrun_is_refused_naming_why(tmp_path, monkeypatch):
    """Under torchrun each process ran the same agent and the second died on the first's folder lock ("in use
    by another training run"), naming no cause."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    agent = zoo.build("td3", net_arch=(8, 8), learning_starts=10)
    with pytest.raises(ValueError, match=r"TD3 learns in one process, and WORLD_SIZE=2 .*run it without torchrun"):
        zoo.train(agent, "Pendulum-v1", total_steps=20, checkpoint_dir=tmp_path / "ck", progress=False)
    assert not (tmp_path / "ck").exists()
