"""The pipeline's vocabulary: settings, errors, results, and what modes are handed."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from memorag import prompts
from memorag.answer_forms import AnswerFormError, as_answer_form
from memorag.config import ConfigError
from memorag.memory.config import MemoryConfig
from memorag.models import is_memory_weights_id
from memorag.placement import check_threads, normalize_device, normalize_dtype, normalize_quantize
from memorag.retrieval.chunking import Chunk, Document
from memorag.retrieval.unit_index import LINK_POLICIES

Task = Literal["qa", "memorag", "summarize", "retrieval"]
TASKS: tuple[str, ...] = ("qa", "memorag", "summarize", "retrieval")  # retrieval: the cic mode's document ids
RETRIEVERS: tuple[str, ...] = ("dense", "bm25", "hybrid")
CLUE_KINDS: tuple[str, ...] = ("spans", "questions", "draft")
MIXPR_ROUTERS: tuple[str, ...] = ("llm", "rules")
MEMORAG_EVIDENCE: tuple[str, ...] = ("union", "fusion")
# "own": each mode's own order (rag best first, the others document order); the other two set it for all
EVIDENCE_ORDERS: tuple[str, ...] = ("own", "document", "best-first")

# The settings a saved pipeline was built with; loading it with other values is refused.
IDENTITY_KEYS: tuple[str, ...] = ("memory_model", "memory", "embedder", "retriever", "chunk_tokens", "overlap_tokens")


# ----------------------------------------------------------------------------------------------
# errors


class PipelineError(RuntimeError):
    """Something the pipeline cannot do, with a message that says why and what to do."""


class InputError(PipelineError, ValueError):
    """Bad input: an empty query, an empty or malformed document."""


class QueryTooLongError(InputError):
    """A query that leaves the generator's window no room for evidence and the answer."""


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
    # where and in what precision the models run (memorag/placement.py; free to change between runs)
    device: str = "auto"  # auto: CUDA when present, else CPU; or cpu, cuda, cuda:N, mps
    dtype: str = "auto"  # auto: the checkpoint's own (the embedder's float32); or float32, bfloat16, float16
    quantize: str | None = None  # 4bit or 8bit (bitsandbytes, CUDA only): the memory model and a local generator
    threads: int | None = None  # CPU threads of torch and faiss; None: the process's default
    # asking
    mode: str = "memorag"
    language: str = "auto"  # "en", "zh", or "auto" (from the query)
    clue_kinds: list[str] = field(default_factory=lambda: list(CLUE_KINDS))
    max_clues: int = 8
    clue_max_new_tokens: int = 64
    hits_per_query: int = 6
    # the memorag mode's evidence: "union" (the reference's rule: the query and every clue retrieve
    # `memorag_hits` each, unioned, taken round-robin by rank when the budget cannot hold them all),
    # or "fusion" (each retrieves `hits_per_query`, lists fused with the query weighing `query_weight`)
    memorag_evidence: Literal["union", "fusion"] = "union"
    memorag_hits: int = 3  # union: hits of the query and of each clue (the reference's k)
    query_weight: float = 2.0  # fusion: weight of the query's own hits (each clue weighs 1)
    fusion: Literal["rrf", "score"] = "rrf"
    evidence_tokens: int = 1024  # most evidence tokens given to the generator (also capped by its window)
    # order of the evidence the generator reads, in every retrieval mode (rag, dos, hyde, rqrag, memorag,
    # mixpr, longrag): "document", "best-first", or "own" (rag best first, the others document order)
    evidence_order: Literal["own", "document", "best-first"] = "own"
    # the generator's answer prompt when `ask` names none: "sentence" (a short sentence, for people), or
    # a benchmark's own form that needs no per-question fields (memorag/answer_forms.py:
    # "longbench:hotpotqa", "ruler:qa", ...); `ask(answer_form=...)` sets one per question
    answer_prompt: str = "sentence"
    answer_max_new_tokens: int = 128
    summary_max_new_tokens: int = 320
    # the longrag mode (memorag/modes/longrag.py); its reader reads whole units, not `evidence_tokens`
    longrag_max_tokens: int = 4096  # cap on a unit's tokens (only a single longer document exceeds it)
    longrag_links: Literal["auto", "given", "terms"] = "auto"  # grouping links; see unit_index.choose_links
    longrag_chunk_tokens: int | None = None  # MaxP chunks; None: 512, fewer if the embedder reads fewer
    longrag_units: int = 4  # most units given to the reader (fewer when the generator's window is smaller)
    longrag_long_answer_tokens: int = 256  # the reader's first turn, the long answer
    # the mixpr mode (memorag/modes/mixpr.py)
    mixpr_router: Literal["llm", "rules"] = "llm"  # local/global: ask the generator, or the rule-based router
    mixpr_top_k: int = 100  # most chunks given to the generator (also capped by the evidence budget)
    # the cic mode (memorag/modes/cic.py): the whole corpus in the prompt
    cic_examples: int = 2  # few-shot examples built from the corpus itself (0: none)
    cic_seed: int = 0  # picks the examples' documents and sentences
    # the hyde mode (memorag/modes/hyde.py)
    hyde_max_new_tokens: int = 128  # the hypothetical answer passage
    hyde_query_weight: float = 1.0  # fusion weight of the query's own hits (the passage's weigh 1)
    # the rqrag mode (memorag/modes/rqrag.py)
    rqrag_max_queries: int = 4  # rewritten and sub-questions kept from the generator's reply
    rqrag_max_new_tokens: int = 96
    rqrag_query_weight: float = 1.0  # fusion weight of the query's own hits (each rewritten query's weigh 1)
    # the dos mode (memorag/modes/dos.py); rag and the other modes use `evidence_tokens`
    dos_evidence_tokens: int = 8192  # evidence budget (also capped by the generator's window)

    def __post_init__(self) -> None:
        self.device = normalize_device(self.device)
        self.dtype = normalize_dtype(self.dtype)
        self.quantize = normalize_quantize(self.quantize)
        check_threads(self.threads)
        if self.retriever not in RETRIEVERS:
            raise ConfigError(f"retriever={self.retriever!r}; choose one of {', '.join(RETRIEVERS)}")
        unknown = [kind for kind in self.clue_kinds if kind not in CLUE_KINDS]
        if unknown:
            raise ConfigError(f"clue_kinds {unknown} unknown; choose from {', '.join(CLUE_KINDS)}")
        if self.chunk_tokens < 8:
            raise ConfigError(f"chunk_tokens={self.chunk_tokens} is too small (at least 8)")
        if not 0 <= self.overlap_tokens < self.chunk_tokens:
            raise ConfigError(f"overlap_tokens={self.overlap_tokens} must be in [0, chunk_tokens)")
        try:
            as_answer_form(self.answer_prompt)
        except AnswerFormError as error:
            raise ConfigError(f"answer_prompt: {error}") from error
        if self.memorag_evidence not in MEMORAG_EVIDENCE:
            raise ConfigError(f"memorag_evidence={self.memorag_evidence!r}; choose one of {', '.join(MEMORAG_EVIDENCE)}")
        if self.evidence_order not in EVIDENCE_ORDERS:
            raise ConfigError(f"evidence_order={self.evidence_order!r}; choose one of {', '.join(EVIDENCE_ORDERS)}")
        for name in ("max_clues", "clue_max_new_tokens", "hits_per_query", "memorag_hits", "evidence_tokens",
                     "answer_max_new_tokens", "summary_max_new_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be at least 1")
        if self.language not in ("auto", *prompts.LANGUAGES):
            raise ConfigError(f"language={self.language!r}; choose auto or one of {', '.join(prompts.LANGUAGES)}")
        for name in ("longrag_max_tokens", "longrag_units", "longrag_long_answer_tokens", "mixpr_top_k"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be at least 1")
        if self.longrag_chunk_tokens is not None and self.longrag_chunk_tokens < 8:
            raise ConfigError(f"longrag_chunk_tokens={self.longrag_chunk_tokens} is too small (at least 8, or None)")
        if self.longrag_links not in LINK_POLICIES:
            raise ConfigError(f"longrag_links={self.longrag_links!r}; choose one of {', '.join(LINK_POLICIES)}")
        if self.mixpr_router not in MIXPR_ROUTERS:
            raise ConfigError(f"mixpr_router={self.mixpr_router!r}; choose one of {', '.join(MIXPR_ROUTERS)}")
        for name in ("hyde_max_new_tokens", "rqrag_max_queries", "rqrag_max_new_tokens", "dos_evidence_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be at least 1")
        if self.cic_examples < 0:
            raise ConfigError(f"cic_examples={self.cic_examples} must be 0 or more")
        for name in ("hyde_query_weight", "rqrag_query_weight"):
            if not 0 < getattr(self, name) < float("inf"):
                raise ConfigError(f"{name}={getattr(self, name)} must be a finite number above 0")
        # weights, timeouts and penalties: NaN and infinity fail these comparisons too
        for name in ("timeout", "repetition_penalty", "query_weight"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ConfigError(f"{name}={value} must be a finite number above 0")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries={self.max_retries} must be 0 or more (0: no retries)")
        if self.generator_window is not None and self.generator_window < 1:
            raise ConfigError(f"generator_window={self.generator_window} must be at least 1 (or None: the model's)")
        if self.memory_weights is not None and not is_memory_weights_id(self.memory_weights):
            self.memory_weights = os.path.abspath(os.path.expanduser(str(self.memory_weights)))


# ----------------------------------------------------------------------------------------------
# results


NO_CHUNK = -1  # `Evidence.chunk_id` of text given whole or cut, not one of the pipeline's chunks


@dataclass
class Evidence:
    """A retrieved chunk given to the generator: where it is, how it scored, which queries found it.

    `queries` are indices into the retrieval queries: 0 is the user's query, 1.. the clues.
    Modes that read no chunks give spans with `chunk_id` NO_CHUNK: whole documents (cic, longrag), the kept
    head and tail of the corpus (full).
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
    raw_clues: dict[str, str] = field(default_factory=dict)  # the replies that became `clues`, before parsing
    predicted_ids: list[str] = field(default_factory=list)  # cic: document ids the reply names, in its order
    warnings: list[str] = field(default_factory=list)  # what the mode had to cut or could not read
    raw_reply: str = ""  # cic: the generator's reply before parsing

    def __str__(self) -> str:
        return self.answer

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["evidence"] = [item.to_dict() for item in self.evidence]
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
