"""The evaluation schema: one example type for every source, and how it is stored.

:class:`EvalExample` is what every source produces (the real-set builders in
:mod:`memorag.evaluation.datasets.hotpotqa` and :mod:`memorag.evaluation.datasets.squad`, the
original-format loaders in :mod:`memorag.evaluation.tasks.loaders`, the generators in
:mod:`memorag.evaluation.datasets.synthetic`):

* ``context`` - one long text (LongBench/InfiniteBench style), or ``None``;
* ``documents`` - the same material as separate :class:`Document` objects, or
  ``None``; an example of a *shared-corpus* task has neither: its corpus lives
  once in a :class:`CorpusTask`;
* ``gold_evidence`` - a list of dicts, one per piece of gold evidence. Keys:
  ``kind`` (always; ``"document"``, ``"sentence"``, ``"answer"``, ``"needle"``,
  ``"assignment"``, ``"link"``, ``"supporting_fact"``, ``"occurrence"``,
  ``"count"``), ``text`` (the evidence text), ``start``/``end`` (character
  offsets into ``context``: ``context[start:end] == text``), ``doc_id`` and
  ``title`` (a document of ``documents`` or of the shared corpus),
  ``doc_start``/``doc_end`` (offsets into that document's text);
* ``metric`` - the name of the scoring function (a name in
  :mod:`memorag.evaluation.metrics` such as ``"qa_f1_score"``, ``"string_match_all"``,
  ``"babilong_answer_correct"``, or a benchmark's own metric name where
  the loaders say so);
* ``proxy`` - ``True`` for everything generated or constructed here: its
  numbers are proxies, never to be set beside a paper's figure as if comparable.

Examples are stored as JSON lines (:func:`write_examples` / :func:`read_examples`,
written atomically); a shared corpus as a folder (:func:`save_corpus_task`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memorag.retrieval.chunking import Document
from memorag.storage.io import atomic_directory, atomic_write_text

EXAMPLES_FILE = "examples.jsonl"
CORPUS_FILE = "corpus.jsonl"
TASK_FILE = "task.json"
FORMAT_VERSION = 1

_REQUIRED_EXAMPLE_FIELDS = ("id", "task", "question", "answers")


class EvalDataError(ValueError):
    """A data file or record that cannot be read; the message names the file, line and field."""


@dataclass
class EvalExample:
    """One evaluation example, whatever its source. See the module docstring for the fields."""

    id: str
    task: str
    question: str
    answers: list[str]
    context: str | None = None
    documents: list[Document] | None = None
    gold_evidence: list[dict[str, Any]] = field(default_factory=list)
    metric: str = "qa_f1_score"
    meta: dict[str, Any] = field(default_factory=dict)
    proxy: bool = False

    def __post_init__(self) -> None:
        for name in ("id", "task", "question", "metric"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"EvalExample.{name} must be a str, got {type(getattr(self, name)).__name__}")
        if not self.id:
            raise ValueError("EvalExample.id must not be empty")
        if isinstance(self.answers, str) or not all(isinstance(answer, str) for answer in self.answers):
            raise TypeError(f"EvalExample.answers must be a list of str, got {self.answers!r:.200}")
        self.answers = list(self.answers)
        if self.context is not None and not isinstance(self.context, str):
            raise TypeError(f"EvalExample.context must be a str or None, got {type(self.context).__name__}")
        if self.documents is not None:
            self.documents = list(self.documents)
            for position, document in enumerate(self.documents):
                if not isinstance(document, Document):
                    raise TypeError(
                        f"EvalExample.documents[{position}] is {type(document).__name__}, expected Document"
                    )
        if not all(isinstance(item, dict) and "kind" in item for item in self.gold_evidence):
            raise TypeError("EvalExample.gold_evidence must be a list of dicts, each with a 'kind'")
        self.gold_evidence = list(self.gold_evidence)

    def evidence_problems(self) -> list[str]:
        """Gold spans that do not hold (``context[start:end] != text``, out of range); empty when all hold."""
        problems = []
        documents = {document.id: document for document in self.documents or []}
        for position, item in enumerate(self.gold_evidence):
            if "start" in item or "end" in item:
                if self.context is None:
                    problems.append(f"gold_evidence[{position}] has start/end but the example has no context")
                    continue
                start, end = item.get("start"), item.get("end")
                if not (
                    isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(self.context)
                ):
                    problems.append(f"gold_evidence[{position}] span {start}..{end} is outside the context")
                elif "text" in item and self.context[start:end] != item["text"]:
                    problems.append(
                        f"gold_evidence[{position}] span {start}..{end} holds {self.context[start:end]!r:.80}, "
                        f"not {item['text']!r:.80}"
                    )
            if "doc_start" in item and item.get("doc_id") in documents:
                text = documents[item["doc_id"]].text
                start, end = item["doc_start"], item.get("doc_end")
                if "text" in item and text[start:end] != item["text"]:
                    problems.append(f"gold_evidence[{position}] doc span does not hold {item['text']!r:.80}")
        return problems

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (documents as ``{"id", "title", "text", "links"}``)."""
        return {
            "id": self.id,
            "task": self.task,
            "question": self.question,
            "answers": list(self.answers),
            "context": self.context,
            "documents": None if self.documents is None else [_document_to_dict(d) for d in self.documents],
            "gold_evidence": self.gold_evidence,
            "metric": self.metric,
            "meta": self.meta,
            "proxy": self.proxy,
        }

    @classmethod
    def from_dict(cls, record: Any, where: str = "record") -> EvalExample:
        """Build from :meth:`to_dict` output; errors name ``where`` (e.g. ``"file.jsonl:3"``) and the field."""
        if not isinstance(record, dict):
            raise EvalDataError(f"{where}: expected a JSON object, got {type(record).__name__}")
        for name in _REQUIRED_EXAMPLE_FIELDS:
            if name not in record:
                raise EvalDataError(f"{where}: missing field {name!r}")
        documents = record.get("documents")
        try:
            if documents is not None:
                documents = [
                    _document_from_dict(item, f"{where}: documents[{i}]") for i, item in enumerate(documents)
                ]
            return cls(
                id=str(record["id"]),
                task=record["task"],
                question=record["question"],
                answers=record["answers"],
                context=record.get("context"),
                documents=documents,
                gold_evidence=record.get("gold_evidence") or [],
                metric=record.get("metric", "qa_f1_score"),
                meta=record.get("meta") or {},
                proxy=bool(record.get("proxy", False)),
            )
        except (TypeError, ValueError) as error:
            if isinstance(error, EvalDataError):
                raise
            raise EvalDataError(f"{where}: {error}") from error


