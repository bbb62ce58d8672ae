"""Fitted scikit-learn estimators as safetensors arrays + JSON (never pickle).

Arrays become tensors under ``<prefix>.<attribute>``; plain values (numbers, strings, tuples, None, arrays
of strings such as ``feature_names_in_`` or the ``classes_`` of string labels) go to a JSON document that is itself stored as a ``uint8`` tensor
(``__meta__``), so the whole state survives any tool that rewrites the file's safetensors metadata
(``zoo.hub.add_weights`` does). Restoring sets the attributes back on a fresh estimator; the scikit-learn
version is recorded and checked.
"""

from __future__ import annotations

import json
import numbers
from typing import Any

import numpy as np
import torch

__all__ = ["META_KEY", "estimator_state", "pack_json", "python_number", "restore_estimator", "unpack_json"]

META_KEY = "__meta__"


def pack_json(obj: Any) -> torch.Tensor:
    return torch.frombuffer(bytearray(json.dumps(obj, sort_keys=True).encode()), dtype=torch.uint8).clone()


def unpack_json(t: torch.Tensor) -> Any:
    return json.loads(bytes(t.to("cpu", torch.uint8).numpy().tobytes()).decode())


def estimator_state(est: Any, prefix: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(tensors, plain)`` of every attribute of a fitted estimator (params and fitted state)."""
    tensors: dict[str, torch.Tensor] = {}
    plain: dict[str, Any] = {}
    for name, value in vars(est).items():
        if isinstance(value, np.ndarray) and value.dtype == object and all(isinstance(v, str) for v in value.flat):
            # feature_names_in_ of an estimator fitted on a DataFrame (or behind set_output(transform="pandas"))
            plain[name] = {"strings": value.tolist()}
        elif isinstance(value, np.ndarray) and value.dtype.kind == "U" and value.ndim == 1:
            # classes_ of an estimator fitted on string labels (scikit-learn keeps NumPy's fixed-width unicode)
            plain[name] = {"unicode": value.tolist()}
        elif isinstance(value, (np.ndarray, np.generic)):
            arr = np.asarray(value)
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"{type(est).__name__}.{name}: cannot store dtype {arr.dtype} as a tensor")
            tensors[f"{prefix}.{name}"] = torch.from_numpy(np.array(arr, order="C", copy=True))  # keeps 0-d
        elif isinstance(value, tuple):
            plain[name] = {"tuple": [int(v) if isinstance(v, (np.integer,)) else v for v in value]}
        elif value is None or isinstance(value, (bool, int, float, str)):
            plain[name] = {"value": value}
        elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
            plain[name] = {"value": json.loads(json.dumps(value))}
        elif isinstance(value, dict) and all(isinstance(k, (numbers.Real, str)) for k in value):
            # SVC's class_weight={1: 2.0, ...}: class ids as keys, which a JSON object would turn into strings
            plain[name] = {"pairs": [[python_number(k), python_number(v)] for k, v in value.items()]}
        else:
            raise TypeError(f"{type(est).__name__}.{name} = {type(value).__name__}: not storable without pickle")
    return tensors, plain


def python_number(value: Any) -> Any:
    """A NumPy scalar as the Python number JSON writes (a class id read from a label map is ``np.int64``)."""
    return value.item() if isinstance(value, np.generic) else value


def restore_estimator(cls: type, tensors: dict[str, torch.Tensor], plain: dict[str, Any], prefix: str) -> Any:
    """The estimator whose :func:`estimator_state` ``(tensors, plain)`` hold, its constructor parameters as this
    scikit-learn takes them (:func:`_this_releases_params`)."""
    est = cls.__new__(cls)
    for name, box in plain.items():
        if "strings" in box:
            setattr(est, name, np.asarray(box["strings"], dtype=object))
        elif "unicode" in box:
            setattr(est, name, np.asarray(box["unicode"], dtype=str))
        else:
            setattr(est, name, tuple(box["tuple"]) if "tuple" in box else
                    {k: v for k, v in box["pairs"]} if "pairs" in box else box["value"])
    head = prefix + "."
    for key, t in tensors.items():
        if key.startswith(head):
            arr = t.cpu().numpy()
            setattr(est, key[len(head):], arr[()] if arr.ndim == 0 else arr)
    _this_releases_params(est)
    return est


def _this_releases_params(est: Any) -> None:
    """A constructor parameter the file lacks (added in this scikit-learn) or holds as a newer release's
    ``"deprecated"`` placeholder (SVC's ``probability`` in 1.9) gets this release's default: weights written
    with 1.9 loaded into 1.7 (Python 3.10's newest) would keep ``probability='deprecated'``, and cloning or
    refitting them would fail scikit-learn's parameter check; a missing one would fail ``get_params``."""
    import inspect

    names = getattr(type(est), "_get_param_names", None)
    if names is None:
        return
    signature = inspect.signature(type(est).__init__).parameters
    for name in names():
        value = getattr(est, name, inspect.Parameter.empty)
        default = signature[name].default if name in signature else inspect.Parameter.empty
        placeholder = isinstance(value, str) and value == "deprecated" and not (
            isinstance(default, str) and default == "deprecated")
        if (value is inspect.Parameter.empty or placeholder) and default is not inspect.Parameter.empty:
            setattr(est, name, default)
