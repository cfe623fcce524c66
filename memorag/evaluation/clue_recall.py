"""Do a memory checkpoint's clues find the evidence? Clue-driven against query-only retrieval.

For each example, its context (or its documents, or the shared corpus) is
memorized with the checkpoint's memory model; the memory writes clues for the
question (``MemoRAG.clues``, task ``memorag``); then the same retriever, with the
same k, ranks chunks three ways:

- ``query``: the question alone (standard RAG);
- ``clues``: the clues alone, their rankings fused;
- ``query+clues``: the question and the clues together, the ranking of the ``memorag``
  mode's one rule (``memorag.modes.evidence_plan.clue_plan``: by default, under ``reference``
  as under ``union``, the union of each one's top ``memorag_hits``, round-robin by rank (the
  mode then reads the whole union; this ranks it); with ``memorag_evidence: fusion`` each
  retrieves ``hits_per_query`` and the lists are fused, the question weighing
  ``query_weight``), as ``ask`` and the retrievers rank it.

The clues can also come from a reference that bounds the memory's
(``memorag.evaluation.clue_sources``): the base reading the whole context
(``full-context``), or the gold answer (``answer``).

Recall of gold evidence in the top k of each ranking is computed as the harness
defines it (``memorag.evaluation.recall``), and beside it the tokens of those k chunks
(``evidence_tokens``: what the recall cost). One JSON line per example (clues,
the memory's raw replies, the hits, recalls and evidence tokens), and a summary of the means and of
the clue-driven rankings' gains over the query's, with 95% bootstrap intervals.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from tqdm.auto import tqdm

from memorag.config import config_to_dict
from memorag.evaluation import recall as recall_lib
from memorag.evaluation.bootstrap import mean_interval
from memorag.evaluation.clue_sources import needs_memory, write_clues
from memorag.evaluation.datasets.schema import CorpusTask, EvalExample, load_corpus_task, read_examples
from memorag.evaluation.partial_records import PartialRecords
from memorag.evaluation.runner import group_examples
from memorag.modes.evidence_plan import clue_plan
from memorag.pipeline import MemoRAG, PipelineConfig
from memorag.runtime.placement import Placement, set_threads
from memorag.storage.io import atomic_write_text

VARIANTS = ("query", "clues", "query+clues")


def recorded_base(checkpoint: str | os.PathLike[str]) -> str:
    """The base model a memory checkpoint was trained on, as recorded in its ``memory_config.json``."""
    from memorag.memory.checkpoint import CONFIG, MemoryWeightsError, read_document

    document = read_document(checkpoint)
    base = (document.get("base") or {}).get("base_model")
    if not base:
        raise MemoryWeightsError(f"{checkpoint}/{CONFIG} records no base model; pass --base")
    return str(base)


def load_checkpoint_model(checkpoint: str | os.PathLike[str], base: str | None = None,
                          placement: Placement | None = None):
    """A `MemoryModel`: `base` (default: the recorded one) with the checkpoint's memory weights, loaded
    where `placement` says (default: CUDA when present, else CPU, in the checkpoint's dtype)."""
    from memorag.memory import MemoryModel
    from memorag.runtime.embedded import is_memory_weights_name

    placement = placement or Placement.resolve()
    if is_memory_weights_name(checkpoint):  # "embedded" (the shipped weights), "untrained", "auto"
        return MemoryModel.from_pretrained(base, memory_weights=checkpoint, **placement.lm_kwargs())
    return MemoryModel.from_pretrained(base or recorded_base(checkpoint), memory_weights=checkpoint,
                                       **placement.lm_kwargs())


HOTPOTQA_HELD_OUT = "hotpotqa:"  # `hotpotqa:TOKENS`: held-out HotpotQA questions built at that length


def read_data(path: str | os.PathLike[str], tokenizer: Any = None,
              num_examples: int | None = None) -> list[EvalExample] | CorpusTask:
    """EvalExample JSON lines (a file), a saved shared-corpus task (a folder), or `hotpotqa:TOKENS`:
    `num_examples` (default 50) HotpotQA questions from the held-out rows (5,000 and above, the
    evaluation pool), each in a context of TOKENS tokens of `tokenizer` (its gold paragraphs among
    distractors, as the harness builds them)."""
    text = os.fspath(path)
    if text.startswith(HOTPOTQA_HELD_OUT):
        from memorag.evaluation.datasets.hotpotqa import hotpotqa_long_context

        length = text.removeprefix(HOTPOTQA_HELD_OUT)
        if not length.isdigit() or int(length) < 512:
            raise ValueError(f"--data {text!r}: give the context length in tokens, e.g. hotpotqa:4096")
        return hotpotqa_long_context(num_questions=num_examples or 50, target_tokens=int(length),
                                     tokenizer=tokenizer, split="eval")
    return load_corpus_task(path) if Path(path).is_dir() else read_examples(path)


def limit(data: list[EvalExample] | CorpusTask, num_examples: int | None) -> list[EvalExample] | CorpusTask:
    """The first `num_examples` examples (all when None); a corpus keeps all its documents."""
    if num_examples is None:
        return data
    if num_examples < 1:
        raise ValueError(f"num_examples={num_examples} must be at least 1")
    if isinstance(data, CorpusTask):
        return CorpusTask(data.name, data.documents, data.examples[:num_examples], data.meta)
    return data[:num_examples]


def _spans(rag: MemoRAG, hits) -> list[tuple[recall_lib.Span, float]]:
    chunks = {chunk.id: chunk for chunk in rag.chunks}
    return [((chunks[h.chunk_id].doc_id, chunks[h.chunk_id].start_char, chunks[h.chunk_id].end_char), h.score)
            for h in hits]


def _tokens(rag: MemoRAG, hits) -> int:
    """The tokens of the ranked chunks `hits` (the cost of their recall)."""
    chunks = {chunk.id: chunk for chunk in rag.chunks}
    return sum(chunks[h.chunk_id].num_tokens for h in hits)


def _rankings(rag: MemoRAG, question: str, clues: list[str], k: int) -> dict[str, list]:
    plan = clue_plan(question, clues, rag.config, rag.config.hits_per_query)  # what `ask` and `search` rank
    return {
        "query": rag.retrieve([question], k=k)[0][:k],
        "clues": rag.retrieve(clues, k=k)[0][:k] if clues else [],
        "query+clues": rag.retrieve_plan(plan)[0][:k],
    }


def clue_recall(data: list[EvalExample] | CorpusTask, new_pipeline: Callable[[], MemoRAG], *, k: int = 5,
                coverage: float = 1.0, memorize: str = "context", progress: bool = True,
                clue_source: str = "memory", partial: PartialRecords | None = None) -> list[dict[str, Any]]:
    """One record per example: the clues (written by `clue_source`, `memorag.evaluation.clue_sources`),
    and recall@k of the three rankings (see the module docstring). With `partial`, the examples it
    holds are not asked again and each new record is added to it as soon as it is made."""
    if k < 1:
        raise ValueError(f"k={k} must be at least 1")
    with_memory = needs_memory(clue_source)
    done = partial.done if partial is not None else {}
    groups = group_examples(data, "clues", memorize)
    records = []
    total = sum(len(g.examples) for g in groups)
    with tqdm(total=total, initial=sum(e.id in done for g in groups for e in g.examples), desc="clues",
              disable=not progress) as bar:
        for group in groups:
            if all(example.id in done for example in group.examples):
                records += [done[example.id] for example in group.examples]
                continue
            rag = new_pipeline()
            rag.memorize(group.documents, with_memory=with_memory, show_progress=False)
            for example in group.examples:
                if example.id in done:
                    records.append(done[example.id])
                    continue
                clues, raw = write_clues(clue_source, rag, example)
                units = recall_lib.gold_units(example.gold_evidence, group.as_documents)
                rankings = _rankings(rag, example.question, clues, k)
                hits = {name: _spans(rag, ranked) for name, ranked in rankings.items()}
                records.append({
                    "id": example.id, "question": example.question, "clue_source": clue_source, "clues": clues,
                    "raw_clues": raw,
                    "recall": {name: recall_lib.recall(units, [s for s, _ in hits[name]], coverage) for name in VARIANTS},
                    "doc_recall": {name: recall_lib.doc_recall(units, [s for s, _ in hits[name]]) for name in VARIANTS},
                    "hits": {name: [[*span, score] for span, score in hits[name]] for name in VARIANTS},
                    "evidence_tokens": {name: _tokens(rag, rankings[name]) for name in VARIANTS},
                })
                if partial is not None:
                    partial.add(records[-1])
                bar.update()
    return records


def summarize(records: Sequence[dict[str, Any]], k: int) -> dict[str, Any]:
    """Mean recall@k x 100 of each ranking over the examples where it applies, and the gain of the
    clue-driven rankings over the query's (`paired_gain`)."""
    summary: dict[str, Any] = {"n": len(records), "k": k}
    for field in ("recall", "doc_recall"):
        for name in VARIANTS:
            values = [r[field][name] for r in records if r[field][name] is not None]
            summary[f"{field}@{k} {name}"] = round(100 * fmean(values), 2) if values else None
        summary[f"{field}_n"] = sum(r[field]["query"] is not None for r in records)
        if field == "recall":  # the cost beside each ranking's recall (absent from older records)
            for name in VARIANTS:
                tokens = [r["evidence_tokens"][name] for r in records if "evidence_tokens" in r]
                summary[f"evidence_tokens@{k} {name}"] = round(fmean(tokens), 1) if tokens else None
        for name in VARIANTS[1:]:
            summary[f"{field}@{k} {name} - query"] = paired_gain(records, field, name)
    return summary


def paired_gain(records: Sequence[dict[str, Any]], field: str, name: str, samples: int = 10_000,
                seed: int = 0) -> dict[str, float] | None:
    """Mean of `name`'s recall minus the query's over the same examples, in points, with a 95%
    percentile bootstrap interval over examples (a generator seeded by `seed`); None without examples."""
    diffs = [100 * (r[field][name] - r[field]["query"]) for r in records
             if r[field][name] is not None and r[field]["query"] is not None]
    return mean_interval(diffs, samples, seed)


def compare_records(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]], k: int, samples: int = 10_000,
                    seed: int = 0) -> dict[str, Any]:
    """Two runs' records on the same questions (two checkpoints, say) compared question by question: for the
    clue-driven rankings, B's recall minus A's in points with a 95% bootstrap interval over the questions, and
    how many questions each found more of. Refused unless both hold the same question ids and the same query
    recall on each (the same data, retriever and k, so only the clues differ)."""
    by_id = {record["id"]: record for record in a}
    if len(by_id) != len(a) or {record["id"] for record in b} != set(by_id) or len(b) != len(a):
        raise ValueError("the two record files hold different questions: compare runs of one --data and "
                         "--num-examples")
    pairs = [(by_id[record["id"]], record) for record in b]
    for field in ("recall", "doc_recall"):
        if any(left[field]["query"] != right[field]["query"] for left, right in pairs):
            raise ValueError(f"the query's {field} differs between the runs on some question: compare runs "
                             "with the same retriever, k and chunking, so that only the clues differ")
    comparison: dict[str, Any] = {"n": len(pairs), "k": k}
    for field in ("recall", "doc_recall"):
        for name in VARIANTS[1:]:
            kept = [(left[field][name], right[field][name]) for left, right in pairs
                    if left[field][name] is not None and right[field][name] is not None]
            comparison[f"{field}@{k} {name}: B - A"] = mean_interval(
                [100 * (right - left) for left, right in kept], samples, seed)
            comparison[f"{field}@{k} {name}: better / worse / same"] = [
                sum(right > left for left, right in kept), sum(right < left for left, right in kept),
                sum(right == left for left, right in kept)]
    return comparison


