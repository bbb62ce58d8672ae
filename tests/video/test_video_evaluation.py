"""``zoo.evaluate`` of a video network counts every video once: on a folder, by the clip ``zoo.predict``
classifies it by (so the two agree); on a clip data set, by the mean softmax of its clips."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo
from zoo.video.decoding import CorruptVideoError
from zoo.video.evaluation import evaluate_videos
from zoo.video.synthetic import render_clip, write_video
from zoo.video.ucf101 import VideoClipDataset

# uneven lengths: clip-level counting (a clip every 4 frames) would weigh class "a" 12 / 16 clips, not 2 / 5 videos
LENGTHS = {"a": (24, 24), "b": (4, 6), "c": (8,)}


@pytest.fixture(scope="module")
def uneven(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("uneven")
    rng = np.random.default_rng(1)
    for label, (name, lengths) in enumerate(LENGTHS.items()):
        for i, n in enumerate(lengths):
            write_video(root / name / f"{i}.avi", render_clip(label, rng, 32, n))
    return root


def _model(name: str):
    torch.manual_seed(0)
    model = zoo.build(name, num_classes=3)
    key = "frames_per_clip" if name == "r2plus1d_18" else "num_segments"
    model.video_cfg.update({"size": 8, "resize": 8, key: 4, "classes": list(LENGTHS)})  # 8 px: cheap, still a clip
    return model


@pytest.mark.parametrize("name", ["r2plus1d_18", "video-tsn"])
def test_evaluate_on_a_folder_scores_each_video_as_predict_classifies_it(name, uneven):
    """evaluate scores each video as predict classifies it: counting uniform clips would weigh long videos
    more, and disagree with predict."""
    model = _model(name)
    rows = zoo.predict(model, uneven, topk=3, amp=None)
    truth = [Path(r["input"]).parent.name for r in rows]
    metrics = zoo.evaluate(model, uneven, amp=None)
    assert set(metrics) == {"loss", "accuracy"}  # one clip per video: no separate clip_accuracy
    assert metrics["accuracy"] == pytest.approx(np.mean([r["label"] == t for r, t in zip(rows, truth)]))
    # loss: the mean over videos of -log p(label), p what predict reports
    nll = [-math.log(dict(r["topk"])[t]) for r, t in zip(rows, truth)]
    assert metrics["loss"] == pytest.approx(np.mean(nll), rel=1e-4)


def test_evaluate_on_a_folder_refuses_a_frame_rate_predict_would_not_use(uneven):
    with pytest.raises(ValueError, match="frame_rate=12.5: zoo.evaluate on a folder scores each video by"):
        zoo.evaluate(_model("r2plus1d_18"), uneven, frame_rate=12.5, amp=None)


@pytest.mark.parametrize(("option", "bad"), [("batch_size", 0), ("batch_size", 2.0), ("num_workers", -1)])
def test_evaluate_on_a_folder_checks_its_counts_in_zoos_words(uneven, option, bad):
    """Before: torch's DataLoader refused them ("batch_size should be a positive integer value, but got
    batch_size=0"), without the int the README's other evaluations name."""
    with pytest.raises((ValueError, TypeError), match=rf"{option} must be an int >= {int(option == 'batch_size')}, "
                                                      rf"got {bad!r}"):
        zoo.evaluate(_model("r2plus1d_18"), uneven, amp=None, **{option: bad})


