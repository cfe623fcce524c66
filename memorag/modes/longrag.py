"""The `longrag` mode: long retrieval units ranked by MaxP, read by a long reader in two turns.

After LongRAG (Jiang et al. 2024). `prepare` groups the corpus documents into units of at
most `longrag_max_tokens` tokens, by their own `links` or by shared rare terms
(`longrag_links`), cuts the units into ~512-token chunks and indexes them with a retriever
of the pipeline's kind (`memorag.retrieval.unit_index.UnitIndex`). A unit scores as its
best chunk (MaxP).

`answer` (task qa) gives the reader the best units, at most `longrag_units`, while they fit
the generator's window; it stops at the first unit that does not fit, so a lower-ranked unit
never replaces a better one. When even the best unit alone is too long (one long document,
or a unit cap above the window), its best-scoring chunks that fit are read instead. The
reader's budget is unit-sized: `evidence_tokens`, a budget for short-chunk modes, does not
apply. Turn 1 writes a long answer from the units; turn 2 extracts the short answer from
the question and the long answer, after few-shot examples. Turn 2 does not repeat the
units: the generator interface is single-turn, and sending the units twice would double
the cost of the longest prompt.

The `Answer`: `answer` is the short answer (streamed through `on_text`), `raw_clues`
holds the long answer under "long_answer", and `evidence` has one entry per document (or
piece of a document, for a cut unit) given to the reader, in reading order, scored by its
unit's MaxP score (a cut unit's pieces: their chunk's score). Reading order is the units
best first (LongRAG's), or with `evidence_order=document` every piece in document order. Their `chunk_id` is
`NO_CHUNK`: the reader reads documents, not the pipeline's chunks; `doc_id`
and the character offsets name the text.
"""

from __future__ import annotations

import logging
import re

from memorag import prompts
from memorag.modes.base import Mode, register_mode
from memorag.pipeline.core import TOKENIZER_MARGIN
from memorag.pipeline.types import NO_CHUNK, Answer, AskHooks, Corpus, Evidence, PipelineError, timed
from memorag.retrieval.base import Hit
from memorag.retrieval.chunking import count_tokens
from memorag.retrieval.hybrid import fit_to_budget
from memorag.retrieval.longrag import Unit
from memorag.retrieval.unit_index import UnitIndex, choose_links, default_chunk_tokens

logger = logging.getLogger(__name__)



def short_answer(reply: str, language: str = "en") -> str:
    """The short answer in the second turn's reply: its first non-empty line, without an
    echoed "Short answer:" label."""
    label = re.escape(prompts.fill(prompts.LONGRAG_SHORT_LABEL, language).rstrip(":："))
    for line in reply.splitlines():
        line = re.sub(rf"^\s*{label}\s*[:：]?\s*", "", line.strip(), flags=re.IGNORECASE).strip()
        if line:
            return line
    return ""


