"""Command line for seq2seq: ``zoo translate`` and the ``zoo demo`` step (``zoo train/eval/predict`` are the
spine's commands; a corpus folder is ``--data``, its languages ``--set direction=de-en``).

    zoo translate --weights seq2seq-transformer.multi30k-de-en "Ein Hund rennt über die Wiese."
    zoo train seq2seq-transformer --data ../shared/data/multi30k --set direction=de-en --epochs 20 --out de-en.safetensors
    zoo eval seq2seq-transformer --weights de-en.safetensors --data ../shared/data/multi30k --set direction=de-en beam_size=5
"""

from __future__ import annotations

import argparse
from pathlib import Path

from zoo.cli import (
    PredictRules,
    UsageError,
    add_device_and_amp,
    amp_option,
    command,
    demo,
    predict_rules,
    stdin_lines,
    with_stdin,
)

DEMO_WEIGHTS = ("seq2seq-transformer.multi30k-de-en", "seq2seq-transformer.multi30k-en-de")
DEMO_SENTENCES = {
    "de-en": ["Ein Mann fährt mit dem Fahrrad die Straße entlang.", "Zwei Hunde spielen im Schnee."],
    "en-de": ["A little girl is climbing a tree.", "Two men are playing soccer on the beach."],
}
PUBLISH_COMMAND = "python benchmarks/seq2seq_multi30k.py"

# zoo predict: each input is a sentence, and a blank line of standard input is one (its translation is "", so
# output line i stays input line i's)
predict_rules("seq2seq", PredictRules(keep_blank=True))


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
    p.add_argument("text", nargs="*", help="sentences to translate; - reads them from standard input, one a line, as "
                                          "zoo predict does (or use --input)")
    p.add_argument("--weights", required=True, help="MODEL.TAG (e.g. seq2seq-transformer.multi30k-de-en), a tag or a file")
    p.add_argument("--model", default=None, help="registered model name (default: from --weights, else seq2seq-transformer)")
    p.add_argument("--input", help="file with one sentence per line ('-' = stdin)")
    p.add_argument("--beam-size", type=int, default=5, help="beam width; 1 = greedy (default: 5)")
    p.add_argument("--length-penalty", type=float, default=0.6, help="GNMT length penalty alpha (default: 0.6)")
    p.add_argument("--max-len", type=int, help="most new tokens per sentence (default: 1.5 x source + 10)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: 64)")
    # as zoo predict's: --amp none translates a sentence the same however it is batched (README, Seq2Seq)
    add_device_and_amp(p)


def _model_of(weights: str | None) -> str:
    """The model ``--weights`` names (``seq2seq-gru.TAG``) or a saved file records, else seq2seq-transformer."""
    import zoo

    head = str(weights).split(".", 1)[0]
    if head in zoo.list_models("seq2seq"):
        return head
    from zoo import hub

    path = Path(str(weights)).expanduser()
    if hub.state.is_safetensors(path):  # by its bytes: a saved file keeps its model under any name
        meta = hub.read_metadata(path)  # zoo.save writes zoo.model; a published file carries "model.tag"
        saved = meta.get("zoo.model") or meta.get("zoo.name", "").partition(".")[0]
        if saved in zoo.list_models("seq2seq"):
            return saved
    return "seq2seq-transformer"


@command("translate", "translate sentences with a seq2seq model and its bundled tokenizer", _configure_translate)
def _cmd_translate(args: argparse.Namespace) -> int:
    import zoo

    name = args.model or _model_of(args.weights)
    if zoo.model_info(name).family != "seq2seq":
        raise UsageError(f"{name} is not a seq2seq model; choose one of {', '.join(zoo.list_models('seq2seq'))}")
    sentences = with_stdin(list(args.text), keep_blank=True)
    if args.input:
        if args.input == "-":
            sentences += stdin_lines()
        else:
            from zoo.seq2seq.data import read_lines

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
        device=args.device,
        amp=amp_option(args.amp),
    )
    for line in out:
        print(line)
    return 0
