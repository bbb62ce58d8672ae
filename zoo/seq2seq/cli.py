"""Command line for seq2seq: ``zoo translate``, the ``zoo demo`` step, and the ``zoo train``/``zoo eval`` adapter.

    zoo translate --weights seq2seq-transformer.multi30k-de-en "Ein Hund rennt über die Wiese."
    zoo train seq2seq-transformer --data ../shared/data/multi30k --set direction=de-en --epochs 20 --out de-en.safetensors
    zoo eval seq2seq-transformer --weights de-en.safetensors --data ../shared/data/multi30k --set direction=de-en beam_size=5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from zoo.cli import UsageError, command, data_adapter, demo, parse_kv
from zoo.seq2seq.data import read_lines

DEMO_WEIGHTS = ("seq2seq-transformer.multi30k-de-en", "seq2seq-transformer.multi30k-en-de")
DEMO_SENTENCES = {
    "de-en": ["Ein Mann fährt mit dem Fahrrad die Straße entlang.", "Zwei Hunde spielen im Schnee."],
    "en-de": ["A little girl is climbing a tree.", "Two men are playing soccer on the beach."],
}
PUBLISH_COMMAND = "flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/seq2seq_multi30k.py"

# `--set` keys the adapter consumes (everything else goes on to zoo.engine.fit / evaluate)
_ADAPTER_KEYS = ("direction", "max_tokens", "vocab_size", "test_split", "val_split", "beam_size", "bleu_sentences")


@demo("seq2seq: translation (Multi30k weights)", order=30)
def _demo() -> None:
    import zoo
    from zoo import hub

    published = set(hub.list_weights("seq2seq-transformer"))
    missing = [w for w in DEMO_WEIGHTS if w not in published]
    if len(missing) == len(DEMO_WEIGHTS):
        print(
            "seq2seq weights (seq2seq-transformer.multi30k-de-en / -en-de) are not published yet; "
            f"make them with: {PUBLISH_COMMAND}"
        )
        return
    for wname in DEMO_WEIGHTS:
        if wname in missing:
            print(f"{wname}: not published yet ({PUBLISH_COMMAND})")
            continue
        model = zoo.build("seq2seq-transformer", weights=wname)
        direction = wname.rsplit("-", 2)[-2] + "-" + wname.rsplit("-", 1)[-1]
        sentences = DEMO_SENTENCES[direction]
        for src, out in zip(sentences, model.translate(sentences, beam_size=5)):
            print(f"[{direction}] {src}\n      -> {out}")


def _configure_translate(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", nargs="*", help="sentences to translate (or use --input)")
    p.add_argument("--weights", required=True, help="MODEL.TAG (e.g. seq2seq-transformer.multi30k-de-en), a tag or a file")
    p.add_argument("--model", default=None, help="registered model name (default: from --weights, else seq2seq-transformer)")
    p.add_argument("--input", help="file with one sentence per line ('-' = stdin)")
    p.add_argument("--beam-size", type=int, default=5, help="beam width; 1 = greedy (default: 5)")
    p.add_argument("--length-penalty", type=float, default=0.6, help="GNMT length penalty alpha (default: 0.6)")
    p.add_argument("--max-len", type=int, help="most new tokens per sentence (default: 1.5 x source + 10)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: 64)")


@command("translate", "translate sentences with a seq2seq model and its bundled tokenizer", _configure_translate)
def _cmd_translate(args: argparse.Namespace) -> int:
    import zoo

    name = args.model
    if name is None:
        head = str(args.weights).split(".", 1)[0]
        name = head if head in zoo.list_models("seq2seq") else "seq2seq-transformer"
    if zoo.model_info(name).family != "seq2seq":
        raise UsageError(f"{name} is not a seq2seq model; choose one of {', '.join(zoo.list_models('seq2seq'))}")
    sentences = list(args.text)
    if args.input:
        if args.input == "-":
            sentences += [line.rstrip("\r\n") for line in sys.stdin]
        else:
            sentences += read_lines(args.input)
    if not sentences:
        raise UsageError("nothing to translate: give sentences as arguments or --input FILE")
    if args.beam_size < 1:
        raise UsageError(f"--beam-size must be >= 1, got {args.beam_size}")
    model = zoo.build(name, weights=args.weights)
    out = model.translate(
        sentences,
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
        max_len=args.max_len,
        batch_size=args.batch_size,
        progress=len(sentences) > 200,
    )
    for line in out:
        print(line)
    return 0


@data_adapter("seq2seq")
def _adapter(args: argparse.Namespace, model: Any) -> tuple[Any, dict[str, Any]]:
    """``--data DIR`` holds ``train/val[/test_2016_flickr].<lang>[.gz]`` (Multi30k's layout, or a user's own
    parallel files named that way); ``--set direction=de-en`` picks the languages. Training trains a
    byte-level BPE on the training text when the model has none (a model built with ``--weights`` keeps
    its own), monitors validation BLEU and uses label smoothing, inverse-sqrt warm-up and bf16 on CPU."""
    from zoo.seq2seq.data import ParallelDataset, load_multi30k, make_loader
    from zoo.seq2seq.tokenizer import train_tokenizer
    from zoo.seq2seq.translate import bleu_eval_fn, training_config

    if not args.data:
        raise UsageError(f"{args.name}: --data DIR is required (a folder with train.de / train.en ... files, "
                         "e.g. ../shared/data/multi30k)")
    root = Path(args.data)
    if not root.is_dir():
        raise UsageError(f"--data {root}: not a folder")
    # Consume our --set keys; the rest go on to the engine untouched.
    kv = parse_kv(args.set)
    ours = {k: kv.pop(k) for k in _ADAPTER_KEYS if k in kv}
    args.set = [p for p in (args.set or []) if p.partition("=")[0] not in _ADAPTER_KEYS]
    direction = str(ours.get("direction", "de-en"))
    max_tokens = int(ours.get("max_tokens", args.batch_size or 4096))
    training = hasattr(args, "epochs")
    if training:
        train = load_multi30k(root, "train", direction)
        if model.tokenizer is None:
            vocab = int(ours.get("vocab_size", model.config.tgt_vocab))
            model.tokenizer = train_tokenizer(train.src + train.tgt, vocab_size=vocab)
        val = load_multi30k(root, str(ours.get("val_split", "val")), direction)
        tok = model.tokenizer
        train_loader = make_loader(ParallelDataset(train, tok, model.max_len), max_tokens=max_tokens, seed=getattr(args, "seed", None) or 0)
        val_loader = make_loader(ParallelDataset(val, tok, model.max_len), max_tokens=max_tokens, shuffle=False)
        n = ours.get("bleu_sentences")
        eval_fn = bleu_eval_fn(val.src[:n] if n else val.src, val.tgt[:n] if n else val.tgt,
                               beam_size=int(ours.get("beam_size", 1)))
        config = training_config(eval_fn=eval_fn)
        config.pop("epochs")
        config["val_data"] = val_loader
        return train_loader, config
    if model.tokenizer is None:
        raise UsageError(f"{args.name}: evaluation needs trained weights with a tokenizer (--weights ...)")
    test = load_multi30k(root, str(ours.get("test_split", "test_2016_flickr")), direction)
    tok = model.tokenizer
    loader = make_loader(ParallelDataset(test, tok, model.max_len), max_tokens=max_tokens, shuffle=False)
    from zoo.seq2seq.translate import seq2seq_forward

    eval_fn = bleu_eval_fn(test.src, test.tgt, beam_size=int(ours.get("beam_size", 5)))
    config = {"forward_fn": seq2seq_forward, "eval_fn": eval_fn}
    if getattr(args, "device", None):
        config["device"] = args.device
    return loader, config
