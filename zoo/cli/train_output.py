"""Where ``zoo train`` saves the trained model: ``--out`` checked before any work, the default file under
:data:`TRAIN_RUNS`, and a fallback file when the save fails.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from zoo.cli.errors import UsageError

# where zoo train saves without --out, as zoo finetune writes to runs/finetune (and YOLO to runs/train)
TRAIN_RUNS = Path("runs") / "train"


def out_path(out: str | None, name: str) -> Path | None:
    """Check ``--out`` before any work: a folder gets ``NAME.safetensors`` inside; an unwritable place fails now."""
    if out is None:
        return None
    path = Path(out).expanduser()  # as zoo.save and --weights do (a quoted '~' reaches us unexpanded)
    if path.is_dir():  # the name is zoo's to choose, as the default's: numbered beside an earlier model
        path = _free_name(path, name)
    elif out.endswith(("/", os.sep)):
        path = path / f"{name}.safetensors"
    if path.suffix == "" and not path.exists():  # a folder's name, most likely: zoo makes none (a typo would get one)
        raise UsageError(f"--out {out}: no folder {path}; create it (mkdir -p {shlex.quote(str(path))}) to save "
                         f"{name}.safetensors there, or give a file name ending in .safetensors")
    if path.suffix != ".safetensors":
        raise UsageError(f"--out {out}: zoo saves .safetensors files; give NAME.safetensors or a folder")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"--out {out}: folder {parent} does not exist; create it "
                         f"(mkdir -p {shlex.quote(str(parent))}) or give another path")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--out {out}: {path if path.exists() else parent} is not writable")
    return path


def default_out(name: str) -> Path:
    """``runs/train/NAME.safetensors``, or ``NAME-2``, ``NAME-3`` ...: a default never overwrites a model."""
    folder = TRAIN_RUNS.expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"no --out given and {folder} cannot be made ({err}): give --out FILE.safetensors") from err
    return _free_name(folder, name)


def _free_name(folder: Path, name: str) -> Path:
    """``folder/NAME.safetensors``, or ``NAME-2``, ``NAME-3`` ... where that is taken."""
    path, k = folder / f"{name}.safetensors", 1
    while path.exists():
        k += 1
        path = folder / f"{name}-{k}.safetensors"
    return path


def numbered(out: str | None) -> bool:
    """Whether zoo numbers the saved file's name (no ``--out``, or a folder): then the name is claimed when the
    model is saved, not when the command started (:func:`save_trained`)."""
    return out is None or Path(out).expanduser().is_dir()


def _save_numbered(model: Any, folder: Path, name: str) -> Path:
    """Save as ``folder/NAME.safetensors`` or the next free ``NAME-k``, claimed with a hard link, which fails
    where the name exists: runs started together into one folder (a sweep) each keep their model, where a name
    chosen at the start and written hours later was the same for all, and the last run's model replaced the
    others'."""
    import zoo
    from zoo import fs

    staging = fs.PrivateTemp(folder, f"{name}.safetensors")
    try:
        saved = zoo.save(model, staging.path_for(f"{name}.safetensors"))
        while True:
            out = _free_name(folder, name)
            try:
                os.link(saved, out)
                break
            except FileExistsError:
                continue  # another run took that name since _free_name looked: the next one
            except OSError:  # a file system without hard links: the name is taken as free as it looked
                os.replace(saved, out)
                break
    finally:
        staging.abort()
    return out


def save_trained(model: Any, out: Path, run_dir: Path, *, number_as: str | None = None) -> bool:
    """Save to ``out`` (``number_as`` NAME: to ``NAME.safetensors`` or the next free ``NAME-k`` in ``out``'s
    folder, claimed as it is saved); if that fails after all (disk full, permissions changed), save to a fallback
    file in the run folder so the trained model is not lost, and say where. False when ``out`` was not written
    (the command then exits 1: a script must not go on with a missing or old file)."""
    import zoo

    try:
        saved = zoo.save(model, out) if number_as is None else _save_numbered(model, out.parent, number_as)
        print(f"saved to {saved}")
        return True
    except OSError as err:
        fallback = run_dir / f"{out.stem}.unsaved-{time.strftime('%Y%m%d-%H%M%S')}.safetensors"
        try:
            zoo.save(model, fallback)
        except OSError:
            raise UsageError(f"could not save the trained model to {out} ({err}), nor to {fallback}") from err
        print(f"could not save to {out} ({err}); the trained model is in {fallback}", file=sys.stderr)
        return False
