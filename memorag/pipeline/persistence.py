"""Saving and loading a pipeline: one folder, written atomically under a lock, verified on load.

A save holds the documents and chunks (JSONL), the retriever's index, the memory, and
a manifest with the format, the models' identity, the settings, a record of the memory
(its tensors' hash, token count, ratio, content hash) and the checksum of every file the
save owns. The manifest is sealed: the hash of each of its sections is stored in it, so
an edit of any field is refused on load, naming the section. On load every file is
checked against the manifest, and the memory against its record and the models' identity,
so a part swapped with the same part of another save is refused, naming the part.

Writers take the save's lock (`memorag.storage.locking.save_lock`) before reading the old save and
keep it until the new one is in place; a save folder holding a file the save does not own
is never written over. The new save is swapped in so that a writer killed at any instant
leaves the old save or the new one (`memorag.storage.io.swap_directory`); readers restore a save
whose writer died half-way through a two-rename swap before they read it.

The corpus writes and reads its own part (documents, chunks, index, memory:
`MemorizedCorpus.save` and `.load`); this module adds the manifest around it, the lock, and
the checks `MemoRAG.load` runs before the corpus is read (settings, embedder, memory model).
It knows nothing of `MemoRAG`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memorag.config import config_from_dict, config_to_dict
from memorag.memory.config import MemoryConfig
from memorag.pipeline.corpus import CHUNKS, DOCUMENTS, INDEX, MEMORY, REMEDY, MemorizedCorpus
from memorag.pipeline.helpers import label_embedder, label_lm
from memorag.pipeline.types import (
    IDENTITY_KEYS,
    EmptyCorpusError,
    ManifestMismatchError,
    PipelineConfig,
    SaveDirectoryError,
    SaveFormatError,
)
from memorag.retrieval.base import IndexFormatError, Retriever
from memorag.runtime.embedded import is_memory_weights_id, is_memory_weights_name
from memorag.storage.io import atomic_directory, atomic_write_text, is_saved, read_json_manifest, sha256_file
from memorag.storage.locking import recover_save, save_lock

if TYPE_CHECKING:
    import torch

    from memorag.memory import Memory

__all__ = ["CHUNKS", "DOCUMENTS", "FORMAT", "FORMAT_VERSION", "INDEX", "MANIFEST", "MEMORY", "REMEDY",
           "check_memory_dtype", "check_save_target", "check_saved_identity", "foreign_files", "is_saved_pipeline",
           "open_index", "read_manifest", "save_pipeline", "saved_embedder_name", "saved_memory_dtype",
           "saved_settings", "seal"]

FORMAT = "memorag-pipeline"
FORMAT_VERSION = 2  # 2: every file listed, the memory recorded, the manifest sealed
MANIFEST = "manifest.json"
SEAL = "seal"
SECTIONS = ("models", "settings", "content_sha256", "documents", "num_chunks", "memory", "files")


def save_pipeline(corpus: MemorizedCorpus, models: dict, config: PipelineConfig,
                  directory: str | os.PathLike[str], wait: float = 300.0) -> Path:
    """Write `corpus` (documents, chunks, index, memory) and a manifest naming `models` and
    `config` into `directory`, atomically.

    Holds the save's lock while writing (waiting at most `wait` seconds for another writer).
    An existing saved pipeline there is replaced; any other content, or a file inside the
    old save that it does not own, is refused.
    """
    if not corpus.documents:
        raise EmptyCorpusError("nothing to save: memorize something first")
    target = Path(directory)
    with save_lock(target, wait):
        check_save_target(target)
        with atomic_directory(target) as staging:
            record = corpus.save(staging)
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "models": models,
                "settings": config_to_dict(config),
                **record,
                "files": {name: sha256_file(staging / name) for name in _files_of(staging)},
            }
            manifest[SEAL] = seal(manifest)
            atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return target


def seal(manifest: dict) -> dict[str, str]:
    """The sha256 of each section of a manifest (all but the seal itself)."""
    return {
        key: hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        for key, value in manifest.items() if key != SEAL
    }


def _files_of(folder: Path) -> list[str]:
    """Every file under `folder` but the manifest, as sorted relative POSIX paths."""
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*")
                  if path.is_file() and path.relative_to(folder).as_posix() != MANIFEST)


# ----------------------------------------------------------------------------------------------
# loading: the steps of `MemoRAG.load`, in its order


def saved_settings(root: Path, manifest: dict, overrides: Mapping[str, Any], *,
                   memory_model_given: bool) -> PipelineConfig:
    """The settings to load a save with: its identity settings (and where its memory weights
    were), the rest this run's (the defaults, then `overrides`). An identity setting in
    `overrides` that differs from the saved one is refused, and so are memory weights that
    are no longer where the save says (unless `memory_model_given`: a ready model)."""
    with warnings.catch_warnings():  # an older save names its modes' settings the old flat way; they are not read
        warnings.simplefilter("ignore", FutureWarning)
        saved = config_from_dict(PipelineConfig, manifest["settings"])
    for key in IDENTITY_KEYS:
        wanted = overrides.get(key)
        if wanted is None:
            continue
        if key == "memory":
            wanted = wanted if isinstance(wanted, MemoryConfig) else MemoryConfig(**wanted)
            same = saved.memory is None or wanted.to_dict() == saved.memory.to_dict()
        elif key == "memory_model":
            same = label_lm(wanted) == label_lm(saved.memory_model)
        elif key == "embedder":
            same = label_embedder(wanted) == label_embedder(saved.embedder)
        else:
            same = wanted == getattr(saved, key)
        if not same:
            raise ManifestMismatchError(
                f"{root} was memorized with {key}={getattr(saved, key)!r}, not {wanted!r}; ask it with the "
                f"same setting or memorize the context again with {key}={wanted!r}"
            )
    settings = {key: getattr(saved, key) for key in (*IDENTITY_KEYS, "memory_weights")}
    settings["memory"] = None if saved.memory is None else saved.memory.to_dict()
    settings.update({key: value for key, value in overrides.items() if key not in IDENTITY_KEYS or value is not None})
    if saved.memory_weights and overrides.get("memory_weights") is None and not memory_model_given:
        if (not Path(saved.memory_weights).exists() and not is_memory_weights_id(saved.memory_weights)
                and not is_memory_weights_name(saved.memory_weights)):
            raise ManifestMismatchError(
                f"{root} was memorized with the memory weights in {saved.memory_weights}, which are no longer "
                "there; pass memory_weights (--memory-weights) with their new place"
            )
    return config_from_dict(PipelineConfig, settings)


def saved_memory_dtype(root: Path) -> str | None:
    """The dtype the save's memory was memorized in, from its manifest (None: no memory, or unreadable:
    loading it says what is wrong)."""
    from memorag.memory.state import MANIFEST as MEMORY_MANIFEST

    try:
        dtype = json.loads((root / MEMORY / MEMORY_MANIFEST).read_text(encoding="utf-8")).get("dtype")
    except (OSError, ValueError, AttributeError):
        return None
    return dtype if isinstance(dtype, str) else None


def saved_embedder_name(root: Path, manifest: dict, asked: str | None) -> str | None:
    """The embedder the save was indexed with (None: it has none, bm25), refused when `asked`
    names another (`asked` None: a ready embedder was given without a name, not checked)."""
    saved = manifest["models"].get("embedder")
    if saved is not None and asked is not None and asked != saved:
        raise ManifestMismatchError(
            f"{root} was indexed with the embedder {saved!r}, not {asked!r}; use the same "
            "embedder or memorize the context again"
        )
    return saved


def check_saved_identity(root: Path, manifest: dict, identity: dict) -> None:
    """Refuse a memory model whose `identity` differs from the one the save was memorized by."""
    saved = manifest["models"]["memory_identity"]
    differences = {
        key: (saved.get(key), identity.get(key))
        for key in sorted(set(identity) | set(saved))
        if identity.get(key) != saved.get(key)
    }
    if differences:
        detail = "; ".join(f"{key}: saved {old!r}, now {new!r}" for key, (old, new) in differences.items())
        hint = (" (other memory weights: pass the --memory-weights it was memorized with)"
                if "memory_weights_sha256" in differences else "")
        raise ManifestMismatchError(
            f"{root} was memorized by another memory model or other settings: {detail}{hint}; use the same "
            "models or memorize the context again"
        )


def check_memory_dtype(memory: Memory, running: torch.dtype, root: Path) -> None:
    """A memory holds keys and values in the dtype it was memorized in; the model must run in it."""
    saved = memory.keys[0].dtype if memory.keys else None
    if saved is not None and saved != running:
        saved_name, running_name = (str(dtype).removeprefix("torch.") for dtype in (saved, running))
        raise ManifestMismatchError(
            f"{root} was memorized in {saved_name} and the memory model now runs in {running_name}; ask it "
            f"with --dtype {saved_name} (dtype={saved_name}), or memorize the context again in {running_name}"
        )


def open_index(path: Path, kind: str, embedder: Callable[[], Any], embedder_name: str) -> Retriever:
    """The saved index of a `kind` retriever (dense, bm25, hybrid); `embedder()` is called only
    for the kinds that embed."""
    from memorag.retrieval.base import load_retriever

    try:
        if kind == "bm25":
            return load_retriever(path)
        embedder_args = {"embedder": embedder(), "embedder_name": embedder_name}
        if kind == "dense":
            return load_retriever(path, **embedder_args)
        return load_retriever(path, kwargs_by_kind={"dense": embedder_args})
    except IndexFormatError as error:
        raise SaveFormatError(f"the index of the save is damaged: {error}") from error
    except ValueError as error:
        raise ManifestMismatchError(str(error)) from error


# ----------------------------------------------------------------------------------------------
# save directories


def is_saved_pipeline(directory: str | os.PathLike[str]) -> bool:
    """Whether `directory` holds a saved pipeline (restoring it first if its writer was killed
    while putting it in place: `memorag.storage.locking.recover_save`)."""
    recover_save(directory)
    return is_saved(directory, MANIFEST, FORMAT)


def check_save_target(directory: Path) -> None:
    """Refuse to write over anything but an empty folder or a saved pipeline holding only its own files."""
    if directory.exists():
        if not directory.is_dir():
            raise SaveDirectoryError(f"{directory} exists and is not a folder; choose another place to save")
        if any(directory.iterdir()) and not is_saved_pipeline(directory):
            raise SaveDirectoryError(
                f"{directory} exists and holds other files (it is not a saved memorag pipeline); "
                "choose another place to save, or empty it"
            )
        foreign = foreign_files(directory)
        if foreign:
            shown = ", ".join(str(directory / name) for name in foreign[:5])
            more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
            raise SaveDirectoryError(
                f"{directory} is a memorag save but also holds {shown}{more}, which the save does not own; writing "
                "the save would delete it. Move it out of the save folder (e.g. `mv "
                f"{shlex.quote(str(directory / foreign[0]))} {shlex.quote(str(directory.parent))}/`), then run the "
                "command again"
            )


def foreign_files(directory: Path) -> list[str]:
    """Paths (relative) under a saved pipeline's folder that its manifest does not list."""
    if not directory.is_dir() or not is_saved_pipeline(directory):
        return []
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    listed = manifest.get("files") if isinstance(manifest.get("files"), dict) else {}
    if manifest.get("format_version") == 1:  # version 1 listed only the JSONL files
        old_parts = (INDEX + "/", MEMORY + "/")
        return [name for name in _files_of(directory) if name not in listed and not name.startswith(old_parts)]
    owned = set(listed)
    folders = {parent.as_posix() for name in owned for parent in Path(name).parents}
    strays = [name for name in _files_of(directory) if name not in owned]
    strays += [path.relative_to(directory).as_posix() + "/" for path in sorted(directory.rglob("*"))
               if path.is_dir() and path.relative_to(directory).as_posix() not in folders]
    return sorted(strays)


