"""A benchmark run in this checkout and in another one (the baseline), alternating, and compared.

The other checkout is older code: it is driven through its own command line (its
`benchmarks/*.py` and the JSON they write), in a fresh process with the same interpreter and
`PYTHONPATH` set to its root, never imported into this process. Rounds alternate the two
trees, the baseline first in rounds 1, 3, ... and this tree first in rounds 2, 4, ..., so that a busy
spell on a shared machine falls on both alike. Ratios are before / after: above 1, this tree
(after) is faster.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

BEFORE, AFTER = "before", "after"
T = TypeVar("T")
Runner = Callable[..., subprocess.CompletedProcess]


def round_order(round_index: int) -> tuple[str, str]:
    """The trees in the order they run in round `round_index` (from 0): the baseline (before) first in
    rounds 0, 2, ..., this tree (after) first in rounds 1, 3, ..."""
    return (BEFORE, AFTER) if round_index % 2 == 0 else (AFTER, BEFORE)


def alternate(rounds: int, measure: Callable[[str, int], T]) -> dict[str, list[T]]:
    """`measure(label, round_index)` for both trees in each of `rounds` rounds, in `round_order`."""
    results: dict[str, list[T]] = {BEFORE: [], AFTER: []}
    for round_index in range(rounds):
        for label in round_order(round_index):
            results[label].append(measure(label, round_index))
    return results


def compare_seconds(seconds: dict[str, list[float]]) -> dict:
    """Best and median seconds of each tree, and before / after of both (above 1: after is faster)."""
    best = {label: min(values) for label, values in seconds.items()}
    median = {label: statistics.median(values) for label, values in seconds.items()}
    return {"seconds": seconds, "best_s": best, "median_s": median,
            "before_over_after": {"best": best[BEFORE] / best[AFTER], "median": median[BEFORE] / median[AFTER]}}


def without_options(argv: Sequence[str], dropped: dict[str, int]) -> list[str]:
    """`argv` less each option named in `dropped` and the number of values it takes (`--x v` or `--x=v`)."""
    kept: list[str] = []
    skip = 0
    for item in argv:
        if skip:
            skip -= 1
        elif item in dropped:
            skip = dropped[item]
        elif item.split("=", 1)[0] not in dropped:
            kept.append(item)
    return kept


def script_help(tree: Path, script: str, python: str = sys.executable) -> str:
    """What `python tree/script --help` prints, run as `run_script` runs it (importing `memorag` from `tree`)."""
    completed = subprocess.run([python, str(Path(tree) / script), "--help"], capture_output=True, text=True,
                               check=False, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=str(tree))
    if completed.returncode != 0:
        raise SystemExit(f"{script} --help failed in {tree} (exit {completed.returncode}):\n{completed.stderr[-2000:]}")
    return completed.stdout


def options_for_tree(options: Sequence[str], help_text: str, renamed: dict[str, str]) -> list[str]:
    """`options` as a script whose `--help` prints `help_text` spells them: an option this checkout calls NEW
    (a key of `renamed`) that the other script does not offer, while it offers OLD (`renamed[NEW]`, its
    earlier name for the same option), is passed as OLD (`--new v` and `--new=v` alike); the rest as given."""
    offered = set(re.findall(r"(?<![\w-])(--[A-Za-z][\w-]*)", help_text))
    spelled = {new: old for new, old in renamed.items() if new not in offered and old in offered}
    out = []
    for item in options:
        name, equals, value = item.partition("=")
        out.append(spelled[name] + equals + value if name in spelled else item)
    return out


def revision(tree: Path) -> str:
    """The checkout's commit (`git describe --always --dirty`), or "unknown"."""
    completed = subprocess.run(["git", "-C", str(tree), "describe", "--always", "--dirty"], capture_output=True,
                               text=True, check=False)
    return completed.stdout.strip() or "unknown"


def run_script(tree: Path, script: str, options: Sequence[str], json_option: str | None = None,
               keep: Path | None = None, python: str = sys.executable, runner: Runner = subprocess.run) -> dict:
    """`python tree/script options` in a fresh process importing `memorag` from `tree`; its JSON result.

    With `json_option` (e.g. "--json") the script is told to write its JSON to a temporary file,
    which is read back; without, the last line of its stdout is the JSON. With `keep` (a path
    without suffix) the raw output stays beside it: `keep.txt` (the command and stdout and
    stderr) and `keep.json`.
    """
    with tempfile.TemporaryDirectory() as folder:
        written = Path(folder) / "result.json"
        command = [python, str(Path(tree) / script), *options]
        if json_option:
            command += [json_option, str(written)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        completed = runner(command, capture_output=True, text=True, check=False, env=env, cwd=str(tree))
        if keep is not None:
            keep.parent.mkdir(parents=True, exist_ok=True)
            keep.with_suffix(".txt").write_text(f"$ PYTHONPATH={tree} {' '.join(command)}\n{completed.stdout}"
                                                f"{completed.stderr}", encoding="utf-8")
        if completed.returncode != 0:
            print(completed.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"{script} failed in {tree} (exit {completed.returncode})")
        text = written.read_text(encoding="utf-8") if json_option else completed.stdout.strip().splitlines()[-1]
    if keep is not None:
        keep.with_suffix(".json").write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return json.loads(text)


def run_until_line(tree: Path, script: str, options: Sequence[str], pattern: re.Pattern[str],
                   keep: Path | None = None, python: str = sys.executable) -> re.Match[str]:
    """`python tree/script options` in a fresh process importing `memorag` from `tree`, read line by line
    (stdout and stderr together) until a line matches `pattern`; then that process is stopped.

    For a script whose figure is printed long before it ends (the clue stage's first decoding,
    before the others). With `keep` (a path without suffix) `keep.txt` holds the command and
    everything read.
    """
    command = [python, str(Path(tree) / script), *options]
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}
    lines: list[str] = []
    match = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=str(tree)) as process:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = pattern.search(line)
            if match:
                process.terminate()
                break
        process.stdout.close()
        returncode = process.wait()
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        stopped = f"[stopped after the line matching {pattern.pattern!r}]\n" if match else ""
        keep.with_suffix(".txt").write_text(f"$ PYTHONPATH={tree} {' '.join(command)}\n{''.join(lines)}{stopped}",
                                            encoding="utf-8")
    if match is None:
        print("".join(lines)[-2000:], file=sys.stderr)
        raise SystemExit(f"{script} in {tree} ended (exit {returncode}) without a line matching {pattern.pattern!r}")
    return match


