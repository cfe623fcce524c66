"""The third stage (RLGF): pairs of sampled clue sets scored through the pipeline, then DPO on the memory.

The pairs are built from HotpotQA tuning rows by the tiny random Llama of configs/debug-rlgf.yaml with a
FAKE embedder and a FAKE reader (tests/pipeline/conftest.py); a clue set's log-probability read through
the memory equals the memory model's own loss over the whole sequence; the reference recorded in a
pair is the model the run starts from (the first loss is log 2); the loss falls on a repeated pair; a run
stopped and resumed ends bit for bit as an uninterrupted one; unknown and unread settings, held-out
rows, pairs of other weights and a pairs file changed under a resume are refused.
"""

from __future__ import annotations

import json
import math
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from memorag.config import ConfigError, load_config
from memorag.training.cli import train_main
from memorag.training.config import TrainConfig
from memorag.training.errors import TrainingInputError
from memorag.training.rlgf_pairs import pair_of, read_records, rewrite_pairs
from tests.pipeline.conftest import FakeEchoGenerator, FakeHashEmbedder, tiny_model
from tests.training.helpers import (
    ROOT,
    TORCHRUN,
    free_port,
    launch_env,
    reset_accelerate,
    resumed_equals_straight,
    train_losses,
)

DEBUG_RLGF = ROOT / "configs" / "debug-rlgf.yaml"
QUIET = ("logging.progress_bar=false", "optim.schedule=constant")


def rlgf_config(output_dir: Path, *overrides: str) -> TrainConfig:
    return load_config(TrainConfig, DEBUG_RLGF, [f"checkpoint.output_dir={output_dir}", *QUIET, *overrides])


def fake_models(cfg: TrainConfig):
    from memorag.training.build import build_model
    from memorag.training.rlgf_pairs import PairModels
    from memorag.training.trainer import use_bf16

    model = build_model(cfg.model, cfg.memory, bf16=use_bf16(cfg.precision))
    return PairModels(model, FakeHashEmbedder(), "fake-hash", FakeEchoGenerator())


def build(cfg: TrainConfig, out: Path, on_question=None) -> dict:
    from memorag.training.rlgf_pairs import build_from_config

    return build_from_config(cfg, out, models=fake_models(cfg), on_question=on_question)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    """The debug config's pairs (6 tuning questions, 4 clue sets each), built with the fake embedder and reader."""
    out = tmp_path_factory.mktemp("rlgf") / "pairs.jsonl"
    build(rlgf_config(out.parent / "unused"), out)
    return out


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def subset(pairs: Path, folder: Path, count: int, **changes) -> Path:
    """The first `count` pairs of `pairs` (each with `changes`) as a file of their own."""
    path = folder / f"pairs-{count}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({**record, **changes}) + "\n" for record in records(pairs)[:count]))
    return path


def run(cfg: TrainConfig) -> dict:
    from memorag.training.rlgf_trainer import RLGFTrainer

    reset_accelerate()
    return RLGFTrainer(cfg).train()


def test_a_clue_sets_log_probability_is_the_memory_models_loss_over_the_whole_sequence():
    from memorag.training.rlgf_objective import branch_rows, clue_logprobs

    model = tiny_model()
    model.gradient_checkpointing = True
    context = torch.randint(2, 90, (1, 37))  # two windows of 16 and a part of a third
    prompts, replies = [[5, 6, 7], [8, 9]], [[10, 11, 12, 13, 14], [15, 16, 17]]
    input_ids, labels = branch_rows(prompts, replies, pad=0)
    read = clue_logprobs(model, context, input_ids, labels, ratio=4)
    for row in range(2):
        whole = torch.cat([context[0], torch.tensor(prompts[row] + replies[row])])[None]
        whole_labels = torch.full_like(whole, -100)
        whole_labels[0, -len(replies[row]):] = whole[0, -len(replies[row]):]
        with torch.no_grad():
            output = model(whole, labels=whole_labels)
        torch.testing.assert_close(read[row], -output.loss * output.num_loss_tokens)
    read.sum().backward()  # the gradient reaches the memory parameters through the context's memory
    assert any(float(p.grad.abs().sum()) > 0 for p in model.memory_parameters().values() if p.grad is not None)