@register_mode
class LongRAGMode(Mode):
    """LongRAG: grouped long units, MaxP ranking, a two-turn long reader."""

    name = "longrag"
    tasks = ("qa",)
    default_task = "qa"
    own_evidence_order = "best-first"  # units by rank, each unit's documents in unit order
    uses_answer_prompt = False  # LongRAG's two turns, its own prompts

    index: UnitIndex | None = None

    @property
    def units(self) -> list[Unit]:
        """The long units of the prepared corpus."""
        if self.index is None:
            raise PipelineError("the longrag mode is not prepared yet; ask a question first")
        return self.index.units

    def prepare(self, corpus: Corpus) -> None:
        rag, config = self.pipeline, self.pipeline.config
        documents = list(corpus.documents)
        chunk_tokens = self._chunk_tokens()
        self.index = UnitIndex(
            documents,
            rag.tokenizer,
            rag.new_retriever(),
            max_tokens=config.longrag_max_tokens,
            chunk_tokens=chunk_tokens,
            overlap_tokens=min(config.overlap_tokens, chunk_tokens // 4),
            links=choose_links(documents, config.longrag_links),
        )

    def _chunk_tokens(self) -> int:
        """`longrag_chunk_tokens`, or by default 512 capped by what the embedder reads.

        The embedder's limit is in its own word pieces, chunks are in the memory model's
        tokens: close enough to keep most of each chunk visible to the embedder.
        """
        rag = self.pipeline
        limit = None
        if rag.config.retriever != "bm25":
            found = getattr(rag.embedder, "max_seq_length", None)
            limit = found if isinstance(found, int) and found > 0 else None
        wanted = rag.config.longrag_chunk_tokens
        if wanted is None:
            return default_chunk_tokens(limit)
        if limit is not None and wanted > limit:
            logger.warning("longrag_chunk_tokens=%d but the embedder reads only %d tokens: the end of each "
                           "chunk is not embedded; set longrag_chunk_tokens=%d or leave it unset", wanted, limit, limit)
        return wanted

    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        rag, config = self.pipeline, self.pipeline.config
        assert self.index is not None, "the pipeline prepares a mode before it answers"
        language = rag.language_of(query)
        system = prompts.fill(prompts.GENERATOR_SYSTEM, language)
        timings: dict[str, float] = {}
        with timed(timings, "retrieve"):
            ranked, hits = self.index.rank(query)
            evidence = self._select(query, language, ranked, hits)
            if self.evidence_order(task) == "document":
                evidence = rag.order_evidence(evidence, "document")
        hooks.evidence(evidence)
        with timed(timings, "generate"):
            long_answer = rag.generator.generate(
                self._long_prompt(query, language, evidence), system=system,
                max_new_tokens=config.longrag_long_answer_tokens,
            ).strip()
        with timed(timings, "extract"):
            prompt = prompts.fill(prompts.LONGRAG_SHORT_ANSWER, language, question=query, long_answer=long_answer,
                                  examples=prompts.fill(prompts.LONGRAG_EXAMPLES, language))
            reply = rag.generator.generate(prompt, system=system, max_new_tokens=config.answer_max_new_tokens,
                                           on_text=hooks.on_text)
        return Answer(query, task, self.name, short_answer(reply, language), [], evidence, timings,
                      rag.generator.name, {"long_answer": long_answer})

    def _long_prompt(self, query: str, language: str, evidence: list[Evidence]) -> str:
        passages = self.pipeline.render_passages(evidence, language)
        return prompts.fill(prompts.LONGRAG_LONG_ANSWER, language, passages=passages, question=query)

    # -- what the reader gets ---------------------------------------------------------------------
    def _select(self, query: str, language: str, ranked: list[tuple[str, float]], hits: list[Hit]) -> list[Evidence]:
        """The best units that fit (see the module docstring), as evidence in reading order."""
        assert self.index is not None
        budget = self._budget(query, language)
        groups: list[list[Evidence]] = []  # one group per unit, best unit first
        used = 0
        for unit_id, score in ranked[: self.pipeline.config.longrag_units]:
            unit = self.index.unit_by_id[unit_id]
            if budget is not None and used + unit.num_tokens > budget:
                break
            groups.append(self._whole_unit(unit, score))
            used += unit.num_tokens
        if not groups and ranked:
            assert budget is not None  # only a budget stops the best unit
            groups.append(self._best_pieces(self.index.unit_by_id[ranked[0][0]], hits, budget))
        return self._fit_window(query, language, groups)

    def _budget(self, query: str, language: str) -> int | None:
        """Unit tokens the window leaves after the first turn's prompt and reply (None: no window known)."""
        generator = self.pipeline.generator
        window = generator.context_window
        if not window:
            return None
        system = prompts.fill(prompts.GENERATOR_SYSTEM, language)
        overhead = generator.count_tokens(self._long_prompt(query, language, []), system)
        room = window - overhead - self.pipeline.config.longrag_long_answer_tokens
        budget = int(room * TOKENIZER_MARGIN)
        if budget < 1:
            raise PipelineError(
                f"the generator's window ({window} tokens) leaves no room for documents after the prompt "
                f"({overhead}) and the long answer ({self.pipeline.config.longrag_long_answer_tokens}); "
                "shorten the query or lower longrag_long_answer_tokens"
            )
        return budget

    def _whole_unit(self, unit: Unit, score: float) -> list[Evidence]:
        assert self.index is not None
        evidence = []
        for doc_id in unit.doc_ids:
            document = self.index.documents[doc_id]
            evidence.append(Evidence(
                NO_CHUNK, document.id, document.title, 0, len(document.text),
                count_tokens(self.pipeline.tokenizer, document.text), round(score, 6), [0], document.text,
            ))
        return evidence

    def _best_pieces(self, unit: Unit, hits: list[Hit], budget: int) -> list[Evidence]:
        """The unit's best-scoring chunks within `budget`, in order, as pieces of its documents."""
        assert self.index is not None
        own = [hit for hit in hits if self.index.unit_of_chunk[hit.chunk_id] == unit.id]
        scores = {hit.chunk_id: hit.score for hit in own}
        evidence = []
        for chunk in fit_to_budget(own, self.index.chunk_by_id, budget):
            for document, start, end in self.index.pieces(unit, chunk.start_char, chunk.end_char):
                text = document.text[start:end]
                evidence.append(Evidence(
                    NO_CHUNK, document.id, document.title, start, end,
                    count_tokens(self.pipeline.tokenizer, text), round(scores[chunk.id], 6), [0], text,
                ))
        return evidence

    def _fit_window(self, query: str, language: str, groups: list[list[Evidence]]) -> list[Evidence]:
        """Check the first turn's prompt with the generator's own count: while it is too long,
        drop the last unit, and from a single unit its weakest (then last) piece."""
        generator = self.pipeline.generator
        window = generator.context_window
        flat = lambda: [item for group in groups for item in group]
        if not window:
            return flat()
        system = prompts.fill(prompts.GENERATOR_SYSTEM, language)
        limit = window - self.pipeline.config.longrag_long_answer_tokens
        while groups and generator.count_tokens(self._long_prompt(query, language, flat()), system) > limit:
            if len(groups) > 1:
                groups.pop()
                continue
            group = groups[0]
            weakest = min(reversed(range(len(group))), key=lambda i: group[i].score)
            del group[weakest]
            if not group:
                groups.pop()
        return flat()
