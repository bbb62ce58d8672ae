"""Parallel text: Multi30k (gzip, both directions), a user's own pair of files, and token-budget batches.

A batch is ``((src (B, S), tgt_in (B, T)), tgt_out (B, T))``, right-padded with ``PAD_ID``; ``tgt_in``
starts with BOS and ``tgt_out`` ends with EOS (teacher forcing). Batches are formed from sentences of
similar length (sorted within large shuffled pools) so that padding stays small, and are sized by a
token budget ``max_tokens`` (the longest sentence times the number of rows), as fairseq does, or by a
sentence count ``batch_size``.
"""

from __future__ import annotations

import gzip
import random
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler, Subset

from zoo._stacklevel import user_stacklevel
from zoo.engine.distributed import sampler_place
from zoo.inputs import whole_number
from zoo.seq2seq.tokenizer import BLANK_CHARS, BOS_ID, EOS_ID, PAD_ID, Tokenizer

__all__ = [
    "MULTI30K_TEST",
    "ParallelDataset",
    "ParallelText",
    "TokenBucketSampler",
    "collate",
    "find_split",
    "load_multi30k",
    "load_parallel",
    "make_loader",
    "parallel_items",
    "parse_direction",
    "read_lines",
]

MULTI30K_TEST = "test_2016_flickr"


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file (``.gz`` transparently), without their line endings; a byte-order mark
    (Windows editors write one) is not part of the first line. Lines end at ``\n`` alone (``\r\n`` too), as
    ``wc -l`` and the files' other side count them: a stray ``\r`` inside a line (text pasted from a web page)
    is a space to the tokenizer, where Python's universal newlines split the line there and misaligned a
    parallel corpus."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"text file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="\n") as f:
            return [line.removesuffix("\n").removesuffix("\r") for line in f]
    except UnicodeDecodeError as err:
        raise ValueError(_not_utf8(path, opener, err)) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:  # gzip's own messages name no file
        raise ValueError(f"{path} is not a whole gzip file ({type(err).__name__}: {err}): a download cut short, or "
                         f"plain text named .gz; download it again (gzip -t {path.name} checks it), or drop the .gz "
                         "from a plain text file's name") from None


def _not_utf8(path: Path, opener: Any, err: UnicodeDecodeError) -> str:
    """The error for a file that is not UTF-8, naming the first line that is not (the decoder's own offset counts
    from a chunk of the file, so it located nothing) and a conversion that fits the file: iconv on a .gz converted
    its compressed bytes. One stray byte in a UTF-8 file is fixed in its line: converting the whole file from
    Latin-1 would double-encode every other umlaut."""
    where = ""
    with opener(path, "rb") as f:
        for n, raw in enumerate(f, 1):  # lines end at b"\n" alone, as read_lines counts them
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                shown = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
                where = f", line {n}: {shown[max(0, bad.start - 30):bad.start + 30]!r}"
                err = bad
                break
    convert = (f"zcat {path.name} | iconv -f latin1 -t utf-8 | gzip > utf8.gz" if path.suffix == ".gz" else
               f"iconv -f latin1 -t utf-8 {path.name} > utf8.txt")
    return (f"{path} is not UTF-8 text (byte 0x{err.object[err.start]:02x}: {err.reason}{where}): save it as UTF-8: "
            f"fix that line where the rest of the file is UTF-8, or convert a file in another encoding as a whole, "
            f"e.g. {convert}")


@dataclass
class ParallelText:
    """Aligned source and target sentences."""

    src: list[str]
    tgt: list[str]

    def __post_init__(self) -> None:
        if len(self.src) != len(self.tgt):
            raise ValueError(f"parallel text is not aligned: {len(self.src)} source vs {len(self.tgt)} target lines")
        # sentence pairs given in memory ([(s, t), ...], (sources, targets)) meet the files' check here, said by
        # the pair's index (load_parallel has refused a file's line, naming the file, before this)
        found = _first_one_sided_blank(self.src, self.tgt, ("source", "target"))
        if found is not None:
            i, blank, other, text, count = found
            more = f" ({count} such pairs, the first shown)" if count > 1 else ""
            raise ValueError(
                f"sentence pairs are misaligned: the pair at index {i} has a blank {blank} but a {other} "
                f"({text[:60]!r}){more}; expected a sentence and its translation in every pair (a pair blank on both "
                f"sides is kept). A sentence missing on one side shifts every pair after it: fix that {blank}, or "
                f"drop the pair at index {i}")

    def __len__(self) -> int:
        return len(self.src)

    def subset(self, n: int | None) -> ParallelText:
        return self if n is None else ParallelText(self.src[:n], self.tgt[:n])

    def take(self, indices: Sequence[int] | None) -> ParallelText:
        """The pairs at ``indices``, in that order (None: all of them, this text itself)."""
        if indices is None:
            return self
        return ParallelText([self.src[i] for i in indices], [self.tgt[i] for i in indices])