@dataclass
class CorpusTask:
    """A shared-corpus task (LongRAG/LOFT setting): one corpus, many questions over it.

    The examples carry neither ``context`` nor ``documents``; their gold evidence
    names corpus documents by ``doc_id``.
    """

    name: str
    documents: list[Document]
    examples: list[EvalExample]
    meta: dict[str, Any] = field(default_factory=dict)

    def document_ids(self) -> set[str]:
        return {document.id for document in self.documents}


def _document_to_dict(document: Document) -> dict[str, Any]:
    return {"id": document.id, "title": document.title, "text": document.text, "links": list(document.links)}


def _document_from_dict(record: Any, where: str) -> Document:
    if not isinstance(record, dict):
        raise EvalDataError(f"{where}: expected a JSON object for a document, got {type(record).__name__}")
    for name in ("id", "text"):
        if name not in record:
            raise EvalDataError(f"{where}: missing field {name!r}")
    return Document(
        id=str(record["id"]),
        text=str(record["text"]),
        title=str(record.get("title") or ""),
        links=[str(link) for link in record.get("links") or []],
    )


def _dumps(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def read_jsonl_records(path: str | os.PathLike[str], what: str = "JSON lines") -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, parsed_object)`` for each non-blank line; clear errors for a missing or bad file."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such file ({what} expected)")
    with open(file, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise EvalDataError(
                    f"{file}:{line_number}: not UTF-8 text ({error.reason}); expected {what}"
                ) from error
            if not line.strip():
                continue
            try:
                yield line_number, json.loads(line)
            except json.JSONDecodeError as error:
                raise EvalDataError(
                    f"{file}:{line_number}: not valid JSON ({error.msg}); expected {what}"
                ) from error


def write_examples(path: str | os.PathLike[str], examples: Iterable[EvalExample]) -> Path:
    """Write examples as JSON lines, atomically; returns the path."""
    text = "".join(_dumps(example.to_dict()) + "\n" for example in examples)
    return atomic_write_text(path, text)


def read_examples(path: str | os.PathLike[str]) -> list[EvalExample]:
    """Read examples written by :func:`write_examples`; errors name the file, line and field."""
    return [
        EvalExample.from_dict(record, where=f"{path}:{line_number}")
        for line_number, record in read_jsonl_records(path, "EvalExample records")
    ]


def save_corpus_task(task: CorpusTask, directory: str | os.PathLike[str]) -> Path:
    """Save as a folder (``task.json``, ``corpus.jsonl``, ``examples.jsonl``), atomically."""
    target = Path(directory)
    with atomic_directory(target) as staging:
        (staging / TASK_FILE).write_text(
            json.dumps({"format_version": FORMAT_VERSION, "name": task.name, "meta": task.meta}, indent=2),
            encoding="utf-8",
        )
        (staging / CORPUS_FILE).write_text(
            "".join(_dumps(_document_to_dict(d)) + "\n" for d in task.documents), encoding="utf-8"
        )
        (staging / EXAMPLES_FILE).write_text(
            "".join(_dumps(example.to_dict()) + "\n" for example in task.examples), encoding="utf-8"
        )
    return target


def load_corpus_task(directory: str | os.PathLike[str]) -> CorpusTask:
    """Load a folder written by :func:`save_corpus_task`."""
    folder = Path(directory)
    task_file = folder / TASK_FILE
    if not task_file.is_file():
        raise FileNotFoundError(f"{task_file}: no such file (a corpus task folder needs {TASK_FILE})")
    try:
        header = json.loads(task_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise EvalDataError(f"{task_file}: not valid JSON ({error.msg})") from error
    if not isinstance(header, dict) or "name" not in header:
        raise EvalDataError(f"{task_file}: missing field 'name'")
    if header.get("format_version") != FORMAT_VERSION:
        raise EvalDataError(
            f"{task_file}: format_version {header.get('format_version')!r}, expected {FORMAT_VERSION}"
        )
    corpus_path = folder / CORPUS_FILE
    documents = [
        _document_from_dict(record, f"{corpus_path}:{line_number}")
        for line_number, record in read_jsonl_records(corpus_path, "corpus documents")
    ]
    return CorpusTask(
        name=header["name"],
        documents=documents,
        examples=read_examples(folder / EXAMPLES_FILE),
        meta=header.get("meta") or {},
    )


def gold_doc_positions(example: EvalExample) -> list[int]:
    """Indices of the gold documents among ``meta["doc_spans"]`` (where the gold sits in the context)."""
    gold = set(example.meta.get("gold_doc_ids", []))
    spans = example.meta.get("doc_spans", [])
    return [index for index, (doc_id, _, _) in enumerate(spans) if doc_id in gold]
