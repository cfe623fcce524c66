"""Loaders for real long-context sets in their original formats, from local files.

None of these sets can be installed from a package registry; users who have
them (downloaded elsewhere) point these loaders at the files. Each record
becomes an :class:`~memorag.evaluation.datasets.schema.EvalExample` (``proxy=False``: these
are the real benchmarks) and keeps its original fields, except the long
context, in ``meta["original"]``. A missing file is a ``FileNotFoundError``; a
line that is not JSON, a missing field or a field of the wrong type is an
:class:`~memorag.evaluation.datasets.schema.EvalDataError` naming the file, the line and the field.

Formats (one JSON object per line unless said otherwise):

* LongBench (v1) ``{dataset}.jsonl`` and LongBench-E ``{dataset}_e.jsonl``:
  ``input`` (the question, empty for summaries), ``context``, ``answers``
  (list), ``length``, ``dataset``, ``language``, ``all_classes`` (list or
  null), ``_id``. Metric: LongBench's, by dataset name.
* InfiniteBench ``{task}.jsonl`` (``passkey``, ``number_string``,
  ``kv_retrieval``, ``longbook_sum_eng``, ``longbook_choice_eng``,
  ``longbook_qa_eng``, ``longbook_qa_chn``, ``longdialogue_qa_eng``,
  ``math_find``, ``math_calc``, ``code_run``, ``code_debug``): ``id``,
  ``context``, ``input``, ``answer`` (list or string), ``options`` (list).
* UltraDomain ``{domain}.jsonl`` (MemoRAG's own set): ``input``, ``answers``,
  ``context``, and where present ``_id``, ``context_id``, ``label``,
  ``length``, ``meta``.
* LOFT directories ``data/{retrieval,rag}/{dataset}/{32k,128k,1m}/`` holding
  ``corpus.jsonl`` (``pid``, ``title_text``, ``passage_text``, ``metadata``)
  and ``{dev,test,few_shot}_queries.jsonl`` (``qid``, ``query_text``,
  ``answers``, ``metadata`` with ``qrels`` = ``[[pid, score], ...]``); loaded as
  a :class:`~memorag.evaluation.datasets.schema.CorpusTask`.
* LongRAG query files (its ``nq`` / ``hotpot_qa`` test sets, JSON lines or a
  JSON list): ``query_id``, ``query``, ``answer`` (list), ``context_titles``
  (the titles of the retrieved long units), ``context`` (their text), and for
  HotpotQA optionally ``sp`` (the two supporting titles) and ``type``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memorag.evaluation.datasets.schema import CorpusTask, EvalDataError, EvalExample, read_jsonl_records
from memorag.prompting.prompts import LONGBENCH_PROMPTS
from memorag.retrieval.chunking import Document

LONGBENCH_METRICS: dict[str, str] = {
    "narrativeqa": "qa_f1_score",
    "qasper": "qa_f1_score",
    "multifieldqa_en": "qa_f1_score",
    "hotpotqa": "qa_f1_score",
    "2wikimqa": "qa_f1_score",
    "musique": "qa_f1_score",
    "gov_report": "rouge_score",
    "qmsum": "rouge_score",
    "multi_news": "rouge_score",
    "trec": "classification_score",
    "triviaqa": "qa_f1_score",
    "samsum": "rouge_score",
    "passage_retrieval_en": "retrieval_score",
    "passage_count": "count_score",
    "lcc": "code_sim_score",
    "repobench-p": "code_sim_score",
    "multifieldqa_zh": "qa_f1_zh_score",
    "dureader": "rouge_zh_score",
    "vcsum": "rouge_zh_score",
    "lsht": "classification_score",
    "passage_retrieval_zh": "retrieval_zh_score",
}
"""LongBench dataset -> the name of its metric (the English ones are in ``memorag.evaluation.metrics``)."""

INFINITEBENCH_METRICS: dict[str, str] = {
    "passkey": "infinitebench_first_int_match",
    "number_string": "infinitebench_first_int_match",
    "kv_retrieval": "infinitebench_in_match",
    "longbook_sum_eng": "rouge_lsum",
    "longbook_choice_eng": "infinitebench_choice",
    "longbook_qa_eng": "qa_f1_score",
    "longbook_qa_chn": "qa_f1_zh_score",
    "longdialogue_qa_eng": "infinitebench_in_match",
    "math_find": "infinitebench_math_find",
    "math_calc": "infinitebench_math_calc",
    "code_run": "infinitebench_code_run",
    "code_debug": "infinitebench_choice",
}
"""InfiniteBench task (file name) -> the name of its scorer (``rouge_lsum`` and ``qa_f1_score`` are in
``memorag.evaluation.metrics``; the ``infinitebench_*`` names follow its ``compute_scores.py``)."""

LOFT_PRIMARY_K: dict[str, int] = {"hotpotqa": 2, "musique": 5, "qampari": 5, "quest": 3}
"""LOFT retrieval datasets scored with mrecall@k (k here); the others use recall@1."""
LOFT_MULTI_VALUE_RAG = frozenset({"qampari", "quest"})
LOFT_SPLITS = ("dev", "test", "few_shot")


def _require(
    record: Any, name: str, where: str, types: type | tuple[type, ...], *, optional: bool = False
) -> Any:
    """``record[name]``, checked; errors name the place and the field."""
    if not isinstance(record, dict):
        raise EvalDataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if name not in record or (optional and record[name] is None):
        if optional:
            return None
        raise EvalDataError(f"{where}: missing field {name!r}")
    value = record[name]
    if not isinstance(value, types):
        expected = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise EvalDataError(f"{where}: field {name!r} must be {expected}, got {type(value).__name__}")
    return value


def _string_list(value: Any, name: str, where: str) -> list[str]:
    """A list of answers as strings (numbers are turned into strings; a bare string is one answer)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, list) and all(isinstance(item, (str, int, float)) for item in value):
        return [str(item) for item in value]
    raise EvalDataError(f"{where}: field {name!r} must be a string or a list of strings, got {value!r:.120}")


