"""zoo.train / zoo.evaluate dispatch on what they are given."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

import zoo


class _Agent:
    """A minimal object implementing the Trainable protocol."""

    def __init__(self):
        self.trained_with = None

    def zoo_train(self, data, **config):
        self.trained_with = (data, config)
        return "result"

    def zoo_evaluate(self, data, **config):
        return {"return": 1.5}


def test_trainable_protocol_dispatch():
    agent = _Agent()
    assert zoo.train(agent, "env-id", total_steps=3) == "result"
    assert agent.trained_with == ("env-id", {"total_steps": 3})
    assert zoo.evaluate(agent) == {"return": 1.5}


def test_estimator_dispatch():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    result = zoo.train(LogisticRegression(), (X, y))
    assert result.model is not None
    assert zoo.evaluate(result.model, (X, y))["accuracy"] > 0.9  # a classifier's score is its accuracy


def test_estimator_needs_xy_pair():
    with pytest.raises(TypeError, match=r"data=\(X, y\)"):
        zoo.train(LogisticRegression(), "not a pair")


def test_unknown_object_is_a_clear_error():
    with pytest.raises(TypeError, match="does not know how to train a int"):
        zoo.train(3, None)


def test_model_config_only_with_a_name():
    with pytest.raises(TypeError, match="model_config"):
        zoo.train(_Agent(), None, model_config={"a": 1})


@pytest.fixture
def toy_registry(monkeypatch):
    """A private registry holding one tiny network, built by name (its initial weights are random)."""
    from torch import nn

    from zoo import registry

    monkeypatch.setattr(registry, "_REGISTRY", {})

    class ToyNet(nn.Sequential):
        def zoo_finetune(self, data, *, strategy, **config):
            from zoo.engine import fit

            self[-1] = nn.Linear(8, 3)  # a new head, as a fine-tune to new classes makes: drawn at random
            return fit(self, data, **config)

    @registry.register("toy-net", family="toys", summary="a toy")
    def _build(*, width: int = 8):
        return ToyNet(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 2))

    return registry


def _xy(classes: int = 2):
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    return x, torch.arange(32) % classes


@pytest.mark.parametrize("call", ["train", "finetune"])
def test_a_seeded_run_by_name_repeats_whatever_the_global_rng_did_before(toy_registry, call):
    """zoo.train(NAME, data, seed=S) built NAME from torch's global generator before the loop seeded it, so
    two runs in one process (or two processes: torch starts each from a random seed) trained two networks."""
    import torch

    def run():
        fn = zoo.train if call == "train" else zoo.finetune
        data = _xy(2 if call == "train" else 3)
        result = fn("toy-net", data, seed=3, epochs=1, batch_size=8, amp=None, progress=False)
        return {k: v.clone() for k, v in result.model.state_dict().items()}

    torch.manual_seed(1)
    first = run()
    torch.rand(1000)  # the global generators elsewhere now
    second = run()
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


@pytest.mark.parametrize("call", ["train", "finetune"])
def test_a_run_by_name_without_a_seed_repeats_and_is_the_run_with_seed_0(toy_registry, call):
    """The loops' default seed is 0 (data order, dropout), but the network built by name came from torch's
    global generator: the same call without seed= gave another model each time."""
    import torch

    def run(**seed):
        fn = zoo.train if call == "train" else zoo.finetune
        result = fn("toy-net", _xy(2 if call == "train" else 3), epochs=1, batch_size=8, amp=None, progress=False,
                    **seed)
        return result.model.state_dict()

    torch.manual_seed(1)
    first = run()
    torch.rand(1000)
    for other in (run(), run(seed=0)):
        assert all(torch.equal(first[k], other[k]) for k in first)
    assert not all(torch.equal(first[k], v) for k, v in run(seed=1).items())



def test_a_build_by_name_leaves_the_callers_random_streams_where_they_were(toy_registry):
    """Seeding the build reset Python's, NumPy's and torch's global generators in the caller's process: a
    sweep drawing its next hyperparameters between two runs drew the same numbers each time."""
    import random

    import numpy as np
    import torch

    from zoo.api import seeded_build

    def draws():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    random.seed(7), np.random.seed(7), torch.manual_seed(7)
    draws()
    expected = draws()
    random.seed(7), np.random.seed(7), torch.manual_seed(7)
    draws()
    with seeded_build(None):
        built = zoo.build("toy-net")
    assert draws() == expected
    with seeded_build(0):
        again = zoo.build("toy-net")
    assert all(torch.equal(a, b) for a, b in zip(built.state_dict().values(), again.state_dict().values()))


def test_accepts_option_reads_the_signature_of_what_receives_the_options():
    from torch import nn

    from zoo.api import accepts_option, named_options

    class Named:
        def zoo_predict(self, inputs, *, topk=1, amp="auto"):
            return inputs

    class Open:
        def zoo_predict(self, inputs, **options):
            return inputs

        def zoo_train(self, data, **config):
            return None

        def zoo_evaluate(self, data=None, *, episodes=10, seed=None):
            return {}

    assert accepts_option(Named(), "predict", "amp") is True and accepts_option(Named(), "predict", "seed") is False
    assert accepts_option(Open(), "predict", "amp") is None  # it decides: an unknown one is its TypeError
    assert named_options(Named(), "predict") == ["topk", "amp"] and named_options(Open(), "predict") is None
    assert accepts_option(Open(), "evaluate", "seed") is True and accepts_option(Open(), "evaluate", "amp") is False
    assert named_options(Open(), "evaluate") == ["episodes", "seed"]  # data is what it scores, not an option
    assert accepts_option(nn.Linear(2, 2), "predict", "batch_size") is False  # a plain module takes no options
    assert accepts_option(nn.Linear(2, 2), "evaluate", "device") is True  # through zoo.engine.evaluate
    assert accepts_option(LogisticRegression(), "evaluate", "sample_weight") is True
    with pytest.raises(ValueError, match="call must be"):
        accepts_option(Named(), "export", "amp")


def test_a_config_setting_given_to_train_says_where_it_belongs():
    """`zoo.train("td3", env, learning_starts=500)` said only "unknown option(s) 'learning_starts'" and listed
    the loop's options; a setting of the model's config now says how the model takes it."""
    from zoo.engine.options import UnknownOptionError

    with pytest.raises(UnknownOptionError, match=r"^'learning_starts' is a setting of td3's config, which the model "
                       r"takes when it is built: zoo\.train\('td3', data, model_config=\{'learning_starts': \.\.\.\}\) "
                       r"\(zoo\.train on td3: unknown option\(s\) 'learning_starts'"):
        zoo.train("td3", "Pendulum-v1", total_steps=10, learning_starts=5)
    with pytest.raises(TypeError, match=r"^'stem' is a setting of resnet18's config.*zoo\.finetune\(zoo\.build\("
                                        r"'resnet18', stem=\.\.\., weights=\.\.\.\), data\)"):
        zoo.finetune("resnet18", (torch.zeros(2, 3, 8, 8), torch.zeros(2, dtype=torch.long)), stem="cifar")
    with pytest.raises(TypeError, match=r"^'n_components' is a setting of hsi-pca-svm's config.*build it with them: "
                                        r"zoo\.build\('hsi-pca-svm', n_components=\.\.\.\)"):
        zoo.train(zoo.build("hsi-pca-svm"), "indian_pines", n_components=5)
    with pytest.raises(TypeError, match=r"^zoo\.train on resnet18: unknown option\(s\) 'epohcs' \(did you mean "
                                        r"'epochs'\?\)"):
        zoo.train("resnet18", (torch.zeros(2, 3, 8, 8), torch.zeros(2, dtype=torch.long)), epohcs=1)  # a typo: as was
    # finetune's own options are named with fit's (it said "fit: unknown option(s) imagesize" and listed fit's alone)
    with pytest.raises(TypeError, match=r"zoo\.finetune: unknown option\(s\) 'imagesize' \(did you mean 'image_size'\?\); "
                                        r"it takes amp, augment, backbone_lr_mult, .*strategy, .*warmup_steps"):
        zoo.finetune("resnet18", (torch.zeros(2, 3, 8, 8), torch.zeros(2, dtype=torch.long)), imagesize=8)



def test_finetune_of_an_agent_or_a_pipeline_names_how_that_model_is_adapted(tmp_path, capsys):
    """Before: zoo.finetune("td3", ...) and zoo.finetune("hsi-pca-svm", ...) pointed at zoo.vision.finetune.finetune
    "for any torchvision-style classifier", which can tune neither an RL agent nor a PCA + SVM pipeline, and
    `zoo finetune td3 --data DIR` printed that Python call as its hint."""
    from zoo.cli import main

    agent = r"the agent 'td3' .*train it on from its weights: zoo\.train\(zoo\.build\('td3', weights='[\w.-]+'\), env_id\)$"
    pipeline = r"the pipeline 'hsi-pca-svm' .*refits it on the new data: zoo\.train\('hsi-pca-svm', 'scene\.mat'\)$"
    for name, data, how in (("td3", "Pendulum-v1", agent), ("hsi-pca-svm", "scene.mat", pipeline)):
        with pytest.raises(TypeError, match=how) as err:
            zoo.finetune(name, data)
        assert "zoo.vision" not in str(err.value)
    lines = {"td3": r"zoo train td3 --weights [\w.-]+ --env ENV_ID", "hsi-pca-svm": "zoo train hsi-pca-svm --data "
             + re.escape(str(tmp_path))}
    for name, line in lines.items():  # in the command's words: a command line, not the Python call
        assert main(["finetune", name, "--data", str(tmp_path)]) == 2
        said = capsys.readouterr().err
        assert re.search(rf"^zoo finetune: error: {name} does not fine-tune .*: {line}$", said, re.MULTILINE), said
        assert "zoo.train(" not in said and "zoo.vision" not in said

# --- a DataLoader given as data batches by itself ------------------------------------------------------------
def _loader(batch_size=4, **kw):
    from torch.utils.data import DataLoader, TensorDataset

    return DataLoader(TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,))), batch_size=batch_size, **kw)


@pytest.mark.parametrize(("call", "data", "option", "match"), [
    ("train", "loader", {"batch_size": 8}, (r"zoo.train: batch_size=8 is not applied: data is a DataLoader, which "
                                             r"runs with batch_size=4; build the DataLoader with batch_size=8")),
    ("train", "pair", {"num_workers": 2}, r"num_workers=2 is not applied: the validation data is a DataLoader"),
    ("train", "dict", {"drop_last": True}, r"drop_last=True is not applied: the training data is a DataLoader"),
    ("train", "val_data", {"batch_size": 2}, r"batch_size=2 is not applied: val_data is a DataLoader"),
    ("evaluate", "loader", {"batch_size": 8}, r"zoo.evaluate: batch_size=8 is not applied"),
    ("evaluate", "loader", {"collate_fn": lambda b: b}, (r"collate_fn='<lambda>' is not applied: .*runs with "
                                                          r"collate_fn='default_collate'")),
])
def test_a_loader_option_a_given_dataloader_ignores_is_said(call, data, option, match):
    xy = (torch.randn(8, 3), torch.randint(0, 2, (8,)))
    data, extra = {"loader": (_loader(), {}),
                   "pair": ((xy, _loader(num_workers=0)), {}),
                   "dict": ({"train": _loader(), "val": xy}, {}),
                   "val_data": (xy, {"val_data": _loader()})}[data]
    with pytest.warns(UserWarning, match=match) as seen:
        result = getattr(zoo, call)(torch.nn.Linear(3, 2), data, **extra, **option,
                                    **({"epochs": 1, "progress": False} if call == "train" else {}))
    assert seen[0].filename == __file__  # it points at the call
    if call == "train" and "batch_size" in option and "val_data" not in extra:
        assert result.history[0]["step"] == 2  # 8 samples in the loader's batches of 4, not in one of 8


@pytest.mark.parametrize("call", ["fit", "evaluate"])
def test_the_engines_own_fit_and_evaluate_say_what_a_given_dataloader_ignores_once(call):
    """Before: zoo.engine.fit(net, loader_of_4, batch_size=8, drop_last=True) trained on batches of 4 and
    zoo.engine.evaluate(net, loader, batch_size=8) scored them, without a word (the README: a warning says so);
    through zoo.train / zoo.evaluate the warning is said once, not again by the engine under them."""
    import warnings

    from zoo import engine

    option = {"batch_size": 8, **({"drop_last": True, "epochs": 1, "progress": False} if call == "fit" else {})}
    with pytest.warns(UserWarning, match=rf"zoo.engine.{call}: batch_size=8 is not applied: data is a DataLoader"):
        getattr(engine, call)(torch.nn.Linear(3, 2), _loader(), **option)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        getattr(zoo, "train" if call == "fit" else "evaluate")(torch.nn.Linear(3, 2), _loader(), **option)
    said = [str(w.message) for w in seen if "is not applied" in str(w.message)]
    assert said and all(m.startswith("zoo.train" if call == "fit" else "zoo.evaluate") for m in said), said
    assert len(said) == len(set(said))
    with warnings.catch_warnings():  # the engine's own defaults are no option the caller gave
        warnings.simplefilter("error")
        engine.evaluate(torch.nn.Linear(3, 2), _loader(batch_size=5, num_workers=0))


def test_loader_options_equal_to_the_given_dataloaders_pass_quietly(recwarn):
    from torch.utils.data import default_collate

    model = torch.nn.Linear(3, 2)
    loader = _loader(batch_size=4)
    result = zoo.train(model, loader, batch_size=4, num_workers=0, drop_last=False, collate_fn=None, epochs=1,
                       progress=False)
    assert len(result.history) == 1
    assert set(zoo.evaluate(model, loader, batch_size=4, collate_fn=default_collate)) >= {"accuracy"}
    # a Dataset is batched by zoo: batch_size applies
    assert zoo.train(model, loader.dataset, batch_size=8, epochs=1, progress=False).history[0]["step"] == 1
    assert not [w for w in recwarn if "is not applied" in str(w.message)]


@pytest.mark.parametrize("call", ["train", "finetune", "fit"])
def test_a_run_leaves_the_callers_random_streams_where_they_were(toy_registry, call):
    """zoo.train and zoo.engine.fit (and zoo.finetune of a model object: tests/vision) seeded Python's, NumPy's and
    torch's global generators for the run and left them so: a sweep drawing its trials from `random` between seed=0 runs drew
    the same trial after every run."""
    import random

    import numpy as np
    import torch

    from zoo.engine import fit

    def draws():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    net = torch.nn.Linear(4, 2)  # made before: its initial weights are the caller's draw

    def run():
        data = _xy(2 if call in ("train", "fit") else 3)
        options = {"seed": 0, "epochs": 1, "batch_size": 8, "amp": None, "progress": False}
        if call == "fit":
            fit(net, data, **options)
        else:
            (zoo.train if call == "train" else zoo.finetune)("toy-net", data, **options)

    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    untouched = [draws(), draws()]
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    got = [draws()]
    run()
    got.append(draws())
    assert got == untouched


@pytest.mark.parametrize("call", ["predict a Dataset", "evaluate an IterableDataset", "vision classifier report",
                                  "train on an IterableDataset"])
def test_scoring_a_plain_network_leaves_the_callers_torch_generator_alone(call):
    """Their DataLoaders had no generator: each pass drew its base seed from the caller's global generator."""
    import torch
    from torch.utils.data import IterableDataset, TensorDataset

    class Stream(IterableDataset):
        def __iter__(self):
            g = torch.Generator().manual_seed(0)
            for i in range(16):
                yield torch.randn(4, generator=g), i % 2

    net = torch.nn.Linear(4, 2)
    data = TensorDataset(torch.randn(16, 4, generator=torch.Generator().manual_seed(0)), torch.arange(16) % 2)
    torch.manual_seed(5)
    untouched = torch.rand(2)
    torch.manual_seed(5)
    got = [torch.rand(1)]
    if call == "predict a Dataset":
        zoo.predict(net, data)
    elif call == "evaluate an IterableDataset":
        zoo.evaluate(net, Stream(), batch_size=8)
    elif call == "vision classifier report":
        from zoo.vision.evaluate import predict_dataset

        predict_dataset(net, data, amp=None)
    else:
        zoo.train(net, Stream(), epochs=1, batch_size=8, amp=None, progress=False)
    got.append(torch.rand(1))
    assert torch.equal(torch.cat(got), untouched)
