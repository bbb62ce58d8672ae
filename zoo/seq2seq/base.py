"""What every seq2seq model in zoo offers: teacher-forced ``forward``, incremental ``start``/``step`` for
search, ``translate(list[str]) -> list[str]`` and one-file save/load (weights + tokenizer + config).

Special token ids are fixed across the family (see :mod:`zoo.seq2seq.tokenizer`): a model, its tokenizer
and the search agree on them without any extra configuration.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from zoo.api import ModelState
from zoo.engine.network import Network
from zoo.seq2seq.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer

__all__ = ["EXTRA_STATE_KEY", "Seq2SeqModel", "check_source", "check_step_tokens", "decode_extra_state",
           "tokenizer_fingerprint"]

EXTRA_STATE_KEY = "_extra_state"  # nn.Module's key for get_extra_state()


def decode_extra_state(state: Any) -> dict[str, Any]:
    """The ``{"config": {...}, "tokenizer": json-or-None}`` stored by :meth:`Seq2SeqModel.get_extra_state`."""
    if not (isinstance(state, Tensor) and state.dtype == torch.uint8 and state.dim() == 1):
        raise ValueError(
            f"seq2seq extra state must be a 1-D uint8 tensor of JSON, got {type(state).__name__}"
            + (f" {state.dtype} {tuple(state.shape)}" if isinstance(state, Tensor) else "")
        )
    blob = json.loads(state.cpu().numpy().tobytes().decode("utf-8"))
    if not isinstance(blob, dict) or "config" not in blob:
        raise ValueError("seq2seq extra state is not the JSON zoo writes (no 'config' key)")
    return blob


def tokenizer_fingerprint(tokenizer: Tokenizer) -> str:
    """``"N tokens, <hash>"`` of the tokenizer's whole JSON: what a checkpoint records of the vocabulary its
    batches were encoded with (weights trained on one vocabulary are meaningless under another)."""
    import hashlib

    return f"{tokenizer.vocab_size} tokens, {hashlib.sha256(tokenizer.to_json().encode()).hexdigest()[:16]}"


def check_source(src: Any, vocab: int) -> None:
    """Refuse a source ``start`` cannot encode, naming what came: not ``(B, S)`` integer ids (a 1-D row failed in the
    search's length rule as "Dimension out of range"), no position per row (the Transformer decoded from an empty
    memory without a word), or an id outside the embedding's ``vocab`` rows (an IndexError inside the embedding)."""
    if not isinstance(src, Tensor) or src.dim() != 2 or src.dtype.is_floating_point or src.dtype.is_complex \
            or src.dtype == torch.bool:
        got = f"{src.dtype} of shape {tuple(src.shape)}" if isinstance(src, Tensor) else type(src).__name__
        raise ValueError(f"src must be (B, S) integer token ids, got {got}; one sentence is src[None]")
    if src.shape[0] and not src.shape[1]:
        raise ValueError(f"src must hold at least one position per row, got shape {tuple(src.shape)}; "
                         "end each source with EOS as model.translate does")
    if src.numel() and not (0 <= (lo_hi := torch.stack(torch.aminmax(src)).tolist())[0] and lo_hi[1] < vocab):
        bad = src[(src < 0) | (src >= vocab)][0]
        raise ValueError(f"src holds token id {int(bad)}, outside this model's source vocabulary of {vocab} ids "
                         f"(0..{vocab - 1}): ids from another tokenizer, or a tokenizer larger than the model")


def check_step_tokens(tokens: Tensor) -> None:
    """Refuse what a model's ``step`` cannot feed: ``tokens`` (made ``(B, T)`` from ``(B,)``) of another rank or
    with no position."""
    if tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(
            f"tokens must be (B,) or (B, T) token ids with T >= 1, got shape {tuple(tokens.shape)}; "
            "pass the next token of each row, or the forced prefix as (B, T)"
        )


