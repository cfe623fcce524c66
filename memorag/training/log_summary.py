"""A run's per-step metrics summarized over ranges of its steps: each metric's mean over the steps of a range
with a 95% bootstrap interval (the steps resampled), read from the run's `train_log.jsonl`.

A range is `all`, `FIRST-LAST` (steps, both included) or `last:N` (the run's last N steps). The interval treats
the steps as the units: a step's figure is the mean over its own pairs or tokens.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memorag.evaluation.bootstrap import mean_interval

_RANGE = re.compile(r"^(?:(all)|(\d+)-(\d+)|last:(\d+))$")


def parse_range(spec: str, steps: Sequence[int]) -> tuple[int, int]:
    """The first and last step of the range `spec` over a run whose logged steps are `steps`."""
    match = _RANGE.match(spec.strip())
    if match is None:
        raise ValueError(f"step range {spec!r}: write all, FIRST-LAST (e.g. 1-140) or last:N (e.g. last:50)")
    if match[1]:
        return min(steps), max(steps)
    if match[4]:
        count = int(match[4])
        if count < 1:
            raise ValueError(f"step range {spec!r}: N must be at least 1")
        return sorted(steps)[-min(count, len(steps))], max(steps)
    first, last = int(match[2]), int(match[3])
    if first > last:
        raise ValueError(f"step range {spec!r}: the first step is after the last")
    return first, last


def summarize(records: Sequence[dict[str, Any]], metrics: Sequence[str], ranges: Sequence[str],
              percent: Sequence[str] = (), seed: int = 0) -> list[dict[str, Any]]:
    """One row a range: its steps and, for each metric, the mean over the range's steps with its interval
    (metrics named in `percent` multiplied by 100 first). `records` are the log's `train` records."""
    by_step = {int(record["step"]): record for record in records if record.get("event", "train") == "train"}
    if not by_step:
        raise ValueError("the log has no train records: summarize a run that has taken a step")
    missing = [name for name in metrics if not any(name in record for record in by_step.values())]
    if missing:
        known = sorted({key for record in by_step.values() for key in record if key not in ("event", "step")})
        raise ValueError(f"no train record logs {', '.join(missing)}; the log has: {', '.join(known)}")
    rows = []
    for spec in ranges:
        first, last = parse_range(spec, list(by_step))
        steps = [step for step in sorted(by_step) if first <= step <= last]
        if not steps:
            raise ValueError(f"step range {spec!r} holds none of the logged steps ({min(by_step)} to {max(by_step)})")
        row: dict[str, Any] = {"range": spec, "first_step": steps[0], "last_step": steps[-1], "steps": len(steps)}
        for name in metrics:
            scale = 100.0 if name in percent else 1.0
            values = [scale * float(by_step[step][name]) for step in steps if by_step[step].get(name) is not None]
            row[name] = mean_interval(values, seed=seed)
        rows.append(row)
    return rows


def summary_table(rows: Sequence[dict[str, Any]], metrics: Sequence[str], percent: Sequence[str] = ()) -> str:
    """The rows as a Markdown table: a column a metric, `mean (low to high)`."""
    header = ["steps", "count"] + [f"{name} (%)" if name in percent else name for name in metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [f"{row['first_step']}-{row['last_step']}", str(row["steps"])]
        for name in metrics:
            value = row[name]
            cells.append("-" if value is None else f"{value['points']:.2f} ({value['low']:.2f} to {value['high']:.2f})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
