"""The optimizer ``fit`` builds: named or given, with parameter groups, weight decay on matrices only.

As nanoGPT's ``configure_optimizers``: weight decay shrinks weight matrices and convolution kernels;
biases, LayerNorm/BatchNorm scales and other 1-D parameters get none (decaying a norm's scale towards 0
fights the normalisation, and biases carry no capacity to regularise).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from zoo._stacklevel import user_stacklevel
from zoo.inputs import did_you_mean

__all__ = ["FUSED_ON_CPU", "OPTIMIZERS", "OWN_LR", "build_optimizer", "decay_groups", "fused_default"]

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "adamw": torch.optim.AdamW,
    "adam": torch.optim.Adam,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}

FUSED_ON_CPU = frozenset({"adamw", "adam", "sgd"})
"""Optimizers that ``fit`` builds by name with ``fused=True`` when the model is on the CPU. There torch's
default is its per-tensor loop (``foreach`` is the default on CUDA only): for AdamW about ten passes over
every parameter tensor a step, where the fused kernel makes one. Measured on the avx512 Xeon (2 threads,
one step over random gradients; benchmarks/optimizer_step.py): AdamW 37.6 vs 8.4 ms for ResNet18's 11.7M
parameters (4.5x), 83.9 vs 20.6 ms for R(2+1)D's 31.4M (4.1x), 11.1 vs 3.2 ms for HybridSN (3.4x), 16.0 vs
5.7 ms for the Transformer (2.8x); SGD with momentum 1.9-2.3x; ``foreach`` gains at most 1.11x over the loop there.
Whole training steps gain what the optimizer took of them: ResNet18 at batch 16 1.07x, HybridSN at batch 32
1.04x. With torch's kernels capped at AVX2 on the same Xeon (as on an AVX2-only EPYC): AdamW 3.0-4.9x, SGD
2.0-3.1x a step. On an AVX2-only AMD EPYC (Zen 3): AdamW 3.1-6.3x, SGD 2.0-2.5x a step, but whole training
steps gain little there: timed inside a fit, torch's step is 4.4-4.7 % of it (its fp32 convolutions are slow), so
the fused step can make the fit at most 1.03-1.04x faster, and three runs measured 0.91-1.04x; the AMX Xeon and
the AVX-512 EPYCs are not measured. RMSprop has no fused kernel; on CUDA
torch's own choice stands (not measured here)."""


def decay_groups(groups: list[dict[str, Any]], weight_decay: float) -> list[dict[str, Any]]:
    """Each group split into its >= 2-D parameters (``weight_decay``) and the rest (none). A group that sets
    its own ``weight_decay`` keeps it for all its parameters; empty halves are dropped."""
    if not weight_decay:
        return groups
    out = []
    for g in groups:
        if "weight_decay" in g:
            out.append(g)
            continue
        decay = [p for p in g["params"] if p.dim() >= 2]
        flat = [p for p in g["params"] if p.dim() < 2]
        out += [{**g, "params": ps, "weight_decay": wd} for ps, wd in ((decay, weight_decay), (flat, 0.0)) if ps]
    return out


OWN_LR = "zoo_own_lr"
"""Marks an optimizer group that set its own ``lr`` (kept in checkpoints with the group): fit's ``lr``, changed on
resume, does not rescale it (:func:`zoo.engine.resume.scale_lr`), as a fresh run would not give it fit's."""


def _user_groups(param_groups: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    groups = []
    for i, g in enumerate(param_groups):
        if not isinstance(g, dict) or "params" not in g:
            raise TypeError(f"param_groups[{i}] must be a dict with a 'params' key (torch optimizer group), got "
                            f"{type(g).__name__}")
        if "lr" in g and "lr_scale" in g:
            raise ValueError(f"param_groups[{i}] gives both lr={g['lr']!r} and lr_scale={g['lr_scale']!r}: give lr for a "
                             "learning rate of its own, or lr_scale for a fraction of fit's lr")
        params = g["params"]
        groups.append({**g, "params": list(params.parameters()) if isinstance(params, nn.Module) else list(params),
                       **({OWN_LR: True} if "lr" in g else {})})
    return groups


def _scaled_lr(groups: list[dict[str, Any]], lr: float) -> list[dict[str, Any]]:
    """A group's ``lr_scale`` (timm's name) runs it at that fraction of fit's ``lr``: a resume with another lr rescales
    it as it does fit's own groups, where a group's own ``lr`` is kept (a fine-tune's backbone at a tenth of its head's
    lr, written as an lr of its own, refused the changed lr its user gave)."""
    return [{**g, "lr": lr * float(g["lr_scale"])} if "lr_scale" in g else g for g in groups]


def build_optimizer(optimizer: Any, model: nn.Module, param_groups: Sequence[dict[str, Any]] | None, lr: float,
                    weight_decay: float, options: dict[str, Any] | None) -> torch.optim.Optimizer:
    """A ready optimizer passes (its parameters must be ``model``'s); a name or a factory builds one."""
    if isinstance(optimizer, torch.optim.Optimizer):
        if param_groups is not None:
            raise ValueError("param_groups is for optimizers fit builds; a ready optimizer has its own groups")
        owned = {id(p) for p in model.parameters()}
        if any(id(p) not in owned for g in optimizer.param_groups for p in g["params"]):
            raise ValueError("the optimizer holds parameters that are not the model's (built on another copy?)")
        _say_what_a_ready_optimizer_ignores(optimizer, lr, weight_decay, options)
        return optimizer
    _refuse_fit_settings_in(options)
    groups = _user_groups(param_groups) if param_groups is not None else [{"params": list(model.parameters())}]
    groups = decay_groups(_scaled_lr(groups, lr), weight_decay)
    kwargs = {"lr": lr, "weight_decay": weight_decay, **(options or {})}
    if callable(optimizer) and not isinstance(optimizer, str):
        return optimizer(groups, **kwargs)
    if not isinstance(optimizer, str) or optimizer.lower() not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; expected one of {sorted(OPTIMIZERS)}, a torch Optimizer "
                         "or a callable(param_groups, lr=..., weight_decay=...)")
    name = optimizer.lower()
    _check_options(OPTIMIZERS[name], name, options)
    if fused_default(name, model, kwargs):
        try:
            return OPTIMIZERS[name](groups, **kwargs, fused=True)
        except RuntimeError:  # a torch without this fused CPU kernel refuses it here, before any step
            pass
    return OPTIMIZERS[name](groups, **kwargs)


