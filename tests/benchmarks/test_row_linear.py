"""benchmarks/row_linear.py end to end on the tiny shape: a row per row count and dtype, the JSON complete."""

from __future__ import annotations

import json

from benchmarks.row_linear import main


def test_the_row_linear_benchmark_times_both_ways_and_says_where_the_split_applies(tmp_path, capsys):
    out = tmp_path / "row-linear.json"
    assert main(["--shape", "tiny", "--rows", "1", "6", "--dtypes", "float32", "bfloat16", "--repeats", "1",
                 "--per-matrix", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    rows = {(row["dtype"], row["rows"]): row for row in record["rows"]}
    assert set(rows) == {("float32", 1), ("float32", 6), ("bfloat16", 1), ("bfloat16", 6)}
    assert rows[("float32", 1)]["applies"] and not rows[("float32", 6)]["applies"]
    assert not rows[("bfloat16", 1)]["applies"]
    for row in rows.values():
        assert row["plain_ms"] > 0 and row["split_ms"] > 0 and isinstance(row["bit_equal"], bool)
        assert row["max_abs_difference"] < 1e-2
    assert record["machine"]["threads"] == 2 and record["max_rows"] == 4
    # each distinct weight shape of the tiny model once, split however small (none is large enough to split)
    assert [matrix["weight"] for matrix in record["matrices"]] == [[64, 64], [32, 64], [128, 64], [64, 128], [512, 64]]
    assert not any(matrix["memory_model_splits"] for matrix in record["matrices"])
    assert all(matrix["split_ms"] > 0 and isinstance(matrix["bit_equal"], bool) for matrix in record["matrices"])
    assert "| float32 | 1 | yes |" in capsys.readouterr().out
