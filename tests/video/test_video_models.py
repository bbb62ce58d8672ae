"""Video models: forward shapes, Kinetics-style weights with a 101-class head, a short engine run, CLI, demo."""

from __future__ import annotations

import warnings

import pytest
import torch

import zoo
from zoo import hub
from zoo.video import transforms as VT
from zoo.video.evaluation import evaluate_videos
from zoo.video.synthetic import SyntheticConfig, make_synthetic_actions
from zoo.video.tsn import VideoTSN
from zoo.video.ucf101 import UCF101


@pytest.fixture(scope="module")
def actions(tmp_path_factory):
    cfg = SyntheticConfig(size=32, num_frames=16, train_per_class=4, test_per_class=1, seed=2)
    return make_synthetic_actions(tmp_path_factory.mktemp("actions"), cfg, progress=False)


def test_registered_and_buildable_without_arguments():
    assert {"video-tsn", "r2plus1d_18"} <= set(zoo.list_models("video"))
    assert zoo.model_info("video-tsn").default_config["num_classes"] == 101
    assert zoo.model_info("r2plus1d_18").default_config == {"num_classes": 101}


@pytest.mark.parametrize("consensus,modality", [("avg", "rgb"), ("attention", "rgb"), ("avg", "rgbdiff")])
def test_tsn_forward_shapes(consensus, modality):
    model = zoo.build("video-tsn", consensus=consensus, modality=modality, num_classes=7).eval()
    x = torch.randn(2, 3, 4, 32, 32)  # (B, C, T, H, W)
    assert model(x).shape == (2, 7)
    assert model.forward_features(x).shape == (2, 4 if modality == "rgb" else 3, 512)
    with pytest.raises(ValueError, match=r"\(B, C, T, H, W\)"):
        model(torch.randn(3, 4, 32, 32))
    with pytest.raises(ValueError, match="consensus must be one of"):
        zoo.build("video-tsn", consensus="max")


def test_tsn_avg_consensus_ignores_order_rgbdiff_does_not():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 4, 32, 32)
    rev = x.flip(2)
    avg = zoo.build("video-tsn", num_classes=3).eval()
    assert torch.allclose(avg(x), avg(rev), atol=1e-5)
    diff = zoo.build("video-tsn", num_classes=3, modality="rgbdiff").eval()
    assert not torch.allclose(diff(x), diff(rev), atol=1e-3)


def test_r2plus1d_forward_shape_and_kinetics_head_adaptation(tmp_path):
    model = zoo.build("r2plus1d_18").eval()
    assert model.fc.out_features == 101
    assert model(torch.randn(1, 3, 4, 32, 32)).shape == (1, 101)
    # a Kinetics-shaped file (400 classes) with num_classes=101 asked for: the backbone loads, fc is re-initialised
    # with a warning
    kinetics = zoo.build("r2plus1d_18", num_classes=400)
    path = tmp_path / "r2plus1d_18-kinetics_like.pth"  # torchvision ships a torch.save'd state dict
    torch.save(kinetics.state_dict(), path)
    with pytest.warns(UserWarning, match="fc.weight"):
        adapted = zoo.build("r2plus1d_18", weights=str(path), num_classes=101)
    assert adapted.fc.out_features == 101
    assert torch.equal(adapted.layer4[1].conv2[0][0].weight, kinetics.layer4[1].conv2[0][0].weight)
    assert adapted.load_report.reinitialized
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same head size: nothing re-initialised, nothing said
        same = zoo.build("r2plus1d_18", weights=str(path), num_classes=400)
    assert torch.equal(same.fc.weight, kinetics.fc.weight)


@pytest.mark.slow
@pytest.mark.parametrize("name, conv, layout", [("video-tsn", torch.nn.Conv2d, torch.channels_last),
                                                ("r2plus1d_18", torch.nn.Conv3d, torch.channels_last_3d)])
