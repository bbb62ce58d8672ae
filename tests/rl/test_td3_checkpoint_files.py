"""The TD3 run's files: a corrupt checkpoint is one clear error naming it, the run owns its folders (locked,
swept of dead writers' temp files, refused before the first step when unusable), and a checkpoint keeps the
precision amp="auto" chose for a resume."""

from __future__ import annotations

import logging

import pytest
import torch

import zoo
from zoo import fs
from zoo.engine.checkpoint import CheckpointError

SMALL = {"net_arch": (8, 8), "batch_size": 8, "learning_starts": 10, "buffer_size": 500}


def _run(counter_env, ckpt_dir, steps: int = 30, **kw):
    env = counter_env(horizon=5)
    agent = zoo.build("td3", env=env, **{**SMALL, **kw.pop("build", {})})
    zoo.train(agent, env=env, total_steps=steps, eval_every=0, checkpoint_dir=ckpt_dir, progress=False, **kw)
    return agent


@pytest.fixture
def td3_checkpoint(tmp_path, counter_env):
    _run(counter_env, tmp_path / "run")
    return (tmp_path / "run" / "td3_last.pt").read_bytes()


@pytest.mark.parametrize("damage", ["empty", "truncated", "flipped"])
def test_a_corrupt_checkpoint_is_one_error_naming_the_file(tmp_path, counter_env, td3_checkpoint, damage):
    data = td3_checkpoint
    bad = {"empty": b"", "truncated": data[: len(data) // 2],
           "flipped": data[:100] + bytes(b ^ 0x5A for b in data[100:140]) + data[140:]}[damage]
    path = tmp_path / "td3_last.pt"
    path.write_bytes(bad)
    with pytest.raises(CheckpointError) as info:
        _run(counter_env, None, steps=40, resume=path)
    msg = str(info.value)
    assert str(path) in msg and ("truncated or corrupt" in msg or "empty (0 bytes)" in msg)
    assert "older copy" in msg and "fresh run" in msg
    assert "weights_only" not in msg and "\n" not in msg  # not torch's advice to unpickle it unsafely


def test_a_network_checkpoint_is_refused_as_not_td3(tmp_path, counter_env):
    path = tmp_path / "epoch-0001.pt"
    torch.save({"format": "zoo.checkpoint/1", "model": {}}, path)
    with pytest.raises(CheckpointError, match=r"not a TD3 checkpoint.*zoo\.checkpoint/1.*network's training"):
        _run(counter_env, None, steps=40, resume=path)


def test_a_state_of_another_format_is_refused_by_the_agent_as_by_the_run(counter_env):
    """TD3Agent.load_checkpoint_state checks the format where the run's resume does (zoo.rl.resume.check_format):
    it said only "not a TD3 checkpoint (format ...)", a plain ValueError naming neither the file it needs nor
    what the state was."""
    agent = zoo.build("td3", env=counter_env(horizon=5), **SMALL)
    with pytest.raises(CheckpointError, match=r"state\.pt is not a TD3 checkpoint: expected format "
                                              r"'zoo\.td3\.checkpoint/1', got 'zoo\.checkpoint/1' \(a network's "
                                              r"training checkpoint.*td3_last\.pt that zoo\.train"):
        agent.load_checkpoint_state({"format": "zoo.checkpoint/1", "model": {}}, what="state.pt")
    assert agent.num_timesteps == 0


def test_a_second_run_in_the_folder_fails_at_once(tmp_path, counter_env):
    with fs.FolderLock(tmp_path / "run", "training run"), pytest.raises(fs.FolderLockedError, match="in use"):
        _run(counter_env, tmp_path / "run")
    with fs.FolderLock(tmp_path / "logs", "training run"), pytest.raises(fs.FolderLockedError):
        _run(counter_env, tmp_path / "run2", log_dir=tmp_path / "logs")
    agent = _run(counter_env, tmp_path / "run")  # released, also after the error above
    assert agent.num_timesteps == 30 and not (tmp_path / "run" / fs.LOCK_NAME).exists()


def test_dead_writers_temp_files_are_swept(tmp_path, counter_env):
    folder = tmp_path / "run"
    folder.mkdir()
    stale = folder / f"{fs.TEMP_PREFIX}{fs._HOST}-999999-deadbeef-td3_last.pt"  # a pid that is not alive
    stale.write_bytes(b"x" * 100)
    _run(counter_env, folder)
    assert not stale.exists() and (folder / "td3_last.pt").is_file()


def test_an_unusable_checkpoint_dir_fails_before_the_first_step(tmp_path, counter_env):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    env = counter_env(horizon=5)
    agent = zoo.build("td3", env=env, **SMALL)
    for where in (afile, afile / "run"):
        with pytest.raises(fs.FsError, match="checkpoint_dir"):
            zoo.train(agent, env=env, total_steps=30, eval_every=0, checkpoint_dir=where, progress=False)
    with pytest.raises(fs.FsError, match="log_dir"):
        zoo.train(agent, env=env, total_steps=30, eval_every=0, log_dir=afile, progress=False)
    assert agent.num_timesteps == 0


def test_a_resume_keeps_the_precision_auto_chose(tmp_path, counter_env, caplog):
    """On the same kind of CPU the recorded precision stays, except bf16 where this CPU has no native bf16
    (10-60x slower than fp32 there): that record could only come from another CPU."""
    from zoo.engine.precision import cpu_features

    first = _run(counter_env, tmp_path / "run")
    path = tmp_path / "run" / "td3_last.pt"
    state = torch.load(path, weights_only=True)
    assert state["precision"] == {"amp": first.precision, "device": "cpu", "cpu_kind": cpu_features().kind}
    other = "fp32" if first.precision == "bf16" else "bf16"  # as if auto had decided otherwise on that day
    state["precision"]["amp"] = other
    torch.save(state, path)
    with caplog.at_level(logging.INFO, logger="zoo"):  # said by zoo.engine.precision (alone, "zoo.rl.td3" missed it)
        resumed = _run(counter_env, tmp_path / "run", steps=40, resume=True)
    kept = other == "fp32" or cpu_features().native_bf16
    assert resumed.precision == (other if kept else first.precision) and resumed.num_timesteps == 40
    assert (f"amp='auto' keeps {other}" if kept else "amp='auto' decides anew") in caplog.text
    assert torch.load(path, weights_only=True)["precision"]["amp"] == resumed.precision  # and records it again


def test_an_explicit_amp_or_another_device_kind_decides_now(tmp_path, counter_env):
    env = counter_env(horizon=5)
    fp32 = zoo.build("td3", env=env, **SMALL, amp=None)
    fp32.ensure_buffer()
    state = fp32.checkpoint_state()
    state["precision"] = {"amp": "bf16", "device": "cpu"}
    again = zoo.build("td3", env=env, **SMALL, amp=None)
    again.load_checkpoint_state(state)
    assert again.precision == "fp32"  # amp=None asked for fp32: the record does not override it
    state["precision"] = {"amp": "fp32", "device": "cuda"}
    auto = zoo.build("td3", env=env, **SMALL)
    state["settings"] = auto.checkpoint_state()["settings"]  # the same settings, amp="auto"
    now = auto.precision
    auto.load_checkpoint_state(state)
    assert auto.precision == now  # recorded on another kind of device: today's choice here stands


def test_bytes_flipped_inside_the_checkpoints_tensors_are_caught(tmp_path, counter_env):
    """Flipped bytes in the replay buffer's or a network's tensor data unpickle without complaint: the resume
    went on from corrupt transitions or weights. The checkpoint and a saved buffer carry a sha256 of them."""
    agent = _run(counter_env, tmp_path / "run")
    path = tmp_path / "run" / "td3_last.pt"
    data = bytearray(path.read_bytes())
    rows = agent.buffer.data[: agent.buffer.size].contiguous().numpy().tobytes()
    at = data.find(rows)
    assert at > 0
    data[at + 7] ^= 0x20
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="is corrupt: its tensors no longer match the sha256"):
        _run(counter_env, None, steps=40, resume=path)

    saved = tmp_path / "buffer.pt"
    agent.buffer.save(saved)
    again = zoo.build("td3", env=counter_env(horizon=5), **SMALL).ensure_buffer()
    again.load(saved)
    assert torch.equal(again.data[: again.size], agent.buffer.data[: agent.buffer.size])
    raw = bytearray(saved.read_bytes())
    raw[raw.find(rows) + 3] ^= 0x01
    saved.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="replay buffer was written"):
        again.load(saved)


