"""benchmarks/row_linear.py end to end on the tiny shape: a row per row count and dtype, the JSON complete."""

from __future__ import annotations

import json

from benchmarks.row_linear import main


def test_the_row_linear_benchmark_times_the_three_ways_and_says_whether_rows_round_alone(tmp_path, capsys):
    out = tmp_path / "row-linear.json"
    assert main(["--shape", "tiny", "--rows", "1", "3", "6", "--dtypes", "float32", "bfloat16", "--repeats", "1",
                 "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    rows = {(row["dtype"], row["rows"]): row for row in record["rows"]}
    assert set(rows) == {(dtype, count) for dtype in ("float32", "bfloat16") for count in (1, 3, 6)}
    assert rows[("float32", 3)]["applies"] and not rows[("bfloat16", 3)]["applies"]
    for row in rows.values():
        assert row["per_row_ms"] > 0 and row["together_ms"] > 0 and row["fixed_ms"] > 0
        assert isinstance(row["each_row_its_own"], bool) and row["max_abs_difference_from_together"] < 5e-2
    assert rows[("float32", 6)]["each_row_its_own"]  # groups of four: the property the memory model rests on
    assert record["machine"]["threads"] == 2 and record["fixed_rows"] == 4
    assert "| float32 | 3 | yes |" in capsys.readouterr().out
