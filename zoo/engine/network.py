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
"""

from __future__ import annotations

from typing import Any

__all__ = ["Network"]


class Network:
    """Mixin for ``nn.Module`` networks of a family (see the module docs)."""

    def zoo_recipe(self, *, train: bool) -> dict[str, Any]:
        return {}

    def zoo_data(self, data: Any, *, train: bool, **options: Any) -> tuple[Any, dict[str, Any]]:
        return data, options

    def zoo_train(self, data: Any, **config: Any):
        """``zoo.train(network, data, **config)``: :func:`zoo.engine.fit` on the family's data and recipe."""
        from zoo.engine.fit import fit

        if data is None:
            raise ValueError(f"zoo.train({type(self).__name__}, data): data is required")
        data, options = self.zoo_data(data, train=True, **config)
        return fit(self, data, **{**self.zoo_recipe(train=True), **options})

    def zoo_evaluate(self, data: Any, **config: Any) -> dict[str, float]:
        """``zoo.evaluate(network, data, **config)``: :func:`zoo.engine.evaluate` on the same data forms."""
        from zoo.engine.evaluation import evaluate

        if data is None:
            raise ValueError(f"zoo.evaluate({type(self).__name__}, data): data is required")
        data, options = self.zoo_data(data, train=False, **config)
        return evaluate(self, data, **{**self.zoo_recipe(train=False), **options})
