"""The memorized corpus: documents, their hashes, chunks, the index, the memory and a version, in one object.

The pipeline (`MemoRAG`) owns one `MemorizedCorpus`; nothing else writes its fields. It
changes in three ways only: `admit` sorts documents offered to `memorize` into new and
already memorized ones (and refuses a known id with another text) without changing
anything; `add` commits what a memorize built (chunks, index, memory) in one step and
moves the version on; `set_memory` records a memory built after the fact, and `set_gists`
the memorag-lite mode's gist memory whenever gists are written. Modes read a
frozen `Corpus` view of it (`view()`).

`save(folder)` writes its part of a pipeline save (documents and chunks as JSONL, the
index, the memory, the gists) and returns what the manifest records of it; `load` reads that part
back and refuses anything that differs from the manifest. The file layout is the save
format's (`memorag.pipeline.persistence` adds the manifest, its seal and the lock).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from memorag.errors import DocumentConflictError, SaveFormatError
from memorag.lite.memory import GistMemory
from memorag.modes.results import Corpus
from memorag.pipeline.helpers import document_sha256
from memorag.retrieval.base import Retriever
from memorag.retrieval.chunking import Chunk, Document
from memorag.storage.io import atomic_write_text, sha256_file

if TYPE_CHECKING:
    from memorag.memory import Memory

DOCUMENTS = "documents.jsonl"
CHUNKS = "chunks.jsonl"
INDEX = "index"
MEMORY = "memory"
GISTS = "gists.jsonl"  # the memorag-lite mode's gist memory (memorag/lite/), when written
# What to do about a save that fails its checks (FILE... are the texts it was made from).
REMEDY = "memorize its texts again: `memorag memorize FILE... --out {dir} --overwrite`"


@dataclass
class Admission:
    """What `admit` made of the documents offered: the new ones with their hashes, and the ids
    of those already memorized with the same text."""

    new: list[Document] = field(default_factory=list)
    hashes: dict[str, str] = field(default_factory=dict)  # doc id -> sha256 of (title, text)
    skipped: list[str] = field(default_factory=list)


class MemorizedCorpus:
    """Documents (in memorized order), their hashes, chunks, the index over them, the memory
    of the documents read in order (None until built) and a version that moves with every
    `add`. Read through its properties; see the module docstring for how it changes."""

    def __init__(self) -> None:
        self._documents: list[Document] = []
        self._hashes: dict[str, str] = {}  # doc id -> sha256 of (title, text)
        self._chunks: list[Chunk] = []
        self._chunk_by_id: dict[int, Chunk] = {}
        self._retriever: Retriever | None = None
        self._memory: Memory | None = None
        self._gists: GistMemory | None = None
        self._version = 0

    # -- reading ------------------------------------------------------------------------------
    @property
    def documents(self) -> tuple[Document, ...]:
        return tuple(self._documents)

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return tuple(self._chunks)

    @property
    def chunk_by_id(self) -> Mapping[int, Chunk]:
        return MappingProxyType(self._chunk_by_id)

    @property
    def retriever(self) -> Retriever | None:
        """The index over `chunks` (None before the first memorize)."""
        return self._retriever

    @property
    def memory(self) -> Memory | None:
        return self._memory

    @property
    def gists(self) -> GistMemory | None:
        """The gist memory of the memorag-lite mode (None until written), of some or all documents."""
        return self._gists

    @property
    def version(self) -> int:
        return self._version

    @property
    def content_sha256(self) -> str:
        """The hash of the documents' ids and texts, in memorized order."""
        digest = hashlib.sha256()
        for document in self._documents:
            digest.update(document.id.encode() + b"\0" + self._hashes[document.id].encode())
        return digest.hexdigest()

    def view(self) -> Corpus:
        """What a mode reads: the documents, the chunks, the version and the content hash, frozen."""
        return Corpus(self.documents, self.chunks, self._version, self.content_sha256)

    # -- changing -----------------------------------------------------------------------------
    def admit(self, documents: Sequence[Document]) -> Admission:
        """Sort `documents` into new ones and ones already memorized with the same text (or the same
        text under another id); a known id with another text is refused. Changes nothing."""
        admission = Admission()
        known_digests = set(self._hashes.values())
        for document in documents:
            digest = document_sha256(document)
            known = self._hashes.get(document.id) or admission.hashes.get(document.id)
            if known == digest or digest in known_digests or digest in admission.hashes.values():
                admission.skipped.append(document.id)
            elif known is not None:
                raise DocumentConflictError(
                    f"document {document.id!r} is already memorized with another text; a memory cannot forget "
                    "text, so memorize the new version under another id or into a new pipeline"
                )
            else:
                admission.hashes[document.id] = digest
                admission.new.append(document)
        return admission

    def add(self, admission: Admission, chunks: Sequence[Chunk], retriever: Retriever,
            memory: Memory | None) -> None:
        """Commit a memorize: the admitted documents, their chunks, the index that now holds them
        and the memory that now reads them (None: not built)."""
        self._retriever, self._memory = retriever, memory
        self._documents.extend(admission.new)
        self._hashes.update(admission.hashes)
        self._chunks.extend(chunks)
        self._chunk_by_id.update((chunk.id, chunk) for chunk in chunks)
        self._version += 1

    def set_memory(self, memory: Memory) -> None:
        """Record the memory of every document, built after `add` was given none."""
        self._memory = memory

    def set_gists(self, gists: GistMemory) -> None:
        """Record the gist memory (of the documents it names; `GistMemory.missing` tells the others)."""
        self._gists = gists

    # -- saving -------------------------------------------------------------------------------
    def save(self, folder: Path) -> dict:
        """Write the documents, chunks, index and memory into `folder`; return the manifest's
        record of them (`content_sha256`, `documents`, `num_chunks`, `memory`)."""
        _write_jsonl(folder / DOCUMENTS, self._documents)
        _write_jsonl(folder / CHUNKS, self._chunks)
        self._retriever.save(folder / INDEX)
        if self._memory is not None:
            self._memory.save(folder / MEMORY)
        if self._gists is not None:
            self._gists.save(folder / GISTS)
        return {
            "content_sha256": self.content_sha256,
            "documents": [
                {"id": d.id, "title": d.title, "sha256": self._hashes[d.id], "num_chars": len(d.text)}
                for d in self._documents
            ],
            "num_chunks": len(self._chunks),
            "memory": None if self._memory is None else memory_record(self._memory, folder / MEMORY),
        }

    @classmethod
    def load(cls, root: Path, manifest: dict, open_index: Callable[[Path], Retriever],
             check_memory: Callable[[Memory], None]) -> MemorizedCorpus:
        """The corpus saved in `root`, checked against its (verified) `manifest`: documents and
        their hashes, chunks, the index (`open_index(path)`) and the memory (its record, then
        `check_memory(memory)` for what the models require of it)."""
        corpus = cls()
        corpus._documents = [Document(**row) for row in _read_jsonl(root / DOCUMENTS)]
        corpus._hashes = {d["id"]: d["sha256"] for d in manifest["documents"]}
        if [d.id for d in corpus._documents] != list(corpus._hashes) or any(
            document_sha256(d) != corpus._hashes[d.id] or [d.title, len(d.text)] != [row["title"], row["num_chars"]]
            for d, row in zip(corpus._documents, manifest["documents"])
        ):
            raise SaveFormatError(f"{root / DOCUMENTS} does not match the manifest's documents; the save is damaged: "
                                  + REMEDY.format(dir=root))
        if corpus.content_sha256 != manifest["content_sha256"]:
            raise SaveFormatError(f"the manifest's content_sha256 is not that of {root / DOCUMENTS}; the save is "
                                  "damaged: " + REMEDY.format(dir=root))
        corpus._chunks = [Chunk(**row) for row in _read_jsonl(root / CHUNKS)]
        corpus._chunk_by_id = {chunk.id: chunk for chunk in corpus._chunks}
        if len(corpus._chunks) != manifest["num_chunks"]:
            raise SaveFormatError(f"{root / CHUNKS} holds {len(corpus._chunks)} chunks, the manifest "
                                  f"{manifest['num_chunks']}")
        corpus._retriever = open_index(root / INDEX)
        if len(corpus._retriever) != len(corpus._chunks):
            raise SaveFormatError(f"{root / INDEX} indexes {len(corpus._retriever)} chunks, not "
                                  f"{len(corpus._chunks)}")
        if manifest.get("memory") is not None:
            from memorag.memory import Memory, MemoryFileError

            try:
                memory = Memory.load(root / MEMORY)
            except MemoryFileError as error:
                raise SaveFormatError(f"the memory of the save ({root / MEMORY}) is damaged: {error}") from error
            check_memory_part(memory, manifest, root)
            check_memory(memory)
            corpus._memory = memory
        if (root / GISTS).is_file():  # listed and checked with every file of the save
            corpus._gists = GistMemory.load(root / GISTS)
        corpus._version = 1
        return corpus


def memory_record(memory: Memory, folder: Path) -> dict:
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


def check_memory_part(memory: Memory, manifest: dict, root: Path) -> None:
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


# Where a document or chunk lies in its file: written only when known, so that a text given as a string
# saves as it did before documents were read from files (and such saves load the same, by the defaults).
_SOURCE_FIELDS = frozenset({"source", "page_starts", "headings", "page", "last_page", "section"})


def _write_jsonl(path: Path, rows: Sequence[Document] | Sequence[Chunk]) -> None:
    atomic_write_text(path, "".join(json.dumps(_row(row), ensure_ascii=False) + "\n" for row in rows))


def _row(row: Document | Chunk) -> dict:
    return {key: value for key, value in dataclasses.asdict(row).items()
            if key not in _SOURCE_FIELDS or value not in (None, "", [])}


def _read_jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SaveFormatError(f"{path} is unreadable ({error}); the save is damaged") from error
