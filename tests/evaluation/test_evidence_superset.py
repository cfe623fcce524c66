"""eval/evidence_superset.py on hand-made records: the gold sentences each evidence holds, the
superset verdicts against rag's whole evidence and its best hits, and a stop when the rebuilt
questions disagree with the recorded recall."""

from __future__ import annotations

import pytest

from memorag.evaluation import recall as recall_lib
from tests.evaluation.test_scripts import _script

GOLD = [{"kind": "sentence", "start": 10, "end": 20}, {"kind": "sentence", "start": 100, "end": 110},
        {"kind": "document", "start": 0, "end": 200}]
UNITS = recall_lib.gold_units(GOLD, as_documents=False)


def evidence(*spans: tuple[int, int, float]) -> list[list]:
    return [[recall_lib.CONTEXT_DOC_ID, start, end, score] for start, end, score in spans]


def test_found_sentences_reads_the_best_k_spans_and_whole_sentences_only():
    script = _script("evidence_superset")
    given = evidence((0, 15, 0.9), (95, 120, 0.5), (5, 30, 0.1))
    assert script.found_sentences(UNITS, given, None, 1.0) == [0, 1]
    assert script.found_sentences(UNITS, given, 2, 1.0) == [1]  # (0, 15) covers half the first sentence
    assert script.found_sentences(UNITS, given, 1, 1.0) == []


def test_the_table_says_which_mode_lost_a_sentence_rag_held():
    script = _script("evidence_superset")
    rows = [{"task": "hotpotqa", "length": 8192, "example_id": "a", "row": 7, "gold": 2, "rag": [0, 1],
             "rag@3": [1], "memorag": [1], "memorag holds rag": False, "memorag holds rag@3": True}]
    text = script.table(rows, ["memorag"], "rag", 3)
    assert "| hotpotqa | 8192 | 7 | 2 | 2 | 1 | 1 | **no** | yes |" in text
    assert "memorag holds every gold sentence rag held: 0 of 1 questions" in text
    assert "memorag holds every gold sentence rag@3 held: 1 of 1 questions" in text


def test_a_count_that_disagrees_with_the_recorded_recall_stops_the_script():
    script = _script("evidence_superset")
    record = {"mode": "rag", "example_id": "a", "task": "hotpotqa", "length": 8192,
              "recall": {"recall@all": 0.5}}
    script.check_against_record([0], UNITS, record)
    with pytest.raises(SystemExit, match="not the run's"):
        script.check_against_record([0, 1], UNITS, record)


def test_help_names_the_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        _script("evidence_superset").main(["--help"])
    assert exit_info.value.code == 0 and "python eval/evidence_superset.py" in capsys.readouterr().out
