"""Files and folders to documents: walk, check, detect the format, extract, record the source.

Everything here runs before any model work, so a bad file costs nothing but its own reading.
`read_paths` reads what it can and reports each file it cannot (`ReadResult.problems`, one
line each, naming the file and the fix); `read_file` raises for its one file.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memorag.documents.detect import detect_format
from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted
from memorag.documents.text import AUTO, decode_text, read_text

if TYPE_CHECKING:
    from memorag.retrieval.chunking import Document

DEFAULT_MAX_MB = 200.0
# Files a folder walk passes over unless an --include pattern names them: hidden files and folders
# (.git, .venv) are never walked into; these are skipped as not documents.
DEFAULT_EXCLUDE = (".*", "*~", "*.pyc", "__pycache__", "*.memorag")


@dataclass(frozen=True)
class ReadOptions:
    """How files are read: the text encoding ("auto": detected), the largest file in MB, and for
    folders the glob patterns of file names (or paths below the folder) to take and to leave."""

    encoding: str = AUTO
    max_mb: float = DEFAULT_MAX_MB
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.max_mb > 0:
            raise DocumentReadError("--max-file-mb", f"is {self.max_mb}", "give a size in MB above 0")


@dataclass
class ReadResult:
    """The documents read, in order, and one line for each file that could not be read."""

    documents: list[Document] = field(default_factory=list)
    problems: list[DocumentReadError] = field(default_factory=list)


def extract(data: bytes, name: str, encoding: str = AUTO) -> tuple[str, Extracted]:
    """The format of `data` (a file named `name`) and its text with pages and headings."""
    if not data:
        raise DocumentReadError(name, "is empty", "give a file with some text")
    if not data.strip():
        raise DocumentReadError(name, "holds only whitespace", "give a file with some text")
    kind = detect_format(data, name)
    if kind == "pdf":
        from memorag.documents.pdf import read_pdf

        extracted = read_pdf(data, name)
    elif kind == "docx":
        from memorag.documents.docx import read_docx

        extracted = read_docx(data, name)
    elif kind == "html":
        from memorag.documents.html import read_html

        extracted = read_html(data, name, decode_text(data, name, encoding) if encoding != AUTO else None)
    elif kind == "markdown":
        from memorag.documents.markdown import read_markdown

        extracted = read_markdown(decode_text(data, name, encoding))
    else:
        extracted = read_text(data, name, encoding)
    if not extracted.text.strip():
        raise DocumentReadError(name, f"holds no text (read as {kind})", "give a file with some text")
    return kind, extracted


def read_file(path: str | os.PathLike[str], options: ReadOptions = ReadOptions(), doc_id: str | None = None) -> Document:
    """The document in the file at `path` (its id: `doc_id`, else the file's name)."""
    file = Path(path)
    shown = os.fspath(path)
    if not file.exists():
        raise DocumentReadError(shown, "no such file", "check the path")
    if file.is_dir():
        raise DocumentReadError(shown, "is a folder", "give its files, or memorize the folder")
    size = file.stat().st_size
    if size > options.max_mb * 1e6:
        raise DocumentReadError(shown, f"is {size / 1e6:,.1f} MB, over the limit of {options.max_mb:g} MB",
                                "split it, or raise the limit (--max-file-mb)")
    try:
        data = file.read_bytes()
    except OSError as error:
        raise DocumentReadError(shown, f"cannot be read ({error.strerror or error})", "check its permissions") from error
    _, extracted = extract(data, shown, options.encoding)
    from memorag.retrieval.chunking import Document  # after the checks: a bad file fails before heavy imports

    return Document(id=doc_id or file.name, text=extracted.text, title=file.name, source=shown,
                    page_starts=extracted.page_starts, headings=extracted.headings)


def expand(paths: list[str | os.PathLike[str]], options: ReadOptions = ReadOptions()) -> list[Path]:
    """The files `paths` name: files as given, folders walked (sorted, recursively) through the
    include and exclude patterns. A path that does not exist is kept, to be reported when read."""
    files: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            files.append(path)
            continue
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = sorted(name for name in subfolders if not _excluded(name, name, options, folder=True))
            for name in sorted(names):
                relative = os.path.relpath(os.path.join(folder, name), path)
                if not _excluded(name, relative, options):
                    files.append(Path(folder) / name)
    return files


def _excluded(name: str, relative: str, options: ReadOptions, folder: bool = False) -> bool:
    matches = lambda patterns: any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(relative, p) for p in patterns)
    if matches(options.exclude) or (matches(DEFAULT_EXCLUDE) and not (options.include and matches(options.include))):
        return True
    return bool(options.include) and not folder and not matches(options.include)


def read_paths(paths: list[str | os.PathLike[str]], options: ReadOptions = ReadOptions()) -> ReadResult:
    """Every file `paths` names (folders walked; see `expand`), each read or reported. Documents are
    named by file name; two files of the same name are told apart by their paths."""
    files = expand(paths, options)
    names = [file.name for file in files]
    result = ReadResult()
    for path in map(Path, paths):
        if path.is_dir() and not any(file.is_relative_to(path) for file in files):
            result.problems.append(DocumentReadError(os.fspath(path), "holds no files to read",
                                                     "check the folder, or its --include/--exclude patterns"))
    for file in files:
        doc_id = os.path.normpath(file) if names.count(file.name) > 1 else file.name
        try:
            result.documents.append(read_file(file, options, doc_id))
        except DocumentReadError as problem:
            result.problems.append(problem)
    return result
