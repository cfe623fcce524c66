"""Long-range QA samples for clue SFT: the pipeline's instruction, the task's answers, never an evaluated example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from memorag.evaluation.datasets.synthetic import generate_example
from memorag.prompting.prompts import MEMORY_ANSWER
from memorag.training.data import longrange_sft
from memorag.training.data.longrange_sft import LONGRANGE_SEED, LONGRANGE_TASKS, build_samples
from memorag.training.data.mixture import SYNTHETIC_SEED
from memorag.training.data.sft import SFTSample

ROOT = Path(__file__).resolve().parents[2]


def test_samples_are_sft_records_of_the_tasks_in_turn_with_the_qa_instruction():
    samples = build_samples(len(LONGRANGE_TASKS) + 2, (300,))
    assert [s["task"] for s in samples] == [f"longrange-{t}" for t in (*LONGRANGE_TASKS, *LONGRANGE_TASKS[:2])]
    for index, sample in enumerate(samples):
        SFTSample.from_record(sample)  # the SFT loader's checks
        task = LONGRANGE_TASKS[index % len(LONGRANGE_TASKS)]
        example = generate_example(task, 300, seed=LONGRANGE_SEED, index=index)
        assert sample["context"] == example.context
        assert sample["instruction"] == MEMORY_ANSWER["en"].format(question=example.question)
        assert sample["target"] == ", ".join(example.answers)
        assert sample["id"] == example.id


def test_no_sample_is_an_example_the_evaluation_or_the_pretraining_mixture_generates():
    samples = build_samples(16, (300,))
    trained = {(s["context"], s["target"]) for s in samples}
    for seed in (0, SYNTHETIC_SEED):  # the eval configs' seed, the mixture's
        for index in range(16):
            task = LONGRANGE_TASKS[index % len(LONGRANGE_TASKS)]
            example = generate_example(task, 300, seed=seed, index=index)
            assert (example.context, ", ".join(example.answers)) not in trained
    # every evaluation config generates its tasks from a seed the training samples never use
    for config in sorted((ROOT / "configs" / "eval").glob("*.yaml")):
        assert yaml.safe_load(config.read_text()).get("seed", 0) < SYNTHETIC_SEED < LONGRANGE_SEED, config.name


def test_a_context_with_a_held_out_verse_is_skipped(monkeypatch):
    flagged = []

    def holds(text, verses=None):
        flagged.append(text)
        return len(flagged) == 1  # the first context "holds" a held-out verse

    monkeypatch.setattr(longrange_sft, "holds_held_out_verse", holds)
    samples = build_samples(2, (300,), tasks=["niah_single"])
    assert [s["id"].rsplit("-", 1)[1] for s in samples] == ["1", "2"]  # index 0 skipped, the count still met


def test_context_lengths_are_drawn_from_the_given_ones_with_the_seed():
    first = build_samples(12, (300, 600), tasks=["niah_single"], seed=1)
    again = build_samples(12, (300, 600), tasks=["niah_single"], seed=1)
    assert first == again
    lengths = [int(s["id"].split("-")[-3]) for s in first]
    assert set(lengths) == {300, 600}
    assert build_samples(1, (300,), tasks=["niah_single"], seed=2)[0]["id"].endswith("-s20002-0")


@pytest.mark.parametrize(("arguments", "message"), [
    ({"num_samples": 0}, "at least one sample"),
    ({"num_samples": 2, "tasks": ["no_such_task"]}, "choose from"),
    ({"num_samples": 2, "context_tokens": (100,)}, "at least 256"),
    ({"num_samples": 2, "language": "fr"}, "instruction exists in"),
])
def test_bad_arguments_are_refused_with_the_fix(arguments, message):
    with pytest.raises(ValueError, match=message):
        build_samples(**arguments)


def test_the_script_writes_the_samples(tmp_path):
    from importlib import util

    spec = util.spec_from_file_location("build_longrange_sft", ROOT / "train" / "build_longrange_sft.py")
    script = util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "longrange.jsonl"
    assert script.main(["--samples", "3", "--tokens", "300", "--tokenizer", "none", "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task"] for r in records] == [f"longrange-{t}" for t in LONGRANGE_TASKS[:3]]


@pytest.mark.slow  # about 20 s: clue SFT of the tiny debug model over two files
def test_clue_sft_reads_the_long_range_samples_beside_the_clue_samples(tmp_path):
    import os
    import subprocess
    import sys

    longrange = tmp_path / "longrange.jsonl"
    from memorag.training.data.sft import write_samples

    write_samples(build_samples(4, (256,), tasks=["niah_single", "niah_multikey"]), longrange)
    run_dir = tmp_path / "sft"
    done = subprocess.run([sys.executable, "train/sft.py", "--config", "configs/debug-sft.yaml",
                           f"checkpoint.output_dir={run_dir}", "logging.progress_bar=false", "optim.epochs=1",
                           f"data.files=[examples/sft_debug.jsonl,{longrange}]"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["reason"] == "finished" and summary["step"] == 12  # one epoch of 8 + 4 samples, batch 1
    train = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    # a long-range sample's loss is on its answer: 7 digits and the end of the turn, a few bytes each
    assert min(r["loss_tokens"] for r in train if r["event"] == "train") < 20
