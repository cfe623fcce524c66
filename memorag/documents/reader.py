"""Files and folders to documents: walk, check, detect the format, extract, record the source.

Everything here runs before any model work, so a bad file costs nothing but its own reading.
Each file is read in a reader process within `ReadOptions.memory_mb` and `ReadOptions.seconds`
(`sandbox`), after the checks that need no parsing (`files`: its kind, links, size).
`read_paths` reads what it can and reports each file it cannot (`ReadResult.problems`, one
line each, naming the file and the fix); `read_file` and `extract` raise for their one file.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted
from memorag.documents.files import openable, shown, walk
from memorag.documents.options import ReadOptions
from memorag.documents.sandbox import pool_for

if TYPE_CHECKING:
    from memorag.retrieval.chunking import Document


@dataclass
class ReadResult:
    """The documents read, in order, and one line for each file that could not be read."""

    documents: list[Document] = field(default_factory=list)
    problems: list[DocumentReadError] = field(default_factory=list)


def extract(data: bytes, name: str, options: ReadOptions = ReadOptions()) -> tuple[str, Extracted]:
    """The format of `data` (a file named `name`) and its text with pages and headings, read within
    the limits of `options`."""
    options.check_size(len(data), name)
    return pool_for(options.memory_mb).read(("bytes", (data, name, options)), name, options.seconds)


def read_file(path: str | os.PathLike[str], options: ReadOptions = ReadOptions(), doc_id: str | None = None) -> Document:
    """The document in the file at `path` (its id: `doc_id`, else the file's name)."""
    return _read(Path(path), None, options, doc_id)


def _read(path: Path, root: Path | None, options: ReadOptions, doc_id: str | None) -> Document:
    name = shown(path)
    target = openable(path, root, options)
    _, extracted = pool_for(options.memory_mb).read(("file", (target, name, options)), name, options.seconds)
    from memorag.retrieval.chunking import Document  # after the checks: a bad file fails before heavy imports

    return Document(id=doc_id or path.name, text=extracted.text, title=path.name, source=name,
                    page_starts=extracted.page_starts, headings=extracted.headings)


def expand(paths: list[str | os.PathLike[str]], options: ReadOptions = ReadOptions()) -> list[Path]:
    """The files `paths` name: files as given, folders walked (sorted, recursively) through the
    include and exclude patterns. A path that does not exist is kept, to be reported when read."""
    return [file for file, _ in walk(paths, options).files]


def read_paths(paths: list[str | os.PathLike[str]], options: ReadOptions = ReadOptions()) -> ReadResult:
    """Every file `paths` names (folders walked; see `expand`), each read or reported. Documents are
    named by file name; two files of the same name are told apart by their paths."""
    walked = walk(paths, options)
    names = Counter(file.name for file, _ in walked.files)
    result = ReadResult(problems=list(walked.problems))
    for file, root in walked.files:
        doc_id = os.path.normpath(file) if names[file.name] > 1 else file.name
        try:
            result.documents.append(_read(file, root, options, doc_id))
        except DocumentReadError as problem:
            result.problems.append(problem)
    return result
