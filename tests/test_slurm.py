"""The SLURM scripts under a FAKE scheduler (tests/fake_slurm.py): the chain submits pretrain -> SFT ->
eval with afterok dependencies and folders that agree; the eval runs as a job array, one shard per
task, each requeued on its own; the configs' own folders agree when no folder is given."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests import fake_slurm

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytest.fixture
def home(tmp_path) -> Path:
    """A checkout to run the scripts in: the repository's scripts and configs, its own runs/."""
    home = tmp_path / "home"
    home.mkdir()
    for name in ("slurm", "configs", "eval", "train"):
        (home / name).symlink_to(ROOT / name)
    return home


def _run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_chain_submits_three_stages_that_read_what_the_one_before_wrote(tmp_path, home):
    env = {**fake_slurm.install(tmp_path / "slurm"), "MEMORAG_HOME": str(home)}
    out = tmp_path / "chain"
    done = _run(["bash", "slurm/chain.sh", "--out", str(out), "--shards", "2"], env, home)
    log = tmp_path / "slurm"
    submits = fake_slurm.events(log, "submit")
    assert [Path(s["script"]).name for s in submits] == ["pretrain.sbatch", "sft.sbatch", "eval.sbatch",
                                                          "eval-merge.sbatch"]
    ids = [s["job"] for s in submits]
    for submit, before in zip(submits[1:], ids):
        assert f"--dependency=afterok:{before}" in submit["options"] and "--parsable" in submit["options"]
    assert "--array=0-1" in submits[2]["options"]
    assert f"sft job {ids[1]} (after {ids[0]})" in done.stdout

    runs = fake_slurm.events(log, "run")
    assert [(r["job"], r["task"], r["rc"]) for r in runs] == [(ids[0], None, 0), (ids[1], None, 0), (ids[2], 0, 0),
                                                              (ids[2], 1, 0), (ids[3], None, 0)], runs
    # each stage read what the one before wrote (the fake stages refuse missing memory weights)
    assert (out / "sft" / "final" / "read_from.txt").read_text() == str(out / "pretrain" / "final")
    for shard in ("0-of-2", "1-of-2"):
        assert (out / "eval" / f"shard-{shard}" / "read_from.txt").read_text() == str(out / "sft" / "final")
    assert (out / "eval" / "merged" / "read_from.txt").read_text() == str(out / "sft" / "final")

    trainers = fake_slurm.events(log, "accelerate")
    assert all("checkpoint.resume=auto" in t["args"] and any(a.startswith("checkpoint.stop_file=") for a in t["args"])
               for t in trainers) and len(trainers) == 2
    evaluations = fake_slurm.events(log, "python")
    assert [next((a for a in e["args"] if a.startswith("shard=")), "--merge" in e["args"]) for e in evaluations] == [
        "shard=0/2", "shard=1/2", True]
    assert all(f"out_dir={out / 'eval'}" in e["args"] for e in evaluations)


def test_a_chain_without_shards_and_a_dry_run(tmp_path, home):
    env = {**fake_slurm.install(tmp_path / "slurm", run=False), "MEMORAG_HOME": str(home)}
    done = _run(["bash", "slurm/chain.sh", "--dry-run"], env, home)
    assert fake_slurm.events(tmp_path / "slurm") == []  # nothing submitted
    assert "--dependency=afterok:<pretrain job id>" in done.stderr and "--array" not in done.stderr
    assert f"model.memory_weights={home}/runs/chain-qwen2-7b/pretrain/final" in done.stderr

    _run(["bash", "slurm/chain.sh"], env, home)
    assert [Path(s["script"]).name for s in fake_slurm.events(tmp_path / "slurm", "submit")] == [
        "pretrain.sbatch", "sft.sbatch", "eval.sbatch"]
    bad = subprocess.run(["bash", "slurm/chain.sh", "--shards", "0"], env=env, cwd=home, capture_output=True, text=True)
    assert bad.returncode == 2 and "--shards 0" in bad.stderr