def _original(record: dict[str, Any], *drop: str) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in drop}


def _records(path: str | os.PathLike[str], what: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, record)`` for a JSON-lines file, or for a JSON file holding a list of records."""
    file = Path(path)
    if file.suffix == ".json":
        if not file.is_file():
            raise FileNotFoundError(f"{file}: no such file ({what} expected)")
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise EvalDataError(
                f"{file}: not valid JSON ({error.msg} at line {error.lineno}); expected {what}"
            ) from error
        if not isinstance(data, list):
            raise EvalDataError(f"{file}: expected a JSON list of {what}, got {type(data).__name__}")
        for index, record in enumerate(data):
            yield f"{file}: item {index}", record
        return
    for line_number, record in read_jsonl_records(file, what):
        yield f"{file}:{line_number}", record


def _check_not_empty(examples: list[Any], path: str | os.PathLike[str], what: str) -> None:
    if not examples:
        raise EvalDataError(f"{path}: no {what} in the file")


# ---------------------------------------------------------------------------
# LongBench / LongBench-E
# ---------------------------------------------------------------------------


def longbench_length_bucket(length: int) -> str:
    """LongBench-E's length groups: ``"0-4k"``, ``"4-8k"``, ``"8k+"`` (by the ``length`` field, in words)."""
    if length < 4000:
        return "0-4k"
    if length < 8000:
        return "4-8k"
    return "8k+"


def load_longbench(path: str | os.PathLike[str], *, metric: str | None = None) -> list[EvalExample]:
    """One LongBench or LongBench-E file (``hotpotqa.jsonl``, ``hotpotqa_e.jsonl``, ...).

    Task name ``longbench_{dataset}`` or ``longbench_e_{dataset}`` (E when the
    file name or the ``dataset`` field ends in ``_e``); ``meta`` keeps
    ``dataset``, ``language``, ``length``, ``all_classes``, ``length_bucket``
    (E only) and the original record without its context.
    """
    stem = Path(path).stem
    examples = []
    for where, record in _records(path, "LongBench records"):
        question = _require(record, "input", where, str)
        context = _require(record, "context", where, str)
        answers = _string_list(_require(record, "answers", where, (list, str)), "answers", where)
        dataset = _require(record, "dataset", where, str, optional=True) or stem
        all_classes = _require(record, "all_classes", where, list, optional=True)
        length = _require(record, "length", where, int, optional=True)
        example_id = _require(record, "_id", where, (str, int), optional=True)
        is_e = dataset.endswith("_e") or stem.endswith("_e")
        base = dataset.removesuffix("_e")
        meta: dict[str, Any] = {
            "dataset": base,
            "language": record.get("language"),
            "length": length,
            "all_classes": all_classes,
            "original": _original(record, "context"),
        }
        if is_e and length is not None:
            meta["length_bucket"] = longbench_length_bucket(length)
        if base in LONGBENCH_PROMPTS:  # the generator gets LongBench's own template for the dataset
            meta["answer_prompt"] = {"name": f"longbench:{base}"}
        examples.append(
            EvalExample(
                id=str(example_id if example_id is not None else f"{stem}-{len(examples)}"),
                task=f"longbench_e_{base}" if is_e else f"longbench_{base}",
                question=question,
                answers=answers,
                context=context,
                metric=metric or LONGBENCH_METRICS.get(base, "qa_f1_score"),
                meta=meta,
            )
        )
    _check_not_empty(examples, path, "LongBench records")
    return examples


