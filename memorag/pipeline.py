"""`MemoRAG`: memorize a corpus once, then answer questions about it, in one of several modes.

    rag = MemoRAG()                                   # embedded models, offline
    rag.memorize(open("book.txt").read())             # memory + chunks + dense index
    answer = rag.ask("Who raised Esther?")            # task "memorag", mode "memorag"
    print(answer.answer, answer.clues, answer.evidence)
    rag.save("book.memorag"); rag = MemoRAG.load("book.memorag")

What `memorize` builds, shared by every mode:
- the documents, cut into token chunks (`chunk_tokens`, `overlap_tokens`) that keep
  their document id, title and character offsets;
- a retriever over the chunks: dense (the embedder + exact faiss inner product),
  BM25, or both fused (`retriever="hybrid"`);
- the memory: the memory model reads every document, in order, into one `Memory`.

Adding documents later is incremental: only the new chunks are embedded (the index
grows), and the memory is EXTENDED: the memory model reads the new text after the old
one, continuing the memory it already has, so the result is the memory of the old and
new text read one after the other. Nothing is re-read. Memorizing a document that is
already there (same title and text) is skipped. A document whose id is known but whose
text changed is refused: a memory cannot forget, so memorize into a new pipeline.

Tasks (`ask(query, task=...)`) in the default `memorag` mode:
- `memorag`: the memory model writes clues (evidence spans, surrogate questions, a
  draft answer); the query and every clue retrieve; the hits are fused, fitted to a
  token budget that fits the generator's window, put back in document order, and the
  generator answers from them;
- `qa`: the memory model answers from its memory alone;
- `summarize`: the memory model lists key points; the request and each point
  retrieve; the generator summarizes the evidence.
The query always retrieves too, with a larger fusion weight (`query_weight`), so the
answer stays grounded even when the clues are poor (e.g. untrained memory weights).

Modes are one interface (`Mode`: `prepare(corpus)`, `answer(query, task, hooks)`),
registered by name with `@register_mode`; see `Mode` for how to add one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from memorag import prompts
from memorag.clues import combine_clues, detect_language, parse_clues
from memorag.config import ConfigError, config_from_dict, config_to_dict
from memorag.io import atomic_directory, atomic_write_text, is_saved, read_json_manifest, sha256_file
from memorag.memory.config import MemoryConfig
from memorag.retrieval.base import Hit, IndexFormatError
from memorag.retrieval.chunking import Chunk, Document

FORMAT = "memorag-pipeline"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DOCUMENTS = "documents.jsonl"
CHUNKS = "chunks.jsonl"
INDEX = "index"
MEMORY = "memory"

Task = Literal["qa", "memorag", "summarize"]
TASKS: tuple[str, ...] = ("qa", "memorag", "summarize")
RETRIEVERS: tuple[str, ...] = ("dense", "bm25", "hybrid")
CLUE_KINDS: tuple[str, ...] = ("spans", "questions", "draft")

# The settings a saved pipeline was built with; loading it with other values is refused.
IDENTITY_KEYS: tuple[str, ...] = ("memory_model", "memory", "embedder", "retriever", "chunk_tokens", "overlap_tokens")


# ----------------------------------------------------------------------------------------------
# errors


class PipelineError(RuntimeError):
    """Something the pipeline cannot do, with a message that says why and what to do."""


class InputError(PipelineError, ValueError):
    """Bad input: an empty query, an empty or malformed document."""


class UnknownModeError(PipelineError):
    """A mode name that is not registered."""


class UnsupportedTaskError(PipelineError):
    """A task the chosen mode does not do."""


class EmptyCorpusError(PipelineError):
    """Nothing has been memorized yet."""


class DocumentConflictError(PipelineError):
    """A document id that is already memorized, with another text."""


class SaveFormatError(PipelineError):
    """A directory that is not a saved pipeline, or a damaged one."""


class ManifestMismatchError(PipelineError):
    """A saved pipeline built with other models or settings than the ones asked for."""


class SaveDirectoryError(PipelineError):
    """A save target that exists and holds something else."""


# ----------------------------------------------------------------------------------------------
# settings


@dataclass
class PipelineConfig:
    """Every setting of the pipeline. The first group is the identity of a saved pipeline."""

    # models and the shape of what is stored (recorded in a save; a mismatch is refused)
    memory_model: str | None = None  # None: the embedded SmolLM2-135M-Instruct
    memory_weights: str | None = None  # a folder of trained memory weights; None: untrained (base copies)
    memory: MemoryConfig | None = None  # None: the memory weights' own config, else MemoryConfig()
    embedder: str | None = None  # None: the embedded all-MiniLM-L6-v2
    retriever: Literal["dense", "bm25", "hybrid"] = "dense"
    chunk_tokens: int = 160  # tokens of the memory model's tokenizer (MiniLM reads up to 256 word pieces)
    overlap_tokens: int = 24
    # the generator (free to change between runs)
    generator: str | None = None  # None: the memory model's base; a model folder/hub id; or an http(s) endpoint
    generator_model: str | None = None  # the model name at an endpoint
    generator_window: int | None = None  # tokens the generator reads; None: the local model's, unknown for endpoints
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 120.0
    max_retries: int = 3
    repetition_penalty: float = 1.1  # local generators; small models loop without it
    # asking
    mode: str = "memorag"
    language: str = "auto"  # "en", "zh", or "auto" (from the query)
    clue_kinds: list[str] = field(default_factory=lambda: list(CLUE_KINDS))
    max_clues: int = 8
    clue_max_new_tokens: int = 64
    hits_per_query: int = 6
    query_weight: float = 2.0  # fusion weight of the query's own hits (each clue weighs 1)
    fusion: Literal["rrf", "score"] = "rrf"
    evidence_tokens: int = 1024  # most evidence tokens given to the generator (also capped by its window)
    answer_max_new_tokens: int = 128
    summary_max_new_tokens: int = 320

    def __post_init__(self) -> None:
        if self.retriever not in RETRIEVERS:
            raise ConfigError(f"retriever={self.retriever!r}; choose one of {', '.join(RETRIEVERS)}")
        unknown = [kind for kind in self.clue_kinds if kind not in CLUE_KINDS]
        if unknown:
            raise ConfigError(f"clue_kinds {unknown} unknown; choose from {', '.join(CLUE_KINDS)}")
        if self.chunk_tokens < 8:
            raise ConfigError(f"chunk_tokens={self.chunk_tokens} is too small (at least 8)")
        if not 0 <= self.overlap_tokens < self.chunk_tokens:
            raise ConfigError(f"overlap_tokens={self.overlap_tokens} must be in [0, chunk_tokens)")
        for name in ("max_clues", "clue_max_new_tokens", "hits_per_query", "evidence_tokens",
                     "answer_max_new_tokens", "summary_max_new_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be at least 1")
        if self.language not in ("auto", *prompts.LANGUAGES):
            raise ConfigError(f"language={self.language!r}; choose auto or one of {', '.join(prompts.LANGUAGES)}")
        if self.memory_weights is not None:
            self.memory_weights = os.path.abspath(os.path.expanduser(str(self.memory_weights)))


# ----------------------------------------------------------------------------------------------
# results


@dataclass
class Evidence:
    """A retrieved chunk given to the generator: where it is, how it scored, which queries found it.

    `queries` are indices into the retrieval queries: 0 is the user's query, 1.. the clues.
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

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class Answer:
    query: str
    task: str
    mode: str
    answer: str
    clues: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage, and "total"
    generator: str = ""  # who wrote `answer`
    raw_clues: dict[str, str] = field(default_factory=dict)  # the memory model's replies, before parsing

    def __str__(self) -> str:
        return self.answer

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["evidence"] = [item.to_dict() for item in self.evidence]
        return data


