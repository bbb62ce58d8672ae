"""The contract every family honours: ``train``, ``evaluate``, ``predict`` and ``save``.

One signature for the user, one loop per kind of model inside. A family's object says how it is
trained, scored, run and saved by implementing the protocols below; ``zoo.engine.network.Network``
implements the first two for networks trained by the shared engine, from a family's data forms and recipe.

Fallbacks, for objects zoo did not build: a plain ``nn.Module`` trains and scores through
:func:`zoo.engine.fit` / :func:`zoo.engine.evaluate` and predicts by calling it on a tensor; a
scikit-learn estimator fits on ``data=(X, y)``, is scored with ``score`` and predicts with ``predict``.

Units: every metric ``evaluate`` returns that is a proportion is a fraction in [0, 1] (``accuracy``,
``top5``, ``overall_accuracy``, ``average_accuracy``, ``bleu``); Cohen's ``kappa`` is in [-1, 1] (0: chance
agreement); ``loss`` and returns (``return_mean``) are in their own units.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from zoo import registry
from zoo.wrappers import strip_parallel

__all__ = ["ModelState", "Predictor", "Saveable", "Trainable", "accepts_option", "evaluate", "finetune",
           "finetune_refusal", "list_weights", "named_options", "predict", "save", "seeded_build", "train"]


@runtime_checkable
class Trainable(Protocol):
    """Objects that train and score themselves (the TD3 agent, the hyperspectral pipelines, zoo networks).

    ``zoo_train(data, **config)`` trains in place and returns a :class:`zoo.engine.TrainResult`;
    ``zoo_evaluate(data, **config)`` returns ``{metric: float}``. ``data`` takes the same forms in both
    (a folder, a scene, an env id, a Dataset or DataLoader: whatever the family documents).
    """

    def zoo_train(self, data: Any, **config: Any) -> Any: ...

    def zoo_evaluate(self, data: Any, **config: Any) -> dict[str, float]: ...


@runtime_checkable
class Predictor(Protocol):
    """``zoo_predict(inputs, **config)``: images -> labels, sentences -> translations, observations ->
    actions, scenes -> label maps, videos -> labels (the family documents its forms)."""

    def zoo_predict(self, inputs: Any, **config: Any) -> Any: ...


@dataclass
class ModelState:
    """Everything :func:`save` writes: ``zoo.build(name, weights=path)`` rebuilds the object from it.

    ``config``: the builder config that rebuilds the object's shapes (JSON-able); ``tensors``: the state;
    ``metadata``: extra strings the family's weights loader reads back (class names, preprocessing, ...).
    """

    name: str
    config: dict[str, Any]
    tensors: dict[str, Any]
    metadata: dict[str, str] = field(default_factory=dict)

    def file_metadata(self) -> dict[str, str]:
        """The safetensors metadata :func:`save` writes (``zoo.model``, ``zoo.config``, the family's own)."""
        return {"zoo.model": self.name, "zoo.config": json.dumps(self.config), **self.metadata}


@runtime_checkable
class Saveable(Protocol):
    def zoo_state(self) -> ModelState: ...


def _resolve(model_or_name: Any, model_config: dict[str, Any] | None, data: Any = None,
             options: dict[str, Any] | None = None, weights: str | os.PathLike | None = None) -> Any:
    if isinstance(model_or_name, str):
        # "resnet18.cifar10": start from those weights (weights= naming others is refused there)
        name, weights = registry.split_weights_name(model_or_name, weights)
        inferred = registry.infer_config(name, data, **(options or {}))
        with seeded_build((options or {}).get("seed")):
            config = {**inferred, **registry.current_config(name, model_config or {})}
            return registry.build(name, weights=weights, **config)
    if model_config:
        raise TypeError("model_config is only used when the model is given by name")
    if weights is not None:  # as zoo.finetune refuses it: the model passed in already holds its weights
        raise TypeError("weights= is only used when the model is given by name; load them with zoo.build(name, "
                        "weights=...) and train that model")
    return model_or_name


def _named(model: Any) -> Any:
    """A registered name (``"resnet18.cifar10"``: the model with those weights) built, as ``zoo.train`` and
    ``zoo.export`` take one; ``zoo.predict("resnet18.cifar10", image)`` said it did not know how to run a str.
    Built on every call: keep ``zoo.build``'s model to call it again."""
    return registry.build(model) if isinstance(model, str) else model


def seeded_build(seed: Any):
    """Where a model built by name for a run draws its initial weights: generators seeded with the run's
    ``seed`` (the loops' default, :class:`zoo.engine.FitConfig`'s 0, when none is given), so a run without
    one repeats too and is the run with ``seed=0``. The loop seeds them only once the model exists, so
    without this the same seed would give another network (torch starts each process from a random seed). The
    caller's generators are put back afterwards (:func:`zoo.engine.seed.seeded`)."""
    from zoo.engine.options import FitConfig
    from zoo.engine.seed import seeded

    return seeded(FitConfig.seed if seed is None else seed)


SEED_MAX = 2**32 - 1
"""The largest ``seed=``: scikit-learn's ``random_state`` takes seeds in [0, 2**32 - 1]; torch and gymnasium take
larger ones, so a seed above it trained a network or an agent and was refused by the PCA + SVM pipeline alone."""


def _plain_seed(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its ``seed`` checked once for every family, as the plain int they all take: a whole number in
    [0, :data:`SEED_MAX`] (``np.int64(3)`` from a grid search too; ``2.7`` and ``True`` are no seeds), or None,
    which is no seed given (the family's default: seed 0, TD3's agent seed). Each family met the others' seeds
    in its own way: None failed in one and not another, ``2.7`` became 2, -1 was gymnasium's error."""
    if "seed" not in config:
        return config
    rest = {k: v for k, v in config.items() if k != "seed"}
    if config["seed"] is None:
        return rest
    return {**rest, "seed": check_seed(config["seed"], allow_none=True)}


def check_seed(seed: Any, *, allow_none: bool = False) -> int:
    """``seed`` as a plain int in [0, :data:`SEED_MAX`], or a clear error naming that range (``or None`` where
    None is taken as no seed given)."""
    from zoo.inputs import whole_number

    hint = f"at most 2**32 - 1 = {SEED_MAX}"
    value = whole_number(seed, "seed", minimum=0, allow_none=allow_none, hint=hint)
    if value > SEED_MAX:
        raise ValueError(f"seed must be an int >= 0{' or None' if allow_none else ''} ({hint}), got {value}")
    return value


def _is_module(model: Any) -> bool:
    from torch import nn

    return isinstance(model, nn.Module)


def _xy(data: Any, what: str) -> tuple[Any, Any]:
    if not (isinstance(data, tuple) and len(data) == 2):
        raise TypeError(f"a scikit-learn estimator {what} data=(X, y); got {type(data).__name__}")
    return data


@contextlib.contextmanager
def loader_options_said() -> Iterator[None]:
    """:func:`zoo.engine.data.loader_options_said`, imported when a call runs (``import zoo`` stays light): the
    engine's loops under zoo's calls see the family's recipe merged in, not the caller's options."""
    from zoo.engine.data import loader_options_said as said

    with said():
        yield


def _callers_data(data: Any, config: dict[str, Any], call: str) -> tuple[Any, dict[str, Any]]:
    """The caller's ``data`` and options as the loops take them: the path options beside it (``val_data``,
    ``labels``, ``splits``) and ``data`` with ``~`` expanded, as torchvision's data sets and
    ``zoo.build(weights=)`` expand it (:func:`zoo.inputs.expand_home`), and a loader option that a DataLoader in
    them keeps its own value of said to be ignored (:func:`zoo.engine.data.say_what_a_ready_loader_ignores`:
    here, where ``config`` is still the caller's own, before a family merges its recipe in)."""
    from zoo.engine.data import say_what_a_ready_loader_ignores
    from zoo.inputs import expand_home

    say_what_a_ready_loader_ignores(data, config, f"zoo.{call}")
    paths = {k: expand_home(config[k]) for k in ("val_data", "labels", "splits") if k in config}
    return expand_home(data), {**config, **paths}


@contextlib.contextmanager
def _naming_config_keys(model_or_name: Any, call: str):
    """An option the loop refused that is a setting of the model's config gets said so, with how to pass it:
    ``zoo.train("td3", env, learning_starts=500)`` read as "unknown option(s) 'learning_starts'" and listed
    only the loop's options."""
    try:
        yield
    except TypeError as err:
        keys = getattr(err, "option_keys", ())
        by_name = isinstance(model_or_name, str)
        name = registry.split_weights_name(model_or_name)[0] if by_name else getattr(model_or_name, "registry_name",
                                                                                    None)
        fields = registry.config_params(name) if keys and name in registry.list_models() else {}
        misplaced = [k for k in keys if k in fields]
        if not misplaced:
            raise
        settings = ", ".join(f"{k!r}: ..." for k in misplaced)
        built = f"zoo.build({name!r}, {', '.join(f'{k}=...' for k in misplaced)}"
        if not by_name:
            how = f"build it with them: {built})"
        elif call == "train":
            how = f"zoo.train({model_or_name!r}, data, model_config={{{settings}}})"
        else:  # finetune takes the weights by name and no model_config: build the model and fine-tune it
            how = f"zoo.finetune({built}, weights=...), data)"
        what = "is a setting" if len(misplaced) == 1 else "are settings"
        raise type(err)(f"{', '.join(map(repr, misplaced))} {what} of {name}'s config, which the model takes when "
                        f"it is built: {how} ({err})", keys) from None


def train(model_or_name: Any, data: Any = None, *, model_config: dict[str, Any] | None = None,
          weights: str | os.PathLike | None = None, **config: Any):
    """Train a model (or a registered name, built with ``model_config`` and what ``data`` implies) on
    ``data``; returns a :class:`zoo.engine.TrainResult` with the same meaning for every kind of model.
    ``weights``: by name, the weights to start from, as ``zoo.build`` and ``zoo.finetune`` take them
    (``zoo.train("resnet18", data, weights="cifar10")`` is ``zoo.train("resnet18.cifar10", data)``).

    ``config`` goes to the loop of the model's kind (epochs, lr, amp, checkpoint_dir, ... for networks;
    total_steps, eval_every, ... for agents; split, search, ... for pipelines). A DataLoader given as data keeps
    its own ``batch_size``, ``num_workers``, ``collate_fn`` and ``drop_last``: one of them given here with another
    value is not applied, and a warning says so; its generator is reseeded from ``(seed, epoch)`` every epoch
    (:func:`zoo.engine.fit`), so ``seed`` fixes its shuffle, not the seed the generator was made with. By name,
    the model's initial weights are drawn after seeding with ``seed`` (default 0, the loops' default; in every family a
    whole number in [0, 2**32 - 1], None being no seed given: :func:`_plain_seed`), so the same
    seed, data and precision repeat the run. A model passed in keeps the weights it was built with: ``seed`` then fixes the
    data order, dropout and noise, not the initial weights (seed before building, ``torch.manual_seed(s)``,
    or pass ``seed=`` to a builder that takes one, such as ``td3``'s).
    """
    config = _plain_seed(config)  # before a model is built by name with it
    with _naming_config_keys(model_or_name, "train"), loader_options_said():
        data, config = _callers_data(data, config, "train")
        # an agent's loop takes its environment as data or as env= (zoo train's --env); by name, either builds
        # the agent for that environment
        implied_by = data if data is not None else config.get("env")
        model = strip_parallel(_resolve(model_or_name, model_config, implied_by, config, weights), "zoo_train")
        if isinstance(model, Trainable):
            return model.zoo_train(data, **config)
        if _is_module(model):
            from zoo.engine import fit

            if data is None:
                raise ValueError("zoo.train(network, data): data is required (a Dataset, DataLoader or (X, y) tensors)")
            return fit(model, data, **config)
        if hasattr(model, "fit"):
            from zoo.engine import TrainResult

            X, y = _xy(data, "trains on")
            model.fit(X, y, **config)
            row = {"epoch": 1, "step": 1, "train_score": float(model.score(X, y))}
            return TrainResult(history=[row], best_metric=row["train_score"], best_epoch=1, checkpoint_path=None,
                               model=model, monitor="train_score")
        raise TypeError(
            f"zoo.train does not know how to train a {type(model).__name__}: expected an nn.Module, "
            "an object with zoo_train/zoo_evaluate (zoo.api.Trainable) or a scikit-learn estimator"
        )


def finetune(model_or_name: Any, data: Any, *, strategy: str = "head", num_classes: int | None = None,
             weights: str | os.PathLike | None = None, **config: Any):
    """Transfer a pretrained model to new data: ``strategy`` ``"head"`` (only the classifier trains),
    ``"top"`` (the classifier and the top backbone stage), ``"full"`` (everything, the backbone at a lower
    learning rate) or ``"gradual"`` (unfrozen top-down). ``num_classes``: the new head's outputs (default: the
    classes the data names, else the weights' own).

    The model's family does the surgery (``zoo_finetune``; the vision family's is
    :func:`zoo.vision.finetune.finetune`, which documents ``num_classes``, ``backbone_lr_mult``, ...).
    By name, the model is built with ``weights`` first (after seeding, with ``seed=``: a new head starts from
    the same weights every time). Returns a :class:`zoo.engine.TrainResult`.
    """
    _check_device(config)  # as evaluate / predict check it: by name, before a model is built for nothing
    config = _plain_seed(config)
    if num_classes is not None:  # named in the signature, as design.md gives it; the family's surgery reads it
        config["num_classes"] = num_classes
    with _naming_config_keys(model_or_name, "finetune"), loader_options_said():
        data, config = _callers_data(data, config, "finetune")
        if isinstance(model_or_name, str):
            # the family makes the new head once the model exists: its weights come from the seeded generators too
            name, weights = registry.split_weights_name(model_or_name, weights)  # "resnet18.cifar10" names both
            with seeded_build(config.get("seed")):
                model = registry.build(name, weights=weights)
                _require_finetune(model, model_or_name, data)
                return model.zoo_finetune(data, strategy=strategy, **config)
        if weights is not None:
            raise TypeError("weights= is only used when the model is given by name; load them with zoo.build")
        model = strip_parallel(model_or_name, "zoo_finetune")
        _require_finetune(model, model_or_name, data)
        return model.zoo_finetune(data, strategy=strategy, **config)


def _require_finetune(model: Any, model_or_name: Any, data: Any) -> None:
    if not hasattr(model, "zoo_finetune"):
        raise TypeError(finetune_refusal(model, model_or_name, data))


def finetune_refusal(model: Any, model_or_name: Any, data: Any, *, command: bool = False) -> str:
    """Why ``zoo.finetune`` cannot take ``model`` (it has no ``zoo_finetune``) and the way to do what the user
    meant with that kind of model, as a Python call or, with ``command``, as a ``zoo`` command line."""
    # named, not looked up: which classes have zoo_finetune is known only after importing every family's
    # model code (5 s, torch, torchvision, gymnasium and PyAV) in a refusal
    tunable = [n for n in registry.list_models() if n == "resnet18"]
    name = getattr(model, "registry_name", None) or (model_or_name if isinstance(model_or_name, str) else None)
    if name not in registry.list_models():
        return (f"zoo.finetune does not know how to fine-tune a {type(model).__name__} (it has no zoo_finetune); "
                f"models that fine-tune: {', '.join(tunable)}; for any torchvision-style classifier use "
                "zoo.vision.finetune.finetune(model, data, ...)")
    tags = [w.split(".", 1)[1] for w in list_weights(name)]
    tag = tags[0] if tags else "PATH"
    given = repr(os.fspath(data)) if isinstance(data, (str, os.PathLike)) else "data"
    folder = _shell_word(data)
    if "num_classes" in registry.model_info(name).default_config:
        # a zoo network with a class head (the video ones): zoo.vision.finetune.finetune cannot read its
        # data, but training it from its weights with a new head is its fine-tuning
        what = f"to fine-tune the zoo network {name!r}, train it from its weights with a new head"
        call = f"zoo.train(zoo.build({name!r}, weights={tag!r}, num_classes=N), {given})"
        line = f"zoo train {name} --weights {tag} --num-classes N --data {folder}"
    elif getattr(model, "zoo_finetuned_by_training", None):
        # a model without a head to replace (a translator) says so: its fine-tuning is training from its weights
        what = f"to fine-tune the {model.zoo_finetuned_by_training} {name!r}, train it from its weights"
        call = f"zoo.train(zoo.build({name!r}, weights={tag!r}), {given})"
        line = f"zoo train {name} --weights {tag} --data {folder}"
    elif registry.family_of(name) == "rl":
        # an agent has no classifier head: it adapts by training on from its weights, in the new environment
        what = f"the agent {name!r} has no classifier head to replace; to adapt it, train it on from its weights"
        call = f"zoo.train(zoo.build({name!r}, weights={tag!r}), env_id)"
        line = f"zoo train {name} --weights {tag} --env ENV_ID"
    elif registry.family_of(name) == "hyperspectral":  # hsi-pca-svm: PCA + SVM hold no features to transfer
        what = f"the pipeline {name!r} has no pretrained network to transfer; training refits it on the new data"
        call = f"zoo.train({name!r}, {given})"
        line = f"zoo train {name} --data {folder}"
    else:
        what = f"to fine-tune {name!r}, train it from its weights"
        call = f"zoo.train(zoo.build({name!r}, weights={tag!r}), {given})"
        line = f"zoo train {name} --weights {tag} --data {folder}"
    if command:
        return f"{name} does not fine-tune (zoo finetune takes {', '.join(tunable)}); {what}: {line}"
    return (f"zoo.finetune does not know how to fine-tune a {type(model).__name__} (it has no zoo_finetune); "
            f"models that fine-tune: {', '.join(tunable)}; {what}: {call}")


def _shell_word(data: Any) -> str:
    """``data`` as a command line's ``--data`` value (quoted where a shell would split it), else ``DIR``."""
    import shlex

    return shlex.quote(os.fspath(data)) if isinstance(data, (str, os.PathLike)) else "DIR"


def evaluate(model: Any, data: Any = None, **config: Any) -> dict[str, float]:
    """Score a model (or a registered name, ``"resnet18.cifar10"``, built with its weights) on ``data`` (the
    forms ``train`` takes); returns ``{metric: value}``, proportions as fractions in [0, 1] (``kappa`` in
    [-1, 1]), with the same metric names in every family."""
    _check_device(config)
    config = _plain_seed(config)  # an evaluation's episodes (TD3) or split (hyperspectral) take it
    model = strip_parallel(_named(model), "zoo_evaluate")
    _refuse_unknown(model, "evaluate", config)
    data, config = _callers_data(data, config, "evaluate")
    if isinstance(model, Trainable):
        with loader_options_said():
            return model.zoo_evaluate(data, **config)
    if _is_module(model):
        from zoo.engine import evaluate as engine_evaluate

        with loader_options_said():
            return engine_evaluate(model, data, **config)
    if hasattr(model, "score"):
        from sklearn.base import is_classifier

        X, y = _xy(data, "is scored on")
        return {"accuracy" if is_classifier(model) else "r2": float(model.score(X, y, **config))}
    raise TypeError(f"zoo.evaluate does not know how to score a {type(model).__name__}")


def predict(model: Any, inputs: Any, **config: Any) -> Any:
    """Run a model (or a registered name, built with its weights) on raw inputs: image paths -> labels,
    sentences -> translations, observations -> actions, scenes -> label maps, video paths -> labels. A plain
    ``nn.Module`` is called on a tensor batch (or batch by batch on a Dataset or DataLoader:
    :func:`zoo.engine.evaluation.predict_outputs`) in eval mode without gradients; an estimator's ``predict``
    is called."""
    _check_device(config)
    model = strip_parallel(_named(model), "zoo_predict")
    _refuse_unknown(model, "predict", config)
    from zoo.inputs import expand_home

    if not getattr(model, "zoo_text_inputs", False):  # a translator's str is a sentence, "~/notes.txt" too
        inputs = expand_home(inputs, only_existing=True)  # "~/cat.jpg"
    if isinstance(model, Predictor):
        return model.zoo_predict(inputs, **config)
    if _is_module(model):
        if config:  # topk=, batch_size=, ... mean something to a zoo model; a plain call would drop them unseen
            raise TypeError(f"zoo.predict on a plain {type(model).__name__} returns its raw outputs and takes no "
                            f"options, got {', '.join(sorted(config))}")
        from zoo.engine.evaluation import predict_outputs

        return predict_outputs(model, inputs)
    if hasattr(model, "predict"):
        return model.predict(inputs, **config)
    raise TypeError(f"zoo.predict does not know how to run a {type(model).__name__}")


def _check_device(config: dict[str, Any]) -> None:
    """A ``device=`` torch does not know or this machine lacks, refused as ``zoo.train`` refuses it: each family
    met it elsewhere (torch's "Found no NVIDIA driver" from the first tensor moved there)."""
    if config.get("device") is not None:
        from zoo.engine.devices import usable_device

        usable_device(config["device"])


def _options_receiver(model: Any, call: str) -> Any:
    """The function ``zoo.evaluate`` / ``zoo.predict`` (``call``) hands its keyword options to for ``model``
    (None: that call takes none); the same dispatch as those two functions."""
    if call == "evaluate":
        if isinstance(model, Trainable):
            return model.zoo_evaluate
        if _is_module(model):
            from zoo.engine import evaluate as engine_evaluate

            return engine_evaluate
        return getattr(model, "score", None)
    if call == "predict":
        if isinstance(model, Predictor):
            return model.zoo_predict
        return None if _is_module(model) else getattr(model, "predict", None)
    raise ValueError(f"call must be 'evaluate' or 'predict', got {call!r}")


def _refuse_unknown(model: Any, call: str, config: dict[str, Any]) -> None:
    """An option the receiving function does not name is refused here, naming the ones it takes (a receiver
    with ``**options`` checks its own); a plain module's predict takes none and says so itself."""
    fn = _options_receiver(model, call)
    if fn is None or not config or (call == "predict" and _is_module(model) and not isinstance(model, Predictor)):
        return
    from zoo.engine.options import refuse_unknown_options

    skip = 2 if getattr(fn, "__self__", None) is None else 1  # engine.evaluate(model, data, ...) vs a bound method
    refuse_unknown_options(config, f"zoo.{call} on {getattr(model, 'registry_name', None) or type(model).__name__}",
                           fn, skip=skip)


def accepts_option(model: Any, call: str, option: str) -> bool | None:
    """Whether ``zoo.<call>(model, ..., option=...)`` takes ``option``, from the signature of what receives it:
    True (it names it), False (it names neither it nor ``**options``), None (it takes ``**options`` and
    decides itself: a name it does not know is a TypeError naming it)."""
    import inspect

    fn = _options_receiver(model, call)
    if fn is None:
        return False
    params = inspect.signature(fn).parameters
    named = params.get(option)
    if named is not None and named.kind in (named.KEYWORD_ONLY, named.POSITIONAL_OR_KEYWORD):
        return True
    return None if any(p.kind is p.VAR_KEYWORD for p in params.values()) else False


def named_options(model: Any, call: str) -> list[str] | None:
    """Every keyword option ``zoo.<call>(model, ...)`` takes, from its signature (for messages); None when it
    also takes ``**options`` (the list would be incomplete)."""
    import inspect

    fn = _options_receiver(model, call)
    if fn is None:
        return []
    # the first parameter is what the call is about (data, inputs, the model), never an option
    params = list(inspect.signature(fn).parameters.values())[1:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind is p.KEYWORD_ONLY
            or (p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty)]


def _output_path(path: str | os.PathLike, name: str | None) -> Path:
    raw = os.fspath(path)
    out = Path(raw).expanduser()  # as zoo.build(weights=...) reads it: the round trip must hold
    # a folder, or one yet to be made, written as one ("runs/new/", which Path drops the slash of)
    if out.is_dir() or (raw.endswith(("/", os.sep)) and not out.exists()):
        out = out / f"{name or 'model'}.safetensors"
    if out.suffix != ".safetensors":
        raise ValueError(f"zoo.save writes safetensors: give a path ending in .safetensors or a folder, got {out}")
    return out


def save(model: Any, path: str | os.PathLike) -> Path:
    """Write ``model`` to one safetensors file (atomically) with everything needed to rebuild it:
    ``zoo.build(name, weights=path)`` returns it whole (config, tokenizer, preprocessing, class names).
    ``path`` may be a folder (the file is then ``<name>.safetensors`` inside). Returns the file's path."""
    from zoo import hub
    from zoo.wrappers import unwrap

    model = unwrap(model)  # DataParallel's wrapper would prefix every key and drop the config and class names
    if isinstance(model, Saveable):
        state = model.zoo_state()
        out = _output_path(path, state.name)
        hub.save_weights(state.tensors, out, metadata=state.file_metadata())
        return out
    if _is_module(model):
        out = _output_path(path, None)
        hub.save_weights(model, out)
        return out
    raise TypeError(f"zoo.save does not know how to save a {type(model).__name__}: expected a zoo model "
                    "(zoo.api.Saveable) or an nn.Module")


def list_weights(name: str | None = None) -> list[str]:
    """Published ``"model.tag"`` weights names, sorted; only those of model ``name`` when given, and of a
    weights name (``"resnet18.cifar10"``, as :func:`zoo.build` takes one) that name alone, as
    ``timm.list_pretrained("resnet18.a1_in1k")`` lists it.

    An unknown ``name``, or a tag its model has not published, is an error naming the closest ones (as
    :func:`zoo.model_info` refuses it): an empty list would read as "this model has no weights" for a typo.
    """
    from zoo import hub

    if name is None:
        return hub.list_weights()
    model, weights = registry.split_weights_name(name)
    registry.family_of(model)
    published = hub.list_weights(model)
    if weights is None:
        return published
    if weights not in published:
        hub.get_entry(weights)  # its refusal: the close published names and where to list them
    return [weights]
