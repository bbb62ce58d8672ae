"""Every family on a CUDA device: it trains, evaluates, predicts, saves and resumes there, and its fp32 outputs
agree with the CPU's.

CI has no GPU, so these skip there; they run wherever torch sees one.
``ZOO_TEST_DEVICE=cpu`` runs the same checks on the CPU, to debug the tests themselves without a GPU.
"""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import zoo

DEVICE = torch.device(os.environ.get("ZOO_TEST_DEVICE", "cuda"))
if DEVICE.type == "cuda" and not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU (ZOO_TEST_DEVICE=cpu runs these checks on the CPU)", allow_module_level=True)
SEQ2SEQ_DATA = Path(__file__).parent / "seq2seq" / "data"


def _on_device(module: nn.Module) -> bool:
    return all(t.device.type == DEVICE.type for t in [*module.parameters(), *module.buffers()])


def _finite_losses(history: list[dict]) -> list[float]:
    losses = [row["train_loss"] for row in history]
    assert losses and all(np.isfinite(losses)), history
    return losses


def _resumes_exactly(run, tmp_path: Path, full: int, cut: int) -> None:
    """``run(length, folder, **options)`` -> state dict: straight to ``full`` equals ``cut`` then resumed to
    ``full``, bit for bit."""
    straight = run(full, tmp_path / "straight")
    run(cut, tmp_path / "cut")
    resumed = run(full, tmp_path / "cut", resume=True)
    for k, v in straight.items():
        torch.testing.assert_close(resumed[k], v, rtol=0, atol=0, msg=k)


# --- precision -----------------------------------------------------------------------------------------------


def test_auto_precision_on_the_device_is_bf16_where_it_is_native():
    from zoo.engine.precision import resolve_amp

    if DEVICE.type != "cuda":
        pytest.skip("what amp='auto' picks on a CPU is tests/engine/test_engine_precision.py's")
    native = torch.cuda.get_device_capability(DEVICE) >= (8, 0)
    assert resolve_amp("auto", DEVICE, op="matmul") == ("bf16" if native else None)
    assert resolve_amp("fp16", DEVICE) == "fp16"  # fp16 (with a GradScaler when training) exists on a GPU only


# --- vision --------------------------------------------------------------------------------------------------


def _images(n: int = 16, size: int = 16, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 3, size, size, generator=g), torch.arange(n) % 2)


@pytest.mark.parametrize("amp", ["auto", None] + ["fp16"] * (DEVICE.type == "cuda"))  # fp16: GPUs only
def test_resnet18_trains_evaluates_and_predicts_on_the_device(amp, tmp_path):
    torch.manual_seed(0)
    model = zoo.build("resnet18", stem="cifar", num_classes=2)
    result = zoo.train(model, _images(), epochs=2, batch_size=8, lr=1e-3, amp=amp, device=DEVICE, progress=False,
                       seed=0)
    _finite_losses(result.history)
    assert _on_device(result.model)
    metrics = zoo.evaluate(result.model, _images(8, seed=1), amp=amp)
    assert 0.0 <= metrics["accuracy"] <= 1.0 and np.isfinite(metrics["loss"])
    rows = zoo.predict(result.model, torch.randn(3, 3, 16, 16), topk=2)
    assert len(rows) == 3 and all(0.0 <= r["prob"] <= 1.0 for r in rows)
    # the file written from the device loads on the CPU and classifies alike in fp32
    again = zoo.build("resnet18", weights=str(zoo.save(result.model, tmp_path / "m.safetensors")))
    assert again.fc.weight.device.type == "cpu"
    x = torch.randn(4, 3, 16, 16)
    result.model.eval(), again.eval()
    with torch.no_grad():
        torch.testing.assert_close(result.model(x.to(DEVICE)).float().cpu(), again(x), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("strategy", ["head", "full", "gradual"])
def test_finetune_strategies_run_on_the_device(strategy):
    torch.manual_seed(0)
    model = zoo.build("resnet18", stem="cifar", num_classes=2).to(DEVICE)
    result = zoo.finetune(model, _images(), strategy=strategy, epochs=2, batch_size=8, progress=False, seed=0)
    _finite_losses(result.history)
    assert _on_device(result.model)


def test_an_engine_run_with_dropout_resumes_exactly_on_the_device(tmp_path):
    """The CUDA generator's state travels in the checkpoint: dropout after the resume draws what it would have."""
    from zoo.engine import fit

    x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))

    def run(epochs: int, folder: Path, **kw):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3))
        fit(net, (x, y), epochs=epochs, batch_size=16, device=DEVICE, amp=None, checkpoint_dir=folder,
            progress=False, seed=0, **kw)
        return {k: v.cpu() for k, v in net.state_dict().items()}

    _resumes_exactly(run, tmp_path, full=3, cut=2)


# --- seq2seq -------------------------------------------------------------------------------------------------

