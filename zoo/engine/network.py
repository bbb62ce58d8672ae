"""``Network``: what a family's ``nn.Module`` mixes in so that ``zoo.train`` / ``zoo.evaluate`` run it
through the shared engine with no hidden recipe.

A family overrides two hooks:

* ``zoo_data(data, train=..., **options) -> (data, loop_options)``: turns the data forms its users pass
  (an image folder, a parallel corpus, a video folder, ...) into a Dataset or DataLoader, takes its own
  data options (``direction=``, ``splits=``, ...) out of ``options`` and returns the rest for the loop,
  with what the data brings (``val_data``, an ``eval_fn`` that scores BLEU, ...). A Dataset or DataLoader
  passes through unchanged.
* ``zoo_recipe(train=...) -> dict``: the loop settings the network needs to learn at all (its loss via
  ``forward_fn`` / ``label_smoothing``, its metrics), under the user's options.

Precedence: the recipe, then what the data brings, then what the user passed.

What a run trains on must be what it resumes on. The data options ``zoo_data`` consumes never reach ``fit``,
so while training it hands them on with :func:`zoo.engine.resume.with_recipe` (the recipe it applied, a
cheap fingerprint of the data source); ``zoo_train`` adds the network's architecture config
(``zoo_architecture``). The checkpoints record both and a resume refuses a change (:mod:`zoo.engine.resume`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["Network", "refuse_unknown_train_options"]


class Network:
    """Mixin for ``nn.Module`` networks of a family (see the module docs)."""

    def zoo_recipe(self, *, train: bool) -> dict[str, Any]:
        return {}

    def zoo_data(self, data: Any, *, train: bool, **options: Any) -> tuple[Any, dict[str, Any]]:
        return data, options

    def zoo_data_options(self) -> list[str]:
        """The options ``zoo_data`` takes by name (``image_size``, ``splits``, ...): with the loop's, what an
        unknown option's error lists. A family whose ``zoo_data`` hands them on as ``**options`` overrides
        this to name them."""
        import inspect

        params = inspect.signature(self.zoo_data).parameters.values()
        return [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name != "train"]

    def zoo_architecture(self) -> dict[str, Any]:
        """The settings that define the network (its config dataclass): recorded by every checkpoint of a
        ``zoo.train`` run as ``model.<key>``, so that a resume with another dropout or stem is refused."""
        config = getattr(self, "config", None)
        if dataclasses.is_dataclass(config) and not isinstance(config, type):
            return dataclasses.asdict(config)
        return {}

    def zoo_recorded_in_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Recipe keys (``data.*``) a checkpoint's model ``state`` implies, compared on resume where the
        checkpoint did not record them (it was written before recipes were); default: none."""
        return {}

    def zoo_train(self, data: Any, **config: Any):
        """``zoo.train(network, data, **config)``: :func:`zoo.engine.fit` on the family's data and recipe."""
        from zoo.engine.data import with_val
        from zoo.engine.fit import fit
        from zoo.engine.resume import with_recipe

        if data is None:
            raise ValueError(f"zoo.train({type(self).__name__}, data): data is required")
        refuse_unknown_train_options(self, config)  # before the data hook, which may write into the model
        # training and validation sets given together ({"train": ..., "val": ...}, (train, val)) go through
        # the family's data hook apart, the second as val_data
        data, val = with_val(data, config.pop("val_data", None))
        data, options = self.zoo_data(data, train=True, **config, **({} if val is None else {"val_data": val}))
        options = with_recipe(options, model=self.zoo_architecture(), name=getattr(self, "registry_name", None))
        return fit(self, data, **{**self.zoo_recipe(train=True), **options})

    def zoo_evaluate(self, data: Any, **config: Any) -> dict[str, float]:
        """``zoo.evaluate(network, data, **config)``: :func:`zoo.engine.evaluate` on the same data forms."""
        from zoo.engine.evaluation import evaluate
        from zoo.engine.options import refuse_unknown_options

        if data is None:
            raise ValueError(f"zoo.evaluate({type(self).__name__}, data): data is required")
        data, options = self.zoo_data(data, train=False, **config)
        refuse_unknown_options(options, f"zoo.evaluate on {getattr(self, 'registry_name', None) or type(self).__name__}",
                               evaluate, skip=2, also=self.zoo_data_options())
        return evaluate(self, data, **{**self.zoo_recipe(train=False), **options})


def train_options(model: Any) -> set[str] | None:
    """Every option ``zoo.train`` takes for ``model`` where its ``zoo_train`` ends in :func:`zoo.engine.fit` (a
    :class:`Network`, or a class naming ``FitConfig`` as where its ``zoo_train`` options go in ``zoo_options_of``):
    its ``zoo_train``'s own, its data hook's and the engine's. None for any other model: its ``zoo_train`` refuses
    what it does not take itself, before any work."""
    import inspect

    from zoo.engine.fit import fit
    from zoo.engine.options import FitConfig

    target = getattr(type(model), "zoo_options_of", {}).get("zoo_train")
    engine_target = f"{FitConfig.__module__}.{FitConfig.__qualname__}"
    if not (isinstance(model, Network) or target == engine_target):
        return None
    if target not in (None, engine_target):  # its options go somewhere else as well: that one decides
        return None
    own = list(inspect.signature(model.zoo_train).parameters.values())[1:]  # after the data
    taken = {p.name for p in own if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    taken |= {f.name for f in dataclasses.fields(FitConfig)}
    taken |= {p.name for p in list(inspect.signature(fit).parameters.values())[2:] if p.kind is not p.VAR_KEYWORD}
    if isinstance(model, Network):
        taken |= {*model.zoo_data_options(), "val_data"}
    return taken


def refuse_unknown_train_options(model: Any, config: dict[str, Any]) -> None:
    """An option no part of an engine-trained model's training takes (:func:`train_options`), refused in
    ``zoo.train``'s words (``zoo.train on NAME: unknown option(s) ...``) as its ``zoo_train`` starts: the engine's
    own refusal came only once the data hook had read the data into the model (a typo's
    ``net.zoo_train(other_folder, epohcs=3)`` left a ResNet18 naming its classes after ``other_folder``, a seq2seq
    model holding a tokenizer trained on the corpus, a HybridSN with its PCA refitted and its training pixels
    replaced), and in HybridSN's case in fit's words (``fit: unknown option(s) ...``). :meth:`Network.zoo_train`
    calls it; a family whose ``zoo_train`` is its own and ends in ``fit`` (HybridSN's) calls it first."""
    taken = train_options(model)
    if taken is None:
        return
    unknown = [k for k in config if k not in taken]
    if unknown:
        from zoo.engine.options import check_options

        name = getattr(model, "registry_name", None) or type(model).__name__
        # "config" is the engine's record of a family's recipe: taken, but no option a user sets
        check_options(unknown, f"zoo.train on {name}", taken - {"config"})
