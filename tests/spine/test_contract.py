"""The one contract, for every registered name, through the top-level API only.

Each case trains a few steps on tiny data of its family, then evaluates, predicts, saves and builds the
model back from the saved file, with the same call shapes everywhere:

    result = zoo.train(NAME, data, model_config=..., **loop)      # TrainResult, same meaning everywhere
    metrics = zoo.evaluate(result.model, data)                     # fractions in [0, 1], shared names
    out = zoo.predict(result.model, inputs)
    path = zoo.save(result.model, tmp / "m.safetensors")
    again = zoo.build(NAME, weights=path)                          # loads whole: predicts the same
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import zoo

FRACTIONS = ("accuracy", "top5", "overall_accuracy", "average_accuracy", "kappa", "bleu")


@dataclass
class Case:
    data: Any                      # what train and evaluate both take
    model_config: dict[str, Any]   # tiny shapes, so that a few steps run in seconds
    loop: dict[str, Any]           # the loop options of the family
    inputs: Any                    # what predict takes
    metrics: tuple[str, ...]       # names evaluate must return
    same: Callable[[Any, Any], bool]


def _equal_rows(a: list[dict], b: list[dict]) -> bool:
    return [r["index"] for r in a] == [r["index"] for r in b] and np.allclose([r["prob"] for r in a],
                                                                               [r["prob"] for r in b], atol=1e-5)


def _case(name: str, tiny: Any) -> Case:
    if name == "resnet18":
        folder = tiny.image_folder()
        return Case(folder, {"stem": "cifar"}, {"epochs": 1, "batch_size": 4}, folder / "val" / "dog",
                    ("loss", "accuracy"), _equal_rows)
    if name.startswith("seq2seq"):
        folder = tiny.corpus()
        tiny = ({"d_model": 32, "n_heads": 2, "n_layers": 1, "d_ff": 64} if name == "seq2seq-transformer"
                else {"emb_dim": 16, "hidden": 32})
        return Case(folder, {"src_vocab": 300, "tgt_vocab": 300, "max_len": 32, **tiny},
                    {"epochs": 1, "direction": "de-en", "warmup_steps": 2}, ["ein hund läuft ."],
                    ("loss", "accuracy", "bleu"), lambda a, b: a == b)
    if name == "td3":
        obs = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.5]], np.float32)
        return Case("Pendulum-v1", {"net_arch": [32, 32], "learning_starts": 100, "batch_size": 32},
                    {"total_steps": 300, "eval_episodes": 1, "progress": False}, obs,
                    ("return_mean", "return_std"), lambda a, b: np.allclose(a, b, atol=1e-6))
    if name == "hsi-pca-svm":
        scene = tiny.scene()
        return Case(scene, {"n_components": 5}, {"split": "random"}, scene,
                    ("accuracy", "overall_accuracy", "average_accuracy", "kappa"), np.array_equal)
    if name == "hybridsn":
        scene = tiny.scene()
        return Case(scene, {"n_bands": 15, "window": 9}, {"split": "random", "epochs": 1, "batch_size": 32},
                    scene, ("accuracy", "overall_accuracy", "average_accuracy", "kappa"), np.array_equal)
    if name in ("video-tsn", "r2plus1d_18"):
        folder = tiny.video_folder()
        clip = {"num_segments": 2} if name == "video-tsn" else {"frames_per_clip": 4}
        return Case(folder, {"stem": "cifar"} if name == "video-tsn" else {},
                    {"epochs": 1, "batch_size": 2, "size": 32, **clip}, folder / "MoveLeft",
                    ("loss", "accuracy"), _equal_rows)
    raise AssertionError(f"no contract case for {name!r}: every registered name needs one")


@pytest.mark.parametrize("name", zoo.list_models())
def test_every_model_honours_the_contract(name, tiny, tmp_path):
    case = _case(name, tiny)
    result = zoo.train(name, case.data, model_config=case.model_config, **case.loop)
    assert result.history, "a training run reports its rows"
    for i, row in enumerate(result.history, start=1):
        assert row["epoch"] == i and row["step"] >= 1  # rows count from 1; steps are optimizer or env steps
    if result.best_epoch is not None:
        assert result.history[result.best_epoch - 1][result.monitor] == result.best_metric
        assert result.best_step == result.history[result.best_epoch - 1]["step"]
    model = result.model

    metrics = zoo.evaluate(model, case.data)
    assert set(case.metrics) <= set(metrics), sorted(metrics)
    for key in FRACTIONS:
        if key in metrics:
            low = -1.0 if key == "kappa" else 0.0
            assert low <= metrics[key] <= 1.0, (key, metrics[key])

    # a misspelt option is refused by the call the user made, naming what it takes, in every family
    for call, arg in ((zoo.evaluate, case.data), (zoo.predict, case.inputs)):
        with pytest.raises(TypeError, match=r"unknown option\(s\) 'bogus_option'.*; it takes \w"):
            call(model, arg, bogus_option=1)

    out = zoo.predict(model, case.inputs)
    _threads_share_the_model(model, case, out)
    path = zoo.save(model, tmp_path / "model.safetensors")
    again = zoo.build(name, weights=path)
    assert case.same(out, zoo.predict(again, case.inputs)), "the saved file must load whole"


def _threads_share_the_model(model: Any, case: Case, alone: Any) -> None:
    """Threads serving one model (a web server's pool) each get what a caller alone gets, and the model keeps
    its modes: predict used to switch it back to training under another thread's prediction."""
    from concurrent.futures import ThreadPoolExecutor

    modules = list(model.modules()) if hasattr(model, "modules") else []
    for i, m in enumerate(modules):  # training mode, with a few layers frozen in eval mode, as a user leaves it
        m.training = i % 3 != 2
    modes = [m.training for m in modules]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda _: zoo.predict(model, case.inputs), range(12)))
    assert all(case.same(alone, out) for out in outs), "a prediction differs when threads share the model"
    assert [m.training for m in modules] == modes, "predict must give each layer its own mode back"