def test_the_pairs_are_tuning_questions_best_against_worst_with_the_starting_models_reference(pairs):
    from memorag.training.build import build_model

    stats = json.loads(pairs.with_name(pairs.name + ".stats.json").read_text())
    kept = records(pairs)
    assert stats["questions"] == 6 and stats["pairs"] == len(kept) >= 2 and not pairs.with_name("pairs.jsonl.partial").exists()
    questions = list(read_records(pairs.with_name("pairs.jsonl.questions")).values())
    assert len(questions) == 6 and sum(q["dropped"] is None for q in questions) == len(kept)
    by_id = sorted(questions, key=lambda question: question["id"])  # the file's order, however the build ran
    assert [pair_of(q) for q in by_id if q["dropped"] is None] == kept and "context" not in kept[0]
    cfg = rlgf_config(Path("unused"))
    starting = build_model(cfg.model, cfg.memory).memory_weights_hash()
    for record in kept:
        assert record["task"].startswith("hotpotqa") and 0 <= record["row"] < 5000
        assert record["kinds"] == ["spans", "questions", "draft"]
        sets = next(q for q in questions if q["id"] == record["id"])["sets"]
        scores = [item["score"] for item in sets]
        assert len(sets) == 4 and record["chosen"]["score"] == max(scores) > record["rejected"]["score"] == min(scores)
        assert record["reference"]["memory_weights_sha256"] == starting == stats["reference_memory_weights_sha256"]


def test_the_stage_trains_the_memory_and_the_loss_falls_on_a_repeated_pair(tmp_path, pairs):
    one = subset(pairs, tmp_path, 1)
    status = train_main("rlgf", ["--config", str(DEBUG_RLGF), f"checkpoint.output_dir={tmp_path / 'run'}", *QUIET,
                                 f"data.files=[{one}]", "optim.max_steps=4", "checkpoint.every_steps=4"])
    assert status == 0  # what train/rlgf.py runs
    losses = train_losses(tmp_path / "run")
    assert losses[1] == pytest.approx(math.log(2), abs=1e-4)  # the policy starts as the recorded reference
    assert all(math.isfinite(loss) for loss in losses.values()) and losses[4] < losses[1]
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    last = [r for r in log if r["event"] == "train"][-1]
    assert last["reward_accuracy"] == 1.0 and last["reward_margin"] > 0
    trained = load_file(str(tmp_path / "run" / "final" / "memory_weights.safetensors"))
    assert trained and (tmp_path / "run" / "final" / "train_config.yaml").is_file()
    # the diagnostic of a finished run: the trained weights rank the pair they fitted above the starting ones
    from memorag.training.rlgf_ranking import rank_pairs

    cfg = rlgf_config(tmp_path / "unused", f"data.files=[{one}]")
    ranked = rank_pairs(cfg, str(tmp_path / "run" / "final"), num_pairs=None, progress=False)
    (row,) = ranked["rows"]
    assert row["starting"] == pytest.approx(row["reference"], abs=1e-4)  # read as the trainer read the reference
    assert row["reward_margin"] > 0 and ranked["trained over starting: chosen ranked higher (%)"]["points"] == 100.0
    unchanged = rank_pairs(cfg, cfg.model.memory_weights, num_pairs=None, progress=False)
    assert unchanged["rows"][0]["reward_margin"] == 0.0  # the starting weights against themselves
    assert unchanged["trained over starting: chosen ranked higher (%)"]["points"] == 0.0


def test_the_ranking_script_names_a_missing_pairs_file_before_loading_a_model(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "train/rank_rlgf_pairs.py"), "--config", str(DEBUG_RLGF),
                             "--weights", str(tmp_path), f"data.files=[{tmp_path / 'none.jsonl'}]"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "no pairs file" in result.stderr and "build_rlgf_pairs.py" in result.stderr


def test_in_bf16_the_pairs_are_built_as_the_trainer_reads_them(tmp_path):
    settings = ["precision=bf16", f"data.files=[{tmp_path / 'pairs.jsonl'}]"]
    assert build(rlgf_config(tmp_path / "unused", *settings), tmp_path / "pairs.jsonl")["pairs"] >= 1
    run(rlgf_config(tmp_path / "run", *settings, "optim.max_steps=1"))  # bf16 weights, float32 memory parameters
    assert train_losses(tmp_path / "run")[1] == pytest.approx(math.log(2), abs=1e-3)


