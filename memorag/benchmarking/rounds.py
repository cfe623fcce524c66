"""Where a decoding's time goes, round by round: every `MemoryModel.step` call timed and sorted by kind.

A decoding (one prompt or an exact batch of several; not the compiled batch, whose rounds the decoding
driver runs itself over one block of caches) runs as rounds of `MemoryModel.step`:
first the prompts' rows (several raw rows per sequence: "prefill"), then one round per new
token, with one raw row per sequence, or also a memory-token row for the sequences that
reach their r-th token ("decoding, with memory rows"; these project the memory rows with
the memory's own projections and attend per sequence). What a decoding spends outside the
rounds is the LM head over the last rows and `generate`'s own bookkeeping.

    with timed_rounds(model, device) as rounds:
        model.generate_ids_batch(prompts, memory, ...)
    print(rounds_table(rounds, total_s))
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memorag.benchmarking.device import BenchDevice

KINDS = ("prefill", "decoding, raw rows only", "decoding, with memory rows")


@dataclass(frozen=True)
class Round:
    """One `MemoryModel.step` call: how many sequences, raw rows and memory rows it read, and its seconds."""

    sequences: int
    raw_rows: int
    memory_rows: int
    seconds: float

    @property
    def kind(self) -> str:
        if self.raw_rows > self.sequences:
            return KINDS[0]
        return KINDS[2] if self.memory_rows else KINDS[1]


@contextmanager
def timed_rounds(model: Any, device: BenchDevice) -> Iterator[list[Round]]:
    """Inside: every `model.step` call is timed (between device synchronizations) and appended to the
    yielded list as a `Round`. The model's own `step` is back when the block ends."""
    rounds: list[Round] = []
    step = model.step

    def timed_step(inputs, *args, **kwargs):
        seconds, outputs = device.seconds(lambda: step(inputs, *args, **kwargs))
        rounds.append(Round(sequences=len(inputs), raw_rows=sum(item.piece.num_raw for item in inputs),
                            memory_rows=sum(item.piece.num_memory for item in inputs), seconds=seconds))
        return outputs

    model.step = timed_step  # an instance attribute over the class's method
    try:
        yield rounds
    finally:
        del model.step


def rounds_summary(rounds: list[Round], total_s: float) -> list[dict[str, Any]]:
    """Per kind of round (and "outside the rounds": the LM head, `generate`): count, seconds, median ms per
    round, share of `total_s`."""
    summary = []
    for kind in KINDS:
        seconds = [one.seconds for one in rounds if one.kind == kind]
        if seconds:
            summary.append({"kind": kind, "rounds": len(seconds), "seconds": sum(seconds),
                            "median_ms": 1e3 * statistics.median(seconds), "share": sum(seconds) / total_s})
    outside = total_s - sum(one.seconds for one in rounds)
    summary.append({"kind": "outside the rounds (LM head, generate)", "rounds": None, "seconds": outside,
                    "median_ms": None, "share": outside / total_s})
    return summary


def rounds_table(rounds: list[Round], total_s: float) -> str:
    """`rounds_summary` as a markdown table."""
    lines = ["| rounds of | count | seconds | median ms per round | share |", "|---|---:|---:|---:|---:|"]
    for row in rounds_summary(rounds, total_s):
        count = "" if row["rounds"] is None else str(row["rounds"])
        median = "" if row["median_ms"] is None else f"{row['median_ms']:.1f}"
        lines.append(f"| {row['kind']} | {count} | {row['seconds']:.3f} | {median} | {row['share']:.1%} |")
    lines.append(f"| all | {len(rounds)} | {total_s:.3f} | | 100.0% |")
    return "\n".join(lines)


def rounds_record(rounds: list[Round]) -> list[dict[str, Any]]:
    """Every round as a JSON-ready dict, in order."""
    return [asdict(one) for one in rounds]
