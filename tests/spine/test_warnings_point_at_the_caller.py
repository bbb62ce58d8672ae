"""A warning names the user's line that led to it, whatever path reached the code that warns: through
``zoo.*`` or the family's own method, a ``torch.no_grad`` decorator, the engine. Hand-counted stacklevels
pointed ``zoo.predict``'s undecodable-image warning at ``torch/utils/_contextlib.py``."""

from __future__ import annotations

import warnings

import numpy as np
import torch

import zoo


def _caught(call, match: str) -> warnings.WarningMessage:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    mine = [w for w in seen if match in str(w.message)]
    assert mine, f"no warning matching {match!r}: {[str(w.message) for w in seen]}"
    return mine[0]


def test_predict_on_an_undecodable_image_points_at_the_call(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg")
    model = zoo.build("resnet18", num_classes=3)
    for call in (lambda: zoo.predict(model, [bad]), lambda: zoo.predict(model, [str(bad)], topk=2)):
        w = _caught(call, "cannot decode")
        assert w.filename == __file__, w.filename


def test_td3_warnings_point_at_the_call_through_either_api():
    agent = zoo.build("td3", net_arch=(8, 8), learning_starts=100, buffer_size=500)
    w = _caught(lambda: zoo.train(agent, "Pendulum-v1", total_steps=10, eval_every=0, progress=False),
                "does not pass learning_starts")
    assert w.filename == __file__, w.filename
    agent = zoo.build("td3", env="Pendulum-v1", net_arch=(8, 8), learning_starts=100, buffer_size=500)
    w = _caught(lambda: agent.learn(10), "does not pass learning_starts")
    assert w.filename == __file__, w.filename  # SB3's name: one more zoo frame on the way


def test_engine_and_hyperspectral_warnings_point_at_the_call():
    from zoo.engine import fit
    from zoo.hyperspectral import HyperspectralPCA

    x = torch.randn(16, 4)
    w = _caught(lambda: fit(torch.nn.Linear(4, 2), (x, (x[:, 0] > 0).long()), epochs=1, batch_size=8,
                            overfit_batches=5, progress=False), "overfit_batches=5")
    assert w.filename == __file__, w.filename
    cube = np.random.default_rng(0).normal(size=(50, 6))
    w = _caught(lambda: HyperspectralPCA(n_components=10).fit(cube), "keeping all 6 components")
    assert w.filename == __file__, w.filename
    # fit_transform and transform reach zoo through scikit-learn's set_output wrapper (sklearn/utils/_set_output.py)
    w = _caught(lambda: HyperspectralPCA(n_components=10).fit_transform(cube), "keeping all 6 components")
    assert w.filename == __file__, w.filename


def test_outside_any_caller_the_level_stays_inside_the_stack():
    from zoo._stacklevel import user_stacklevel

    def warns():
        warnings.warn("here", stacklevel=user_stacklevel())

    w = _caught(warns, "here")  # a function outside zoo: its own line
    assert w.filename == __file__ and w.lineno == warns.__code__.co_firstlineno + 1

