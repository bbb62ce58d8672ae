"""What ``zoo.export`` ships for the hyperspectral models.

``hybridsn``: the network *with its preprocessing folded into the graph*, so a deployment feeds raw
sensor values. Input: raw-band windows ``(B, window, window, C_raw)`` float32, channels last, i.e. a
slice ``cube[r - k : r + k + 1, c - k : c + k + 1]`` of an ``(H, W, C_raw)`` scene (the layout every
reader in this family returns); output: logits ``(B, num_classes)`` for the centre pixel (class = argmax + 1).
The graph standardises each band, projects onto the whitened PCA components (one matmul) and runs the
network; with ``spectral_norm="l2"`` it first divides each pixel by its L2 norm (an all-zero pixel, then
the ``pad_pixel``, reduces to zero). A pixel without data (any band NaN or infinite) reduces to zero, as in
``zoo.predict``, so it does not turn the windows around it into NaN; ``zoo.predict`` labels such a pixel
itself 0 (no data), which the caller does for the centre pixels it knows are empty (a scene's no-data
value: set those pixels to NaN first). Borders: zoo pads the *reduced* cube with the model's ``padding``
mode, stored with the export as ``padding``. For ``"constant"`` (zeros) the raw pixel that reduces to
exactly zero is stored too, as ``pad_pixel`` (``mean + scale * pca_mean``): padding the raw cube with it
reproduces ``predict_scene`` at the borders. The other modes (``"reflect"``, ``"symmetric"``, ``"edge"``,
numpy's ``np.pad`` modes) copy pixels, which the per-pixel preprocessing maps alike, so the raw cube is
padded with that mode itself. A network without fitted preprocessing (trained on ready windows) is
exported as it is, on ``(B, n_bands, window, window)`` PCA windows, with a warning. Tolerance:
``atol = rtol = 1e-4`` on the logits. The batch axis is dynamic.

``hsi-pca-svm``: the scikit-learn pipeline through skl2onnx (ONNX only: it has no PyTorch graph).
:class:`BandStandardizer` and :class:`HyperspectralPCA` are handed over as the scikit-learn
``StandardScaler`` and ``PCA`` they are equivalent to (same fitted arrays), with the fitted ``SVC``.
Input: pixels ``(B, C_raw)`` float32; outputs ``label`` ``(B,)`` int64 (the scene's class ids) and
``scores``: ``decision_function``, ``(B, n_classes)`` one-vs-rest, or for two classes ``(B,)`` as
scikit-learn gives it (positive: the second class). A pixel with a NaN or infinite band (no data) is labelled
0, as in ``zoo.predict``'s map (its scores are NaN), or -1 for a pipeline fitted on 0-based labels, where 0 is a
class (the metadata's ``no_data_label`` says which). Tolerance: labels equal, scores within
``atol = 1e-3``, ``rtol = 1e-4`` (ONNX Runtime evaluates the SVM in float32, scikit-learn in float64).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from torch import nn

from zoo._stacklevel import user_stacklevel
from zoo.exporting import (
    ExportError,
    ExportSpec,
    Graph,
    check_int,
    dtype_name,
    floating_dtype,
    head_outputs,
    register_exporter,
)
from zoo.hyperspectral.hybridsn import HybridSN
from zoo.hyperspectral.pca import HyperspectralPCA
from zoo.hyperspectral.preprocessing import BandStandardizer
from zoo.hyperspectral.svm import HSIPipeline, integral_classes

__all__ = ["RawWindowClassifier", "export_hybridsn", "export_pca_svm"]


class RawWindowClassifier(nn.Module):
    """``windows (B, w, w, C_raw)`` raw bands -> logits: standardise + whitened PCA as one affine map, then
    the network on ``(B, k, w, w)``. The windows and their reduction are float32 (float64 for a ``.double()``
    network) whatever the network's dtype, and the network runs in its own: raw sensor values over 4096 are
    rounded to steps of 4 in float16 and 32 in bfloat16, which ``model.reduce`` (float64) never sees, so a
    graph that took them in its float16/bfloat16 labelled 1.7 % / 4.5 % of a crop of Indian Pines otherwise
    than ``zoo.predict`` of the same model."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net
        self.unit_spectra = net.unit_spectra
        self.dtype = floating_dtype(net)
        compute = torch.promote_types(torch.float32, self.dtype)  # float32, or float64 for a .double() net
        # ((x - m) / s - pm) @ P.T * ps  ==  (x - m) @ W + b: folded in float64, applied in float32; the
        # centring stays a subtraction (raw values are large, so folding it into b would lose digits)
        m, s, pm, P, ps = (net.pre_mean.double(), net.pre_scale.double(), net.pca_mean.double(),
                           net.pca_components.double(), net.pca_scale.double())
        self.register_buffer("center", m.to(compute).clone())
        self.register_buffer("weight", ((P / s).T * ps).to(compute))  # (C_raw, k)
        self.register_buffer("bias", (-(pm @ P.T) * ps).to(compute))  # (k,)

    def forward(self, windows: torch.Tensor) -> torch.Tensor:
        if windows.dtype != self.center.dtype:  # a caller's float16 windows: the reduction is float32 still
            windows = windows.to(self.center.dtype)
        # a pixel without data (NaN/inf in any band) reduces to zero, as SceneClassifierMixin.reduce maps it;
        # it is replaced before the matmul, where one NaN would spread over the whole pixel
        ok = torch.isfinite(windows).all(dim=-1, keepdim=True)  # (B, w, w, 1)
        windows = torch.where(ok, windows, torch.zeros_like(windows))
        if self.unit_spectra:  # spectral_norm="l2": unit spectra; an all-zero pixel reduces to zero (padding)
            norm = torch.linalg.vector_norm(windows, dim=-1, keepdim=True)  # (B, w, w, 1)
            z = (windows / norm.clamp_min(1e-30) - self.center) @ self.weight + self.bias
            ok = ok & (norm > 0)
        else:
            z = (windows - self.center) @ self.weight + self.bias  # (B, w, w, k)
        z = torch.where(ok, z, torch.zeros_like(z))
        if z.dtype != self.dtype:  # the float32 reduction into a float16/bfloat16 network
            z = z.to(self.dtype)
        return self.net(z.permute(0, 3, 1, 2))  # (B, k, w, w) -> (B, num_classes)


