"""`MemoRAG`, the pipeline object: models loaded on first use, the corpus, and each mode's context."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memorag.config import config_from_dict, config_to_dict, config_view
from memorag.documents import ReadOptions
from memorag.modes.base import Mode, get_mode
from memorag.modes.context import Loaders, ModeContext, SharedSettings
from memorag.modes.evidence import EvidenceSettings, EvidenceStep
from memorag.modes.evidence_plan import RetrievalPlan
from memorag.modes.results import FoundBy, memory_text
from memorag.pipeline.corpus import MemorizedCorpus
from memorag.pipeline.helpers import describe_type, label_embedder, read_inputs, split_model_args
from memorag.pipeline.persistence import (
    check_memory_dtype,
    check_saved_identity,
    open_index,
    read_manifest,
    save_pipeline,
    saved_embedder_name,
    saved_memory_dtype,
    saved_settings,
)
from memorag.pipeline.types import (
    Answer,
    AskHooks,
    Corpus,
    EmptyCorpusError,
    Evidence,
    FewShotExample,
    InputError,
    MemorizeReport,
    PipelineConfig,
    UnsupportedTaskError,
    timed,
)
from memorag.prompting.answer_check import EchoGate
from memorag.prompting.answer_forms import AnswerForm, as_answer_form
from memorag.retrieval.base import Hit, Retriever
from memorag.retrieval.chunking import Chunk, Document
from memorag.runtime.memtrim import trim_heap
from memorag.runtime.placement import Placement, set_threads

if TYPE_CHECKING:
    from memorag.generation.base import Generator
    from memorag.lite import GistMemory
    from memorag.memory import Memory, MemoryModel
    from memorag.retrieval.dense import Embedder


def _pass_on(on_text: Callable[[str], None], piece: str) -> None:
    if piece:
        on_text(piece)


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
        memory_model, embedder, generator = split_model_args(overrides, memory_model, embedder, generator)
        if overrides:
            base = config_to_dict(config or PipelineConfig())
            for key, value in overrides.items():  # a section given as a mapping changes only the keys it names
                both = isinstance(value, dict) and isinstance(base.get(key), dict)
                base[key] = {**base[key], **value} if both else value
            config = config_from_dict(PipelineConfig, base)
        self.config = config or PipelineConfig()
        self._memory_model = memory_model
        self._embedder = embedder
        self.embedder_name = embedder_name or (
            type(embedder).__name__ if embedder is not None else label_embedder(self.config.embedder)
        )
        self._generator = generator
        self._tokenizer = None
        self._corpus = MemorizedCorpus()
        self._modes: dict[str, Mode] = {}
        self._prepared: dict[str, int] = {}
        self._placement: Placement | None = None
        self._memory_dtype: str | None = None  # a loaded save's, where dtype is "auto" (see `load`)
        set_threads(self.config.threads)
        # labelled questions of the same task for the cic mode's examples (none: it makes its own from the corpus)
        self.few_shot: list[FewShotExample] = []

    def with_generator(self, generator: Generator) -> MemoRAG:
        """A pipeline that answers with `generator` over this one's models, settings and memorized corpus
        (the same objects: memorize through one of the two only)."""
        sibling = MemoRAG(self.config, memory_model=self._memory_model, embedder=self._embedder,
                          embedder_name=self.embedder_name, generator=generator)
        sibling._corpus, sibling._tokenizer, sibling._placement = self._corpus, self._tokenizer, self._placement
        sibling._memory_dtype, sibling.few_shot = self._memory_dtype, self.few_shot
        return sibling

    # -- models, loaded on first use ------------------------------------------------------------
    @property
    def placement(self) -> Placement:
        """Where the models load and in what precision (`device`, `dtype`, `quantize`), checked
        against this machine on first use."""
        if self._placement is None:
            self._placement = Placement.of(self.config)
        return self._placement

    @property
    def memory_model(self) -> MemoryModel:
        if self._memory_model is None:
            from memorag.memory import MemoryModel

            placement = self.placement
            if self._memory_dtype is not None and placement.dtype == "auto":
                placement = replace(placement, dtype=self._memory_dtype)
            self._memory_model = MemoryModel.from_pretrained(
                self.config.memory_model, memory_weights=self.config.memory_weights, config=self.config.memory,
                **placement.lm_kwargs(),
            )
        if self.config.compile_decoding is not None and not self._memory_model.decoding_compiled:
            mode = self.config.compile_decoding
            self._memory_model.compile_decoding(mode=None if mode == "default" else mode)
        if self.config.compile_windows is not None and not self._memory_model.windows_compiled:
            mode = self.config.compile_windows
            self._memory_model.compile_windows(mode=None if mode == "default" else mode)
        return self._memory_model

    @property
    def tokenizer(self):
        """The memory model's tokenizer: chunks are counted in its tokens."""
        if self._memory_model is not None:
            return self._memory_model.tokenizer
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            from memorag.runtime.embedded import resolve_lm

            self._tokenizer = AutoTokenizer.from_pretrained(resolve_lm(self.config.memory_model))
        return self._tokenizer

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from memorag.retrieval.dense import load_embedder
            from memorag.runtime.embedded import resolve_embedder

            placement = self.placement
            self._embedder = load_embedder(resolve_embedder(self.config.embedder), device=placement.device,
                                           dtype=placement.dtype)
        return self._embedder

    @property
    def generator(self) -> Generator:
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
                **({} if is_endpoint(spec) else self._local_generator_settings()),
                placement=None if is_endpoint(spec) else self.placement,
            )
            if self.config.generator_window is not None:
                self._generator.context_window = self.config.generator_window
        return self._generator

    def _local_generator_settings(self) -> dict:
        settings = {"repetition_penalty": self.config.repetition_penalty}
        if self.config.refusal_margin is not None:
            settings["refusal_margin"] = self.config.refusal_margin
        return settings

    def check_models(self) -> None:
        """Fail now, before any long work, if a named model or its package cannot be found.

        Resolves names only (cheap); nothing is loaded.
        """
        from memorag.memory.checkpoint import memory_weights_for
        from memorag.runtime.embedded import (
            is_memory_weights_id,
            is_memory_weights_name,
            resolve_embedder,
            resolve_lm,
        )

        if self._memory_model is None or self._embedder is None or self._generator is None:
            _ = self.placement  # a device or a quantization this machine cannot give fails here
        if self._memory_model is None:
            resolve_lm(self.config.memory_model)
        if self._embedder is None and self.config.retriever != "bm25":
            resolve_embedder(self.config.embedder)
        weights = self.config.memory_weights
        if is_memory_weights_name(weights) and self._memory_model is None:
            memory_weights_for(self.config.memory_model, weights)  # shipped weights missing or corrupt fail here
        elif weights is not None and self._memory_model is None and not is_memory_weights_id(weights):
            if not Path(weights).is_dir():
                raise FileNotFoundError(f"memory weights {weights} not found (expected a folder or a hub id)")

    def check_generator(self) -> None:
        """Fail now, before any long work, if the generator cannot be reached."""
        self.generator.check()

    def new_retriever(self) -> Retriever:
        from memorag.retrieval.dense import DenseRetriever
        from memorag.retrieval.hybrid import HybridRetriever
        from memorag.retrieval.sparse import BM25Retriever

        if self.config.retriever == "bm25":
            return BM25Retriever()
        dense = DenseRetriever(self.embedder, embedder_name=self.embedder_name)
        if self.config.retriever == "hybrid":
            return HybridRetriever([dense, BM25Retriever()])
        return dense

    # -- the corpus (read here; only `memorize`, `ensure_memory` and `load` change it) -------------
    @property
    def memorized(self) -> MemorizedCorpus:
        """The corpus object: documents, hashes, chunks, index, memory, version (`memorag.pipeline.corpus`)."""
        return self._corpus

    @property
    def corpus(self) -> Corpus:
        """The frozen view the modes read."""
        return self._corpus.view()

    @property
    def documents(self) -> list[Document]:
        return list(self._corpus.documents)

    @property
    def chunks(self) -> list[Chunk]:
        return list(self._corpus.chunks)

    @property
    def retriever(self) -> Retriever | None:
        return self._corpus.retriever

    @property
    def memory(self) -> Memory | None:
        return self._corpus.memory

    @property
    def content_sha256(self) -> str:
        return self._corpus.content_sha256

    def memorize(
        self,
        text_or_documents: str | Document | os.PathLike | Sequence[str | Document | os.PathLike],
        *,
        with_memory: bool | None = None,
        show_progress: bool | None = None,
        read_options: ReadOptions | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> MemorizeReport:
        """Chunk, index and memorize new documents; documents already memorized are skipped.

        Takes texts (str), `Document`s, and paths (`pathlib.Path`) of files (PDF, Word, HTML,
        Markdown, text) and folders (walked through `read_options`' patterns): every file is read
        first, before any model work; one that cannot be read is left out and reported in
        `MemorizeReport.problems` (when nothing could be read, its `DocumentReadError` is raised).
        The memory is extended (new text read after the old); `with_memory=False` builds
        only the chunks and index (modes that need the memory build it on first use); None (the
        default) builds it unless the `mode` setting reads gists instead (memorag-lite), whose
        gists are then written (`ensure_gists`).
        `on_progress(done, total)`: the memory's tokens read so far and in all, after each window.
        Nothing changes if any step fails.
        """
        if with_memory is None:
            with_memory = not self.mode().needs_gists
        timings: dict[str, float] = {}
        with timed(timings, "read"):  # files and folders: extracted here, before any model work
            documents, problems = read_inputs(text_or_documents, read_options)
        admission = self._corpus.admit(documents)
        new = admission.new
        report = MemorizeReport(skipped=admission.skipped, problems=[str(problem) for problem in problems],
                                timings=timings)
        if not new:
            report.memory_tokens = self.memory.num_tokens if self.memory is not None else 0
            return report

        chunks, retriever, memory, gists = self._build(new, with_memory, report.timings, show_progress, on_progress)
        self._corpus.add(admission, chunks, retriever, memory)
        if gists is not None:
            self._corpus.set_gists(gists)
            report.num_gists = len(gists)
        report.added = [document.id for document in new]
        report.num_chunks = len(chunks)
        report.memory_tokens = memory.num_tokens if memory is not None else 0
        trim_heap()  # the memory model's activations are freed: give their pages back (memorag/runtime/memtrim.py)
        return report

    def _build(self, new: list[Document], with_memory: bool, timings: dict[str, float], show_progress: bool | None,
               on_progress: Callable[[int, int], None] | None) -> tuple[list[Chunk], Retriever, Any, list | None]:
        """What memorizing `new` documents adds, each stage timed into `timings`, nothing changed
        yet: their chunks, the retriever with them added, the memory extended (None when there is
        none and `with_memory` is off) and the gists (None unless the corpus keeps gists)."""
        from memorag.retrieval.chunking import chunk_documents

        memory = self.memory
        # loading (and, on first use, converting) the memory model is timed apart from the stages that use it
        with timed(timings, "load"):
            _loaded = self.memory_model if with_memory or memory is not None else self.tokenizer
        with timed(timings, "chunk"):
            chunks = chunk_documents(new, self.tokenizer, self.config.chunk_tokens, self.config.overlap_tokens,
                                     first_id=len(self._corpus.chunks))
        gists = None
        if self.mode().needs_gists or self._corpus.gists is not None:  # the memorag-lite mode's memory
            with timed(timings, "gists"):
                gists = self._gists_of([*self._corpus.documents, *new], show_progress)
        if with_memory or memory is not None:
            with timed(timings, "memory"):
                if memory is None:
                    memory = self.memory_model.memorize(memory_text([*self._corpus.documents, *new], False),
                                                        show_progress=show_progress, on_progress=on_progress)
                else:
                    memory = self._extend_memory(memory, new, show_progress, on_progress)
        with timed(timings, "index"):
            retriever = self.retriever if self.retriever is not None else self.new_retriever()
            retriever.add(chunks)
        return chunks, retriever, memory, gists

    def _extend_memory(self, memory, new: list[Document], show_progress: bool | None,
                       on_progress: Callable[[int, int], None] | None = None):
        from memorag.memory.schedule import ContextTooLongError

        try:
            return self.memory_model.memorize(memory_text(new, True), memory=memory, show_progress=show_progress,
                                              on_progress=on_progress)
        except ContextTooLongError as error:
            raise ContextTooLongError(
                f"{error}. The memory already made was read at ratio {memory.ratio}, which cannot change: memorize "
                "all the texts again, with that option, into a new save or over this one (--overwrite)"
            ) from error

    def ensure_memory(self, show_progress: bool | None = None) -> None:
        """Build the memory of every document now, if `memorize` was told not to."""
        if self.memory is None and self._corpus.documents:
            self._corpus.set_memory(self.memory_model.memorize(memory_text(self._corpus.documents, False),
                                                               show_progress=show_progress))

    def ensure_gists(self, show_progress: bool | None = None) -> GistMemory:
        """The gist memory of every document (the memorag-lite mode's), its missing gists written now."""
        gists = self._gists_of(self._corpus.documents, show_progress)
        self._corpus.set_gists(gists)
        return gists

    def _gists_of(self, documents: Sequence[Document], show_progress: bool | None) -> GistMemory:
        """The corpus's gist memory extended by the gists of those of `documents` it lacks, written by the
        generator (`memorag.lite`); a text whose gists cannot fit the generator is refused before any is written."""
        from memorag.lite import GistCheckpoint, GistMemory, gist_windows, plan_gist_budget, write_gists
        from memorag.prompting.clues import detect_language

        memory = self._corpus.gists or GistMemory()
        missing = memory.missing(documents)
        if not missing:
            return memory
        settings = self.config.lite
        language = self.config.language if self.config.language != "auto" else detect_language(missing[0].text[:1024])
        windows = gist_windows(missing, self.tokenizer, settings.window_tokens)
        reply_tokens = max(self.config.clue_max_new_tokens, self.config.answer_max_new_tokens)
        writer = self.generator.memory_writer  # a reader's base: its adapter writes answers only
        budget = plan_gist_budget(writer, windows, memory, settings, reply_tokens, language)
        texts = {document.id: document.text for document in missing}
        checkpoint = GistCheckpoint(settings.checkpoint_dir, writer.name, budget.per_gist, language)
        written = write_gists(windows, [texts[window.doc_id][window.start_char:window.end_char] for window in windows],
                              writer, budget.per_gist, checkpoint=checkpoint, batch_size=settings.batch_size,
                              language=language, show_progress=show_progress)
        return memory.extended(written)

    # -- asking ---------------------------------------------------------------------------------
    def mode(self, name: str | None = None) -> Mode:
        name = name or self.config.mode
        if name not in self._modes:
            self._modes[name] = get_mode(name)(self.config.evidence_order)
        return self._modes[name]

    def context(self, mode: str | Mode | None = None, answer_form: AnswerForm | str | None = None) -> ModeContext:
        """What `mode` is handed for one question (or for `prepare`): the corpus, its retriever, the
        models (loaded on first use), the shared settings and its own, and an `EvidenceStep` with
        the answer prompt `answer_form` (default: the `answer_prompt` setting)."""
        handler = mode if isinstance(mode, Mode) else self.mode(mode)
        config = self.config
        step = self._evidence_step(answer_form)
        shared = config_view(SharedSettings, config)
        loaders = Loaders(generator=lambda: self.generator, tokenizer=lambda: self.tokenizer,
                          embedder=lambda: self.embedder, memory_model=lambda: self.memory_model,
                          memory=self._built_memory, gists=self.ensure_gists, new_retriever=self.new_retriever)
        return ModeContext(corpus=self.corpus, retriever=self.retriever, shared=shared,
                           settings=handler.settings_of(config), evidence=step, loaders=loaders,
                           few_shot=self.few_shot)

    def _evidence_step(self, answer_form: AnswerForm | str | None = None) -> EvidenceStep:
        config = self.config
        return EvidenceStep(
            generator=lambda: self.generator, documents=self._corpus.documents, chunk_by_id=self._corpus.chunk_by_id,
            retriever=self.retriever,
            answer_form=as_answer_form(answer_form if answer_form is not None else config.answer_prompt),
            settings=config_view(EvidenceSettings, config),
        )

    def _built_memory(self):
        self.ensure_memory()
        return self.memory

    def ask(
        self,
        query: str,
        task: str | None = None,
        mode: str | None = None,
        *,
        on_text: Callable[[str], None] | None = None,
        on_clues: Callable[[list[str]], None] | None = None,
        on_evidence: Callable[[list[Evidence]], None] | None = None,
        show_progress: bool = False,
        answer_form: AnswerForm | str | None = None,
    ) -> Answer:
        """Answer `query`; `task` defaults to the mode's own (`memorag` for the memorag mode).

        `on_text` gets the answer as it is written, held back while it could still be no answer
        (`memorag.prompting.answer_check.EchoGate`): an empty reply, the question said again or a
        refusal never reaches it, and `Answer.answered` says so once the answer is whole.
        `show_progress`: a progress bar on stderr while the clues are written. `answer_form`
        is the generator's answer prompt for this question (`memorag.prompting.answer_forms`: a
        benchmark's own, e.g. ``"longbench:hotpotqa"``); default: the `answer_prompt` setting.
        """
        started = time.perf_counter()
        handler = self._ready(query, task, mode)
        task = task or handler.default_task
        context = self.context(handler, answer_form)
        query = query.strip()
        if task not in handler.tasks_without_evidence:  # refuse a query that cannot fit before any work
            context.evidence.room_for_evidence(query, task, context.language_of(query))
        gate = EchoGate(query)
        shown = None if on_text is None else (lambda piece: _pass_on(on_text, gate.push(piece)))
        answer = handler.answer(context, query, task, AskHooks(shown, on_clues, on_evidence, show_progress))
        if on_text is not None:
            _pass_on(on_text, gate.finish(answer.answer))
        answer.timings["total"] = round(time.perf_counter() - started, 4)
        return answer

    def clues(self, query: str, task: str = "memorag", show_progress: bool = False) -> tuple[list[str], dict[str, str]]:
        """Only the memory's clues for `query` (key points for `summarize`), and its raw replies by
        clue kind: the clues of the `mode` setting when it writes clues (memorag, memorag-full,
        memorag-lite), else the memorag mode's. `search` and the integrations retrieve with them."""
        if task == "qa":
            raise UnsupportedTaskError("the qa task writes no clues; use memorag or summarize")
        handler = self._ready(query, task, self._clue_mode())
        context = self.context(handler)
        query = query.strip()
        return handler.write_clues(context, query, task, context.language_of(query), show_progress=show_progress)

    def _clue_mode(self) -> str:
        from memorag.modes.memorag import MemoRAGMode

        return self.config.mode if isinstance(self.mode(), MemoRAGMode) else "memorag"

    def _ready(self, query: str, task: str | None, mode: str | None) -> Mode:
        if not isinstance(query, str):
            kind = describe_type(query)
            fix = "; decode it first, e.g. query.decode('utf-8')" if isinstance(query, bytes | bytearray) else ""
            raise InputError(f"the query is {kind}, not text (str){fix}")
        if not query.strip():
            raise InputError("the query is empty; ask something")
        handler = self.mode(mode)
        if task is not None and task not in handler.tasks:
            raise UnsupportedTaskError(
                f"mode {handler.name!r} does not do task {task!r}; its tasks: {', '.join(handler.tasks)}"
            )
        if not self._corpus.documents:
            raise EmptyCorpusError("nothing is memorized yet; call memorize() (or load a saved pipeline) first")
        if self._prepared.get(handler.name) != self._corpus.version:
            handler.prepare(self.context(handler))
            self._prepared[handler.name] = self._corpus.version
        return handler

    def retrieve(self, queries: Sequence[str], weights: Sequence[float] | None = None,
                 k: int | None = None, *, union: bool = False) -> tuple[list[Hit], dict[int, list[FoundBy]]]:
        """Every query retrieves `k` hits (default `hits_per_query`), combined into one ranking:
        fused by weight, or with `union` round-robin by rank (`retrieve_plan`)."""
        weights = [1.0] * len(queries) if weights is None else weights
        return self.retrieve_plan(RetrievalPlan(tuple(queries), tuple(weights), k, union))

    def retrieve_plan(self, plan: RetrievalPlan) -> tuple[list[Hit], dict[int, list[FoundBy]]]:
        """The ranking of a retrieval plan (`memorag.modes.evidence_plan`; `EvidenceStep.retrieve`):
        the hits, best first, and for each chunk id the lists that fetched it (`FoundBy`)."""
        return self._evidence_step().retrieve(plan)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str], wait: float = 300.0) -> Path:
        """Write documents, chunks, index, memory and a manifest into `directory`, atomically.

        Holds the save's lock while writing, waiting at most `wait` seconds for another writer
        (to add to a save without losing another writer's work, hold `memorag.storage.locking.save_lock`
        from before `MemoRAG.load` until after `save`). An existing saved pipeline there is
        replaced; any other existing content, or a file in it that the save does not own, is refused.
        """
        models = {
            "memory_model": self.memory_model.name,
            "memory_identity": self.memory_model.identity(),
            "embedder": self.embedder_name if self.config.retriever != "bm25" else None,
        }
        return save_pipeline(self._corpus, models, self.config, directory, wait)

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, memory_model=None, embedder=None,
             embedder_name: str | None = None, generator=None, **overrides: Any) -> MemoRAG:
        """Load a saved pipeline, verifying its files and that the models and settings match.

        Takes the same keywords as `MemoRAG(...)` (models as names or objects, settings).
        Settings that are free to change (generator, mode, budgets...) are not taken from
        the save. An identity setting (memory model, memory config, embedder, retriever,
        chunking) that differs from the saved one is refused with `ManifestMismatchError`,
        and so are other memory weights. `memory_weights` may point to the weights' new place.
        """
        memory_model, embedder, generator = split_model_args(overrides, memory_model, embedder, generator)
        root = Path(directory)
        manifest = read_manifest(root)
        config = saved_settings(root, manifest, overrides, memory_model_given=memory_model is not None)
        rag = cls(config, memory_model=memory_model, embedder=embedder, embedder_name=embedder_name,
                  generator=generator)
        # under dtype "auto" the memory model runs in the dtype the save's memory was memorized in, which "auto"
        # may not pick on this machine (memorag/runtime/cpu_dtype.py)
        rag._memory_dtype = saved_memory_dtype(root)
        asked = embedder_name if embedder is not None else label_embedder(config.embedder)
        saved_embedder = saved_embedder_name(root, manifest, None if embedder is not None and embedder_name is None
                                             else asked)
        if saved_embedder is not None:
            rag.embedder_name = saved_embedder
        check_saved_identity(root, manifest, rag.memory_model.identity())

        def check_memory(memory: Memory) -> None:
            rag.memory_model.check_memory(memory)
            check_memory_dtype(memory, rag.memory_model.base_dtype, root)

        index = lambda path: open_index(path, config.retriever, lambda: rag.embedder, rag.embedder_name)
        rag._corpus = MemorizedCorpus.load(root, manifest, index, check_memory)
        return rag
