"""memorag/benchmarking/baseline.py: the order in which two checkouts run, the before / after arithmetic,
and a whole comparison with a fake benchmark script in two fake checkouts (real processes)."""

from __future__ import annotations

import json
import re
import sys
import time

import pytest

from memorag.benchmarking.baseline import (
    AFTER,
    BEFORE,
    alternate,
    compare_runs,
    compare_seconds,
    options_for_tree,
    round_order,
    run_script,
    run_until_line,
    script_help,
    without_options,
)

FAKE_BENCHMARK = '''"""A fake benchmark: logs which checkout ran it, writes that checkout's fixed seconds as JSON."""
import json, os, sys
from pathlib import Path
tree = Path.cwd()
with open(os.environ["FAKE_BENCHMARK_LOG"], "a") as log:
    log.write(f"{tree.name} {os.environ['PYTHONPATH'] == str(tree)} {' '.join(sys.argv[1:-2])}\\n")
seconds, *rest = json.loads((tree / "fake_seconds.json").read_text())
(tree / "fake_seconds.json").write_text(json.dumps(rest))
Path(sys.argv[-1]).write_text(json.dumps({"rows": [{"cell": "fake", "seconds": seconds}]}))
print("fake benchmark done")
'''


def test_rounds_alternate_which_checkout_runs_first():
    calls = []
    results = alternate(4, lambda label, round_index: calls.append((label, round_index)) or round_index)
    assert calls == [(BEFORE, 0), (AFTER, 0), (AFTER, 1), (BEFORE, 1), (BEFORE, 2), (AFTER, 2), (AFTER, 3), (BEFORE, 3)]
    assert results == {BEFORE: [0, 1, 2, 3], AFTER: [0, 1, 2, 3]}
    assert [round_order(index)[0] for index in range(3)] == [BEFORE, AFTER, BEFORE]


def test_best_median_and_before_over_after():
    result = compare_seconds({BEFORE: [3.0, 5.0, 4.0], AFTER: [2.0, 1.0, 4.0]})
    assert result["best_s"] == {BEFORE: 3.0, AFTER: 1.0}
    assert result["median_s"] == {BEFORE: 4.0, AFTER: 2.0}
    assert result["before_over_after"] == {"best": pytest.approx(3.0), "median": pytest.approx(2.0)}


def test_options_for_the_runs_drop_the_comparison_own():
    argv = ["--quick", "--baseline", "/tmp/x", "--rounds=3", "--json", "out.json", "--clue-only", "--steps", "2"]
    assert without_options(argv, {"--baseline": 1, "--rounds": 1, "--json": 1, "--clue-only": 0}) == [
        "--quick", "--steps", "2"]


OLD_HELP = """usage: train.py [-h] [--quick] [--precisions {bf16,fp32} [{bf16,fp32} ...]] [--windows WINDOWS ...]
  --precisions {bf16,fp32} [{bf16,fp32} ...]
  --steps STEPS         timed steps per cell
"""


def test_an_option_goes_to_an_older_script_under_its_earlier_name():
    renamed = {"--dtype": "--precisions"}
    options = ["--dtype", "fp32", "bf16", "--steps", "2", "--dtype=fp32", "--dtype-x", "1"]
    assert options_for_tree(options, OLD_HELP, renamed) == [
        "--precisions", "fp32", "bf16", "--steps", "2", "--precisions=fp32", "--dtype-x", "1"]
    newer = OLD_HELP.replace("--precisions", "--dtype")
    assert options_for_tree(options, newer, renamed) == options  # it offers the new name: unchanged
    assert options_for_tree(options, OLD_HELP + "  --dtype DTYPE\n", renamed) == options  # it offers both
    assert options_for_tree(options, "usage: train.py [-h] [--steps STEPS]\n", renamed) == options  # neither


def test_a_script_help_is_read_from_its_own_checkout(tmp_path):
    tree = tmp_path / "fake-old"
    tree.mkdir()
    (tree / "fake_benchmark.py").write_text(
        "import argparse, os\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--precisions', nargs='+')\nparser.add_argument('--tree')\n"
        "print(os.environ['PYTHONPATH'])\nparser.parse_args()\n")
    text = script_help(tree, "fake_benchmark.py")
    assert text.startswith(str(tree)) and "--precisions" in text
    assert options_for_tree(["--dtype", "fp32"], text, {"--dtype": "--precisions"}) == ["--precisions", "fp32"]
    (tree / "broken.py").write_text("raise SystemExit(4)\n")
    with pytest.raises(SystemExit, match="exit 4"):
        script_help(tree, "broken.py")