TINY_T = {"d_model": 32, "n_heads": 4, "n_layers": 1, "d_ff": 64, "src_vocab": 400, "tgt_vocab": 400, "dropout": 0.0}
TINY_G = {"emb_dim": 16, "hidden": 32, "src_vocab": 400, "tgt_vocab": 400, "dropout": 0.0}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for split in ("train", "val", "test"):
        for lang in ("de", "en"):
            (folder / f"{split}.{lang}").write_text((SEQ2SEQ_DATA / f"six.{lang}").read_text(encoding="utf-8"),
                                                    encoding="utf-8")
    return folder


@pytest.mark.parametrize(("name", "config"), [("seq2seq-transformer", TINY_T), ("seq2seq-gru", TINY_G)])
def test_seq2seq_trains_translates_and_scores_on_the_device(name, config, corpus):
    torch.manual_seed(0)
    model = zoo.build(name, **config)
    result = zoo.train(model, corpus, direction="de-en", epochs=2, bleu_sentences=2, device=DEVICE, progress=False,
                       seed=0)
    _finite_losses(result.history)
    assert _on_device(result.model)
    metrics = zoo.evaluate(result.model, corpus, direction="de-en", bleu_sentences=2)
    assert 0.0 <= metrics["bleu"] <= 1.0 and 0.0 <= metrics["accuracy"] <= 1.0
    sentences = ["Ein Hund.", "Zwei Männer spielen Fußball im Park."]
    for beam in (1, 3):
        out = zoo.predict(result.model, sentences, beam_size=beam, max_len=12)
        assert len(out) == 2 and all(isinstance(s, str) for s in out)
    # fp32 logits on the device match a CPU copy's
    cpu = copy.deepcopy(result.model).cpu().eval()
    result.model.eval()
    src = torch.randint(4, 400, (2, 7))
    tgt = torch.randint(4, 400, (2, 5))
    with torch.no_grad():
        torch.testing.assert_close(result.model(src.to(DEVICE), tgt.to(DEVICE)).float().cpu(), cpu(src, tgt),
                                   rtol=1e-4, atol=1e-4)


def test_kv_cache_beam_search_on_the_device_equals_the_cpus():
    from zoo.seq2seq.search import beam_search, greedy_search

    torch.manual_seed(0)
    model = zoo.build("seq2seq-transformer", **{**TINY_T, "n_layers": 2}).eval()
    src = torch.randint(4, 400, (3, 9))
    expect = greedy_search(model, src, max_len=10), beam_search(model, src, beam_size=3, max_len=10)
    model.to(DEVICE)
    got = greedy_search(model, src.to(DEVICE), max_len=10), beam_search(model, src.to(DEVICE), beam_size=3, max_len=10)
    assert got == expect


# --- rl ------------------------------------------------------------------------------------------------------

TD3_SMALL = {"net_arch": (32, 32), "batch_size": 32, "learning_starts": 100, "buffer_size": 2000}
RUN = {"eval_every": 0, "progress": False}


def test_td3_learns_predicts_and_saves_on_the_device(tmp_path):
    agent = zoo.build("td3", device=str(DEVICE), **TD3_SMALL)
    assert agent.device.type == DEVICE.type and _on_device(agent.actor) and _on_device(agent.critic)
    zoo.train(agent, "Pendulum-v1", total_steps=300, **RUN)
    assert agent.num_timesteps == 300 and _on_device(agent.actor)
    metrics = zoo.evaluate(agent, "Pendulum-v1", episodes=1)
    assert np.isfinite(metrics["return_mean"])
    obs = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, -2.0]], np.float32)
    action = zoo.predict(agent, obs)
    assert action.shape == (2, 1) and np.all(np.abs(action) <= 2.0)
    np.testing.assert_array_equal(zoo.predict(agent, torch.from_numpy(obs).to(DEVICE)), action)  # a device tensor
    again = zoo.build("td3", weights=str(zoo.save(agent, tmp_path / "td3.safetensors")))  # onto the CPU
    assert again.device.type == "cpu"
    np.testing.assert_allclose(zoo.predict(again, obs), action, rtol=1e-3, atol=1e-3)
    elsewhere = str(DEVICE) if DEVICE.type != "cpu" else "meta"
    with pytest.raises(ValueError, match="this agent lives on cpu; build it on"):
        zoo.evaluate(again, "Pendulum-v1", episodes=1, device=elsewhere)


def test_building_an_agent_leaves_the_callers_gpu_random_stream_alone():
    if DEVICE.type != "cuda":
        pytest.skip("the CPU side is tests/rl/test_td3.py's")
    torch.cuda.manual_seed(123)
    before = torch.cuda.get_rng_state(DEVICE)
    zoo.build("td3", device=str(DEVICE), seed=5, **TD3_SMALL)
    assert torch.equal(torch.cuda.get_rng_state(DEVICE), before)  # was: reseeded with the agent's seed