def test_evaluate_on_a_clip_dataset_averages_each_videos_clips(uneven):
    model = _model("video-tsn").eval()  # a 2-D network takes any clip length: uniform clips of 4 frames here
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    ds = VideoClipDataset(videos, list(LENGTHS), sampling="uniform", frames_per_clip=4, step_between_clips=4,
                          train=False, transform=model._transform(False), progress=False)
    assert len(ds) == 16 and ds.num_videos == 5
    metrics = zoo.evaluate(model, ds, amp=None, batch_size=5, metrics=("accuracy", "top2"))

    with torch.inference_mode():
        clip_probs = model(torch.stack([ds[i][0] for i in range(len(ds))])).softmax(1)
    of_video = torch.tensor([ds.video_index(i) for i in range(len(ds))])
    mean = torch.stack([clip_probs[of_video == v].mean(0) for v in range(5)])
    labels = torch.tensor([k for _, k in videos])
    assert metrics["accuracy"] == pytest.approx(float((mean.argmax(1) == labels).double().mean()))
    assert metrics["top2"] == pytest.approx(float((mean.topk(2).indices == labels[:, None]).any(1).double().mean()))
    assert metrics["loss"] == pytest.approx(float(-mean[torch.arange(5), labels].log().mean()), rel=1e-4)
    clip_level = evaluate_videos(model, ds, batch_size=5, amp=None)
    assert metrics["clip_accuracy"] == pytest.approx(clip_level["clip_accuracy"])
    assert metrics["accuracy"] == pytest.approx(clip_level["video_accuracy"])
    with pytest.raises(TypeError, match=r"unknown option\(s\) 'channels_last'; it takes batch_size.*metrics \(and "
                                        r"on a folder or UCF101 root, splits and fold\)"):  # which it takes too
        zoo.evaluate(model, ds, channels_last=True)
    clips = torch.utils.data.TensorDataset(torch.stack([ds[i][0] for i in range(2)]), torch.tensor([0, 1]))
    with pytest.raises(TypeError, match=r"\(a Dataset of clips\): unknown option\(s\) 'batchsize'"):
        zoo.evaluate(model, clips, batchsize=2)  # it reached the engine: "got an unexpected keyword argument"


def test_a_video_whose_frames_do_not_decode_is_left_out_with_a_warning(uneven, monkeypatch):
    model = _model("video-tsn")
    rows = zoo.predict(model, uneven, amp=None)
    import zoo.video.evaluation as E

    real = E.read_frames

    def broken_b(path, *args, **kwargs):  # headers fine, data broken: found only when decoding
        if Path(path).parent.name == "b":
            raise CorruptVideoError(f"{path}: invalid data in frame 2")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(E, "read_frames", broken_b)
    with pytest.warns(UserWarning, match=r"cannot decode .*[/\\]b[/\\]\d\.avi.*left out of the evaluation"):
        metrics = zoo.evaluate(model, uneven, amp=None, batch_size=2)
    kept = [r for r in rows if Path(r["input"]).parent.name != "b"]
    assert metrics["accuracy"] == pytest.approx(np.mean([r["label"] == Path(r["input"]).parent.name for r in kept]))
    with pytest.raises(CorruptVideoError, match="invalid data"):
        zoo.evaluate(model, uneven, amp=None, strict=True)


def test_a_clip_label_past_the_networks_outputs_is_named(uneven):
    """A 2-class network scored on a 3-class clip dataset failed 'IndexError: index 2 is out of bounds for
    dimension 0 with size 2' (in the scoring); training says which label and what to do."""
    torch.manual_seed(0)
    model = zoo.build("video-tsn", num_classes=2).eval()
    model.video_cfg.update({"size": 8, "resize": 8, "num_segments": 4})
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    ds = VideoClipDataset(videos, list(LENGTHS), sampling="uniform", frames_per_clip=4, step_between_clips=4,
                          train=False, transform=model._transform(False), progress=False)
    with pytest.raises(ValueError, match=r"label 2 for a model with 2 outputs \(class indices 0\.\.1\): build the "
                                         r"model with as many outputs as the data set's classes"):
        zoo.evaluate(model, ds, amp=None, batch_size=16)


def test_a_clip_dataset_without_a_transform_gets_the_networks_own_and_names_the_classes(uneven):
    """UCF101(root, splits) / VideoClipDataset without transform= give uint8 (C, T, H, W) clips: zoo.train failed
    'expected scalar type Byte but found BFloat16', and a network trained on such a Dataset named its outputs
    '0', '1', ... where one trained on a folder takes the folder's class names."""
    torch.manual_seed(0)
    model = zoo.build("video-tsn", num_classes=3, stem="cifar")
    model.video_cfg.update({"size": 8, "resize": 8, "num_segments": 2})
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    ds = VideoClipDataset(videos, list(LENGTHS), sampling="segments", num_segments=2, train=True, progress=False)
    assert ds[0][0].dtype == torch.uint8
    result = zoo.train(model, ds, epochs=1, batch_size=5, amp=None, progress=False)
    assert math.isfinite(result.history[-1]["train_loss"]) and ds.transform is None  # the user's stays as it was
    assert model.video_cfg["classes"] == list(LENGTHS)
    assert zoo.predict(model, uneven / "a" / "0.avi", amp=None)[0]["label"] in LENGTHS
    test = VideoClipDataset(videos, list(LENGTHS), sampling="segments", num_segments=2, train=False, progress=False)
    expected = zoo.evaluate(model, VideoClipDataset(videos, list(LENGTHS), sampling="segments", num_segments=2,
                                                    train=False, transform=model._transform(False), progress=False),
                            amp=None)
    assert zoo.evaluate(model, test, amp=None) == expected
    with pytest.raises(ValueError, match=r"the DataLoader's VideoClipDataset has no transform: its clips are uint8"):
        zoo.train(model, torch.utils.data.DataLoader(ds, batch_size=5), epochs=1, amp=None, progress=False)
    part = torch.utils.data.Subset(ds, [0, 2, 4])  # random_split's pieces: the same copy under their indices
    assert math.isfinite(zoo.train(model, part, epochs=1, batch_size=3, amp=None, progress=False)
                         .history[-1]["train_loss"])
    with pytest.raises(ValueError, match=r"the DataLoader's VideoClipDataset has no transform"):
        zoo.train(model, torch.utils.data.DataLoader(part, batch_size=3), epochs=1, amp=None, progress=False)