def test_sets_sampled_in_bf16_keep_the_reference_of_the_float32_model_the_trainer_starts_from(tmp_path):
    """Under `rlgf.pipeline.dtype=bfloat16` a float32 run's clue sets are sampled and scored by a bf16 copy
    of the same weights (memory parameters included), and the pairs' reference is the float32 model's: the
    trainer's first loss is log 2."""
    from memorag.training.build import build_model
    from memorag.training.rlgf_pairs import PairModels, build_from_config, pipeline_settings, sampling_model

    cfg = rlgf_config(tmp_path / "unused", f"data.files=[{tmp_path / 'pairs.jsonl'}]", "rlgf.pipeline.dtype=bfloat16")
    model = build_model(cfg.model, cfg.memory)
    sampler = sampling_model(cfg, pipeline_settings(cfg), model)
    assert sampler is not model and sampler.base_dtype == torch.bfloat16
    for name, parameter in sampler.memory_parameters().items():
        reference = model.memory_parameters()[name]
        assert parameter.dtype == torch.bfloat16 and reference.dtype == torch.float32
        assert torch.equal(parameter, reference.to(torch.bfloat16))
    built = dict(model.named_parameters())
    assert all(torch.equal(parameter, built[name].to(torch.bfloat16)) for name, parameter in sampler.named_parameters())
    assert sampling_model(cfg, pipeline_settings(rlgf_config(tmp_path, "rlgf.pipeline.dtype=float32")), model) is model
    models = PairModels(sampler, FakeHashEmbedder(), "fake-hash", FakeEchoGenerator(), reference=model)
    stats = build_from_config(cfg, tmp_path / "pairs.jsonl", models=models)
    questions = list(read_records(tmp_path / "pairs.jsonl.questions").values())
    assert {q["sampler_dtype"] for q in questions} == {"bfloat16"} and stats["pairs"] >= 1
    kept = records(tmp_path / "pairs.jsonl")
    assert {r["reference"]["memory_weights_sha256"] for r in kept} == {model.memory_weights_hash()}
    run(rlgf_config(tmp_path / "run", f"data.files=[{tmp_path / 'pairs.jsonl'}]", "optim.max_steps=1"))
    assert train_losses(tmp_path / "run")[1] == pytest.approx(math.log(2), abs=1e-4)


def test_auto_samples_in_bf16_where_the_cpu_computes_it_natively(monkeypatch):
    from memorag.runtime import cpu_dtype
    from memorag.training.build import build_model
    from memorag.training.rlgf_pairs import pipeline_settings, sampling_dtype

    cfg = rlgf_config(Path("unused"))
    model, pipeline = build_model(cfg.model, cfg.memory), pipeline_settings(cfg)
    assert pipeline.dtype == "auto"
    monkeypatch.setattr(cpu_dtype, "native_on_cpu", lambda dtype: True)
    assert sampling_dtype(pipeline, model) == torch.bfloat16
    monkeypatch.setattr(cpu_dtype, "native_on_cpu", lambda dtype: False)
    assert sampling_dtype(pipeline, model) == torch.float32  # the model's own: no copy


def test_a_stopped_and_resumed_run_ends_with_the_memory_of_an_uninterrupted_one(tmp_path, pairs):
    settings = [f"data.files=[{pairs}]", "optim.max_steps=4", "checkpoint.every_steps=100"]
    resumed_equals_straight(run, rlgf_config, tmp_path, settings, 2, 4, "memory_weights.safetensors")


def test_a_resume_over_a_changed_pairs_file_is_refused(tmp_path, pairs):
    data = subset(pairs, tmp_path, 2)
    settings = [f"data.files=[{data}]", "optim.max_steps=4"]
    run(rlgf_config(tmp_path / "run", *settings, "optim.stop_at_step=1"))
    lines = data.read_text().splitlines()
    data.write_text("\n".join([lines[1], lines[0]]) + "\n")  # the same pairs, in another order
    with pytest.raises(ConfigError, match="differ from those this run was trained on"):
        run(rlgf_config(tmp_path / "run", *settings))


