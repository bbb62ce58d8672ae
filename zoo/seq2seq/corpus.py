"""A parallel-corpus folder as training and evaluation data: what ``zoo.train`` / ``zoo.evaluate`` do
with ``zoo.train(model, "multi30k", direction="de-en")``.

The folder holds ``train.xx``/``train.yy``, ``val.*`` and a test split (``test_2016_flickr.*`` for
Multi30k, else ``test.*``; ``test_split=`` names another), plain or ``.gz``. Training trains a byte-level
BPE on the training text when the model has no tokenizer yet, batches by token budget, and monitors
validation BLEU; evaluation scores the test split: token loss and accuracy (teacher forcing) and sacreBLEU
of the decoded translations.

Training records its recipe in the checkpoints (direction, token budget, validation split, a fingerprint of
the tokenizer and of the corpus files): a resume with another one is refused, as a changed ``bleu_sentences``
or ``beam_size`` (how validation BLEU is decoded) is applied (:mod:`zoo.engine.resume`).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from zoo._stacklevel import user_stacklevel
from zoo.inputs import whole_number

__all__ = ["corpus_data"]

log = logging.getLogger(__name__)


def _direction(model: Any, direction: str | None) -> str:
    chosen = direction or getattr(model.config, "direction", None)
    if chosen is None:
        raise ValueError("which languages? pass direction='de-en' (source-target codes) or build the model with "
                         "direction=...; the corpus folder holds one file per language")
    return str(chosen)


def _parsed(direction: Any) -> str:
    """``direction`` checked (a malformed one is refused, naming itself) and as the corpus files spell it."""
    from zoo.seq2seq.data import parse_direction

    src, tgt = parse_direction(direction)
    return f"{src}-{tgt}"


def _warn_other_direction(model: Any, direction: str) -> None:
    """An evaluation in another direction than the model's recorded one scores output in the wrong language
    (a de-en model on en-de: BLEU 0.01), which reads as a broken model rather than a wrong argument."""
    from zoo.seq2seq.data import parse_direction

    own = getattr(model.config, "direction", None)
    if own is None or own == direction:
        return
    src, tgt = parse_direction(direction)  # a malformed direction is refused first, naming itself
    warnings.warn(f"{model.registry_name} was trained {own} (its recorded direction); evaluating "
                  f"direction={direction!r} feeds it {src} sentences and scores its output against {tgt} "
                  f"references, so BLEU is near 0. Leave direction out (or pass {own!r}) to score this model; to "
                  f"score {direction}, evaluate a model trained {direction} (zoo.train(..., direction={direction!r}), "
                  f"or weights trained that way)", stacklevel=user_stacklevel())


def _record_direction(model: Any, direction: str) -> None:
    """Label ``model`` with the direction it is about to be trained in (its architecture recipe records it). A
    model trained another way before (the shipped de-en weights fine-tuned on en-de) translates ``direction``
    afterwards, so the label follows, with a word: a label left at de-en would make zoo.evaluate score en-de output
    as de-en's and the saved file say de-en."""
    own = getattr(model.config, "direction", None)
    if own is not None and own != direction:
        warnings.warn(f"{model.registry_name} was trained {own} (its recorded direction); training it on "
                      f"{direction} data starts from its {own} weights and records {direction} from now on (in "
                      f"zoo.evaluate's default and in the saved file). To train {own}, pass direction={own!r}",
                      stacklevel=user_stacklevel())
    model.config.direction = direction


