"""The pipeline's vocabulary: its settings, and (re-exported from below it) errors and results."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from memorag.config import ConfigError
from memorag.errors import (
    DocumentConflictError,
    EmptyCorpusError,
    InputError,
    ManifestMismatchError,
    PipelineError,
    QueryTooLongError,
    SaveDirectoryError,
    SaveFormatError,
    UnknownModeError,
    UnsupportedTaskError,
)
from memorag.lite.settings import GistSettings
from memorag.memory.config import MemoryConfig
from memorag.modes.cic import CiCSettings
from memorag.modes.dos import DOSSettings
from memorag.modes.evidence_plan import MEMORAG_EVIDENCE
from memorag.modes.hyde import HyDESettings
from memorag.modes.longrag import LongRAGSettings
from memorag.modes.mixpr import MixPRSettings
from memorag.modes.results import NO_CHUNK, Answer, AskHooks, Corpus, Evidence, FewShotExample, timed
from memorag.modes.rqrag import RQRAGSettings
from memorag.prompting import prompts
from memorag.prompting.answer_forms import AnswerFormError, as_answer_form
from memorag.runtime.embedded import AUTO_MEMORY, is_memory_weights_id, is_memory_weights_name
from memorag.runtime.placement import check_threads, normalize_device, normalize_dtype, normalize_quantize

__all__ = [  # errors and results live below the pipeline and the modes; named here too, where they were
    "DocumentConflictError", "EmptyCorpusError", "InputError", "ManifestMismatchError", "PipelineError",
    "QueryTooLongError", "SaveDirectoryError", "SaveFormatError", "UnknownModeError", "UnsupportedTaskError",
    "NO_CHUNK", "Answer", "AskHooks", "Corpus", "Evidence", "FewShotExample", "timed",
    "MemorizeReport", "PipelineConfig", "Task", "TASKS", "RETRIEVERS", "CLUE_KINDS", "MEMORAG_EVIDENCE",
    "EVIDENCE_ORDERS", "IDENTITY_KEYS",
]

Task = Literal["qa", "memorag", "summarize", "retrieval"]
TASKS: tuple[str, ...] = ("qa", "memorag", "summarize", "retrieval")  # retrieval: the cic mode's document ids
RETRIEVERS: tuple[str, ...] = ("dense", "bm25", "hybrid")
CLUE_KINDS: tuple[str, ...] = ("spans", "questions", "draft")
# "own": each mode's own order (rag best first, the others document order); the other two set it for all
EVIDENCE_ORDERS: tuple[str, ...] = ("own", "document", "best-first")

# The settings a saved pipeline was built with; loading it with other values is refused.
IDENTITY_KEYS: tuple[str, ...] = ("memory_model", "memory", "embedder", "retriever", "chunk_tokens", "overlap_tokens")


# ----------------------------------------------------------------------------------------------
# settings


@dataclass
class PipelineConfig:
    """Every setting of the pipeline. The first group is the identity of a saved pipeline."""

    # models and the shape of what is stored (recorded in a save; a mismatch is refused)
    memory_model: str | None = None  # None: the embedded SmolLM2-135M-Instruct
    # trained memory weights: a folder, a hub id, or "auto" (the shipped trained weights for the embedded
    # SmolLM2, untrained copies for another base), "embedded" (the shipped ones), "untrained" (or None)
    memory_weights: str | None = AUTO_MEMORY
    memory: MemoryConfig | None = None  # None: the memory weights' own config, else MemoryConfig()
    embedder: str | None = None  # None: the embedded all-MiniLM-L6-v2
    retriever: Literal["dense", "bm25", "hybrid"] = "dense"
    chunk_tokens: int = 160  # tokens of the memory model's tokenizer (MiniLM reads up to 256 word pieces)
    overlap_tokens: int = 24
    # the generator (free to change between runs)
    # None: the memory model's base; "embedded": the embedded LM with its reader adapter ("embedded-base":
    # without); a model folder/hub id; or an http(s) endpoint
    generator: str | None = None
    generator_model: str | None = None  # the model name at an endpoint
    generator_window: int | None = None  # tokens the generator reads; None: the local model's, unknown for endpoints
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 120.0
    max_retries: int = 3
    repetition_penalty: float = 1.1  # local generators; small models loop without it
    # local generators: the margin (in logits) by which the fixed no-answer reply must lead every answer before it is
    # given (memorag/generation/local.py); None: the generator's own, the embedded reader's tuned one, 0 for others
    refusal_margin: float | None = None
    # where and in what precision the models run (memorag/runtime/placement.py; free to change between runs)
    device: str = "auto"  # auto: CUDA when present, else CPU; or cpu, cuda, cuda:N, mps
    dtype: str = "auto"  # auto: the checkpoint's own (memorag/runtime/cpu_dtype.py on the CPU; the embedder's float32)
    quantize: str | None = None  # 4bit or 8bit (bitsandbytes, CUDA only): the memory model and a local generator
    threads: int | None = None  # CPU threads of torch and faiss; None: the process's default
    # the memory model's decoding step compiled whole (memorag/memory/compiled.py) in this torch.compile mode:
    # "default", or "reduce-overhead" (CUDA graphs, on a GPU); None: the eager step. Compiling takes from seconds
    # (GPU) to minutes (2 CPU cores) once per process; it pays over long or many decodes.
    compile_decoding: Literal["default", "reduce-overhead", "max-autotune"] | None = None
    # the memory model's window steps (memorize, prefill) through layers compiled one by one
    # (memorag/memory/compiled.py) in this torch.compile mode; None: the eager layers. On a GPU it
    # memorizes faster after seconds of compiling, once per process.
    compile_windows: Literal["default", "max-autotune-no-cudagraphs"] | None = None
    # asking
    mode: str = "memorag"
    language: str = "auto"  # "en", "zh", or "auto" (from the query)
    clue_kinds: list[str] = field(default_factory=lambda: list(CLUE_KINDS))
    max_clues: int = 8
    clue_max_new_tokens: int = 64
    hits_per_query: int = 6
    # the clue-driven modes' evidence rule (memorag/modes/evidence_plan.py): "reference" (the official
    # MemoRAG's: the query and every clue retrieve `memorag_hits` each, the whole union read in text order,
    # the draft offered as "The answer might be ...", cut only to the generator's window with the clues'
    # hits first out), "union" (the same lists taken round-robin by rank and cut to `evidence_tokens`:
    # modes compared at equal evidence), or "fusion" (each retrieves `hits_per_query`, lists fused with
    # the query weighing `query_weight`, cut to `evidence_tokens`)
    memorag_evidence: Literal["reference", "union", "fusion"] = "reference"
    memorag_hits: int = 3  # reference: hits of each clue (the reference's k; the query takes hits_per_query);
    # union: of the query and of each clue
    query_weight: float = 2.0  # fusion: weight of the query's own hits (each clue weighs 1)
    fusion: Literal["rrf", "score"] = "rrf"
    # most evidence tokens given to the generator (also capped by its window); the clue-driven modes under
    # memorag_evidence="reference" keep their whole union instead, cut only to the window
    evidence_tokens: int = 1024
    # order of the evidence the generator reads, in every retrieval mode (rag, dos, hyde, rqrag, memorag,
    # mixpr, longrag): "document", "best-first", or "own" (rag best first, the others document order)
    evidence_order: Literal["own", "document", "best-first"] = "own"
    # the generator's answer prompt when `ask` names none: "sentence" (a short sentence, for people), or
    # a benchmark's own form that needs no per-question fields (memorag/prompting/answer_forms.py:
    # "longbench:hotpotqa", "ruler:qa", ...); `ask(answer_form=...)` sets one per question
    answer_prompt: str = "sentence"
    answer_max_new_tokens: int = 128
    summary_max_new_tokens: int = 320
    # each mode's own settings (`--set longrag.max_tokens=...`; in YAML a `longrag:` section), declared
    # in the mode's module
    longrag: LongRAGSettings = field(default_factory=LongRAGSettings)
    mixpr: MixPRSettings = field(default_factory=MixPRSettings)
    cic: CiCSettings = field(default_factory=CiCSettings)
    hyde: HyDESettings = field(default_factory=HyDESettings)
    rqrag: RQRAGSettings = field(default_factory=RQRAGSettings)
    dos: DOSSettings = field(default_factory=DOSSettings)
    lite: GistSettings = field(default_factory=GistSettings)  # the memorag-lite mode's gists (memorag/lite/)

    # the flat names these had before they moved into their modes' sections: still read, with a warning
    # (memorag.config); `--set longrag_units=2` is `--set longrag.units=2`
    renamed_keys: ClassVar[dict[str, str]] = {
        f"{mode}_{key}": f"{mode}.{key}"
        for mode, keys in {
            "longrag": ("max_tokens", "links", "chunk_tokens", "units", "long_answer_tokens"),
            "mixpr": ("router", "top_k"), "cic": ("examples", "seed"),
            "hyde": ("max_new_tokens", "query_weight"), "rqrag": ("max_queries", "max_new_tokens", "query_weight"),
        }.items()
        for key in keys
    } | {"dos_evidence_tokens": "dos.evidence_tokens"}

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
        # weights, timeouts and penalties: NaN and infinity fail these comparisons too
        for name in ("timeout", "repetition_penalty", "query_weight"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ConfigError(f"{name}={value} must be a finite number above 0")
        if self.refusal_margin is not None and not 0 <= self.refusal_margin < float("inf"):
            raise ConfigError(f"refusal_margin={self.refusal_margin} must be a finite number, 0 or above (or None: "
                              "the generator's own)")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries={self.max_retries} must be 0 or more (0: no retries)")
        if self.generator_window is not None and self.generator_window < 1:
            raise ConfigError(f"generator_window={self.generator_window} must be at least 1 (or None: the model's)")
        if is_memory_weights_name(self.memory_weights):
            self.memory_weights = str(self.memory_weights).strip().lower()
        elif self.memory_weights is not None and not is_memory_weights_id(self.memory_weights):
            self.memory_weights = os.path.abspath(os.path.expanduser(str(self.memory_weights)))


@dataclass
class MemorizeReport:
    added: list[str] = field(default_factory=list)  # document ids read this time
    skipped: list[str] = field(default_factory=list)  # already memorized, same text
    problems: list[str] = field(default_factory=list)  # files that could not be read: one line each, file and fix
    num_chunks: int = 0  # chunks added
    memory_tokens: int = 0  # tokens the memory holds after this call (0: no memory built)
    num_gists: int = 0  # gists the gist memory holds after this call (0: none written; the memorag-lite mode's)
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
