"""The command line's documents: the options that say how files and folders are read, reading
them (before any model work, each unreadable file reported on one line), and the cache that
lets `memorag ask FILE QUESTION` memorize a file once and answer from it after.

The cache holds one pipeline save per (file contents, model settings): under
`asked/` under the cache root (`memorag.storage.cache_root`: `$MEMORAG_CACHE`, default `~/.cache/memorag`).
A file that changes gets a new key; a save that no longer loads is memorized again over.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from memorag.documents import (
           DEFAULT_MAX_MB,
           DEFAULT_MEMORY_MB,
           DEFAULT_SECONDS,
           DocumentReadError,
           ReadOptions,
           read_paths,
)
from memorag.documents.files import openable, walk
from memorag.errors import CliInputError
from memorag.storage.cache_root import cache_home


def add_document_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("documents (PDF, Word .docx, HTML, Markdown, text; folders walked)")
    group.add_argument("--include", action="append", default=[], metavar="GLOB",
                       help="in folders, read only files whose name or path below the folder matches (repeatable; "
                            "default: every file but hidden ones)")
    group.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                       help="in folders, leave out files and folders whose name or path matches (repeatable)")
    group.add_argument("--max-file-mb", type=float, default=DEFAULT_MAX_MB, metavar="MB",
                       help=f"refuse files larger than this, from their size before they are read, and files "
                            f"whose text is longer than this many million characters (default: {DEFAULT_MAX_MB:g})")
    add_read_limit_options(group)
    group.add_argument("--follow-links", action="store_true",
                       help="in folders, read files and folders that links lead to outside the folder (default: "
                            "refused by name, so a link to /etc/passwd or /dev/zero is never read)")


def add_read_limit_options(group) -> None:
    """--read-memory-mb and --read-seconds: the limits of reading one file (the server has them too)."""
    group.add_argument("--read-memory-mb", type=int, default=DEFAULT_MEMORY_MB, metavar="MB",
                       help="memory one file's reading may take: files are read in a separate process with this "
                            f"address space; a file needing more is refused (default: {DEFAULT_MEMORY_MB})")
    group.add_argument("--read-seconds", type=float, default=DEFAULT_SECONDS, metavar="SECONDS",
                       help=f"time one file's reading may take before it is stopped and refused "
                            f"(default: {DEFAULT_SECONDS:g})")


def read_options(args: argparse.Namespace) -> ReadOptions:
    return ReadOptions(encoding=args.encoding, max_mb=args.max_file_mb, include=tuple(args.include),
                       exclude=tuple(args.exclude), memory_mb=args.read_memory_mb, seconds=args.read_seconds,
                       follow_links=args.follow_links)


def read_documents(paths: Sequence[str], options: ReadOptions, report: Callable[[str], None]) -> tuple[list, int]:
    """The documents in `paths` (files and folders) and the number of files that could not be read,
    each reported by `report` on one line. Nothing readable raises the first problem."""
    result = read_paths(list(paths), options)
    if not result.documents and len(result.problems) == 1:
        raise result.problems[0]
    for problem in result.problems:
        report(f"memorag: error: {problem}")
    if not result.documents:
        raise CliInputError(f"none of the {len(result.problems)} file(s) could be read (see above)" if result.problems
                            else f"no files to read in {', '.join(paths)}; check the paths and --include/--exclude")
    return result.documents, len(result.problems)


def print_problem(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cache_root() -> Path:
    """Where the saves of documents asked about by file live: `asked/` under the cache root."""
    return cache_home() / "asked"


def cache_key(paths: Sequence[str], options: ReadOptions, settings: dict, identity_keys: Sequence[str]) -> str:
    """A key for the files `paths` name (their names and bytes), how they are read, and the
    settings that shape a save (`identity_keys`: the pipeline's `IDENTITY_KEYS`, models and chunking)."""
    from memorag.config import config_to_dict

    digest = hashlib.sha256()
    for file, root in walk(list(paths), options).files:
        digest.update(os.fsencode(file.name) + b"\0")
        try:  # the checks reading makes first: a FIFO, a device or a link out of the folder is never opened
            with open(openable(file, root, options), "rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
        except (OSError, DocumentReadError):
            digest.update(b"\0unreadable")  # reported when read
        digest.update(b"\0")
    shaping = {key: settings[key] for key in identity_keys if key in settings}
    shaping = {key: config_to_dict(value) if hasattr(value, "__dataclass_fields__") else value
               for key, value in shaping.items()}
    digest.update(json.dumps([options.encoding, shaping], sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]