@pytest.mark.parametrize("name", ["qwen2-7b", "mistral-7b"])
def test_the_chain_puts_rlgf_between_sft_and_the_evaluation(tmp_path, home, name):
    env = {**fake_slurm.install(tmp_path / "slurm"), "MEMORAG_HOME": str(home)}
    out = tmp_path / "chain"
    configs = ["--pretrain", f"configs/pretrain/{name}.yaml", "--sft", f"configs/sft/{name}.yaml",
               "--rlgf", f"configs/rlgf/{name}.yaml"]
    done = _run(["bash", "slurm/chain.sh", "--out", str(out), *configs], env, home)
    submits = fake_slurm.events(tmp_path / "slurm", "submit")
    assert [Path(s["script"]).name for s in submits] == ["pretrain.sbatch", "sft.sbatch", "rlgf.sbatch", "eval.sbatch"]
    ids = [s["job"] for s in submits]
    for submit, before in zip(submits[1:], ids):
        assert f"--dependency=afterok:{before}" in submit["options"]
    assert [r["rc"] for r in fake_slurm.events(tmp_path / "slurm", "run")] == [0, 0, 0, 0]
    # RLGF builds its pairs from SFT's weights, trains from them into OUT/rlgf; the evaluation reads OUT/rlgf/final
    assert (out / "rlgf" / "pairs.jsonl").read_text() == str(out / "sft" / "final")
    assert (out / "rlgf" / "final" / "read_from.txt").read_text() == str(out / "sft" / "final")
    assert (out / "eval" / "shard-all" / "read_from.txt").read_text() == str(out / "rlgf" / "final")
    (build,) = [e for e in fake_slurm.events(tmp_path / "slurm", "python") if "train/build_rlgf_pairs.py" in e["args"]]
    assert f"data.files=[{out / 'rlgf' / 'pairs.jsonl'}]" in build["args"]
    trainers = fake_slurm.events(tmp_path / "slurm", "accelerate")
    assert "train/rlgf.py" in trainers[-1]["args"] and "checkpoint.resume=auto" in trainers[-1]["args"]
    assert f"rlgf job {ids[2]} (after {ids[1]})" in done.stdout and f"(after {ids[2]})" in done.stdout

    dry = _run(["bash", "slurm/chain.sh", "--dry-run", *configs], {**env, "FAKE_SLURM_RUN": "0"}, home)
    assert f"model.memory_weights={home}/runs/chain-{name}/sft/final" in dry.stderr
    assert f"pipeline.memory_weights={home}/runs/chain-{name}/rlgf/final" in dry.stderr


def test_the_configs_own_folders_agree(tmp_path, home):
    """With no MEMORAG_OUTPUT, each script leaves the folder to its config: SFT's config reads what
    pretraining's wrote, and the paper-7b eval config what SFT's wrote."""
    env = fake_slurm.install(tmp_path / "slurm")
    env = {key: value for key, value in env.items() if key != "MEMORAG_OUTPUT"}
    env["MEMORAG_HOME"] = str(home)
    for script, config in (("pretrain", "configs/pretrain/qwen2-7b.yaml"), ("sft", "configs/sft/qwen2-7b.yaml"),
                           ("eval", "configs/eval/paper-7b.yaml")):
        _run(["sbatch", f"slurm/{script}.sbatch", config], env, home)
    runs = fake_slurm.events(tmp_path / "slurm", "run")
    assert [run["rc"] for run in runs] == [0, 0, 0], runs
    assert (home / "runs/sft-qwen2-7b/final/read_from.txt").read_text() == "runs/pretrain-qwen2-7b/final"
    assert (home / "runs/eval/paper-7b/shard-all/read_from.txt").is_file()


def _array_task_env(tmp_path: Path, home: Path, task: int, count: int, low: int = 0) -> dict[str, str]:
    env = fake_slurm.install(tmp_path / "slurm")
    return {**env, "MEMORAG_HOME": str(home), "SLURM_JOB_ID": f"77{task}", "SLURM_JOB_NAME": "eval",
            "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count), "SLURM_ARRAY_TASK_MIN": str(low),
            "SLURM_ARRAY_TASK_MAX": str(low + count - 1), "MEMORAG_OUTPUT": str(tmp_path / "eval")}


