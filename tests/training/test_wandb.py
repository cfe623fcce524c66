"""wandb as the `[train]` extra installs it: a debug run logs offline, and a resumed run keeps its id."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memorag.training.monitor import WANDB_ID_FILE, new_run_id
from tests.training.helpers import ROOT, train_losses


def _require_wandb() -> None:
    try:
        import wandb  # noqa: F401
    except ImportError:
        pytest.fail("wandb is not installed: these tests need the [train] extra (make setup installs it)")


def _pretrain(output: Path, home: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "offline",
           "WANDB_DIR": str(home), "WANDB_CONFIG_DIR": str(home / "config"), "WANDB_CACHE_DIR": str(home / "cache"),
           "WANDB_DATA_DIR": str(home / "data"), "WANDB_SILENT": "true"}
    command = [sys.executable, "train/pretrain.py", "--config", "configs/debug.yaml", f"checkpoint.output_dir={output}",
               "logging.wandb=true", "optim.max_steps=2", "checkpoint.every_steps=100", "eval.at_end=false",
               "logging.progress_bar=false", *extra]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


def test_run_ids_look_like_wandb_ids():
    ids = {new_run_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"[a-z0-9]{8}", run_id) for run_id in ids)


@pytest.mark.slow
def test_a_debug_pretraining_run_logs_to_an_offline_wandb_run_and_resumes_it(tmp_path):
    _require_wandb()
    output, home = tmp_path / "run", tmp_path / "wandb-home"
    _pretrain(output, home, "optim.stop_at_step=1")
    run_id = (output / WANDB_ID_FILE).read_text().strip()
    first = sorted((output / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(first) == 1, list((output / "wandb").iterdir())
    records = first[0] / f"run-{run_id}.wandb"
    assert records.is_file() and b"train/loss" in records.read_bytes()  # the step's metrics were written

    done = _pretrain(output, home)  # resumes from checkpoint-1 and finishes step 2 under the same run id
    assert json.loads(done.stdout.strip().splitlines()[-1])["step"] == 2
    assert (output / WANDB_ID_FILE).read_text().strip() == run_id
    runs = sorted((output / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(runs) == 2 and all((run / f"run-{run_id}.wandb").is_file() for run in runs)
    assert b"end/tokens_seen" in (runs[-1] / f"run-{run_id}.wandb").read_bytes()
    assert sorted(train_losses(output)) == [1, 2]
