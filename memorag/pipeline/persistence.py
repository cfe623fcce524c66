"""Saving and loading a pipeline: one folder, written atomically, verified on load.

A save holds the documents and chunks (JSONL), the retriever's index, the memory, and
a manifest with the format, the models' identity, the settings and file checksums.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memorag.config import config_from_dict, config_to_dict
from memorag.io import atomic_directory, atomic_write_text, is_saved, read_json_manifest, sha256_file
from memorag.memory.config import MemoryConfig
from memorag.models import is_memory_weights_id
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
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DOCUMENTS = "documents.jsonl"
CHUNKS = "chunks.jsonl"
INDEX = "index"
MEMORY = "memory"


def _manifest_models(rag: MemoRAG) -> dict:
    return {
        "memory_model": rag.memory_model.name,
        "memory_identity": rag.memory_model.identity(),
        "embedder": rag.embedder_name if rag.config.retriever != "bm25" else None,
    }

def save_pipeline(rag: MemoRAG, directory: str | os.PathLike[str]) -> Path:
    """Write documents, chunks, index, memory and a manifest into `directory`, atomically.

    An existing saved pipeline there is replaced; any other existing content is refused.
    """
    if not rag.documents:
        raise EmptyCorpusError("nothing to save: memorize something first")
    target = Path(directory)
    check_save_target(target)
    models = _manifest_models(rag)
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
            "memory": None if rag.memory is None else {
                "num_tokens": rag.memory.num_tokens,
                "num_entries": rag.memory.num_entries,
                "content_sha256": rag.memory.content_sha256,
            },
            "files": {name: sha256_file(staging / name) for name in (DOCUMENTS, CHUNKS)},
        }
        atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return target

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
        if not Path(saved.memory_weights).exists() and not is_memory_weights_id(saved.memory_weights):
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
        document_sha256(d) != rag._document_hashes[d.id] for d in rag.documents
    ):
        raise SaveFormatError(f"{root / DOCUMENTS} does not match its manifest; the save is damaged")
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
            raise SaveFormatError(str(error)) from error
        rag.memory_model.check_memory(rag.memory)
    rag._version = 1
    return rag

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
    """Refuse to write over anything but an empty folder or a saved pipeline."""
    if directory.exists():
        if not directory.is_dir():
            raise SaveDirectoryError(f"{directory} exists and is not a folder; choose another place to save")
        if any(directory.iterdir()) and not is_saved_pipeline(directory):
            raise SaveDirectoryError(
                f"{directory} exists and holds other files (it is not a saved memorag pipeline); "
                "choose another place to save, or empty it"
            )


def read_manifest(directory: Path) -> dict:
    """The verified manifest of a saved pipeline (format, version, file checksums)."""
    path = directory / MANIFEST
    if not directory.is_dir() or not path.is_file():
        raise SaveFormatError(
            f"{directory} is not a saved memorag pipeline (no {MANIFEST}); make one with `memorag memorize ... --out DIR`"
        )
    manifest = read_json_manifest(path, FORMAT, FORMAT_VERSION, SaveFormatError)
    missing = {"models", "settings", "documents", "num_chunks", "files"} - set(manifest)
    if missing:
        raise SaveFormatError(f"{path} lacks {sorted(missing)}; the save is damaged")
    for name, digest in manifest["files"].items():
        file = directory / name
        if not file.is_file() or sha256_file(file) != digest:
            raise SaveFormatError(f"{file} is missing or corrupt (its checksum differs from the manifest's)")
    return manifest


def _read_jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SaveFormatError(f"{path} is unreadable ({error}); the save is damaged") from error