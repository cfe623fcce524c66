"""The reader's refusal margin, tuned on samples of the tuning rows (docs/training.md, "The reader").

A reader trained by `train/reader.py` answers with a span or with one fixed reply, `NO_ANSWER_REPLY`; the
margin (`LocalGenerator.refusal_margin`) is how far the fixed reply's first token must lead every other first
token before it is given, as SQuAD v2 systems set their no-answer threshold on data they may tune on.

For each sample (written by `train/build_reader_data.py`: the prompt the pipeline sent, the question, its
answers and metric) the generator's first-token scores give that lead (`gap`), and two replies are decoded:
the one it gives with no margin and the one it gives when the fixed reply's first token is never chosen.
Decoding is greedy, and the margin acts on the first token only, so at a margin m the reply is the first
where gap > m and the second otherwise: one pass scores every margin exactly (`margin_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

NEVER = 1e9  # a margin no first-token lead reaches: the fixed reply is never chosen


@dataclass(frozen=True)
class SampleReplies:
    """One sample's two replies and the fixed reply's first-token lead over every other token."""

    id: str
    task: str
    metric: str
    question: str
    answers: tuple[str, ...]
    gap: float
    free: str  # the reply with no margin
    forced: str  # the reply when the fixed reply's first token is never chosen
    why: str = ""  # the sample's target: `answer`, `not in evidence` or `unanswerable` (build_reader_data.py)

    def reply(self, margin: float) -> str:
        return self.free if self.gap > margin else self.forced

    def score(self, margin: float) -> float:
        from memorag.evaluation.datasets.schema import EvalExample
        from memorag.evaluation.scoring import score

        example = EvalExample(id=self.id, task=self.task, question=self.question, answers=list(self.answers),
                              metric=self.metric)
        return score(self.reply(margin), example)


def first_token_gap(generator, ids: Sequence[int]) -> float:
    """How far the fixed reply's first token leads every other first token of the reply to `ids` (negative:
    another leads), in the scores the decode loop chooses from (after the repetition penalty)."""
    from memorag.runtime.decode_loop import Sampling, choose_token

    refusal = generator.refusal_token()
    prompt = torch.tensor([list(ids)], dtype=torch.long)
    with torch.no_grad():
        logits = generator.model(input_ids=prompt.to(next(generator.model.parameters()).device)).logits[0, -1]
    _, scores = choose_token(logits, Sampling(repetition_penalty=generator.repetition_penalty), prompt, None)
    lead = scores[0, refusal].item()
    scores[0, refusal] = -math.inf
    return lead - scores.max().item()


def read_sample(generator, record: dict[str, Any], max_new_tokens: int) -> SampleReplies:
    """The two replies of `generator` (a `LocalGenerator`, its margin left as it was) to the sample `record`."""
    missing = [key for key in ("prompt", "question", "answers", "metric", "task", "id") if key not in record]
    if missing:
        raise ValueError(f"sample {record.get('id', '?')} lacks {', '.join(missing)}: tune on samples written by "
                         "train/build_reader_data.py (it records the question, answers and metric)")
    measured = generator.measure(record["prompt"], record.get("system"))
    gap = first_token_gap(generator, measured.ids)
    kept = generator.refusal_margin
    try:
        generator.refusal_margin = NEVER
        forced = generator.generate_measured(measured, max_new_tokens=max_new_tokens)
        generator.refusal_margin = 0.0
        free = generator.generate_measured(measured, max_new_tokens=max_new_tokens) if gap >= 0 else forced
    finally:
        generator.refusal_margin = kept
    return SampleReplies(str(record["id"]), record["task"], record["metric"], record["question"],
                         tuple(record["answers"]), gap, free, forced, record.get("why", ""))


def candidate_margins(replies: Iterable[SampleReplies]) -> list[float]:
    """0 and, for each sample the fixed reply leads, a margin just above its lead (each changes one reply)."""
    leads = sorted({round(item.gap, 4) for item in replies if item.gap >= 0})
    return [0.0, *(lead + 1e-3 for lead in leads)]


def margin_rows(replies: Sequence[SampleReplies], margins: Iterable[float],
                objective: str = "mean") -> list[dict[str, Any]]:
    """Per margin: each task's mean score and the share of its fixed replies, and the objective: with
    `objective="mean"` the mean of the tasks' means (each task weighs the same, whatever its count), with a
    task's name that task's mean alone (the others reported beside it)."""
    from memorag.prompting.answer_check import no_answer_reason

    tasks = sorted({item.task for item in replies})
    if objective != "mean" and objective not in tasks:
        raise ValueError(f"objective {objective!r}: choose mean or one of the samples' tasks ({', '.join(tasks)})")
    rows = []
    for margin in margins:
        row: dict[str, Any] = {"margin": round(margin, 4)}
        means = {}
        for task in tasks:
            items = [item for item in replies if item.task == task]
            mean = sum(item.score(margin) for item in items) / len(items)
            refused = sum(no_answer_reason(item.question, item.reply(margin)) is not None for item in items)
            row[task] = {"n": len(items), "score": round(100 * mean, 2), "no_answer": refused}
            means[task] = mean
        kept = list(means.values()) if objective == "mean" else [means[objective]]
        row["objective"] = round(100 * sum(kept) / len(kept), 2)
        rows.append(row)
    return rows


def separation(replies: Sequence[SampleReplies]) -> dict[str, Any]:
    """How well the fixed reply's lead tells the samples whose evidence lacks the answer from those whose
    evidence holds it, per task and over all: the probability that a sample of the first kind has the larger
    lead (ties count half; 0.5 is chance, 1 a margin that separates them all), and the counts of each kind."""
    result: dict[str, Any] = {}
    for task in [None, *sorted({item.task for item in replies})]:
        items = [item for item in replies if item.why and (task is None or item.task == task)]
        lacking = [item.gap for item in items if item.why != "answer"]
        holding = [item.gap for item in items if item.why == "answer"]
        pairs = len(lacking) * len(holding)
        won = sum((a > b) + 0.5 * (a == b) for a in lacking for b in holding)
        result[task or "all"] = {"auc": round(won / pairs, 3) if pairs else None, "lacking": len(lacking),
                                 "holding": len(holding)}
    return result


def best_row(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The row of the highest objective (of equal ones, the smallest margin)."""
    return max(rows, key=lambda row: (row["objective"], -row["margin"]))
