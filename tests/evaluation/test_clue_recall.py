"""generate_clues' library part on a tiny saved checkpoint: the recorded base, clues, and three recalls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memorag.evaluation.clue_recall import VARIANTS, load_checkpoint_model, recorded_base, run_clue_recall
from memorag.memory import MemoryConfig, MemoryModel
from memorag.memory.checkpoint import MemoryWeightsError
from memorag.pipeline import PipelineConfig
from tests.memory.conftest import perturb_memory_parameters, tiny_base
from tests.memory.test_persistence import tiny_tokenizer
from tests.pipeline.conftest import TEST_SETTINGS

from .conftest import FakeHashEmbedder


@pytest.fixture
def checkpoint(tmp_path):
    """A tiny random llama saved as a base folder, and memory weights trained on it (perturbed)."""
    base = tmp_path / "base"
    tiny_base("llama").save_pretrained(base)
    tiny_tokenizer().save_pretrained(base)
    model = MemoryModel.from_pretrained(str(base), config=MemoryConfig(window=16, ratios=[4]))
    perturb_memory_parameters(model, seed=1)
    return model.save_memory_weights(tmp_path / "final"), base


def test_checkpoint_records_its_base_and_loads_with_it(checkpoint):
    weights, base = checkpoint
    assert recorded_base(weights) == str(base)
    model = load_checkpoint_model(weights)
    assert model.config.ratios == [4] and model.name == str(base)
    with pytest.raises(MemoryWeightsError, match="holds no memory weights|is missing"):
        recorded_base(base)


def test_clues_and_recalls_per_example(checkpoint, tmp_path, data_files):
    weights, _ = checkpoint
    needles, corpus = data_files
    settings = {key: value for key, value in TEST_SETTINGS.items()}
    out = tmp_path / "clues" / "needles.jsonl"
    summary = run_clue_recall(weights, needles, out, k=2, pipeline=PipelineConfig(**settings),
                              embedder=FakeHashEmbedder(), embedder_name="fake-hash", progress=False)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["needle-0", "needle-1"] and summary["n"] == 2 and summary["k"] == 2
    for record in records:
        assert set(record["recall"]) == set(VARIANTS) and set(record["raw_clues"]) == {"spans", "questions", "draft"}
        assert all(len(record["hits"][name]) <= 2 for name in VARIANTS)
        # the query alone finds the needle with the fake embedder (as the rag mode does in test_runner)
        assert record["recall"]["query"] == 1.0
        if not record["clues"]:
            assert record["recall"]["clues"] == 0.0 and record["hits"]["clues"] == []
        # the cost beside each recall: the tokens of the ranked chunks it counted
        assert set(record["evidence_tokens"]) == set(VARIANTS)
        assert record["evidence_tokens"]["query"] > 0 and (record["hits"]["clues"] or not record["evidence_tokens"]["clues"])
    assert summary["recall@2 query"] == 100.0
    assert summary["evidence_tokens@2 query"] == sum(r["evidence_tokens"]["query"] for r in records) / 2
    assert json.loads(out.with_suffix(".summary.json").read_text())["recall@2 query"] == 100.0

    # a shared corpus folder: memorized once, gold documents by id
    corpus_summary = run_clue_recall(weights, corpus, tmp_path / "corpus.jsonl", k=1, num_examples=1,
                                     pipeline=PipelineConfig(**settings), embedder=FakeHashEmbedder(),
                                     progress=False)
    assert corpus_summary["n"] == 1 and corpus_summary["doc_recall_n"] == 1


def test_held_out_hotpotqa_data_come_from_rows_5000_and_above():
    from memorag.evaluation.clue_recall import read_data

    examples = read_data("hotpotqa:1024", tokenizer=None, num_examples=3)
    assert len(examples) == 3 and all(example.meta["row"] >= 5000 for example in examples)
    with pytest.raises(ValueError, match="hotpotqa:4096"):
        read_data("hotpotqa:many")


def test_paired_gain_over_the_query_with_a_bootstrap_interval():
    from memorag.evaluation.clue_recall import paired_gain, summarize

    def record(query, clues, both):
        recalls = {"query": query, "clues": clues, "query+clues": both}
        return {"recall": recalls, "doc_recall": dict(recalls)}

    always = [record(0.5, 0.0, 1.0)] * 4  # the union finds half a question more, every time
    assert paired_gain(always, "recall", "query+clues") == {
        "points": 50.0, "low": 50.0, "high": 50.0, "examples": 4, "bootstrap_samples": 10_000, "seed": 0}
    mixed = [record(0.0, 0.0, 1.0), record(1.0, 1.0, 0.0), record(0.5, 0.5, 1.0), record(None, None, None)]
    gain = paired_gain(mixed, "recall", "query+clues")
    assert gain["points"] == round(100 * (1 - 1 + 0.5) / 3, 2) and gain["examples"] == 3
    assert -100 <= gain["low"] < gain["points"] < gain["high"] <= 100
    assert paired_gain([record(None, None, None)], "recall", "clues") is None
    summary = summarize(always, k=3)
    assert summary["recall@3 clues - query"]["points"] == -50.0
    assert summary["doc_recall@3 query+clues - query"]["points"] == 50.0


def _records(rows):
    """Clue-recall records (id, query, clues, query+clues), the same recalls for sentences and documents."""
    records = []
    for question, query, clues, both in rows:
        recalls = {"query": query, "clues": clues, "query+clues": both}
        records.append({"id": question, "recall": recalls, "doc_recall": dict(recalls)})
    return records


def test_two_runs_compared_question_by_question():
    from memorag.evaluation.clue_recall import compare_records

    a = _records([("q1", 0.5, 0.0, 0.5), ("q2", 0.5, 0.5, 0.5), ("q3", 0.0, 0.0, 0.0)])
    b = _records([("q3", 0.0, 0.5, 1.0), ("q1", 0.5, 0.0, 0.5), ("q2", 0.5, 0.0, 0.0)])  # another order
    result = compare_records(a, b, k=3)
    assert result["recall@3 query+clues: B - A"]["points"] == round(100 * (1.0 - 0.5) / 3, 2)
    assert result["recall@3 query+clues: better / worse / same"] == [1, 1, 1]
    assert result["doc_recall@3 clues: better / worse / same"] == [1, 1, 1]
    with pytest.raises(ValueError, match="different questions"):
        compare_records(a, b[:2], k=3)
    other_query = _records([("q1", 1.0, 0.0, 1.0), ("q2", 0.5, 0.5, 0.5), ("q3", 0.0, 0.0, 0.0)])
    with pytest.raises(ValueError, match="query's recall differs"):
        compare_records(a, other_query, k=3)


def test_the_comparison_script_writes_its_table(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("clue_gains", Path(__file__).resolve().parents[2] / "eval/clue_gains.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for name, rows in (("a", [("q1", 0.5, 0.0, 0.5)]), ("b", [("q1", 0.5, 1.0, 1.0)])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _records(rows)))
    script.main(["--compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--out", str(tmp_path / "ab")])
    assert "| sentences | query+clues | +50.0 [+50.0, +50.0] | 1 / 0 / 0 |" in capsys.readouterr().out
    assert json.loads((tmp_path / "ab.json").read_text())["n"] == 1
    with pytest.raises(SystemExit, match="no such file"):
        script.main(["--compare", str(tmp_path / "a.jsonl"), str(tmp_path / "none.jsonl")])
