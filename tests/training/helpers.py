"""Shared pieces of the training tests: configs that train in seconds, and log readers."""

from __future__ import annotations

import json
from pathlib import Path

from memorag.config import load_config
from memorag.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
DEBUG_CONFIG = ROOT / "configs" / "debug.yaml"


def debug_config(output_dir: Path, *overrides: str) -> TrainConfig:
    """configs/debug.yaml, quiet and without evaluation, writing to `output_dir`."""
    return load_config(TrainConfig, DEBUG_CONFIG, [
        f"checkpoint.output_dir={output_dir}", "logging.progress_bar=false", "logging.wandb=false",
        "eval.at_end=false", f"data.files=[{ROOT / 'examples' / 'kjv_ruth_esther_jonah.txt'}]", *overrides,
    ])


def train_losses(output_dir: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (Path(output_dir) / "train_log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if r["event"] == "train"}


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