def test_an_array_task_near_its_time_limit_requeues_itself_alone(tmp_path, home):
    env = {**_array_task_env(tmp_path, home, task=3, count=4, low=1), "FAKE_STAGE_SECONDS": "60"}
    script = subprocess.Popen(["bash", "slurm/eval.sbatch", "configs/eval/paper-7b.yaml"], env=env, cwd=home,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not fake_slurm.events(tmp_path / "slurm", "python") and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(script.pid, signal.SIGUSR1)  # what --signal=B:USR1@300 sends
    output, _ = script.communicate(timeout=60)
    assert script.returncode == 0, output
    assert [e["job"] for e in fake_slurm.events(tmp_path / "slurm", "requeue")] == ["773"]
    (evaluation,) = fake_slurm.events(tmp_path / "slurm", "python")
    assert "shard=2/4" in evaluation["args"] and "time limit near" in output


def test_an_array_with_gaps_is_refused(tmp_path, home):
    env = _array_task_env(tmp_path, home, task=0, count=3)
    env["SLURM_ARRAY_TASK_MAX"] = "4"  # --array=0,2,4
    done = subprocess.run(["bash", "slurm/eval.sbatch"], env=env, cwd=home, capture_output=True, text=True)
    assert done.returncode == 2 and "no gaps" in done.stderr
    assert fake_slurm.events(tmp_path / "slurm", "python") == []


@pytest.mark.parametrize("name", ["qwen2-7b", "mistral-7b"])
def test_the_stage_configs_name_the_same_folders(name):
    from memorag.config import load_config
    from memorag.evaluation import load_eval_config
    from memorag.training.config import TrainConfig

    pretrain = load_config(TrainConfig, ROOT / f"configs/pretrain/{name}.yaml")
    sft = load_config(TrainConfig, ROOT / f"configs/sft/{name}.yaml")
    assert sft.model.memory_weights == f"{pretrain.checkpoint.output_dir}/final"
    assert sft.model.base == pretrain.model.base
    rlgf = load_config(TrainConfig, ROOT / f"configs/rlgf/{name}.yaml")
    assert rlgf.model.memory_weights == f"{sft.checkpoint.output_dir}/final" and rlgf.model.base == sft.model.base
    if name == "qwen2-7b":
        paper = load_eval_config(ROOT / "configs/eval/paper-7b.yaml").pipeline
        assert paper.memory_weights == str(Path(sft.checkpoint.output_dir, "final").resolve())
        assert paper.memory_model == sft.model.base


def signalled_near_the_limit(tmp_path, home, stage: str, job: str, seconds: int, waits_for: str) -> float:
    """The sbatch script of `stage` run as job `job` under the fake SLURM, sent the time-limit signal once it starts
    `waits_for`; returns when the signal was sent (the script must then end well)."""
    env = {**fake_slurm.install(tmp_path / "slurm"), "MEMORAG_HOME": str(home), "SLURM_JOB_ID": job,
           "SLURM_JOB_NAME": f"memorag-{stage}", "SLURM_CPUS_PER_TASK": "2", "FAKE_STAGE_SECONDS": str(seconds),
           "MEMORAG_OUTPUT": str(tmp_path / stage)}
    script = subprocess.Popen(["bash", f"slurm/{stage}.sbatch"], env=env, cwd=home,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not fake_slurm.events(tmp_path / "slurm", waits_for) and time.monotonic() < deadline:
        time.sleep(0.2)
    signalled = time.monotonic()
    os.kill(script.pid, signal.SIGUSR1)  # what --signal=B:USR1@300 sends
    output, _ = script.communicate(timeout=60)
    assert script.returncode == 0, output
    return signalled


def test_the_reader_runs_one_process_and_near_its_time_limit_checkpoints_and_requeues(tmp_path, home):
    signalled_near_the_limit(tmp_path, home, "reader", "4242", 8, "accelerate")
    (launch,) = fake_slurm.events(tmp_path / "slurm", "accelerate")
    args = launch["args"]
    assert args[args.index("--config_file") + 1] == "configs/accelerate/cpu.yaml"
    assert args[args.index("--num_processes") + 1] == "1" and "train/reader.py" in args
    assert args[args.index("--config") + 1] == "configs/reader/embedded.yaml"
    assert "checkpoint.resume=auto" in args and f"checkpoint.output_dir={tmp_path / 'reader'}" in args
    assert f"checkpoint.stop_file={home / 'runs/slurm-stop/4242'}" in args
    assert (home / "runs/slurm-stop/4242").exists()  # the trainer's cue to checkpoint and stop
    assert [e["job"] for e in fake_slurm.events(tmp_path / "slurm", "requeue")] == ["4242"]


def test_rlgf_near_its_time_limit_stops_the_pair_builder_and_requeues(tmp_path, home):
    started = signalled_near_the_limit(tmp_path, home, "rlgf", "4343", 30, "python")
    assert time.monotonic() - started < 20  # the builder was stopped, not waited for
    (build,) = fake_slurm.events(tmp_path / "slurm", "python")
    args = build["args"]
    assert args[0] == "train/build_rlgf_pairs.py" and args[args.index("--config") + 1] == "configs/rlgf/smollm2-cpu.yaml"
    assert f"data.files=[{tmp_path / 'rlgf' / 'pairs.jsonl'}]" in args
    assert fake_slurm.events(tmp_path / "slurm", "accelerate") == []  # training starts once the pairs are built
    assert [e["job"] for e in fake_slurm.events(tmp_path / "slurm", "requeue")] == ["4343"]
