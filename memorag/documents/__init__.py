"""Documents as people keep them: PDF, Word (.docx), HTML, Markdown and text files, and folders of them.

    from memorag.documents import ReadOptions, read_paths

    result = read_paths(["reports/"], ReadOptions(include=("*.pdf", "*.md")))
    result.documents   # memorag Documents: text, source file, page starts, heading paths
    result.problems    # one DocumentReadError per file that could not be read (file, problem, fix)

The format comes from the file's bytes (`detect`); each format has its reader module
(`pdf`, `docx`, `html`, `markdown`, `text`), built on the library docs/formats.md chose.
Each file is read in a reader process within a memory and a time limit (`sandbox`); any
failure, a parser's included, comes back as a `DocumentReadError` naming the file.
"""

from memorag.documents.detect import READABLE, detect_format
from memorag.documents.errors import DocumentReadError
from memorag.documents.options import DEFAULT_MAX_MB, DEFAULT_MEMORY_MB, DEFAULT_SECONDS, ReadOptions
from memorag.documents.reader import (
           ReadResult,
           expand,
           extract,
           read_file,
           read_paths,
)

__all__ = ["READABLE", "DEFAULT_MAX_MB", "DEFAULT_MEMORY_MB", "DEFAULT_SECONDS", "DocumentReadError", "ReadOptions", "ReadResult", "detect_format", "expand",
           "extract", "read_file", "read_paths"]
