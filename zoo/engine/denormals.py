"""Optimizer state, and the gradients of a model's outputs, kept out of the denormal range.

The optimizer's moments (below) change no parameter. The output-gradient floor (:data:`OUTPUT_GRAD_FLOOR`, at
the end, opt-in: ``fit(..., flush_tiny_grads=True)``) can: in some runs training then takes another path, as
it would from another seed.

The moments of a weight whose gradient stays exactly zero (a dead ReLU unit, a feature map that is zero
everywhere, a dense input the network never uses) decay geometrically: Adam's ``exp_avg`` by 0.9 a step
reaches the denormal range (below 1.18e-38) about 800 steps after its last gradient. Intel CPUs take a
microcode assist on each denormal operand, and every optimizer step reads and writes those moments several
times. Measured on a Xeon (GenuineIntel family 6 model 207, 2 threads): training HybridSN on Indian Pines,
28 % of AdamW's moments were denormal from the fifth epoch on (2.9 million of 10.2 million) and
``optimizer.step()`` took 32-40 ms against 14-17 ms in the first epochs; with the flush it stayed at 14-18 ms
and the 8-epoch run went 1.10x faster (``benchmarks/optimizer_denormals.py``, torch's per-tensor AdamW; with
the fused AdamW ``fit`` builds since, the step took 23-30 ms against 3.8-4.5 ms with the flush). TD3's fused Adam step over
a trained critic took 1.75 ms against 0.09 ms with its denormal moments zeroed. A gain that large was measured on
that Xeon only (TD3 learning on an AMD EPYC, Zen 3, with both cores: 1.56x and 1.62x SB3 after the flush, seeds 0-2
and 3-5, against 1.64x and 1.54x before it, inside that VM's spread; on that Zen 3 the same HybridSN run's
fused step went only from 4.0-4.2 to 4.4-4.7 ms as 32 % of torch's moments turned denormal, and the flushed run
trained 0.98x as fast, inside the VM's drift; on a Zen 4 torch's step went from 2.0-2.7 to 3.1-3.3 ms with 30 %
denormal, the flushed one stayed at 2.2-2.8 ms, and the run trained 1.01x as fast). Where denormals cost nothing extra the flush is a bounded cost: one pass over the state
every 32 steps, 2.2 ms over HybridSN's 10.2 million moments on the same Xeon (0.07 ms a step, 0.5 % of the
AdamW step it follows).

So every :data:`FLUSH_EVERY` steps, moments smaller than :data:`MOMENT_FLOORS` are set to zero, before
they can reach the denormal range. No parameter changes: a first moment (or momentum) below 1e-30 moves
its weight by at most ``lr * 1e-30 / eps`` (Adam, ~1e-22 at the defaults) or ``lr * 1e-30`` (SGD), which
rounds away against any weight above ~1e-14; a second moment below 1e-36 adds at most
``sqrt(1e-36 / (1 - 0.999**32)) = 5.6e-18`` to a denominator of at least ``eps``, under half a unit in the
last place of any ``eps >= 1e-9`` (torch's default is 1e-8; a group with a smaller ``eps`` keeps its
second moments). The optimizer state differs from torch's only where torch's is below those floors.
``torch.set_flush_denormal(True)`` would do it for the whole process and only on the calling thread
(intra-op workers started before it keep computing denormals).
"""

from __future__ import annotations

import torch

__all__ = ["FLUSH_EVERY", "MIN_EPS", "MOMENT_FLOORS", "OUTPUT_GRAD_FLOOR", "floor_output_grad", "flush_tiny_moments",
           "zero_tiny_"]

FLUSH_EVERY = 32
"""Optimizer steps between flushes: fewer than the ~170 steps a first moment (x0.9 a step) takes from 1e-30
to the denormal range, and the ~4,400 a second moment (x0.999) takes from 1e-36. (A ``beta1`` below ~0.57
decays faster than that: its moments can be denormal for a few steps before the next flush.)"""

MOMENT_FLOORS: dict[str, float] = {
    "exp_avg": 1e-30,  # Adam, AdamW, NAdam, RAdam: first moment
    "momentum_buffer": 1e-30,  # SGD, RMSprop with momentum
    "exp_avg_sq": 1e-36,  # Adam, AdamW, NAdam, RAdam: second moment
    "square_avg": 1e-36,  # RMSprop
}
"""State key -> magnitudes at or below it are zeroed. Other keys (``max_exp_avg_sq`` never decays, RMSprop's
centred ``grad_avg`` sits in a numerator it shares with the gradient) are left alone."""