def pad_pixel(net: HybridSN) -> np.ndarray:
    """The raw pixel that the stored preprocessing maps to all zeros (the reduced cube's padding); with
    ``spectral_norm="l2"`` that is the all-zero pixel."""
    if net.unit_spectra:
        return np.zeros(net.pre_mean.numel())
    return (net.pre_mean.double() + net.pre_scale.double() * net.pca_mean.double()).cpu().numpy()


@register_exporter(HybridSN)
def export_hybridsn(model: HybridSN, batch: int = 2) -> ExportSpec:
    """HybridSN on raw-band windows ``(B, w, w, C_raw)`` (preprocessing in the graph), dynamic batch;
    checked on batch sizes 1 and ``batch + 3`` too, the latter with a pixel without data (NaN)."""
    batch = check_int("batch", batch)
    c = model.config
    gen = torch.Generator().manual_seed(0)
    dtype = floating_dtype(model)
    if model.has_preprocessor:
        module: nn.Module = RawWindowClassifier(model)
        mean, scale = model.pre_mean, model.pre_scale
        raw = torch.promote_types(torch.float32, dtype)  # RawWindowClassifier's input: raw bands never rounded

        def sample(n: int) -> torch.Tensor:  # in-distribution raw windows: per-band mean + scale * noise
            x = mean + scale * torch.randn(n, c.window, c.window, mean.numel(), generator=gen)
            if model.unit_spectra:  # mean/scale are of unit spectra: give the pixels brightness again
                x = x * torch.empty(n, c.window, c.window, 1).uniform_(100.0, 5000.0, generator=gen)
            return x.to(raw)

        with_gap = sample(batch + 3)
        with_gap[0, 0, 0, 0] = float("nan")  # a no-data pixel in a window's corner: it must not spread
        name, layout = "windows", (f"(B, {c.window}, {c.window}, {mean.numel()}) {dtype_name(raw)} raw bands, "
                                   "channels last" + (f" (the network computes in {dtype_name(dtype)} after the "
                                                      f"reduction)" if raw != dtype else ""))
        extra: dict[str, Any] = {"padding": model.padding, "no_data": "a pixel with a NaN/inf band reduces to "
                                 "zero, as in zoo.predict, which labels such a pixel 0 itself"}
        if model.padding == "constant":
            extra["pad_pixel"] = pad_pixel(model).tolist()
        checks = [(sample(1),), (with_gap,)]
    else:
        warnings.warn("this HybridSN has no fitted preprocessing (it was not trained on a scene): exporting the "
                      "bare network on PCA windows (B, n_bands, window, window)",
                      stacklevel=user_stacklevel())
        module = model

        def sample(n: int) -> torch.Tensor:
            return torch.randn(n, c.n_bands, c.window, c.window, generator=gen).to(dtype)

        name, layout = "pca_windows", f"(B, {c.n_bands}, {c.window}, {c.window}) {dtype_name(dtype)}"
        extra = {"padding": model.padding}
        checks = [(sample(1),), (sample(batch + 3),)]
    graph = Graph("classifier", module, (sample(batch),), (name,), ("logits",), {0: {0: "batch"}}, checks=checks,
                  reference=_reference(model) if model.has_preprocessor else None)
    # the head's outputs, not the config's num_classes: a classifier[-1] replaced by hand leaves the config behind
    outputs = head_outputs(model) or c.num_classes
    meta = {"model": "hybridsn", name: layout, "logits": f"(B, {outputs}); class id = argmax + 1", **extra}
    return ExportSpec([graph], atol=1e-4, rtol=1e-4, metadata=meta)


