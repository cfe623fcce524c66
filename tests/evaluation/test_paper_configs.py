"""The released-model configs (configs/eval/paper-released-*.yaml): the paper's settings, the memory
weights going to the released-checkpoint loader, and the recommended large-scale set-up end to end,
the memory model in the harness's process and the generator behind an OpenAI-compatible server (a FAKE
one here), on a tiny checkpoint in the released format (tests/fixtures/official_beacon) and tiny files
in the benchmarks' original formats, whole and in two shards merged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from memorag.config import ConfigError, config_from_dict
from memorag.evaluation import EvalConfig, load_eval_config, run_evaluation
from memorag.evaluation.merge import merge_shards
from memorag.evaluation.results_store import EXAMPLES_FILE, MODELS_FILE
from memorag.memory import MemoryModel
from tests.evaluation.test_second_reader import FakeNumberServer
from tests.memory.test_persistence import tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {"qwen2": ROOT / "configs/eval/paper-released-qwen2.yaml",
           "mistral": ROOT / "configs/eval/paper-released-mistral.yaml"}
FIXTURE = ROOT / "tests/fixtures/official_beacon/mistral-r4-w32-n150"
PAPER_TASKS = ["nar", "qas", "mul", "mus", "2wiki", "hot", "news", "gov", "en_sum", "en_qa", "fin", "legal", "mix"]
SUMMARIES = {"news", "gov", "en_sum"}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_released_configs_hold_the_papers_settings(name):
    config = load_eval_config(CONFIGS[name])
    pipeline = config.pipeline
    assert pipeline.memory_model == f"TommyChien/memorag-{name}-7b-inst" and pipeline.memory_weights == "auto"
    assert (pipeline.embedder, pipeline.retriever, pipeline.chunk_tokens) == ("BAAI/bge-m3", "dense", 512)
    assert (pipeline.memorag_evidence, pipeline.memorag_hits, pipeline.hits_per_query) == ("reference", 3, 3)
    assert pipeline.clue_kinds == ["spans", "questions", "draft"]
    assert pipeline.generator == "mistralai/Mistral-7B-Instruct-v0.2" and config.answer_prompts == "benchmark"
    assert [task.name for task in config.tasks] == PAPER_TASKS
    sources = {task.name: task.source for task in config.tasks}
    assert {sources[n] for n in PAPER_TASKS[:8]} == {"longbench"} and sources["fin"] == "ultradomain"
    assert sources["en_qa"] == sources["en_sum"] == "infinitebench"
    for task in config.tasks:
        assert Path(task.path).relative_to(Path.cwd() / "data")  # the files go under data/ (see the docs page)
        modes = config.task_modes(task)
        assert modes == (["full", "rag", "memorag"] if task.name in SUMMARIES else config.modes)
        assert task.kind == ("summarize" if task.name in SUMMARIES else "qa")


def test_a_task_is_asked_in_the_runs_modes_it_names():
    config = load_eval_config(CONFIGS["qwen2"], ["modes=[hyde,memorag]"])
    assert [config.task_modes(task) for task in config.tasks if task.name in ("hot", "gov")] == [
        ["hyde", "memorag"], ["memorag"]]
    assert config.task_modes(config.tasks[0]) == ["hyde", "memorag"]
    assert load_eval_config(CONFIGS["qwen2"], ["modes=[hyde]"]).task_modes(config.tasks[7]) == []  # gov: skipped
    with pytest.raises(ConfigError, match="unknown mode 'nonsense'"):
        config_from_dict(EvalConfig, {"tasks": [{"name": "n", "source": "synthetic", "generator": "niah_single",
                                                 "modes": ["nonsense"]}]})


@pytest.fixture
def released_checkpoint(tmp_path) -> Path:
    """The tiny released-format checkpoint with a tokenizer beside it (the pipeline reads text)."""
    folder = tmp_path / "released"
    shutil.copytree(FIXTURE, folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def test_the_configs_memory_weights_go_to_the_released_loader(released_checkpoint):
    weights = load_eval_config(CONFIGS["mistral"]).pipeline.memory_weights
    model = MemoryModel.from_pretrained(str(released_checkpoint), memory_weights=weights, dtype=torch.float32)
    assert model.config.ratios == [4] and model.config.window == 32  # the checkpoint's beacon_* settings
    with pytest.raises(ValueError, match="carries its own memory weights"):
        MemoryModel.from_pretrained(str(released_checkpoint), memory_weights="untrained")


def test_adaptive_ratios_read_a_released_checkpoint_beyond_its_reach_at_4(released_checkpoint):
    """docs/reproducing-the-paper.md's setting for InfiniteBench: ratio 4 where it reaches, 8 beyond."""
    from memorag.memory import MemoryConfig

    model = MemoryModel.from_pretrained(str(released_checkpoint), dtype=torch.float32,
                                        config=MemoryConfig(window=32, ratios=[4, 8], ratio_mix="adaptive"))
    assert (model.choose_ratio(3000), model.choose_ratio(6000)) == (4, 8)


