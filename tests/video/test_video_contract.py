"""The video networks' zoo contract: rebuilding saved files, inferring classes, one clip recipe, checking
evaluation folders, and ``zoo.predict``'s inputs and errors."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo
from zoo import hub
from zoo.video import predict as video_predict
from zoo.video.synthetic import SyntheticConfig, make_synthetic_actions, render_clip, write_video

TINY = SyntheticConfig(size=32, num_frames=12, train_per_class=2, test_per_class=1, seed=3)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """``DIR/<class>/<video>`` with three classes, two 12-frame clips each."""
    root = tmp_path_factory.mktemp("folder")
    rng = np.random.default_rng(0)
    for label, name in enumerate(("a", "b", "c")):
        for i in range(2):
            write_video(root / name / f"{i}.avi", render_clip(label, rng, 32, 12))
    return root


def _small(model):
    """A cheap input recipe for the tests' 32 px clips."""
    model.video_cfg.update(size=16, resize=16)
    return model


# --- a saved TSN rebuilds from its own file ------------------------------------------------------------


def test_saved_tsn_reloads_offline_without_its_backbone_weights(tmp_path, monkeypatch):
    backbone = zoo.save(zoo.build("resnet18", stem="cifar", num_classes=10), tmp_path / "backbone.safetensors")
    tsn = zoo.build("video-tsn", num_classes=3, backbone_weights=str(backbone))
    assert tsn.backbone.stem == "cifar"  # the backbone weights' own stem
    saved = zoo.save(tsn, tmp_path / "tsn.safetensors")
    backbone.unlink()  # what the saved file was fine-tuned from is gone, and nothing may be fetched
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    again = zoo.build("video-tsn", weights=str(saved))
    assert again.backbone.stem == "cifar"
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in tsn.state_dict().items())
    meta = hub.read_metadata(saved)
    assert json.loads(meta["zoo.config"])["backbone_weights"] is None
    assert meta["zoo.backbone_weights"] == str(backbone)  # provenance


# --- classes of a UCF101 root ----------------------------------------------------------------------------


def test_split_files_inside_a_ucf101_root_give_the_classes(tmp_path):
    videos, splits = make_synthetic_actions(tmp_path, TINY, progress=False)
    inside = Path(shutil.move(str(splits), str(videos / "ucfTrainTestlist")))
    assert zoo.registry.infer_config("video-tsn", videos) == {"num_classes": 5}  # not 5 classes + the split folder
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = zoo.train("video-tsn", videos, splits=inside, model_config={"stem": "cifar"}, size=16,
                           num_segments=2, epochs=1, batch_size=10, progress=False)
    assert result.model.num_classes == 5 and len(result.model.video_cfg["classes"]) == 5
    with pytest.raises(TypeError, match=r"splits= is the folder of UCF101's split files .*got 1 \(int\); the split "
                                        r"number is fold=1, 2 or 3"):
        zoo.evaluate(result.model, videos, splits=1)  # was: "expected str, bytes or os.PathLike object, not int"
    with pytest.raises(TypeError, match=r"splits= is the folder .*got 1 \(int\); the split number is fold=1"):
        zoo.train("video-tsn", videos, splits=1)  # by name: the classes were read first, from classInd.txt in '1'


