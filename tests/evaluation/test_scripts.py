"""The thin scripts: --help, a clear error for a bad setting, and the SLURM script's syntax."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"eval_script_{name}", ROOT / "eval" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, expected", [("run", "recall_k"), ("generate_clues", "--checkpoint")])
def test_help(name, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _script(name).main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert expected in text and f"python eval/{name}.py" in text


def test_run_reports_a_bad_setting_and_exits_2(capsys):
    code = _script("run").main(["--config", str(ROOT / "configs/eval/smoke.yaml"), "num_exampels=3"])
    assert code == 2 and "did you mean 'num_examples'" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_eval_sbatch_is_valid_bash():
    subprocess.run(["bash", "-n", str(ROOT / "slurm" / "eval.sbatch")], check=True)