def test_pairs_of_held_out_rows_other_weights_or_other_contexts_are_refused(tmp_path, pairs):
    held_out = subset(pairs, tmp_path / "held-out", 1, row=5000)
    with pytest.raises(TrainingInputError, match="not a tuning row"):
        run(rlgf_config(tmp_path / "a", f"data.files=[{held_out}]", "optim.max_steps=1"))
    with pytest.raises(TrainingInputError, match="reference log-probabilities come from memory weights"):
        run(rlgf_config(tmp_path / "b", f"data.files=[{subset(pairs, tmp_path, 1)}]", "optim.max_steps=1",
                        "model.init_seed=1"))
    with pytest.raises(TrainingInputError, match="is not a question of this run's rlgf"):
        run(rlgf_config(tmp_path / "c", f"data.files=[{subset(pairs, tmp_path / 'c', 1, id='elsewhere')}]"))
    with pytest.raises(TrainingInputError, match="tokenizes to other ids"):
        run(rlgf_config(tmp_path / "d", f"data.files=[{subset(pairs, tmp_path / 'd', 1, context_sha256='0' * 64)}]"))
    assert not [path for run_dir in "abcd" for path in (tmp_path / run_dir).glob("checkpoint-*")]


def test_only_a_functional_cache_is_continued():
    from memorag.memory.windowed_scoring import read_windows

    model = tiny_model()
    with pytest.raises(ValueError, match="must be functional"):
        read_windows(model, torch.ones(1, 4, dtype=torch.long), lambda hidden, columns: (), cache=model.new_cache(),
                     ratio_of=model.ratio_function(4))


def test_no_held_out_question_is_sampled_or_scored():
    from memorag.evaluation.datasets.schema import EvalExample
    from memorag.training.rlgf_pairs import check_tuning, question_record

    example = EvalExample(id="q", task="hotpotqa_dev_longctx", question="Who?", answers=["A"], context="text",
                          meta={"row": 5000})
    with pytest.raises(TrainingInputError, match="not a tuning row"):
        question_record(None, None, example, None, 0)  # refused before any model is touched
    with pytest.raises(TrainingInputError, match="tuning articles"):
        check_tuning("squad_v2_dev_longctx", {"split": "eval"}, "question")
    check_tuning("hotpotqa_dev_longctx", {"row": 4999}, "question")


def test_a_stopped_build_goes_on_where_it_stopped_and_gives_the_same_pairs(tmp_path, pairs, monkeypatch):
    monkeypatch.setattr("memorag.training.rlgf_pairs.SHARD_QUESTIONS", 2)
    out = tmp_path / "pairs.jsonl"
    cfg = rlgf_config(tmp_path / "unused")

    partial = out.with_name("pairs.jsonl.partial")

    def stop_after_three(record):
        if len(read_records(partial)) == 3:
            with open(partial / "part-00001.jsonl", "a") as handle:  # the shards' order (2 a shard) and a torn line
                handle.write('{"id": "torn')
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build(cfg, out, on_question=stop_after_three)
    assert not out.exists() and sorted(p.name for p in partial.iterdir()) == ["part-00000.jsonl", "part-00001.jsonl"]
    stats = build(cfg, out)
    assert stats["resumed_questions"] == 3
    assert records(out) == records(pairs)
    strip = lambda rows: [{k: v for k, v in row.items() if k not in ("build_s", "build_shares", "timings")} for row in rows]  # noqa: E731
    questions = [read_records(path.with_name(path.name + ".questions")).values() for path in (out, pairs)]
    assert strip(questions[0]) == strip(questions[1])


@pytest.mark.parametrize("override, named", [
    ("rlgf.betta=1", "betta"),
    ("loss.kind=distill", "loss.kind"),
    ("data.batch_size=2", "data.batch_size"),
    ("memory.ratios=[4,8] memory.ratio_mix=step-random", "memory.ratios"),
    ("rlgf.samples=1", "rlgf.samples"),
    ("rlgf.pipeline.generatr=x", "generatr"),
    ("rlgf.pipeline.memory_weights=x", "rlgf.pipeline.memory_weights"),
])
def test_bad_settings_are_refused_with_one_error_line(tmp_path, capsys, override, named):
    status = train_main("rlgf", ["--config", str(DEBUG_RLGF), f"checkpoint.output_dir={tmp_path}", *override.split()])
    assert status == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("error: ") and named in error[-1]
    assert not list(tmp_path.glob("checkpoint-*"))