def _tokenizer_size(model: Any, vocab_size: int | None) -> int:
    """The vocabulary of a tokenizer trained for ``model``: one joint tokenizer encodes both sides, so
    its ids index the source *and* the target embedding and must stay below the smaller of the two."""
    from zoo.seq2seq.tokenizer import SPECIAL_TOKENS

    src, tgt = int(model.config.src_vocab), int(model.config.tgt_vocab)
    fits, least = min(src, tgt), 256 + len(SPECIAL_TOKENS)
    if fits < least:  # the tokenizer's own refusal names a vocab_size the user never passed
        raise ValueError(f"{model.registry_name} has src_vocab={src}, tgt_vocab={tgt}: too few ids for the byte-level "
                         f"tokenizer zoo.train trains, which has at least {least} tokens (256 bytes + specials); build "
                         f"the model with src_vocab and tgt_vocab >= {least}, or attach a tokenizer of your own")
    if vocab_size is None:
        return fits
    if int(vocab_size) > fits:
        raise ValueError(
            f"vocab_size={vocab_size} does not fit {model.registry_name} (src_vocab={src}, tgt_vocab={tgt}): "
            f"the joint source+target tokenizer's ids index both embeddings, so it can have at most {fits} "
            f"tokens; pass vocab_size<={fits} (or leave it out), or build the model with "
            f"src_vocab and tgt_vocab >= {vocab_size}")
    return int(vocab_size)


def _check_tokenizer_fits(model: Any) -> None:
    src, tgt = int(model.config.src_vocab), int(model.config.tgt_vocab)
    n = model.tokenizer.vocab_size
    if n > min(src, tgt):
        sides = " and ".join(side for side, v in (("source", src), ("target", tgt)) if v < n)
        raise ValueError(
            f"{model.registry_name}'s tokenizer has {n} tokens but the model has src_vocab={src}, tgt_vocab={tgt}: "
            f"its ids would overflow the {sides} embedding; attach a tokenizer of at most {min(src, tgt)} tokens "
            f"(or none: zoo.train trains one), or build the model with src_vocab and tgt_vocab >= {n}")