def test_td3_resumes_exactly_on_the_device(tmp_path):
    def run(steps: int, folder: Path, **kw):
        agent = zoo.build("td3", device=str(DEVICE), seed=0, **TD3_SMALL)
        zoo.train(agent, "Pendulum-v1", total_steps=steps, checkpoint_dir=folder, checkpoint_every=150, **RUN, **kw)
        return {k: v.cpu() for k, v in agent.network_state_dict().items()}

    _resumes_exactly(run, tmp_path, full=300, cut=150)


# --- hyperspectral -------------------------------------------------------------------------------------------


def test_hybridsn_trains_on_the_device_and_its_dense_map_equals_the_windows():
    from zoo.hyperspectral.synthetic import make_scene

    scene = make_scene(32, 32, 30, 4, block=8, noise=0.05, seed=3)
    net = zoo.build("hybridsn", n_bands=15, num_classes=4, window=9)
    result = zoo.train(net, scene, split="random", train_fraction=0.3, epochs=3, batch_size=32, lr=2e-3,
                       device=DEVICE, progress=False, seed=0)
    _finite_losses(result.history)
    assert _on_device(net)
    metrics = zoo.evaluate(net, scene)
    assert 0.0 <= metrics["overall_accuracy"] <= 1.0
    dense = net.predict_scene(scene, method="dense", amp=None)
    windows = net.predict_scene(scene, method="windows", amp=None)
    assert dense.shape == (32, 32) and (dense == windows).mean() > 0.999
    assert (zoo.predict(net, scene, amp=None) == dense).all()


# --- video ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["video-tsn", "r2plus1d_18"])
def test_video_models_train_and_predict_on_the_device(name, tmp_path):
    from zoo.video.synthetic import SyntheticConfig, make_synthetic_actions

    videos, splits = make_synthetic_actions(tmp_path, SyntheticConfig(size=32, num_frames=12, train_per_class=2,
                                                                      test_per_class=1, seed=3), progress=False)
    config = {"stem": "cifar"} if name == "video-tsn" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few clips per class: the loaders say so
        result = zoo.train(name, videos, splits=splits, model_config=config, size=16, num_segments=2, epochs=1,
                           batch_size=5, device=DEVICE, progress=False, seed=0)
    _finite_losses(result.history)
    assert _on_device(result.model)
    clips = torch.randn(2, 3, 2, 16, 16)
    rows = zoo.predict(result.model, clips)
    assert len(rows) == 2 and all(0.0 <= r["prob"] <= 1.0 for r in rows)
    one = next(videos.rglob("*.avi"))
    assert "label" in zoo.predict(result.model, one)[0]
    cpu = copy.deepcopy(result.model).cpu().eval()
    result.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(result.model(clips.to(DEVICE)).float().cpu(), cpu(clips), rtol=1e-3, atol=1e-3)


# --- export and plain modules --------------------------------------------------------------------------------


def test_a_model_on_the_device_exports_from_a_cpu_copy_and_stays_there(tmp_path):
    torch.manual_seed(0)
    model = zoo.build("resnet18", stem="cifar", num_classes=3).to(DEVICE)
    result = zoo.export(model, tmp_path / "m.onnx", image_size=16)  # verified against PyTorch inside
    assert result.path.is_file() and _on_device(model)
    agent = zoo.build("td3", device=str(DEVICE), **TD3_SMALL)
    assert zoo.export(agent, tmp_path / "policy.onnx").path.is_file() and _on_device(agent.actor)


def test_a_resnet_on_the_device_exports_with_an_example_input_on_the_device(tmp_path):
    torch.manual_seed(0)
    model = zoo.build("resnet18", stem="cifar", num_classes=3).to(DEVICE)
    images = torch.randn(2, 3, 16, 16, device=DEVICE)
    result = zoo.export(model, tmp_path / "m.onnx", example_input=images)  # verified against PyTorch inside
    assert result.path.is_file() and _on_device(model) and images.device.type == DEVICE.type


def test_a_plain_module_on_the_device_predicts_from_a_cpu_batch():
    net = nn.Sequential(nn.Linear(4, 2)).to(DEVICE)
    out = zoo.predict(net, torch.randn(3, 4))
    assert out.shape == (3, 2) and out.device.type == DEVICE.type


def test_a_run_that_first_uses_cuda_leaves_the_callers_pending_cuda_seed():
    """CUDA seeds its generators at first use, from the last seed given: a run that first used CUDA (seeding it
    with its own seed) left the caller's ``torch.manual_seed(123)`` replaced by the run's seed 0."""
    if DEVICE.type != "cuda":
        pytest.skip("CUDA's lazy seeding needs CUDA")
    import subprocess
    import sys

    script = """
import torch
from torch.utils.data import TensorDataset
from zoo.engine import fit
torch.manual_seed(123)
if RUN:
    data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    fit(torch.nn.Linear(4, 2), data, seed=0, epochs=1, batch_size=8, device="cuda", progress=False)
print(torch.rand(4, device="cuda").tolist())
"""
    got = [subprocess.run([sys.executable, "-c", f"RUN = {run}\n" + script], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1] for run in (False, True)]
    assert got[1] == got[0]