@dataclass
class MemorizeReport:
    added: list[str] = field(default_factory=list)  # document ids read this time
    skipped: list[str] = field(default_factory=list)  # already memorized, same text
    num_chunks: int = 0  # chunks added
    memory_tokens: int = 0  # tokens the memory holds after this call (0: no memory built)
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Corpus:
    """What a mode prepares for: the documents and chunks, and a version that changes with them."""

    documents: tuple[Document, ...]
    chunks: tuple[Chunk, ...]
    version: int
    content_sha256: str


@dataclass
class AskHooks:
    """Callbacks for showing progress while a mode answers (all optional)."""

    on_text: Callable[[str], None] | None = None  # each new piece of the answer
    on_clues: Callable[[list[str]], None] | None = None
    on_evidence: Callable[[list[Evidence]], None] | None = None

    def clues(self, clues: list[str]) -> None:
        if self.on_clues is not None:
            self.on_clues(clues)

    def evidence(self, evidence: list[Evidence]) -> None:
        if self.on_evidence is not None:
            self.on_evidence(evidence)


@contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = round(timings.get(stage, 0.0) + time.perf_counter() - started, 4)


# ----------------------------------------------------------------------------------------------
# modes


class Mode(ABC):
    """One way of answering over a memorized corpus.

    To add a mode, subclass `Mode` in any module, give it a `name`, its `tasks` and
    `default_task`, and decorate it with `@register_mode`; add the module to
    `MODE_MODULES` so that the mode can be named before anything imported it.
    `prepare(corpus)` runs before the first `answer` and again whenever the corpus
    changed (build mode-specific structures there: groups, graphs...). `answer` gets the
    user's query and a task from `tasks`, and uses the pipeline's shared parts:
    `pipeline.chunks`, `.documents`, `.retriever`, `.generator`, `.memory_model`,
    `.memory`, and the helpers `retrieve`, `gather_evidence`, `generate_from_evidence`,
    `write_clues`, `language_of`. The pipeline times the whole call.
    """

    name: ClassVar[str]
    tasks: ClassVar[tuple[str, ...]]
    default_task: ClassVar[str]
    needs_memory: ClassVar[bool] = False  # whether `memorize` should build the memory for it

    def __init__(self, pipeline: MemoRAG):
        self.pipeline = pipeline

    def prepare(self, corpus: Corpus) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Build what this mode needs from the corpus (called again after it changes)."""

    @abstractmethod
    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        """Answer `query` for `task`."""


_MODES: dict[str, type[Mode]] = {}
# Modules that define modes, imported on first lookup (`memorag.modes.longrag`, ...).
MODE_MODULES: list[str] = []


def register_mode(cls: type[Mode]) -> type[Mode]:
    """Class decorator: make a `Mode` available by its `name`."""
    if not getattr(cls, "name", None) or not getattr(cls, "tasks", None) or cls.default_task not in cls.tasks:
        raise TypeError(f"{cls.__name__} needs a name, tasks, and a default_task among its tasks")
    _MODES[cls.name] = cls
    return cls


def _import_mode_modules() -> None:
    import importlib

    for module in MODE_MODULES:
        importlib.import_module(module)


def available_modes() -> list[str]:
    _import_mode_modules()
    return sorted(_MODES)


def get_mode(name: str) -> type[Mode]:
    _import_mode_modules()
    if name not in _MODES:
        raise UnknownModeError(f"unknown mode {name!r}; available modes: {', '.join(sorted(_MODES))}")
    return _MODES[name]


@register_mode
class MemoRAGMode(Mode):
    """The paper's system: the memory drives retrieval (clues), the generator answers."""

    name = "memorag"
    tasks = ("memorag", "qa", "summarize")
    default_task = "memorag"
    needs_memory = True

    def prepare(self, corpus: Corpus) -> None:
        self.pipeline.ensure_memory()

    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        rag = self.pipeline
        language = rag.language_of(query)
        timings: dict[str, float] = {}
        if task == "qa":
            with _timed(timings, "generate"):
                text = rag.answer_from_memory(query, language, hooks.on_text)
            return Answer(query, task, self.name, text, timings=timings, generator=f"{rag.memory_model.name} (memory)")
        with _timed(timings, "clues"):
            clues, raw = rag.write_clues(query, task, language)
        hooks.clues(clues)
        queries = [query, *clues]
        weights = [rag.config.query_weight] + [1.0] * len(clues)
        with _timed(timings, "retrieve"):
            evidence = rag.gather_evidence(queries, weights, task, query, language)
        hooks.evidence(evidence)
        with _timed(timings, "generate"):
            text = rag.generate_from_evidence(query, evidence, task, language, hooks.on_text)
        return Answer(query, task, self.name, text, clues, evidence, timings, rag.generator.name, raw)


