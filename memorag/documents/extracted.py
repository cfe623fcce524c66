"""What a format's reader gives back: the text and its map to the file's pages and headings."""

from __future__ import annotations

from dataclasses import dataclass, field

from memorag.locations import Heading


@dataclass
class Extracted:
    """A file's text, where each page begins in it (PDF) and the heading path from each offset on."""

    text: str
    page_starts: list[int] = field(default_factory=list)
    headings: list[Heading] = field(default_factory=list)


class TextBuilder:
    """Joins blocks of text into one string, recording pages and headings at their offsets."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.page_starts: list[int] = []
        self.headings: list[Heading] = []
        self._path: list[tuple[int, str]] = []  # (level, title) of the headings in force

    def add(self, text: str, separator: str = "\n\n") -> None:
        if self._length and text:
            self._parts.append(separator)
            self._length += len(separator)
        self._parts.append(text)
        self._length += len(text)

    def start_page(self) -> None:
        """The next text added begins a new page (its separator belongs to the page before)."""
        self.page_starts.append(self._length + (2 if self._length else 0))

    def heading(self, level: int, title: str) -> None:
        """Add a heading of `level` (1 outermost); the text from it on lies under it."""
        title = " ".join(title.split())
        if not title:
            return
        self._path = [(depth, name) for depth, name in self._path if depth < level] + [(level, title)]
        start = self._length + (2 if self._length else 0)
        self.headings.append(Heading(start, tuple(name for _, name in self._path)))
        self.add(title)

    def build(self) -> Extracted:
        return Extracted("".join(self._parts), self.page_starts, self.headings)