def corpus_data(model: Any, data: Any, *, train: bool, direction: str | None = None, max_tokens: int | None = None,
                batch_size: int | None = None, vocab_size: int | None = None, val_split: str = "val",
                test_split: str | None = None, beam_size: int = 1, bleu_sentences: int | None = None,
                **options: Any) -> tuple[Any, dict[str, Any]]:
    """``(loader, loop options)`` for ``model`` from a corpus folder, a list of ``(source, target)`` sentence
    pairs or a ``(sources, targets)`` tuple (``val_data=`` either: validation loss and BLEU; to train, the two
    sets may also come together, ``(train, val)``: ``((sources, targets), (val_sources, val_targets))``, a pair of
    pair lists, or a mix), or a ``(source file, target file)`` pair of ``pathlib.Path`` (line-aligned text, plain or
    ``.gz``); a Dataset/DataLoader passes through.

    Batches hold sentences of similar length, at most ``max_tokens`` padded tokens (default 4096) or, with
    ``batch_size``, that many sentence pairs (given both, whichever cap a batch reaches first);
    ``vocab_size``: of the joint tokenizer trained here when the model has none (default and most: the
    smaller of the model's ``src_vocab`` and ``tgt_vocab``); ``beam_size`` / ``bleu_sentences``: how BLEU is
    decoded and on how many sentences, at the evaluation's ``amp``; ``test_split``: the files evaluation
    scores (default ``test_2016_flickr``, Multi30k's, else ``test``).
    """
    # 0 would score every sentence, as None does: refused
    bleu_sentences = whole_number(bleu_sentences, "bleu_sentences", allow_none=True, hint="None: every sentence")
    # before the loss pass or the first epoch, not when BLEU is decoded after them
    beam_size = whole_number(beam_size, "beam_size")
    if train and (split := _train_val_pairs(data)) is not None:
        if options.get("val_data") is not None:
            raise ValueError("validation data given twice: in the data (train_pairs, val_pairs) and as val_data")
        data, options["val_data"] = split
    elif not train and _train_val_pairs(data) is not None:
        raise TypeError("zoo.evaluate scores one set of sentence pairs, got two (train_pairs, val_pairs): "
                        "pass the one to score")
    pairs = _pairs(data)
    if model.tokenizer is not None:  # every path, training and evaluation: else a bare IndexError mid-forward
        _check_tokenizer_fits(model)
    bleu = {"n": bleu_sentences, "beam_size": beam_size, "amp": options.get("amp", "auto")}
    # zoo.evaluate's loaders get a generator of their own: without one each pass would draw its base seed from
    # the caller's global torch generator. A training run's loaders (validation too) keep drawing it: that draw is
    # part of the seeded stream its dropout follows, and its results stay what they were
    batches = {"max_tokens": max_tokens, "batch_size": batch_size, "seed": int(options.get("seed", 0)),
               "own_generator": not train, "num_workers": _loader_workers(model, data, pairs, train, options)}
    if pairs is None and not isinstance(data, (str, os.PathLike)):
        return _ready_data(model, data, train, batches, bleu, options)
    if max_tokens is None and batch_size is None:
        # fairseq's way: a token budget keeps the work per step even across lengths
        batches["max_tokens"] = max_tokens = 4096
    if pairs is not None:
        # sentence pairs are (source, target) as given; a direction given names them, as a folder's does: training
        # records it once the data loaded, an evaluation warns on another than the model's (both were skipped)
        if direction is not None and not train:
            _warn_other_direction(model, _parsed(direction))
        out = _pairs_data(model, pairs, train, batches, bleu, vocab_size, options)
        if direction is not None and train:
            _record_direction(model, _parsed(direction))
        return out
    root = Path(data)
    if root.is_file():
        raise NotADirectoryError(
            f"a corpus is a folder of parallel files (train.de / train.en, val.*, test.*), got the file {root}: pass "
            "its folder, or (source, target) sentence pairs in Python; to translate a file of sentences, zoo "
            f"translate --weights MODEL.TAG --input {root}")
    if not root.is_dir():
        raise FileNotFoundError(f"corpus folder not found: {root} (expected train.xx / train.yy, val.*, ... files)")
    direction = _direction(model, direction)
    if train:
        text = _split_text(root, "train", direction, None)
        val_text, val_root = _val_text(options.pop("val_data", None), root, direction, val_split)
        loader, extra = _training(model, text, val_text, batches, bleu, vocab_size)
        recipe = {"direction": direction, "max_tokens": max_tokens, "val_split": val_split,
                  "corpus": _corpus_fingerprint(root, direction, ("train",) + (() if val_root else (val_split,))),
                  "bleu_sentences": bleu_sentences, "beam_size": beam_size}
        if val_root is not None:  # validation from another folder: another folder is another recipe
            recipe["val_corpus"] = _corpus_fingerprint(val_root, direction, (val_split,))
        _record_direction(model, direction)  # only once its data loaded: else a typo ('en-fr') would record itself
        return loader, _with_tokenizer(model, {**extra, **options}, recipe)
    _need_tokenizer(model)
    _warn_other_direction(model, direction)
    text = _split_text(root, _test_split(root, direction, test_split), direction, "test_split")
    return _loader(model, text, False, batches), {"eval_fn": _bleu_fn(text, bleu), **options}