def test_predict_gives_a_bf16_network_channels_last_clips_and_leaves_the_model_as_it_is(monkeypatch, name, conv, layout):
    # zoo.engine.layout.channels_last_input (TSN 1.7x, R(2+1)D 1.8-2.4x on the AMX Xeon); TSN's per-frame
    # reshape of a channels_last_3d clip is a channels-last batch of frames
    from zoo.engine import layout as engine_layout

    monkeypatch.setattr(engine_layout, "_cpu_kind", lambda: "amx")  # a kind where channels-last was measured faster
    torch.manual_seed(0)
    model = zoo.build(name, num_classes=3, **({"stem": "cifar"} if name == "video-tsn" else {}))
    first_conv = next(m for m in model.modules() if isinstance(m, conv))
    seen = []
    first_conv.register_forward_pre_hook(
        lambda m, args: seen.append((args[0].is_contiguous(memory_format=layout), m.weight.is_contiguous())))
    clips = torch.randn(2, 3, 4, 16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # bf16 on a CPU without native bf16 warns
        last = zoo.predict(model, clips, amp="bf16", topk=3)
        zoo.predict(model, clips, amp=None)
        monkeypatch.setattr(engine_layout, "_cpu_kind", lambda: "avx2")  # not measured there: clips as they came
        first = zoo.predict(model, clips, amp="bf16", topk=3)
    assert seen == [(True, True), (False, True), (False, True)]
    for a, b in zip(last, first):  # the same probabilities, within bf16 rounding
        assert [p for _, p in a["topk"]] == pytest.approx([p for _, p in b["topk"]], abs=1e-2)


def test_short_engine_run_on_generated_clips_improves_accuracy(actions):
    videos, splits = actions
    norm = VT.Compose([VT.ToFloat(), VT.Normalize(VT.IMAGENET_MEAN, VT.IMAGENET_STD)])
    train = UCF101(videos, splits, train=True, sampling="segments", num_segments=4, transform=norm, seed=0,
                   progress=False)
    train_eval = UCF101(videos, splits, train=True, sampling="segments", num_segments=4, transform=norm,
                        progress=False)  # centre frames, for a stable score
    torch.manual_seed(0)
    model = zoo.build("video-tsn", num_classes=5, modality="rgbdiff", dropout=0.0)
    before = evaluate_videos(model, train_eval, batch_size=10)
    # lr 2e-3 spikes the loss in some float orders (1 thread: 0.25 -> 0.50); 1e-3 reaches 0.95-1.0 in both
    result = zoo.train(model, train, epochs=6, batch_size=5, lr=1e-3, progress=False, seed=0)
    after = evaluate_videos(result.model, train_eval, batch_size=10)
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert after["clip_accuracy"] >= before["clip_accuracy"] + 0.3, (before, after)
    assert after["video_accuracy"] == after["clip_accuracy"]  # one clip per video with segments


def test_cli_train_video_tsn_on_a_ucf101_layout(actions, tmp_path, capsys):
    videos, splits = actions
    out = tmp_path / "tsn.safetensors"
    code = zoo.cli.main([
        "train", "video-tsn", "--data", str(videos), "--splits", str(splits), "--epochs", "1",
        "--batch-size", "10", "--model", "num_classes=5", "--set", "num_segments=2", "size=28",
        "num_workers=0", "progress=false", "--out", str(out),
    ])
    assert code == 0 and out.is_file()
    assert "trained video-tsn" in capsys.readouterr().out
    assert zoo.cli.main(["train", "video-tsn", "--data", str(tmp_path / "nowhere")]) == 2
    assert "video folder not found" in capsys.readouterr().err


def test_demo_generates_and_classifies_a_clip(tmp_path, monkeypatch, capsys):
    from zoo.video import cli as video_cli

    monkeypatch.setenv("ZOO_WEIGHTS_DIR", str(tmp_path / "weights"))
    (tmp_path / "weights").mkdir()
    video_cli._demo()
    assert "not in the weights manifest" in capsys.readouterr().out
    config = {"num_classes": 5, "modality": "rgbdiff", "consensus": "avg", "dropout": 0.0}
    model = zoo.build("video-tsn", **config)
    hub.add_weights(model, "video-tsn.synthetic-actions", config=config,
                    meta={"input": {"size": 32, "num_frames": 8, "num_segments": 4}}, dtype=torch.float16)
    video_cli._demo()
    out = capsys.readouterr().out
    assert "video-tsn says" in out and "top-3" in out
    assert isinstance(zoo.build("video-tsn", weights="synthetic-actions"), VideoTSN)


@pytest.mark.parametrize("name", ["video-tsn", "r2plus1d_18"])
def test_a_plain_state_dict_keeps_its_trained_head_unless_num_classes_is_asked_for(name, tmp_path):
    """Before: a 7-class state dict (torch.save(model.state_dict()), torchvision's .pth format) was loaded into the
    builder's default 101-way head, re-initialised with a warning: the trained classifier was thrown away, where
    resnet18 keeps the file's head size."""
    torch.manual_seed(0)
    trained = zoo.build(name, num_classes=7).eval()
    path = tmp_path / f"{name}-7.pth"
    torch.save(trained.state_dict(), path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file's head, loaded whole: nothing to warn about
        built = zoo.build(name, weights=str(path)).eval()
    assert built.num_classes == 7 and built.config.num_classes == 7
    x = torch.randn(1, 3, 4, 16, 16)
    with torch.no_grad():
        assert torch.equal(built(x), trained(x))
    with pytest.warns(UserWarning, match="fc.weight"):  # a head size asked for is kept, the head re-initialised
        asked = zoo.build(name, weights=str(path), num_classes=3)
    assert asked.num_classes == 3


def test_tsn_weights_refuse_a_modality_other_than_their_own(tmp_path):
    """Before: zoo.build('video-tsn', weights='synthetic-actions', modality='rgb') loaded the rgbdiff weights
    without a word (no tensor's shape differs) and scored raw frames: accuracy 1.0 -> 0.2."""
    with pytest.raises(ValueError, match=r"video-tsn\.synthetic-actions was trained on modality='rgbdiff' input, "
                                         r"but modality='rgb' was asked for: .* leave modality out to use the file's"):
        zoo.build("video-tsn", weights="synthetic-actions", modality="rgb")
    assert zoo.build("video-tsn", weights="synthetic-actions", modality="rgbdiff").modality == "rgbdiff"
    saved = zoo.save(zoo.build("video-tsn", num_classes=2, stem="cifar", modality="rgbdiff"), tmp_path / "d.safetensors")
    with pytest.raises(ValueError, match=r"d\.safetensors was trained on modality='rgbdiff' input, but "
                                         r"modality='rgb' was asked for"):
        zoo.build("video-tsn", weights=str(saved), modality="rgb")
    assert zoo.build("video-tsn", weights=str(saved)).modality == "rgbdiff"


def test_a_tsn_on_backbone_weights_normalises_frames_with_their_mean_and_std(tmp_path):
    """Before: video_cfg always held ImageNet's mean and std: a TSN on resnet18.cifar10 fed its CIFAR-trained
    backbone frames normalised otherwise than it learned on (grey 128 as 0.43 where it expects 0.21)."""
    backbone = zoo.build("resnet18", weights="cifar10")
    tsn = zoo.build("video-tsn", backbone_weights="resnet18.cifar10", num_classes=4)
    assert (tsn.video_cfg["mean"], tsn.video_cfg["std"]) == (list(backbone.pretrained_cfg["mean"]),
                                                             list(backbone.pretrained_cfg["std"]))
    assert tsn.video_cfg["size"] == 112  # the video default, not CIFAR's 32 px
    rebuilt = zoo.build("video-tsn", weights=str(zoo.save(tsn, tmp_path / "tsn.safetensors")))
    assert rebuilt.video_cfg["mean"] == tsn.video_cfg["mean"]
    imagenet = [list(VT.IMAGENET_MEAN), list(VT.IMAGENET_STD)]
    assert [zoo.build("video-tsn", num_classes=4).video_cfg[k] for k in ("mean", "std")] == imagenet
    shipped = zoo.build("video-tsn", weights="synthetic-actions")  # its own recorded recipe, as before
    assert [shipped.video_cfg[k] for k in ("mean", "std")] == imagenet
