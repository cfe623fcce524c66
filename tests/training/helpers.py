"""Shared pieces of the training tests: configs that train in seconds, and log readers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from memorag.config import load_config
from memorag.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
DEBUG_CONFIG = ROOT / "configs" / "debug.yaml"
PYTHON = sys.executable
TORCHRUN = shutil.which("torchrun", path=str(Path(PYTHON).parent)) or shutil.which("torchrun")


def launch_env() -> dict[str, str]:
    """The environment a launched training script runs in: this checkout importable."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def debug_config(output_dir: Path, *overrides: str) -> TrainConfig:
    """configs/debug.yaml, quiet and without evaluation, writing to `output_dir`."""
    return load_config(TrainConfig, DEBUG_CONFIG, [
        f"checkpoint.output_dir={output_dir}", "logging.progress_bar=false", "logging.wandb=false",
        "eval.at_end=false", f"data.files=[{ROOT / 'examples' / 'kjv_ruth_esther_jonah.txt'}]", *overrides,
    ])


def train_losses(output_dir: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (Path(output_dir) / "train_log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if r["event"] == "train"}


def resumed_equals_straight(run, config, tmp_path: Path, settings: list[str], stop_at: int, steps: int,
                            weights: str) -> None:
    """`config(folder, *settings)` run straight through, and in a second folder stopped at step `stop_at` and
    resumed: the two runs log the same losses after the stop and write the same `weights` file at the end,
    bit for bit (`run` trains one config and returns its summary)."""
    run(config(tmp_path / "straight", *settings))
    first = run(config(tmp_path / "resumed", *settings, f"optim.stop_at_step={stop_at}"))
    assert first["step"] == stop_at and first["reason"].startswith("stopped")
    second = run(config(tmp_path / "resumed", *settings))
    assert second["step"] == steps and second["reason"] == "finished"
    straight, resumed = train_losses(tmp_path / "straight"), train_losses(tmp_path / "resumed")
    assert sorted(resumed) == sorted(straight) == list(range(1, steps + 1))
    after = range(stop_at + 1, steps + 1)
    assert [resumed[step] for step in after] == [straight[step] for step in after]
    a = load_file(str(tmp_path / "straight" / f"checkpoint-{steps}" / weights))
    b = load_file(str(tmp_path / "resumed" / f"checkpoint-{steps}" / weights))
    assert sorted(a) == sorted(b)
    for name in a:
        assert torch.equal(a[name], b[name]), name  # bit for bit


def reset_accelerate() -> None:
    """Accelerate keeps process-wide singletons; tests that build several trainers reset them."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


QUICK = ("data.min_length=128", "data.max_length=128", "data.length_multiple=64", "data.batch_size=1",
         "checkpoint.keep_last=5")


def quick_config(output_dir: Path, *overrides: str) -> TrainConfig:
    """`debug_config` with one 128-token sequence per step: a step takes a fraction of a second."""
    return debug_config(output_dir, *QUICK, *overrides)
