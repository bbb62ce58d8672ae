"""zoo.config's value checks against a config field's annotation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import pytest

from zoo.config import check_value


def test_generic_annotations_it_does_not_check_accept_any_value():
    """On Python 3.10 ``isinstance(Sequence[str], type)`` is True, and ``isinstance(x, Sequence[str])``
    raised: every ``fit`` call failed there (``metrics: Sequence[str]``). Run on 3.10 to see it fail."""
    assert check_value("fit", "metrics", ("accuracy",), Sequence[str]) == ("accuracy",)
    assert check_value("fit", "loss_fn", None, Callable[[Any, Any], Any] | None) is None
    fn = len
    assert check_value("fit", "loss_fn", fn, Callable[[Any, Any], Any] | None) is fn


def test_what_it_checks_is_still_refused_with_the_key():
    with pytest.raises(TypeError, match=r"fit: epochs expects int, got 'x' \(str\)"):
        check_value("fit", "epochs", "x", int)
    with pytest.raises(ValueError, match=r"fit: amp must be one of 'auto' \| 'bf16', got 'fp8'"):
        check_value("fit", "amp", "fp8", Literal["auto", "bf16"])
    assert check_value("fit", "size", [3, 4], tuple[int, int]) == (3, 4)


def test_numpy_numbers_are_taken_as_pythons_in_every_family():
    """zoo.build("resnet18", num_classes=np.int64(10)) was "expects int" (len(np.unique(y)) is one), where
    scikit-learn and torch take it; the built config holds Python numbers, so it saves as plain JSON."""
    import json

    import numpy as np

    import zoo

    assert check_value("m", "k", np.int64(3), int) == 3 and type(check_value("m", "k", np.int64(3), int)) is int
    assert type(check_value("m", "k", np.float32(0.5), float)) is float
    assert check_value("m", "k", [np.int32(4), np.int64(5)], tuple[int, ...]) == (4, 5)
    with pytest.raises(TypeError, match="expects int"):
        check_value("m", "k", np.float64(3.0), int)
    with pytest.raises(TypeError, match="expects int"):
        check_value("m", "k", np.bool_(True), int)
    assert zoo.build("resnet18", num_classes=np.int64(7)).fc.out_features == 7
    net = zoo.build("hybridsn", num_classes=np.int64(5), n_bands=np.int32(16), window=9, dropout=np.float32(0.5))
    json.dumps(vars(net.config))
    assert zoo.build("hsi-pca-svm", n_components=np.int64(5)).get_params()["pca__n_components"] == 5
    assert zoo.build("td3", batch_size=np.int64(64), net_arch=(np.int64(32), np.int64(32))).config.net_arch == (32, 32)
