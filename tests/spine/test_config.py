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
