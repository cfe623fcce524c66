"""The common example schema, its JSON-lines files, corpus folders, length counting and title links."""

from __future__ import annotations

import json

import pytest

from memorag.evaluation.datasets.assembly import link_by_title_mentions, title_core
from memorag.evaluation.datasets.lengths import LengthCounter, approx_tokens, count_tokens
from memorag.evaluation.datasets.schema import (
    CorpusTask,
    EvalDataError,
    EvalExample,
    load_corpus_task,
    read_examples,
    save_corpus_task,
    write_examples,
)
from memorag.retrieval.chunking import Document


def _example(**overrides) -> EvalExample:
    fields = dict(
        id="q1",
        task="unit_test",
        question="Where is the key?",
        answers=["under the mat"],
        context="Hello. The key is under the mat. Bye.",
        gold_evidence=[{"kind": "needle", "start": 7, "end": 32, "text": "The key is under the mat."}],
        metric="qa_f1_score",
        meta={"seed": 3},
        proxy=True,
    )
    fields.update(overrides)
    return EvalExample(**fields)


def test_round_trip_through_jsonl(tmp_path):
    examples = [
        _example(),
        _example(
            id="q2",
            context=None,
            gold_evidence=[],
            documents=[Document(id="d1", text="Some text.", title="D", links=["d2"])],
        ),
    ]
    path = write_examples(tmp_path / "set.jsonl", examples)
    assert read_examples(path) == examples
    assert not list(tmp_path.glob(".*tmp"))  # atomic write left no temporary file


def test_evidence_problems_flags_wrong_spans():
    assert _example().evidence_problems() == []
    bad = _example(gold_evidence=[{"kind": "needle", "start": 0, "end": 5, "text": "The key"}])
    assert "holds 'Hello'" in bad.evidence_problems()[0]
    out_of_range = _example(gold_evidence=[{"kind": "needle", "start": 0, "end": 999}])
    assert "outside the context" in out_of_range.evidence_problems()[0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"answers": "under the mat"}, "answers must be a list of str"),
        ({"id": ""}, "id must not be empty"),
        ({"gold_evidence": [{"start": 1}]}, "each with a 'kind'"),
        ({"documents": ["not a document"]}, "expected Document"),
    ],
)
def test_schema_rejects_bad_fields(overrides, message):
    with pytest.raises((TypeError, ValueError), match=message):
        _example(**overrides)


def test_read_examples_names_file_line_and_field(tmp_path):
    path = tmp_path / "broken.jsonl"
    good = json.dumps(_example().to_dict())
    path.write_text(good + "\n\n" + json.dumps({"id": "x", "task": "t", "question": "q"}) + "\n")
    with pytest.raises(EvalDataError, match=r"broken\.jsonl:3: missing field 'answers'"):
        read_examples(path)
    path.write_text(good + "\n{not json\n")
    with pytest.raises(EvalDataError, match=r"broken\.jsonl:2: not valid JSON"):
        read_examples(path)
    path.write_bytes(good.encode() + b"\n\xff\xfe\n")
    with pytest.raises(EvalDataError, match=r"broken\.jsonl:2: not UTF-8 text"):
        read_examples(path)
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl: no such file"):
        read_examples(tmp_path / "nowhere.jsonl")


def test_corpus_task_folder_round_trip(tmp_path):
    task = CorpusTask(
        name="tiny",
        documents=[
            Document(id="a", text="Alpha text.", title="Alpha", links=["b"]),
            Document(id="b", text="Beta."),
        ],
        examples=[_example(context=None, gold_evidence=[{"kind": "document", "doc_id": "a"}])],
        meta={"seed": 1},
    )
    save_corpus_task(task, tmp_path / "tiny")
    assert load_corpus_task(tmp_path / "tiny") == task
    (tmp_path / "tiny" / "task.json").write_text(json.dumps({"name": "tiny", "format_version": 99}))
    with pytest.raises(EvalDataError, match="format_version 99"):
        load_corpus_task(tmp_path / "tiny")


def test_length_counter_approximate_and_exact(word_tokenizer, char_tokenizer):
    text = "one two three four five six seven eight nine ten"
    assert approx_tokens(text) == 13
    approx = LengthCounter(tokens_per_word=2.0)
    assert approx(text) == 20 and approx.cost("a b") == 4.0 and approx.unit == "approx_tokens"
    exact = LengthCounter(word_tokenizer)
    assert exact("Hello, world.") == 4  # no special token: add_special_tokens=False was passed
    assert exact.describe() == {"length_unit": "tokens", "tokenizer": "fake-word-piece"}
    assert count_tokens(char_tokenizer, "abcdefgh") == 2  # encode(text) without keyword arguments
    assert count_tokens(lambda text: len(text), "abc") == 3  # a callable returning a count
    with pytest.raises(ValueError, match="tokens_per_word"):
        LengthCounter(tokens_per_word=0)


def test_links_follow_title_mentions():
    documents = [
        Document(id="Ed Wood", text="Edward Davis Wood Jr. was an American filmmaker.", title="Ed Wood"),
        Document(
            id="Ed Wood (film)",
            text="Ed Wood is a 1994 film about Ed Wood, starring Johnny Depp.",
            title="Ed Wood (film)",
        ),
        Document(
            id="Johnny Depp", text="Johnny Depp is an actor. He played Ed Woodson once.", title="Johnny Depp"
        ),
        Document(id="It", text="It is a novel.", title="It"),
    ]
    linked = {d.id: d.links for d in link_by_title_mentions(documents)}
    # The core "Ed Wood" names both "Ed Wood" pages; a page never links to itself.
    assert linked["Ed Wood (film)"] == ["Ed Wood", "Johnny Depp"]
    assert linked["Johnny Depp"] == []  # "Ed Woodson" is not a mention of "Ed Wood"; "It" is too short
    assert linked["Ed Wood"] == []
    assert title_core("Ed Wood (film)") == "Ed Wood"
