"""Building long contexts and shared corpora from paragraphs, and links between documents.

A per-question long context is the question's gold paragraphs among distractors
(its own hard negatives first, then random draws from a pool), placed at a chosen
depth and fitted to a target length (:func:`fit_blocks`); a shared corpus grows
the same way to its target (:func:`grow_corpus`). Documents link to the documents
whose titles they mention (:func:`link_by_title_mentions`), for LongRAG's grouping.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memorag.evaluation.datasets.lengths import LengthCounter, count_words
from memorag.evaluation.datasets.schema import CorpusTask, EvalExample
from memorag.retrieval.chunking import Document

logger = logging.getLogger(__name__)

GOLD_PLACEMENTS = ("random", "start", "middle", "end")


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
class Block:
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


def check_placement(placement: str | float) -> None:
    if isinstance(placement, str):
        if placement not in GOLD_PLACEMENTS:
            raise ValueError(
                f"placement must be one of {GOLD_PLACEMENTS} or a depth in [0, 1], got {placement!r}"
            )
    elif not (isinstance(placement, (int, float)) and 0.0 <= placement <= 1.0):
        raise ValueError(f"placement depth must be in [0, 1], got {placement!r}")


def _place(
    gold_groups: list[list[Block]], distractors: list[Block], placement: str | float, rng: random.Random
) -> list[Block]:
    """Order blocks: each gold group stays contiguous; ``random`` scatters the groups, else all sit at one depth."""
    if placement == "random":
        slots = sorted(rng.randint(0, len(distractors)) for _ in gold_groups)
        order = list(range(len(gold_groups)))
        rng.shuffle(order)
        placed: list[Block] = []
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


def _render(blocks: Sequence[Block], with_title: bool) -> tuple[str, list[tuple[int, int]]]:
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
class BuiltContext:
    """A per-question long context: its text, its blocks in order with their spans, its length."""

    context: str
    blocks: list[Block]
    spans: list[tuple[int, int]]
    length: int

    def gold_evidence(self, inner: Callable[[Block, int], list[dict[str, Any]]]) -> list[dict[str, Any]]:
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


def fit_blocks(
    gold_groups: list[list[Block]],
    own_distractors: list[Block],
    pool_draw: Callable[[], Block | None],
    target: int | None,
    counter: LengthCounter,
    placement: str | float,
    rng: random.Random,
    with_title: bool,
    max_misses: int = 50,
) -> BuiltContext:
    """Choose distractors up to ``target`` (never dropping gold), order, render and measure.

    Own distractors (the question's hard negatives) come first, then draws from
    the pool; a draw that does not fit is skipped, and filling stops after
    ``max_misses`` such draws in a row or when the pool runs dry.
    """
    cost = lambda block: counter.cost(block.rendered(with_title))
    used = sum(cost(block) for group in gold_groups for block in group)
    distractors: list[Block] = []
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
            return BuiltContext(context, ordered, spans, length)
        # A real tokenizer is not exactly additive over pieces: drop distractors until it fits.
        average = max(1.0, sum(cost(block) for block in distractors) / len(distractors))
        drop = max(1, math.ceil((length - target) / average))
        del distractors[-drop:]


class PoolDrawer:
    """Random draws without repetition from a list of paragraphs (unique ids), skipping excluded ids."""

    def __init__(self, pool: Sequence[Block], excluded: set[str], rng: random.Random) -> None:
        self.pool, self.excluded, self.rng = pool, set(excluded), rng
        self.remaining: list[Block] | None = None

    def __call__(self) -> Block | None:
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


@dataclass(frozen=True)
class CorpusSource:
    """Where a shared corpus comes from: its task name, the data set it is built from, the seed, and
    the builder's own settings (recorded in the task's ``meta``)."""

    name: str
    source: str
    seed: int
    settings: dict[str, Any]


def corpus_task(
    origin: CorpusSource,
    examples: list[EvalExample],
    blocks: list[Block],
    drawer: PoolDrawer,
    target: int | None,
    counter: LengthCounter,
    rng: random.Random,
    to_documents: Callable[[list[Block]], list[Document]],
    num_questions: int,
) -> CorpusTask:
    """The shared corpus of ``examples``: ``blocks`` (their gold and own paragraphs) grown from
    ``drawer`` to ``target`` (``None``: as they are), shuffled by ``rng``, made documents (with
    the data set's links) by ``to_documents``."""
    blocks, used = grow_corpus(blocks, drawer, target, counter)
    rng.shuffle(blocks)
    documents = to_documents(blocks)
    meta = {
        "source": origin.source,
        "seed": origin.seed,
        **origin.settings,
        "num_questions": num_questions,
        "num_documents": len(documents),
        "target_length": target,
        "length": round(used),
        "proxy": True,
        **counter.describe(),
    }
    return CorpusTask(name=origin.name, documents=documents, examples=examples, meta=meta)


def grow_corpus(
    blocks: list[Block], drawer: PoolDrawer, target: int | None, counter: LengthCounter
) -> tuple[list[Block], float]:
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
