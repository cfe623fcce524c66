"""The retriever interface, search hits, and the on-disk index format shared by all retrievers.

An index directory holds ``manifest.json`` plus the data files it lists::

    {"format": "memorag-retriever", "format_version": 1, "kind": "bm25",
     "settings": {...}, "num_chunks": 123, "files": {"postings.npz": "<sha256>"}}

``save`` writes everything into a temporary sibling directory and moves it into
place with ``os.replace``, so a crash leaves either the old index or the new one,
never a mix. ``load`` checks the format, version, kind and every file's SHA-256,
and reads arrays with ``allow_pickle=False``: no pickles anywhere.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from memorag.retrieval.chunking import Chunk
from memorag.storage import io

FORMAT_NAME = "memorag-retriever"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class Hit:
    """One search result: a chunk id and its score (higher is better)."""

    chunk_id: int
    score: float


class IndexFormatError(ValueError):
    """An index directory is missing, corrupt, from another format/version, or of another kind."""


class Retriever(ABC):
    """A searchable collection of chunks.

    Subclasses set ``kind`` (the manifest's kind; also the registry key used by
    ``load_retriever``) and implement the abstract methods. ``add`` is incremental:
    work done for chunks already added is never redone for them.
    """

    kind: ClassVar[str]
    _registry: ClassVar[dict[str, type[Retriever]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is not None:
            Retriever._registry[kind] = cls

    @abstractmethod
    def add(self, chunks: Sequence[Chunk]) -> None:
        """Index more chunks; their ids must be new to this retriever."""

    @abstractmethod
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """For each query, up to ``k`` hits, best first."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of indexed chunks."""

    @abstractmethod
    def _settings(self) -> dict[str, Any]:
        """JSON-serialisable settings recorded in the manifest."""

    @abstractmethod
    def _write_files(self, directory: Path) -> None:
        """Write the data files into ``directory`` (a fresh temporary directory)."""

    @classmethod
    @abstractmethod
    def _read_files(cls, directory: Path, manifest: dict[str, Any], **kwargs: Any) -> Self:
        """Rebuild a retriever from a verified index directory."""

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the index to ``directory`` atomically (replacing an earlier index there)."""
        with atomic_directory(directory) as staging:
            self._write_files(staging)
            files = {path.name: io.sha256_file(path) for path in sorted(staging.iterdir()) if path.is_file()}
            manifest = {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,
                "kind": self.kind,
                "settings": self._settings(),
                "num_chunks": len(self),
                "files": files,
            }
            (staging / MANIFEST_NAME).write_text(
                json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )

    @classmethod
    def load(cls, directory: str | os.PathLike[str], **kwargs: Any) -> Self:
        """Load an index saved by ``save``; raises ``IndexFormatError`` if it is not one of ours.

        ``Retriever.load`` itself loads any kind (see ``load_retriever``).
        """
        if "kind" not in cls.__dict__:
            return load_retriever(directory, **kwargs)  # type: ignore[return-value]
        path = Path(directory)
        manifest = read_manifest(path, kind=cls.kind)
        retriever = cls._read_files(path, manifest, **kwargs)
        if len(retriever) != manifest["num_chunks"]:
            raise IndexFormatError(
                f"{path}: manifest says {manifest['num_chunks']} chunks, data holds {len(retriever)}"
            )
        return retriever


def load_retriever(directory: str | os.PathLike[str], **kwargs: Any) -> Retriever:
    """Load any saved retriever, dispatching on the manifest's ``kind``."""
    kind = read_manifest(Path(directory))["kind"]
    if kind not in Retriever._registry:
        raise IndexFormatError(
            f"{directory}: unknown retriever kind {kind!r}; known: {sorted(Retriever._registry)} "
            "(import the module that defines it first)"
        )
    return Retriever._registry[kind].load(directory, **kwargs)  # a subclass: no recursion


def read_manifest(directory: Path, kind: str | None = None) -> dict[str, Any]:
    """Read and verify ``manifest.json`` and the checksums of the files it lists."""
    manifest_path = directory / MANIFEST_NAME
    manifest = io.read_json_manifest(manifest_path, FORMAT_NAME, FORMAT_VERSION, IndexFormatError)
    missing = {"kind", "settings", "num_chunks", "files"} - manifest.keys()
    if missing:
        raise IndexFormatError(f"{manifest_path}: corrupt manifest, missing {sorted(missing)}")
    if kind is not None and manifest["kind"] != kind:
        raise IndexFormatError(f"{directory}: holds a {manifest['kind']!r} index, expected {kind!r}")
    for name, digest in manifest["files"].items():
        file_path = directory / name
        if Path(name).name != name or not file_path.is_file():
            raise IndexFormatError(f"{directory}: file {name!r} listed in the manifest is missing")
        if io.sha256_file(file_path) != digest:
            raise IndexFormatError(f"{file_path}: checksum mismatch; the index is corrupt")
    return manifest


def atomic_directory(directory: str | os.PathLike[str]):
    """A staging directory that replaces ``directory`` on success (see `memorag.storage.io.atomic_directory`).

    An existing ``directory`` is replaced only if it is empty or a saved index.
    """
    return io.atomic_directory(directory, replaceable=lambda d: io.is_saved(d, MANIFEST_NAME, FORMAT_NAME))


def check_new_chunk_ids(existing_ids: Iterable[int], chunks: Sequence[Chunk]) -> list[int]:
    """Ids of ``chunks`` as ints; ``ValueError`` if any repeats or is already indexed."""
    if isinstance(chunks, Chunk):
        raise TypeError("add() takes a list of Chunk, not a single Chunk")
    new_ids = [int(chunk.id) for chunk in chunks]
    if len(set(new_ids)) != len(new_ids):
        raise ValueError("duplicate chunk ids within the chunks being added")
    existing = existing_ids if isinstance(existing_ids, set) else set(existing_ids)
    clashes = existing.intersection(new_ids)
    if clashes:
        raise ValueError(f"chunk ids already indexed: {sorted(clashes)[:10]}")
    return new_ids


def check_queries(queries: Sequence[str], k: int) -> None:
    """Reject a bare string (it would be searched character by character) and k < 1."""
    if isinstance(queries, str):
        raise TypeError("queries must be a list of strings, not a single string")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
