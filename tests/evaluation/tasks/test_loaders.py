"""Loaders of the real sets, on small hand-written files in each original format, and their errors."""

from __future__ import annotations

import json
import shutil

import pytest

from memorag.evaluation import metrics
from memorag.evaluation.datasets.schema import EvalDataError
from memorag.evaluation.tasks.loaders import (
    LONGBENCH_METRICS,
    load_infinitebench,
    load_loft,
    load_longbench,
    load_longbench_dir,
    load_longrag,
    load_ultradomain,
    longbench_length_bucket,
)


def test_longbench(fixtures):
    examples = load_longbench(fixtures / "longbench" / "hotpotqa.jsonl")
    assert [e.id for e in examples] == ["lb-hq-0001", "lb-hq-0002"]
    first = examples[0]
    assert first.task == "longbench_hotpotqa" and first.metric == "qa_f1_score" and not first.proxy
    assert first.answers == ["the river Wend", "Wend"]
    assert first.context.startswith("Passage 1:\nAda Morrow")
    assert first.meta["original"]["_id"] == "lb-hq-0001" and "context" not in first.meta["original"]
    trec = load_longbench(fixtures / "longbench" / "trec.jsonl")[0]
    assert trec.metric == "classification_score" and trec.meta["all_classes"] == [
        "Distance",
        "Individual",
        "City",
    ]


def test_longbench_e_and_directory(fixtures):
    examples = load_longbench(fixtures / "longbench" / "qasper_e.jsonl")
    assert {e.task for e in examples} == {"longbench_e_qasper"}
    assert [e.meta["length_bucket"] for e in examples] == ["4-8k", "0-4k"]
    assert longbench_length_bucket(8000) == "8k+"
    plain = load_longbench_dir(fixtures / "longbench")
    assert {e.task for e in plain} == {"longbench_hotpotqa", "longbench_trec"}
    assert {e.task for e in load_longbench_dir(fixtures / "longbench", longbench_e=True)} == {
        "longbench_e_qasper"
    }


def test_longbench_metric_names_match_the_metrics_module():
    for dataset, function in metrics.LONGBENCH_EN_METRICS.items():
        assert LONGBENCH_METRICS[dataset] == function.__name__


def test_infinitebench(fixtures):
    qa = load_infinitebench(fixtures / "infinitebench" / "longbook_qa_eng.jsonl")
    assert [e.id for e in qa] == ["longbook_qa_eng-0", "longbook_qa_eng-1"]
    assert qa[1].answers == ["the harbour of Lisk"]  # a bare string answer becomes a one-item list
    assert qa[0].task == "infinitebench_longbook_qa_eng" and qa[0].metric == "qa_f1_score"
    choice = load_infinitebench(fixtures / "infinitebench" / "longbook_choice_eng.jsonl")[0]
    assert choice.meta["options"] == ["Lisk", "Orvia", "Elmsford", "Wend"]
    passkey = load_infinitebench(fixtures / "infinitebench" / "passkey.jsonl")[0]
    assert passkey.answers == ["71432"]  # a number answer becomes a string


def test_infinitebench_unknown_task_name(fixtures, tmp_path):
    copy = tmp_path / "my_task.jsonl"
    shutil.copy(fixtures / "infinitebench" / "passkey.jsonl", copy)
    with pytest.raises(EvalDataError, match="unknown InfiniteBench task 'my_task'"):
        load_infinitebench(copy)
    assert load_infinitebench(copy, task="passkey")[0].task == "infinitebench_passkey"


def test_ultradomain(fixtures):
    examples = load_ultradomain(fixtures / "ultradomain" / "legal.jsonl")
    assert [e.id for e in examples] == ["ud-legal-0001", "ud-legal-0002"]
    assert examples[0].task == "ultradomain_legal"
    assert examples[0].meta["context_id"] == "ctx-legal-1"
    assert examples[0].meta["source_meta"] == {"title": "A sample lease", "authors": "Nobody"}


def test_loft_rag(fixtures):
    task = load_loft(fixtures / "loft" / "data" / "rag" / "nq" / "32k")
    assert task.name == "loft_rag_nq_32k" and [d.id for d in task.documents] == ["doc1", "doc2", "doc3"]
    assert task.documents[0].title == "The Book of Lisk"
    first = task.examples[0]
    assert first.metric == "subspan_em" and first.answers == ["Mara Quill"]
    assert first.gold_evidence == [{"kind": "document", "doc_id": "doc1", "relevance": 1}]
    assert first.context is None and first.documents is None