def test_every_registered_name_builds_with_no_arguments():
    for name in zoo.list_models():
        assert zoo.build(name).registry_name == name  # every model says what it is (resnet18, td3 and the SVM did not)


def test_save_into_a_folder_names_the_file_after_the_model(tmp_path):
    path = zoo.save(zoo.build("resnet18", num_classes=3, stem="cifar"), tmp_path)
    assert path == tmp_path / "resnet18.safetensors"
    assert zoo.build("resnet18", weights=path).fc.out_features == 3  # the config travels in the file


def test_save_into_a_folder_yet_to_be_made_written_as_one(tmp_path):
    """zoo.save(m, "new/") was refused: "give a path ending in .safetensors or a folder" (Path drops the slash)."""
    path = zoo.save(zoo.build("td3", net_arch=(8, 8)), f"{tmp_path}/runs/new/")
    assert path == tmp_path / "runs" / "new" / "td3.safetensors" and path.is_file()
    with pytest.raises(ValueError, match="give a path ending in .safetensors or a folder"):
        zoo.save(zoo.build("td3", net_arch=(8, 8)), tmp_path / "runs" / "plain")  # no slash: not a folder


def test_save_and_export_look_through_dataparallel_and_torch_compile(tmp_path):
    """zoo.save(nn.DataParallel(model)) wrote a plain state dict with every key prefixed "module." and no
    config, which zoo.build then refused; zoo.export of either wrapper found no exporter."""
    import torch

    model = zoo.build("resnet18", num_classes=3, stem="cifar")
    for i, wrapped in enumerate((torch.nn.DataParallel(model), torch.compile(model))):
        (tmp_path / str(i)).mkdir()
        path = zoo.save(wrapped, tmp_path / str(i))
        assert path.name == "resnet18.safetensors"
        again = zoo.build("resnet18", weights=path)  # the config travels: 3 classes, the CIFAR stem
        assert again.fc.out_features == 3 and torch.equal(again.conv1.weight, model.conv1.weight)
        assert zoo.export(wrapped, tmp_path / f"{i}.onnx", image_size=32).path.is_file()


def test_train_evaluate_predict_and_finetune_look_through_dataparallel(tiny):
    """A zoo network in nn.DataParallel was read as a plain module: evaluate iterated its folder's path as a
    data set ("a batch must be (inputs, targets) ..."), train refused the family's options, predict on a
    path was refused and on a tensor gave raw logits."""
    import torch

    folder = tiny.image_folder()
    model = zoo.build("resnet18", num_classes=2, stem="cifar")
    wrapped = torch.nn.DataParallel(model)
    image = next((folder / "val" / "dog").iterdir())
    assert zoo.predict(wrapped, image) == zoo.predict(model, image)
    batch = torch.rand(2, 3, 32, 32)
    assert zoo.predict(wrapped, batch) == zoo.predict(model, batch)  # rows of labels, not raw logits
    assert zoo.evaluate(wrapped, folder, progress=False) == zoo.evaluate(model, folder, progress=False)
    before = model.fc.weight.detach().clone()
    zoo.train(wrapped, folder, epochs=1, batch_size=4, image_size=32, progress=False)
    assert not torch.equal(model.fc.weight, before)  # the module inside trained: the wrapper holds it
    result = zoo.finetune(wrapped, folder, epochs=1, batch_size=4, progress=False)
    assert result.history


