"""Two runs' records compared question by question (memorag/evaluation/paired.py, eval/paired.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memorag.evaluation.paired import Side, compare, markdown
from tests.training.helpers import ROOT


def record(example_id, score, mode="rag", task="hotpotqa", length=4096, answered=True, answers=("x",),
           metric="qa_f1_score"):
    return {"mode": mode, "task": task, "length": length, "example_id": example_id, "score": score,
            "answered": answered, "answers": list(answers), "metric": metric}


def write_run(folder, records):
    folder.mkdir(parents=True)
    (folder / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_questions_pair_by_id_and_b_s_wins_and_losses_are_counted(tmp_path):
    a = write_run(tmp_path / "base", [record("q1", 0.0), record("q2", 0.5), record("q3", 1.0), record("q4", 0.2)])
    b = write_run(tmp_path / "tuned", [record("q1", 1.0), record("q2", 0.5), record("q3", 0.0),
                                       record("q9", 1.0)])  # q4 and q9 are on one side only
    result = compare(Side.parse(str(a)), Side.parse(str(b)))
    (cell,) = result["cells"]
    assert cell["questions"] == 3 and result["a_only"] == 1 and result["b_only"] == 1
    assert (cell["b_better"], cell["b_worse"], cell["same"]) == (1, 1, 1)
    assert cell["a"]["points"] == 50.0 and cell["b"]["points"] == 50.0 and cell["b_minus_a"]["points"] == 0.0
    assert cell["b_minus_a"]["low"] < 0 < cell["b_minus_a"]["high"]
    assert "| hotpotqa | 4096 | rag | 3 |" in markdown(result)


def test_two_modes_of_one_run_pair_and_squad_v2_is_split_by_kind(tmp_path):
    squad = dict(task="squad_v2", metric="squad_v2_f1")
    run = write_run(tmp_path / "run", [
        record("s1", 1.0, **squad, answers=()), record("s1", 0.0, mode="memorag", **squad, answers=()),
        record("s2", 0.4, **squad), record("s2", 0.8, mode="memorag", **squad)])
    result = compare(Side.parse(f"{run}:rag"), Side.parse(f"{run}:memorag"))
    (cell,) = result["cells"]
    assert cell["mode"] == "rag / memorag" and cell["questions"] == 2
    assert cell["unanswerable_a"]["points"] == 100.0 and cell["unanswerable_b"]["points"] == 0.0
    assert cell["answerable_a"]["points"] == 40.0 and cell["answerable_b"]["points"] == 80.0
    assert "SQuAD v2 by kind" in markdown(result)


def test_the_command_names_a_folder_without_records(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "eval" / "paired.py"), str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "examples.jsonl does not exist" in done.stderr


def test_sides_that_share_no_question_are_refused(tmp_path):
    a = write_run(tmp_path / "a", [record("q1", 1.0)])
    b = write_run(tmp_path / "b", [record("q2", 1.0)])
    with pytest.raises(ValueError, match="share no question"):
        compare(Side.parse(str(a)), Side.parse(str(b)))


def test_gold_evidence_recall_is_compared_where_every_record_has_it(tmp_path):
    def with_recall(example_id, score, recall, tokens, **kwargs):
        return {**record(example_id, score, **kwargs), "recall": {"recall@all": recall}, "evidence_tokens": tokens}

    run = write_run(tmp_path / "run", [
        with_recall("q1", 0.0, 0.5, 900), with_recall("q1", 1.0, 1.0, 1300, mode="memorag"),
        with_recall("q2", 1.0, 0.5, 1100), with_recall("q2", 1.0, 0.5, 1100, mode="memorag")])
    result = compare(Side.parse(f"{run}:rag"), Side.parse(f"{run}:memorag"))
    (cell,) = result["cells"]
    assert cell["recall_a"]["points"] == 50.0 and cell["recall_b"]["points"] == 75.0
    assert cell["recall_b_minus_a"]["points"] == 25.0
    assert (cell["evidence_tokens_a"], cell["evidence_tokens_b"]) == (1000, 1200)
    assert "| hotpotqa | 4096 | rag / memorag | 2 | 50.0 (50.0 to 50.0) | 75.0 (50.0 to 100.0) |" in markdown(result)
    without = write_run(tmp_path / "plain", [record("q1", 0.0), record("q1", 1.0, mode="memorag")])
    (cell,) = compare(Side.parse(f"{without}:rag"), Side.parse(f"{without}:memorag"))["cells"]
    assert "recall_a" not in cell  # a mode with no evidence recall has none to compare
