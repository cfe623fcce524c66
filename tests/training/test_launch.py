"""The scripts as researchers run them: `accelerate launch`, `python train/...`, `--help`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.training.helpers import PYTHON, ROOT, TORCHRUN, free_port, launch_env, train_losses

ACCELERATE = shutil.which("accelerate", path=str(Path(PYTHON).parent)) or shutil.which("accelerate")


@pytest.mark.slow
def test_debug_config_trains_through_accelerate_launch_and_the_loss_falls(tmp_path):
    if ACCELERATE is None:
        pytest.skip("accelerate is not installed")
    paragraph = ("And it came to pass in the days when the judges ruled, that there was a famine in the land. "
                 "And a certain man of Bethlehemjudah went to sojourn in the country of Moab.\n")
    (tmp_path / "repeated.txt").write_text(paragraph * 400)
    command = [
        ACCELERATE, "launch", "--cpu", "--num_processes", "1", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "train/pretrain.py", "--config", "configs/debug.yaml",
        f"checkpoint.output_dir={tmp_path / 'run'}", f"data.files=[{tmp_path / 'repeated.txt'}]",
        "optim.max_steps=24", "optim.lr=1e-2", "checkpoint.every_steps=100", "eval.at_end=false",
        "logging.progress_bar=false",
    ]
    done = subprocess.run(command, cwd=ROOT, env=launch_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["step"] == 24 and summary["reason"] == "finished"
    losses = train_losses(tmp_path / "run")
    first = sum(losses[s] for s in (1, 2, 3)) / 3
    last = sum(losses[s] for s in (22, 23, 24)) / 3
    assert last < first - 0.1, losses
    assert (tmp_path / "run" / "checkpoint-24").is_dir() and (tmp_path / "run" / "final").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("script", ["train/pretrain.py", "train/sft.py", "train/evaluate.py", "train/build_clue_data.py"])
def test_scripts_answer_help(script):
    done = subprocess.run([PYTHON, script, "--help"], cwd=ROOT, env=launch_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower() or "settings" in done.stdout.lower()
    if script in ("train/pretrain.py", "train/sft.py"):
        assert "optim.lr" in done.stdout and "memory.window" in done.stdout


def test_a_bad_key_is_a_clear_error(tmp_path):
    done = subprocess.run([PYTHON, "train/pretrain.py", "--config", "configs/debug.yaml", "optim.learning_rate=1"],
                          cwd=ROOT, env=launch_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "unknown key 'optim.learning_rate'" in done.stderr and "did you mean 'lr'" not in done.stdout


@pytest.mark.slow
def test_python_launch_and_the_evaluate_script(tmp_path):
    run_dir = tmp_path / "run"
    common = ["--config", "configs/debug.yaml", f"checkpoint.output_dir={run_dir}", "logging.progress_bar=false"]
    done = subprocess.run([PYTHON, "train/pretrain.py", *common, "optim.max_steps=2", "eval.at_end=false"],
                          cwd=ROOT, env=launch_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "eval.json"
    done = subprocess.run([PYTHON, "train/evaluate.py", *common, f"model.memory_weights={run_dir / 'final'}",
                           "eval.ratios=[4,8]", "--out", str(out)], cwd=ROOT, env=launch_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| memory r=4 |" in done.stdout and "| full context |" in done.stdout
    result = json.loads(out.read_text())
    assert set(result["conditions"]) == {"no memory", "memory r=4", "memory r=8", "full context"}


@pytest.mark.slow
def test_two_process_ddp_on_cpu_trains_and_resumes_exactly(tmp_path):
    """DDP over gloo (two CPU processes): every rank's RNG is saved, and a resumed run matches."""
    if TORCHRUN is None:
        pytest.skip("torchrun is not installed")
    env = {**launch_env(), "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1"}

    def launch(output, *extra):
        command = [TORCHRUN, "--nproc_per_node", "2", "--master_port", str(free_port()), "train/pretrain.py",
                   "--config", "configs/debug.yaml", f"checkpoint.output_dir={output}", "optim.max_steps=4",
                   "checkpoint.every_steps=100", "eval.at_end=false", "logging.progress_bar=false", *extra]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]

    launch(tmp_path / "straight")
    launch(tmp_path / "resumed", "optim.stop_at_step=2")
    assert {p.name for p in (tmp_path / "resumed" / "checkpoint-2").glob("rng_state_*.pt")} == {
        "rng_state_0.pt", "rng_state_1.pt"}
    state = json.loads((tmp_path / "resumed" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["world_size"] == 2
    launch(tmp_path / "resumed")
    straight, resumed = train_losses(tmp_path / "straight"), train_losses(tmp_path / "resumed")
    assert sorted(resumed) == [1, 2, 3, 4]
    for step in (3, 4):
        assert resumed[step] == pytest.approx(straight[step], rel=1e-6), step


@pytest.mark.slow
def test_the_debug_sft_config_trains_on_the_shipped_samples(tmp_path):
    """configs/debug-sft.yaml (named in train/sft.py) over examples/sft_debug.jsonl, as the README runs it."""
    run_dir = tmp_path / "sft"
    done = subprocess.run([PYTHON, "train/sft.py", "--config", "configs/debug-sft.yaml",
                           f"checkpoint.output_dir={run_dir}", "logging.progress_bar=false"],
                          cwd=ROOT, env=launch_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["reason"] == "finished" and summary["step"] == 16  # 2 epochs of 8 samples, batch 1
    records = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    train = [r for r in records if r["event"] == "train"]
    assert all(0 < r["loss_tokens"] < 200 for r in train)  # target tokens only (contexts are 400-1000 bytes)
    first, last = sum(r["loss"] for r in train[:3]) / 3, sum(r["loss"] for r in train[-3:]) / 3
    assert last < first
    assert (run_dir / "final" / "memory_weights.safetensors").is_file()


@pytest.mark.slow
def test_sft_refuses_a_pass_in_which_no_sample_fits_instead_of_hanging(tmp_path):
    done = subprocess.run([PYTHON, "train/sft.py", "--config", "configs/debug-sft.yaml",
                           f"checkpoint.output_dir={tmp_path / 'sft'}", "logging.progress_bar=false",
                           "optim.max_steps=5", "data.max_length=200"],
                          cwd=ROOT, env=launch_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "no SFT sample" in done.stderr and "data.max_length=200" in done.stderr
    assert "the longest sample has" in done.stderr