def test_save_expands_the_home_folder_as_build_does(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path / "..")
    path = zoo.save(zoo.build("resnet18", num_classes=3, stem="cifar"), "~/net.safetensors")
    assert path == tmp_path / "net.safetensors" and path.is_file()
    assert zoo.build("resnet18", weights="~/net.safetensors").fc.out_features == 3


def test_a_saved_file_of_another_model_is_refused_by_name(tmp_path):
    path = zoo.save(zoo.build("resnet18", num_classes=3, stem="cifar"), tmp_path / "r.safetensors")
    with pytest.raises(ValueError, match="holds a 'resnet18' model"):
        zoo.build("video-tsn", weights=path)


def test_config_values_are_type_checked_with_the_key_named():
    with pytest.raises(TypeError, match="d_model expects int, got 'big'"):
        zoo.build("seq2seq-transformer", d_model="big")
    with pytest.raises(TypeError, match="gamma expects float"):
        zoo.build("td3", gamma="high")
    with pytest.raises(TypeError, match=r"unknown config key\(s\) 'num_clases' \(did you mean 'num_classes'\?\)"):
        zoo.build("resnet18", num_clases=3)


def test_model_info_shows_the_config_dataclass_defaults_and_docs():
    card = zoo.model_info("resnet18")
    assert card.default_config == {"num_classes": 1000, "in_chans": 3, "stem": "imagenet", "zero_init_residual": False}
    assert "Input channels" in card.config_docs["in_chans"]
    td3 = zoo.model_info("td3").default_config
    assert td3["env"] == "Pendulum-v1" and td3["tau"] == 0.005  # builder keys and TD3Config fields


def test_a_weights_name_has_its_models_card_as_build_takes_it(capsys):
    """zoo.build("resnet18.cifar10") works; zoo.model_info and `zoo info` of the name said "unknown model"."""
    from zoo.cli import main

    assert zoo.model_info("resnet18.cifar10") == zoo.model_info("resnet18")
    assert main(["info", "resnet18.cifar10"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("    resnet18.")]
    assert len(lines) == 1 and lines[0].startswith("    resnet18.cifar10:")
    # how the file was made and what it is: they were only in the manifest
    entry = zoo.hub.get_entry("resnet18.cifar10")
    for shown in (f"command: {entry.meta['command']}", f"num_params: {entry.meta['num_params']}", "dtype: float16",
                  f"sha256 {entry.sha256}", "license: "):
        assert shown in out, shown
    main(["info", "resnet18"])
    assert "command:" not in capsys.readouterr().out  # the model's card lists its weights, one line each


@pytest.mark.parametrize("name", zoo.list_models())
def test_model_info_defaults_are_what_build_builds(name):
    """`zoo info NAME` shows the values `zoo.build(NAME)` uses (TD3's default env picks the rl-zoo preset's
    gamma and buffer size, not TD3Config's own field defaults)."""
    import dataclasses

    built = zoo.build(name)
    config = getattr(built, "config", None)
    if dataclasses.is_dataclass(config):
        used = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    else:  # a scikit-learn pipeline: its steps' parameters, by their own names
        used = {k.rpartition("__")[2]: v for k, v in built.get_params(deep=True).items()}
    shown = zoo.model_info(name).default_config
    differ = {k: (shown[k], v) for k, v in used.items() if k in shown and shown[k] != v}
    assert set(shown) & set(used), f"{name}: nothing of model_info's defaults found in what was built"
    assert not differ, f"model_info({name!r}) shows (shown, built): {differ}"


def test_importing_zoo_and_listing_models_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, zoo; zoo.list_models(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_evaluate_and_predict_take_a_registered_name_as_train_and_export_do(tiny):
    """zoo.predict("resnet18.cifar10", image) said it did not know how to run a str."""
    import torch

    batch = torch.rand(2, 3, 32, 32)
    assert zoo.predict("resnet18.cifar10", batch) == zoo.predict(zoo.build("resnet18", weights="cifar10"), batch)
    scores = zoo.evaluate("resnet18.cifar10", tiny.image_folder() / "val", progress=False)  # cat, dog: CIFAR's
    assert scores == zoo.evaluate(zoo.build("resnet18.cifar10"), tiny.image_folder() / "val", progress=False)
