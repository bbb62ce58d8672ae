"""``zoo export NAME --weights W --format onnx|torch.export|torchscript --out PATH``: :func:`zoo.export` on
the command line, for every registered model.

Imported by :func:`zoo.cli.build_parser`. Files written by ``zoo.save`` (and ``zoo finetune``) carry their
config, so ``zoo.build(name, weights=...)`` loads any of them.
"""

from __future__ import annotations

import argparse

from zoo.cli.arguments import model_kv, parse_kv
from zoo.cli.commands import command
from zoo.cli.errors import UsageError

__all__: list[str] = []

def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a registered model name (see `zoo list`)")
    p.add_argument("--weights", help="a tag, MODEL.TAG, a path or a URL (default: a fresh build)")
    p.add_argument("--format", default=None, choices=["onnx", "torch.export", "pt2", "torchscript"],
                   help="onnx, torch.export (.pt2; pt2 is the same) or torchscript (.pt, vision only); default: "
                        "the one --out's suffix names (.onnx, .pt2, .pt), else onnx")
    p.add_argument("--out", required=True,
                   help="output file (.onnx / .pt2 / .pt), or a folder for models with several graphs (seq2seq): "
                        "a new or empty folder, or one zoo exported before (it is replaced whole)")
    p.add_argument("--model", nargs="*", action="extend", metavar="KEY=VALUE",
                   help="builder config, e.g. num_classes=10")
    p.add_argument("--set", nargs="*", action="extend", metavar="KEY=VALUE",
                   help="export options of the family, e.g. batch=4 frames=8 size=112 image_size=64")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip running the export against PyTorch (verification is on by default)")


@command("export", "export a model to ONNX / torch.export (.pt2), checked against PyTorch", _configure)
def _cmd_export(args: argparse.Namespace) -> int:
    import zoo

    model = zoo.build(args.name, weights=args.weights, **model_kv(args.name, args.model))
    try:
        result = zoo.export(model, args.out, args.format, verify=args.verify, **parse_kv(args.set))
    except TypeError as err:
        if "unknown option" not in str(err):
            raise
        # an export option came with --set; the generic TypeError hint points at config keys (`zoo info`)
        raise UsageError(f"--set: {err}") from err
    # an ExportError (refused for this format, or the export disagrees with PyTorch: nothing written) is
    # reported like every other error of the command: one line, a hint, exit code 2
    print(f"exported {args.name}: {result.describe()}")
    for path in result.files:
        print(f"  {path}")
    return 0