def test_a_checkpoint_of_another_devices_random_stream_resumes_with_a_fresh_one(tmp_path, counter_env):
    """A CPU generator (Mersenne Twister) and a CUDA one (Philox) keep different states: a run checkpointed on
    a GPU failed to resume on a CPU ("Expected a CPUGeneratorImplState of size 5056") after it had already
    overwritten the networks. It resumes, warns that it cannot repeat the run exactly, and draws a fresh stream
    from the seed and the step count."""
    agent = _run(counter_env, tmp_path / "run")
    state = agent.checkpoint_state()
    state["generator"] = torch.tensor([7, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0], dtype=torch.uint8)
    state["precision"] = {**state["precision"], "device": "cuda"}  # what a CUDA generator's state looks like
    resumed = zoo.build("td3", env=counter_env(horizon=5), **SMALL)
    with pytest.warns(UserWarning, match="written on cuda; its random stream .* cannot continue on cpu"):
        resumed.load_checkpoint_state(state)
    assert resumed.num_timesteps == agent.num_timesteps == 30
    assert all(torch.equal(v, agent.network_state_dict()[k]) for k, v in resumed.network_state_dict().items())
    again = zoo.build("td3", env=counter_env(horizon=5), **SMALL)
    with pytest.warns(UserWarning, match="cannot continue"):
        again.load_checkpoint_state(state)
    assert torch.equal(resumed.generator.get_state(), again.generator.get_state())  # fresh, but repeatable
    assert not torch.equal(resumed.generator.get_state(), agent.generator.get_state())


