"""Recall of gold evidence on hand-made gold and evidence (expected values worked out by hand)."""

from __future__ import annotations

import pytest

from memorag.evaluation.recall import (
    CONTEXT_DOC_ID,
    doc_recall,
    gold_units,
    not_applicable,
    recall,
    recall_report,
    top_k,
)

C = CONTEXT_DOC_ID
NEEDLE = {"kind": "needle", "start": 100, "end": 130, "text": "x" * 30}


def test_a_span_must_be_covered_by_the_union_of_the_evidence():
    units = gold_units([NEEDLE], as_documents=False)
    assert recall(units, [(C, 90, 140)]) == 1.0
    assert recall(units, [(C, 110, 140)]) == 0.0  # 20 of 30 characters
    assert recall(units, [(C, 110, 140)], coverage=0.5) == 1.0
    assert recall(units, [(C, 90, 115), (C, 112, 140)]) == 1.0  # two overlapping chunks cover it together
    assert recall(units, [(C, 90, 115), (C, 116, 140)]) == 0.0  # one character missing
    assert recall(units, [("other", 0, 1000)]) == 0.0  # another document's offsets do not count
    assert recall(units, []) == 0.0


def test_every_fine_item_is_needed_but_answers_are_alternatives():
    gold = [
        {"kind": "sentence", "start": 0, "end": 10},
        {"kind": "sentence", "start": 50, "end": 60},
        {"kind": "answer", "start": 200, "end": 205},
        {"kind": "answer", "start": 300, "end": 305},
        {"kind": "document", "start": 0, "end": 70},
    ]
    units = gold_units(gold, as_documents=False)
    assert len(units.fine) == 3 and len(units.documents) == 1
    # first sentence and the second answer annotation: 2 of 3 fine units
    assert recall(units, [(C, 0, 12), (C, 299, 310)]) == pytest.approx(2 / 3)
    # a document is found by any overlap
    assert doc_recall(units, [(C, 69, 80)]) == 1.0 and doc_recall(units, [(C, 70, 80)]) == 0.0


def test_documents_by_id_in_a_corpus():
    gold = [
        {"kind": "document", "doc_id": "a"},
        {"kind": "document", "doc_id": "b"},
        {"kind": "sentence", "doc_id": "a", "doc_start": 5, "doc_end": 15, "start": 1005, "end": 1015},
    ]
    units = gold_units(gold, as_documents=True)
    spans = [("a", 0, 20), ("c", 0, 100)]
    assert recall(units, spans) == 1.0  # the fine unit (a's sentence, by document offsets)
    assert doc_recall(units, spans) == 0.5
    # without fine items, recall falls back to the documents
    assert recall(gold_units(gold[:2], as_documents=True), spans) == 0.5


def test_unlocated_gold_gives_no_recall():
    units = gold_units([{"kind": "count", "text": "zorbu", "count": 12}], as_documents=False)
    assert units.unlocated == 1 and recall(units, [(C, 0, 100)]) is None and doc_recall(units, []) is None
    # offsets into a context mean nothing when the example was memorized as documents
    assert gold_units([NEEDLE], as_documents=True).unlocated == 1


def test_recall_at_k_ranks_by_score_and_not_applicable_has_every_key():
    units = gold_units([NEEDLE], as_documents=False)
    scored = [((C, 0, 50), 0.9), ((C, 95, 140), 0.5), ((C, 200, 250), 0.7)]
    assert top_k(scored, 2) == [(C, 0, 50), (C, 200, 250)]
    report = recall_report(units, scored, [1, 2, 3], coverage=1.0)
    assert report == {"recall@1": 0.0, "doc_recall@1": None, "recall@2": 0.0, "doc_recall@2": None,
                      "recall@3": 1.0, "doc_recall@3": None, "recall@all": 1.0, "doc_recall@all": None}
    assert set(not_applicable([1, 2, 3])) == set(report) and set(not_applicable([1]).values()) == {None}
