"""Scoring one prediction with the metric its example names (``EvalExample.metric``).

Every scorer returns a float in [0, 1] for one example; a cell's score is the
mean x 100 (``memorag.evaluation.metrics.mean_percent``), which is how LongBench, LongRAG
and LOFT aggregate and equals RULER's task-level string match. The metric
functions are the originals' re-implementations in ``memorag.evaluation.metrics``; this
module only says how each takes an example's answers (max over references for
LongBench's, the answer list for LongRAG's and LOFT's, RULER's post-processing
of the prediction, BABILong's label set from ``meta["babilong_task"]``).
RULER's functions score a whole task and round to 2 decimals of a percent; called
on one example at a time, each example's score carries that rounding (at most
0.005 points), so a cell's mean can differ from RULER's task score by as much.
"""

from __future__ import annotations

from collections.abc import Callable

from memorag.evaluation import metrics
from memorag.evaluation.datasets.schema import EvalExample

Scorer = Callable[[str, EvalExample], float]


class MetricError(ValueError):
    """An example names a metric this harness does not score, or lacks what the metric needs."""


def _max_over(metric: Callable[..., float]) -> Scorer:
    return lambda prediction, example: metrics.max_over_references(metric, prediction, example.answers)


def _ruler(metric: Callable[..., float]) -> Scorer:
    return lambda prediction, example: metric([metrics.ruler_postprocess_pred(prediction)], [example.answers]) / 100


def _classification(prediction: str, example: EvalExample) -> float:
    classes = example.meta.get("all_classes")
    if not classes:
        raise MetricError(f"example {example.id}: classification_score needs meta['all_classes']")
    return metrics.max_over_references(metrics.classification_score, prediction, example.answers, all_classes=classes)


def _squad_v2(prediction: str, example: EvalExample) -> float:
    """SQuAD v2's rule (its official evaluation script): a question without answers scores 1 when the
    reply is no answer and 0 otherwise; one with answers scores 0 for no answer, else the best F1 over
    its answers. A reply is no answer when the answer check says so (empty, the question repeated, or a
    refusal such as `NO_ANSWER_REPLY`), which stands for the script's empty prediction."""
    from memorag.prompting.answer_check import no_answer_reason

    abstained = no_answer_reason(example.question, prediction) is not None
    if not example.answers:
        return float(abstained)
    return 0.0 if abstained else metrics.max_over_references(metrics.qa_f1_score, prediction, example.answers)


def _babilong(prediction: str, example: EvalExample) -> float:
    task = example.meta.get("babilong_task")
    if task not in metrics.BABILONG_TASK_LABELS or len(example.answers) != 1:
        raise MetricError(f"example {example.id}: babilong_answer_correct needs meta['babilong_task'] "
                          "(qa1..qa20) and exactly one answer")
    return float(metrics.babilong_answer_correct(prediction, example.answers[0], question=example.question,
                                                 task=task))


SCORERS: dict[str, Scorer] = {
    "qa_f1_score": _max_over(metrics.qa_f1_score),
    "rouge_score": _max_over(metrics.rouge_score),
    "retrieval_score": _max_over(metrics.retrieval_score),
    "count_score": _max_over(metrics.count_score),
    "code_sim_score": _max_over(metrics.code_sim_score),
    "classification_score": _classification,
    "rouge_lsum": lambda prediction, example: metrics.rouge_lsum(prediction, example.answers),
    "exact_match": lambda prediction, example: metrics.exact_match(prediction, example.answers),
    "subspan_em": lambda prediction, example: metrics.subspan_em(prediction, example.answers),
    "has_answer": lambda prediction, example: float(metrics.has_answer(example.answers, prediction)),
    "string_match_all": _ruler(metrics.string_match_all),
    "string_match_part": _ruler(metrics.string_match_part),
    "babilong_answer_correct": _babilong,
    "squad_v2_f1": _squad_v2,
}
"""Metric name (as examples name it) -> scorer of one prediction."""


def check_metric(example: EvalExample) -> None:
    if example.metric not in SCORERS:
        raise MetricError(
            f"example {example.id} of task {example.task} is scored with {example.metric!r}, which this harness "
            f"does not score; it scores {', '.join(SCORERS)} (pass metric=... to the loader to choose one)"
        )


def score(prediction: str, example: EvalExample) -> float:
    """`prediction` scored against `example` with its metric, in [0, 1]."""
    check_metric(example)
    if example.task.startswith("longbench") and example.meta.get("dataset") in metrics.LONGBENCH_FIRST_LINE_DATASETS:
        prediction = prediction.lstrip("\n").split("\n")[0]
    return float(SCORERS[example.metric](prediction, example))
