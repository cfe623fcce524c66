"""The clue-recall references: the base reading the whole context (the `memorag-full` mode's clues, over
the memory path's token ids) and the gold answer as the clue; resumable clue-recall records."""

from __future__ import annotations

import json

import pytest

from memorag.evaluation.clue_recall import run_clue_recall
from memorag.evaluation.clue_sources import full_context_clues, write_clues
from memorag.memory.memorizing import chain_hash
from memorag.modes import memorag_full
from memorag.modes.memorag import MemoRAGMode, clue_requests
from memorag.modes.results import memory_text
from memorag.pipeline import PipelineConfig
from tests.modes.test_memorag_full import tiny_tokenized_model, words
from tests.pipeline.conftest import TEST_SETTINGS, make_rag

from .conftest import FakeHashEmbedder, needle_examples


def test_full_context_clues_read_the_memory_paths_ids(monkeypatch):
    model = tiny_tokenized_model(1)
    rag = make_rag(model)
    rag.memorize(words(*range(10, 40)), with_memory=False)
    assert rag.memory is None  # the reference needs none
    seen: list[list[int]] = []

    def fake_reply(model, ids, max_new_tokens, cache):  # records what the base is given, answers a known text
        seen.append(ids)
        assert cache.get_seq_length() < len(ids)  # the context's keys and values, read once
        return words(50, 51)

    monkeypatch.setattr(memorag_full, "full_context_reply", fake_reply)
    question = words(60, 61, 62)
    clues, raw = full_context_clues(rag, question)
    settings = MemoRAGMode.settings_of(rag.config)
    requests = clue_requests(settings, question, "memorag", "en")
    assert list(raw) == list(requests) and len(seen) == len(requests)
    memory = model.memorize(memory_text(rag.documents))
    for ids, (prompt, _) in zip(seen, requests.values(), strict=True):
        prompt_ids = model.prompt_ids(prompt, memory)
        context = ids[: len(ids) - len(prompt_ids)]
        assert ids[len(context):] == prompt_ids and chain_hash("", context) == memory.content_sha256
    assert clues == [words(50, 51)]  # three equal replies, one clue


def test_answer_source_and_the_recall_records(tmp_path, data_files):
    needles, _ = data_files
    example = needle_examples()[0]
    assert write_clues("answer", make_rag(), example) == ([example.answers[0]], {"answer": example.answers[0]})
    with pytest.raises(ValueError, match="clue source 'oracle'"):
        write_clues("oracle", make_rag(), example)
    model = tiny_tokenized_model(1)
    out = tmp_path / "answer.jsonl"
    summary = run_clue_recall("given", needles, out, k=2, pipeline=PipelineConfig(**TEST_SETTINGS),
                              memory_model=model, embedder=FakeHashEmbedder(), embedder_name="fake-hash",
                              progress=False, clue_source="answer")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["clue_source"] == "answer" and [r["clue_source"] for r in records] == ["answer", "answer"]
    assert [r["clues"] for r in records] == [e.answers for e in needle_examples()]


def test_a_stopped_run_resumes_from_its_partial_records(tmp_path, data_files, monkeypatch):
    from memorag.evaluation import clue_recall as clue_recall_module
    from memorag.evaluation.results_store import ResultsMismatchError

    needles, _ = data_files
    model = tiny_tokenized_model(1)
    out = tmp_path / "clues.jsonl"
    asked: list[str] = []

    def stopping_writer(source, rag, example):  # the second question stops the run, as a kill would
        if len(asked) == 1:
            raise KeyboardInterrupt
        asked.append(example.id)
        return write_clues(source, rag, example)

    def run(k=2):
        return run_clue_recall("given", needles, out, k=k, pipeline=PipelineConfig(**TEST_SETTINGS),
                               memory_model=model, embedder=FakeHashEmbedder(), embedder_name="fake-hash",
                               progress=False, clue_source="answer")

    monkeypatch.setattr(clue_recall_module, "write_clues", stopping_writer)
    with pytest.raises(KeyboardInterrupt):
        run()
    partial = out.with_suffix(".partial.jsonl")
    lines = partial.read_text().splitlines()
    assert not out.exists() and len(lines) == 2 and json.loads(lines[1])["id"] == "needle-0"
    with pytest.raises(ResultsMismatchError, match="k differ"):
        run(k=3)  # other settings: refused, never mixed
    with open(partial, "a") as handle:
        handle.write('{"id": "needle-1", "clu')  # a torn last line, as a kill mid-write leaves
    asked.clear()
    monkeypatch.setattr(clue_recall_module, "write_clues", lambda source, rag, example: (
        asked.append(example.id), write_clues(source, rag, example))[1])
    summary = run()
    assert asked == ["needle-1"] and summary["n"] == 2 and not partial.exists()
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["needle-0", "needle-1"]