def _say_what_a_ready_optimizer_ignores(optimizer: torch.optim.Optimizer, lr: float, weight_decay: float,
                                        options: dict[str, Any] | None) -> None:
    """A ready optimizer keeps its own hyperparameters: an ``lr``, ``weight_decay`` or ``optimizer_options`` given
    beside it (other than fit's defaults) is not applied, so it is said: unsaid, it would be dropped without a
    word, and the run's record would name an lr it did not run at."""
    from zoo.engine.options import FitConfig

    ignored = [f"{key}={value!r} (it runs at {key}={optimizer.param_groups[0].get(key)!r})"
               for key, value, default in (("lr", lr, FitConfig.lr), ("weight_decay", weight_decay,
                                                                       FitConfig.weight_decay))
               if value != default and value != optimizer.param_groups[0].get(key)]
    ignored += [f"optimizer_options={options!r}"] if options else []
    if ignored:
        kind = type(optimizer)
        name = kind.__name__.lower()
        # fit builds only the optimizers it names; any other class it builds when given as the class itself
        build = (f"optimizer={name!r}" if name in OPTIMIZERS and OPTIMIZERS[name] is kind
                 else f"optimizer={_dotted(kind)} (the class, not an instance)")
        warnings.warn(f"optimizer is a ready {kind.__name__}, which keeps its own settings: "
                      f"{'; '.join(ignored)} is not applied; set them on the optimizer, or pass {build} and fit "
                      "builds it with them", stacklevel=user_stacklevel())


def _dotted(kind: type) -> str:
    """How a user spells an optimizer class: ``torch.optim.Adagrad`` (not its module ``torch.optim.adagrad``)."""
    return f"torch.optim.{kind.__name__}" if getattr(torch.optim, kind.__name__, None) is kind else \
        f"{kind.__module__}.{kind.__qualname__}"


def _refuse_fit_settings_in(options: dict[str, Any] | None) -> None:
    """``lr`` / ``weight_decay`` in ``optimizer_options`` are fit's own options: given there, weight decay
    would reach every parameter, biases and normalisation parameters too (one group, past ``decay_groups``), and
    either would replace the value given to fit without a word."""
    given = [k for k in ("lr", "weight_decay") if k in (options or {})]
    if given:
        how = "; ".join(f"pass {k}={options[k]!r} to fit" for k in given)
        raise ValueError(f"optimizer_options holds {', '.join(given)}, which are fit's own options: {how} (fit applies "
                         "weight decay to weight matrices and kernels only, none to biases and normalisation "
                         "parameters, and schedules scale its lr)")


def _check_options(cls: type, name: str, options: dict[str, Any] | None) -> None:
    """``optimizer_options`` the optimizer does not take, named with the ones it does (torch's TypeError,
    "AdamW.__init__() got an unexpected keyword argument 'momentumm'", named neither fit nor the option)."""
    import inspect

    takes = [k for k in inspect.signature(cls.__init__).parameters if k not in ("self", "params")]
    for key in options or {}:
        if key not in takes:
            raise ValueError(f"optimizer_options: {cls.__name__} (optimizer={name!r}) takes no {key!r}"
                             f"{did_you_mean(key, takes)}; it takes {', '.join(takes)}")


def fused_default(name: str, model: nn.Module, options: dict[str, Any]) -> bool:
    """Whether ``fit`` builds the optimizer ``name`` fused (:data:`FUSED_ON_CPU`): a fused kind, no
    implementation (``fused``, ``foreach``) or ``differentiable`` chosen in ``options``, every parameter a
    floating-point CPU tensor, and no sparse embedding (the fused kernels take dense gradients only).
    The fused CPU kernels read a gradient in its parameter's memory layout; autograd gives every ``.grad``
    its parameter's strides (channels_last included), so gradients from ``backward`` always qualify."""
    if name not in FUSED_ON_CPU or any(k in options for k in ("fused", "foreach", "differentiable")):
        return False
    params = list(model.parameters())
    if not params or any(p.device.type != "cpu" or not p.is_floating_point() for p in params):
        return False
    return not any(getattr(m, "sparse", False) for m in model.modules())
