"""One network's parameters, gradients, Adam moments and bf16 compute copy, each one flat buffer.

A TD3 update steps four small networks; with per-tensor storage every optimizer step, soft update and
bf16 refresh is a loop over a dozen tensors (a kernel launch each, plus dtype conversions that are not
vectorised across tensors). Here each network's parameters are *views* of one contiguous fp32 buffer,
so each of those is one vectorised kernel over one tensor. The modules, their ``state_dict`` and the
optimizers' ``state_dict`` keep their usual per-parameter form: a view looks like any other tensor.

Layout of ``master``: the parameters that run in the compute dtype first, the ones kept in fp32 (the
one-unit output layers) last, so the bf16 ``compute`` copy mirrors a prefix of ``master``.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from zoo.engine.denormals import FLUSH_EVERY, MIN_EPS, zero_tiny_

__all__ = ["FlatAdam", "FlatParams"]


class FlatParams:
    """``module``'s parameters re-seated as views of ``master`` (fp32), with ``grad`` (fp32) and, for a
    low-precision ``compute_dtype``, a ``compute`` copy and ``compute_grad`` for the names not in
    ``keep_fp32``. ``weights[name]`` / ``grads[name]`` are the views the update's GEMMs read / write;
    for a stacked parameter (``(n, ...)``: the twin critics) ``weights[f"{name}.{i}"]`` is member ``i``
    (made once here: indexing per call costs more than some of the GEMMs it feeds)."""

    def __init__(self, module: nn.Module, compute_dtype: torch.dtype = torch.float32,
                 keep_fp32: Iterable[str] = ()) -> None:
        named = list(module.named_parameters())
        keep = set(keep_fp32)
        lowp = compute_dtype != torch.float32
        order = [(n, p) for n, p in named if not (lowp and n in keep)] + [(n, p) for n, p in named if lowp and n in keep]
        self.names = [n for n, _ in order]
        self.params = [p for _, p in order]
        total = sum(p.numel() for p in self.params)
        self.n_compute = sum(p.numel() for n, p in order if not (lowp and n in keep)) if lowp else total
        device = self.params[0].device
        self.master = torch.empty(total, dtype=torch.float32, device=device)
        self.grad = torch.zeros(total, dtype=torch.float32, device=device)
        self.compute_dtype = compute_dtype
        self.lowp = lowp
        if lowp:
            self.compute = torch.empty(self.n_compute, dtype=compute_dtype, device=device)
            self.compute_grad = torch.zeros(self.n_compute, dtype=compute_dtype, device=device)
        self.weights: dict[str, torch.Tensor] = {}
        self.grads: dict[str, torch.Tensor] = {}
        off = 0
        with torch.no_grad():
            for name, p in order:
                n = p.numel()
                view = self.master[off:off + n].view_as(p)
                view.copy_(p)
                p.data = view  # the module's parameter now lives in master
                p.grad = None
                in_compute = lowp and off < self.n_compute
                self.weights[name] = self.compute[off:off + n].view_as(p) if in_compute else p.detach()
                self.grads[name] = (self.compute_grad if in_compute else self.grad)[off:off + n].view_as(p)
                if p.dim() == 3:
                    for d in (self.weights, self.grads):
                        d.update({f"{name}.{i}": part for i, part in enumerate(d[name].unbind(0))})
                off += n
        self.refresh()

    def refresh(self) -> None:
        """Copy the fp32 masters into the compute copy (after an optimizer step or a weight load)."""
        if self.lowp:
            with torch.no_grad():
                self.compute.copy_(self.master[:self.n_compute])

    def gather_grads(self) -> None:
        """The compute-dtype gradients into the fp32 ``grad`` the optimizer reads."""
        if self.lowp:
            self.grad[:self.n_compute].copy_(self.compute_grad)

    def owns(self, module: nn.Module) -> bool:
        """True while ``module``'s parameters are still views of ``master`` (a load_state_dict keeps them;
        ``module.to(...)`` or replacing a parameter does not)."""
        base = self.master.untyped_storage().data_ptr()
        return all(p.untyped_storage().data_ptr() == base for p in module.parameters())


class FlatAdam:
    """Adam over a :class:`FlatParams` in one fused kernel, keeping ``opt`` (a ``torch.optim.Adam`` over the
    same parameters) the owner of hyperparameters and of a per-parameter ``state_dict``: its moments are
    views of two flat buffers and every parameter shares one step counter (they always step together).
    Elementwise, so the parameters equal ``opt.step()``'s with the fused kernel bit for bit.

    Every :data:`zoo.engine.denormals.FLUSH_EVERY` steps the moments below their floors are zeroed before
    they turn denormal (:mod:`zoo.engine.denormals`; the parameters stay equal to ``opt.step()``'s): dead
    ReLU units are a fifth of TD3's critic weights on Pendulum, and on an Intel Xeon (2 threads) the Adam
    step of a trained critic took 1.75 ms with its 50k denormal moments against 0.09 ms with them zeroed.
    Where denormals cost nothing extra the flush is all cost: 6-7 us a step averaged over the critics' 245k
    moments (the avx512 Xeon, 1 and 2 threads), under 0.1 % of a TD3 update. On a GPU there is no flush."""

    def __init__(self, opt: torch.optim.Optimizer, flat: FlatParams) -> None:
        if len(opt.param_groups) != 1:
            raise ValueError("FlatAdam needs an optimizer with one parameter group")
        group = opt.param_groups[0]
        if {id(p) for p in group["params"]} != {id(p) for p in flat.params}:
            raise ValueError("the optimizer's parameters are not the flat buffer's")
        self.opt, self.flat = opt, flat
        self.exp_avg = torch.zeros_like(flat.master)
        self.exp_avg_sq = torch.zeros_like(flat.master)
        # on the parameters' device, as torch's fused Adam keeps it: the CUDA kernel reads it there
        self.step_t = torch.zeros((), dtype=torch.float32, device=flat.master.device)
        self.steps = 0  # step_t's value on the host: counting there costs no device sync a step
        # a GPU computes denormals at full speed, so the flush (see above) would be all cost there
        self.flush = flat.master.device.type == "cpu"
        self.adopt_state()

    def adopt_state(self) -> None:
        """Move the optimizer's current state (e.g. just loaded from a checkpoint) into the flat buffers
        and point its per-parameter state at them."""
        state = self.opt.state
        have = [p for p in self.flat.params if p in state and "exp_avg" in state[p]]
        if have and len(have) != len(self.flat.params):
            raise ValueError("optimizer state covers only some parameters; cannot flatten it")
        steps = {float(state[p]["step"]) for p in have}
        if len(steps) > 1:
            raise ValueError(f"optimizer state has different step counts per parameter: {sorted(steps)}")
        off = 0
        with torch.no_grad():
            if have:
                self.steps = int(steps.pop())
                self.step_t.fill_(self.steps)
            for p in self.flat.params:
                n = p.numel()
                ea, eas = self.exp_avg[off:off + n].view_as(p), self.exp_avg_sq[off:off + n].view_as(p)
                if have:
                    ea.copy_(state[p]["exp_avg"])
                    eas.copy_(state[p]["exp_avg_sq"])
                state[p] = {"step": self.step_t, "exp_avg": ea, "exp_avg_sq": eas}
                off += n

    def step(self) -> None:
        """One Adam step on ``flat.master`` from ``flat.grad``."""
        group = self.opt.param_groups[0]
        if group["amsgrad"] or group["maximize"] or group.get("differentiable"):
            raise ValueError("FlatAdam implements plain Adam (no amsgrad, maximize, differentiable)")
        beta1, beta2 = group["betas"]
        self.step_t.add_(1)
        self.steps += 1
        f = self.flat
        torch._fused_adam_(
            [f.master], [f.grad], [self.exp_avg], [self.exp_avg_sq], [], [self.step_t], amsgrad=False,
            lr=float(group["lr"]), beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
            maximize=False, grad_scale=None, found_inf=None,
        )
        if self.flush and self.steps % FLUSH_EVERY == 0:
            zero_tiny_(self.exp_avg, "exp_avg")
            if group["eps"] >= MIN_EPS:
                zero_tiny_(self.exp_avg_sq, "exp_avg_sq")
