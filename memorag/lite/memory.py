"""The gist memory: every window's gist, in text order, read by the generator as its prompt's prefix."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memorag.errors import SaveFormatError
from memorag.lite.text_windows import GistWindow
from memorag.prompting import prompts
from memorag.retrieval.chunking import Document

if TYPE_CHECKING:
    from memorag.generation.base import Generator

GISTS_FILE = "gists.jsonl"
_FORMAT = "memorag-gists"
_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Gist:
    """The gist `text` of `window`, written by `writer` (a generator's name) in at most `max_new_tokens`."""

    window: GistWindow
    text: str
    writer: str
    max_new_tokens: int


class GistMemory:
    """The gists of a corpus's documents, in memorized order; `prefix(language)` is the memory as
    the generator reads it: the gists joined by line breaks in the reference's context prompt."""

    def __init__(self, gists: Sequence[Gist] = ()):
        self.gists: list[Gist] = list(gists)

    def __len__(self) -> int:
        return len(self.gists)

    @property
    def doc_ids(self) -> set[str]:
        return {gist.window.doc_id for gist in self.gists}

    def missing(self, documents: Sequence[Document]) -> list[Document]:
        """The documents of `documents` that have no gist here yet (in their order)."""
        held = self.doc_ids
        return [document for document in documents if document.id not in held]

    def extended(self, gists: Sequence[Gist]) -> GistMemory:
        """A new memory: these gists, then `gists` (the text read after them)."""
        return GistMemory([*self.gists, *gists])

    def text(self) -> str:
        return "\n".join(gist.text for gist in self.gists)

    def prefix(self, language: str = "en") -> str:
        return prompts.fill(prompts.LITE_CONTEXT, language, context=self.text())

    def writers(self) -> list[str]:
        return sorted({gist.writer for gist in self.gists})

    def replies(self, generator: Generator, asked: Sequence[str], max_new_tokens: int, language: str = "en") -> list[str]:
        """The generator's reply to each prompt of `asked`, read after the memory in the same user turn
        (the reference's layout); a local generator reads the memory's tokens once for all of them."""
        prefix = self.prefix(language)
        return [generator.generate_with_prefix(prefix, prompt, max_new_tokens=max_new_tokens).strip()
                for prompt in asked]

    # -- saving ---------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the gists as JSON lines into `path` (a header line first)."""
        lines = [json.dumps({"format": _FORMAT, "format_version": _FORMAT_VERSION, "num_gists": len(self.gists)})]
        lines += [json.dumps(asdict(gist), ensure_ascii=False) for gist in self.gists]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> GistMemory:
        """The gists written by `save`; a file of another format or a damaged one is refused."""
        try:
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            header, rows = rows[0], rows[1:]
            if header.get("format") != _FORMAT or header.get("format_version") != _FORMAT_VERSION:
                raise ValueError(f"format {header.get('format')!r} version {header.get('format_version')!r}")
            if header.get("num_gists") != len(rows):
                raise ValueError(f"{len(rows)} gists, the header says {header.get('num_gists')}")
            gists = [Gist(GistWindow(**row["window"]), row["text"], row["writer"], row["max_new_tokens"])
                     for row in rows]
        except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
            raise SaveFormatError(f"the gists in {path} cannot be read ({error}); memorize the texts again") from error
        return cls(gists)
