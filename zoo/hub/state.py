"""State dicts on disk: safetensors for our own files, ``torch.load(weights_only=True)`` for upstream ones.

Loading never runs code from a file: safetensors holds only tensors and a JSON header, and a pickle
(``.pt``/``.pth``/``.bin``) goes through PyTorch's restricted unpickler, which refuses every global that
is not a tensor, a number, a string or a container (a ``__reduce__`` that calls ``os.system`` is rejected
before anything is called).
"""

from __future__ import annotations

import json
import os
import pickle
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo._stacklevel import user_stacklevel
from zoo.wrappers import strip_wrapper_prefixes

__all__ = [
    "CorruptWeightsError",
    "LoadReport",
    "as_state_dict",
    "dtype_mismatches",
    "file_format",
    "integer_weights",
    "is_safetensors",
    "load_into",
    "load_state_dict",
    "read_metadata",
    "save_weights",
    "training_config",
]

# Metadata key under which save_weights records tensors that shared storage (tied weights):
# {"alias": "kept name"}. The file stores each storage once; load_state_dict restores every name.
ALIASES_KEY = "zoo.aliases"
# Metadata key of the builder config that zoo.build(name, weights=path) rebuilds the model with (a JSON object).
CONFIG_KEY = "zoo.config"
# Wrappers training scripts put around a state dict, tried in this order.
_WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "module", "net", "params")

StateDict = dict[str, torch.Tensor]


class CorruptWeightsError(ValueError):
    """A weights file is empty, truncated, has a broken header, or holds NaN/inf values; names the file
    and says how to get a good copy."""


def _repull_hint(path: str | os.PathLike) -> str:
    """How to get a good copy of ``path``: the `zoo pull` command when it is a cached manifest file."""
    try:
        from zoo.hub.manifest import read_manifest
        from zoo.hub.store import URL_DIR, cache_root, cached_path

        resolved = Path(path).resolve()
        for entry in read_manifest().values():
            if cached_path(entry).resolve() == resolved:
                return f"re-pull it with `zoo pull {entry.name} --force`"
        if resolved.parent.parent == (cache_root() / URL_DIR).resolve():
            return f"it was downloaded from a URL: delete {resolved} and load the URL again"
    except (ValueError, OSError):  # a broken manifest must not hide the error this hint decorates
        return "replace it with a good copy"
    return "replace it with a good copy (for a cached download: `zoo pull MODEL.TAG --force`)"


def file_format(path: str | os.PathLike) -> str:
    """``"safetensors"`` or ``"pth"``, from the file's first bytes (names in caches and URLs lie)."""
    with open(path, "rb") as fh:
        head = fh.read(9)
    if len(head) < 8:
        raise CorruptWeightsError(f"{path}: {len(head)} bytes is too short to be a weights file (empty or "
                                  f"truncated); {_repull_hint(path)}")
    n = int.from_bytes(head[:8], "little")
    # safetensors first: its 8-byte header length can begin with the bytes that mark a torch.save file (a
    # length of 128 + 256k starts with 0x80, one of 19,280 + 65,536k with "PK"), while a torch.save file
    # never has "{" as its ninth byte (a zip's is its compression method, a legacy pickle's 0xf9)
    if head[8:9] == b"{" and 0 < n < os.path.getsize(path):
        return "safetensors"
    if head[:2] == b"PK" or head[:1] == b"\x80":  # torch.save zip archive / legacy pickle protocol 2+
        return "pth"
    if head[8:9] == b"{":
        raise CorruptWeightsError(f"{path}: the safetensors header claims {n} bytes but the file holds "
                                  f"{os.path.getsize(path)} (truncated or corrupt); {_repull_hint(path)}")
    raise CorruptWeightsError(
        f"{path}: not a safetensors file nor a torch.save file (first bytes {head[:8]!r}); "
        "expected weights written by zoo.hub.save_weights or torch.save"
    )