def test_other_stages_refuse_rlgf_settings_and_the_script_refuses_their_configs(capsys):
    with pytest.raises(ConfigError, match=r"does not read rlgf\.\*"):
        load_config(TrainConfig, ROOT / "configs" / "debug-sft.yaml", ["rlgf.beta=0.2"])
    status = train_main("rlgf", ["--config", str(ROOT / "configs" / "debug-sft.yaml")])
    assert status == 2 and "train/sft.py" in capsys.readouterr().err


def test_a_finished_builds_pairs_file_is_written_again_from_its_shards(tmp_path, pairs, capsys, monkeypatch):
    main = runpy.run_path(str(ROOT / "train" / "build_rlgf_pairs.py"))["main"]
    out = tmp_path / "pairs.jsonl"
    shutil.copytree(pairs.with_name(pairs.name + ".questions"), out.with_name(out.name + ".questions"))
    monkeypatch.setattr(sys, "argv", ["build_rlgf_pairs.py", "--config", str(DEBUG_RLGF), "--out", str(out)])
    assert main() == 0  # no model is loaded: the shards hold every record
    assert out.read_bytes() == pairs.read_bytes()
    assert f"{out}: {len(records(pairs))} pairs written again from" in capsys.readouterr().out
    assert main() == 0 and "is built" in capsys.readouterr().out
    # shards holding the questions in another order (a build stopped and resumed in other numbers of processes)
    questions = out.with_name(out.name + ".questions")
    shuffled = list(read_records(questions).values())[::-1]
    for shard in questions.iterdir():
        shard.unlink()
    (questions / "part-00000-0of2.jsonl").write_text("".join(json.dumps(q) + "\n" for q in shuffled[:3]))
    (questions / "part-00000-1of2.jsonl").write_text("".join(json.dumps(q) + "\n" for q in shuffled[3:]))
    out.unlink()
    assert rewrite_pairs(out) == len(records(pairs)) and out.read_bytes() == pairs.read_bytes()


def test_a_missing_pairs_file_is_named_with_the_command_that_builds_it(tmp_path, pairs):
    missing = tmp_path / "pairs.jsonl"
    with pytest.raises(TrainingInputError, match=r"pairs file .*pairs.jsonl is not built; build it with python "
                                                  r"train/build_rlgf_pairs.py --config CONFIG .*stopped\)$"):
        run(rlgf_config(tmp_path / "run", f"data.files=[{missing}]"))
    shutil.copytree(pairs.with_name(pairs.name + ".questions"), missing.with_name(missing.name + ".questions"))
    with pytest.raises(TrainingInputError, match=r"or writes it again from .*pairs.jsonl.questions\)$"):
        run(rlgf_config(tmp_path / "run", f"data.files=[{missing}]"))


def fake_share(cfg: TrainConfig, out: Path, share: tuple[int, int], threads: int, parent: int) -> None:
    """A share of the build in a spawned process, with the FAKE embedder and reader (`build_share` loads real ones)."""
    from memorag.runtime.placement import set_threads
    from memorag.training.rlgf_pairs import build_from_config
    from memorag.training.rlgf_workers import stop_if_orphaned

    set_threads(threads)
    build_from_config(cfg, out, models=fake_models(cfg), share=share, on_question=lambda _: stop_if_orphaned(parent))


def failing_share(cfg: TrainConfig, out: Path, share: tuple[int, int], threads: int, parent: int) -> None:
    raise SystemExit(3)


