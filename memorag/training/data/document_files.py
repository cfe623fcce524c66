"""Documents from local files, read lazily, with a position to resume from.

Supported files: `.txt` (a file is one document, read in blocks that end at a line
break), `.jsonl` (one document per line, its `text_field`), `.parquet` (one document
per row of the `text_field` column; needs `pyarrow`). Folders expand to the
supported files inside them and glob patterns to their matches, both sorted, so a
list of paths always means the same files in the same order.

A reader yields `Block`s: a piece of text, whether it starts / ends a document, and
the position just after it. Reopening a file at that position continues exactly
there, so a stream can be saved and resumed without rereading what came before.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".txt", ".jsonl", ".parquet")


@dataclass(frozen=True)
class Block:
    text: str
    starts_document: bool
    ends_document: bool
    next_offset: int  # where reading resumes after this block (bytes for text files, rows for parquet)


def expand_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Expand folders and glob patterns into a sorted, de-duplicated list of supported files."""
    files: list[Path] = []
    for item in paths:
        text = os.path.expanduser(os.fspath(item))
        if any(char in text for char in "*?["):
            matches = sorted(Path(match) for match in glob.glob(text, recursive=True))
            if not matches:
                raise FileNotFoundError(f"the pattern {text!r} matches no file")
            candidates = matches
        else:
            path = Path(text)
            if path.is_dir():
                candidates = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
                if not candidates:
                    raise FileNotFoundError(f"the folder {path} holds no {', '.join(SUFFIXES)} files")
            elif path.is_file():
                candidates = [path]
            else:
                raise FileNotFoundError(f"data file {path} does not exist")
        for candidate in candidates:
            if candidate.suffix not in SUFFIXES:
                raise ValueError(f"{candidate}: unsupported file type; use {', '.join(SUFFIXES)}")
            if candidate not in files:
                files.append(candidate)
    return files


def read_blocks(path: Path, offset: int = 0, text_field: str = "text", read_chars: int = 65536) -> Iterator[Block]:
    """Blocks of `path` from `offset` (a value of `Block.next_offset`, or 0 for the start)."""
    if path.suffix == ".txt":
        yield from _text_blocks(path, offset, read_chars)
    elif path.suffix == ".jsonl":
        yield from _jsonl_blocks(path, offset, text_field)
    elif path.suffix == ".parquet":
        yield from _parquet_blocks(path, offset, text_field)
    else:
        raise ValueError(f"{path}: unsupported file type; use {', '.join(SUFFIXES)}")


def _text_blocks(path: Path, offset: int, read_chars: int) -> Iterator[Block]:
    size = path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(offset)
        position = offset
        while position < size:
            data = handle.read(read_chars)
            if position + len(data) < size:
                data = data[: _cut_point(data)]
            handle.seek(position + len(data))
            start = position == 0
            position += len(data)
            text = data.decode("utf-8", errors="replace")
            if start:
                text = text.removeprefix("\ufeff")
            yield Block(text, starts_document=start, ends_document=position >= size, next_offset=position)


def _cut_point(data: bytes) -> int:
    """Where to end a block: after its last line break, else its last space, else a character boundary."""
    for separator in (b"\n", b" "):
        index = data.rfind(separator)
        if index > 0:
            return index + 1
    end = len(data)
    while end > 0 and (data[end - 1] & 0xC0) == 0x80:  # continuation bytes of a multi-byte character
        end -= 1
    if end > 0 and data[end - 1] >= 0xC0:  # its lead byte: the whole character goes to the next block
        end -= 1
    return end or len(data)


def _jsonl_blocks(path: Path, offset: int, text_field: str) -> Iterator[Block]:
    with open(path, "rb") as handle:
        handle.seek(offset)
        position = offset
        for line in handle:
            position += len(line)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: a line near byte {position - len(line)} is not JSON ({error})") from error
            text = record.get(text_field) if isinstance(record, dict) else None
            if not isinstance(text, str):
                raise ValueError(f"{path}: a record near byte {position - len(line)} has no string field {text_field!r}")
            if text:
                yield Block(text, starts_document=True, ends_document=True, next_offset=position)


def _parquet_blocks(path: Path, offset: int, text_field: str) -> Iterator[Block]:
    try:
        import pyarrow.parquet as pq
    except ImportError as error:
        raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow") from error
    parquet = pq.ParquetFile(path)
    row = 0
    for group in range(parquet.num_row_groups):
        rows = parquet.metadata.row_group(group).num_rows
        if row + rows <= offset:
            row += rows
            continue
        column = parquet.read_row_group(group, columns=[text_field]).column(text_field).to_pylist()
        for index, text in enumerate(column):
            if row + index < offset:
                continue
            if isinstance(text, str) and text:
                yield Block(text, starts_document=True, ends_document=True, next_offset=row + index + 1)
        row += rows


def hf_documents(name: str, config: str | None, split: str, text_field: str, skip: int = 0) -> Iterator[str]:
    """Texts of a `datasets` dataset, streamed (for machines that reach a hub); `skip` documents first."""
    try:
        import datasets
    except ImportError as error:
        raise ImportError("data.hf_dataset needs the `datasets` package: pip install datasets") from error
    stream = datasets.load_dataset(name, config, split=split, streaming=True)
    if skip:
        stream = stream.skip(skip)
    for record in stream:
        text = record.get(text_field)
        if isinstance(text, str) and text:
            yield text