def load_longbench_dir(
    directory: str | os.PathLike[str], datasets: list[str] | None = None, *, longbench_e: bool = False
) -> list[EvalExample]:
    """Every ``{dataset}.jsonl`` (or ``{dataset}_e.jsonl``) of a LongBench ``data/`` folder, or the named ones."""
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such directory (a LongBench data folder expected)")
    suffix = "_e.jsonl" if longbench_e else ".jsonl"
    if datasets is None:
        files = sorted(f for f in folder.glob(f"*{suffix}") if longbench_e or not f.name.endswith("_e.jsonl"))
    else:
        files = [folder / f"{name}{suffix}" for name in datasets]
    if not files:
        raise FileNotFoundError(f"{folder}: no *{suffix} files")
    return [example for file in files for example in load_longbench(file)]


# ---------------------------------------------------------------------------
# InfiniteBench
# ---------------------------------------------------------------------------


def load_infinitebench(
    path: str | os.PathLike[str], *, task: str | None = None, metric: str | None = None
) -> list[EvalExample]:
    """One InfiniteBench task file; the task is the file name (``longbook_qa_eng.jsonl``) unless given.

    Task name ``infinitebench_{task}``; ``meta["options"]`` holds the choices of
    the multiple-choice tasks.
    """
    task = task or Path(path).stem
    if task not in INFINITEBENCH_METRICS:
        raise EvalDataError(
            f"{path}: unknown InfiniteBench task {task!r} (from the file name); pass task= one of "
            f"{', '.join(INFINITEBENCH_METRICS)}"
        )
    examples = []
    for where, record in _records(path, "InfiniteBench records"):
        context = _require(record, "context", where, str)
        question = _require(record, "input", where, str)
        answers = _string_list(_require(record, "answer", where, (list, str, int, float)), "answer", where)
        options = _require(record, "options", where, list, optional=True) or []
        example_id = _require(record, "id", where, (str, int), optional=True)
        examples.append(
            EvalExample(
                id=f"{task}-{example_id if example_id is not None else len(examples)}",
                task=f"infinitebench_{task}",
                question=question,
                answers=answers,
                context=context,
                metric=metric or INFINITEBENCH_METRICS[task],
                meta={
                    "options": [str(option) for option in options],
                    "original": _original(record, "context"),
                },
            )
        )
    _check_not_empty(examples, path, "InfiniteBench records")
    return examples


# ---------------------------------------------------------------------------
# UltraDomain
# ---------------------------------------------------------------------------


def load_ultradomain(
    path: str | os.PathLike[str], *, domain: str | None = None, metric: str = "qa_f1_score"
) -> list[EvalExample]:
    """One UltraDomain file (``legal.jsonl``, ``mix.jsonl``, ...); task ``ultradomain_{domain}``.

    The domain is ``domain``, else the file name. The metric defaults to
    ``qa_f1_score`` against the reference answers (an assumption: pass
    ``metric=`` to match another protocol). Many questions share one context;
    ``meta["context_id"]`` says which, where the file has it.
    """
    domain = domain or Path(path).stem
    examples = []
    for where, record in _records(path, "UltraDomain records"):
        question = _require(record, "input", where, str)
        context = _require(record, "context", where, str)
        answers = _string_list(_require(record, "answers", where, (list, str)), "answers", where)
        example_id = _require(record, "_id", where, (str, int), optional=True)
        extra = _require(record, "meta", where, dict, optional=True) or {}
        examples.append(
            EvalExample(
                id=str(example_id if example_id is not None else f"{domain}-{len(examples)}"),
                task=f"ultradomain_{domain}",
                question=question,
                answers=answers,
                context=context,
                metric=metric,
                meta={
                    "context_id": record.get("context_id"),
                    "label": record.get("label"),
                    "length": record.get("length"),
                    "source_meta": extra,
                    "original": _original(record, "context"),
                },
            )
        )
    _check_not_empty(examples, path, "UltraDomain records")
    return examples


