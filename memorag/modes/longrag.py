"""The `longrag` mode: long retrieval units ranked by MaxP, read by a long reader in two turns.

After LongRAG (Jiang et al. 2024). `prepare` groups the corpus documents into units of at
most `longrag.max_tokens` tokens, by their own `links` or by shared rare terms
(`longrag.links`), cuts the units into ~512-token chunks and indexes them with a retriever
of the pipeline's kind (`memorag.retrieval.unit_index.UnitIndex`). A unit scores as its
best chunk (MaxP).

`answer` (task qa) gives the reader the best units, at most `longrag.units`, while they fit
the generator's window; it stops at the first unit that does not fit, so a lower-ranked unit
never replaces a better one. When even the best unit alone is too long (one long document,
or a unit cap above the window), its best-scoring chunks that fit are read instead. The
reader's budget is unit-sized: `evidence_tokens`, a budget for short-chunk modes, does not
apply. Turn 1 writes a long answer from the units; turn 2 extracts the short answer from
the question and the long answer, after few-shot examples. Turn 2 does not repeat the
units: the generator interface is single-turn, and sending the units twice would double
the cost of the longest prompt.

The `Answer`: `answer` is the short answer (streamed through `on_text`), `extras`
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
from dataclasses import dataclass
from typing import Any, Literal

from memorag.config import ConfigError
from memorag.errors import PipelineError
from memorag.modes.base import Mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence import TOKENIZER_MARGIN, EvidenceStep
from memorag.modes.results import NO_CHUNK, Answer, AskHooks, Evidence, cited_evidence, timed
from memorag.prompting import prompts
from memorag.retrieval.base import Hit
from memorag.retrieval.chunking import count_tokens
from memorag.retrieval.hybrid import fit_to_budget
from memorag.retrieval.long_units import Unit
from memorag.retrieval.unit_index import LINK_POLICIES, UnitIndex, choose_links, default_chunk_tokens

logger = logging.getLogger(__name__)


@dataclass
class LongRAGSettings:
    """The longrag mode's settings (`--set longrag.units=2`); its reader reads whole units, not
    `evidence_tokens`."""

    max_tokens: int = 4096  # cap on a unit's tokens (only a single longer document exceeds it)
    links: Literal["auto", "given", "terms"] = "auto"  # grouping links; see unit_index.choose_links
    chunk_tokens: int | None = None  # MaxP chunks; None: 512, fewer if the embedder reads fewer
    units: int = 4  # most units given to the reader (fewer when the generator's window is smaller)
    long_answer_tokens: int = 256  # the reader's first turn, the long answer

    def __post_init__(self) -> None:
        for name in ("max_tokens", "units", "long_answer_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"longrag.{name}={getattr(self, name)} must be at least 1")
        if self.chunk_tokens is not None and self.chunk_tokens < 8:
            raise ConfigError(f"longrag.chunk_tokens={self.chunk_tokens} is too small (at least 8, or None)")
        if self.links not in LINK_POLICIES:
            raise ConfigError(f"longrag.links={self.links!r}; choose one of {', '.join(LINK_POLICIES)}")


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
    description = "long retrieval units (grouped documents) ranked by their best chunk, read whole"
    tasks = ("qa",)
    default_task = "qa"
    own_evidence_order = "best-first"  # units by rank, each unit's documents in unit order
    uses_answer_prompt = False  # LongRAG's two turns, its own prompts
    settings_key = "longrag"

    index: UnitIndex | None = None
    _tokenizer = None  # the memory model's tokenizer, which the evidence's token counts use

    @classmethod
    def score_meaning(cls, config: Any) -> str:
        return ("its unit's score: the retriever's score of the unit's best chunk for the question (MaxP); "
                "a piece of a unit cut to fit: its chunk's own score")

    @property
    def units(self) -> list[Unit]:
        """The long units of the prepared corpus."""
        if self.index is None:
            raise PipelineError("the longrag mode is not prepared yet; ask a question first")
        return self.index.units

    def prepare(self, context: ModeContext) -> None:
        settings: LongRAGSettings = context.settings
        documents = list(context.documents)
        chunk_tokens = self._chunk_tokens(context)
        self._tokenizer = context.tokenizer
        self.index = UnitIndex(
            documents,
            context.tokenizer,
            context.new_retriever(),
            max_tokens=settings.max_tokens,
            chunk_tokens=chunk_tokens,
            overlap_tokens=min(context.shared.overlap_tokens, chunk_tokens // 4),
            links=choose_links(documents, settings.links),
        )

    def _chunk_tokens(self, context: ModeContext) -> int:
        """`longrag.chunk_tokens`, or by default 512 capped by what the embedder reads.

        The embedder's limit is in its own word pieces, chunks are in the memory model's
        tokens: close enough to keep most of each chunk visible to the embedder.
        """
        limit = None
        if context.shared.retriever != "bm25":
            found = getattr(context.embedder, "max_seq_length", None)
            limit = found if isinstance(found, int) and found > 0 else None
        wanted = context.settings.chunk_tokens
        if wanted is None:
            return default_chunk_tokens(limit)
        if limit is not None and wanted > limit:
            logger.warning("longrag.chunk_tokens=%d but the embedder reads only %d tokens: the end of each "
                           "chunk is not embedded; set longrag.chunk_tokens=%d or leave it unset", wanted, limit, limit)
        return wanted

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        settings: LongRAGSettings = context.settings
        assert self.index is not None, "the pipeline prepares a mode before it answers"
        generator, step = context.generator, context.evidence
        language = context.language_of(query)
        system = prompts.fill(prompts.GENERATOR_SYSTEM, language)
        timings: dict[str, float] = {}
        with timed(timings, "retrieve"):
            ranked, hits = self.index.rank(query)
            evidence = self._select(context, query, language, ranked, hits)
            if self.evidence_order(task) == "document":
                evidence = step.order(evidence, "document")
        hooks.evidence(evidence)
        with timed(timings, "generate"):
            long_answer = generator.generate(
                self._long_prompt(step, query, language, evidence), system=system,
                max_new_tokens=settings.long_answer_tokens,
            ).strip()
        with timed(timings, "extract"):
            prompt = prompts.fill(prompts.LONGRAG_SHORT_ANSWER, language, question=query, long_answer=long_answer,
                                  examples=prompts.fill(prompts.LONGRAG_EXAMPLES, language))
            reply = generator.generate(prompt, system=system, max_new_tokens=context.shared.answer_max_new_tokens,
                                       on_text=hooks.on_text)
        return Answer(query, task, self.name, short_answer(reply, language), [], evidence, timings,
                      generator.name, extras={"long_answer": long_answer})

    @staticmethod
    def _long_prompt(step: EvidenceStep, query: str, language: str, evidence: list[Evidence]) -> str:
        passages = step.render_passages(evidence, language)
        return prompts.fill(prompts.LONGRAG_LONG_ANSWER, language, passages=passages, question=query)

    # -- what the reader gets ---------------------------------------------------------------------
    def _select(self, context: ModeContext, query: str, language: str, ranked: list[tuple[str, float]],
                hits: list[Hit]) -> list[Evidence]:
        """The best units that fit (see the module docstring), as evidence in reading order."""
        assert self.index is not None
        budget = self._budget(context, query, language)
        groups: list[list[Evidence]] = []  # one group per unit, best unit first
        used = 0
        for unit_id, score in ranked[: context.settings.units]:
            unit = self.index.unit_by_id[unit_id]
            if budget is not None and used + unit.num_tokens > budget:
                break
            groups.append(self._whole_unit(unit, score))
            used += unit.num_tokens
        if not groups and ranked:
            assert budget is not None  # only a budget stops the best unit
            groups.append(self._best_pieces(self.index.unit_by_id[ranked[0][0]], hits, budget))
        return self._fit_window(context, query, language, groups)

    def _budget(self, context: ModeContext, query: str, language: str) -> int | None:
        """Unit tokens the window leaves after the first turn's prompt and reply (None: no window known)."""
        step, reply_tokens = context.evidence, context.settings.long_answer_tokens
        system = prompts.fill(prompts.GENERATOR_SYSTEM, language)
        prompt = self._long_prompt(step, query, language, [])
        room = step.room_after(prompt, system, reply_tokens)
        if room is None:
            return None
        budget = int(room * TOKENIZER_MARGIN)
        if budget < 1:
            window = context.generator.context_window
            raise PipelineError(
                f"the generator's window ({window} tokens) leaves no room for documents after the prompt "
                f"({window - reply_tokens - room}) and the long answer ({reply_tokens}); "
                "shorten the query or lower longrag.long_answer_tokens"
            )
        return budget

    def _whole_unit(self, unit: Unit, score: float) -> list[Evidence]:
        assert self.index is not None
        evidence = []
        for doc_id in unit.doc_ids:
            document = self.index.documents[doc_id]
            evidence.append(cited_evidence(
                NO_CHUNK, document, 0, len(document.text),
                count_tokens(self._tokenizer, document.text), round(score, 6), [0], document.text,
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
                evidence.append(cited_evidence(
                    NO_CHUNK, document, start, end,
                    count_tokens(self._tokenizer, text), round(scores[chunk.id], 6), [0], text,
                ))
        return evidence

    def _fit_window(self, context: ModeContext, query: str, language: str,
                    groups: list[list[Evidence]]) -> list[Evidence]:
        """Check the first turn's prompt with the generator's own count: while it is too long,
        drop the last unit, and from a single unit its weakest (then last) piece."""
        step, reply_tokens = context.evidence, context.settings.long_answer_tokens
        flat = lambda: [item for group in groups for item in group]
        system = prompts.fill(prompts.GENERATOR_SYSTEM, language)

        def too_long() -> bool:
            room = step.room_after(self._long_prompt(step, query, language, flat()), system, reply_tokens)
            return room is not None and room < 0

        while groups and too_long():
            if len(groups) > 1:
                groups.pop()
                continue
            group = groups[0]
            weakest = min(reversed(range(len(group))), key=lambda i: group[i].score)
            del group[weakest]
            if not group:
                groups.pop()
        return flat()
