"""What `--help` says: the true defaults (read from the shipped weights where they decide them), every
accepted value, only options that do something; and `python -m memorag` runs the command."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from memorag.commands.main import UNTRAINED_RATIO, _describe_reach, _reach, build_parser
from memorag.memory import MemoryConfig
from memorag.memory.schedule import reach
from memorag.runtime.embedded import MEMORY_WEIGHT_NAMES, SHIPPED_MEMORY_DIR
from memorag.training.cli import train_parser
from memorag.training.config import LoggingSection

ROOT = Path(__file__).resolve().parents[2]


def command_help(name: str) -> str:
    parser = build_parser()
    (commands,) = [action for action in parser._actions if action.dest == "command"]
    return " ".join(commands.choices[name].format_help().split())  # one line: argparse wraps words anywhere


def test_python_dash_m_memorag_is_the_memorag_command():
    done = subprocess.run([sys.executable, "-m", "memorag", "--version"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("memorag "), done.stderr


def test_the_ratio_help_gives_the_ratio_the_shipped_weights_were_saved_with():
    shipped = json.loads((SHIPPED_MEMORY_DIR / "memory_config.json").read_text())["memory_config"]
    assert UNTRAINED_RATIO == MemoryConfig().ratios[0]
    for command in ("memorize", "ask", "clues"):
        shown = command_help(command)
        assert (f"{shipped['ratios'][0]} for the shipped weights, window {shipped['window']}; "
                f"{UNTRAINED_RATIO} for untrained ones") in shown, command
        assert "(default: 4)" not in shown


def test_the_memory_weights_help_names_every_value_it_takes():
    shown = command_help("ask")
    assert "a folder, a hub id" in shown
    for name in MEMORY_WEIGHT_NAMES:
        assert f"'{name}'" in shown, name


def test_clues_describes_only_the_tasks_it_accepts():
    shown = command_help("clues")
    assert "--task {memorag,summarize}" in shown
    assert "qa:" not in shown and "retrieval:" not in shown
    assert "qa:" in command_help("ask") and "retrieval:" in command_help("ask")


def test_serve_takes_no_json_flag_it_would_ignore():
    assert "--json" not in command_help("serve")
    assert "--json" in command_help("ask") and "--json" in command_help("memorize")


def test_the_training_scripts_help_has_a_usage_line_a_description_and_examples():
    for stage, script, config in (("pretrain", "train/pretrain.py", "configs/debug.yaml"),
                                  ("sft", "train/sft.py", "configs/debug-sft.yaml")):
        doc = ast.get_docstring(ast.parse((ROOT / script).read_text()))
        shown = train_parser(stage, doc).format_help()
        assert shown.startswith(f"usage: [accelerate launch ...] {script} --config FILE [key=value ...]")
        assert doc.splitlines()[0] in shown and f"python {script} --config {config}" in shown
        assert "optim.lr" in shown and "logging.wandb: bool = False" in shown


def test_wandb_is_off_unless_asked():
    assert LoggingSection().wandb is False


def test_the_length_report_gives_the_reach_of_the_weights_and_ratio_used():
    fake_rag = SimpleNamespace(memory=SimpleNamespace(ratio=8),
                               memory_model=SimpleNamespace(config=MemoryConfig(window=256, ratios=[8]),
                                                            max_positions=8192))
    reached = _reach(fake_rag)
    assert reached == {"tokens": reach(8192, 256, 8), "positions": 8192, "window": 256, "ratio": 8}
    assert reached["tokens"] == 63_488  # the figure the README gives for the shipped weights
    line = _describe_reach(reached, 12_513)
    assert "12,513 tokens read" in line and "reaches 63,488 tokens" in line and "8,192 positions" in line
    assert _reach(SimpleNamespace(memory=None)) is None


def test_every_command_and_script_help_fits_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    parser = build_parser()
    (commands,) = [action for action in parser._actions if action.dest == "command"]
    shown = {"memorag": parser.format_help(), **{f"memorag {name}": sub.format_help()
                                                  for name, sub in commands.choices.items()}}
    for stage, script in (("pretrain", "train/pretrain.py"), ("sft", "train/sft.py")):
        shown[script] = train_parser(stage, ast.get_docstring(ast.parse((ROOT / script).read_text()))).format_usage()
    for script in ("train/pretrain.py", "train/sft.py", "eval/run.py", "eval/generate_clues.py"):
        shown[f"{script} description"] = ast.get_docstring(ast.parse((ROOT / script).read_text()))
    wide = {name: line for name, text in shown.items() for line in text.splitlines() if len(line) > 80}
    assert not wide, f"help lines wider than 80 columns: {wide}"