class Seq2SeqModel(Network, nn.Module):
    """Base class of :class:`~zoo.seq2seq.transformer.Seq2SeqTransformer` and :class:`~zoo.seq2seq.gru.Seq2SeqGRU`.

    Subclasses implement ``forward(src, tgt_in) -> logits (B, T, V)`` (teacher forcing), and
    ``start(src) -> state`` / ``step(state, tokens (B,)) -> logits (B, V)`` / ``state.reorder(index)``
    for search. ``tokenizer`` is attached after training or loading (it is not a parameter).
    """

    pad_id = PAD_ID
    bos_id = BOS_ID
    eos_id = EOS_ID
    registry_name = ""
    # zoo.predict hands a str over as written: here it is a sentence, which may start with "~" or name a file,
    # not a path to expand ("~/s.txt" translated "/home/me/s.txt"); a pathlib.Path is a file (text_inputs)
    zoo_text_inputs = True
    # what zoo.finetune's refusal calls this model: a translator has no head to replace, so its fine-tuning is
    # training from its weights (and tokenizer), which the refusal shows
    zoo_finetuned_by_training = "translator"

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.tokenizer: Tokenizer | None = None

    # --- search interface (implemented by subclasses) -------------------------------------------------
    def start(self, src: Tensor) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self, state: Any, tokens: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def max_len(self) -> int:
        return int(getattr(self.config, "max_len", 256))

    # --- user API --------------------------------------------------------------------------------------
    def translate(
        self,
        sentences: Sequence[str] | str | os.PathLike[str],
        *,
        beam_size: int = 1,
        length_penalty: float = 0.6,
        max_len: int | None = None,
        batch_size: int = 64,
        progress: bool = False,
        device: str | torch.device | None = None,
        amp: str | None = "auto",
    ) -> list[str] | str:
        """Translate detokenized sentences; greedy with ``beam_size=1``, beam search otherwise.

        A single string gives a single string back. Empty or blank inputs give ``""``; characters never
        seen in training are fine (the byte-level tokenizer has no unknowns); inputs longer than the
        model's ``max_len`` are translated sentence by sentence (see :func:`zoo.seq2seq.translate.translate`).
        Runs on the model's device (``device=`` moves the model there) at ``amp="auto"``: bf16 where this
        device computes GEMMs faster in it, else fp32; ``amp=None`` is exact fp32, where a beam search does not
        turn on the other sentences in the batch as bf16's can (see :func:`~zoo.seq2seq.translate.translate`).
        """
        from zoo.seq2seq.translate import translate

        return translate(
            self,
            sentences,
            beam_size=beam_size,
            length_penalty=length_penalty,
            max_len=max_len,
            batch_size=batch_size,
            progress=progress,
            device=device,
            amp=amp,
        )

    # --- zoo's contract ---------------------------------------------------------------------------------
    def zoo_recipe(self, *, train: bool) -> dict[str, Any]:
        from zoo.seq2seq.translate import seq2seq_forward, training_config

        if not train:
            return {"forward_fn": seq2seq_forward, "metrics": ("accuracy",)}
        return {k: v for k, v in training_config().items() if k != "epochs"}

    def zoo_data(self, data: Any, *, train: bool, **options: Any) -> tuple[Any, dict[str, Any]]:
        """A parallel-corpus folder (``train.xx``/``train.yy``, ``val.*``, ``test_2016_flickr.*``, plain or
        ``.gz``; Multi30k's layout) with ``direction="xx-yy"`` (default: the model's own), or a
        Dataset/DataLoader of ``((src, tgt_in), tgt_out)`` batches. See :func:`zoo.seq2seq.corpus.corpus_data`."""
        from zoo.seq2seq.corpus import corpus_data

        return corpus_data(self, data, train=train, **options)

    def zoo_train(self, data: Any, **config: Any) -> Any:
        """``zoo.train(model, data)`` (:meth:`Network.zoo_train`); a call that fails before its weights change
        leaves the direction the model was labelled with (the data hook records the run's before the loop,
        where the checkpoints' recipe reads it). One stopped after an optimizer step (a Ctrl-C mid-run) keeps
        the run's: its weights were trained that way (told apart by the parameters' sums, one pass over them:
        the engine's flat optimizer buffers leave the parameters' version counters as they were)."""
        own = getattr(self.config, "direction", None)
        before = self._weights_sum()
        try:
            return super().zoo_train(data, **config)
        except BaseException:
            if torch.equal(self._weights_sum(), before):
                self.config.direction = own
            raise

    @torch.no_grad()
    def _weights_sum(self) -> torch.Tensor:
        # on the CPU in float64 both times: a CUDA sum after the trainer moved the model, against a CPU sum
        # before, could differ in the last bit with no step taken
        return torch.stack([p.detach().cpu().double().sum() for p in self.parameters()])  # (n_params,)

    def zoo_data_options(self) -> list[str]:
        """``corpus_data``'s options (``direction``, ``max_tokens``, ``bleu_sentences``, ...), which ``zoo_data``
        hands on as ``**options``."""
        import inspect

        from zoo.seq2seq.corpus import corpus_data

        return [p.name for p in inspect.signature(corpus_data).parameters.values()
                if p.kind is p.KEYWORD_ONLY and p.name != "train"]

    def zoo_recorded_in_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The tokenizer a checkpoint's weights were trained with (its model state carries it), compared on
        resume with the one this run encodes its batches with, also for checkpoints that recorded no recipe:
        the restore would otherwise swap the model's tokenizer for the checkpoint's behind the batches' back."""
        try:
            blob = decode_extra_state(state.get(EXTRA_STATE_KEY))
        except (ValueError, UnicodeDecodeError):
            return {}
        return {"data.tokenizer": tokenizer_fingerprint(Tokenizer.from_json(blob["tokenizer"]))} \
            if blob.get("tokenizer") else {}

    def zoo_predict(self, inputs: Sequence[str] | str | os.PathLike[str], *, beam_size: int = 1,
                    length_penalty: float = 0.6, max_len: int | None = None, batch_size: int = 64,
                    progress: bool = False, device: str | torch.device | None = None,
                    amp: str | None = "auto") -> list[str] | str:
        """Sentences -> translations (a string, a sentence as written even where it names a file, gives a string;
        a ``pathlib.Path`` of a text file, one sentence per line, gives a list); the options are
        :meth:`translate`'s."""
        return self.translate(inputs, beam_size=beam_size, length_penalty=length_penalty, max_len=max_len,
                              batch_size=batch_size, progress=progress, device=device, amp=amp)

    def zoo_state(self) -> ModelState:
        if self.tokenizer is None:
            raise ValueError(
                f"{type(self).__name__} has no tokenizer: train one (zoo.train on a corpus folder does, or "
                "zoo.seq2seq.train_tokenizer) before saving, so that the file can translate on its own"
            )
        return ModelState(self.registry_name, asdict(self.config), self.state_dict())

    def save(self, path: str | Path) -> Path:
        """Write weights, tokenizer and config to one safetensors file (atomic): ``zoo.save(self, path)``."""
        from zoo.api import save

        return save(self, path)

    # The tokenizer and config travel *inside* the state dict, as PyTorch's per-module extra state (a
    # uint8 tensor of JSON): every way a state dict is written (hub.save_weights, hub.add_weights with
    # fp16 storage, engine checkpoints, a plain torch.save) keeps the model translatable from one file.
    def get_extra_state(self) -> Tensor:
        blob = {"config": asdict(self.config), "tokenizer": self.tokenizer.to_json() if self.tokenizer else None}
        return torch.frombuffer(bytearray(json.dumps(blob).encode("utf-8")), dtype=torch.uint8)

    def set_extra_state(self, state: Any) -> None:
        blob = decode_extra_state(state)
        self.tokenizer = Tokenizer.from_json(blob["tokenizer"]) if blob.get("tokenizer") else None

    def extra_repr(self) -> str:
        return f"tokenizer={'yes' if self.tokenizer is not None else 'none'}"

