"""What a mode is handed: the corpus, the models it may use, its settings and the evidence step.

The pipeline (`memorag.pipeline.MemoRAG`) makes a `ModeContext` for each `prepare` and each
question; a mode keeps what it builds from it (an index, a graph), never the context itself.
The models load on first use: a mode that never touches the generator or the memory model
does not load it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from memorag.modes.evidence import EvidenceStep
from memorag.modes.results import Corpus, FewShotExample
from memorag.prompting.clues import detect_language
from memorag.retrieval.base import Retriever
from memorag.retrieval.chunking import Document

if TYPE_CHECKING:  # the models' modules load torch; a mode that never uses one never imports it
    from transformers import PreTrainedTokenizerBase

    from memorag.generation.base import Generator
    from memorag.lite import GistMemory
    from memorag.memory import Memory, MemoryModel
    from memorag.retrieval.dense import Embedder


@dataclass(frozen=True)
class SharedSettings:
    """The pipeline's settings that modes read beside their own: `PipelineConfig` fields of the same
    names, read by name (`memorag.config.config_view`)."""

    language: str  # "auto" (from the query) or a language of `memorag.prompting.prompts`
    chunk_tokens: int
    overlap_tokens: int
    hits_per_query: int
    evidence_tokens: int
    answer_max_new_tokens: int
    retriever: str  # the kind of the pipeline's retriever: dense, bm25 or hybrid


@dataclass(frozen=True)
class Loaders:
    """How a context gets the models it is asked for; each is called at most once per context."""

    generator: Callable[[], Generator]
    tokenizer: Callable[[], PreTrainedTokenizerBase]  # the memory model's: chunks are counted in its tokens
    embedder: Callable[[], Embedder]
    memory_model: Callable[[], MemoryModel]
    memory: Callable[[], Memory | None]  # the corpus's memory, built on first use if `memorize` was told not to
    gists: Callable[[], GistMemory]  # the corpus's gist memory, its missing gists written on first use
    new_retriever: Callable[[], Retriever]  # an empty retriever of the pipeline's kind


class ModeContext:
    """The corpus, the models, the settings (shared and the mode's own) and one evidence step.

    `retriever` is the index over `corpus.chunks` (None when a mode prepares before any index
    exists); `settings` is the mode's own settings dataclass (None for a mode without one);
    `few_shot` are labelled questions for the modes that show examples (cic).
    """

    def __init__(self, *, corpus: Corpus, retriever: Retriever | None, shared: SharedSettings, settings: Any,
                 evidence: EvidenceStep, loaders: Loaders, few_shot: Sequence[FewShotExample] = ()):
        self.corpus = corpus
        self.retriever = retriever
        self.shared = shared
        self.settings = settings
        self.evidence = evidence
        self.few_shot = list(few_shot)
        self._loaders = loaders

    @property
    def documents(self) -> tuple[Document, ...]:
        return self.corpus.documents

    @cached_property
    def generator(self) -> Generator:
        return self._loaders.generator()

    @cached_property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self._loaders.tokenizer()

    @cached_property
    def embedder(self) -> Embedder:
        return self._loaders.embedder()

    @cached_property
    def memory_model(self) -> MemoryModel:
        return self._loaders.memory_model()

    @cached_property
    def memory(self) -> Memory | None:
        return self._loaders.memory()

    @cached_property
    def gists(self) -> GistMemory:
        """The gist memory of every document (the memorag-lite mode's), written now where missing."""
        return self._loaders.gists()

    def new_retriever(self) -> Retriever:
        return self._loaders.new_retriever()

    def language_of(self, query: str) -> str:
        """The prompts' language for `query`: the `language` setting, or detected when "auto"."""
        return detect_language(query) if self.shared.language == "auto" else self.shared.language