def test_a_ucf101_root_with_its_split_folder_inside_trains_on_those_splits(tmp_path):
    """Without splits=, the split folder inside the root gave the classes, but the data step took it for a class
    folder: 'class folder(s) with no video file: ['ucfTrainTestlist'] ... remove the folder'."""
    videos, splits = make_synthetic_actions(tmp_path, TINY, progress=False)
    shutil.move(str(splits), str(videos / "ucfTrainTestlist"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = zoo.train("video-tsn", videos, model_config={"stem": "cifar"}, size=16, num_segments=2, epochs=1,
                           batch_size=10, progress=False)
    from zoo.video.splits import read_class_index

    assert result.model.video_cfg["classes"] == list(read_class_index(videos / "ucfTrainTestlist"))
    assert "accuracy" in zoo.evaluate(result.model, videos, amp=None)


def test_an_evaluation_without_fold_scores_the_fold_the_network_trained_on(tmp_path):
    """Before: fold defaulted to 1 and was not recorded: a network trained on fold 2 was scored on testlist01,
    which holds fold 2's training videos (UCF101's folds overlap), at accuracy 1.0 without a word; fold=1.0
    failed in a format code and a fold without split files was ignored."""
    videos, splits = make_synthetic_actions(tmp_path, TINY, progress=False)
    shutil.copy(splits / "trainlist01.txt", splits / "trainlist02.txt")
    lines = (splits / "testlist01.txt").read_text().splitlines()
    (splits / "testlist02.txt").write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = zoo.train("video-tsn", videos, splits=splits, fold=2, model_config={"stem": "cifar"}, size=16,
                           num_segments=2, epochs=1, batch_size=10, progress=False)
    model = result.model
    assert model.video_cfg["fold"] == 2
    assert zoo.evaluate(model, videos, splits=splits, amp=None) == zoo.evaluate(model, videos, splits=splits, fold=2,
                                                                                amp=None)
    with pytest.warns(UserWarning, match=r"trained on UCF101's fold 2 .* testlist01\.txt holds videos of that list"):
        zoo.evaluate(model, videos, splits=splits, fold=1, amp=None)
    with pytest.raises(ValueError, match=r"fold=3 picks UCF101's split files .* read without any: pass splits=DIR"):
        zoo.evaluate(model, videos, fold=3, amp=None)  # a class folder: no split files to pick from
    from zoo.video.ucf101 import UCF101

    with pytest.raises(ValueError, match=r"fold must be one of \(1, 2, 3\) \(an int\), got 1\.0"):
        UCF101(videos, splits, fold=1.0)


# --- one clip recipe for training, evaluation and prediction ---------------------------------------------


def test_training_recipe_replaces_the_default_one_everywhere(folder, tmp_path, monkeypatch):
    model = _small(zoo.build("r2plus1d_18", num_classes=3))
    assert model.video_cfg["frames_per_clip"] == 16
    train_ds, _ = model.zoo_data(folder, train=True, num_segments=4, size=16, progress=False)
    assert train_ds.sampling == "segments" and train_ds.num_segments == 4
    assert "frames_per_clip" not in model.video_cfg  # only the recipe training used
    eval_ds, _ = model.zoo_data(folder, train=False)
    assert eval_ds.sampling == "segments" and eval_ds[0][0].shape[1] == 4

    reads = []
    real = video_predict.read_frames
    monkeypatch.setattr(video_predict, "read_frames", lambda path, idx, meta, **kw: reads.append(idx) or
                        real(path, idx, meta, **kw))
    zoo.predict(model, folder / "a" / "0.avi")
    assert reads == [[1, 4, 7, 10]]  # the 4 segment centres of 12 frames, not 16 consecutive frames

    again = zoo.build("r2plus1d_18", weights=str(zoo.save(model, tmp_path / "r.safetensors")))
    assert again.video_cfg["num_segments"] == 4 and "frames_per_clip" not in again.video_cfg

    with pytest.raises(ValueError, match="not both"):
        zoo.build("video-tsn", num_classes=3).zoo_data(folder, train=True, num_segments=4, frames_per_clip=8)


def test_a_file_saved_with_both_clip_keys_predicts_as_it_trained(folder, tmp_path):
    model = _small(zoo.build("r2plus1d_18", num_classes=3))
    model.video_cfg.update(num_segments=4, frames_per_clip=16)  # what zoo_data used to leave behind
    again = zoo.build("r2plus1d_18", weights=str(zoo.save(model, tmp_path / "both.safetensors")))
    assert again.video_cfg.get("num_segments") == 4 and "frames_per_clip" not in again.video_cfg


def test_a_new_head_beside_saved_weights_drops_their_class_names_and_predict_takes_classes(folder, tmp_path):
    """A file's 3 class names stayed on a 5-output head built beside it: predict failed ("3 class names for a
    model with 5 outputs: give ... classes=[...]"), and predict took no classes= (the vision family's does)."""
    model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar"))
    model.video_cfg["classes"] = ["a", "b", "c"]
    path = zoo.save(model, tmp_path / "tsn.safetensors")
    assert zoo.build("video-tsn", weights=str(path)).video_cfg["classes"] == ["a", "b", "c"]
    with pytest.warns(UserWarning, match="left freshly initialised"):
        wider = zoo.build("video-tsn", weights=str(path), num_classes=5)
    assert "classes" not in wider.video_cfg
    rows = zoo.predict(wider, folder / "a" / "0.avi", topk=5)
    assert rows[0]["label"] == str(rows[0]["index"])  # the indices: no names fit these outputs
    named = zoo.predict(wider, folder / "a" / "0.avi", classes=list("vwxyz"), topk=5)
    assert named[0]["label"] == "vwxyz"[named[0]["index"]] and named[0]["prob"] == rows[0]["prob"]
    with pytest.raises(TypeError, match="classes is a list of names"):
        zoo.predict(wider, folder / "a" / "0.avi", classes="vwxyz")


def test_a_photo_given_to_a_video_network_is_an_error_row_not_a_label(folder, tmp_path):
    """FFmpeg decodes a JPEG as a one-frame video: `zoo predict video-tsn ... cat.jpg` gave 'Grow 0.999'."""
    from PIL import Image

    from zoo.inputs import UnreadableInputWarning

    photo = tmp_path / "cat.JPG"
    Image.new("RGB", (40, 30), (200, 30, 30)).save(photo, format="JPEG")
    model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar"))
    with pytest.warns(UnreadableInputWarning, match="is an image, not a video"):
        rows = zoo.predict(model, [photo, folder / "a" / "0.avi"])
    assert "label" not in rows[0] and "an image network" in rows[0]["error"]
    assert rows[1]["input"] == str(folder / "a" / "0.avi") and "label" in rows[1]


# --- evaluation folders ---------------------------------------------------------------------------------


def test_evaluating_on_more_classes_than_outputs_is_a_clear_error(folder):
    model = _small(zoo.build("video-tsn", num_classes=2, stem="cifar"))
    with pytest.raises(ValueError, match=r"has 3 classes but the network has 2 outputs"):
        zoo.evaluate(model, folder, batch_size=2)


def test_indexing_bar_follows_progress(folder, capfd):
    model = zoo.build("video-tsn", num_classes=3)
    model.zoo_data(folder, train=True, progress=False)
    model.zoo_data(folder, train=False)  # evaluation shows no bars unless asked
    assert "indexing videos" not in capfd.readouterr().err
    model.zoo_data(folder, train=False, progress=True)
    assert "indexing videos" in capfd.readouterr().err


# --- zoo.predict ----------------------------------------------------------------------------------------


def test_predict_reports_undecodable_files_and_predicts_the_rest(folder, tmp_path):
    mixed = tmp_path / "mixed"
    shutil.copytree(folder / "a", mixed)
    (mixed / "1_garbage.avi").write_bytes(bytes(range(256)) * 20)
    (mixed / "2_empty.mp4").write_bytes(b"")
    model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar"))
    with pytest.warns(UserWarning, match="cannot decode"):
        rows = zoo.predict(model, mixed, topk=2)
    assert [Path(r["input"]).name for r in rows] == ["0.avi", "1.avi", "1_garbage.avi", "2_empty.mp4"]
    assert [("error" in r) for r in rows] == [False, False, True, True]
    assert all(len(r["topk"]) == 2 and 0 <= r["index"] < 3 for r in rows[:2])


def test_predict_gives_one_row_per_input_in_the_order_given_also_for_a_repeated_path(folder):
    """Before: rows were sorted by path, keyed on the last position of each: [b, a, b, a] came back [b, b, a, a],
    so inputs zipped with outputs took other videos' labels."""
    model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar"))
    a, b = folder / "a" / "0.avi", folder / "b" / "1.avi"
    for batch_size in (1, 3):
        rows = zoo.predict(model, [b, a, b, a], batch_size=batch_size, amp=None)
        assert [r["input"] for r in rows] == [str(b), str(a), str(b), str(a)]
        assert rows[0]["prob"] == pytest.approx(rows[2]["prob"]) and rows[1]["prob"] == pytest.approx(rows[3]["prob"])


def test_predict_takes_progress_as_every_family_does_and_shows_a_bar_over_the_videos(folder, capsys):
    """Before: ``progress=`` was refused (UnknownOptionError) by the video family's predict alone, so code that
    passed it to every model broke here, and a folder of videos had no bar."""
    model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar"))
    videos = [folder / "a" / "0.avi", folder / "b" / "1.avi"]
    quiet = zoo.predict(model, videos, amp=None, progress=False)
    assert "video" not in capsys.readouterr().err
    shown = zoo.predict(model, videos, amp=None, progress=True)
    assert "2/2" in capsys.readouterr().err
    assert [r["prob"] for r in shown] == [r["prob"] for r in quiet]


def test_predict_takes_tensors_and_batch_size_and_checks_its_arguments(folder):
    torch.manual_seed(0)
    model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar")).eval()
    model.video_cfg["classes"] = ["a", "b", "c"]
    clips = torch.randn(3, 3, 2, 16, 16)  # (N, C, T, H, W)
    rows = zoo.predict(model, clips, topk=3, batch_size=2, amp=None)  # fp32, as the reference below
    probs = model(clips).softmax(1)
    assert [r["input"] for r in rows] == ["tensor[0]", "tensor[1]", "tensor[2]"]
    assert [r["index"] for r in rows] == probs.argmax(1).tolist()
    assert rows[1]["prob"] == pytest.approx(probs[1].max().item(), abs=1e-5)
    assert zoo.predict(model, clips[1], amp=None)[0]["label"] == rows[1]["label"]  # one (C, T, H, W) clip
    files, one_by_one = zoo.predict(model, folder, batch_size=4, amp=None), zoo.predict(model, folder, batch_size=1,
                                                                                         amp=None)
    assert len(files) == 6 and [r["input"] for r in files] == [r["input"] for r in one_by_one]
    assert [r["prob"] for r in files] == pytest.approx([r["prob"] for r in one_by_one], abs=1e-5)

    for bad in (0, -1):
        with pytest.raises(ValueError, match="topk must be an int >= 1"):
            zoo.predict(model, clips, topk=bad)
    with pytest.raises(ValueError, match=r"float clip \(C, T, H, W\) or batch \(N, C, T, H, W\)"):
        zoo.predict(model, torch.zeros(3, 2, 16, 16, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"the clips have 5 channels .* but the network takes 3"):
        zoo.predict(model, torch.randn(2, 5, 2, 16, 16))  # (N, T, C, H, W) mistaken for (N, C, T, H, W), say
    with pytest.raises(TypeError, match="video file or folder path"):
        zoo.predict(model, 5)


@pytest.mark.parametrize("name", ["video-tsn", "r2plus1d_18"])
def test_predict_runs_at_the_precision_amp_asks_for(name, top_probs_fp32_bf16):
    from zoo.engine.precision import auto_amp, model_op_kind

    torch.manual_seed(0)
    model = _small(zoo.build(name, num_classes=3)).eval()
    clips = torch.randn(2, 3, 2, 16, 16)
    fp32, bf16 = top_probs_fp32_bf16(model, clips)

    def probs(**kw):
        return [r["prob"] for r in zoo.predict(model, clips, **kw)]

    assert probs(amp=None) == probs(amp="fp32") == fp32  # exact fp32
    assert probs(amp="bf16") == bf16
    op = model_op_kind(model)
    assert op == ("conv" if name == "video-tsn" else "conv3d")  # 2-D and 3-D convolutions are judged apart
    assert probs() == (bf16 if auto_amp("cpu", op) == "bf16" else fp32)
    with pytest.raises(ValueError, match=r"amp='fp16' runs on CUDA only, and this prediction runs on cpu"):
        probs(amp="fp16")  # fp16 autocast: CUDA only


def test_predict_runs_where_the_model_is_unless_device_is_given(folder, monkeypatch):
    model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar"))
    moved, to = [], model.to
    monkeypatch.setattr(model, "to", lambda *a, **k: moved.append(a) or to(*a, **k))
    zoo.predict(model, torch.randn(3, 2, 16, 16))
    zoo.predict(model, folder / "a" / "0.avi")
    to_float = lambda clip: clip.float() / 255
    video_predict.predict_video(model, folder / "a" / "0.avi", num_segments=2, transform=to_float)
    assert moved == []
    zoo.predict(model, folder / "a" / "0.avi", device="cpu")
    video_predict.predict_video(model, folder / "a" / "0.avi", num_segments=2, transform=to_float, device="cpu")
    assert moved == [(torch.device("cpu"),)] * 2


# --- evaluate_videos runs where the model is; zoo.finetune names what fine-tunes a video network ----------


def test_evaluate_videos_runs_where_the_model_is_unless_device_is_given(folder, monkeypatch):
    from zoo.video import transforms as VT
    from zoo.video.evaluation import evaluate_videos
    from zoo.video.ucf101 import VideoClipDataset

    videos = [(str(folder / c / f"{i}.avi"), k) for k, c in enumerate("abc") for i in range(2)]
    ds = VideoClipDataset(videos, ["a", "b", "c"], sampling="segments", num_segments=2, frames_per_clip=1,
                          train=False, transform=VT.ToFloat(), progress=False)
    model = zoo.build("video-tsn", num_classes=3, stem="cifar")
    moved, to = [], model.to
    monkeypatch.setattr(model, "to", lambda *a, **k: moved.append(a) or to(*a, **k))
    out = evaluate_videos(model, ds, batch_size=6, amp=None)
    assert out["videos"] == 6 and moved == []  # run where it is
    # "cpu:0" stands for a device the model is on other than the old default, "cpu" (a GPU, on a GPU machine)
    for where in ("model_device", "run_device"):
        monkeypatch.setattr(f"zoo.video.evaluation.{where}", lambda m: torch.device("cpu", 0))
    seen = []
    monkeypatch.setattr("zoo.video.evaluation.model_amp", lambda amp, model, device, **k: seen.append(device))
    evaluate_videos(model, ds, batch_size=6, amp=None)
    assert seen == [torch.device("cpu", 0)] and moved == []
    evaluate_videos(model, ds, batch_size=6, amp=None, device="cpu")  # a device given: the model goes there
    assert seen[-1] == torch.device("cpu") and moved == [(torch.device("cpu"),)]


def test_finetune_of_a_video_network_names_the_call_that_works_and_that_call_works(folder):
    model = zoo.build("video-tsn", num_classes=3)
    with pytest.raises(TypeError, match=r"zoo\.train\(zoo\.build\('video-tsn', weights='synthetic-actions', "
                                        rf"num_classes=N\), '{folder}'\)") as info:
        zoo.finetune(model, str(folder))
    assert "zoo.vision.finetune" not in str(info.value)  # it cannot read a video folder
    with pytest.warns(UserWarning, match="left freshly initialised"):
        tuned = zoo.build("video-tsn", weights="synthetic-actions", num_classes=3)
    result = zoo.train(_small(tuned), str(folder), epochs=1, batch_size=3, progress=False, amp=None)
    assert result.history[-1]["step"] == 2 and tuned.fc.out_features == 3


def test_training_on_one_class_folder_says_a_classifier_needs_two(tmp_path):
    (tmp_path / "wave").mkdir()
    write_video(tmp_path / "wave" / "0.avi", render_clip(0, np.random.default_rng(0), 32, 8))
    with pytest.raises(ValueError, match=r"one class \('wave'\); a classifier learns to tell classes apart"):
        zoo.train("video-tsn", tmp_path, model_config={"stem": "cifar"}, num_segments=2, size=32, epochs=1,
                  progress=False)


def test_predict_reports_many_unreadable_files_in_one_warning(tmp_path):
    """One warning per broken file, even under Python's default filter (1000 files: 1000 warnings), where
    training on the folder says it in one line; the vision family's wording, and one file as before."""
    from zoo.inputs import UnreadableInputWarning

    for i in range(7):
        (tmp_path / f"b{i}.mp4").write_bytes(bytes(range(256)) * 4)
    write_video(tmp_path / "ok.mp4", render_clip(0, np.random.default_rng(0), 32, 12))
    model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rows = zoo.predict(model, tmp_path, batch_size=3)
    assert len(rows) == 8 and sum("error" in r for r in rows) == 7 and "label" in rows[-1]
    mine = [w for w in seen if issubclass(w.category, UnreadableInputWarning)]
    assert len(mine) == 1 and "cannot decode 7 of the 8 videos" in str(mine[0].message), [str(w.message) for w in mine]
    assert "b0.mp4" in str(mine[0].message) and "b4.mp4" in str(mine[0].message)
    assert "b5.mp4" not in str(mine[0].message) and mine[0].filename == __file__
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        zoo.predict(model, [tmp_path / "b0.mp4", tmp_path / "ok.mp4"])
    mine = [str(w.message) for w in seen if issubclass(w.category, UnreadableInputWarning)]
    assert len(mine) == 1 and mine[0].startswith(f"cannot decode {tmp_path / 'b0.mp4'}: "), mine


def test_predict_video_defaults_to_the_networks_recipe_and_refuses_a_uint8_clip(folder):
    """predict_video fed the decoded uint8 clip to the network ('expected scalar type Byte but found Float') and 8
    segment centres to a network recorded with frames_per_clip=16: not what zoo.predict reads."""
    from zoo.video.classifier import set_clip_recipe

    path = folder / "a" / "0.avi"
    for seed in range(4):  # a decoded clip is a permuted view: unless made contiguous, where the input stays
        torch.manual_seed(seed)  # channels-first, 9 of 12 seeds rounded the last bit otherwise than zoo.predict
        model = _small(zoo.build("video-tsn", num_classes=3, stem="cifar")).eval()
        set_clip_recipe(model.video_cfg, {"frames_per_clip": 5})
        clip = video_predict.load_clip(path, frames_per_clip=5, transform=model._transform(False))
        want = video_predict.forward_probs(model, clip[None])[0]
        assert torch.equal(video_predict.predict_video(model, path, amp=None), want)
        assert max(want.tolist()) == zoo.predict(model, path, amp=None)[0]["prob"]
    assert model.predict_inputs()[0] == {"frames_per_clip": 5}  # what both read by
    with pytest.raises(ValueError, match=r"predict_video: Sequential records no input recipe.*pass transform="):
        video_predict.predict_video(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(3)), path)