@register_mode
class RAGMode(Mode):
    """Standard RAG: the query alone retrieves (dense by default), the generator answers."""

    name = "rag"
    tasks = ("qa", "summarize")
    default_task = "qa"

    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        rag = self.pipeline
        language = rag.language_of(query)
        timings: dict[str, float] = {}
        with _timed(timings, "retrieve"):
            evidence = rag.gather_evidence([query], [1.0], task, query, language)
        hooks.evidence(evidence)
        with _timed(timings, "generate"):
            text = rag.generate_from_evidence(query, evidence, task, language, hooks.on_text)
        return Answer(query, task, self.name, text, [], evidence, timings, rag.generator.name)


# ----------------------------------------------------------------------------------------------
# the pipeline


def _label_lm(name: str | None) -> str:
    from memorag.models import EMBEDDED_LM, is_embedded_lm

    return EMBEDDED_LM if is_embedded_lm(name) else str(name)


def _label_embedder(name: str | None) -> str:
    from memorag.models import EMBEDDED_EMBEDDER, is_embedded_embedder

    return EMBEDDED_EMBEDDER if is_embedded_embedder(name) else str(name)


def _split_names(overrides: dict, memory_model, embedder, generator) -> tuple:
    """`memory_model`, `embedder` and `generator` take a name (a setting, moved into
    `overrides`) or a ready object (used as it is)."""
    named = {"memory_model": memory_model, "embedder": embedder, "generator": generator}
    objects = []
    for key, value in named.items():
        if isinstance(value, str | os.PathLike):
            overrides[key] = os.fspath(value)
            value = None
        objects.append(value)
    return tuple(objects)


def _document_sha256(document: Document) -> str:
    return hashlib.sha256(json.dumps([document.title, document.text], ensure_ascii=False).encode()).hexdigest()


def as_documents(text_or_documents: str | Document | Sequence[str | Document]) -> list[Document]:
    """Documents from a text, a `Document`, or a list of either (a text's id is a hash of it)."""
    items = [text_or_documents] if isinstance(text_or_documents, str | Document) else list(text_or_documents)
    if not items:
        raise InputError("nothing to memorize: the list of documents is empty")
    documents = []
    for position, item in enumerate(items):
        if isinstance(item, str):
            item = Document(id=f"doc-{hashlib.sha256(item.encode()).hexdigest()[:12]}", text=item)
        if not isinstance(item, Document):
            raise InputError(f"item {position} is a {type(item).__name__}; give texts or Document objects")
        if not item.text or not item.text.strip():
            raise InputError(f"document {item.id!r} is empty; give a text with some content")
        documents.append(item)
    return documents