def test_a_network_trained_on_a_clip_dataset_records_its_classes_in_the_checkpoints(uneven, tmp_path):
    torch.manual_seed(0)
    model = zoo.build("video-tsn", num_classes=3, stem="cifar")
    model.video_cfg.update({"size": 8, "resize": 8, "num_segments": 2})
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    ds = VideoClipDataset(videos, list(LENGTHS), sampling="segments", num_segments=2, train=True, progress=False)
    zoo.train(model, ds, epochs=1, batch_size=5, amp=None, progress=False, checkpoint_dir=str(tmp_path / "ck"))
    built = zoo.build("video-tsn", weights=str(tmp_path / "ck" / "best.pt"))
    assert built.video_cfg["classes"] == list(LENGTHS) and built.video_cfg["num_segments"] == 2


def test_scoring_a_clip_dataset_whose_classes_are_not_the_networks_warns(uneven):
    """As for vision: a Dataset's labels are indices, and classes ['c', 'b', 'a'] were scored against the
    network's ['a', 'b', 'c'] without a word."""
    model = _model("video-tsn")
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    flipped = VideoClipDataset(videos, list(LENGTHS)[::-1], sampling="segments", num_segments=4, train=False,
                               transform=model._transform(False), progress=False)
    with pytest.warns(UserWarning, match=r"VideoClipDataset's classes \['c', 'b', 'a'\] are not the network's "
                                         r"\['a', 'b', 'c'\]: its labels are scored by index"):
        zoo.evaluate(model, flipped, amp=None)


@pytest.mark.parametrize("name", ["r2plus1d_18", "video-tsn"])
def test_evaluate_on_a_folder_leaves_the_callers_global_torch_generator_alone(name, uneven):
    """Before: its clip loader had no generator of its own, so each pass drew its base seed from the global
    stream (torch.rand after zoo.evaluate differed from torch.rand without it); predict's already did not."""
    model = _model(name)
    torch.manual_seed(0)
    untouched = torch.rand(3)
    torch.manual_seed(0)
    zoo.evaluate(model, uneven, amp=None)
    assert torch.equal(torch.rand(3), untouched)