# ---------------------------------------------------------------------------
# LOFT
# ---------------------------------------------------------------------------


def _loft_names(folder: Path) -> tuple[str | None, str, str]:
    """(task type, dataset, size) from ``.../{task_type}/{dataset}/{size}``."""
    parts = folder.resolve().parts
    size = parts[-1] if parts else ""
    dataset = parts[-2] if len(parts) >= 2 else folder.name
    task_type = (
        parts[-3] if len(parts) >= 3 and parts[-3] in ("retrieval", "rag", "sql", "icl", "mm") else None
    )
    return task_type, dataset, size


def _loft_gold_ids(qrels: Any, where: str) -> list[str]:
    if not isinstance(qrels, list) or not all(isinstance(q, list) and len(q) >= 1 for q in qrels):
        raise EvalDataError(f"{where}: field 'metadata.qrels' must be a list of [pid, score] pairs")
    return [str(q[0]) for q in qrels]


def _loft_corpus(corpus_path: Path) -> list[Document]:
    """A LOFT ``corpus.jsonl``: one document per passage (its pid as id), each pid once."""
    documents = []
    seen: set[str] = set()
    for line_number, record in read_jsonl_records(corpus_path, "LOFT corpus passages"):
        where = f"{corpus_path}:{line_number}"
        pid = str(_require(record, "pid", where, (str, int)))
        title = _require(record, "title_text", where, str, optional=True) or ""
        text = _require(record, "passage_text", where, str)
        if not text.strip():
            raise EvalDataError(
                f"{where}: field 'passage_text' is empty; this LOFT dataset needs infilling "
                "(run LOFT's preprocess.py, as its download.sh does)"
            )
        if pid in seen:
            raise EvalDataError(f"{where}: duplicate pid {pid!r}")
        seen.add(pid)
        documents.append(Document(id=pid, text=text.strip(), title=title.strip()))
    return documents


def _loft_query(record: dict[str, Any], where: str, task_type: str, dataset: str, size: str,
                pids: set[str], corpus_path: Path) -> EvalExample:
    """One line of a LOFT ``{split}_queries.jsonl`` as an example: retrieval queries answer with
    passage ids (``mrecall_at_k``), RAG queries with text (``subspan_em``)."""
    qid = str(_require(record, "qid", where, (str, int)))
    query = _require(record, "query_text", where, (str, list))
    raw_answers = _require(record, "answers", where, list)
    metadata = _require(record, "metadata", where, dict, optional=True) or {}
    turns = query if isinstance(query, list) else None
    question = "\n".join(str(turn) for turn in query) if turns else str(query).strip()
    gold_ids = _loft_gold_ids(metadata.get("qrels", []), where)
    if task_type == "retrieval":
        answers = [str(item[0]) if isinstance(item, list) else str(item) for item in raw_answers]
        metric, k = "mrecall_at_k", LOFT_PRIMARY_K.get(dataset, 1)
    else:
        flat = [x for answer in raw_answers for x in (answer if isinstance(answer, list) else [answer])]
        answers = _string_list(flat, "answers", where)
        metric, k = "subspan_em", None
    missing = [pid for pid in gold_ids if pid not in pids]
    if missing:
        raise EvalDataError(f"{where}: qrels name pids not in {corpus_path}: {missing[:5]}")
    return EvalExample(
        id=qid,
        task=f"loft_{task_type}_{dataset}_{size}",
        question=question,
        answers=answers,
        gold_evidence=[{"kind": "document", "doc_id": str(q[0]), "relevance": q[1] if len(q) > 1 else 1}
                       for q in metadata.get("qrels", [])],
        metric=metric,
        meta={"k": k, "gold_doc_ids": gold_ids, "turns": turns, "multi_value": dataset in LOFT_MULTI_VALUE_RAG,
              "original": record},
    )


