"""How files are read, and the limits every read stays within (docs/formats.md, "Limits")."""

from __future__ import annotations

from dataclasses import dataclass

from memorag.documents.errors import DocumentReadError
from memorag.documents.text import AUTO

DEFAULT_MAX_MB = 200.0
# A reader process's address space: the parsers' worst legitimate files fit well under it, and a
# server reading one file at a time keeps most of a 24 GiB machine for its models.
DEFAULT_MEMORY_MB = 2048
DEFAULT_SECONDS = 120.0


@dataclass(frozen=True)
class ReadOptions:
    """How files are read: the text encoding ("auto": detected); the largest file in MB
    (`max_mb`, checked on its size before it is read, and on its extracted text); the memory
    (`memory_mb`, the reader process's address space) and wall-clock time (`seconds`) reading
    one file may take; whether links leading out of a folder are followed (`follow_links`); and
    for folders the glob patterns of file names (or paths below the folder) to take and to leave."""

    encoding: str = AUTO
    max_mb: float = DEFAULT_MAX_MB
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    memory_mb: int = DEFAULT_MEMORY_MB
    seconds: float = DEFAULT_SECONDS
    follow_links: bool = False

    def __post_init__(self) -> None:
        if not self.max_mb > 0:
            raise DocumentReadError("--max-file-mb", f"is {self.max_mb}", "give a size in MB above 0")
        if not self.memory_mb >= 256:
            raise DocumentReadError("--read-memory-mb", f"is {self.memory_mb}",
                                    "give at least 256 MB (the parsers alone need about 100)")
        if not self.seconds > 0:
            raise DocumentReadError("--read-seconds", f"is {self.seconds}", "give a time in seconds above 0")

    def check_size(self, size: int, name: str) -> None:
        """Refuse the file `name` of `size` bytes when it is over `max_mb`."""
        if size > self.max_mb * 1e6:
            raise DocumentReadError(name, f"is {size / 1e6:,.1f} MB, over the limit of {self.max_mb:g} MB",
                                    "split it, or raise the limit (--max-file-mb)")