def is_safetensors(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a safetensors file, by its bytes (:func:`file_format`), not by its name: a file
    :func:`zoo.save` wrote keeps its recorded config under any name (``ip.weights``, a URL's ``/download``).
    False for a path that is no file or none whose first bytes say safetensors (empty, truncated, broken): the
    reader it then goes to names what is wrong with it, in its own terms (a resume's checkpoint error)."""
    try:
        return Path(path).is_file() and file_format(path) == "safetensors"
    except CorruptWeightsError:
        return False


def _safetensors_call(fn, path: str | os.PathLike):
    """Run a safetensors reader; its errors (broken header, truncated data) become CorruptWeightsError."""
    from safetensors import SafetensorError

    try:
        return fn()
    except (SafetensorError, ValueError, RuntimeError) as err:  # a malformed header or truncated data
        raise CorruptWeightsError(f"{path}: not a readable safetensors file ({type(err).__name__}: "
                                  f"{str(err).splitlines()[0] if str(err) else err!r}); {_repull_hint(path)}") from None


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``__metadata__`` string map of a safetensors file (empty when it has none).

    zoo's own records in it (``zoo.config``, a family's ``zoo.pretrained_cfg``, ``zoo.td3``, ...) are JSON objects:
    one that no longer parses is a :class:`CorruptWeightsError` naming the file and the record, where each reader's
    ``json.loads`` raised a JSONDecodeError that named neither."""
    from safetensors import safe_open

    if Path(path).is_dir():
        from zoo.hub.store import not_a_weights_file

        raise not_a_weights_file(Path(path))

    def read() -> dict[str, str]:
        if not _utf8(path):  # safetensors takes UTF-8 paths only; the header is 8 length bytes, then JSON
            with open(path, "rb") as fh:
                header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
            return dict(header.get("__metadata__") or {})
        with safe_open(str(path), framework="pt") as fh:
            return dict(fh.metadata() or {})

    meta = _safetensors_call(read, path)
    # zoo.config is every family's (zoo.save and publishing write it); another record is told by its opening brace
    for key, value in meta.items():
        if key == CONFIG_KEY or (key.startswith("zoo.") and value.lstrip().startswith("{")):
            try:
                parsed = json.loads(value)
            except ValueError as err:
                parsed, why = None, str(err)
            else:
                why = f"a JSON {type(parsed).__name__}"
            if not isinstance(parsed, dict):
                raise CorruptWeightsError(f"{path}: its {key} metadata is not the JSON object zoo wrote ({why}); "
                                          f"{_repull_hint(path)}")
    return meta


def _utf8(path: str | os.PathLike) -> bool:
    """Whether safetensors can open ``path`` by name: it refuses a name that is not valid UTF-8 ("Path ... is
    not valid UTF-8"), which Linux allows and zoo.save writes: opened by name, such a file would be called corrupt."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def training_config(path: str | os.PathLike) -> dict[str, Any] | None:
    """The run config a ``zoo.engine.fit`` checkpoint (``best.pt``, ``epoch-0003.pt``) records, whose
    ``model.*`` keys are the builder config and ``data.*`` the preprocessing; None for any other file."""
    from zoo.engine.checkpoint import FORMAT

    if file_format(path) != "pth":
        return None
    try:  # mmap: the tensors are not read, only the structure around them
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001  (not ours to judge here: load_state_dict reports what is wrong with it)
        return None
    if isinstance(obj, Mapping) and obj.get("format") == FORMAT and isinstance(obj.get("config"), Mapping):
        return dict(obj["config"])
    return None


def assert_finite(sd: Mapping[str, torch.Tensor], path: str | os.PathLike) -> None:
    """Refuse a state dict with NaN/inf in a floating tensor: a network built from it acts NaN silently."""
    def finite(v: torch.Tensor) -> bool:  # min and max propagate NaN and show inf: 9x cheaper than isfinite().all()
        lo, hi = torch.aminmax(v)
        return bool(torch.isfinite(lo)) and bool(torch.isfinite(hi))

    bad = [(k, int((~torch.isfinite(v)).sum())) for k, v in sd.items()
           if v.is_floating_point() and v.numel() and not finite(v)]
    if bad:
        shown = ", ".join(f"{k} ({n} values)" for k, n in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise CorruptWeightsError(
            f"{path}: non-finite values (NaN/inf) in {shown}; the file is corrupt or was saved from a "
            f"diverged run; {_repull_hint(path)} (zoo.hub.load_state_dict(path, check_finite=False) reads it as it is)"
        )


def _unwrap(obj: Any, path: str | os.PathLike) -> StateDict:
    """Find the state dict inside the usual checkpoint wrappers and strip a DataParallel prefix. A checkpoint of a
    zoo run with ``ema_decay`` gives its weight average: what the run scored (``best.pt`` is chosen by it) and
    returned, as timm's ``load_checkpoint`` loads the EMA by default (the raw weights are for a resume:
    :func:`zoo.engine.checkpoint.load_checkpoint`)."""
    extra = obj.get("extra") if isinstance(obj, Mapping) else None
    if isinstance(extra, Mapping) and isinstance(extra.get("ema"), Mapping) and "model" in obj:
        from zoo.engine.checkpoint import ema_weights

        obj = ema_weights(obj, path)
    seen = 0
    while isinstance(obj, Mapping) and seen < 3:
        if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            break
        inner = next((obj[k] for k in _WRAPPER_KEYS if isinstance(obj.get(k), Mapping)), None)
        if inner is None:
            break
        obj, seen = inner, seen + 1
    if not isinstance(obj, Mapping) or not obj:
        raise ValueError(f"{path}: expected a state dict (name -> tensor), found {type(obj).__name__}")
    bad = [k for k, v in obj.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        shown = ", ".join(repr(k) for k in bad[:5])
        raise ValueError(
            f"{path}: expected a state dict (str -> tensor); entries {shown} are not tensors. "
            f"Top-level keys: {', '.join(map(str, list(obj)[:8]))}"
        )
    return dict(strip_wrapper_prefixes(obj, ()))  # saved from DataParallel / DDP / torch.compile


def check_complete(path: str | os.PathLike) -> None:
    """Raise :class:`CorruptWeightsError` unless ``path`` holds every byte its own header describes (the
    safetensors header's data offsets; a torch.save zip archive's central directory, written last)."""
    import zipfile

    path = Path(path)
    fmt = file_format(path)
    size = path.stat().st_size
    if fmt == "safetensors":
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            try:
                header = json.loads(f.read(n))
                end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
            except (ValueError, KeyError, TypeError, IndexError) as err:
                raise CorruptWeightsError(f"{path}: broken safetensors header ({err})") from None
        if 8 + n + end != size:
            raise CorruptWeightsError(f"{path}: its safetensors header describes {8 + n + end} bytes, the file "
                                      f"holds {size} (truncated or corrupt)")
    elif path.open("rb").read(2) == b"PK":
        try:
            zipfile.ZipFile(path).close()
        except zipfile.BadZipFile as err:
            raise CorruptWeightsError(f"{path}: a torch.save archive without its end ({err}): truncated") from None


def load_error_reason(err: BaseException) -> str:
    """``torch.load``'s reason for failing, in one line, without its advice to load with ``weights_only=False``
    (which would run whatever code a tampered file names) or to allow-list a refused global."""
    lines = [ln.split("WeightsUnpickler error:", 1)[-1].strip() for ln in str(err).splitlines()]
    lines = [ln for ln in lines if ln and "weights_only" not in ln
             and not ln.startswith(("Weights only load failed", "Check the documentation", "Please file an issue"))]
    return lines[0].split(" Please use", 1)[0] if lines else type(err).__name__


def _unpickling_error(path: Path, err: pickle.UnpicklingError) -> Exception:
    """A pickle asking for code (a global the weights-only unpickler does not allow) is refused as such; a
    corrupt file, whose bytes the unpickler cannot even read, is a CorruptWeightsError with its reason."""
    reason = load_error_reason(err)
    if not any(m in reason.lower() for m in ("unsupported operand", "stack", "eof", "truncated")):
        return pickle.UnpicklingError(
            f"refusing to load {path}: it is not a plain state dict, and loading it would run code it names "
            f"(torch.load with weights_only=True rejected it). Only tensors and plain containers are accepted. "
            f"Details: {reason}")
    return CorruptWeightsError(f"{path}: not a readable torch.save file (unpickler: {reason}); {_repull_hint(path)}")


def load_state_dict(path: str | os.PathLike, *, device: str | torch.device = "cpu",
                    check_finite: bool = True) -> StateDict:
    """Read a state dict from safetensors, or from a torch.save file with ``weights_only=True``.

    A pickle that asks for anything beyond tensors and plain containers is refused with a
    :class:`pickle.UnpicklingError` that names the file; nothing in it is executed. An empty, truncated
    or header-corrupted file, and (unless ``check_finite=False``) NaN/inf values, raise
    :class:`CorruptWeightsError` naming the file and how to re-pull it.
    """
    path = Path(path)
    if not path.is_file():
        from zoo.hub.store import not_a_weights_file

        raise not_a_weights_file(path)
    fmt = file_format(path)
    if fmt == "safetensors":
        from safetensors.torch import load as load_bytes
        from safetensors.torch import load_file

        sd = _safetensors_call(lambda: load_file(str(path), device=str(device)) if _utf8(path) else
                               {k: v.to(device) for k, v in load_bytes(path.read_bytes()).items()}, path)
        try:
            aliases = json.loads(read_metadata(path).get(ALIASES_KEY, "{}"))
            for alias, target in aliases.items():
                sd[alias] = sd[target]
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CorruptWeightsError(f"{path}: broken {ALIASES_KEY} metadata ({err}); {_repull_hint(path)}") from None
        # as a torch.save file's (_unwrap): a family's loader reads "fc.weight" before load_into would strip them, and
        # a DDP network's safetensors kept "module.fc.weight", so its trained head was swapped for a fresh one
        sd = dict(strip_wrapper_prefixes(sd, ()))
    else:
        try:
            obj = torch.load(path, map_location=device, weights_only=True)
        except pickle.UnpicklingError as err:
            raise _unpickling_error(path, err) from None
        except (RuntimeError, EOFError, ValueError, OSError) as err:  # OSError: a truncated zip archive
            raise CorruptWeightsError(f"{path}: not a readable torch.save file ({type(err).__name__}: "
                                      f"{str(err).splitlines()[0] if str(err) else ''}); {_repull_hint(path)}") from None
        _check_checkpoint_digest(obj, path)
        sd = _unwrap(obj, path)
    if check_finite:
        assert_finite(sd, path)
    return sd


def _check_checkpoint_digest(obj: Any, path: Path) -> None:
    """A zoo training checkpoint (the engine's ``best.pt`` / ``epoch-N.pt``) carries a sha256 of its tensors:
    checked here too, where ``zoo.build(name, weights=path)`` reads it (unchecked there, a checkpoint whose
    bytes changed on disk would build a network with the changed weights without a word)."""
    from zoo.engine.checkpoint import FORMAT, tensors_digest

    if isinstance(obj, Mapping) and obj.get("format") == FORMAT and "digest" in obj \
            and obj["digest"] != tensors_digest(obj):
        raise CorruptWeightsError(f"{path} is corrupt: its tensors no longer match the sha256 written with them "
                                  "(bytes changed on disk after the checkpoint was written); use another checkpoint "
                                  "of the run (epoch-N.pt, best.pt), or train again (a checkpoint edited on purpose "
                                  "with torch.save keeps its old 'digest': drop that key when saving it)")


def as_state_dict(obj: nn.Module | Mapping[str, torch.Tensor]) -> StateDict:
    """A module's state dict, or a mapping's (taken out of the wrappers training scripts put around one)."""
    if isinstance(obj, nn.Module):
        return dict(obj.state_dict())
    if isinstance(obj, Mapping):
        return _unwrap(obj, "state dict")
    raise TypeError(f"expected an nn.Module or a state dict, got {type(obj).__name__}")


def save_weights(
    module_or_state_dict: nn.Module | Mapping[str, torch.Tensor],
    path: str | os.PathLike,
    metadata: Mapping[str, str] | None = None,
    dtype: torch.dtype | None = None,
) -> Path:
    """Write a safetensors file atomically through :mod:`zoo.fs` (checked free space, the user's umask).

    ``dtype`` casts floating-point tensors only (e.g. ``torch.float16`` storage; integer buffers such as
    BatchNorm's ``num_batches_tracked`` keep theirs). Tensors that share storage (tied embeddings) are
    stored once and their other names recorded in the metadata, so loading restores every key.
    """
    path = Path(path).expanduser()  # as zoo.save and zoo.build(weights=) read "~/model.safetensors"
    sd = as_state_dict(module_or_state_dict)
    meta = {"format": "pt"}
    for k, v in (metadata or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"safetensors metadata must map str -> str; got {k!r}: {type(v).__name__}")
        meta[k] = v
    tensors: StateDict = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    for name, t in sd.items():
        t = t.detach()
        # Same storage, offset, shape and strides: one tensor under two names (weight tying).
        ident = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)
        if t.numel() > 0 and ident in seen:
            aliases[name] = seen[ident]
            continue
        seen[ident] = name
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        tensors[name] = t.to("cpu").contiguous().clone()
    if aliases:
        meta[ALIASES_KEY] = json.dumps(aliases, sort_keys=True)
    from safetensors.torch import save

    from zoo import fs

    fs.sweep_temps(path.parent)  # temp files of writers killed in this folder (a saved model's, an export's)
    # save() builds the file in memory, so its exact size is checked against the free space first
    return fs.write_bytes(path, _sorted_metadata(save(tensors, metadata=meta)))


def _sorted_metadata(data: bytes) -> bytes:
    """``data`` with its header's ``__metadata__`` in key order, so that equal weights give equal bytes.

    safetensors (0.8) writes the metadata from a Rust HashMap, in an order that changes from process to
    process: the same model saved twice would have two sha256s. Sorting keeps the header's length (the same
    entries, compact JSON), so the tensors' offsets and the 8-byte alignment stay as they were; a header
    that does not come back at its length is left as safetensors wrote it.
    """
    n = int.from_bytes(data[:8], "little")
    raw = data[8:8 + n]
    header = json.loads(raw)
    meta = header.pop("__metadata__", None)
    if not meta:
        return data
    text = json.dumps({"__metadata__": dict(sorted(meta.items())), **header}, separators=(",", ":"),
                      ensure_ascii=False).encode()
    padded = text + b" " * (n - len(text))
    if len(padded) != n or json.loads(padded) != {"__metadata__": meta, **header}:
        return data
    return data[:8] + padded + data[8 + n:]


@dataclass
class LoadReport:
    """What :func:`load_into` did: keys loaded, and keys left freshly initialised under ``reinit``."""

    loaded: list[str] = field(default_factory=list)
    # (key, shape in the file or None if absent there, shape in the model or None if absent there)
    reinitialized: list[tuple[str, tuple[int, ...] | None, tuple[int, ...] | None]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reinitialized

    def __str__(self) -> str:
        lines = [f"loaded {len(self.loaded)} tensors"]
        for key, src, dst in self.reinitialized:
            lines.append(f"  re-initialised {key}: file {shape_text(src)} -> model {shape_text(dst)}")
        return "\n".join(lines)


def shape_text(shape: tuple[int, ...] | None) -> str:
    """A tensor's shape for a message, ``"absent"`` for a key one side lacks (a scalar is ``[]``)."""
    return "absent" if shape is None else str(list(shape))


def state_diff(own: Mapping[str, torch.Tensor], other: Mapping[str, torch.Tensor]
               ) -> list[tuple[str, tuple[int, ...] | None, tuple[int, ...] | None]]:
    """``(key, shape in other or None, shape in own or None)`` for every key of either, in ``other``'s
    order then ``own``'s: what a strict load of ``other`` into ``own`` would meet."""
    rows = [(k, tuple(v.shape), tuple(own[k].shape) if k in own else None) for k, v in other.items()]
    rows += [(k, None, tuple(v.shape)) for k, v in own.items() if k not in other]
    return rows


def dtype_mismatches(own: Mapping[str, torch.Tensor], other: Mapping[str, torch.Tensor]) -> list[str]:
    """``"key: file DTYPE vs model DTYPE"`` for each floating-point tensor of ``own`` that ``other`` gives in
    integers or booleans. ``copy_`` casts them without a word, so a file whose header names another dtype than
    its bytes were written in (an edited or corrupted header: int32 read from float32 bytes gives weights of
    1e9) built a network that predicts garbage; a float16 or bfloat16 file of a float32 model is fine."""
    return [f"{k}: file {str(v.dtype).removeprefix('torch.')} vs model {str(own[k].dtype).removeprefix('torch.')}"
            for k, v in other.items()
            if isinstance(own.get(k), torch.Tensor) and isinstance(v, torch.Tensor)  # not a module's extra state
            and (own[k].is_floating_point() or own[k].is_complex()) and not (v.is_floating_point() or v.is_complex())]


def integer_weights(kinds: list[str], holder: str) -> str:
    """The words for :func:`dtype_mismatches`' rows ``kinds`` (non-empty) of a file loaded into ``holder`` ("the
    model", "the agent", a model's name)."""
    return (f"integers where {holder} holds floating-point values (a corrupt file, or a safetensors header that "
            f"names another dtype than its bytes were written in): " + _some(kinds, "; "))


def _prefix_hint(own: Mapping[str, torch.Tensor], other: Mapping[str, torch.Tensor]) -> str | None:
    """Why nearly no key fits, when one prefix explains it: every key of the file carries one the model's lack (a
    LightningModule's checkpoint holds its network as ``model.``/``net.``), or the file is one submodule's own
    (a torchvision resnet18 for a network that holds it as ``backbone.``)."""
    def under_one(keys: Any) -> str | None:
        heads = {k.partition(".")[0] if "." in k else None for k in keys}
        return f"{heads.pop()}." if len(heads) == 1 and None not in heads else None

    def most(found: set[str], wanted: set[str]) -> bool:
        return len(found & wanted) * 2 >= len(wanted) > 0

    prefix = under_one(other)
    if prefix is not None and not own.keys() & other.keys() and most({k[len(prefix):] for k in other}, set(own)):
        return (f"every key in the file starts with {prefix!r}, which the model's keys lack (the checkpoint of a "
                f"module that held this network as .{prefix[:-1]}, as a LightningModule does): take it off, "
                f"{{k.removeprefix({prefix!r}): v for k, v in state.items()}}, and load that")
    prefix = under_one(k for k in own if k not in other)
    if prefix is not None and most(set(other), {k[len(prefix):] for k in own if k.startswith(prefix)}):
        return (f"the file holds the weights of one part of the model, its .{prefix[:-1]} (the file's keys are "
                f"its keys without {prefix!r}): load it into model.{prefix[:-1]}, or prefix its keys with {prefix!r}")
    return None


def _some(items: list[str], sep: str, shown: int = 6) -> str:
    """The first ``shown`` of ``items`` and how many more: a file of another network differs in every key,
    and listing hundreds buries the point."""
    more = f"{sep}... and {len(items) - shown} more ({len(items)} in all)" if len(items) > shown else ""
    return sep.join(items[:shown]) + more


def load_into(
    module: nn.Module, state_dict: Mapping[str, torch.Tensor], *, reinit: tuple[str, ...] | list[str] = ()
) -> LoadReport:
    """Load ``state_dict`` into ``module`` strictly, except under the ``reinit`` prefixes.

    Keys under a ``reinit`` prefix (e.g. ``("fc.",)`` for a classifier head) whose shapes differ, or
    that only one side has, keep the module's fresh initialisation and a warning says which. Any other
    missing, unexpected or mismatched key raises one ``ValueError`` that lists them with both shapes.
    Values are copied with ``copy_``, so fp16-stored weights land in the module's fp32 parameters.
    """
    if isinstance(reinit, str):
        reinit = (reinit,)
    prefixes = tuple(reinit)
    own = module.state_dict()
    state_dict = strip_wrapper_prefixes(state_dict, own)  # saved from model.state_dict() of a DataParallel
    under = (lambda k: any(k == p.rstrip(".") or k.startswith(p) for p in prefixes)) if prefixes else (lambda k: False)
    report = LoadReport()
    missing, unexpected, mismatched = [], [], []
    to_load: dict[str, torch.Tensor] = {}
    for key, src, dst in state_diff(own, state_dict):
        if src is not None and dst is not None and src == dst:
            to_load[key] = state_dict[key]
        elif under(key):
            report.reinitialized.append((key, src, dst))
        elif dst is None:
            unexpected.append(f"{key} {list(src)}")
        elif src is None:
            missing.append(f"{key} {list(dst)}")
        else:
            mismatched.append(f"{key}: file {list(src)} vs model {list(dst)}")
    kinds = dtype_mismatches(own, to_load)
    if missing or unexpected or mismatched or kinds:
        parts = []
        if kinds:
            parts.append(integer_weights(kinds, "the model"))
        if mismatched:
            parts.append("shape mismatch: " + _some(mismatched, "; "))
        if missing:
            parts.append("missing in the file: " + _some(missing, ", "))
        if unexpected:
            parts.append("not in the model: " + _some(unexpected, ", "))
        # zoo.build's loaders pass the head's prefix: their callers need the first hint, load_into's the second
        hint = (f" (only {', '.join(prefixes)} may differ, as a new classifier head for another num_classes; every "
                "other shape comes from the config the weights were made with: in zoo.build, leave those keys out)"
                if prefixes else " (to leave a head freshly initialised, pass reinit=('fc.',) or the head's prefix)")
        found = _prefix_hint(own, state_dict) if missing and unexpected else None
        hint = f" ({found})" if found else hint if missing or unexpected or mismatched else ""
        raise ValueError(f"weights do not fit {type(module).__name__}: " + " | ".join(parts) + hint)
    # module.load_state_dict keeps custom _load_from_state_dict hooks working and copy_-casts dtypes.
    module.load_state_dict(to_load, strict=False)
    report.loaded = sorted(to_load)
    if report.reinitialized:
        warnings.warn(
            f"{type(module).__name__}: left freshly initialised (not loaded): "
            + "; ".join(f"{k} file {shape_text(s)} model {shape_text(d)}" for k, s, d in report.reinitialized),
            stacklevel=user_stacklevel(),
        )
    return report
