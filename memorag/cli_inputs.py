"""The command line's documents: the options that say how files and folders are read, reading
them (before any model work, each unreadable file reported on one line), and the cache that
lets `memorag ask FILE QUESTION` memorize a file once and answer from it after.

The cache holds one pipeline save per (file contents, model settings): under
`$MEMORAG_CACHE_DIR`, else `$XDG_CACHE_HOME/memorag/asked`, else `~/.cache/memorag/asked`.
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

from memorag.documents import DEFAULT_MAX_MB, ReadOptions, expand, read_paths
from memorag.errors import CliInputError


def add_document_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("documents (PDF, Word .docx, HTML, Markdown, text; folders walked)")
    group.add_argument("--include", action="append", default=[], metavar="GLOB",
                       help="in folders, read only files whose name or path below the folder matches (repeatable; "
                            "default: every file but hidden ones)")
    group.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                       help="in folders, leave out files and folders whose name or path matches (repeatable)")
    group.add_argument("--max-file-mb", type=float, default=DEFAULT_MAX_MB, metavar="MB",
                       help=f"refuse files larger than this (default: {DEFAULT_MAX_MB:g})")


def read_options(args: argparse.Namespace) -> ReadOptions:
    return ReadOptions(encoding=args.encoding, max_mb=args.max_file_mb, include=tuple(args.include),
                       exclude=tuple(args.exclude))


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
    if os.environ.get("MEMORAG_CACHE_DIR"):
        return Path(os.environ["MEMORAG_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memorag" / "asked"


def cache_key(paths: Sequence[str], options: ReadOptions, settings: dict) -> str:
    """A key for the files `paths` name (their names and bytes), how they are read, and the
    settings that shape a save (models, chunking: `PipelineConfig.IDENTITY_KEYS`)."""
    from memorag.config import config_to_dict
    from memorag.pipeline import IDENTITY_KEYS

    digest = hashlib.sha256()
    for file in expand(list(paths), options):
        digest.update(os.path.basename(file).encode() + b"\0")
        try:
            with open(file, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
        except OSError:
            digest.update(b"\0unreadable")  # reported when read
        digest.update(b"\0")
    shaping = {key: settings[key] for key in IDENTITY_KEYS if key in settings}
    shaping = {key: config_to_dict(value) if hasattr(value, "__dataclass_fields__") else value
               for key, value in shaping.items()}
    digest.update(json.dumps([options.encoding, shaping], sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]