def _splits_in_another_order(uneven: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """``(split folder, videos)``: UCF101 split files of every video of ``uneven``, fold 1, whose classInd.txt
    lists the classes in another order than the network's (c, a, b)."""
    splits = tmp_path / "splits"
    splits.mkdir()
    order = ["c", "a", "b"]
    (splits / "classInd.txt").write_text("".join(f"{i} {c}\n" for i, c in enumerate(order, 1)))
    videos = sorted(p.relative_to(uneven).as_posix() for p in uneven.rglob("*.avi"))
    (splits / "trainlist01.txt").write_text("".join(f"{v} {order.index(v.split('/')[0]) + 1}\n" for v in videos))
    (splits / "testlist01.txt").write_text("".join(f"{v}\n" for v in videos))
    return splits, videos


def test_a_testlist_is_scored_by_the_networks_class_names_not_classinds_order(uneven, tmp_path):
    """With splits=, the testlist was labelled by classInd.txt's order and only the class count was checked: a
    network trained on a class folder (sorted case-sensitively, where classInd.txt ignores case: HammerThrow /
    Hammering) was scored against the other class's output for every video of such a pair."""
    model = _model("video-tsn")
    splits, videos = _splits_in_another_order(uneven, tmp_path)
    by_folder = zoo.evaluate(model, uneven, amp=None)
    by_split = zoo.evaluate(model, uneven, splits=splits, fold=1, amp=None)
    assert by_split == pytest.approx(by_folder)
    (splits / "classInd.txt").write_text("1 c\n2 a\n3 x\n")
    (splits / "testlist01.txt").write_text("".join(f"{v}\n" for v in videos if not v.startswith("b/")))
    with pytest.raises(ValueError, match=r"class\(es\) \['x'\] of classInd.txt are not among the network's"):
        zoo.evaluate(model, uneven, splits=splits, fold=1, amp=None)


@pytest.mark.parametrize("sampling", ["uniform", "segments"])
def test_a_clip_that_does_not_decode_is_left_out_of_its_video_not_replaced_by_the_next_videos(uneven, monkeypatch,
                                                                                            sampling):
    """Before: the retry that keeps a training epoch going read the next video's clip in its place, and the
    video-level scoring filed it, with the next video's label, under the bad video: a video counted twice, the
    bad one scored as the next one's class."""
    import zoo.video.ucf101 as U

    model = _model("video-tsn")
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    kw = {"frames_per_clip": 4, "step_between_clips": 4} if sampling == "uniform" else {"num_segments": 4}
    ds = VideoClipDataset(videos, list(LENGTHS), sampling=sampling, train=False, transform=model._transform(False),
                          progress=False, **kw)
    clean = evaluate_videos(model, ds, amp=None, batch_size=4)
    real = U.read_frames

    def broken(path, *args, **kwargs):  # the first video of "a": headers fine, every frame broken
        if path == videos[0][0]:
            raise CorruptVideoError(f"{path}: invalid data in frame 2")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(U, "read_frames", broken)
    with pytest.warns(UserWarning, match="skipping an undecodable clip"):
        out = evaluate_videos(model, ds, amp=None, batch_size=4)
    bad_clips = sum(1 for i in range(len(ds)) if ds.video_index(i) == 0)
    assert out["videos"] == clean["videos"] - 1 and out["clips"] == clean["clips"] - bad_clips


def test_training_on_with_split_files_labels_the_clips_by_the_networks_class_names(uneven, tmp_path):
    """Before: training with splits= renamed the outputs in classInd.txt's order: a network trained on a class
    folder (case-sensitive order: HammerThrow before Hammering) swapped the meaning of such outputs, without a
    word, and its next predictions named the other class."""
    model = _model("video-tsn")
    splits, _ = _splits_in_another_order(uneven, tmp_path)
    before = [r["label"] for r in zoo.predict(model, uneven, amp=None)]
    zoo.train(model, uneven, splits=splits, fold=1, epochs=1, lr=1e-12, batch_size=4, progress=False, amp=None)
    assert model.video_cfg["classes"] == list(LENGTHS)
    assert [r["label"] for r in zoo.predict(model, uneven, amp=None)] == before


def test_a_subset_of_a_clip_dataset_is_scored_by_video(uneven):
    """evaluate checked hasattr(data, 'video_index'): a Subset (random_split) of uniform clips was scored clip by
    clip, each clip counted as a video (accuracy was the clip accuracy, over 16 'videos' for 5)."""
    from torch.utils.data import Subset

    model = _model("video-tsn").eval()
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    ds = VideoClipDataset(videos, list(LENGTHS), sampling="uniform", frames_per_clip=4, step_between_clips=4,
                          train=False, transform=model._transform(False), progress=False)
    whole = zoo.evaluate(model, ds, amp=None, batch_size=5)
    assert zoo.evaluate(model, Subset(ds, list(range(len(ds)))), amp=None, batch_size=5) == pytest.approx(whole)
    # a split of a split, mapped through both: clips 0, 1 (video 0) and 12 (video 2), two videos
    some = Subset(Subset(ds, list(range(len(ds)))[::-1]), [len(ds) - 1, len(ds) - 2, len(ds) - 13])
    assert [ds.video_index(len(ds) - 1 - i) for i in some.indices] == [0, 0, 2]
    part = evaluate_videos(model, some, amp=None)
    assert part["videos"] == 2 and part["clips"] == 3


def _uniform(model, videos):
    return VideoClipDataset(videos, list(LENGTHS), sampling="uniform", frames_per_clip=4, step_between_clips=4,
                            train=False, transform=model._transform(False), progress=False)


def test_a_concat_of_clip_datasets_is_scored_by_video_each_data_sets_videos_apart(uneven):
    """A ConcatDataset had no video_index: its 16 clips were scored as 16 videos (accuracy 0.125, the clip
    accuracy, for 0.4 over the 5 videos)."""
    from torch.utils.data import ConcatDataset, Subset

    model = _model("video-tsn").eval()
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    whole = zoo.evaluate(model, _uniform(model, videos), amp=None, batch_size=5)
    assert "clip_accuracy" in whole
    halves = ConcatDataset([_uniform(model, videos[:2]), _uniform(model, videos[2:])])  # both have a video 0
    assert zoo.evaluate(model, halves, amp=None, batch_size=5) == pytest.approx(whole)
    counted = evaluate_videos(model, halves, amp=None, batch_size=5)
    assert (counted["videos"], counted["clips"]) == (5, 16)
    # a concat of a Subset and a concat, and a Subset of a concat: through every level to the clips' videos
    nested = ConcatDataset([Subset(_uniform(model, videos[:3]), [5, 6, 12]),  # a clip of each of 3 videos
                            ConcatDataset([_uniform(model, videos[3:4]), _uniform(model, videos[4:])])])
    assert (evaluate_videos(model, nested, amp=None)["videos"], len(nested)) == (5, 6)
    assert evaluate_videos(model, Subset(halves, [0, 1, 15]), amp=None)["videos"] == 2
    # beside a data set without video_index, each of its items is a video, as it is alone
    plain = [(torch.randn(3, 4, 8, 8), 0), (torch.randn(3, 4, 8, 8), 1)]
    mixed = evaluate_videos(model, ConcatDataset([_uniform(model, videos[:2]), plain]), amp=None)
    assert (mixed["videos"], mixed["clips"]) == (4, 14)


def test_a_dataloader_of_a_clip_dataset_is_scored_by_video(uneven):
    """zoo.evaluate(model, DataLoader(clips)) went to the engine, which scored each of its 16 clips as a video."""
    from torch.utils.data import DataLoader

    model = _model("video-tsn").eval()
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    ds = _uniform(model, videos)
    whole = zoo.evaluate(model, ds, amp=None, batch_size=5)
    assert zoo.evaluate(model, DataLoader(ds, batch_size=3), amp=None) == pytest.approx(whole)
    # the clips its sampler draws: those of videos 0 and 2
    part = DataLoader(ds, batch_size=2, sampler=[0, 1, 12])
    assert evaluate_videos(model, part, amp=None)["videos"] == 2


def test_a_dataloaders_own_collate_fn_is_applied_when_it_is_scored_by_video(uneven):
    """Before: zoo.evaluate read a DataLoader's clips again per video through a loader of its own (default_collate),
    and the DataLoader's collate_fn was never called: a collate that transforms the batch was scored as if it did
    nothing, and one that returns a dict or no batch at all went unnoticed."""
    from torch.utils.data import DataLoader, default_collate

    model = _model("video-tsn").eval()
    videos = [(str(p), k) for k, c in enumerate(LENGTHS) for p in sorted((uneven / c).iterdir())]
    ds = _uniform(model, videos)
    calls = []

    def darker(items):  # the batch transformed: every clip scaled down
        calls.append(len(items))
        clips, labels = default_collate(items)
        return {"video": clips * 0.25, "labels": labels}

    got = zoo.evaluate(model, DataLoader(ds, batch_size=5, collate_fn=darker), amp=None)
    assert sum(calls) == len(ds)
    dark = _uniform(model, videos)
    dark.transform = lambda clip: model._transform(False)(clip) * 0.25
    want = zoo.evaluate(model, dark, amp=None, batch_size=5)
    assert got == pytest.approx(want) and got["loss"] != pytest.approx(zoo.evaluate(model, ds, amp=None)["loss"])
    with pytest.raises(TypeError, match=r"the DataLoader's collate_fn must return \(clips, labels\) or a dict .*"
                                        r"got a str"):
        zoo.evaluate(model, DataLoader(ds, batch_size=5, collate_fn=lambda items: "no batch"), amp=None)

    def first_only(items):  # one clip for several: their videos cannot be told apart any more
        clips, labels = default_collate(items)
        return clips[:1], labels[:1]

    with pytest.raises(ValueError, match=r"collate_fn 'first_only' made Tensor clips and labels of shape \(1,\) from "
                                         r"5 clips; video evaluation reads the loader's clips by video"):
        zoo.evaluate(model, DataLoader(ds, batch_size=5, collate_fn=first_only), amp=None)
