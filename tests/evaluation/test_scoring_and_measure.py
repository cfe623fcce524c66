"""Scoring by the example's metric, the generator meter, and per-stage peak memory."""

from __future__ import annotations

import mmap
import sys

import pytest

from memorag.evaluation.datasets.schema import EvalExample
from memorag.evaluation.measure import MeteredGenerator, PeakMemory
from memorag.evaluation.scoring import MetricError, score

from .conftest import FakeNumberGenerator


def _example(metric: str, answers: list[str], **fields) -> EvalExample:
    return EvalExample(id="e", task=fields.pop("task", "t"), question=fields.pop("question", "q?"), answers=answers,
                       metric=metric, **fields)


def test_scores_follow_the_named_metric():
    # RULER: the share of references found, after RULER's post-processing of the prediction
    assert score(" 1234567 and 7654321\x00", _example("string_match_all", ["1234567", "7654321", "1111111"])) \
        == pytest.approx(2 / 3, abs=1e-4)  # RULER rounds to 2 decimals of a percent
    assert score("it is 7654321", _example("string_match_part", ["1234567", "7654321"])) == 1.0
    # LongBench token F1, max over references: "the cat" vs "a cat sat" -> p=1, r=1/2 -> 2/3
    assert score("the cat", _example("qa_f1_score", ["dog", "a cat sat"])) == pytest.approx(2 / 3)
    assert score("Paris.", _example("exact_match", ["paris"])) == 1.0
    # BABILong: the target must be the only label named
    example = _example("babilong_answer_correct", ["kitchen"], meta={"babilong_task": "qa1"})
    assert score("In the kitchen.", example) == 1.0 and score("kitchen or garden", example) == 0.0
    # LongBench cuts TriviaQA predictions to their first line
    trivia = _example("qa_f1_score", ["Oslo"], task="longbench_triviaqa", meta={"dataset": "triviaqa"})
    assert score("Oslo\nbut also Bergen", trivia) == 1.0


def test_squad_v2_scores_a_question_without_answers_by_whether_the_reply_is_no_answer():
    from memorag.prompting.answer_check import NO_ANSWER_REPLY

    question = "In what year did the glacier reach the sea?"
    impossible = _example("squad_v2_f1", [], question=question)
    answerable = _example("squad_v2_f1", ["1848", "in 1848"], question=question)
    assert score(NO_ANSWER_REPLY, impossible) == 1.0 and score("", impossible) == 1.0
    assert score("In what year did the glacier reach the sea", impossible) == 1.0  # the question repeated
    assert score("1848", impossible) == 0.0
    assert score(NO_ANSWER_REPLY, answerable) == 0.0
    assert score("It reached it in 1848", answerable) == pytest.approx(score("It reached it in 1848",
                                                                             _example("qa_f1_score", ["1848", "in 1848"])))


def test_metrics_the_harness_cannot_score_are_named():
    with pytest.raises(MetricError, match="infinitebench_choice.*it scores qa_f1_score"):
        score("A", _example("infinitebench_choice", ["A"]))
    with pytest.raises(MetricError, match="babilong_task"):
        score("kitchen", _example("babilong_answer_correct", ["kitchen"]))


def test_meter_counts_what_the_generator_was_given_and_passes_everything_on():
    inner = FakeNumberGenerator(context_window=64)
    meter = MeteredGenerator(inner)
    assert meter.generate("read 1234567 here", system="be brief", max_new_tokens=4) == "1234567"
    assert meter.generate("nothing") == "no number found"
    assert meter.generate_with_prefix("a long corpus 7654321 ", "question?") == "7654321"
    assert meter.take() == [3 + 2, 1, 5] and meter.take() == []
    assert inner.calls == [("read 1234567 here", "be brief"), ("nothing", None), ("a long corpus 7654321 question?", None)]
    assert meter.name == "fake-number" and meter.context_window == 64
    meter.context_window = 32
    assert inner.context_window == 32


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the per-stage reset is Linux's")
def test_peak_memory_is_per_stage():
    peak = PeakMemory()
    if peak.scope != "stage":
        pytest.skip("this kernel does not let the process reset its peak RSS")
    stats: dict[str, float] = {}
    with peak.stage(stats, "big"):
        # Pages of their own from the kernel: a bytearray may reuse freed pages the process still holds
        # (after many tests), and then its peak would not rise.
        block = mmap.mmap(-1, 64 * 2**20)
        for offset in range(0, len(block), 4096):
            block[offset] = 1  # touch every page
        block.close()
    with peak.stage(stats, "small"):
        pass
    assert stats["big_rss_mb"] >= stats["small_rss_mb"] + 48
    assert stats["big_s"] >= 0 and stats["small_s"] >= 0