def _ready_data(model: Any, data: Any, train: bool, batches: dict[str, Any], bleu: dict[str, Any],
                options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A Dataset or DataLoader of the user's. zoo's own ParallelDataset and a torch Subset of one (random_split's
    parts; token-id lists of many lengths, which torch's default collate refused: "each element in list of batch
    should be of equal size") are batched as sentence pairs are, and being text too they are scored in BLEU as
    they are, on their own sentences (a DataLoader of one too); any other passes through, the engine batching a
    Dataset by ``batch_size``."""
    from zoo.seq2seq.data import parallel_items

    if train and model.tokenizer is None:  # it trained, and then could neither translate nor be saved
        raise ValueError(f"{model.registry_name} has no tokenizer: trained on a {type(data).__name__} of token ids "
                         "it could neither translate nor be saved; attach the tokenizer that encoded them first "
                         "(model.tokenizer = tokenizer), or train on sentence pairs or a corpus folder (zoo.train "
                         "trains a tokenizer on them)")
    for what, given in (("data", data), ("val_data", options.get("val_data"))):
        _check_dataset_tokenizer(model, given, what)
    recipe = None
    if parallel_items(data) is not None:
        data = _dataset_loader(data, train, batches)
        recipe = {"max_tokens": data.batch_sampler.max_tokens}
    elif batches["max_tokens"] is not None:
        raise ValueError(f"max_tokens={batches['max_tokens']} batches a corpus folder by its token budget (sentence "
                         f"pairs and a ParallelDataset or a Subset of one too); a {type(data).__name__} brings its own "
                         "batching: leave max_tokens out")
    elif batches["batch_size"] is not None:
        options["batch_size"] = batches["batch_size"]  # the engine batches a Dataset (a DataLoader keeps its own)
    if parallel_items(options.get("val_data")) is not None:
        options["val_data"] = _dataset_loader(options["val_data"], False, batches)
    scored = _parallel_data(options.get("val_data") if train else data)
    if scored is not None and model.tokenizer is not None and "eval_fn" not in options:
        dataset, indices = scored
        options["eval_fn"] = _bleu_fn(dataset.text.take(indices), bleu)
        if train:
            options.setdefault("monitor", "val_bleu")
            options.setdefault("monitor_mode", "max")
    return data, _with_tokenizer(model, options, recipe) if train else options


def _parallel_data(data: Any) -> Any:
    """:func:`~zoo.seq2seq.data.parallel_items` of ``data``, or of the dataset a DataLoader ``data`` loads."""
    from torch.utils.data import DataLoader

    from zoo.seq2seq.data import parallel_items

    return parallel_items(data.dataset if isinstance(data, DataLoader) else data)


def _check_dataset_tokenizer(model: Any, data: Any, what: str) -> None:
    """A ParallelDataset (a Subset or a DataLoader of one) encoded by another tokenizer than the model's: its ids
    are other words to the model, so the loss and accuracy on it were garbage (and training on it taught
    nonsense), while BLEU, decoded from its text with the model's tokenizer, looked right."""
    from zoo.seq2seq.base import tokenizer_fingerprint

    found = _parallel_data(data)
    recorded = getattr(found[0], "tokenizer_fingerprint", None) if found is not None else None
    if recorded is None or model.tokenizer is None:
        return
    own = tokenizer_fingerprint(model.tokenizer)
    if recorded != own:
        raise ValueError(f"{what} is a ParallelDataset encoded with another tokenizer ({recorded}) than "
                         f"{model.registry_name}'s ({own}): its token ids are other words to the model; encode the "
                         "text with the model's, ParallelDataset(dataset.text, model.tokenizer, model.max_len), or "
                         "pass the sentence pairs themselves")


def _dataset_loader(dataset: Any, train: bool, batches: dict[str, Any]) -> Any:
    from zoo.seq2seq.data import make_loader

    max_tokens = batches["max_tokens"] if batches["max_tokens"] or batches["batch_size"] else 4096
    return make_loader(dataset, max_tokens=max_tokens, batch_size=batches["batch_size"], shuffle=train,
                       seed=batches["seed"], generator=_generator(batches), num_workers=batches["num_workers"])


def _split_text(root: Path, split: str, direction: str, option: str | None) -> Any:
    """``load_multi30k`` of one split, refusing files without a line: an empty validation split failed only
    after a trained epoch, inside sacreBLEU (IndexError), naming no file; an empty training or test split is as
    empty a corpus."""
    from zoo.seq2seq.data import find_split, load_multi30k

    text = load_multi30k(root, split, direction, option=option)
    if len(text) == 0:
        files = " and ".join(str(find_split(root, split, lang)) for lang in direction.split("-"))
        other = f", or name another split with {option}=NAME (CLI: --set {option}=NAME)" if option else ""
        raise ValueError(f"the {split!r} split is empty: {files} hold no lines, expected one sentence per line; "
                         f"fill them{other}")
    return text


def _val_text(given: Any, root: Path, direction: str, val_split: str) -> tuple[Any, Path | None]:
    """``(validation text, its folder when it is not the corpus's own)``: ``val_data=`` given apart, a corpus
    folder (its ``val_split`` files) or sentence pairs, replaces the corpus folder's ``val_split`` (passed on, a
    folder would go to fit as a str and fail at the first validation)."""
    if given is None:
        return _split_text(root, val_split, direction, "val_split"), None
    if isinstance(given, (str, os.PathLike)):
        folder = Path(given).expanduser()
        if folder.is_file():
            raise NotADirectoryError(f"val_data is a corpus folder (its {val_split}.xx files), a list of (source, "
                                     f"target) pairs or a (sources, targets) tuple, got the file {folder}")
        if not folder.is_dir():
            raise FileNotFoundError(f"val_data corpus folder not found: {folder} (expected {val_split}.xx files)")
        return _split_text(folder, val_split, direction, "val_split"), folder
    if (text := _pairs(given, "val_data")) is None:
        raise TypeError(f"val_data is a corpus folder, a list of (source, target) pairs or a (sources, targets) "
                        f"tuple, got {type(given).__name__}")
    return text, None


def _pairs(data: Any, name: str = "") -> Any:
    """``data`` as a ParallelText where it is one, a list of ``(source, target)`` sentence pairs, a
    ``(sources, targets)`` tuple of two equally long lists (zoo's ``(X, y)``) or a ``(source file, target file)``
    pair of ``pathlib.Path``; None for other kinds of data.
    ``name``: the argument it came as, for the error on an empty one."""
    from zoo.seq2seq.data import ParallelText

    if isinstance(data, ParallelText) and len(data) == 0:
        raise ValueError(f"no sentence pairs{' in ' + name if name else ''}: the ParallelText is empty; pass at least "
                         "one sentence pair")
    if isinstance(data, ParallelText):
        return data
    if isinstance(data, Iterator):
        data = list(data)  # zip(sources, targets) or a generator of pairs: read once, here
    if isinstance(data, Mapping) and "train" not in data:
        raise TypeError(f"seq2seq data as a dict is {{'train': pairs, 'val': pairs}}; got the keys {sorted(map(str, data))}"
                        ": sentences by language go in as a (sources, targets) tuple, e.g. (d['de'], d['en'])")
    if not isinstance(data, (list, tuple)):
        return None
    if _file_pair(data):
        return _parallel_files(data[0], data[1], name)
    if not data:
        raise ValueError(f"no sentence pairs{' in ' + name if name else ''}: the list is empty")

    def texts(seq: Any) -> bool:
        return isinstance(seq, (list, tuple)) and all(isinstance(s, str) for s in seq)

    # A tuple of two sentence lists is (sources, targets), a list holds (source, target) pairs. Two sentences in the
    # same kind of container as the whole, ((s, t), (s, t)) or [[s, t], [s, t]], read both ways: refused, as
    # [sources, targets] of two sentences each was read as two pairs, source paired with source
    two_texts = len(data) == 2 and all(map(texts, data))
    same_kind = tuple if isinstance(data, tuple) else list
    if two_texts and all(isinstance(d, same_kind) and len(d) == 2 for d in data):
        shown = "((s, t), (s, t))" if isinstance(data, tuple) else "[[s, t], [s, t]]"
        raise TypeError(f"{shown} reads both as two (source, target) pairs and as (sources, targets) of two "
                        "sentences each: pass pairs as a list of tuples, [(s, t), (s, t)], or (sources, targets) as "
                        "a tuple of two lists, ([s, s], [t, t])")
    if two_texts and isinstance(data, tuple):
        if not data[0] and not data[1]:  # sacreBLEU's IndexError after a trained epoch, where it is val_data
            raise ValueError(f"no sentence pairs{' in ' + name if name else ''}: (sources, targets) are two empty "
                             "lists; pass at least one sentence pair")
        return ParallelText(list(data[0]), list(data[1]))  # refuses lists of two lengths, naming both
    if two_texts and all(len(d) != 2 for d in data):
        # [sources, targets] as a list: read as such, it would turn into two pairs the day it held two sentences
        raise TypeError(f"a list of two lists of sentences ({len(data[0])} and {len(data[1])}) reads as [sources, "
                        "targets], but a list holds (source, target) pairs: pass (sources, targets) as a tuple, or "
                        "the pairs, list(zip(sources, targets))")
    if all(texts(p) and len(p) == 2 for p in data):
        return ParallelText([p[0] for p in data], [p[1] for p in data])
    # two file names as str read as one (source, target) sentence pair: a str is a sentence, as zoo.predict reads it
    files = len(data) == 2 and all(isinstance(p, str) and _names_file(p) for p in data)
    raise TypeError("seq2seq data in memory is a list of (source, target) sentence pairs, e.g. "
                    "[('Ein Hund läuft.', 'A dog runs.'), ...], or a (sources, targets) tuple of two lists"
                    + (f"; got two file names as str: to read a source file and its line-aligned target file, pass "
                       f"them as pathlib.Path, (Path({data[0]!r}), Path({data[1]!r}))" if files else
                       f"; got a {type(data).__name__} of {sorted({type(p).__name__ for p in data})}"
                       + ("; one sentence pair goes in a list, [(source, target)]"
                          if len(data) == 2 and all(isinstance(p, str) for p in data) else "")))


def _file_pair(data: Any) -> bool:
    """Whether ``data`` is a ``(source file, target file)`` pair of paths (``pathlib.Path``: a str is a sentence)."""
    return isinstance(data, (list, tuple)) and len(data) == 2 and all(isinstance(p, os.PathLike) for p in data)


def _names_file(text: str) -> bool:
    try:
        return Path(text).expanduser().is_file()
    except (OSError, ValueError):  # a sentence too long for a file name, or holding a NUL
        return False


def _parallel_files(src: os.PathLike, tgt: os.PathLike, name: str) -> Any:
    """A ``(source file, target file)`` pair of line-aligned text files (plain or ``.gz``; a file pair named
    other than a corpus folder's ``train.xx`` / ``train.yy``, as ``fairseq-preprocess --trainpref`` reads it): the
    sentence pairs of their lines. A pair of paths was refused as "seq2seq data in memory is a list of ...",
    naming neither the paths nor a way to read them."""
    from zoo.inputs import expand_home
    from zoo.seq2seq.data import load_parallel

    src_path, tgt_path = Path(expand_home(src)), Path(expand_home(tgt))
    text = load_parallel(src_path, tgt_path)  # refuses files of two lengths, naming both
    if len(text) == 0:
        raise ValueError(f"no sentence pairs{' in ' + name if name else ''}: {src_path} and {tgt_path} hold no lines, "
                         "expected one sentence per line")
    return text


def _train_val_pairs(data: Any) -> tuple[Any, Any] | None:
    """``(train, val)`` when ``data`` is a pair of sentence-pair sets (``(train_pairs, val_pairs)``, as every
    network takes ``(train, val)``), each a list of ``(source, target)`` pairs, a ``(sources, targets)`` tuple
    of two lists (``((X, y), (X_val, y_val))``), a ParallelText or a ``(source file, target file)`` pair of
    ``pathlib.Path``; None for anything else, a ``(sources, targets)`` tuple of two lists of sentences included (its
    items are sentences, not sets)."""
    from zoo.seq2seq.data import ParallelText

    def pair_set(seq: Any) -> bool:
        if isinstance(seq, ParallelText) or _file_pair(seq):
            return True
        if not (isinstance(seq, (list, tuple)) and seq and all(
                isinstance(p, (list, tuple)) and all(isinstance(s, str) for s in p) for p in seq)):
            return False
        # pairs, or (sources, targets) of any length, a set of fewer than 3 sentences included
        # (_pairs refuses ((s, t), (s, t)), which reads both ways)
        return all(len(p) == 2 for p in seq) or (isinstance(seq, tuple) and len(seq) == 2)

    if isinstance(data, (list, tuple)) and len(data) == 2 and all(map(pair_set, data)):
        return data[0], data[1]
    return None


def _pairs_data(model: Any, text: Any, train: bool, batches: dict[str, Any], bleu: dict[str, Any],
                vocab_size: int | None, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Training or evaluation data from sentence pairs in memory (``val_data=``: pairs too, or None)."""
    if not train:
        _need_tokenizer(model)
        return _loader(model, text, False, batches), {"eval_fn": _bleu_fn(text, bleu), **options}
    val = options.pop("val_data", None)
    val_text = _pairs(val, "val_data") if val is not None else None
    if val is not None and val_text is None:
        raise TypeError(f"val_data for sentence pairs is a list of (source, target) pairs or a (sources, targets) "
                        f"tuple, got {type(val).__name__}")
    loader, extra = _training(model, text, val_text, batches, bleu, vocab_size)
    return loader, _with_tokenizer(model, {**extra, **options}, {"max_tokens": batches["max_tokens"]})


def _training(model: Any, text: Any, val_text: Any, batches: dict[str, Any], bleu: dict[str, Any],
              vocab_size: int | None) -> tuple[Any, dict[str, Any]]:
    """The training loader (a tokenizer trained on ``text`` first where the model has none) and the loop's
    validation options: loss and BLEU on ``val_text``, which picks the best epoch."""
    if model.tokenizer is None:
        from zoo.seq2seq.tokenizer import train_tokenizer

        model.tokenizer = train_tokenizer(text.src + text.tgt, vocab_size=_tokenizer_size(model, vocab_size))
    elif vocab_size is not None and vocab_size != model.tokenizer.vocab_size:  # its fit: checked by corpus_data
        warnings.warn(f"vocab_size={vocab_size} is not applied: {model.registry_name} already has a tokenizer "
                      f"({model.tokenizer.vocab_size} tokens), which its weights were trained with and which "
                      "this run keeps; leave vocab_size out, or build the model without weights to train a "
                      "new tokenizer", stacklevel=user_stacklevel())
    if val_text is None:
        return _loader(model, text, True, batches), {}
    return _loader(model, text, True, batches), {"val_data": _loader(model, val_text, False, batches),
                                                 "eval_fn": _bleu_fn(val_text, bleu), "monitor": "val_bleu",
                                                 "monitor_mode": "max"}


def _loader(model: Any, text: Any, shuffle: bool, batches: dict[str, Any]) -> Any:
    from zoo.seq2seq.data import ParallelDataset, make_loader

    return make_loader(ParallelDataset(text, model.tokenizer, model.max_len), max_tokens=batches["max_tokens"],
                       batch_size=batches["batch_size"], shuffle=shuffle, seed=batches["seed"],
                       generator=_generator(batches), num_workers=batches["num_workers"])


def _loader_workers(model: Any, data: Any, pairs: Any, train: bool, options: dict[str, Any]) -> int:
    """``num_workers`` of the loaders built here (sentence pairs, a corpus folder, a ParallelDataset or a Subset of
    one): zoo.evaluate's take it (a fixed order: any number scores the same); a training run's collate in the main
    process, and a warning says why, as a ready DataLoader's own num_workers does (a run with workers trained on
    other batches than the num_workers=0 run of its seed: see make_loader)."""
    from zoo.seq2seq.data import parallel_items

    workers = options.get("num_workers") or 0
    built_here = pairs is not None or isinstance(data, (str, os.PathLike)) or parallel_items(data) is not None
    if not workers or not built_here:
        return 0
    if not train:
        return workers
    warnings.warn(f"num_workers={workers} is not applied: {model.registry_name} batches sentence pairs with a "
                  "sampler that draws a new order each time it is iterated, and a DataLoader with workers iterates "
                  "it once more per epoch, so workers would train on other batches than num_workers=0 of this "
                  "seed; its batches (padded token ids) are collated in the main process",
                  stacklevel=user_stacklevel())
    return 0


def _generator(batches: dict[str, Any]) -> Any:
    """An evaluation loader's own generator (see ``corpus_data``'s ``batches``); None for a training run's."""
    if not batches["own_generator"]:
        return None
    from zoo.engine.seed import epoch_generator

    return epoch_generator(batches["seed"], 0)


def _bleu_fn(text: Any, bleu: dict[str, Any]) -> Any:
    from zoo.seq2seq.translate import bleu_eval_fn

    n = bleu["n"]
    return bleu_eval_fn(text.src[:n] if n else text.src, text.tgt[:n] if n else text.tgt, beam_size=bleu["beam_size"],
                        amp=bleu["amp"])


def _need_tokenizer(model: Any) -> None:
    if model.tokenizer is None:
        raise ValueError(f"{model.registry_name} has no tokenizer yet: train it (zoo.train) or load weights that "
                         "carry one (zoo.build(name, weights=...))")


def _test_split(root: Path, direction: str, test_split: str | None) -> str:
    """The split evaluation scores: ``test_split`` as given, else Multi30k's ``test_2016_flickr`` where the
    folder has it, else ``test`` (a user's own ``test.xx``/``test.yy``), saying which files were read."""
    from zoo.seq2seq.data import MULTI30K_TEST, find_split, parse_direction

    if test_split is not None:
        return test_split
    src, tgt = parse_direction(direction)
    for name in (MULTI30K_TEST, "test"):
        try:
            found = find_split(root, name, src)
        except FileNotFoundError:
            continue
        if name != MULTI30K_TEST:  # Multi30k's own test set needs no word; a fallback does
            log.info("no %s.%s (Multi30k's test set) under %s: evaluating on %s and its .%s side (another split: "
                     "test_split=NAME, CLI: --set test_split=NAME)", MULTI30K_TEST, src, root, found.name, tgt)
        return name
    raise FileNotFoundError(
        f"no test files for {direction} under {root}: looked for {MULTI30K_TEST}.{src}[.gz] (Multi30k's) and "
        f"test.{src}[.gz]; name the split to score with test_split=NAME (CLI: --set test_split=NAME), e.g. "
        f"test_split='val' for val.{src}")


def _corpus_fingerprint(root: Path, direction: str, splits: tuple[str, ...]) -> str:
    """The corpus files a run reads, as :func:`zoo.engine.resume.files_fingerprint` sees them (names, sizes, first
    bytes): another corpus is another fingerprint."""
    from zoo.engine.resume import files_fingerprint
    from zoo.seq2seq.data import find_split

    return files_fingerprint([find_split(root, split, lang) for split in splits for lang in direction.split("-")],
                             root=root)


def _with_tokenizer(model: Any, options: dict[str, Any], recipe: dict[str, Any] | None = None) -> dict[str, Any]:
    """``options`` recording the training recipe and the tokenizer the batches are encoded with: a resume on
    another corpus (which would train another tokenizer) is refused, not trained under the checkpoint's."""
    from zoo.engine.resume import with_recipe
    from zoo.seq2seq.base import tokenizer_fingerprint

    recipe = dict(recipe or {})
    if model.tokenizer is not None:
        recipe["tokenizer"] = tokenizer_fingerprint(model.tokenizer)
    return with_recipe(options, data=recipe, may_change=("bleu_sentences", "beam_size") if "beam_size" in recipe else ())