def load_parallel(src_path: str | Path, tgt_path: str | Path) -> ParallelText:
    """A user's own pair of line-aligned files (plain or ``.gz``)."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        # blank lines at the end of the longer file (an editor's extra line break) are the usual cause: said so
        longer, extra = (src_path, src[len(tgt):]) if len(src) > len(tgt) else (tgt_path, tgt[len(src):])
        hint = (f"; the extra {len(extra)} line(s) at the end of {longer} are blank: delete them"
                if all(map(_blank, extra)) else "")
        raise ValueError(
            f"parallel files differ in length: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}{hint}"
        )
    _refuse_one_sided_blanks(src, tgt, src_path, tgt_path)
    return ParallelText(src, tgt)


def _blank(line: str) -> bool:
    """Whether ``line`` holds no text to the tokenizer (whitespace, zero-width characters: :func:`normalize_text`).
    str.strip is that test at C speed; normalize_text on every line of a corpus took ten times as long as reading
    it."""
    return not line.strip(BLANK_CHARS)


def _first_one_sided_blank(src: Sequence[str], tgt: Sequence[str], names: tuple[Any, Any]) -> tuple | None:
    """The first pair blank on one side only, as ``(index, the blank side's name, the other's, the other's text,
    how many such pairs)`` with ``names`` the sides' (``("source", "target")``, the files); None where there is
    none. Such a pair is a sentence dropped or a line break added on that side, so every pair from there on may
    be misaligned (equal line counts hide it when a line went missing on the other side as well); it was kept as
    an empty source (or target) and a sentence, and trained on without a word. A pair blank on both sides stays
    a pair (fairseq-preprocess and Hugging Face datasets keep one too)."""
    one_sided = [i for i, (s, t) in enumerate(zip(src, tgt)) if _blank(s) != _blank(t)]
    if not one_sided:
        return None
    i = one_sided[0]
    if _blank(src[i]):
        return i, names[0], names[1], tgt[i], len(one_sided)
    return i, names[1], names[0], src[i], len(one_sided)


def _refuse_one_sided_blanks(src: list[str], tgt: list[str], src_path: str | Path, tgt_path: str | Path) -> None:
    """A line blank on one side only (:func:`_first_one_sided_blank`), refused naming both files and the line."""
    found = _first_one_sided_blank(src, tgt, (src_path, tgt_path))
    if found is None:
        return
    i, blank, other, text, count = found
    more = f" ({count} such lines, the first shown)" if count > 1 else ""
    raise ValueError(
        f"parallel files are misaligned: line {i + 1} of {blank} is blank but line {i + 1} of {other} is not "
        f"({text[:60]!r}){more}; expected the sentence and its translation on the same line of both files. A "
        f"sentence missing on one side shifts every pair after it: fix that line in {Path(blank).name}, or delete "
        f"line {i + 1} from both files")


def parse_direction(direction: str) -> tuple[str, str]:
    """``"de-en"`` -> ``("de", "en")``."""
    parts = str(direction).split("-")
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ValueError(f"direction must look like 'de-en' (source-target language codes), got {direction!r}")
    return parts[0], parts[1]


def find_split(root: str | Path, split: str, lang: str, *, option: str | None = None) -> Path:
    """``root/split.lang`` or ``root/split.lang.gz`` (also under ``root/task1_raw`` for Multi30k; both in one
    folder is an error unless they hold the same text); the error for none names the ``option`` (``val_split``,
    ``test_split``) that picks another split, when there is one."""
    root = Path(root)
    tried = []
    for folder in (root, root / "task1_raw"):
        packed, plain = folder / f"{split}.{lang}.gz", folder / f"{split}.{lang}"
        tried += [packed, plain]
        if packed.is_file() and plain.is_file():
            _refuse_two_texts(packed, plain)
        for path in (packed, plain):
            if path.is_file():
                return path
    other = (f"; the folder's own split name goes in {option}=NAME (CLI: --set {option}=NAME), for files "
             f"NAME.{lang}" if option else "")
    raise FileNotFoundError(f"no {split!r} file for language {lang!r} under {root} (looked for {tried[0].name} / "
                            f"{tried[1].name}){other}")


def _refuse_two_texts(packed: Path, plain: Path) -> None:
    """Both ``x.gz`` and ``x`` in one folder, holding different text: one of them is not the corpus meant (an
    unpacked copy cleaned by hand was never read, the .gz winning without a word). An identical copy
    (``gunzip -k``) is no question."""
    try:
        with gzip.open(packed, "rb") as f:
            same = f.read() == plain.read_bytes()
    except (OSError, EOFError, zlib.error):  # a broken .gz is not the plain file's text either
        same = False
    if not same:
        raise ValueError(f"{packed.parent} holds both {packed.name} and {plain.name}, with different text, so which "
                         f"one is the corpus is ambiguous: expected one of them; delete or rename the one not "
                         "meant")


def load_multi30k(root: str | Path, split: str = "train", direction: str = "de-en", *,
                  option: str | None = None) -> ParallelText:
    """Multi30k task 1 (``train``, ``val``, ``test_2016_flickr``) from the gzip files of
    github.com/multi30k/dataset ``data/task1/raw``, or any folder of ``split.xx`` files; ``direction`` picks
    source and target (``option``: see :func:`find_split`)."""
    s, t = parse_direction(direction)
    return load_parallel(find_split(root, split, s, option=option), find_split(root, split, t, option=option))


class ParallelDataset(Dataset):
    """Tokenized pairs; item ``i`` is ``(src_ids + [EOS], [BOS] + tgt_ids + [EOS])``, clipped to ``max_len``
    (the model's positions); a warning counts the pairs that had to be clipped. ``tokenizer_fingerprint``: of
    the tokenizer that encoded them, which a model's own must be to train or be scored on them."""

    def __init__(self, text: ParallelText, tokenizer: Tokenizer, max_len: int = 256) -> None:
        from zoo.seq2seq.base import tokenizer_fingerprint

        self.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer)
        src, tgt = tokenizer.encode_batch(text.src), tokenizer.encode_batch(text.tgt)
        self.clipped = sum(len(s) > max_len - 1 or len(t) > max_len - 2 for s, t in zip(src, tgt))
        if self.clipped:
            warnings.warn(f"{self.clipped} of {len(src)} sentence pairs are longer than the model's max_len "
                          f"{max_len} tokens and were clipped (their ends are not seen)",
                          stacklevel=user_stacklevel())
        self.src = [ids[: max_len - 1] + [EOS_ID] for ids in src]
        self.tgt = [[BOS_ID] + ids[: max_len - 2] + [EOS_ID] for ids in tgt]
        self.text = text

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.src[i], self.tgt[i]

    def lengths(self) -> list[int]:
        return [max(len(s), len(t)) for s, t in zip(self.src, self.tgt)]

    def num_tokens(self) -> int:
        """Target tokens predicted per epoch (the throughput unit)."""
        return sum(len(t) - 1 for t in self.tgt)


