"""Saving and loading a pipeline: one folder, written atomically under a lock, verified on load.

A save holds the documents and chunks (JSONL), the retriever's index, the memory, and
a manifest with the format, the models' identity, the settings, a record of the memory
(its tensors' hash, token count, ratio, content hash) and the checksum of every file the
save owns. The manifest is sealed: the hash of each of its sections is stored in it, so
an edit of any field is refused on load, naming the section. On load every file is
checked against the manifest, and the memory against its record and the models' identity,
so a part swapped with the same part of another save is refused, naming the part.

Writers take the save's lock (`memorag.locking.save_lock`) before reading the old save and
keep it until the new one is in place; a save folder holding a file the save does not own
is never written over.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memorag.config import config_from_dict, config_to_dict
from memorag.embedded import is_memory_weights_id, is_memory_weights_name
from memorag.io import atomic_directory, atomic_write_text, is_saved, read_json_manifest, sha256_file
from memorag.locking import save_lock
from memorag.memory.config import MemoryConfig
from memorag.pipeline.helpers import document_sha256, label_embedder, label_lm, split_model_args
from memorag.pipeline.types import (
    IDENTITY_KEYS,
    EmptyCorpusError,
    ManifestMismatchError,
    PipelineConfig,
    SaveDirectoryError,
    SaveFormatError,
)
from memorag.retrieval.base import IndexFormatError
from memorag.retrieval.chunking import Chunk, Document

if TYPE_CHECKING:
    from memorag.pipeline.core import MemoRAG

FORMAT = "memorag-pipeline"
FORMAT_VERSION = 2  # 2: every file listed, the memory recorded, the manifest sealed
MANIFEST = "manifest.json"
DOCUMENTS = "documents.jsonl"
CHUNKS = "chunks.jsonl"
INDEX = "index"
MEMORY = "memory"
SEAL = "seal"
SECTIONS = ("models", "settings", "content_sha256", "documents", "num_chunks", "memory", "files")
# What to do about a save that fails its checks (FILE... are the texts it was made from).
REMEDY = "memorize its texts again: `memorag memorize FILE... --out {dir} --overwrite`"


def _manifest_models(rag: MemoRAG) -> dict:
    return {
        "memory_model": rag.memory_model.name,
        "memory_identity": rag.memory_model.identity(),
        "embedder": rag.embedder_name if rag.config.retriever != "bm25" else None,
    }

def save_pipeline(rag: MemoRAG, directory: str | os.PathLike[str], wait: float = 300.0) -> Path:
    """Write documents, chunks, index, memory and a manifest into `directory`, atomically.

    Holds the save's lock while writing (waiting at most `wait` seconds for another writer).
    An existing saved pipeline there is replaced; any other content, or a file inside the
    old save that it does not own, is refused.
    """
    if not rag.documents:
        raise EmptyCorpusError("nothing to save: memorize something first")
    target = Path(directory)
    models = _manifest_models(rag)
    with save_lock(target, wait):
        check_save_target(target)
        with atomic_directory(target) as staging:
            atomic_write_text(staging / DOCUMENTS, "".join(
                json.dumps(dataclasses.asdict(document), ensure_ascii=False) + "\n" for document in rag.documents))
            atomic_write_text(staging / CHUNKS, "".join(
                json.dumps(dataclasses.asdict(chunk), ensure_ascii=False) + "\n" for chunk in rag.chunks))
            rag.retriever.save(staging / INDEX)
            if rag.memory is not None:
                rag.memory.save(staging / MEMORY)
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "models": models,
                "settings": config_to_dict(rag.config),
                "content_sha256": rag.content_sha256,
                "documents": [
                    {"id": d.id, "title": d.title, "sha256": rag._document_hashes[d.id], "num_chars": len(d.text)}
                    for d in rag.documents
                ],
                "num_chunks": len(rag.chunks),
                "memory": None if rag.memory is None else memory_record(rag.memory, staging / MEMORY),
                "files": {name: sha256_file(staging / name) for name in _files_of(staging)},
            }
            manifest[SEAL] = seal(manifest)
            atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return target


def memory_record(memory, folder: Path) -> dict:
    """What the manifest records of a memory, to check it against on load."""
    from memorag.memory.state import TENSORS

    return {
        "num_tokens": memory.num_tokens,
        "num_entries": memory.num_entries,
        "content_sha256": memory.content_sha256,
        "ratio": memory.ratio,
        "chat": memory.chat,
        "tensors_sha256": sha256_file(folder / TENSORS),
    }


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


def load_pipeline(
    cls: type[MemoRAG],
    directory: str | os.PathLike[str],
    *,
    memory_model=None,
    embedder=None,
    embedder_name: str | None = None,
    generator=None,
    **overrides: Any,
) -> MemoRAG:
    """Load a saved pipeline, verifying its files and that the models and settings match.

    Settings that are free to change (generator, mode, budgets...) are not taken from
    the save: they are the defaults unless given in `overrides`. An identity setting (memory model, memory config, embedder, retriever, chunking)
    that differs from the saved one is refused with `ManifestMismatchError`, and so are
    other memory weights. `memory_weights` may point to the weights' new place.
    """
    memory_model, embedder, generator = split_model_args(overrides, memory_model, embedder, generator)
    root = Path(directory)
    manifest = read_manifest(root)
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
    # The save fixes the identity settings (and where the memory weights were); the rest are
    # this run's: the defaults, then the caller's overrides.
    settings = {key: getattr(saved, key) for key in (*IDENTITY_KEYS, "memory_weights")}
    settings["memory"] = None if saved.memory is None else saved.memory.to_dict()
    settings.update({key: value for key, value in overrides.items() if key not in IDENTITY_KEYS or value is not None})
    if saved.memory_weights and overrides.get("memory_weights") is None and memory_model is None:
        if (not Path(saved.memory_weights).exists() and not is_memory_weights_id(saved.memory_weights)
                and not is_memory_weights_name(saved.memory_weights)):
            raise ManifestMismatchError(
                f"{root} was memorized with the memory weights in {saved.memory_weights}, which are no longer "
                "there; pass memory_weights (--memory-weights) with their new place"
            )
    config = config_from_dict(PipelineConfig, settings)
    rag = cls(config, memory_model=memory_model, embedder=embedder, embedder_name=embedder_name, generator=generator)

    models = manifest["models"]
    saved_embedder = models.get("embedder")
    if saved_embedder is not None:
        asked = embedder_name if embedder is not None else label_embedder(config.embedder)
        if (embedder is None or embedder_name is not None) and asked != saved_embedder:
            raise ManifestMismatchError(
                f"{root} was indexed with the embedder {saved_embedder!r}, not {asked!r}; use the same "
                "embedder or memorize the context again"
            )
        rag.embedder_name = saved_embedder
    identity = rag.memory_model.identity()
    differences = {
        key: (models["memory_identity"].get(key), identity.get(key))
        for key in sorted(set(identity) | set(models["memory_identity"]))
        if identity.get(key) != models["memory_identity"].get(key)
    }
    if differences:
        detail = "; ".join(f"{key}: saved {old!r}, now {new!r}" for key, (old, new) in differences.items())
        hint = (" (other memory weights: pass the --memory-weights it was memorized with)"
                if "memory_weights_sha256" in differences else "")
        raise ManifestMismatchError(
            f"{root} was memorized by another memory model or other settings: {detail}{hint}; use the same "
            "models or memorize the context again"
        )

    rag.documents = [Document(**row) for row in _read_jsonl(root / DOCUMENTS)]
    rag._document_hashes = {d["id"]: d["sha256"] for d in manifest["documents"]}
    if [d.id for d in rag.documents] != list(rag._document_hashes) or any(
        document_sha256(d) != rag._document_hashes[d.id] or [d.title, len(d.text)] != [row["title"], row["num_chars"]]
        for d, row in zip(rag.documents, manifest["documents"])
    ):
        raise SaveFormatError(f"{root / DOCUMENTS} does not match the manifest's documents; the save is damaged: "
                              + REMEDY.format(dir=root))
    if rag.content_sha256 != manifest["content_sha256"]:
        raise SaveFormatError(f"the manifest's content_sha256 is not that of {root / DOCUMENTS}; the save is "
                              "damaged: " + REMEDY.format(dir=root))
    rag.chunks = [Chunk(**row) for row in _read_jsonl(root / CHUNKS)]
    rag._chunk_by_id = {chunk.id: chunk for chunk in rag.chunks}
    if len(rag.chunks) != manifest["num_chunks"]:
        raise SaveFormatError(f"{root / CHUNKS} holds {len(rag.chunks)} chunks, the manifest {manifest['num_chunks']}")
    rag.retriever = _load_index(rag, root / INDEX)
    if len(rag.retriever) != len(rag.chunks):
        raise SaveFormatError(f"{root / INDEX} indexes {len(rag.retriever)} chunks, not {len(rag.chunks)}")
    if manifest.get("memory") is not None:
        from memorag.memory import Memory, MemoryFileError

        try:
            rag.memory = Memory.load(root / MEMORY)
        except MemoryFileError as error:
            raise SaveFormatError(f"the memory of the save ({root / MEMORY}) is damaged: {error}") from error
        check_memory_part(rag.memory, manifest, root)
        rag.memory_model.check_memory(rag.memory)
        _check_memory_dtype(rag, root)
    rag._version = 1
    return rag


def check_memory_part(memory, manifest: dict, root: Path) -> None:
    """Refuse a memory that is not the one the manifest records (another text's, other settings)."""
    record = manifest["memory"]
    actual = memory_record(memory, root / MEMORY)
    wrong = [key for key in sorted(set(record) | set(actual)) if record.get(key) != actual.get(key)]
    if memory.identity != manifest["models"]["memory_identity"]:
        wrong.append("identity")
    if wrong:
        detail = "; ".join(
            f"{key}: manifest {record.get(key)!r}, memory {actual.get(key)!r}" if key != "identity"
            else "identity: the memory was made by another model or other settings than the manifest's models"
            for key in wrong)
        raise SaveFormatError(
            f"the memory of the save ({root / MEMORY}) is not the one its manifest records ({detail}); it was "
            "changed or swapped with another save's memory: " + REMEDY.format(dir=root)
        )


def _check_memory_dtype(rag: MemoRAG, root: Path) -> None:
    """A memory holds keys and values in the dtype it was memorized in; the model must run in it."""
    saved = rag.memory.keys[0].dtype if rag.memory.keys else None
    running = rag.memory_model.base_dtype
    if saved is not None and saved != running:
        saved_name, running_name = (str(dtype).removeprefix("torch.") for dtype in (saved, running))
        raise ManifestMismatchError(
            f"{root} was memorized in {saved_name} and the memory model now runs in {running_name}; ask it "
            f"with --dtype {saved_name} (dtype={saved_name}), or memorize the context again in {running_name}"
        )


def _load_index(rag: MemoRAG, path: Path):
    from memorag.retrieval.base import load_retriever

    embedder_args = {"embedder": rag.embedder, "embedder_name": rag.embedder_name}
    try:
        if rag.config.retriever == "dense":
            return load_retriever(path, **embedder_args)
        if rag.config.retriever == "hybrid":
            return load_retriever(path, kwargs_by_kind={"dense": embedder_args})
        return load_retriever(path)
    except IndexFormatError as error:
        raise SaveFormatError(f"the index of the save is damaged: {error}") from error
    except ValueError as error:
        raise ManifestMismatchError(str(error)) from error


# ----------------------------------------------------------------------------------------------
# save directories


def is_saved_pipeline(directory: str | os.PathLike[str]) -> bool:
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


def _read_jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SaveFormatError(f"{path} is unreadable ({error}); the save is damaged") from error