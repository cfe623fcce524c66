"""Recall of gold evidence: did the evidence given to the generator contain what answers the question?

Gold evidence (``EvalExample.gold_evidence``, see ``memorag.evaluation.datasets.schema``) is
located either by character offsets into the example's ``context``
(``start``/``end``), or in a document (``doc_id``, with ``doc_start``/``doc_end``
offsets into its text, or none: the whole document). Evidence (``Answer.evidence``,
or retrieval hits) is a span of a memorized document (``doc_id``, ``start_char``,
``end_char``). A per-question context is memorized as one document whose id is
:data:`CONTEXT_DOC_ID`, so its evidence offsets are offsets into the context;
documents (a shared corpus, or per-question ``documents``) keep their ids.

Definition
----------
The gold items of an example become *units*, each found or not:

* every located item of kind ``"needle"``, ``"sentence"``, ``"link"``,
  ``"assignment"``, ``"occurrence"``, ``"supporting_fact"`` (any kind but the two
  below) is one unit: all of them are needed;
* all ``"answer"`` items of the example form ONE unit, found when any of them is
  (they are alternative annotations of where the answer is; repeats count once);
* ``"document"`` items are document units: found when any evidence overlaps the
  gold document (its span in the context, or any chunk of that document).

Where an item is looked for depends on how the example was memorized: as one
context, by its ``start``/``end`` (an item without them is unlocated); as
documents, by its ``doc_id`` and ``doc_start``/``doc_end`` (without those offsets
the whole document is the region, found by any overlap, like a document unit).

A span unit is found when the union of the evidence spans in its document covers
at least ``coverage`` (default all) of its characters; an empty span is found when
some evidence in its document holds its position. ``recall`` is the share
of found units among the *fine* units (all but documents) when the example has
any, else among the document units; ``doc_recall`` is the share of found document
units (None without document items). Items without a location (e.g. word counts
of ``frequent_words``) are not units; an example with no units has recall None.

``recall@k`` uses the k best-scored pieces of evidence (ties kept in the order
given); ``recall@all`` uses all the evidence the generator got. Recall is "not
applicable" (None, never 0; :func:`not_applicable`) when the mode answers that
pipeline task without evidence by design (the task is in the mode's
``Mode.tasks_without_evidence``, e.g. ``memorag:qa``, the memory answering alone):
the runner decides this from the mode, not from what the answer happens to hold,
so a retrieval mode that found nothing scores 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

CONTEXT_DOC_ID = "context"
"""The id under which a per-question context is memorized (one document)."""

DOCUMENT_KIND = "document"
ANSWER_KIND = "answer"


@dataclass(frozen=True)
class Region:
    """A gold place: characters [start, end) of document `doc_id`, or the whole document (start None)."""

    doc_id: str
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True)
class Unit:
    """Alternative regions (found if any is); `whole` units are found by any overlap."""

    regions: tuple[Region, ...]
    whole: bool  # a document: any overlap finds it


@dataclass(frozen=True)
class GoldUnits:
    fine: tuple[Unit, ...]
    documents: tuple[Unit, ...]
    unlocated: int  # gold items with no place to look for


Span = tuple[str, int, int]  # (doc_id, start_char, end_char) of a piece of evidence


def _region(item: dict[str, Any], as_documents: bool) -> Region | None:
    if not as_documents:
        if isinstance(item.get("start"), int) and isinstance(item.get("end"), int):
            return Region(CONTEXT_DOC_ID, item["start"], item["end"])
        return None
    doc_id = item.get("doc_id")
    if doc_id is None:
        return None
    if item.get("kind") != DOCUMENT_KIND and isinstance(item.get("doc_start"), int) \
            and isinstance(item.get("doc_end"), int):
        return Region(str(doc_id), item["doc_start"], item["doc_end"])
    return Region(str(doc_id))


def gold_units(gold_evidence: Iterable[dict[str, Any]], as_documents: bool) -> GoldUnits:
    """The units of an example's gold evidence (see the module docstring).

    `as_documents`: the example was memorized as documents (ids as in the gold),
    not as one context text.
    """
    fine: list[Unit] = []
    documents: list[Unit] = []
    answers: list[Region] = []
    unlocated = 0
    for item in gold_evidence:
        region = _region(item, as_documents)
        if region is None:
            unlocated += 1
        elif item.get("kind") == DOCUMENT_KIND:
            documents.append(Unit((region,), whole=True))
        elif item.get("kind") == ANSWER_KIND:
            answers.append(region)
        else:
            fine.append(Unit((region,), whole=region.start is None))
    if answers:
        fine.append(Unit(tuple(dict.fromkeys(answers)), whole=False))
    return GoldUnits(tuple(fine), tuple(documents), unlocated)


def _covered(region: Region, spans: Sequence[Span]) -> int:
    """Characters of `region` inside the union of `spans` (same document)."""
    pieces = sorted((max(start, region.start), min(end, region.end))
                    for doc_id, start, end in spans if doc_id == region.doc_id)
    covered, reach = 0, region.start
    for start, end in pieces:
        start = max(start, reach)
        if end > start:
            covered += end - start
            reach = end
    return covered


def region_found(region: Region, spans: Sequence[Span], whole: bool, coverage: float) -> bool:
    if region.start is None:
        return any(doc_id == region.doc_id for doc_id, _, _ in spans)
    if region.end <= region.start:  # an empty span: found when some evidence holds its position
        return any(doc_id == region.doc_id and start <= region.start <= end for doc_id, start, end in spans)
    covered = _covered(region, spans)
    if whole:
        return covered > 0
    return covered >= coverage * (region.end - region.start)


def _share(units: Sequence[Unit], spans: Sequence[Span], coverage: float) -> float | None:
    if not units:
        return None
    found = sum(any(region_found(r, spans, unit.whole, coverage) for r in unit.regions) for unit in units)
    return found / len(units)


def recall(units: GoldUnits, spans: Sequence[Span], coverage: float = 1.0) -> float | None:
    """Share of found units: the fine ones if any, else the documents; None without units."""
    return _share(units.fine or units.documents, spans, coverage)


def doc_recall(units: GoldUnits, spans: Sequence[Span]) -> float | None:
    """Share of gold documents that some evidence overlaps; None without document items."""
    return _share(units.documents, spans, 1.0)


def top_k(spans_with_scores: Sequence[tuple[Span, float]], k: int | None) -> list[Span]:
    """The k best-scored spans (all when k is None); equal scores keep their order."""
    ranked = sorted(range(len(spans_with_scores)), key=lambda i: -spans_with_scores[i][1])
    chosen = ranked if k is None else ranked[:k]
    return [spans_with_scores[i][0] for i in chosen]


def recall_report(units: GoldUnits, scored_spans: Sequence[tuple[Span, float]], ks: Sequence[int],
                  coverage: float) -> dict[str, float | None]:
    """``{"recall@1": ..., "recall@all": ..., "doc_recall@all": ...}`` for one example's evidence."""
    report: dict[str, float | None] = {}
    for k in [*ks, None]:
        spans = top_k(scored_spans, k)
        name = "all" if k is None else str(k)
        report[f"recall@{name}"] = recall(units, spans, coverage)
        report[f"doc_recall@{name}"] = doc_recall(units, spans)
    return report


def not_applicable(ks: Sequence[int]) -> dict[str, None]:
    """The report of a mode that gave no evidence by design."""
    return {f"{prefix}@{name}": None for name in [*map(str, ks), "all"] for prefix in ("recall", "doc_recall")}
