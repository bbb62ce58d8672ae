"""Greedy translation from an exported folder (``zoo.export(translator, folder)``), without the model.

    from zoo.seq2seq import ExportedTranslator
    t = ExportedTranslator("de_en_onnx")                  # encoder.onnx + decoder_step.onnx + tokenizer.json
    t.translate("Ein Hund läuft über die Wiese.")

ONNX graphs run in onnxruntime; ``.pt2`` graphs through ``torch.export.load``. The loop is
:func:`zoo.seq2seq.search.greedy_search`'s: the same source preparation as ``model.translate`` (at most
``max_len - 1`` tokens, then EOS, sentences batched by length), the same length limit, ``<pad>``/``<s>``
never emitted (nor ids past the tokenizer's vocabulary), a sentence stops at EOS, so the text equals
``model.translate(..., beam_size=1)``'s up to the export's tolerance (a near-tie between two tokens could go
either way).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ExportedTranslator"]


def _session(path: Path, threads: int | None) -> Callable[..., list[Any]]:
    """``run(*inputs) -> outputs`` of one graph: numpy arrays through onnxruntime; tensors through a ``.pt2``
    program, whose state and context go back into the next step as they came (a bfloat16 cache has no numpy
    dtype: ``Tensor.numpy()`` refused it, so a bfloat16 .pt2 export could not be decoded)."""
    if path.suffix == ".onnx":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return lambda *xs: session.run(None, dict(zip(names, xs)))
    import torch

    module = torch.export.load(str(path)).module()

    def run(*xs: Any) -> list[Any]:
        with torch.no_grad():
            return list(module(*(torch.from_numpy(x) if isinstance(x, np.ndarray) else x for x in xs)))

    return run


def _array(x: Any) -> np.ndarray:
    """An output as a numpy array to decode from: a tensor's bfloat16 as float32 (every bfloat16 value is one)."""
    if isinstance(x, np.ndarray):
        return x
    import torch

    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()


class ExportedTranslator:
    """Greedy decoding with the ``encoder`` and ``decoder_step`` graphs of a seq2seq export folder.

    ``threads``: onnxruntime's intra-op threads (default: its own choice, one per physical core).
    """

    def __init__(self, folder: str | os.PathLike, *, threads: int | None = None) -> None:
        folder = Path(folder).expanduser()
        index = folder / "export.json"
        if not index.is_file():
            raise FileNotFoundError(f"{folder} is not a seq2seq export folder (no export.json); write one with "
                                    "zoo.export(model, folder)")
        self.meta = json.loads(index.read_text(encoding="utf-8"))
        if "state" not in self.meta or set(self.meta.get("graphs", {})) != {"encoder", "decoder_step"}:
            raise ValueError(f"{folder}/export.json does not describe a seq2seq export (encoder + decoder_step)")
        graphs = self.meta["graphs"]
        self._encoder = _session(folder / graphs["encoder"]["file"], threads)
        self._step = _session(folder / graphs["decoder_step"]["file"], threads)
        self.tokenizer = None
        if self.meta.get("tokenizer"):
            from zoo.seq2seq.tokenizer import Tokenizer

            self.tokenizer = Tokenizer.from_json((folder / self.meta["tokenizer"]).read_text(encoding="utf-8"))
        self.max_len = int(self.meta["max_len"])
        self.pad_id, self.bos_id, self.eos_id = (int(self.meta[k]) for k in ("pad_id", "bos_id", "eos_id"))

    def greedy(self, src: np.ndarray, max_len: int | None = None) -> list[list[int]]:
        """Token ids (without BOS/EOS) for each row of ``src (B, S)`` int64 (EOS-terminated, PAD-padded)."""
        import torch

        from zoo.seq2seq.base import check_source
        from zoo.seq2seq.search import check_max_len, default_max_len

        src = np.asarray(src, dtype=np.int64)
        # as the eager model's search checks it: an id past the embedding's rows is read out of bounds by a graph
        # (garbage or a crash inside the runtime), a (B, 0) source decoded from an empty memory
        check_source(torch.from_numpy(src), int(self.meta.get("src_vocab") or np.iinfo(np.int64).max))
        max_len = check_max_len(max_len, self.max_len)  # model.translate's limit, not clipped silently
        if max_len is None:  # each row's own default, as model.translate's (not the longest source's)
            ends = default_max_len(torch.from_numpy(src), self.pad_id, self.max_len).numpy()
        else:
            ends = np.full(src.shape[0], max_len)
        ends = np.minimum(ends, self.max_len - 1)  # a default past the decoder's positions ends there
        outs = self._encoder(src)
        n_state = len(self.meta["state"])
        state, context = outs[:n_state], outs[n_state:]
        tokens = np.full((src.shape[0], 1), self.bos_id, dtype=np.int64)
        done = np.zeros(src.shape[0], dtype=bool)
        out = []
        for t in range(int(ends.max(initial=0))):
            logits, *state = self._step(tokens, *state, *context)
            logits = _array(logits)
            logits[:, [self.pad_id, self.bos_id]] = -np.inf
            if self.tokenizer is not None:  # ids past the tokenizer's decode as "" (search's rule too)
                logits[:, self.tokenizer.vocab_size:] = -np.inf
            nxt = np.where(done | (ends <= t), self.eos_id, logits.argmax(-1))
            out.append(nxt)
            done |= nxt == self.eos_id
            if done.all():
                break
            tokens = nxt[:, None].astype(np.int64)
        rows = np.stack(out, 1).tolist() if out else [[] for _ in range(src.shape[0])]
        return [r[: r.index(self.eos_id)] if self.eos_id in r else r for r in rows]

    def translate(self, sentences: Sequence[str] | str | os.PathLike[str], *, max_len: int | None = None,
                  batch_size: int = 64) -> list[str] | str:
        """Detokenized translations of the inputs ``zoo.predict`` of the model takes, read by the same
        :func:`~zoo.seq2seq.sentences.text_inputs`: a sentence gives a sentence back; a list, or a text file
        given as a ``pathlib.Path`` (one sentence per line), gives a list."""
        if self.tokenizer is None:
            raise ValueError("this export has no tokenizer.json (the model had none): use greedy() on token ids")
        from zoo.seq2seq.sentences import join_pieces, segments, text_inputs
        from zoo.seq2seq.translate import check_search_options

        # model.translate's checks: unchecked, max_len=0 would give "" for every sentence, and max_len=1000 would
        # be clipped to the model's positions without a word, where model.translate refuses both
        _, _, max_len, batch_size = check_search_options(1, 0.0, max_len, batch_size, self.max_len)

        items, single = text_inputs(sentences)
        # the same inputs as model.translate: blank ones give "", long ones go sentence by sentence
        pieces = segments(items, self.tokenizer.encode_batch(items), self.tokenizer, self.max_len - 1)
        ids = [x + [self.eos_id] for _, x, _ in pieces]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths share a batch
        out: list[list[int]] = [[] for _ in ids]
        for s in range(0, len(order), batch_size):
            chunk = order[s : s + batch_size]
            src = np.full((len(chunk), max(len(ids[i]) for i in chunk)), self.pad_id, dtype=np.int64)
            for r, i in enumerate(chunk):
                src[r, : len(ids[i])] = ids[i]
            for i, hyp in zip(chunk, self.greedy(src, max_len)):
                out[i] = hyp
        texts = join_pieces(pieces, self.tokenizer.decode_batch(out), len(items))
        return texts[0] if single else texts
