"""memorag/benchmarking/rounds.py: a decoding timed round by round, on a tiny random memory model."""

from __future__ import annotations

import pytest
import torch

from memorag.benchmarking.device import BenchDevice
from memorag.benchmarking.rounds import (
    KINDS,
    Round,
    rounds_record,
    rounds_summary,
    rounds_table,
    timed_rounds,
)
from tests.memory.conftest import random_ids, tiny_memory_model


def test_every_round_of_a_batch_decoding_is_timed_and_the_replies_do_not_change():
    model = tiny_memory_model(window=16, ratios=[4])
    with torch.no_grad():
        memory = model.memorize(random_ids(40)[0].tolist(), show_progress=False)
        prompts = [random_ids(5, seed=1)[0].tolist(), random_ids(7, seed=2)[0].tolist()]
        untimed = model.generate_ids_batch(prompts, memory, max_new_tokens=10, min_new_tokens=10)
        with timed_rounds(model, BenchDevice("cpu")) as rounds:
            timed = model.generate_ids_batch(prompts, memory, max_new_tokens=10, min_new_tokens=10)
    assert timed == untimed
    assert "step" not in vars(model)  # the class's own step is back
    first = rounds[0]
    assert (first.kind, first.sequences, first.raw_rows) == ("prefill", 2, 12)
    decoding = rounds[1:]
    # ten new tokens: the first comes with the prefill, each later one is a round of one raw row per sequence
    assert len(decoding) == 9 and all(one.raw_rows == one.sequences == 2 for one in decoding)
    # a memory row follows every 4th raw token of a window: some rounds bring one, others none
    kinds = {one.kind for one in decoding}
    assert kinds == {"decoding, raw rows only", "decoding, with memory rows"}
    assert all((one.memory_rows > 0) == (one.kind == "decoding, with memory rows") for one in decoding)
    assert all(one.seconds > 0 for one in rounds)
    assert rounds_record(rounds)[0] == {"sequences": 2, "raw_rows": 12, "memory_rows": first.memory_rows,
                                        "seconds": first.seconds}


def test_the_summary_splits_the_total_by_kind_and_keeps_the_rest_outside():
    rounds = [Round(3, 179, 40, 0.8), Round(3, 3, 0, 0.1), Round(3, 3, 0, 0.3), Round(3, 3, 1, 0.2)]
    summary = {row["kind"]: row for row in rounds_summary(rounds, total_s=2.0)}
    assert summary["prefill"]["rounds"] == 1 and summary["prefill"]["seconds"] == pytest.approx(0.8)
    assert summary["decoding, raw rows only"]["median_ms"] == pytest.approx(200.0)
    assert summary["decoding, with memory rows"]["share"] == pytest.approx(0.1)
    outside = summary["outside the rounds (LM head, generate)"]
    assert outside["seconds"] == pytest.approx(0.6) and outside["rounds"] is None
    assert sum(row["share"] for row in summary.values()) == pytest.approx(1.0)
    table = rounds_table(rounds, 2.0)
    assert all(f"| {kind} |" in table for kind in KINDS) and "| all | 4 | 2.000 |" in table
