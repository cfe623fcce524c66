"""`MemoRAG`, the pipeline object: models loaded on first use, the corpus, and the steps modes share."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from memorag import prompts
from memorag.answer_forms import AnswerForm, as_answer_form
from memorag.clues import combine_clues, detect_language, parse_clues
from memorag.config import config_from_dict, config_to_dict
from memorag.memtrim import trim_heap
from memorag.modes.base import Mode, get_mode
from memorag.pipeline.helpers import (
    as_documents,
    describe_type,
    document_sha256,
    label_embedder,
    split_model_args,
)
from memorag.pipeline.persistence import load_pipeline, save_pipeline
from memorag.pipeline.types import (
    Answer,
    AskHooks,
    Corpus,
    DocumentConflictError,
    EmptyCorpusError,
    Evidence,
    FewShotExample,
    InputError,
    MemorizeReport,
    PipelineConfig,
    PipelineError,
    QueryTooLongError,
    UnsupportedTaskError,
    timed,
)
from memorag.placement import Placement, set_threads
from memorag.retrieval.base import Hit
from memorag.retrieval.chunking import Chunk, Document

# Chunks are counted with the memory model's tokenizer, the generator's window with its own:
# evidence budgets keep this share of the room the window leaves.
TOKENIZER_MARGIN = 0.9
# The clue bar: "writing clues 1/3 [00:06, questions]", the kind being written last.
_CLUE_BAR = "{desc} {n_fmt}/{total_fmt} [{elapsed}{postfix}]"

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
            base.update(overrides)
            config = config_from_dict(PipelineConfig, base)
        self.config = config or PipelineConfig()
        self._memory_model = memory_model
        self._embedder = embedder
        self.embedder_name = embedder_name or (
            type(embedder).__name__ if embedder is not None else label_embedder(self.config.embedder)
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
        self._placement: Placement | None = None
        set_threads(self.config.threads)
        self._answer_form: AnswerForm | None = None  # set by `ask` for one question
        # labelled questions of the same task for the cic mode's examples (none: it makes its own from the corpus)
        self.few_shot: list[FewShotExample] = []

    # -- models, loaded on first use ------------------------------------------------------------
    @property
    def placement(self) -> Placement:
        """Where the models load and in what precision (`device`, `dtype`, `quantize`), checked
        against this machine on first use."""
        if self._placement is None:
            self._placement = Placement.of(self.config)
        return self._placement

    @property
    def memory_model(self):
        if self._memory_model is None:
            from memorag.memory import MemoryModel

            self._memory_model = MemoryModel.from_pretrained(
                self.config.memory_model, memory_weights=self.config.memory_weights, config=self.config.memory,
                **self.placement.lm_kwargs(),
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

            placement = self.placement
            self._embedder = load_embedder(resolve_embedder(self.config.embedder), device=placement.device,
                                           dtype=placement.dtype)
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
                placement=None if is_endpoint(spec) else self.placement,
            )
            if self.config.generator_window is not None:
                self._generator.context_window = self.config.generator_window
        return self._generator

    def check_models(self) -> None:
        """Fail now, before any long work, if a named model or its package cannot be found.

        Resolves names only (cheap); nothing is loaded.
        """
        from memorag.models import is_memory_weights_id, resolve_embedder, resolve_lm

        if self._memory_model is None or self._embedder is None or self._generator is None:
            _ = self.placement  # a device or a quantization this machine cannot give fails here
        if self._memory_model is None:
            resolve_lm(self.config.memory_model)
        if self._embedder is None and self.config.retriever != "bm25":
            resolve_embedder(self.config.embedder)
        weights = self.config.memory_weights
        if weights is not None and self._memory_model is None and not is_memory_weights_id(weights):
            if not Path(weights).is_dir():
                raise FileNotFoundError(f"memory weights {weights} not found (expected a folder or a hub id)")

    def check_generator(self) -> None:
        """Fail now, before any long work, if the generator cannot be reached."""
        self.generator.check()

    def new_retriever(self):
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
            digest = document_sha256(document)
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

        with timed(report.timings, "chunk"):
            chunks = chunk_documents(new, self.tokenizer, self.config.chunk_tokens, self.config.overlap_tokens,
                                     first_id=len(self.chunks))
        memory = self.memory
        if with_memory or memory is not None:
            with timed(report.timings, "memory"):
                if memory is None:
                    memory = self.memory_model.memorize(self._memory_text(self.documents + new, False),
                                                        show_progress=show_progress)
                else:
                    memory = self._extend_memory(memory, new, show_progress)
        with timed(report.timings, "index"):
            retriever = self.retriever if self.retriever is not None else self.new_retriever()
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
        trim_heap()  # the memory model's activations are freed: give their pages back (memorag/memtrim.py)
        return report

    def _extend_memory(self, memory, new: list[Document], show_progress: bool | None):
        from memorag.memory.model import ContextTooLongError

        try:
            return self.memory_model.memorize(self._memory_text(new, True), memory=memory, show_progress=show_progress)
        except ContextTooLongError as error:
            raise ContextTooLongError(
                f"{error}. The memory already made was read at ratio {memory.ratio}, which cannot change: memorize "
                "all the texts again, with that option, into a new save or over this one (--overwrite)"
            ) from error

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
        show_progress: bool = False,
        answer_form: AnswerForm | str | None = None,
    ) -> Answer:
        """Answer `query`; `task` defaults to the mode's own (`memorag` for the memorag mode).

        `show_progress`: a progress bar on stderr while the clues are written. `answer_form`
        is the generator's answer prompt for this question (`memorag.answer_forms`: a
        benchmark's own, e.g. ``"longbench:hotpotqa"``); default: the `answer_prompt` setting.
        """
        started = time.perf_counter()
        handler = self._ready(query, task, mode)
        task = task or handler.default_task
        self._answer_form = as_answer_form(answer_form if answer_form is not None else self.config.answer_prompt)
        try:
            if task not in handler.tasks_without_evidence:  # refuse a query that cannot fit before any work
                self.check_query_fits(query.strip(), task, self.language_of(query))
            answer = handler.answer(query.strip(), task, AskHooks(on_text, on_clues, on_evidence, show_progress))
        finally:
            self._answer_form = None
        answer.timings["total"] = round(time.perf_counter() - started, 4)
        return answer

    @property
    def answer_form(self) -> AnswerForm:
        """The answer prompt in use: the one `ask` was given, else the `answer_prompt` setting."""
        return self._answer_form or as_answer_form(self.config.answer_prompt)

    def clues(self, query: str, task: str = "memorag", show_progress: bool = False) -> tuple[list[str], dict[str, str]]:
        """Only the memory model's clues for `query` (key points for `summarize`), and its raw
        replies by clue kind."""
        if task == "qa":
            raise UnsupportedTaskError("the qa task writes no clues; use memorag or summarize")
        self._ready(query, task, "memorag")
        return self.write_clues(query.strip(), task, self.language_of(query), show_progress=show_progress)

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

    def write_clues(self, query: str, task: str, language: str,
                    show_progress: bool = False) -> tuple[list[str], dict[str, str]]:
        """The memory model's clues (or key points, for `summarize`) and its raw replies;
        `show_progress`: a bar on stderr naming the clue kind being written, with the seconds spent."""
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
        with tqdm(total=len(requests), desc="writing clues", unit="kind", disable=not show_progress,
                  file=sys.stderr, bar_format=_CLUE_BAR) as bar:
            for kind, (prompt, split_lines) in requests.items():
                bar.set_postfix_str(kind)
                raw[kind] = self.memory_model.generate(prompt, memory=self.memory,
                                                       max_new_tokens=self.config.clue_max_new_tokens)
                groups.append(parse_clues(raw[kind], prompt=prompt, query=query, split_lines=split_lines,
                                          max_clues=self.config.max_clues))
                bar.update()
        return combine_clues(groups, self.config.max_clues, query), raw

    def retrieve(self, queries: Sequence[str], weights: Sequence[float] | None = None,
                 k: int | None = None, *, union: bool = False) -> tuple[list[Hit], dict[int, list[int]]]:
        """Every query retrieves `k` hits; the lists are combined into one ranking: fused
        (weighted), or with `union` taken round-robin by rank (`hybrid.round_robin`; no weights).

        Returns the combined hits, best first, and for each chunk id the indices of the
        queries that found it.
        """
        from memorag.retrieval.hybrid import fuse, round_robin

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
        if union:
            return round_robin(results), found_by
        return fuse(results, method=self.config.fusion, weights=list(weights) if weights is not None else None), found_by

    def _prompt(self, query: str, task: str, language: str, evidence: Sequence[Evidence]) -> str:
        passages = self.render_passages(evidence, language)
        if task == "summarize":
            return prompts.fill(prompts.GENERATOR_SUMMARY, language, passages=passages, request=query)
        return self.answer_form.render(passages, query, language)

    def _system(self, task: str, language: str) -> str | None:
        """The generator's system prompt: the pipeline's, except under a benchmark's answer form."""
        if task == "summarize":
            return prompts.fill(prompts.GENERATOR_SYSTEM, language)
        return self.answer_form.system(language)

    def _max_new_tokens(self, task: str) -> int:
        return self.config.summary_max_new_tokens if task == "summarize" else self.config.answer_max_new_tokens

    def evidence_budget(self, query: str, task: str, language: str, max_tokens: int | None = None) -> int:
        """Evidence tokens that fit: `max_tokens` (default `evidence_tokens`), capped by what the
        generator's window leaves."""
        budget = max_tokens or self.config.evidence_tokens
        room = self.check_query_fits(query, task, language)
        return budget if room is None else min(budget, room)

    def check_query_fits(self, query: str, task: str, language: str) -> int | None:
        """Evidence tokens the generator's window leaves after the prompt and the answer (None:
        the window is unknown). Cheap (it counts tokens), so `ask` calls it before any clue or
        retrieval work; raises `QueryTooLongError` when no evidence would fit."""
        window = self.generator.context_window
        if not window:
            return None
        system = self._system(task, language)
        overhead = self.generator.count_tokens(self._prompt(query, task, language, []), system)
        answer = self._max_new_tokens(task)
        # chunk sizes are counted with the memory model's tokenizer: leave a margin for another's
        room = int((window - overhead - answer) * TOKENIZER_MARGIN)
        if room >= 1:
            return room
        need = window - answer - int(1 / TOKENIZER_MARGIN) - 1  # most prompt tokens that leave room
        excess = overhead - need
        # the query's share of the prompt (it may appear more than once)
        query_tokens = overhead - self.generator.count_tokens(self._prompt("", task, language, []), system)
        fixes = []
        if 0 < excess < query_tokens:
            # characters per token vary: the estimate cuts a little more (10%, at least 4 tokens)
            chars = min(len(query), -(-(excess + max(4, excess // 10)) * len(query) // query_tokens))
            fixes.append(f"shorten the query by at least {excess} tokens (about {chars} characters)")
        elif excess > 0:
            fixes.append("use a generator with a larger window (even an empty query would not fit)")
        fitting_answer = window - overhead - int(1 / TOKENIZER_MARGIN) - 1
        if fitting_answer >= 1:
            fixes.append(f"answer in at most {fitting_answer} tokens (`--max-new-tokens {fitting_answer}`, or "
                         f"`--set {'summary' if task == 'summarize' else 'answer'}_max_new_tokens={fitting_answer}`)")
        raise QueryTooLongError(
            f"the generator's window ({window} tokens) leaves no room for evidence after the prompt ({overhead} "
            f"tokens, with the query) and the answer ({answer}); {' or '.join(fixes)}"
        )

    def gather_evidence(self, queries: Sequence[str], weights: Sequence[float], task: str, query: str,
                        language: str, *, max_tokens: int | None = None, k: int | None = None,
                        union: bool = False) -> list[Evidence]:
        """Retrieve `k` hits (default `hits_per_query`) with every query, combine them (`retrieve`:
        fused, or the round-robin union), keep the best chunks within the budget
        (`evidence_budget(max_tokens)`), in document order."""
        from memorag.retrieval.hybrid import fit_to_budget

        fused, found_by = self.retrieve(queries, weights, k, union=union)
        budget = self.evidence_budget(query, task, language, max_tokens)
        scores = {hit.chunk_id: hit.score for hit in fused}
        kept = fit_to_budget(fused, self._chunk_by_id, budget)
        evidence = [
            Evidence(chunk.id, chunk.doc_id, chunk.title, chunk.start_char, chunk.end_char, chunk.num_tokens,
                     round(scores[chunk.id], 6), found_by.get(chunk.id, []), chunk.text)
            for chunk in kept
        ]
        return self.fit_window(evidence, query, task, language)

    def order_evidence(self, evidence: Sequence[Evidence], order: str) -> list[Evidence]:
        """`evidence` in document order (documents as memorized, then by offset) or best first
        (by score; ties keep their order)."""
        if order == "best-first":
            return sorted(evidence, key=lambda item: -item.score)
        if order != "document":
            raise PipelineError(f"evidence order {order!r}; choose document or best-first")
        rank = {document.id: number for number, document in enumerate(self.documents)}
        return sorted(evidence, key=lambda item: (rank.get(item.doc_id, len(rank)), item.start_char, item.end_char))

    def room_left(self, query: str, evidence: Sequence[Evidence], task: str, language: str) -> int | None:
        """Tokens of the generator's window left over by the answer prompt over `evidence` and
        the answer itself (negative: it does not fit); None when the window is unknown."""
        window = self.generator.context_window
        if not window:
            return None
        system = self._system(task, language)
        used = self.generator.count_tokens(self._prompt(query, task, language, evidence), system)
        return window - used - self._max_new_tokens(task)

    def fit_window(self, evidence: list[Evidence], query: str, task: str, language: str) -> list[Evidence]:
        """Drop the lowest-scored evidence until the whole prompt fits the generator's window."""
        window = self.generator.context_window
        if not window:
            return evidence
        system = self._system(task, language)
        limit = window - self._max_new_tokens(task)
        while evidence and self.generator.count_tokens(self._prompt(query, task, language, evidence), system) > limit:
            weakest = min(range(len(evidence)), key=lambda i: evidence[i].score)
            evidence = evidence[:weakest] + evidence[weakest + 1 :]
        return evidence

    def render_passages(self, evidence: Sequence[Evidence], language: str = "en") -> str:
        """The evidence as numbered passages, in the given order; a chunk that overlaps or touches
        the previous one of the same document is merged into its passage, so no text is repeated."""
        texts = {document.id: document.text for document in self.documents}
        merged: list[list] = []  # [doc_id, title, start, end]
        for item in evidence:
            last = merged[-1] if merged else None
            if (last is not None and last[0] == item.doc_id and item.start_char <= last[3] + 1
                    and item.end_char >= last[2] - 1):
                last[2], last[3] = min(last[2], item.start_char), max(last[3], item.end_char)
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
            system=self._system(task, language),
            max_new_tokens=self._max_new_tokens(task),
            on_text=on_text,
        )

    # -- persistence ----------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str], wait: float = 300.0) -> Path:
        """Write documents, chunks, index, memory and a manifest into `directory`, atomically.

        Holds the save's lock while writing, waiting at most `wait` seconds for another writer
        (to add to a save without losing another writer's work, hold `memorag.locking.save_lock`
        from before `MemoRAG.load` until after `save`). An existing saved pipeline there is
        replaced; any other existing content, or a file in it that the save does not own, is refused.
        """
        return save_pipeline(self, directory, wait)

    @classmethod
    def load(cls, directory: str | os.PathLike[str], **kwargs: Any) -> MemoRAG:
        """Load a saved pipeline, verifying its files and that the models and settings match.

        Takes the same keywords as `MemoRAG(...)` (models as names or objects, settings).
        Settings that are free to change (generator, mode, budgets...) are not taken from
        the save. An identity setting (memory model, memory config, embedder, retriever,
        chunking) that differs from the saved one is refused with `ManifestMismatchError`,
        and so are other memory weights. `memory_weights` may point to the weights' new place.
        """
        return load_pipeline(cls, directory, **kwargs)