def _reference(model: HybridSN):
    """The eager path the graph must match: ``model.reduce`` (float64, no-data pixels to zero) per pixel,
    then the network on the reduced windows, in its floating dtype."""
    dtype = floating_dtype(model)

    def run(windows: torch.Tensor) -> torch.Tensor:
        b, w, _, c_raw = windows.shape
        reduced = model.reduce(windows.reshape(b * w, w, c_raw).numpy())  # (B*w, w, k): any (H, W, C) cube
        with torch.no_grad():
            return model(torch.from_numpy(reduced).to(dtype).reshape(b, w, w, -1).permute(0, 3, 1, 2).contiguous())

    return run


def _as_sklearn(pipe: HSIPipeline):
    """The same pipeline with scikit-learn's own StandardScaler and PCA (which skl2onnx converts)."""
    from sklearn.decomposition import PCA
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    steps = []
    for name, est in pipe.steps:
        if isinstance(est, BandStandardizer):
            new = StandardScaler(with_std=est.with_std)
            new.mean_, new.scale_, new.var_ = est.mean_, est.scale_, est.scale_ ** 2
            new.n_features_in_, new.n_samples_seen_ = est.n_features_in_, 1
        elif isinstance(est, HyperspectralPCA):
            new = PCA(n_components=est.n_components_, whiten=est.whiten)
            new.mean_, new.components_ = est.mean_, est.components_
            new.explained_variance_ = np.maximum(est.explained_variance_, 1e-12)  # the same floor as _project
            new.n_components_, new.n_features_in_ = est.n_components_, est.n_features_in_
        elif isinstance(est, SVC):
            new = est
        else:
            raise ExportError(f"hsi-pca-svm step {name!r} is a {type(est).__name__}; the ONNX export knows "
                              "BandStandardizer, HyperspectralPCA and SVC")
        steps.append((name, new))
    return Pipeline(steps)


def _missing_label(classes: list[int]) -> int:
    """The label the graph gives a pixel without data: 0, as ``zoo.predict``'s map, unless 0 is a class (a
    pipeline fitted on 0-based labels), where it would read as that class: -1 then."""
    return -1 if 0 in classes else 0


