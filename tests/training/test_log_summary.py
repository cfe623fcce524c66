"""A run log's per-step metrics over step ranges: the means are the steps' means, the ranges are the steps asked
for, and a range or metric the log cannot give is refused with what it can."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memorag.training.log_summary import parse_range, summarize, summary_table

ROOT = Path(__file__).resolve().parents[2]


def _records(values):
    return [{"event": "train", "step": step, "loss": loss, "reward_accuracy": accuracy}
            for step, (loss, accuracy) in enumerate(values, start=1)]


def test_ranges_pick_the_steps_they_name():
    steps = [1, 2, 3, 4, 5]
    assert parse_range("all", steps) == (1, 5)
    assert parse_range("2-4", steps) == (2, 4)
    assert parse_range("last:2", steps) == (4, 5)
    assert parse_range("last:9", steps) == (1, 5)
    for bad in ("4-2", "last:0", "first:3", "1 to 4"):
        with pytest.raises(ValueError, match="step range"):
            parse_range(bad, steps)


def test_the_means_are_over_the_steps_of_each_range():
    records = _records([(1.0, 0.25), (0.5, 0.5), (0.25, 1.0), (0.75, 0.75)])
    records.append({"event": "checkpoint", "step": 4, "path": "x"})  # other events are not steps
    rows = summarize(records, ["loss", "reward_accuracy"], ["all", "1-2", "last:1"], percent=["reward_accuracy"])
    assert [(row["first_step"], row["last_step"], row["steps"]) for row in rows] == [(1, 4, 4), (1, 2, 2), (4, 4, 1)]
    assert rows[0]["loss"]["points"] == pytest.approx(0.62, abs=0.005)
    assert rows[1]["reward_accuracy"]["points"] == pytest.approx(37.5)
    assert rows[2]["loss"] == {**rows[2]["loss"], "points": 0.75, "low": 0.75, "high": 0.75}  # one step: no spread
    assert rows[0]["loss"]["low"] < rows[0]["loss"]["points"] < rows[0]["loss"]["high"]
    table = summary_table(rows, ["loss", "reward_accuracy"], ["reward_accuracy"])
    assert "| 1-2 | 2 | 0.75 (" in table and "reward_accuracy (%)" in table


def test_what_the_log_cannot_give_is_refused_with_what_it_has():
    records = _records([(1.0, 0.5), (0.5, 0.5)])
    with pytest.raises(ValueError, match="no train record logs margin; the log has: loss, reward_accuracy"):
        summarize(records, ["margin"], ["all"])
    with pytest.raises(ValueError, match="holds none of the logged steps"):
        summarize(records, ["loss"], ["7-9"])
    with pytest.raises(ValueError, match="no train records"):
        summarize([{"event": "end", "step": 2}], ["loss"], ["all"])


def test_the_script_writes_the_table_and_the_rows(tmp_path):
    log = tmp_path / "train_log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in _records([(0.7, 0.5), (0.6, 0.75)])) + '{"event": "tr')
    out = tmp_path / "summary"
    result = subprocess.run([sys.executable, str(ROOT / "train/log_summary.py"), "--log", str(log), "--metrics",
                             "loss", "reward_accuracy", "--percent", "reward_accuracy", "--out", str(out)],
                            capture_output=True, text=True, check=True)
    assert "| 1-2 | 2 | 0.65 (0.60 to 0.70) | 62.50 (50.00 to 75.00) |" in result.stdout
    written = out.with_suffix(".md").read_text()
    assert written.startswith("`python train/log_summary.py --log ") and written.endswith(result.stdout)
    assert json.loads(out.with_suffix(".json").read_text())["rows"][0]["steps"] == 2
    missing = subprocess.run([sys.executable, str(ROOT / "train/log_summary.py"), "--log", str(tmp_path / "none")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "no such file" in missing.stderr