def test_a_comparison_runs_each_checkout_in_its_own_process(tmp_path, monkeypatch):
    log = tmp_path / "fake_benchmark.log"
    monkeypatch.setenv("FAKE_BENCHMARK_LOG", str(log))
    trees = {}
    for label, seconds in ((BEFORE, [6.0, 2.0, 4.0]), (AFTER, [1.0, 3.0, 2.0])):
        tree = tmp_path / f"fake-{label}"
        tree.mkdir()
        (tree / "fake_benchmark.py").write_text(FAKE_BENCHMARK)
        (tree / "fake_seconds.json").write_text(json.dumps(seconds))
        trees[label] = tree
    out = tmp_path / "results" / "fake-vs-baseline.json"

    def measure(tree, keep):
        result = run_script(tree, "fake_benchmark.py", ["--quick"], json_option="--json", keep=keep)
        return {row["cell"]: row["seconds"] for row in result["rows"]}

    comparison = compare_runs(trees, measure, 3, out, {"script": "fake_benchmark.py"})

    assert log.read_text().splitlines() == [f"fake-{label} True --quick" for label in
                                            (BEFORE, AFTER, AFTER, BEFORE, BEFORE, AFTER)]
    cell = comparison["cells"]["fake"]
    assert cell["seconds"] == {BEFORE: [6.0, 2.0, 4.0], AFTER: [1.0, 3.0, 2.0]}
    assert cell["before_over_after"] == {"best": pytest.approx(2.0), "median": pytest.approx(2.0)}
    assert json.loads(out.read_text())["cells"] == comparison["cells"]
    assert comparison["order"] == [[BEFORE, AFTER], [AFTER, BEFORE], [BEFORE, AFTER]]
    assert comparison["machine"]["load_average_before"] is not None and comparison["transformers"]
    # every run's raw output in one file beside the comparison, run by run, and no file per run
    assert sorted(path.name for path in out.parent.iterdir()) == ["fake-vs-baseline-runs.txt", "fake-vs-baseline.json"]
    runs = (out.parent / "fake-vs-baseline-runs.txt").read_text().split("## ")[1:]
    assert [run.split("\n", 1)[0] for run in runs] == [
        f"{label}, round {number} ({kind})" for number, order in enumerate(comparison["order"], start=1)
        for label in order for kind in ("txt", "json")]
    after_round2 = {run.split("\n", 1)[0]: run.split("\n", 1)[1] for run in runs}
    assert json.loads(after_round2[f"{AFTER}, round 2 (json)"])["rows"][0]["seconds"] == 3.0
    assert "fake benchmark done" in after_round2[f"{AFTER}, round 2 (txt)"]
    assert sys.executable in after_round2[f"{AFTER}, round 2 (txt)"]


def test_a_failing_run_stops_the_comparison(tmp_path):
    tree = tmp_path / "fake-broken"
    tree.mkdir()
    (tree / "fake_benchmark.py").write_text("raise SystemExit(3)\n")
    with pytest.raises(SystemExit, match="exit 3"):
        run_script(tree, "fake_benchmark.py", [], json_option="--json")
    with pytest.raises(SystemExit, match="exit 3"):
        run_until_line(tree, "fake_benchmark.py", [], re.compile("never printed"))


def test_a_run_is_stopped_once_its_figure_is_printed(tmp_path):
    tree = tmp_path / "fake-slow"
    tree.mkdir()
    (tree / "fake_benchmark.py").write_text(
        "import sys, time\nprint('warming up')\nprint('round 1: batch: 12.5 s', flush=True)\n"
        "time.sleep(120)\nprint('never reached')\n")
    started = time.perf_counter()
    found = run_until_line(tree, "fake_benchmark.py", [], re.compile(r"round 1: batch: ([0-9.]+) s$"),
                           keep=tmp_path / "kept")
    assert found.group(1) == "12.5" and time.perf_counter() - started < 60
    kept = (tmp_path / "kept.txt").read_text()
    assert "warming up" in kept and "[stopped after the line" in kept and "never reached" not in kept
