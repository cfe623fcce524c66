"""The one error of reading documents: a file that cannot be read, with what to do about it."""

from __future__ import annotations

from memorag.errors import InputError


class DocumentReadError(InputError):
    """A file that cannot become a document (encrypted, scanned, damaged, empty, too large, of an
    unsupported format); the message names the file and the fix, on one line."""

    def __init__(self, path: str, problem: str, fix: str):
        self.path, self.problem, self.fix = path, problem, fix
        super().__init__(f"{path}: {problem}; {fix}")
