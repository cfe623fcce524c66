"""DeepSpeed ZeRO-2 and ZeRO-3 through `accelerate launch`, on DeepSpeed's CPU accelerator.

Each stage trains the debug config for one step, stops, resumes and trains a second step;
the losses must match a plain single-process run of the same config (same data, same
initialisation), so a resume that lost the optimizer state or the data position fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from memorag.config import ConfigError
from memorag.training.distributed import bucket_sizes
from memorag.training.trainer import Trainer
from tests.training.helpers import ROOT, debug_config, reset_accelerate, train_losses

ACCELERATE = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or shutil.which("accelerate")
STEPS = ["optim.max_steps=2", "checkpoint.every_steps=100", "eval.at_end=false", "logging.progress_bar=false",
         "logging.wandb=false", "model.gradient_checkpointing=false"]


def _require_deepspeed() -> None:
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        pytest.fail("deepspeed is not installed: these tests need the [train] extra (make setup installs it)")
    assert ACCELERATE is not None, "the accelerate command is not installed"


def _run(stage: int, output: Path, *extra: str, processes: int = 1) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1",
           "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    command = [ACCELERATE, "launch", "--config_file", f"configs/accelerate/deepspeed_zero{stage}.yaml",
               "--num_processes", str(processes), "train/pretrain.py", "--config", "configs/debug.yaml",
               f"checkpoint.output_dir={output}", *STEPS, *extra]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)


def _launch(stage: int, output: Path, *extra: str) -> dict:
    done = _run(stage, output, *extra)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def plain_losses(tmp_path_factory) -> dict[int, float]:
    output = tmp_path_factory.mktemp("plain")
    reset_accelerate()
    Trainer(debug_config(output, *STEPS)).train()
    reset_accelerate()
    return train_losses(output)


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_stage_trains_a_debug_step_and_resumes_on_cpu(stage, tmp_path, plain_losses):
    _require_deepspeed()
    output = tmp_path / f"zero{stage}"
    first = _launch(stage, output, "optim.stop_at_step=1")
    assert first["step"] == 1 and first["reason"].startswith("stopped")
    checkpoint = output / "checkpoint-1"
    assert (checkpoint / "deepspeed" / "state").is_dir()  # the engine's optimizer state, frozen base excluded
    saved = load_file(str(checkpoint / "memory_weights.safetensors"))
    assert saved and all(tensor.numel() > 0 for tensor in saved.values())  # gathered, not ZeRO-3 shards
    second = _launch(stage, output)
    assert second["step"] == 2 and second["reason"] == "finished"
    losses = train_losses(output)
    assert sorted(losses) == [1, 2]
    for step in (1, 2):
        assert losses[step] == pytest.approx(plain_losses[step], rel=1e-4), (step, losses, plain_losses)
    final = load_file(str(output / "final" / "memory_weights.safetensors"))
    assert set(final) == set(saved)
    assert any(not torch.equal(final[name], saved[name]) for name in saved)  # step 2 trained the memory


@pytest.mark.slow
def test_several_deepspeed_processes_on_a_cpu_are_refused(tmp_path):
    """Accelerate gives every DeepSpeed process on a CPU rank 0 of 1: they would all write the same files."""
    _require_deepspeed()
    done = _run(2, tmp_path / "two", processes=2)
    assert done.returncode != 0
    assert "DeepSpeed runs 2 processes but Accelerate sees 1" in done.stderr
    assert not (tmp_path / "two" / "checkpoint-1").exists()


def test_auto_bucket_sizes_follow_the_hidden_size():
    assert bucket_sizes(64) == {"reduce_bucket_size": 4096, "stage3_prefetch_bucket_size": 3686,
                                "stage3_param_persistence_threshold": 640}


def test_zero3_refuses_activation_checkpointing_with_the_fix(tmp_path, monkeypatch):
    from memorag.training import distributed

    monkeypatch.setattr(distributed, "zero_stage", lambda accelerator: 3)
    with pytest.raises(ConfigError, match="model.gradient_checkpointing=false"):
        distributed.check_activation_checkpointing(None, True)
    distributed.check_activation_checkpointing(None, False)