def _to_onnx(pipe: HSIPipeline, n_bands: int, missing: int):
    try:
        from skl2onnx import to_onnx
        from skl2onnx.common.data_types import FloatTensorType
    except ImportError as err:
        raise ImportError("exporting hsi-pca-svm needs skl2onnx: pip install skl2onnx (or 'zoo[export]')") from err
    svm = pipe.steps[-1][1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # skl2onnx reads SVC's deprecated probA_/probB_
            proto = to_onnx(_as_sklearn(pipe), initial_types=[("pixels", FloatTensorType([None, n_bands]))],
                            target_opset={"": 18, "ai.onnx.ml": 3}, options={id(svm): {"zipmap": False}})
    except ExportError:
        raise
    except Exception as err:
        raise ExportError(f"skl2onnx cannot convert this pipeline: {type(err).__name__}: {err}") from err
    binary = len(svm.classes_) == 2
    # two classes: skl2onnx gives (B, 2) = [d, -d] where scikit-learn's decision_function gives d, (B,)
    scores = "scores_both" if binary else "scores"
    renames = {proto.graph.output[0].name: "label_svm", proto.graph.output[1].name: scores}
    for node in proto.graph.node:
        node.output[:] = [renames.get(o, o) for o in node.output]
    for out in proto.graph.output:
        out.name = renames[out.name]
    _no_data_label(proto, "label_svm", "label", missing)
    if binary:
        _first_column(proto, scores, "scores")
    return proto


def _no_data_label(proto, source: str, name: str, missing: int) -> None:
    """Output ``name``: graph output ``source`` (the SVM's label), ``missing`` where a pixel has a NaN or infinite
    band (:func:`_missing_label`; the SVM alone would give such a pixel a class, from NaN scores)."""
    from onnx import TensorProto, helper, numpy_helper

    proto.graph.initializer.extend([numpy_helper.from_array(np.array([1], np.int64), "no_data_axes"),
                                    numpy_helper.from_array(np.array(missing, np.int64), "no_data_label")])
    proto.graph.node.extend([
        helper.make_node("IsNaN", ["pixels"], ["pixel_nan"], name="no_data_nan"),
        helper.make_node("IsInf", ["pixels"], ["pixel_inf"], name="no_data_inf"),
        helper.make_node("Or", ["pixel_nan", "pixel_inf"], ["pixel_bad"], name="no_data_or"),
        helper.make_node("Cast", ["pixel_bad"], ["pixel_bad_f"], to=TensorProto.FLOAT, name="no_data_cast"),
        helper.make_node("ReduceMax", ["pixel_bad_f", "no_data_axes"], ["pixel_any_f"], keepdims=0,
                         name="no_data_any"),
        helper.make_node("Cast", ["pixel_any_f"], ["pixel_no_data"], to=TensorProto.BOOL, name="no_data_bool"),
        helper.make_node("Where", ["pixel_no_data", "no_data_label", source], [name], name="no_data_where"),
    ])
    out = next(o for o in proto.graph.output if o.name == source)
    out.CopyFrom(helper.make_tensor_value_info(name, TensorProto.INT64, [None]))


def _first_column(proto, source: str, name: str) -> None:
    """Make graph output ``source`` ``(B, 2)`` an output ``name`` ``(B,)`` of its first column."""
    from onnx import TensorProto, helper, numpy_helper

    proto.graph.initializer.append(numpy_helper.from_array(np.array(0, np.int64), f"{name}_column"))
    proto.graph.node.append(helper.make_node("Gather", [source, f"{name}_column"], [name], axis=1,
                                             name=f"{name}_gather"))
    out = next(o for o in proto.graph.output if o.name == source)
    out.CopyFrom(helper.make_tensor_value_info(name, TensorProto.FLOAT, [None]))


@register_exporter(HSIPipeline)
def export_pca_svm(pipe: HSIPipeline, batch: int = 64) -> ExportSpec:
    """The fitted pipeline as one ONNX graph (skl2onnx), pixels ``(B, C_raw)`` in; checked on ``batch``,
    1 and ``3 * batch`` pixels drawn around the fitted band means."""
    batch = check_int("batch", batch)
    scaler = pipe.steps[0][1]
    if not hasattr(scaler, "mean_"):
        raise ExportError("hsi-pca-svm is not fitted: train it first (zoo.train) or build it with weights")
    n_bands = int(scaler.n_features_in_)
    fitted = np.asarray(pipe.classes_and_names())
    if not integral_classes(fitted):
        raise ExportError(f"hsi-pca-svm was fitted on labels {fitted.tolist()[:5]}: the ONNX graph gives int64 class "
                          f"ids, so fit it on ids 1..K (LabelEncoder().fit_transform(y) + 1)")
    classes = [int(c) for c in fitted]
    missing = _missing_label(classes)
    rng = np.random.default_rng(0)

    def sample(n: int) -> np.ndarray:
        return (scaler.mean_ + scaler.scale_ * rng.standard_normal((n, n_bands))).astype(np.float32)

    graph = Graph("pipeline", None, (sample(batch),), ("pixels",), ("label", "scores"),
                  checks=[(sample(1),), (sample(3 * batch),)], onnx_model=_to_onnx(pipe, n_bands, missing),
                  reference=lambda X: (pipe.predict(X), pipe.decision_function(X)))
    no_data = f"{missing} for a pixel with a NaN/inf band (no data)" + (
        ", not 0 as in zoo.predict's map: 0 is a class of this pipeline (fitted on 0-based labels)" if missing else "")
    meta = {"model": "hsi-pca-svm", "pixels": f"(B, {n_bands}) float32 raw bands",
            "label": f"(B,) int64 class id; {no_data}", "no_data_label": missing, "classes": classes,
            "scores": f"(B,) SVC decision_function: > 0 for class {classes[1]}, < 0 for class {classes[0]}"
            if len(classes) == 2 else f"(B, {len(classes)}) SVC decision_function (one-vs-rest)"}
    reason = ("hsi-pca-svm is a scikit-learn pipeline (standardise, PCA, SVC), not a PyTorch network: it has "
              "no torch graph to export; use format='onnx' (skl2onnx)")
    return ExportSpec([graph], atol=1e-3, rtol=1e-4, metadata=meta,
                      unsupported={"torch.export": reason, "torchscript": reason})