def parallel_items(dataset: Any) -> tuple[ParallelDataset, list[int] | None] | None:
    """``(the ParallelDataset, the indices of its items that dataset holds)`` for a ParallelDataset (indices None:
    all of it) or a torch ``Subset`` of one (``random_split``'s parts, Subsets of Subsets too); None for any other
    data. One reading for the batches and for the sentences BLEU scores: a Subset went to torch's default collate,
    and was scored on every sentence of its parent."""
    chain = []
    while isinstance(dataset, Subset):
        chain.append(dataset.indices)
        dataset = dataset.dataset
    if not isinstance(dataset, ParallelDataset):
        return None
    indices: list[int] | None = None
    for outer in reversed(chain):  # the innermost Subset's indices are the parent's; each outer one indexes them
        indices = [int(i) for i in outer] if indices is None else [indices[int(i)] for i in outer]
    return dataset, indices


class TokenBucketSampler(Sampler[list[int]]):
    """Batches of similar-length examples whose padded size stays under ``max_tokens``, or of ``batch_size``
    examples each (both given: whichever cap a batch reaches first, as fairseq's ``--max-tokens`` with
    ``--batch-size``).

    Each epoch shuffles the examples, sorts them by length inside pools of ``pool`` batches' worth,
    cuts batches along the sorted order and shuffles the batch order (``shuffle=False``: one fixed,
    sorted order, for evaluation). ``set_epoch`` makes the order depend on the epoch, deterministically.

    Under DDP every process builds the same epoch's batches from ``(seed, epoch)`` and takes its share,
    batches ``rank, rank + world_size, ...``, so ``batch_size`` / ``max_tokens`` are per process, as the
    engine's ``batch_size``. Shuffled (training), the list is first padded with its own first batches to a
    multiple of ``world_size``, as torch's DistributedSampler pads: every process runs the same number of
    steps (one short of the others would leave them waiting in DDP's gradient all-reduce). Unshuffled
    (evaluation), each batch goes to one process only, as the engine's ShardSampler: each sentence is scored
    once when the ranks' results are gathered. ``rank`` / ``world_size`` default to the process's place when
    an epoch starts (:meth:`place`): training reads torchrun's env (``RANK`` / ``WORLD_SIZE``) or the process
    group; evaluation shares batches out only in a live process group, the one that gathers the results
    (without one, as in ``zoo.evaluate`` before any ``fit``, every process scores every batch).
    """

    def __init__(
        self, lengths: Sequence[int], max_tokens: int | None = 4096, shuffle: bool = True, seed: int = 0,
        pool: int = 100, *, batch_size: int | None = None, rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        max_tokens = whole_number(max_tokens, "max_tokens", allow_none=True)
        batch_size = whole_number(batch_size, "batch_size", allow_none=True)
        if max_tokens is None and batch_size is None:
            raise ValueError("give max_tokens (tokens per batch) or batch_size (sentences per batch), or both")
        if max_tokens is not None and max_tokens < max(lengths, default=0):
            raise ValueError(f"max_tokens={max_tokens} is smaller than the longest example ({max(lengths)} tokens)")
        self.lengths = list(lengths)
        self.max_tokens, self.batch_size = max_tokens, batch_size
        self.shuffle, self.seed, self.pool = shuffle, seed, pool
        self._given = tuple(whole_number(value, name, minimum=0, allow_none=True, hint="torchrun's")
                            for name, value in (("rank", rank), ("world_size", world_size)))
        self.place()  # a rank outside world_size is refused here, not at the first epoch
        self.epoch = 0
        self._made: tuple[tuple[int, tuple[int, int]], list[list[int]]] | None = None  # (epoch, place), batches

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def place(self) -> tuple[int, int]:
        """``(rank, world_size)`` the batches are shared out by now: as given, else this process's own."""
        return sampler_place(*self._given, training=self.shuffle)

    def _make(self, epoch: int) -> list[list[int]]:
        """This process's batches of epoch ``epoch`` (all of them in one process)."""
        batches = self._all_batches(epoch)
        rank, world = self.place()
        if world == 1:
            return batches
        if self.shuffle and batches:  # equal shares: every rank takes part in every gradient all-reduce
            total = -(-len(batches) // world) * world
            batches = [batches[i % len(batches)] for i in range(total)]
        return batches[rank::world]

    def _all_batches(self, epoch: int) -> list[list[int]]:
        """Every process's batches of epoch ``epoch``: the same list on every rank, from ``(seed, epoch)``."""
        idx = list(range(len(self.lengths)))
        rng = random.Random(self.seed * 1_000_003 + epoch)
        if self.shuffle:
            rng.shuffle(idx)
            mean = max(1.0, sum(self.lengths) / max(1, len(self.lengths)))
            rows = min(self.max_tokens / mean if self.max_tokens is not None else float("inf"),
                       self.batch_size if self.batch_size is not None else float("inf"))
            pool = max(1, int(self.pool * rows))
            idx = [i for s in range(0, len(idx), pool) for i in sorted(idx[s : s + pool], key=self.lengths.__getitem__)]
        else:
            idx.sort(key=self.lengths.__getitem__)
        batches, cur, longest = [], [], 0
        for i in idx:
            n = max(longest, self.lengths[i])
            if cur and self._full(len(cur), n):
                batches.append(cur)
                cur, n = [], self.lengths[i]
            cur.append(i)
            longest = n
        if cur:
            batches.append(cur)
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def _full(self, rows: int, longest: int) -> bool:
        """Whether a batch of ``rows`` examples may not take one more, whose padded length would be ``longest``."""
        over_tokens = self.max_tokens is not None and longest * (rows + 1) > self.max_tokens
        return over_tokens or (self.batch_size is not None and rows >= self.batch_size)

    def _epoch_batches(self) -> list[list[int]]:
        """The batches of the coming epoch (``self.epoch``) at this process's place, made once for both len()
        and the iteration."""
        key = (self.epoch, self.place())
        if self._made is None or self._made[0] != key:
            self._made = (key, self._make(self.epoch))
        return self._made[1]

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._epoch_batches()
        if self.shuffle:
            self.epoch += 1  # a fresh order next epoch even when the loop never calls set_epoch
        return iter(batches)

    def __len__(self) -> int:
        # the coming epoch's count, which a token budget changes from epoch to epoch: the previous epoch's made a
        # trainer that reads len() at each epoch's start leave the batches past it never stepped
        return len(self._epoch_batches())


def _pad(rows: Sequence[Sequence[int]]) -> Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
    return out


def collate(batch: Sequence[tuple[list[int], list[int]]]) -> tuple[tuple[Tensor, Tensor], Tensor]:
    """``[(src, tgt), ...]`` -> ``((src (B, S), tgt_in (B, T)), tgt_out (B, T))``."""
    src = _pad([b[0] for b in batch])
    tgt = _pad([b[1] for b in batch])
    return (src, tgt[:, :-1]), tgt[:, 1:]


def _item_lengths(dataset: Any) -> list[int]:
    """Each item's length: a ParallelDataset's, a Subset's of one, or a dataset of the user's with ``lengths()``."""
    found = parallel_items(dataset)
    if found is None:
        return dataset.lengths()
    parent, indices = found
    lengths = parent.lengths()
    return lengths if indices is None else [lengths[i] for i in indices]


def make_loader(
    dataset: ParallelDataset | Subset, max_tokens: int | None = 4096, shuffle: bool = True, seed: int = 0, *,
    batch_size: int | None = None, rank: int | None = None, world_size: int | None = None,
    generator: torch.Generator | None = None, num_workers: int = 0,
) -> DataLoader:
    """A DataLoader with a :class:`TokenBucketSampler` (pass it to ``zoo.engine.fit`` as it is): batches of at most
    ``max_tokens`` padded tokens and/or ``batch_size`` sentences (None: no such cap), per process; under
    torchrun each process gets its share of the batches (``rank`` / ``world_size``: see the sampler).
    ``generator``: the loader's own (it draws each pass's base seed, which only seeds workers; the order is
    the sampler's, from ``seed``); None, as a DataLoader has it, draws that seed from the global torch
    generator, one number per pass, which model code (dropout) draws from too. ``num_workers``: processes that
    collate the batches; for an unshuffled loader only (zoo.evaluate's): the sampler draws a new order each time
    it is iterated, and a DataLoader with workers iterates it once more per pass than one without, so a
    shuffled loader with workers trains on another order than num_workers=0 of the same seed. ``dataset``: a
    ParallelDataset or a torch ``Subset`` of one (:func:`parallel_items`), batched by its own items' lengths."""
    sampler = TokenBucketSampler(_item_lengths(dataset), max_tokens=max_tokens, shuffle=shuffle, seed=seed,
                                 batch_size=batch_size, rank=rank, world_size=world_size)
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, generator=generator, num_workers=num_workers)