def _version(distribution: str) -> str | None:
    """The installed version of `distribution` in this interpreter (both trees run with it), or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def kept_output(out: Path, label: str, round_index: int) -> Path:
    """Where a run's raw output is written while it runs: beside the comparison's JSON `out`, named by
    tree and round (then gathered into `runs_file(out)`)."""
    return out.with_name(f"{out.stem}-{label}-round{round_index + 1}")


def runs_file(out: Path) -> Path:
    """The one file that keeps every run's raw output of the comparison `out`, run by run."""
    return out.with_name(f"{out.stem}-runs.txt")


def gather_run(keep: Path, runs: Path, title: str) -> None:
    """Append the raw output one run kept (`keep` with .txt or .json) to `runs` under `title`, and remove it."""
    for kept in (keep.with_suffix(".txt"), keep.with_suffix(".json")):
        if kept.exists():
            with runs.open("a", encoding="utf-8") as gathered:
                gathered.write(f"## {title} ({kept.suffix[1:]})\n{kept.read_text(encoding='utf-8').rstrip()}\n\n")
            kept.unlink()


def compare_runs(trees: dict[str, Path], measure: Callable[[Path, Path], dict[str, float]], rounds: int, out: Path,
                 command: dict) -> dict:
    """`measure(tree, keep)` (one run in a fresh process: {cell: seconds}) in both `trees`
    ({BEFORE: the baseline, AFTER: this checkout}), alternating, `rounds` rounds.

    Writes the comparison (`command`: what ran, every run's seconds, best, median and before /
    after per cell, both revisions, the machine with its load before and after) to `out`, every
    run's raw output beside it in one file (`runs_file`), prints a table, and returns the comparison.
    """
    from memorag.benchmarking.machine import load_average, machine_record

    load_before = load_average()
    trees = {label: Path(tree).resolve() for label, tree in trees.items()}

    runs_path = runs_file(out)
    runs_path.parent.mkdir(parents=True, exist_ok=True)
    runs_path.write_text("", encoding="utf-8")

    def one_run(label: str, round_index: int) -> dict[str, float]:
        keep = kept_output(out, label, round_index)
        seconds = measure(trees[label], keep)
        gather_run(keep, runs_path, f"{label}, round {round_index + 1}")
        print(f"round {round_index + 1}: {label}: "
              + ", ".join(f"{cell} {value:.2f} s" for cell, value in seconds.items()), flush=True)
        return seconds

    runs = alternate(rounds, one_run)
    cells = {cell: compare_seconds({label: [run[cell] for run in runs[label]] for label in (BEFORE, AFTER)})
             for cell in runs[BEFORE][0]}
    comparison = {"command": command, "python": sys.executable, "transformers": _version("transformers"),
                  "rounds": rounds,
                  "order": [list(round_order(index)) for index in range(rounds)],
                  "trees": {label: {"path": str(tree), "revision": revision(tree)} for label, tree in trees.items()},
                  "cells": cells, "machine": machine_record(load_before),
                  "note": "before / after above 1: after (this checkout) is faster"}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(comparison, indent=2) + "\n", encoding="utf-8")
    print(f"\nbefore = {trees[BEFORE]} ({comparison['trees'][BEFORE]['revision']}), "
          f"after = {trees[AFTER]} ({comparison['trees'][AFTER]['revision']}), {rounds} rounds, alternating")
    print(comparison_table(cells))
    print(f"load average before {load_before}, after {comparison['machine']['load_average_after']}\nwrote {out}")
    return comparison


def comparison_table(cells: dict[str, dict]) -> str:
    """A markdown table of `compare_seconds` results by cell."""
    lines = ["| cell | before median s | after median s | before / after (median) | before best s | after best s "
             "| before / after (best) |", "|---|---|---|---|---|---|---|"]
    for cell, row in cells.items():
        median, best, ratio = row["median_s"], row["best_s"], row["before_over_after"]
        lines.append(f"| {cell} | {median[BEFORE]:.2f} | {median[AFTER]:.2f} | {ratio['median']:.3f} | "
                     f"{best[BEFORE]:.2f} | {best[AFTER]:.2f} | {ratio['best']:.3f} |")
    return "\n".join(lines)