def load_loft(
    directory: str | os.PathLike[str], split: str = "dev", *, task_type: str | None = None
) -> CorpusTask:
    """A LOFT text retrieval or RAG directory (``.../data/rag/nq/128k``) as a shared-corpus task.

    ``task_type`` (``"retrieval"`` or ``"rag"``) defaults to the folder above
    the dataset. Retrieval examples answer with passage ids (their answers are
    the gold pids, metric ``mrecall_at_k`` with ``meta["k"]`` = LOFT's primary
    k); RAG examples answer with text (``subspan_em``). Gold evidence is the
    ``qrels`` of each query. Datasets LOFT ships without passage text
    ("infilling needed") must be run through LOFT's ``preprocess.py`` first.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder}: no such directory (a LOFT dataset folder with corpus.jsonl expected)"
        )
    if split not in LOFT_SPLITS:
        raise ValueError(f"split must be one of {LOFT_SPLITS}, got {split!r}")
    inferred_type, dataset, size = _loft_names(folder)
    task_type = task_type or inferred_type
    if task_type not in ("retrieval", "rag"):
        raise EvalDataError(
            f"{folder}: only LOFT text retrieval and RAG folders are supported (got task type {task_type!r}); "
            "pass task_type='retrieval' or 'rag' if the folder layout differs"
        )
    corpus_path = folder / "corpus.jsonl"
    documents = _loft_corpus(corpus_path)
    pids = {document.id for document in documents}
    queries_path = folder / f"{split}_queries.jsonl"
    examples = [_loft_query(record, f"{queries_path}:{line_number}", task_type, dataset, size, pids, corpus_path)
                for line_number, record in read_jsonl_records(queries_path, "LOFT queries")]
    _check_not_empty(examples, queries_path, "LOFT queries")
    return CorpusTask(
        name=f"loft_{task_type}_{dataset}_{size}",
        documents=documents,
        examples=examples,
        meta={
            "source": str(folder),
            "split": split,
            "task_type": task_type,
            "dataset": dataset,
            "size": size,
        },
    )


def loft_few_shot(directory: str | os.PathLike[str], *, task_type: str | None = None) -> list[Any]:
    """LOFT's own few-shot examples of a dataset folder (``few_shot_queries.jsonl``) for the cic mode:
    each query with its gold passages from the folder's corpus and its answers. None in the folder: []."""
    from memorag.pipeline.types import FewShotExample  # the pipeline's type; imported late (no cycle)

    if not (Path(directory) / "few_shot_queries.jsonl").is_file():
        return []
    task = load_loft(directory, "few_shot", task_type=task_type)
    by_id = {document.id: document for document in task.documents}
    return [FewShotExample(example.question, tuple(by_id[pid] for pid in example.meta["gold_doc_ids"]),
                           tuple(example.answers))
            for example in task.examples if example.meta["gold_doc_ids"]]


# ---------------------------------------------------------------------------
# LongRAG
# ---------------------------------------------------------------------------


def load_longrag(
    path: str | os.PathLike[str], *, dataset: str | None = None, metric: str = "exact_match"
) -> list[EvalExample]:
    """A LongRAG test file (``nq`` or ``hotpot_qa``; JSON lines or a JSON list); task ``longrag_{dataset}``.

    ``context`` (the retrieved long units, when present) becomes the example's
    context; ``context_titles`` goes to ``meta``; HotpotQA's ``sp`` titles
    become ``"document"`` gold evidence. Metric: LongRAG's exact match.
    """
    dataset = dataset or Path(path).stem
    examples = []
    for where, record in _records(path, "LongRAG query records"):
        query_id = _require(record, "query_id", where, (str, int))
        question = _require(record, "query", where, str)
        answer_field = "answer" if "answer" in record else "answers"
        answers = _string_list(_require(record, answer_field, where, (list, str)), answer_field, where)
        context = _require(record, "context", where, str, optional=True)
        titles = _require(record, "context_titles", where, list, optional=True) or []
        supporting = _require(record, "sp", where, list, optional=True) or []
        examples.append(
            EvalExample(
                id=str(query_id),
                task=f"longrag_{dataset}",
                question=question,
                answers=answers,
                context=context,
                gold_evidence=[
                    {"kind": "document", "doc_id": str(title), "title": str(title)} for title in supporting
                ],
                metric=metric,
                meta={
                    "context_titles": [str(title) for title in titles],
                    "type": record.get("type"),
                    "original": _original(record, "context"),
                },
            )
        )
    _check_not_empty(examples, path, "LongRAG query records")
    return examples
