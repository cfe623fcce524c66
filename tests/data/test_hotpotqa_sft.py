"""HotpotQA clue-SFT data: targets from the rows, and never a row of the evaluation pool (>= 5,000)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memorag.prompting.prompts import CLUE_INSTRUCTION
from memorag.training.data.hotpotqa_sft import TRAIN_ROWS, build_samples, supporting_sentences
from memorag.training.data.sft import SFTSample

ROOT = Path(__file__).resolve().parents[2]


def fake_row(index: int, marker: str = "") -> dict:
    return {
        "_id": f"q{index}{marker}",
        "question": f"Which river{marker} flows past town {index}?",
        "answer": f"River {index}{marker}",
        "supporting_facts": [[f"Town {index}{marker}", 1], [f"River {index}{marker}", 0]],
        "context": [[f"Town {index}{marker}", [f"Town {index} is old.", f" It lies on River {index}{marker}."]],
                    [f"River {index}{marker}", [f"River {index}{marker} is long.", " It floods."]],
                    [f"Distractor {index}", [f"Nothing{marker} here."]]],
    }


class RecordingRows(list):
    """A list of rows that remembers every index read."""

    def __init__(self, rows):
        super().__init__(rows)
        self.read: set[int] = set()

    def __getitem__(self, index):
        self.read.add(index)
        return super().__getitem__(index)

    def __iter__(self):
        raise AssertionError("rows must be read by index, never iterated (that would touch the evaluation pool)")


def rows_with_a_poisoned_pool(extra=3):
    return RecordingRows([fake_row(i) for i in range(TRAIN_ROWS)] + [fake_row(i, "POISON") for i in range(extra)])


def test_no_row_of_the_evaluation_pool_is_read():
    rows = rows_with_a_poisoned_pool()
    samples = build_samples(rows, extra_rows=2, seed=3)
    assert max(rows.read) == TRAIN_ROWS - 1
    assert "POISON" not in json.dumps(samples)
    assert {s["row"] for s in samples} == set(range(TRAIN_ROWS))
    with pytest.raises(ValueError, match="evaluation pool"):
        build_samples(rows, num_rows=TRAIN_ROWS + 1)


def test_targets_come_from_the_row():
    row = fake_row(7)
    samples = build_samples([row, fake_row(8)], num_rows=1)
    by_kind = {s["task"]: s for s in samples}
    assert by_kind["hotpotqa-spans"]["target"] == "It lies on River 7.\nRiver 7 is long."
    assert by_kind["hotpotqa-spans"]["instruction"] == CLUE_INSTRUCTION["en"].format(question=row["question"])
    assert by_kind["hotpotqa-questions"]["target"] == ("What does the text say about Town 7?\n"
                                                       "What does the text say about River 7?")
    assert by_kind["hotpotqa-draft"]["target"] == by_kind["hotpotqa-answer"]["target"] == "River 7"
    context = by_kind["hotpotqa-answer"]["context"]
    assert "Town 7\nTown 7 is old. It lies on River 7." in context and "Town 8" not in context
    for sample in samples:
        SFTSample.from_record(sample)  # valid SFT samples


def test_extra_rows_lengthen_the_context_with_training_rows_only_and_are_seeded():
    rows = [fake_row(i) for i in range(10)]
    first = build_samples(rows, num_rows=10, extra_rows=2, kinds=["answer"], seed=1)
    again = build_samples(rows, num_rows=10, extra_rows=2, kinds=["answer"], seed=1)
    assert first == again
    assert all(s["context"].count("Distractor") == 3 for s in first)
    assert supporting_sentences(rows[0]) == ["It lies on River 0.", "River 0 is long."]


@pytest.mark.slow
def test_the_script_writes_sft_jsonl(tmp_path):
    data = tmp_path / "hotpotqa.json"
    data.write_text(json.dumps([fake_row(i) for i in range(5)]))
    out = tmp_path / "sft.jsonl"
    result = subprocess.run([sys.executable, str(ROOT / "train" / "build_hotpotqa_sft.py"), "--hotpotqa", str(data),
                             "--rows", "5", "--kinds", "spans", "draft", "--out", str(out)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's package, installed or not
                            capture_output=True, text=True, check=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 10 and "wrote 10 samples" in result.stdout