def test_a_device_named_with_or_without_its_index_is_the_agents_own(counter_env):
    agent = zoo.build("td3", env=counter_env(horizon=5), **SMALL)  # device "cpu"
    assert zoo.evaluate(agent, counter_env(horizon=5), episodes=1, device="cpu:0")["episodes"] == 1  # was refused
    with pytest.raises(ValueError, match="this agent lives on cpu; build it on meta"):
        zoo.evaluate(agent, counter_env(horizon=5), episodes=1, device="meta")


def test_a_learning_curve_png_that_cannot_be_written_warns_and_keeps_the_run(tmp_path, counter_env):
    """The end-of-run plot failing (a full disk; here a folder where the PNG goes) raised after the last
    checkpoint, so train() returned nothing; the run's CSVs and checkpoint are its record, the PNG a view."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "learning_curves.png").mkdir()
    env = counter_env(horizon=5)
    agent = zoo.build("td3", env=env, **SMALL)
    with pytest.warns(RuntimeWarning, match=r"learning curves were not written to .*learning_curves\.png"):
        result = zoo.train(agent, env=env, total_steps=30, eval_every=15, eval_episodes=1,
                           eval_env=counter_env(horizon=5), checkpoint_dir=tmp_path / "run", progress=False)
    assert [h["step"] for h in result.history] == [15, 30] and agent.num_timesteps == 30
    assert (tmp_path / "run" / "metrics.csv").read_text().count("\n") == 3
    assert (tmp_path / "run" / "episodes.csv").is_file() and (tmp_path / "run" / "td3_last.pt").is_file()


@pytest.mark.parametrize("alias", ["relative", "symlink"])
def test_one_folder_named_two_ways_is_locked_once(tmp_path, counter_env, monkeypatch, alias):
    """checkpoint_dir and log_dir naming one folder two ways (relative and absolute, or through a symlink)
    took two locks on it, and the run failed against its own: "in use by another training run: pid <its pid>"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    if alias == "symlink":
        (tmp_path / "alias").symlink_to(tmp_path / "run")
    agent = _run(counter_env, tmp_path / "run", log_dir="run" if alias == "relative" else tmp_path / "alias")
    assert agent.num_timesteps == 30 and (tmp_path / "run" / "td3_last.pt").is_file()
    assert (tmp_path / "run" / "episodes.csv").is_file() and not (tmp_path / "run" / fs.LOCK_NAME).exists()


def test_a_resume_rewrites_the_csvs_to_match_its_checkpoint(tmp_path, counter_env):
    """td3_last.pt is written at episode ends, the CSVs at evaluations: a kill after a checkpoint left
    episodes.csv short of it, and it stayed short when the resumed run stopped (here an env failing) before
    its next evaluation. The resume now rewrites both CSVs from the checkpoint's rows first."""
    env = counter_env(horizon=5)
    zoo.train(zoo.build("td3", env=env, **SMALL), env=env, total_steps=30, eval_every=15, eval_episodes=1,
              eval_env=counter_env(horizon=5), checkpoint_dir=tmp_path, progress=False)
    files = {name: (tmp_path / name).read_text() for name in ("episodes.csv", "metrics.csv")}
    for name, text in files.items():  # what a kill left: CSVs of an earlier evaluation
        (tmp_path / name).write_text("".join(text.splitlines(keepends=True)[:2]))
    env = counter_env(horizon=5, nan_at=3)  # the resumed run fails at its third step, before any evaluation
    with pytest.raises(ValueError, match="non-finite observation"):
        zoo.train(zoo.build("td3", env=env, **SMALL), env=env, total_steps=60, eval_every=15, eval_episodes=1,
                  eval_env=counter_env(horizon=5), checkpoint_dir=tmp_path, resume=True, progress=False)
    assert {name: (tmp_path / name).read_text() for name in files} == files