def test_loft_retrieval(fixtures):
    task = load_loft(fixtures / "loft" / "data" / "retrieval" / "hotpotqa" / "32k")
    example = task.examples[0]
    assert example.answers == ["hp1", "hp2"] and example.metric == "mrecall_at_k" and example.meta["k"] == 2
    assert example.meta["gold_doc_ids"] == ["hp1", "hp2"]


def test_loft_errors(fixtures, tmp_path):
    folder = tmp_path / "data" / "rag" / "nq" / "32k"
    shutil.copytree(fixtures / "loft" / "data" / "rag" / "nq" / "32k", folder)
    with pytest.raises(FileNotFoundError, match="test_queries.jsonl: no such file"):
        load_loft(folder, split="test")
    corpus = folder / "corpus.jsonl"
    lines = corpus.read_text().splitlines()
    corpus.write_text("\n".join([lines[0], lines[1].replace('"passage_text"', '"passage"')]) + "\n")
    with pytest.raises(EvalDataError, match=r"corpus\.jsonl:2: missing field 'passage_text'"):
        load_loft(folder)
    corpus.write_text(
        lines[0].replace("The Book of Lisk is a novel in twelve chapters by Mara Quill.", "") + "\n"
    )
    with pytest.raises(EvalDataError, match="needs infilling"):
        load_loft(folder)
    corpus.write_text(lines[0] + "\n")
    with pytest.raises(EvalDataError, match=r"dev_queries\.jsonl:2: qrels name pids not in"):
        load_loft(folder)


def test_longrag_jsonl_and_json_list(fixtures):
    hotpot = load_longrag(fixtures / "longrag" / "hotpot_qa.jsonl")[0]
    assert hotpot.task == "longrag_hotpot_qa" and hotpot.metric == "exact_match"
    assert [item["doc_id"] for item in hotpot.gold_evidence] == ["Ada Morrow", "Elmsford"]
    assert hotpot.meta["context_titles"] == ["Ada Morrow", "Elmsford", "Elmsford Mill"]
    nq = load_longrag(fixtures / "longrag" / "nq.json")
    assert [e.id for e in nq] == ["383", "384"] and nq[0].answers == ["12", "twelve"]


@pytest.mark.parametrize(
    ("loader", "line", "message"),
    [
        (load_longbench, {"input": "q", "context": "c"}, r"bad\.jsonl:2: missing field 'answers'"),
        (
            load_longbench,
            {"input": "q", "context": 5, "answers": ["a"]},
            r"bad\.jsonl:2: field 'context' must be str",
        ),
        (load_infinitebench, {"context": "c", "input": "q"}, r"bad\.jsonl:2: missing field 'answer'"),
        (
            load_ultradomain,
            {"input": "q", "context": "c", "answers": [{"x": 1}]},
            r"bad\.jsonl:2: field 'answers'",
        ),
        (load_longrag, {"query_id": "1", "answer": ["a"]}, r"bad\.jsonl:2: missing field 'query'"),
    ],
)
def test_malformed_lines_name_file_line_and_field(tmp_path, loader, line, message):
    good = {"input": "q", "context": "c", "answers": ["a"], "answer": ["a"], "query_id": "0", "query": "q"}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    kwargs = {"task": "passkey"} if loader is load_infinitebench else {}
    with pytest.raises(EvalDataError, match=message):
        loader(path, **kwargs)


def test_not_json_missing_file_and_empty_file(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"input": "q", "context": "c", "answers": ["a"]}\n{"input": \n')
    with pytest.raises(EvalDataError, match=r"broken\.jsonl:2: not valid JSON"):
        load_longbench(path)
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl: no such file"):
        load_ultradomain(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(EvalDataError, match="no LongBench records"):
        load_longbench(tmp_path / "empty.jsonl")
    (tmp_path / "dict.json").write_text('{"query": "q"}')
    with pytest.raises(EvalDataError, match="expected a JSON list"):
        load_longrag(tmp_path / "dict.json")


def test_loft_few_shot_queries_become_labelled_examples(fixtures, tmp_path):
    import shutil

    from memorag.evaluation.tasks.loaders import loft_few_shot

    folder = tmp_path / "data/rag/nq/32k"
    shutil.copytree(fixtures / "loft/data/rag/nq/32k", folder)
    assert loft_few_shot(folder) == []  # no few_shot_queries.jsonl: the cic mode generates its examples
    (folder / "few_shot_queries.jsonl").write_text(
        '{"qid": "fs1", "query_text": "what country is used in examples", "metadata": {"qrels": [["doc3", 1]]}, '
        '"answers": ["Orvia"]}\n')
    [example] = loft_few_shot(folder)
    assert example.query == "what country is used in examples" and example.answers == ("Orvia",)
    assert [document.id for document in example.documents] == ["doc3"]
    assert example.documents[0].text == "Orvia is an invented country used in examples."
