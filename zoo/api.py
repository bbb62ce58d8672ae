"""``zoo.train`` / ``zoo.evaluate``: one signature for the user, one loop per kind of model inside.

Dispatch, in order:

1. an ``nn.Module`` goes through the shared supervised engine (:func:`zoo.engine.fit`);
2. an object implementing :class:`Trainable` (the TD3 agent, the hyperspectral pipelines, ...) runs its
   own loop through ``zoo_train`` / ``zoo_evaluate``; this is the protocol a family implements when a
   batch-and-loss loop does not describe its training;
3. a plain scikit-learn estimator is ``fit`` on ``data=(X, y)`` and scored with ``score``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from zoo import registry

__all__ = ["Trainable", "evaluate", "train"]


@runtime_checkable
class Trainable(Protocol):
    """The protocol for models that bring their own training loop.

    ``zoo_train(data, **config)`` trains in place and returns a :class:`zoo.engine.TrainResult`
    (history as a list of per-epoch or per-evaluation dicts, best metric, checkpoint path, the model).
    ``zoo_evaluate(data, **config)`` returns ``{metric_name: float}``. ``data`` is whatever the family
    documents (a gymnasium env id for TD3, a ``Scene`` for hyperspectral pipelines, ...), and may be
    ``None`` when the config says everything (``env=...``).
    """

    def zoo_train(self, data: Any, **config: Any) -> Any: ...

    def zoo_evaluate(self, data: Any, **config: Any) -> dict[str, float]: ...


def _resolve(model_or_name: Any, model_config: dict[str, Any] | None) -> Any:
    if isinstance(model_or_name, str):
        return registry.build(model_or_name, **(model_config or {}))
    if model_config:
        raise TypeError("model_config is only used when the model is given by name")
    return model_or_name


def train(model_or_name: Any, data: Any = None, *, model_config: dict[str, Any] | None = None, **config: Any):
    """Train a model (or a registered name, built with ``model_config``) on ``data``.

    Returns a :class:`zoo.engine.TrainResult`. ``config`` goes to the loop of the model's kind:
    :func:`zoo.engine.fit` for networks, ``zoo_train`` for agents and pipelines.
    """
    from torch import nn

    model = _resolve(model_or_name, model_config)
    if isinstance(model, Trainable):
        return model.zoo_train(data, **config)
    if isinstance(model, nn.Module):
        from zoo.engine import fit

        if data is None:
            raise ValueError("zoo.train(network, data): data is required (a Dataset, DataLoader or folder)")
        return fit(model, data, **config)
    if hasattr(model, "fit"):
        from zoo.engine import TrainResult

        if not (isinstance(data, tuple) and len(data) == 2):
            raise TypeError(f"an estimator trains on data=(X, y); got {type(data).__name__}")
        model.fit(*data, **config)
        return TrainResult(history=[], best_metric=None, best_epoch=None, checkpoint_path=None, model=model)
    raise TypeError(
        f"zoo.train does not know how to train a {type(model).__name__}: expected an nn.Module, "
        "an object with zoo_train/zoo_evaluate (zoo.api.Trainable) or a scikit-learn estimator"
    )


def evaluate(model: Any, data: Any = None, **config: Any) -> dict[str, float]:
    """Score a model on ``data``; returns ``{metric: value}`` (accuracy, loss, return, BLEU, ...)."""
    from torch import nn

    if isinstance(model, Trainable):
        return model.zoo_evaluate(data, **config)
    if isinstance(model, nn.Module):
        from zoo.engine import evaluate as engine_evaluate

        return engine_evaluate(model, data, **config)
    if hasattr(model, "score"):
        if not (isinstance(data, tuple) and len(data) == 2):
            raise TypeError(f"an estimator is scored on data=(X, y); got {type(data).__name__}")
        return {"score": float(model.score(*data, **config))}
    raise TypeError(f"zoo.evaluate does not know how to score a {type(model).__name__}")