_SECOND_MOMENTS = ("exp_avg_sq", "square_avg")
MIN_EPS = 1e-9
"""Below this ``eps`` a zeroed second moment could change the denominator it is added to: such groups keep theirs."""


def zero_tiny_(moment: torch.Tensor, key: str) -> torch.Tensor:
    """Zero, in place, the entries of ``moment`` (an optimizer state tensor named ``key``) at or below its
    floor; one pass (``hardshrink``: 0.08 ms over 245k moments on the Xeon above, against 0.5 ms for a
    ``masked_fill_`` of an ``abs() <`` comparison)."""
    return torch.hardshrink(moment, MOMENT_FLOORS[key], out=moment)


def flush_tiny_moments(optimizer: torch.optim.Optimizer) -> int:
    """Zero the tiny moments of every floating-point CPU state tensor of ``optimizer``; returns how many
    tensors it passed over. On a GPU denormals cost nothing extra, so its tensors are skipped."""
    moments = [(key, t) for group in optimizer.param_groups
               for key, t in _moments(optimizer, group, keep_second=float(group.get("eps", MIN_EPS)) < MIN_EPS)]
    with torch.no_grad():
        for key, t in moments:
            zero_tiny_(t, key)
    return len(moments)


def _moments(optimizer: torch.optim.Optimizer, group: dict, keep_second: bool):
    """(key, tensor) of ``group``'s CPU floating-point state tensors that have a floor."""
    for p in group["params"]:
        for key, t in optimizer.state.get(p, {}).items():
            if (key in MOMENT_FLOORS and isinstance(t, torch.Tensor) and t.device.type == "cpu"
                    and t.is_floating_point() and not (keep_second and key in _SECOND_MOMENTS)):
                yield key, t


OUTPUT_GRAD_FLOOR = 1e-20
"""Gradients of a model's outputs at or below this magnitude are zeroed in training when ``fit`` is given
``flush_tiny_grads=True`` (:func:`floor_output_grad`).

The gradient of a cross entropy with respect to the logits is ``softmax - onehot``: once a model is sure of
its training samples, most entries are probabilities such as 1e-25 or 1e-40, and the backward pass carries
them through every layer, each multiplying by weights below 1, into the denormal range, where an Intel core
takes a microcode assist per operand. Training HybridSN on Indian Pines (AdamW, 6 epochs, 2 threads, the
avx512 Xeon; ad-hoc runs, one each) an epoch grew from 50 s to 66-68 s as that happened, against 47.5-48.7 s
from the second epoch on with this floor (and 48.3-49.7 s with flush-to-zero set in every thread before torch
started them; a floor of 1e-30 left 54-58 s: the backward shrinks gradients layer by layer). On an AMD EPYC
(Zen 3, 2 seeds, ``benchmarks/gradient_denormals.py``) every epoch took 114-130 s with and without the floor
while up to 0.11 % of the gradient entries turned denormal: no penalty there, and no cost from the floor.

What a zeroed entry would have added to a parameter's gradient is under 1e-20 times the size of the path from
that output to the parameter; in fp32 (24 bits, a ratio of 6e-8) that rounds away against anything the rest of
the batch contributes, and a small confident network trains to the same parameters bit for bit
(tests/engine/test_engine_denormals.py). Where a whole gradient is made of such entries (a normalisation
layer's backward subtracts nearly equal sums) it is not rounded away, and training amplifies the difference
as it would a different seed. ``benchmarks/gradient_denormals.py``, HybridSN, seeds 0-7 (2026-12-03): the
floor left the parameters bit-identical in 5 seeds; in the other 3 test accuracy moved by -2.1, -2.0 and
+1.3 points, against 13 points between the seeds themselves (64.1-77.1 %); training 1.12x faster by medians
(0.95-1.29x a seed; the later epochs 52.2 vs 64.8 s). That gain is the Xeon's alone (the Zen 3 above: 1.02x), so
the floor is off unless asked for."""


def floor_output_grad(outputs: object) -> None:
    """Zero, in the backward pass, the entries of ``outputs``'s gradient at or below :data:`OUTPUT_GRAD_FLOOR`
    (a hook on the tensor; one ``hardshrink`` pass). Outputs that are not CPU floating-point tensors
    taking part in autograd are left alone: a GPU computes denormals at full speed."""
    if (isinstance(outputs, torch.Tensor) and outputs.requires_grad and outputs.device.type == "cpu"
            and outputs.is_floating_point()):
        outputs.register_hook(_floor)


def _floor(grad: torch.Tensor) -> torch.Tensor:
    return torch.hardshrink(grad, OUTPUT_GRAD_FLOOR)
