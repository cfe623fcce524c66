"""Two sets of harness records compared question by question: each side's score, the difference, who won.

A side is a run's `examples.jsonl` and, optionally, one mode of it (`DIR:MODE`), so the same
questions answered by two generators (two runs) or by two modes (one run) pair up. Records pair by
task, length and example id (and mode, when neither side names one). Per task x length (x mode):
each side's mean score x 100 with a 95% bootstrap interval over the questions, the paired
difference B - A with its interval, how many questions B answered better, worse and the same,
the share each side answered, and, for SQuAD v2 (`squad_v2_f1`), the F1 on the answerable
questions and the share of the unanswerable ones reported as no answer. Where every record of a cell
has a gold-evidence recall over all its evidence (`recall@all`), each side's mean recall x 100 and
B - A with their intervals too, and the evidence tokens each side read.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bootstrap import mean_interval


@dataclass(frozen=True)
class Side:
    folder: Path
    mode: str | None = None

    @classmethod
    def parse(cls, text: str) -> Side:
        """`DIR` or `DIR:MODE` (a mode name may itself hold a colon, e.g. `memorag:qa`)."""
        folder, _, mode = text.partition(":") if not Path(text).exists() else (text, "", "")
        return cls(Path(folder), mode or None)

    @property
    def label(self) -> str:
        return f"{self.folder.name}:{self.mode}" if self.mode else self.folder.name

    def records(self) -> dict[tuple, dict[str, Any]]:
        path = self.folder / "examples.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: name a folder an eval/run.py run wrote")
        keyed = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if self.mode is not None and record["mode"] != self.mode:
                continue
            mode = () if self.mode is not None else (record["mode"],)
            keyed[(record["task"], record["length"], *mode, record["example_id"])] = record
        return keyed


def _mean(records: list[dict[str, Any]], value) -> dict[str, float] | None:
    return mean_interval([100 * value(record) for record in records])


def _cell(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    a, b = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    cell = {
        "questions": len(pairs),
        "metric": a[0]["metric"],
        "a": _mean(a, lambda r: r["score"]), "b": _mean(b, lambda r: r["score"]),
        "b_minus_a": mean_interval([100 * (y["score"] - x["score"]) for x, y in pairs]),
        "b_better": sum(y["score"] > x["score"] for x, y in pairs),
        "b_worse": sum(y["score"] < x["score"] for x, y in pairs),
        "answered_a": round(100 * sum(bool(r["answered"]) for r in a) / len(a), 1),
        "answered_b": round(100 * sum(bool(r["answered"]) for r in b) / len(b), 1),
    }
    cell["same"] = cell["questions"] - cell["b_better"] - cell["b_worse"]
    if all((r.get("recall") or {}).get("recall@all") is not None for r in a + b):
        def recall(record):
            return record["recall"]["recall@all"]
        cell["recall_a"], cell["recall_b"] = _mean(a, recall), _mean(b, recall)
        cell["recall_b_minus_a"] = mean_interval([100 * (recall(y) - recall(x)) for x, y in pairs])
        cell["evidence_tokens_a"] = round(sum(r["evidence_tokens"] for r in a) / len(a))
        cell["evidence_tokens_b"] = round(sum(r["evidence_tokens"] for r in b) / len(b))
    if cell["metric"] == "squad_v2_f1":
        answerable = [pair for pair in pairs if pair[0]["answers"]]
        impossible = [pair for pair in pairs if not pair[0]["answers"]]
        for name, group in (("answerable", answerable), ("unanswerable", impossible)):
            cell[f"{name}_questions"] = len(group)
            cell[f"{name}_a"] = _mean([x for x, _ in group], lambda r: r["score"])
            cell[f"{name}_b"] = _mean([y for _, y in group], lambda r: r["score"])
    return cell


def compare(a: Side, b: Side) -> dict[str, Any]:
    """The comparison of `b` against `a` over the questions both answered (see the module's docstring)."""
    left, right = a.records(), b.records()
    common = sorted(set(left) & set(right), key=str)
    if not common:
        raise ValueError(f"{a.label} and {b.label} share no question (same tasks, lengths, seed and modes?)")
    cells: dict[tuple, list] = defaultdict(list)
    for key in common:
        cells[key[:-1]].append((left[key], right[key]))
    rows = [{"task": key[0], "length": key[1], "mode": key[2] if len(key) == 3 else f"{a.mode} / {b.mode}",
             **_cell(pairs)} for key, pairs in sorted(cells.items(), key=lambda item: str(item[0]))]
    return {"a": a.label, "b": b.label, "a_only": len(left) - len(common), "b_only": len(right) - len(common),
            "cells": rows}


def _interval(value: dict[str, float] | None) -> str:
    return "n/a" if value is None else f"{value['points']:.1f} ({value['low']:.1f} to {value['high']:.1f})"


def markdown(result: dict[str, Any]) -> str:
    """The comparison as a markdown table (intervals: 95% bootstrap over questions)."""
    a, b = result["a"], result["b"]
    lines = [f"A = `{a}`, B = `{b}`; score x 100 with its 95% bootstrap interval over questions.", "",
             "| task | length | mode | n | metric | A | B | B - A | B better / worse / same | answered % A / B |",
             "|---|---:|---|---:|---|---|---|---|---|---|"]
    for cell in result["cells"]:
        lines.append(f"| {cell['task']} | {cell['length']} | {cell['mode']} | {cell['questions']} | {cell['metric']} | "
                     f"{_interval(cell['a'])} | {_interval(cell['b'])} | {_interval(cell['b_minus_a'])} | "
                     f"{cell['b_better']} / {cell['b_worse']} / {cell['same']} | "
                     f"{cell['answered_a']} / {cell['answered_b']} |")
    recalled = [cell for cell in result["cells"] if "recall_a" in cell]
    if recalled:
        lines += ["", "Gold-evidence recall over all the evidence each side read (x 100, 95% bootstrap interval), "
                  "and the evidence tokens it read (mean).", "",
                  "| task | length | mode | n | recall A | recall B | B - A | evidence tokens A / B |",
                  "|---|---:|---|---:|---|---|---|---|"]
        for cell in recalled:
            lines.append(f"| {cell['task']} | {cell['length']} | {cell['mode']} | {cell['questions']} | "
                         f"{_interval(cell['recall_a'])} | {_interval(cell['recall_b'])} | "
                         f"{_interval(cell['recall_b_minus_a'])} | "
                         f"{cell['evidence_tokens_a']:,} / {cell['evidence_tokens_b']:,} |")
    squad = [cell for cell in result["cells"] if cell["metric"] == "squad_v2_f1"]
    if squad:
        lines += ["", "SQuAD v2 by kind: F1 on answerable questions; on unanswerable ones, the share reported "
                  "as no answer.", "", "| task | length | mode | answerable n | A | B | unanswerable n | A | B |",
                  "|---|---:|---|---:|---|---|---:|---|---|"]
        for cell in squad:
            lines.append(f"| {cell['task']} | {cell['length']} | {cell['mode']} | {cell['answerable_questions']} | "
                         f"{_interval(cell['answerable_a'])} | {_interval(cell['answerable_b'])} | "
                         f"{cell['unanswerable_questions']} | {_interval(cell['unanswerable_a'])} | "
                         f"{_interval(cell['unanswerable_b'])} |")
    return "\n".join(lines) + "\n"


def write(result: dict[str, Any], out: str | os.PathLike[str]) -> None:
    from memorag.storage.io import atomic_write_text

    out = Path(out)
    atomic_write_text(out.with_suffix(".json"), json.dumps(result, indent=1) + "\n")
    atomic_write_text(out.with_suffix(".md"), markdown(result))
