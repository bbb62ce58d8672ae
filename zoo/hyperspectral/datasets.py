"""Public hyperspectral scenes: fetched by URL into the zoo cache, sha256-verified; and local copies.

``fetch("indian_pines")`` downloads the files once into ``$ZOO_HOME/datasets/indian_pines/`` through the
hub's verified, atomic, resumable downloader; ``load_dataset("indian_pines")`` returns the :class:`Scene`
(from ``../shared/data`` beside the checkout when present, else from the cache). Files whose sha256 is
not pinned here (the EHU cubes of the larger scenes, which this project could not hash offline) are only
downloaded with ``allow_unverified=True``; their hash is then recorded beside the file (``<file>.verified``,
as every download's), and a load of the cached scene refuses a file that no longer has it.
``ZOO_DATA_URL`` (or ``base_url=``) points every download at a mirror folder or server instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from zoo.hyperspectral.scene import Scene

__all__ = ["DATASETS", "DataFile", "DatasetInfo", "check_cached", "dataset_root", "fetch", "load_dataset",
           "local_dataset_dir"]

_TENSORLY = "https://raw.githubusercontent.com/tensorly/tensorly/acc439e9f9662c2b10ccdb53e5e88a0a40090525/tensorly/datasets/data/"
_MHAUT = "https://raw.githubusercontent.com/mhaut/HSI-datasets/29efb503bdde94f620ba3873d3a56039fef18257/Classification/"
_EHU = "https://www.ehu.eus/ccwintco/uploads/"


@dataclass(frozen=True)
class DataFile:
    filename: str
    url: str
    sha256: str | None  # None: not pinned (download needs allow_unverified=True)
    role: str  # "cube" | "gt" | "train_mask"


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    files: tuple[DataFile, ...]
    license: str
    citation: str
    class_names: tuple[str, ...] = ()
    shared_subdir: str | None = None  # folder under ../shared/data/hyperspectral when a local copy exists


INDIAN_PINES_CLASSES = (
    "Alfalfa", "Corn-notill", "Corn-mintill", "Corn", "Grass-pasture", "Grass-trees", "Grass-pasture-mowed",
    "Hay-windrowed", "Oats", "Soybean-notill", "Soybean-mintill", "Soybean-clean", "Wheat", "Woods",
    "Buildings-Grass-Trees-Drives", "Stone-Steel-Towers",
)

DATASETS: dict[str, DatasetInfo] = {
    "indian_pines": DatasetInfo(
        "indian_pines",
        (
            DataFile("Indian_pines_corrected.npy", _TENSORLY + "Indian_pines_corrected.npy",
                     "8f038e4d81569e38ebfc72a15c9984c150de42580ab260be10a13442e912e451", "cube"),
            DataFile("Indian_pines_gt.npy", _TENSORLY + "Indian_pines_gt.npy",
                     "44610d21625b311b05b8e0c4ba9a6cc755c2fbb9df48e4d89419024aa6ad3f9d", "gt"),
            DataFile("indianpines_disjoint_dset.mat", _MHAUT + "indianpines_disjoint_dset.mat",
                     "430c37ce56a160d410378aa136e5e696e2436e2fe03e275f306c3502f622e77b", "train_mask"),
        ),
        license="CC BY 3.0 (Purdue PURR); disjoint mask from mhaut/HSI-datasets (GPL-3.0 repository)",
        citation="Baumgardner, Biehl, Landgrebe (2015), doi:10.4231/R7RX991C",
        class_names=INDIAN_PINES_CLASSES,
        shared_subdir="indian_pines",
    ),
    "salinas": DatasetInfo(
        "salinas",
        (DataFile("Salinas_corrected.mat", _EHU + "a/a3/Salinas_corrected.mat", None, "cube"),
         DataFile("salinas_gt.mat", _MHAUT + "salinas_gt.mat",
                  "ecfab4d31ef5553f097943235d8ea502038eb4a2067b2ad10b33e37c949955e2", "gt")),
        license="EHU GIC Hyperspectral Remote Sensing Scenes (public research data)", citation="AVIRIS, Salinas Valley"),
    "pavia_u": DatasetInfo(
        "pavia_u",
        (DataFile("PaviaU.mat", _EHU + "e/ee/PaviaU.mat", None, "cube"),
         DataFile("paviaU_gt.mat", _MHAUT + "paviaU_gt.mat",
                  "23f6a426928f9b32984adffe659e29f554f9fb6c93b5a107528d308d5087a829", "gt")),
        license="EHU GIC Hyperspectral Remote Sensing Scenes (public research data)", citation="ROSIS, Pavia University"),
    "pavia_c": DatasetInfo(
        "pavia_c",
        (DataFile("Pavia.mat", _EHU + "e/e3/Pavia.mat", None, "cube"),
         DataFile("paviaC_gt.mat", _MHAUT + "paviaC_gt.mat",
                  "7eb54ab81b404dd3ae572e6d0ec211595029e5a847bec2cfb8f9e72d07066b69", "gt")),
        license="EHU GIC Hyperspectral Remote Sensing Scenes (public research data)", citation="ROSIS, Pavia Centre"),
    "ksc": DatasetInfo(
        "ksc",
        (DataFile("KSC.mat", _EHU + "2/26/KSC.mat", None, "cube"),
         DataFile("KSC_gt.mat", _MHAUT + "KSC_gt.mat",
                  "a1d6ab9293691006bd4d9742d1a1e1c141b1aaa5fbc5fa128b33c1d09038510b", "gt")),
        license="EHU GIC Hyperspectral Remote Sensing Scenes (public research data)", citation="AVIRIS, Kennedy Space Center"),
    "botswana": DatasetInfo(
        "botswana",
        (DataFile("Botswana.mat", _EHU + "7/72/Botswana.mat", None, "cube"),
         DataFile("Botswana_gt.mat", _MHAUT + "Botswana_gt.mat",
                  "668394905e10e629c16584bfd02b0f533b96d6ba18a63274a94ff3a77126a887", "gt")),
        license="EHU GIC Hyperspectral Remote Sensing Scenes (public research data)", citation="Hyperion, Okavango Delta"),
}


def _info(name: str) -> DatasetInfo:
    key = name.lower().replace("-", "_")
    if key not in DATASETS:
        raise KeyError(f"unknown data set {name!r}; known: {', '.join(sorted(DATASETS))}")
    return DATASETS[key]


def dataset_root() -> Path:
    """``$ZOO_HOME/datasets``, which ``zoo cache info`` lists and ``zoo cache clean`` frees."""
    from zoo.hub.store import datasets_root

    return datasets_root()


def local_dataset_dir(name: str) -> Path | None:
    """The read-only copy (``<shared data>/hyperspectral/<subdir>``, see :func:`zoo.hub.shared_data_root`), if
    it is there."""
    info = _info(name)
    if info.shared_subdir is None:
        return None
    from zoo.hub import shared_data_root

    folder = shared_data_root() / "hyperspectral" / info.shared_subdir
    if all((folder / f.filename).is_file() for f in info.files):
        return folder
    return None


def fetch(name: str, *, root: str | os.PathLike | None = None, force: bool = False, progress: bool = True,
          allow_unverified: bool = False, base_url: str | None = None) -> Path:
    """Download a public scene's files (once) and return their folder.

    Each file comes from ``base_url``/``$ZOO_DATA_URL`` + filename when set, else its original URL; the bytes
    are hashed before they are moved into place, and a mismatch never enters the cache. A file already there is
    checked first, against its pinned sha256 (else the hash recorded on its arrival): one that changed on disk
    since is fetched again, with a warning, as ``zoo pull`` mends a weights file.
    """
    info = _info(name)
    folder = (Path(root) if root is not None else dataset_root()) / info.name
    mirror = base_url or os.environ.get("ZOO_DATA_URL")
    for f in info.files:
        if f.sha256 is None and not allow_unverified and not (folder / f.filename).is_file():
            raise ValueError(
                f"{info.name}: {f.filename} has no pinned sha256 in zoo (it is {f.url}); pass "
                f"allow_unverified=True (zoo hsi-fetch --allow-unverified) to download it and record its hash, or "
                f"place the file in {folder}"
            )
        sources = ([mirror.rstrip("/") + "/" + f.filename] if mirror else []) + [f.url]
        _fetch_file(info, f, folder / f.filename, sources, force=force, progress=progress)
    return folder


def _fetch_file(info: DatasetInfo, f: DataFile, dest: Path, sources: list[str], *, force: bool,
                progress: bool) -> None:
    """One file of :func:`fetch`: fetched when missing, when ``force``, or when the file there no longer has its
    pinned (else recorded) sha256; hub_fetch alone takes any file already at ``dest`` as done."""
    import warnings

    from zoo._stacklevel import user_stacklevel
    from zoo.hub import verified
    from zoo.hub.fetch import fetch as hub_fetch

    changed = None if force or not dest.is_file() else verified.mismatch(dest, f.sha256)
    how = f"`zoo hsi-fetch {info.name}` (zoo.hyperspectral.datasets.fetch({info.name!r}))"
    state = (f"{dest} changed on disk after it was verified (sha256 {changed[0]}, expected {changed[1]})" if changed
             else f"{dest} is asked for again (force)" if dest.is_file() else f"{dest} is missing")
    hub_fetch(
        sources, dest, check=f.sha256.__eq__ if f.sha256 else None, expected=f.sha256 or "(not pinned)",
        force=force or changed is not None, progress=progress, on_arrival=verified.record, mirror_var="ZOO_DATA_URL",
        offline_hint=f"{state}, and ZOO_OFFLINE=1 forbids downloading it: run {how} on a connected machine and copy "
                     f"the file into {dest.parent}, or set ZOO_DATA_URL to a mirror that holds {f.filename} (a "
                     "file:// folder works offline)",
    )
    if changed is not None:
        warnings.warn(f"{info.name}: {state}; fetched it again", stacklevel=user_stacklevel())


def check_cached(info: DatasetInfo, folder: Path) -> None:
    """Refuse a cached file whose bytes are not those it arrived with (its ``.verified`` marker's sha256).

    Free while the file is unchanged (the marker binds the hash to its size, times and inode); a file
    touched but equal is hashed once and its marker renewed. A file without a marker (placed there by hand,
    or fetched before markers were written) has nothing to be checked against and loads as before.
    """
    from zoo.hub import verified
    from zoo.hub.fetch import HashMismatchError

    for f in info.files:
        path = folder / f.filename
        changed = verified.mismatch(path)
        if changed is not None:
            raise HashMismatchError(f"{info.name}: {path} changed since it was downloaded (sha256 {changed[0]}, it "
                                    f"arrived as {changed[1]}); fetch it again with `zoo hsi-fetch {info.name}` "
                                    f"(or fetch({info.name!r}))")


def _scene_from_folder(info: DatasetInfo, folder: Path) -> Scene:
    from zoo.hyperspectral.readers import load_scene
    from zoo.hyperspectral.readers.mat import find_gt_key, load_mat_arrays

    by_role = {f.role: folder / f.filename for f in info.files}
    scene = load_scene(by_role["cube"], gt=by_role.get("gt"), name=info.name)
    extra = {}
    if "train_mask" in by_role:
        arrays = load_mat_arrays(by_role["train_mask"])
        key = find_gt_key(arrays, scene.shape[:2])
        if key is not None:
            extra["train_mask"] = arrays[key]
    from dataclasses import replace

    # the protocol published results use (split="auto" follows it, so numbers stay comparable)
    return replace(scene, class_names=info.class_names or None, metadata={**scene.metadata, **extra,
                                                                             "source": str(folder), "protocol": "random"})


def _shared_hint(info: DatasetInfo) -> str:
    if info.shared_subdir is None:
        return ""
    from zoo.hub import shared_data_root

    # where the folder came from: "(ZOO_SHARED_DATA)" beside ../shared/data read as if the variable were set
    how = "from ZOO_SHARED_DATA" if os.environ.get("ZOO_SHARED_DATA") else "set ZOO_SHARED_DATA to look elsewhere"
    return f"{shared_data_root() / 'hyperspectral' / info.shared_subdir} ({how}), "


def load_dataset(name: str, *, download: bool = False, **fetch_kwargs) -> Scene:
    """The named scene: the shared local copy if present, else the zoo cache (downloading if ``download``)."""
    info = _info(name)
    folder = local_dataset_dir(name)
    if folder is None:
        cached = dataset_root() / info.name
        if all((cached / f.filename).is_file() for f in info.files):
            folder = cached
        elif download:
            folder = fetch(name, **fetch_kwargs)
        else:
            raise FileNotFoundError(
                f"data set {info.name!r} is not available locally (looked in {_shared_hint(info)}the zoo cache "
                f"{cached}); fetch it with `zoo hsi-fetch {info.name}` (or load_dataset('{info.name}', "
                "download=True))"
            )
        check_cached(info, folder)
    return _scene_from_folder(info, folder)
