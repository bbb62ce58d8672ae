"""Claim: the default memory layout (``channels_last="auto"``, zoo.engine.layout) of fit and of the evaluations
is the faster one for each convolutional family on this CPU: channels-last where it decides so (on a CPU,
networks whose convolutions are all 2-D, all 3-D, or both, for the CPU kinds and precisions where that was
measured: zoo.engine.layout.CHANNELS_LAST_FASTER and CHANNELS_LAST_FASTER_INFERENCE), channels-first elsewhere
(HybridSN, 3-D then 2-D, was slower channels-last but where it trains in fp32 on the AVX512-BF16 EPYCs); and
``zoo.predict``'s input layout (``channels_last_input``, the inference rule, the model left as it is) is no
slower. Every run measures all three layouts for every model, whatever the rules say, so a run on a kind or
precision not yet listed measures what they should say for it.

Peer: the same training step in the channels-first layout PyTorch models come in (what fit did before, and
what a plain loop does unless its author converts the model). Two copies of each model (same initial
weights), one converted with ``zoo.engine.layout.to_channels_last``, take the step ``fit`` takes on a batch
(the autocast of ``amp="auto"``, cross-entropy, backward, fused AdamW), and the forward pass an evaluation
takes (eval mode, inference mode, the same autocast), alternately on the same synthetic batch of the family's
input shape, in an order rotated every repeat; and the forward ``zoo.predict`` takes, which leaves the model
channels-first (threads may share it) and lays out only its input (``zoo.engine.layout.channels_last_input``); medians of the step times and the
median of the per-repeat ratios ("paired", steadier on a noisy VM than whole epochs, which swung 1.5x here
within a run). Each row also says what ``fit``'s ``"auto"`` chose for the model on this CPU.

Models: ``resnet18`` (CIFAR stem, 64 images of 32x32), ``video-tsn`` (ResNet18 per frame, 4 clips of 8 frames at
64x64), ``hybridsn`` (64 windows of 1x30x25x25: 3-D then 2-D convolutions), ``r2plus1d_18`` (2 clips of 8 frames
at 64x64). ``--torchvision mobilenet_v3_small efficientnet_b0 ...`` adds torchvision classifiers (10 classes, 16
images of 96x96) as the models users bring to ``fit`` and ``zoo.predict``: the rule was measured on the families'
networks, and these say how far it carries.

Each case computes in the precision ``amp="auto"`` resolves for it, for training and for inference apart (the
check of bf16's gradients keeps HybridSN and R(2+1)D training in fp32 on the AVX512-BF16 EPYCs, while their
forward runs bf16 there); ``--amp fp32`` / ``--amp bf16`` force one precision to measure the rule's entry for a
precision users can ask for (``amp=None``, ``amp="bf16"``), recorded as ``layout_families_fp32`` / ``_bf16``.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/layout_families.py             # ~2 min on 2 cores
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/layout_families.py --repeats 5 --models hybridsn  # quick
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/layout_families.py --models --repeats 15 \
        --torchvision mobilenet_v3_small efficientnet_b0 mobilenet_v2 convnext_tiny densenet121 squeezenet1_1
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/layout_families.py --amp fp32  # where auto is bf16
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import interleave, median, parse_args, write_result

import zoo
from zoo.engine.forward import autocast, check_amp
from zoo.engine.layout import as_channels_last, channels_last_input, to_channels_last, use_channels_last

# name -> (build kwargs, one sample's shape, classes, batch size)
MODELS = {
    "resnet18": ({"stem": "cifar", "num_classes": 10}, (3, 32, 32), 10, 64),
    "video-tsn": ({"num_classes": 10}, (3, 8, 64, 64), 10, 4),
    "hybridsn": ({}, (1, 30, 25, 25), 16, 64),
    "r2plus1d_18": ({"num_classes": 10}, (3, 8, 64, 64), 10, 2),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--torchvision", nargs="*", default=[], metavar="NAME",
                    help="torchvision.models builders to measure too (e.g. mobilenet_v3_small efficientnet_b0)")
    ap.add_argument("--repeats", type=int, default=30, help="training steps per layout and model")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--amp", choices=["auto", "fp32", "bf16"], default="auto",
                    help="the precision every case computes in: auto (what fit and the evaluations resolve on this "
                         "CPU, the default) or one forced, to measure the rule's entry for a precision a user can "
                         "ask for (amp=None, amp='bf16'); results in layout_families_<amp>")
    args = parse_args(ap, None, __file__)
    cpu = torch.device("cpu")

    metrics, peer, ratios, raw, settings = {}, {}, {}, {}, {}
    import torchvision

    for name in args.models + [f"torchvision.{n}" for n in args.torchvision]:
        kwargs, shape, classes, batch = MODELS.get(name, ({"num_classes": 10}, (3, 96, 96), 10, 16))
        torch.manual_seed(0)
        if name.startswith("torchvision."):
            base = getattr(torchvision.models, name.removeprefix("torchvision."))(**kwargs).train()
        else:
            base = zoo.build(name, **kwargs).train()
        # training and inference can resolve differently: the check of bf16's gradients keeps HybridSN and
        # R(2+1)D in fp32 for training on the AVX512-BF16 EPYCs, while their forward runs bf16 there
        wanted = None if args.amp == "fp32" else args.amp
        amp = check_amp(wanted, cpu, base, training=True)
        amp_infer = check_amp(wanted, cpu, base, training=False)
        chosen = use_channels_last("auto", base, cpu, amp)
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(batch, *shape, generator=g), torch.randint(0, classes, (batch,), generator=g)

        def case(last: bool, train: bool, base=base, x=x, y=y, amps=(amp_infer, amp), predict: bool = False):
            amp = amps[train]
            model = copy.deepcopy(base).train(train)
            if last:
                to_channels_last(model)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
            inputs = x.contiguous(memory_format=torch.channels_last) if last and x.dim() == 4 else x

            def forward_predict() -> float:  # zoo.predict: the model as it is, the input laid out per call
                t0 = time.perf_counter()  # laid out as channels_last_input does where its rule says so
                with torch.inference_mode(), autocast(amp, cpu):
                    model(as_channels_last(x))
                return time.perf_counter() - t0

            def step() -> float:
                t0 = time.perf_counter()
                with autocast(amp, cpu):
                    loss = F.cross_entropy(model(inputs), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                return time.perf_counter() - t0

            def infer() -> float:  # what zoo.evaluate and the families' evaluation do per batch
                t0 = time.perf_counter()
                with torch.inference_mode(), autocast(amp, cpu):
                    model(inputs)
                return time.perf_counter() - t0
            return forward_predict if predict else step if train else infer

        print(f"{name}: amp {amp or 'fp32'} (inference {amp_infer or 'fp32'}), auto layout "
              f"{'channels_last' if chosen else 'channels-first'}",
              file=sys.stderr, flush=True)
        samples = interleave({"last": case(True, True), "first": case(False, True), "infer_last": case(True, False),
                              "infer_first": case(False, False), "predict": case(False, False, predict=True)},
                             repeats=args.repeats, warmup=args.warmup, progress=False)
        for what, tag in (("step", ""), ("infer", "infer_")):
            last, first = samples[f"{tag}last"], samples[f"{tag}first"]
            metrics[f"{name}.{what}_ms_channels_last"] = median(last) * 1e3
            peer[f"{name}.{what}_ms_channels_last"] = median(first) * 1e3
            ratios[f"{name}.{what}_first_over_last"] = median(first) / median(last)
            ratios[f"{name}.{what}_paired"] = median([f / s for f, s in zip(first, last)])
        first, ours = samples["infer_first"], samples["predict"]
        metrics[f"{name}.predict_ms_input_laid_out"] = median(ours) * 1e3
        peer[f"{name}.predict_ms_input_laid_out"] = median(first) * 1e3
        ratios[f"{name}.predict_first_over_input_laid_out"] = median(first) / median(ours)
        ratios[f"{name}.predict_paired"] = median([f / s for f, s in zip(first, ours)])
        scored = use_channels_last("auto", base, cpu, amp_infer, inference=True)  # evaluations
        laid_out = channels_last_input(x, base, torch.bfloat16 if amp_infer == "bf16" else None) is not x  # predictions

        def layout(last: bool) -> str:
            return "channels_last" if last else "channels-first"
        metrics[f"{name}.auto_decides"] = (f"training {amp or 'fp32'} {layout(chosen)}, evaluation "
                                           f"{amp_infer or 'fp32'} {layout(scored)}, prediction input {layout(laid_out)}")
        raw[name] = {k: [round(v * 1e3, 2) for v in vals] for k, vals in samples.items()}
        settings[name] = {"build": kwargs, "input": list(shape), "batch_size": batch}
    write_result(  # the families' file keeps its name
        ("layout_families_torchvision" if args.torchvision else "layout_families")
        + ("" if args.amp == "auto" else f"_{args.amp}"),
        metrics=metrics,
        peers={"channels_first": peer},
        ratios=ratios,
        extra={"settings": settings | {"repeats": args.repeats, "warmup": args.warmup,
                                       "optimizer": "AdamW lr=1e-3 fused", "amp": args.amp},
               "step_ms_raw": raw,
               "notes": "ours = a training step (step_) or an inference forward (infer_) with the model in "
                        "channels-last, peer = the same channels-first (ms, medians of alternated calls); ratio = "
                        "peer / ours (> 1: channels-last faster); predict_: the model channels-first, its input "
                        "laid out channels-last at every call (what zoo.predict does where channels_last_input's "
                        "rule says so), against the same forward on the input as it came; <model>.<what>_paired = "
                        "median of the per-repeat ratios; <model>.auto_decides = what channels_last='auto' chooses "
                        "for the model on this CPU: for fit, for zoo.evaluate and the families' evaluations, and "
                        "for zoo.predict's input."},
    )


if __name__ == "__main__":
    main()