def _write_benchmark_files(root: Path) -> None:
    """One question per file, in each benchmark's original format, the answer a number in the context."""
    filler = "the grass is green and the sky is blue over the quiet town today ."

    def context(number: int) -> str:
        return f"{filler * 6} the code is {number} . {filler * 6}"

    files = {}
    for index, dataset in enumerate(["narrativeqa", "qasper", "multifieldqa_en", "musique", "2wikimqa", "hotpotqa",
                                     "multi_news", "gov_report"]):
        number = 4817260 + index
        summary = dataset in ("multi_news", "gov_report")
        files[f"longbench/{dataset}.jsonl"] = {
            "input": "" if summary else "What is the code ?", "context": context(number),
            "answers": ["the grass is green" if summary else str(number)], "length": 200, "dataset": dataset,
            "language": "en", "all_classes": None, "_id": f"{dataset}-0"}
    files["infinitebench/longbook_qa_eng.jsonl"] = {"id": 0, "context": context(5550001), "input": "What is the code ?",
                                                    "answer": ["5550001"], "options": []}
    files["infinitebench/longbook_sum_eng.jsonl"] = {"id": 0, "context": context(5550002), "input": "",
                                                     "answer": ["the grass is green"], "options": []}
    for index, domain in enumerate(("fin", "legal", "mix")):
        files[f"ultradomain/{domain}.jsonl"] = {"input": "What is the code ?", "context": context(6660000 + index),
                                                "answers": [str(6660000 + index)], "_id": f"{domain}-0"}
    for name, record in files.items():
        path = root / "data" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record) + "\n")


def _tiny_overrides(checkpoint: Path, server_url: str, out: Path, device: str) -> list[str]:
    """The released config made tiny: the fixture as the memory model, BM25 (no embedder download), the
    fake server as the generator, budgets for a 1,024-position model."""
    return [f"pipeline.memory_model={checkpoint}", "pipeline.embedder=null", "pipeline.retriever=bm25",
            f"pipeline.generator={server_url}", f"pipeline.device={device}", "pipeline.dtype=float32", "num_examples=1",
            "pipeline.chunk_tokens=16", "pipeline.evidence_tokens=64", "pipeline.clue_max_new_tokens=6",
            "pipeline.max_clues=2", "pipeline.answer_max_new_tokens=8", "pipeline.summary_max_new_tokens=8",
            "pipeline.generator_window=2048", "pipeline.hyde.max_new_tokens=8", "pipeline.rqrag.max_new_tokens=8",
            "plots=false", "progress=false", f"out_dir={out}"]


def _records(out: Path) -> dict[tuple, dict]:
    lines = [json.loads(line) for line in (out / EXAMPLES_FILE).read_text().splitlines()]
    return {(r["mode"], r["task"], r["example_id"]): {k: v for k, v in r.items() if k not in ("timings", "ask", "prepare")}
            for r in lines}


@pytest.mark.parametrize("device", [pytest.param("cpu", marks=pytest.mark.slow), pytest.param("cuda", marks=pytest.mark.cuda)])
def test_the_released_path_through_the_harness_with_a_served_generator(tmp_path, released_checkpoint, monkeypatch,
                                                                       device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _write_benchmark_files(tmp_path)
    monkeypatch.chdir(tmp_path)  # the config's data/ paths
    server = FakeNumberServer()
    try:
        config = load_eval_config(CONFIGS["mistral"], _tiny_overrides(released_checkpoint, server.url,
                                                                    tmp_path / "whole", device))
        cells, _ = run_evaluation(config, command="pytest")
        for index in range(2):
            shard = load_eval_config(CONFIGS["mistral"], [*_tiny_overrides(released_checkpoint, server.url,
                                                                         tmp_path / "sharded", device),
                                                        f"shard={index}/2"])
            run_evaluation(shard, command="pytest")
        merged = load_eval_config(CONFIGS["mistral"], _tiny_overrides(released_checkpoint, server.url,
                                                                    tmp_path / "sharded", device))
        merge_shards(merged, command="pytest")
    finally:
        server.close()

    assert len(cells) == 10 * 5 + 3 * 3
    by_cell = {(cell["mode"], cell["task"]): cell for cell in cells}
    assert by_cell["rag", "hot"]["score"] == 100.0 and by_cell["rag", "fin"]["score"] == 100.0  # served, read back
    assert by_cell["memorag", "en_sum"]["pipeline_task"] == "summarize"
    records = _records(tmp_path / "whole")
    memorag = records["memorag", "hot", "hotpotqa-0"]
    assert memorag["raw_clues"] and memorag["generator"].startswith("fake-reader@")  # clues from the memory
    assert memorag["answer_prompt"]["name"] == "longbench:hotpotqa"
    models = json.loads((tmp_path / "whole" / MODELS_FILE).read_text())
    assert models["memory_weights"] == f"released in {released_checkpoint}"
    assert _records(tmp_path / "sharded") == records


@pytest.mark.slow
def test_processes_of_a_launcher_each_take_a_shard_and_the_merge_joins_them(tmp_path, released_checkpoint):
    """torchrun (what `accelerate launch --multi_gpu` runs) starts two processes of eval/run.py: each asks
    the shard of its RANK; `--merge` then writes the run's files."""
    _write_benchmark_files(tmp_path)
    server = FakeNumberServer()
    out = tmp_path / "out"
    settings = [*_tiny_overrides(released_checkpoint, server.url, out, "cpu"), "modes=[rag,memorag]"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    script = [str(ROOT / "eval" / "run.py"), "--config", str(CONFIGS["mistral"]), *settings]
    try:
        launched = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                   "--nproc_per_node", "2", *script], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=600)
        assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
        merged = subprocess.run([sys.executable, *script, "--merge"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=600)
        assert merged.returncode == 0, merged.stderr[-3000:]
    finally:
        server.close()
    for index in range(2):
        manifest = json.loads((out / "shards" / f"{index}-of-2" / "shard.json").read_text())
        assert manifest["shard"] == f"{index}/2" and manifest["complete"]
    records = _records(out)
    assert len(records) == 10 * 2 + 3 * 2 and "## Quality" in merged.stdout
