"""What answering produces and what modes are handed: evidence, answers, the corpus, hooks, timings.

Shared by the pipeline (`memorag.pipeline`) and the modes (`memorag.modes`), below both.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from memorag.errors import InputError
from memorag.locations import citation
from memorag.prompting.answer_check import no_answer_reason
from memorag.retrieval.chunking import Chunk, Document

NO_CHUNK = -1  # `Evidence.chunk_id` of text given whole or cut, not one of the pipeline's chunks


@dataclass
class FoundBy:
    """One retrieval list that fetched a chunk: whose list (`query_index` 0 is the user's query, i >= 1
    is clue i, `Answer.clues[i - 1]`), that query's text, the chunk's 1-based rank in the list and the
    retriever's score for it there (scores of different queries' lists are not compared)."""

    query_index: int
    query: str
    rank: int
    score: float

    @property
    def label(self) -> str:
        """"query" or "clue I", as the CLI names the list."""
        return "query" if self.query_index == 0 else f"clue {self.query_index}"


@dataclass
class Evidence:
    """A retrieved chunk given to the generator: where it is, how it scored, which queries found it.

    `queries` are indices into the retrieval queries: 0 is the user's query, 1.. the clues; `found_by`
    says the same list by list, with each list's query text, rank and score (`FoundBy`); it is empty
    for evidence no retrieval list fetched (whole documents, cut text).
    Modes that read no chunks give spans with `chunk_id` NO_CHUNK: whole documents (cic, longrag), the kept
    head and tail of the corpus (full). `page`, `last_page` and `section` say where in its file the span
    lies (`memorag.locations`); `citation` says it for a reader: "report.pdf, p. 12".
    """

    chunk_id: int
    doc_id: str
    title: str
    start_char: int
    end_char: int
    num_tokens: int
    score: float
    queries: list[int]
    text: str
    page: int | None = None
    last_page: int | None = None
    section: list[str] = field(default_factory=list)
    found_by: list[FoundBy] = field(default_factory=list)

    @property
    def citation(self) -> str:
        return citation(self.doc_id, self.page, self.last_page, self.section, self.start_char, self.end_char)

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "citation": self.citation}


def cited_evidence(chunk_id: int, document: Document, start_char: int, end_char: int, num_tokens: int,
                   score: float, queries: list[int], text: str) -> Evidence:
    """Evidence for `document.text[start_char:end_char]`, placed in its file (pages, section)."""
    return Evidence(chunk_id, document.id, document.title, start_char, end_char, num_tokens, score, queries, text,
                    **document.locate(start_char, end_char)._asdict())


@dataclass
class Answer:
    """What `MemoRAG.ask` returns: the answer and everything that led to it.

    `answered` is False when the generator gave no answer: an empty reply, or one that only repeats
    the question (`memorag.prompting.answer_check`; `no_answer` says which); `answer` then holds the reply as
    written, the evidence is kept, and the CLI and the server report "no answer" instead of printing it.
    `offered_draft` is the memory's draft answer given to the generator after the evidence as
    "The answer might be ..." (the reference rule, `memorag.modes.evidence_plan`); empty when none was.
    """

    query: str
    task: str
    mode: str
    answer: str
    clues: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage, and "total"
    generator: str = ""  # who wrote `answer`
    raw_clues: dict[str, str] = field(default_factory=dict)  # the replies that became `clues`, before parsing
    warnings: list[str] = field(default_factory=list)  # what the mode had to cut or could not read
    # what a mode gives beyond these, by name (JSON-safe values), e.g. cic: "predicted_ids" (the document
    # ids its reply names) and "raw_reply"; longrag: "long_answer"; mixpr: "route" and "router_reply"
    extras: dict[str, Any] = field(default_factory=dict)
    offered_draft: str = ""

    def __str__(self) -> str:
        return self.answer

    @property
    def no_answer(self) -> str | None:
        """Why the reply is no answer ("empty", "repeats the question"), or None when it is one."""
        return no_answer_reason(self.query, self.answer)

    @property
    def answered(self) -> bool:
        return self.no_answer is None

    @property
    def sources(self) -> list[str]:
        """Where the evidence came from, each place once, in evidence order: ["report.pdf, p. 12", ...]."""
        return list(dict.fromkeys(item.citation for item in self.evidence))

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["evidence"] = [item.to_dict() for item in self.evidence]
        data["sources"] = self.sources
        data["answered"], data["no_answer"] = self.answered, self.no_answer
        return data


@dataclass(frozen=True)
class FewShotExample:
    """A labelled question for the cic mode's few-shot examples, as LOFT builds them: a real question
    of the same task, its gold documents (shown in the corpus when the corpus lacks them) and answers."""

    query: str
    documents: tuple[Document, ...]  # the gold documents, in the order the answer lists them
    answers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.query.strip() or not self.documents:
            raise InputError("a few-shot example needs a query and at least one gold document")


@dataclass(frozen=True)
class Corpus:
    """What a mode prepares for: the documents and chunks, and a version that changes with them."""

    documents: tuple[Document, ...]
    chunks: tuple[Chunk, ...]
    version: int
    content_sha256: str


def memory_text(documents: Sequence[Document], continuing: bool = False) -> str:
    """The text the memory reads for `documents`: each as its title, a blank line and its text, joined by
    blank lines; `continuing` a memory, it starts with a blank line."""
    parts = [f"{document.title}\n\n{document.text}" if document.title else document.text for document in documents]
    text = "\n\n".join(parts)
    return "\n\n" + text if continuing else text


@dataclass
class AskHooks:
    """Callbacks for showing progress while a mode answers (all optional)."""

    on_text: Callable[[str], None] | None = None  # each new piece of the answer
    on_clues: Callable[[list[str]], None] | None = None
    on_evidence: Callable[[list[Evidence]], None] | None = None
    show_progress: bool = False  # a progress bar on stderr for slow steps (the clues, kind by kind)

    def clues(self, clues: list[str]) -> None:
        if self.on_clues is not None:
            self.on_clues(clues)

    def evidence(self, evidence: list[Evidence]) -> None:
        if self.on_evidence is not None:
            self.on_evidence(evidence)


@contextmanager
def timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    """Add the seconds spent in the block to `timings[stage]`."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = round(timings.get(stage, 0.0) + time.perf_counter() - started, 4)