def read_manifest(directory: Path) -> dict:
    """The verified manifest of a saved pipeline: format, version, seal, and every file's checksum."""
    recover_save(directory)
    path = directory / MANIFEST
    if not directory.is_dir() or not path.is_file():
        raise SaveFormatError(
            f"{directory} is not a saved memorag pipeline (no {MANIFEST}); make one with `memorag memorize ... --out DIR`"
        )
    manifest = read_json_manifest(path, FORMAT, FORMAT_VERSION, SaveFormatError, remedy=REMEDY.format(dir=directory))
    missing = {*SECTIONS, SEAL} - set(manifest)
    if missing:
        raise SaveFormatError(f"{path} lacks {sorted(missing)}; the save is damaged: " + REMEDY.format(dir=directory))
    expected = manifest[SEAL] if isinstance(manifest[SEAL], dict) else {}
    edited = sorted(key for key in {*seal(manifest), *expected} if seal(manifest).get(key) != expected.get(key))
    if edited:
        raise SaveFormatError(
            f"{path} was changed after the save: its {', '.join(map(repr, edited))} section(s) do not match the "
            "manifest's seal, so the save cannot be trusted: " + REMEDY.format(dir=directory)
        )
    for name, digest in manifest["files"].items():
        file = directory / name
        if not file.is_file() or sha256_file(file) != digest:
            part = name.split("/")[0] + ("/" if "/" in name else "")
            raise SaveFormatError(
                f"{file} is missing or differs from the manifest's checksum: the save's {part!r} was changed, "
                "damaged or swapped with another save's: " + REMEDY.format(dir=directory)
            )
    return manifest
