"""A cell's summary (mode x task x length) from its per-example records.

- ``score``: the example metric's mean x 100 (``memorag.evaluation.metrics.mean_percent``);
- ``recall@k`` / ``doc_recall@k``: mean x 100 over the examples where it applies
  (``recall_n`` of them); None ("n/a") when it applies to none;
- ``generator_tokens``: mean prompt tokens given to the generator per example
  (all its calls summed), None when the generator was never called;
- ``evidence_tokens``: mean tokens of the evidence the generator read per example
  (``measure.evidence_tokens``), the cost beside every recall and score; None for records
  written before it was kept;
- ``answered``: the share of examples (x 100) whose reply was an answer (not empty, not an echo
  of the question: ``Answer.answered``); None for records written before it was kept;
- ``time_s``: mean seconds per example of each stage the mode timed (``clues``,
  ``retrieve``, ``generate``..., and ``total``);
- ``index_s`` and ``memory_s``: mean seconds per distinct context to chunk and
  index it, and to build its memory (only for modes that need the memory: a mode
  that does not is not charged for it); ``prepare_s`` adds them up;
- ``evidence_order`` and ``answer_prompt``: the order the generator read the evidence in
  ("None": the mode retrieves nothing to order) and the answer prompt it was asked with
  ("own": the mode's own protocol, e.g. LongRAG's, LOFT's or the memory's);
- ``peak_rss_mb``: the largest peak RSS of each stage over the cell (``index``,
  ``memory``, ``ask``), and ``peak_cuda_mb`` on a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

from memorag.evaluation.metrics import mean_percent


def _mean(values: Sequence[float | None], scale: float = 1.0, ndigits: int = 2) -> float | None:
    present = [value for value in values if value is not None]
    return round(scale * fmean(present), ndigits) if present else None


def summarize_cell(records: Sequence[dict[str, Any]], *, fingerprint: str, requested: int,
                   num_examples: int) -> dict[str, Any]:
    """The cell's summary; `requested` is the configured number of examples, `num_examples` the built."""
    first = records[0]
    recall_keys = list(first["recall"])
    contexts: dict[str, dict[str, Any]] = {}
    for record in records:
        contexts.setdefault(record["context_id"], record["prepare"])
    needs_memory = first["needs_memory"]
    stages = sorted({stage for record in records for stage in record["timings"]})
    cell: dict[str, Any] = {
        "mode": first["mode"],
        "task": first["task"],
        "length": first["length"],
        "pipeline_task": first["pipeline_task"],
        "fingerprint": fingerprint,
        "requested": requested,
        "n": len(records),
        "num_examples": num_examples,
        "num_contexts": len(contexts),
        "metric": ",".join(sorted({record["metric"] for record in records})),
        "score": mean_percent([record["score"] for record in records]),
        "recall_n": sum(record["recall"]["recall@all"] is not None for record in records),
        **{key: _mean([record["recall"][key] for record in records], 100.0) for key in recall_keys},
        "generator_tokens": _mean([sum(r["generator_prompt_tokens"]) if r["generator_prompt_tokens"] else None
                                   for r in records], ndigits=1),
        "evidence_tokens": _mean([record.get("evidence_tokens") for record in records], ndigits=1),
        "answered": _mean([None if record.get("answered") is None else float(record["answered"])
                           for record in records], 100.0, ndigits=1),
        "generator_calls": _mean([len(record["generator_prompt_tokens"]) for record in records]),
        "context_tokens": _mean([record["context_tokens"] for record in records], ndigits=0),
        "time_s": {stage: _mean([record["timings"].get(stage) for record in records], ndigits=3)
                   for stage in stages},
        "index_s": _mean([prepare["index_s"] for prepare in contexts.values()], ndigits=3),
        "memory_s": (_mean([prepare.get("memory_s") for prepare in contexts.values()], ndigits=3)
                     if needs_memory else None),
        "peak_rss_mb": {
            "index": max(prepare["index_rss_mb"] for prepare in contexts.values()),
            "memory": (max((prepare.get("memory_rss_mb") or 0.0) for prepare in contexts.values())
                       if needs_memory else None),
            "ask": max(record["ask"]["ask_rss_mb"] for record in records),
        },
        # how the generator was asked: evidence order and answer prompt (one value in a cell, or several joined)
        "evidence_order": ",".join(sorted({str(r.get("evidence_order")) for r in records})),
        "answer_prompt": ",".join(sorted({(r.get("answer_prompt") or {}).get("name", "own") for r in records})),
        "rss_scope": first["rss_scope"],
        "proxy": all(record["proxy"] for record in records),
    }
    cell["prepare_s"] = round((cell["index_s"] or 0.0) + (cell["memory_s"] or 0.0), 3)
    cuda = [value for record in records for stage in (record["ask"], record["prepare"])
            for name, value in stage.items() if name.endswith("_cuda_mb")]
    if cuda:
        cell["peak_cuda_mb"] = max(cuda)
    return cell
