"""Tuning the reader's refusal margin (memorag/training/refusal_tuning.py): one pass of two replies per sample
gives every margin's reply exactly, margins are scored per task with the harness's metrics, and a sample
without its question is refused.

A tiny random Llama and a word-level tokenizer (fakes) stand in for the reader; its "fixed reply" is aimed at
the token the fake opens with, so that the margin changes its replies.
"""

from __future__ import annotations

import pytest

from memorag.generation import LocalGenerator
from memorag.training.refusal_tuning import (
    SampleReplies,
    best_row,
    candidate_margins,
    margin_rows,
    read_sample,
    separation,
)
from tests.memory.conftest import tiny_base
from tests.memory.test_persistence import tiny_tokenizer, word


def _record(seed: int) -> dict:
    prompt = " ".join(word(2 + (i * seed) % 90) for i in range(10))
    return {"prompt": prompt, "system": None, "question": prompt, "answers": [word(7)], "metric": "qa_f1_score",
            "task": "hotpotqa_dev_longctx", "id": f"q{seed}"}


def test_one_pass_gives_the_reply_of_every_margin():
    generator = LocalGenerator(tiny_base("llama", seed=5), tiny_tokenizer(), repetition_penalty=1.1)
    record = _record(7)
    opening = generator.generate(record["prompt"], max_new_tokens=5).split()[0]
    generator.refusal_token = lambda: generator.tokenizer.convert_tokens_to_ids(opening)  # aim the fake's reply
    replies = read_sample(generator, record, max_new_tokens=5)
    assert replies.gap > 0 and replies.free != replies.forced and generator.refusal_margin == 0
    for margin in (0.0, replies.gap / 2, replies.gap * 2):
        generator.refusal_margin = margin
        assert replies.reply(margin) == generator.generate(record["prompt"], max_new_tokens=5)
    with pytest.raises(ValueError, match="lacks question"):
        read_sample(generator, {k: v for k, v in record.items() if k != "question"}, 5)


def test_margins_are_scored_per_task_and_the_best_is_the_smallest_of_the_highest():
    hotpot = dict(task="hotpotqa_dev_longctx", metric="qa_f1_score", question="Who?", answers=("Ada",))
    squad = dict(task="squad_v2_dev_longctx", metric="squad_v2_f1", question="Who?")
    replies = [
        SampleReplies("a", **hotpot, gap=2.0, free="Not in the evidence.", forced="Ada"),
        SampleReplies("b", **hotpot, gap=-1.0, free="Bob", forced="Bob"),
        SampleReplies("c", **squad, answers=(), gap=1.0, free="Not in the evidence.", forced="Ada"),
        SampleReplies("d", **squad, answers=("Ada",), gap=0.5, free="Not in the evidence.", forced="Ada"),
    ]
    margins = candidate_margins(replies)
    assert margins == [0.0, pytest.approx(0.501), pytest.approx(1.001), pytest.approx(2.001)]
    rows = margin_rows(replies, margins)
    assert [row["hotpotqa_dev_longctx"]["score"] for row in rows] == [0.0, 0.0, 0.0, 50.0]
    assert [row["squad_v2_dev_longctx"]["score"] for row in rows] == [50.0, 100.0, 50.0, 50.0]
    assert [row["squad_v2_dev_longctx"]["no_answer"] for row in rows] == [2, 1, 0, 0]
    assert [row["objective"] for row in rows] == [25.0, 50.0, 25.0, 50.0]
    assert best_row(rows)["margin"] == pytest.approx(0.501)
    alone = margin_rows(replies, margins, objective="hotpotqa_dev_longctx")
    assert [row["objective"] for row in alone] == [0.0, 0.0, 0.0, 50.0]
    assert best_row(alone)["margin"] == pytest.approx(2.001)
    with pytest.raises(ValueError, match="choose mean or one of"):
        margin_rows(replies, margins, objective="squad")


def test_separation_is_the_chance_that_a_sample_lacking_the_answer_has_the_larger_lead():
    common = dict(metric="qa_f1_score", question="Who?", answers=("Ada",), free="x", forced="x")
    replies = [SampleReplies("a", "hotpotqa_dev_longctx", gap=2.0, why="not in evidence", **common),
               SampleReplies("b", "hotpotqa_dev_longctx", gap=1.0, why="answer", **common),
               SampleReplies("c", "hotpotqa_dev_longctx", gap=-1.0, why="answer", **common),
               SampleReplies("d", "squad_v2_dev_longctx", gap=0.0, why="unanswerable", **common),
               SampleReplies("e", "squad_v2_dev_longctx", gap=0.0, why="answer", **common),
               SampleReplies("f", "squad_v2_dev_longctx", gap=5.0, why="", **common)]  # no target: left out
    result = separation(replies)
    assert result["hotpotqa_dev_longctx"] == {"auc": 1.0, "lacking": 1, "holding": 2}
    assert result["squad_v2_dev_longctx"] == {"auc": 0.5, "lacking": 1, "holding": 1}  # a tie counts half
    assert result["all"] == {"auc": 0.75, "lacking": 2, "holding": 3}  # (3 + 1 + 0.5) of 6 pairs