class MemoRAG:
    """Memory-driven retrieval-augmented generation over a corpus; see the module docstring.

    Models load lazily, on first use, from `config` (embedded defaults: offline); any
    setting can also be given as a keyword (`MemoRAG(retriever="bm25")`). `memory_model`,
    `embedder` and `generator` take either a name (a hub id, a folder, or for the
    generator an http(s) endpoint) or a ready object: a `MemoryModel`, anything with
    `encode` like a SentenceTransformer (`embedder_name` records it), a
    `memorag.generation.Generator`.
    """

    def __init__(
        self,
        config: PipelineConfig | None = None,
        *,
        memory_model=None,
        embedder=None,
        embedder_name: str | None = None,
        generator=None,
        **overrides: Any,
    ):
        memory_model, embedder, generator = _split_names(overrides, memory_model, embedder, generator)
        if overrides:
            base = config_to_dict(config or PipelineConfig())
            base.update(overrides)
            config = config_from_dict(PipelineConfig, base)
        self.config = config or PipelineConfig()
        self._memory_model = memory_model
        self._embedder = embedder
        self.embedder_name = embedder_name or (
            type(embedder).__name__ if embedder is not None else _label_embedder(self.config.embedder)
        )
        self._generator = generator
        self._tokenizer = None
        self.documents: list[Document] = []
        self._document_hashes: dict[str, str] = {}  # doc id -> sha256 of (title, text)
        self.chunks: list[Chunk] = []
        self._chunk_by_id: dict[int, Chunk] = {}
        self.retriever = None
        self.memory = None
        self._version = 0
        self._modes: dict[str, Mode] = {}
        self._prepared: dict[str, int] = {}

    # -- models, loaded on first use ------------------------------------------------------------
    @property
    def memory_model(self):
        if self._memory_model is None:
            from memorag.memory import MemoryModel

            self._memory_model = MemoryModel.from_pretrained(
                self.config.memory_model, memory_weights=self.config.memory_weights, config=self.config.memory
            )
        return self._memory_model

    @property
    def tokenizer(self):
        """The memory model's tokenizer: chunks are counted in its tokens."""
        if self._memory_model is not None:
            return self._memory_model.tokenizer
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            from memorag.models import resolve_lm

            self._tokenizer = AutoTokenizer.from_pretrained(resolve_lm(self.config.memory_model))
        return self._tokenizer

    @property
    def embedder(self):
        if self._embedder is None:
            from memorag.models import resolve_embedder
            from memorag.retrieval.dense import load_embedder

            self._embedder = load_embedder(resolve_embedder(self.config.embedder))
        return self._embedder

    @property
    def generator(self):
        if self._generator is None:
            from memorag.generation import is_endpoint, load_generator

            spec = self.config.generator
            self._generator = load_generator(
                spec,
                memory_model=None if is_endpoint(spec) else self.memory_model,
                endpoint_model=self.config.generator_model,
                api_key_env=self.config.api_key_env,
                timeout=self.config.timeout,
                max_retries=self.config.max_retries,
                context_window=self.config.generator_window,
                tokenizer=self.tokenizer if is_endpoint(spec) else None,
                **({} if is_endpoint(spec) else {"repetition_penalty": self.config.repetition_penalty}),
            )
            if self.config.generator_window is not None:
                self._generator.context_window = self.config.generator_window
        return self._generator

    def check_models(self) -> None:
        """Fail now, before any long work, if a named model or its package cannot be found.

        Resolves names only (cheap); nothing is loaded.
        """
        from memorag.models import resolve_embedder, resolve_lm

        if self._memory_model is None:
            resolve_lm(self.config.memory_model)
        if self._embedder is None and self.config.retriever != "bm25":
            resolve_embedder(self.config.embedder)
        if self.config.memory_weights is not None and self._memory_model is None:
            if not Path(self.config.memory_weights).is_dir():
                raise FileNotFoundError(f"memory weights {self.config.memory_weights} not found (expected a folder)")

    def check_generator(self) -> None:
        """Fail now, before any long work, if the generator cannot be reached."""
        self.generator.check()

    def _new_retriever(self):
        from memorag.retrieval.dense import DenseRetriever
        from memorag.retrieval.hybrid import HybridRetriever
        from memorag.retrieval.sparse import BM25Retriever

        if self.config.retriever == "bm25":
            return BM25Retriever()
        dense = DenseRetriever(self.embedder, embedder_name=self.embedder_name)
        if self.config.retriever == "hybrid":
            return HybridRetriever([dense, BM25Retriever()])
        return dense

    # -- the corpus -------------------------------------------------------------------------------
    @property
    def corpus(self) -> Corpus:
        return Corpus(tuple(self.documents), tuple(self.chunks), self._version, self.content_sha256)

    @property
    def content_sha256(self) -> str:
        digest = hashlib.sha256()
        for document in self.documents:
            digest.update(document.id.encode() + b"\0" + self._document_hashes[document.id].encode())
        return digest.hexdigest()

    def _memory_text(self, documents: Sequence[Document], continuing: bool) -> str:
        parts = [f"{document.title}\n\n{document.text}" if document.title else document.text for document in documents]
        text = "\n\n".join(parts)
        return "\n\n" + text if continuing else text

    def memorize(
        self,
        text_or_documents: str | Document | Sequence[str | Document],
        *,
        with_memory: bool = True,
        show_progress: bool | None = None,
    ) -> MemorizeReport:
        """Chunk, index and memorize new documents; documents already memorized are skipped.

        The memory is extended (new text read after the old); `with_memory=False` builds
        only the chunks and index (modes that need the memory build it on first use).
        Nothing changes if any step fails.
        """
        from memorag.retrieval.chunking import chunk_documents

        report = MemorizeReport()
        new: list[Document] = []
        hashes: dict[str, str] = {}
        for document in as_documents(text_or_documents):
            digest = _document_sha256(document)
            known = self._document_hashes.get(document.id) or hashes.get(document.id)
            if known == digest or digest in self._document_hashes.values() or digest in hashes.values():
                report.skipped.append(document.id)
            elif known is not None:
                raise DocumentConflictError(
                    f"document {document.id!r} is already memorized with another text; a memory cannot forget "
                    "text, so memorize the new version under another id or into a new pipeline"
                )
            else:
                hashes[document.id] = digest
                new.append(document)
        if not new:
            report.memory_tokens = self.memory.num_tokens if self.memory is not None else 0
            return report

        with _timed(report.timings, "chunk"):
            chunks = chunk_documents(new, self.tokenizer, self.config.chunk_tokens, self.config.overlap_tokens,
                                     first_id=len(self.chunks))
        memory = self.memory
        if with_memory or memory is not None:
            with _timed(report.timings, "memory"):
                if memory is None:
                    memory = self.memory_model.memorize(self._memory_text(self.documents + new, False),
                                                        show_progress=show_progress)
                else:
                    memory = self.memory_model.memorize(self._memory_text(new, True), memory=memory,
                                                        show_progress=show_progress)
        with _timed(report.timings, "index"):
            retriever = self.retriever if self.retriever is not None else self._new_retriever()
            retriever.add(chunks)
        # commit
        self.retriever, self.memory = retriever, memory
        self.documents.extend(new)
        self._document_hashes.update(hashes)
        self.chunks.extend(chunks)
        self._chunk_by_id.update((chunk.id, chunk) for chunk in chunks)
        self._version += 1
        report.added = [document.id for document in new]
        report.num_chunks = len(chunks)
        report.memory_tokens = memory.num_tokens if memory is not None else 0
        return report

    def ensure_memory(self, show_progress: bool | None = None) -> None:
        """Build the memory of every document now, if `memorize` was told not to."""
        if self.memory is None and self.documents:
            self.memory = self.memory_model.memorize(self._memory_text(self.documents, False), show_progress=show_progress)

    # -- asking ---------------------------------------------------------------------------------
    def mode(self, name: str | None = None) -> Mode:
        name = name or self.config.mode
        if name not in self._modes:
            self._modes[name] = get_mode(name)(self)
        return self._modes[name]

    def ask(
        self,
        query: str,
        task: str | None = None,
        mode: str | None = None,
        *,
        on_text: Callable[[str], None] | None = None,
        on_clues: Callable[[list[str]], None] | None = None,
        on_evidence: Callable[[list[Evidence]], None] | None = None,
    ) -> Answer:
        """Answer `query`; `task` defaults to the mode's own (`memorag` for the memorag mode)."""
        started = time.perf_counter()
        handler = self._ready(query, task, mode)
        task = task or handler.default_task
        answer = handler.answer(query.strip(), task, AskHooks(on_text, on_clues, on_evidence))
        answer.timings["total"] = round(time.perf_counter() - started, 4)
        return answer

    def clues(self, query: str, task: str = "memorag") -> tuple[list[str], dict[str, str]]:
        """Only the memory model's clues for `query` (key points for `summarize`), and its raw
        replies by clue kind."""
        if task == "qa":
            raise UnsupportedTaskError("the qa task writes no clues; use memorag or summarize")
        self._ready(query, task, MemoRAGMode.name)
        return self.write_clues(query.strip(), task, self.language_of(query))

    def _ready(self, query: str, task: str | None, mode: str | None) -> Mode:
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty; ask something")
        handler = self.mode(mode)
        if task is not None and task not in handler.tasks:
            raise UnsupportedTaskError(
                f"mode {handler.name!r} does not do task {task!r}; its tasks: {', '.join(handler.tasks)}"
            )
        if not self.documents:
            raise EmptyCorpusError("nothing is memorized yet; call memorize() (or load a saved pipeline) first")
        if self._prepared.get(handler.name) != self._version:
            handler.prepare(self.corpus)
            self._prepared[handler.name] = self._version
        return handler

    # -- shared steps, for modes ----------------------------------------------------------------
    def language_of(self, query: str) -> str:
        return detect_language(query) if self.config.language == "auto" else self.config.language

    def answer_from_memory(self, query: str, language: str, on_text: Callable[[str], None] | None = None) -> str:
        from memorag.generation import TextStream

        self.ensure_memory()
        stream = TextStream(self.memory_model.tokenizer, on_text)
        self.memory_model.generate(
            prompts.fill(prompts.MEMORY_ANSWER, language, question=query),
            memory=self.memory,
            max_new_tokens=self.config.answer_max_new_tokens,
            on_token=lambda token: stream.push([token]),
        )
        return stream.finish().strip()

    def write_clues(self, query: str, task: str, language: str) -> tuple[list[str], dict[str, str]]:
        """The memory model's clues (or key points, for `summarize`) and its raw replies."""
        self.ensure_memory()
        if task == "summarize":
            focus = prompts.fill(prompts.KEY_POINTS_FOCUS, language, request=query)
            requests = {"key_points": (prompts.fill(prompts.MEMORY_KEY_POINTS, language, focus=focus), True)}
        else:
            templates = {"spans": prompts.CLUE_INSTRUCTION, "questions": prompts.MEMORY_QUESTIONS,
                         "draft": prompts.MEMORY_DRAFT}
            requests = {kind: (prompts.fill(templates[kind], language, question=query), kind != "draft")
                        for kind in self.config.clue_kinds}
        raw: dict[str, str] = {}
        groups: list[list[str]] = []
        for kind, (prompt, split_lines) in requests.items():
            raw[kind] = self.memory_model.generate(prompt, memory=self.memory,
                                                   max_new_tokens=self.config.clue_max_new_tokens)
            groups.append(parse_clues(raw[kind], prompt=prompt, query=query, split_lines=split_lines,
                                      max_clues=self.config.max_clues))
        return combine_clues(groups, self.config.max_clues, query), raw

    def retrieve(self, queries: Sequence[str], weights: Sequence[float] | None = None,
                 k: int | None = None) -> tuple[list[Hit], dict[int, list[int]]]:
        """Every query retrieves `k` hits; the lists are fused (weighted) into one ranking.

        Returns the fused hits, best first, and for each chunk id the indices of the
        queries that found it.
        """
        from memorag.retrieval.hybrid import fuse

        if self.retriever is None:
            raise EmptyCorpusError("nothing is memorized yet")
        queries = [query for query in queries]
        results = self.retriever.search(queries, k or self.config.hits_per_query)
        found_by: dict[int, list[int]] = {}
        for position, hits in enumerate(results):
            for hit in hits:
                found_by.setdefault(hit.chunk_id, [])
                if position not in found_by[hit.chunk_id]:
                    found_by[hit.chunk_id].append(position)
        return fuse(results, method=self.config.fusion, weights=list(weights) if weights is not None else None), found_by

    def _prompt(self, query: str, task: str, language: str, evidence: Sequence[Evidence]) -> str:
        passages = self.render_passages(evidence, language)
        if task == "summarize":
            return prompts.fill(prompts.GENERATOR_SUMMARY, language, passages=passages, request=query)
        return prompts.fill(prompts.GENERATOR_ANSWER, language, passages=passages, question=query)

    def _max_new_tokens(self, task: str) -> int:
        return self.config.summary_max_new_tokens if task == "summarize" else self.config.answer_max_new_tokens

    def evidence_budget(self, query: str, task: str, language: str) -> int:
        """Evidence tokens that fit: `evidence_tokens`, capped by what the generator's window leaves."""
        budget = self.config.evidence_tokens
        window = self.generator.context_window
        if window:
            system = prompts.fill(prompts.GENERATOR_SYSTEM, language)
            overhead = self.generator.count_tokens(self._prompt(query, task, language, []), system)
            room = window - overhead - self._max_new_tokens(task)
            # chunk sizes are counted with the memory model's tokenizer: leave a margin for another's
            budget = min(budget, int(room * 0.9))
            if budget < 1:
                raise PipelineError(
                    f"the generator's window ({window} tokens) leaves no room for evidence after the prompt "
                    f"({overhead}) and the answer ({self._max_new_tokens(task)}); shorten the query or lower "
                    "answer_max_new_tokens"
                )
        return budget

    def gather_evidence(self, queries: Sequence[str], weights: Sequence[float], task: str, query: str,
                        language: str) -> list[Evidence]:
        """Retrieve with every query, fuse, keep the best chunks within the budget, in document order."""
        from memorag.retrieval.hybrid import fit_to_budget

        fused, found_by = self.retrieve(queries, weights)
        budget = self.evidence_budget(query, task, language)
        scores = {hit.chunk_id: hit.score for hit in fused}
        kept = fit_to_budget(fused, self._chunk_by_id, budget)
        evidence = [
            Evidence(chunk.id, chunk.doc_id, chunk.title, chunk.start_char, chunk.end_char, chunk.num_tokens,
                     round(scores[chunk.id], 6), found_by.get(chunk.id, []), chunk.text)
            for chunk in kept
        ]
        return self._fit_window(evidence, query, task, language)

    def _fit_window(self, evidence: list[Evidence], query: str, task: str, language: str) -> list[Evidence]:
        """Drop the lowest-scored evidence until the whole prompt fits the generator's window."""
        window = self.generator.context_window
        if not window:
            return evidence
        system = prompts.fill(prompts.GENERATOR_SYSTEM, language)
        limit = window - self._max_new_tokens(task)
        while evidence and self.generator.count_tokens(self._prompt(query, task, language, evidence), system) > limit:
            weakest = min(range(len(evidence)), key=lambda i: evidence[i].score)
            evidence = evidence[:weakest] + evidence[weakest + 1 :]
        return evidence

    def render_passages(self, evidence: Sequence[Evidence], language: str = "en") -> str:
        """The evidence as numbered passages; overlapping or touching chunks of one document
        (in document order) are merged into one passage, so no text is repeated."""
        texts = {document.id: document.text for document in self.documents}
        merged: list[list] = []  # [doc_id, title, start, end]
        for item in evidence:
            last = merged[-1] if merged else None
            if last is not None and last[0] == item.doc_id and item.start_char <= last[3] + 1:
                last[3] = max(last[3], item.end_char)
            else:
                merged.append([item.doc_id, item.title, item.start_char, item.end_char])
        return "\n\n".join(
            prompts.fill(prompts.PASSAGE, language, number=str(number), title=title or doc_id,
                         text=texts[doc_id][start:end])
            for number, (doc_id, title, start, end) in enumerate(merged, start=1)
        )

    def generate_from_evidence(self, query: str, evidence: Sequence[Evidence], task: str, language: str,
                               on_text: Callable[[str], None] | None = None) -> str:
        if task == "summarize" and not query:
            query = prompts.fill(prompts.DEFAULT_SUMMARY_REQUEST, language)
        return self.generator.generate(
            self._prompt(query, task, language, evidence),
            system=prompts.fill(prompts.GENERATOR_SYSTEM, language),
            max_new_tokens=self._max_new_tokens(task),
            on_text=on_text,
        )

    # -- persistence ----------------------------------------------------------------------------
    def _manifest_models(self) -> dict:
        return {
            "memory_model": self.memory_model.name,
            "memory_identity": self.memory_model.identity(),
            "embedder": self.embedder_name if self.config.retriever != "bm25" else None,
        }

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write documents, chunks, index, memory and a manifest into `directory`, atomically.

        An existing saved pipeline there is replaced; any other existing content is refused.
        """
        if not self.documents:
            raise EmptyCorpusError("nothing to save: memorize something first")
        target = Path(directory)
        check_save_target(target)
        models = self._manifest_models()
        with atomic_directory(target) as staging:
            atomic_write_text(staging / DOCUMENTS, "".join(
                json.dumps(dataclasses.asdict(document), ensure_ascii=False) + "\n" for document in self.documents))
            atomic_write_text(staging / CHUNKS, "".join(
                json.dumps(dataclasses.asdict(chunk), ensure_ascii=False) + "\n" for chunk in self.chunks))
            self.retriever.save(staging / INDEX)
            if self.memory is not None:
                self.memory.save(staging / MEMORY)
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "models": models,
                "settings": config_to_dict(self.config),
                "content_sha256": self.content_sha256,
                "documents": [
                    {"id": d.id, "title": d.title, "sha256": self._document_hashes[d.id], "num_chars": len(d.text)}
                    for d in self.documents
                ],
                "num_chunks": len(self.chunks),
                "memory": None if self.memory is None else {
                    "num_tokens": self.memory.num_tokens,
                    "num_entries": self.memory.num_entries,
                    "content_sha256": self.memory.content_sha256,
                },
                "files": {name: sha256_file(staging / name) for name in (DOCUMENTS, CHUNKS)},
            }
            atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        return target

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike[str],
        *,
        memory_model=None,
        embedder=None,
        embedder_name: str | None = None,
        generator=None,
        **overrides: Any,
    ) -> MemoRAG:
        """Load a saved pipeline, verifying its files and that the models and settings match.

        Settings that are free to change (generator, mode, budgets...) are not taken from
        the save: they are the defaults unless given in `overrides`. An identity setting (memory model, memory config, embedder, retriever, chunking)
        that differs from the saved one is refused with `ManifestMismatchError`, and so are
        other memory weights. `memory_weights` may point to the weights' new place.
        """
        memory_model, embedder, generator = _split_names(overrides, memory_model, embedder, generator)
        root = Path(directory)
        manifest = read_manifest(root)
        saved = config_from_dict(PipelineConfig, manifest["settings"])
        for key in IDENTITY_KEYS:
            wanted = overrides.get(key)
            if wanted is None:
                continue
            if key == "memory":
                wanted = wanted if isinstance(wanted, MemoryConfig) else MemoryConfig(**wanted)
                same = saved.memory is None or wanted.to_dict() == saved.memory.to_dict()
            elif key == "memory_model":
                same = _label_lm(wanted) == _label_lm(saved.memory_model)
            elif key == "embedder":
                same = _label_embedder(wanted) == _label_embedder(saved.embedder)
            else:
                same = wanted == getattr(saved, key)
            if not same:
                raise ManifestMismatchError(
                    f"{root} was memorized with {key}={getattr(saved, key)!r}, not {wanted!r}; ask it with the "
                    f"same setting or memorize the context again with {key}={wanted!r}"
                )
        # The save fixes the identity settings (and where the memory weights were); the rest are
        # this run's: the defaults, then the caller's overrides.
        settings = {key: getattr(saved, key) for key in (*IDENTITY_KEYS, "memory_weights")}
        settings["memory"] = None if saved.memory is None else saved.memory.to_dict()
        settings.update({key: value for key, value in overrides.items() if key not in IDENTITY_KEYS or value is not None})
        if saved.memory_weights and overrides.get("memory_weights") is None and memory_model is None:
            if not Path(saved.memory_weights).exists():
                raise ManifestMismatchError(
                    f"{root} was memorized with the memory weights in {saved.memory_weights}, which are no longer "
                    "there; pass memory_weights (--memory-weights) with their new place"
                )
        config = config_from_dict(PipelineConfig, settings)
        rag = cls(config, memory_model=memory_model, embedder=embedder, embedder_name=embedder_name, generator=generator)

        models = manifest["models"]
        saved_embedder = models.get("embedder")
        if saved_embedder is not None:
            asked = embedder_name if embedder is not None else _label_embedder(config.embedder)
            if (embedder is None or embedder_name is not None) and asked != saved_embedder:
                raise ManifestMismatchError(
                    f"{root} was indexed with the embedder {saved_embedder!r}, not {asked!r}; use the same "
                    "embedder or memorize the context again"
                )
            rag.embedder_name = saved_embedder
        identity = rag.memory_model.identity()
        differences = {
            key: (models["memory_identity"].get(key), identity.get(key))
            for key in sorted(set(identity) | set(models["memory_identity"]))
            if identity.get(key) != models["memory_identity"].get(key)
        }
        if differences:
            detail = "; ".join(f"{key}: saved {old!r}, now {new!r}" for key, (old, new) in differences.items())
            hint = (" (other memory weights: pass the --memory-weights it was memorized with)"
                    if "memory_weights_sha256" in differences else "")
            raise ManifestMismatchError(
                f"{root} was memorized by another memory model or other settings: {detail}{hint}; use the same "
                "models or memorize the context again"
            )

        rag.documents = [Document(**row) for row in _read_jsonl(root / DOCUMENTS)]
        rag._document_hashes = {d["id"]: d["sha256"] for d in manifest["documents"]}
        if [d.id for d in rag.documents] != list(rag._document_hashes) or any(
            _document_sha256(d) != rag._document_hashes[d.id] for d in rag.documents
        ):
            raise SaveFormatError(f"{root / DOCUMENTS} does not match its manifest; the save is damaged")
        rag.chunks = [Chunk(**row) for row in _read_jsonl(root / CHUNKS)]
        rag._chunk_by_id = {chunk.id: chunk for chunk in rag.chunks}
        if len(rag.chunks) != manifest["num_chunks"]:
            raise SaveFormatError(f"{root / CHUNKS} holds {len(rag.chunks)} chunks, the manifest {manifest['num_chunks']}")
        rag.retriever = rag._load_index(root / INDEX)
        if len(rag.retriever) != len(rag.chunks):
            raise SaveFormatError(f"{root / INDEX} indexes {len(rag.retriever)} chunks, not {len(rag.chunks)}")
        if manifest.get("memory") is not None:
            from memorag.memory import Memory, MemoryFileError

            try:
                rag.memory = Memory.load(root / MEMORY)
            except MemoryFileError as error:
                raise SaveFormatError(str(error)) from error
            rag.memory_model.check_memory(rag.memory)
        rag._version = 1
        return rag

    def _load_index(self, path: Path):
        from memorag.retrieval.base import load_retriever

        embedder_args = {"embedder": self.embedder, "embedder_name": self.embedder_name}
        try:
            if self.config.retriever == "dense":
                return load_retriever(path, **embedder_args)
            if self.config.retriever == "hybrid":
                return load_retriever(path, kwargs_by_kind={"dense": embedder_args})
            return load_retriever(path)
        except IndexFormatError as error:
            raise SaveFormatError(f"the index of the save is damaged: {error}") from error
        except ValueError as error:
            raise ManifestMismatchError(str(error)) from error


# ----------------------------------------------------------------------------------------------
# save directories


def is_saved_pipeline(directory: str | os.PathLike[str]) -> bool:
    return is_saved(directory, MANIFEST, FORMAT)


def check_save_target(directory: Path) -> None:
    """Refuse to write over anything but an empty folder or a saved pipeline."""
    if directory.exists():
        if not directory.is_dir():
            raise SaveDirectoryError(f"{directory} exists and is not a folder; choose another place to save")
        if any(directory.iterdir()) and not is_saved_pipeline(directory):
            raise SaveDirectoryError(
                f"{directory} exists and holds other files (it is not a saved memorag pipeline); "
                "choose another place to save, or empty it"
            )


def read_manifest(directory: Path) -> dict:
    """The verified manifest of a saved pipeline (format, version, file checksums)."""
    path = directory / MANIFEST
    if not directory.is_dir() or not path.is_file():
        raise SaveFormatError(
            f"{directory} is not a saved memorag pipeline (no {MANIFEST}); make one with `memorag memorize ... --out DIR`"
        )
    manifest = read_json_manifest(path, FORMAT, FORMAT_VERSION, SaveFormatError)
    missing = {"models", "settings", "documents", "num_chunks", "files"} - set(manifest)
    if missing:
        raise SaveFormatError(f"{path} lacks {sorted(missing)}; the save is damaged")
    for name, digest in manifest["files"].items():
        file = directory / name
        if not file.is_file() or sha256_file(file) != digest:
            raise SaveFormatError(f"{file} is missing or corrupt (its checksum differs from the manifest's)")
    return manifest


def _read_jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SaveFormatError(f"{path} is unreadable ({error}); the save is damaged") from error