def test_a_build_in_two_processes_gives_the_same_pairs_in_shards_of_each(tmp_path, pairs):
    from memorag.training.rlgf_workers import build_with_processes

    cfg, out = rlgf_config(tmp_path / "unused"), tmp_path / "pairs.jsonl"
    stats = build_with_processes(cfg, out, 2, models=fake_models(cfg), target=fake_share)
    assert out.read_bytes() == pairs.read_bytes() and stats["shares"] == 2 and stats["questions"] == 6
    questions = out.with_name(out.name + ".questions")
    assert sorted(p.name for p in questions.iterdir()) == ["part-00000-0of2.jsonl", "part-00000-1of2.jsonl"]
    assert [len(records(p)) for p in sorted(questions.iterdir())] == [3, 3]


def test_a_share_that_stops_keeps_the_build_and_any_number_of_processes_finishes_it(tmp_path, pairs):
    from memorag.training.rlgf_workers import build_with_processes

    cfg, out = rlgf_config(tmp_path / "unused"), tmp_path / "pairs.jsonl"
    with pytest.raises(RuntimeError, match=r"share 2 of 2 \(exit code 3\) stopped .* run the same command again"):
        build_with_processes(cfg, out, 2, models=fake_models(cfg), target=failing_share)
    partial = out.with_name(out.name + ".partial")
    assert not out.exists() and len(read_records(partial)) == 3  # the first share's every other question
    stats = build_with_processes(cfg, out, 1, models=fake_models(cfg))
    assert stats["resumed_questions"] == 3 and out.read_bytes() == pairs.read_bytes()
    with pytest.raises(ConfigError, match="processes=0"):
        build_with_processes(cfg, out, 0)


def test_a_share_whose_parent_is_gone_stops_after_its_question():
    import os

    from memorag.training.rlgf_workers import stop_if_orphaned

    stop_if_orphaned(os.getppid())  # the parent is there: goes on
    with pytest.raises(SystemExit) as stopped:
        stop_if_orphaned(os.getppid() + 1)
    assert stopped.value.code == 0


def swapped(pair: dict) -> dict:
    """`pair` with its chosen and rejected sets (and their reference log-probabilities) the other way round."""
    reference = {**pair["reference"], "chosen": pair["reference"]["rejected"], "rejected": pair["reference"]["chosen"]}
    return {**pair, "chosen": pair["rejected"], "rejected": pair["chosen"], "reference": reference}


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed")
def test_two_ddp_processes_train_as_one_process_taking_both_their_pairs_and_resume_exactly(tmp_path, pairs):
    """Two processes (DDP over gloo), a pair each a step, end with the weights of one process taking the same two
    pairs a step, in the same order (their gradients averaged: without it each process would step on its own pair);
    stopped and resumed from a checkpoint in parts, they end as an uninterrupted pair of processes."""
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in [*records(pairs), *map(swapped, records(pairs))]))
    settings = [f"data.files=[{data}]", "optim.max_steps=2", "checkpoint.every_steps=100", *QUIET,
                "checkpoint.max_file_mb=0.01"]  # checkpoints in parts of 10 KB, joined by process 0 for a resume
    run(rlgf_config(tmp_path / "one", *settings, "optim.grad_accumulation=2"))

    def launch(output: Path, *extra: str) -> None:
        command = [TORCHRUN, "--nproc_per_node", "2", "--master_port", str(free_port()), "train/rlgf.py", "--config",
                   str(DEBUG_RLGF), f"checkpoint.output_dir={output}", *settings, "optim.grad_accumulation=1", *extra]
        env = {**launch_env(), "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]

    launch(tmp_path / "two")
    launch(tmp_path / "resumed", "optim.stop_at_step=1")
    assert len(list((tmp_path / "resumed" / "checkpoint-1").glob("optimizer.pt.part-*"))) > 1
    launch(tmp_path / "resumed")
    losses = {name: train_losses(tmp_path / name) for name in ("one", "two", "resumed")}
    assert sorted(losses["two"]) == [1, 2] and losses["two"] == pytest.approx(losses["one"], rel=1e-5)
    assert losses["resumed"] == pytest.approx(losses["two"], rel=1e-6)
    weights = {name: load_file(tmp_path / name / "final" / "memory_weights.safetensors") for name in losses}
    for key, tensor in weights["one"].items():
        torch.testing.assert_close(weights["two"][key], tensor, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(weights["resumed"][key], weights["two"][key], rtol=0, atol=0)
