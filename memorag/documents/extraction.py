"""One file's bytes to text, in this process and with no limits of its own: what the reader
process (`memorag.documents.reader_process`) runs under the memory and time limits `sandbox` sets.

A file's format and whether it is binary are decided from its first bytes (`SAMPLE_BYTES`)
before the rest is read; a file is opened without blocking (a FIFO put in its place after
it was checked cannot hang the reader) and read no further than the size limit.
"""

from __future__ import annotations

import os
import stat

from memorag.documents.detect import SAMPLE_BYTES, detect_format
from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted
from memorag.documents.options import ReadOptions
from memorag.documents.text import AUTO, decode_text, read_text, refuse_binary_sample


def extract_file(path: str, shown: str, options: ReadOptions) -> tuple[str, Extracted]:
    """The format and text of the regular file at `path` (named `shown` in messages)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as error:
        raise DocumentReadError(shown, f"cannot be read ({error.strerror or error})", "check its permissions") from error
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(descriptor)
        size = info.st_size
        if not stat.S_ISREG(info.st_mode):
            raise DocumentReadError(shown, "is not a regular file (it changed after it was checked)", "give a file")
        options.check_size(size, shown)
        head = handle.read(SAMPLE_BYTES)
        tail = head[-1024:]
        if size > len(head):
            handle.seek(max(size - 1024, len(head)))
            tail = handle.read(1024)
            handle.seek(len(head))
        _classify(head, tail, shown, options, whole=size <= len(head))
        data = _read_rest(handle, head, int(options.max_mb * 1e6) + 1)
    options.check_size(len(data), shown)  # it grew after it was measured
    return extract_bytes(data, shown, options)


def _read_rest(handle, head: bytes, most: int) -> bytes:
    """`head` and what follows it in `handle`, up to `most` bytes in all (read in blocks: a file's
    stated size may be 0, as in /proc, or change)."""
    blocks, total = [head], len(head)
    while total < most:
        block = handle.read(min(1 << 24, most - total))
        if not block:
            break
        blocks.append(block)
        total += len(block)
    return b"".join(blocks)


def extract_bytes(data: bytes, name: str, options: ReadOptions) -> tuple[str, Extracted]:
    """The format of `data` (a file named `name`) and its text with pages and headings."""
    kind = _classify(data, data[-1024:], name, options, whole=True)
    if kind == "pdf":
        from memorag.documents.pdf import read_pdf

        extracted = read_pdf(data, name)
    elif kind == "docx":
        from memorag.documents.docx import read_docx

        extracted = read_docx(data, name, options.memory_mb)
    elif kind == "html":
        from memorag.documents.html import decode_html, read_html

        extracted = read_html(decode_html(data, name, options.encoding))
    elif kind == "markdown":
        from memorag.documents.markdown import read_markdown

        extracted = read_markdown(decode_text(data, name, options.encoding))
    else:
        extracted = read_text(data, name, options.encoding)
    if not extracted.text.strip():
        raise DocumentReadError(name, f"holds no text (read as {kind})", "give a file with some text")
    if len(extracted.text) > options.max_mb * 1e6:
        raise DocumentReadError(name, f"cannot be read safely: its text is {len(extracted.text) / 1e6:,.0f} million "
                                      f"characters (limit {options.max_mb:g} million, the size limit)",
                                "split it, or raise the limit (--max-file-mb)")
    return kind, extracted


def _classify(head: bytes, tail: bytes, name: str, options: ReadOptions, whole: bool) -> str:
    """The format of a file from its first bytes `head` and last kB `tail` (`whole`: `head` is all
    of it, as a ZIP's directory needs); an empty, blank or binary file is refused here."""
    if not head:
        raise DocumentReadError(name, "is empty", "give a file with some text")
    if whole and head.isspace():
        raise DocumentReadError(name, "holds only whitespace", "give a file with some text")
    if not whole and head.startswith(b"PK\x03\x04"):
        return "zip"  # its directory is at its end: decided once it is read whole
    kind = detect_format(head, name, tail)
    if kind in ("text", "markdown") and options.encoding == AUTO:
        refuse_binary_sample(head[:SAMPLE_BYTES], name)
    return kind
