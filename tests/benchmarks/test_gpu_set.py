"""benchmarks/gpu.sh, checked on the CPU: its dry run lists every benchmark of the GPU set, each writing
its JSON into the given folder, with options the benchmark's own parser knows."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from benchmarks import decode, memorize, pipeline, train

ROOT = Path(__file__).resolve().parents[2]
MAINS = {"decode.py": decode.main, "memorize.py": memorize.main, "train.py": train.main, "pipeline.py": pipeline.main}


def dry_run(out: Path, *before: str, only: str = "") -> list[list[str]]:
    env = {**os.environ, "DRY_RUN": "1", "ONLY": only}
    completed = subprocess.run([str(ROOT / "benchmarks" / "gpu.sh"), str(out), *before], capture_output=True,
                               text=True, check=True, env=env)
    return [line.split() for line in completed.stdout.splitlines()]


def help_text(script: str, capsys) -> str:
    with pytest.raises(SystemExit):
        MAINS[script](["--help"])
    return capsys.readouterr().out


def test_the_gpu_set_writes_every_json_into_out_with_known_options(tmp_path, capsys):
    commands = dry_run(tmp_path / "out")
    assert sorted({command[0] for command in commands}) == sorted(MAINS)
    assert len(commands) == 10  # 7, and 3 through compiled windows
    compiled = [Path(command[-1]).name for command in commands if "--compile-windows" in command]
    assert compiled == ["memorize-7b-compiled.json", "train-135m-compiled.json", "train-7b-compiled.json"]
    helps = {script: help_text(script, capsys) for script in MAINS}
    for command in commands:
        assert command[1:5] == ["--device", "cuda", "--dtype", "bf16"]
        options = [word for word in command[1:] if word.startswith("--")]
        unknown = [option for option in options if not re.search(rf"{option}\b", helps[command[0]])]
        assert not unknown, f"{command[0]} does not know {unknown}"
        assert command[-1].startswith(str(tmp_path / "out")) and command[-1].endswith(".json")


def test_a_before_checkout_runs_the_same_set_into_out_before(tmp_path):
    commands = dry_run(tmp_path / "out", str(ROOT))
    assert len(commands) == 20
    assert [c[-1] for c in commands[10:]] == [c[-1].replace("/out/", "/out/before/") for c in commands[:10]]


def test_only_runs_the_steps_named_in_both_trees(tmp_path):
    commands = dry_run(tmp_path / "out", str(ROOT), only="decode-7b train-135m")
    outputs = [Path(command[-1]).name for command in commands]
    assert outputs == ["decode-7b.json", "train-135m.json"] * 2