def write_records(path: str | os.PathLike[str], records: Sequence[dict[str, Any]]) -> Path:
    return atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def run_clue_recall(checkpoint: str | os.PathLike[str], data_path: str | os.PathLike[str],
                    out: str | os.PathLike[str], *, base: str | None = None, k: int = 5, coverage: float = 1.0,
                    memorize: str = "context", num_examples: int | None = None,
                    pipeline: PipelineConfig | None = None, memory_model=None, embedder=None,
                    embedder_name: str | None = None, progress: bool = True,
                    clue_source: str = "memory") -> dict[str, Any]:
    """Load the checkpoint (unless `memory_model` is given) and the embedder once, where the
    pipeline's `device`, `dtype` and `quantize` say, run :func:`clue_recall` over the data, write
    OUT and OUT.summary.json; returns the summary. Records are kept in OUT.partial.jsonl as they are
    made (`memorag.evaluation.partial_records`): a stopped run, started again with the same
    arguments, goes on from where it stopped."""
    pipeline = pipeline or PipelineConfig()
    set_threads(pipeline.threads)
    if memory_model is None:
        memory_model = load_checkpoint_model(checkpoint, base, Placement.of(pipeline))
    model = memory_model
    if embedder is None and pipeline.retriever != "bm25":
        loader = MemoRAG(pipeline, memory_model=model)
        embedder, embedder_name = loader.embedder, loader.embedder_name
    data = limit(read_data(data_path, model.tokenizer, num_examples), num_examples)
    identity = {"checkpoint": str(checkpoint), "memory_model": model.identity(), "embedder": embedder_name,
                "data": str(data_path), "num_examples": num_examples, "k": k, "coverage": coverage,
                "memorize": memorize, "clue_source": clue_source,
                "pipeline": {key: value for key, value in config_to_dict(pipeline).items() if key != "threads"}}
    partial = PartialRecords(out, identity)
    records = clue_recall(
        data, lambda: MemoRAG(pipeline, memory_model=model, embedder=embedder, embedder_name=embedder_name),
        k=k, coverage=coverage, memorize=memorize, progress=progress, clue_source=clue_source, partial=partial,
    )
    out = Path(out)
    write_records(out, records)
    summary = {"checkpoint": str(checkpoint), "base": getattr(model, "name", None), "data": str(data_path),
               "clue_source": clue_source, **summarize(records, k)}
    atomic_write_text(out.with_suffix(".summary.json"), json.dumps(summary, indent=2) + "\n")
    partial.finish()
    return summary
