"""MkDocs hook: the command-line reference (`reference/cli.md`), written at build time from the parsers.

Each section is the `--help` the command prints: the `memorag` command and its subcommands from
`memorag.commands.main.build_parser()`, and each script run as `python SCRIPT --help` in this process (runpy),
so the page cannot drift from the code: a renamed flag or a changed default shows here on the next build.
Every help line fits 80 columns where it is written; a wider one stops the build, naming the line.
"""

from __future__ import annotations

import contextlib
import html
import io
import logging
import os
import runpy
import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
PAGE = "reference/cli.md"
WIDTH = "80"  # argparse wraps to $COLUMNS; 80 fits the theme's code blocks without scrolling
SCRIPTS = {
    "train/pretrain.py": "Stage 1: pretrain the memory on long raw text.",
    "train/sft.py": "Stage 2: fine-tune the memory to write clues.",
    "train/evaluate.py": "Held-out evaluation of memory weights under a training config.",
    "train/publish.py": "Publish trained memory weights with a model card.",
    "train/build_clue_data.py": "Clue-SFT data from question-answer rows with an endpoint.",
    "eval/run.py": "The evaluation harness: modes x tasks -> records, tables, plots.",
    "eval/generate_clues.py": "Clues of a checkpoint over a data set, and their recall.",
}


def on_files(files, config):
    files.append(File.generated(config, PAGE, content=cli_reference()))
    return files


def cli_reference() -> str:
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return "\n".join([*_memorag_sections(), *_script_sections()])
    finally:
        if previous is None:
            os.environ.pop("COLUMNS")
        else:
            os.environ["COLUMNS"] = previous


def _memorag_sections() -> list[str]:
    from memorag.commands.main import build_parser

    parser = build_parser()
    (commands,) = [action for action in parser._actions if action.dest == "command"]
    lines = ["# Command-line reference", "",
             "Generated when the site is built, from the parsers themselves (`docs/hooks/cli_reference.py`): "
             "each section is what the command prints for `--help`. `python -m memorag` is the same command "
             "as `memorag`.", "", "## memorag", "", *_block(parser.format_help())]
    for name, subparser in commands.choices.items():
        lines += [f"### memorag {name}", "", *_block(subparser.format_help())]
    return lines


SETTINGS_HEADER = "TrainConfig settings"  # where a training script's --help starts listing every setting


def _script_sections() -> list[str]:
    """Each script's help; the training settings, which three scripts share, printed once."""
    lines = ["## Scripts", "",
             "Run from a checkout with the package installed (`make setup`); the training scripts also run "
             "under `accelerate launch`.", ""]
    settings_shown = False
    for script, summary in SCRIPTS.items():
        usage, header, settings = _script_help(script).partition(SETTINGS_HEADER)
        lines += [f"### {script}", "", summary, "", *_block(usage)]
        if header and not settings_shown:
            lines += _settings_table()
            settings_shown = True
        elif header:
            lines += ["Its settings are the [training settings](#training-settings) above.", ""]
    return lines


def _settings_table() -> list[str]:
    """The training settings as a two-column table (two columns fit a phone's width), each described by the string under its field in the config
    dataclasses (`memorag.config.config_settings`), so the table follows the code."""
    from memorag.config import config_settings
    from memorag.training.config import TrainConfig

    lines = ["#### Training settings", "",
             "Every setting of `train/pretrain.py`, `train/sft.py` and `train/evaluate.py` (one config type, "
             "`memorag.training.config.TrainConfig`): set them in the YAML file given to `--config`, or as "
             "`key=value` after it (`optim.lr=1e-4`). The scripts' `--help` lists the same.", "",
             "| Setting, type = default | What it sets |", "| --- | --- |"]
    for setting in config_settings(TrainConfig):
        kind = f"{setting.type_name} = {setting.default}"
        lines.append(f"| `{setting.key}`<br>{_cell_code(kind)} | {_cell(setting.description)} |")
    return [*lines, ""]


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell: a pipe would end the cell."""
    return text.replace("|", "\\|")


def _cell_code(text: str) -> str:
    return f"<code>{html.escape(text)}</code>".replace("|", "&#124;")


def _script_help(script: str) -> str:
    """What `python SCRIPT --help` prints, run in this process; the logs its imports write (faiss's loader
    at INFO) are kept out of the build's output."""
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [script, "--help"]
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        logging.getLogger("faiss").setLevel(logging.WARNING)
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            runpy.run_path(str(ROOT / script), run_name="__main__")
    finally:
        sys.argv = argv
        root.handlers[:], root.level = handlers, level
    text = out.getvalue()
    if not text.strip():
        raise RuntimeError(f"{script} --help printed nothing")
    return text


def _block(text: str) -> list[str]:
    wide = [line for line in text.splitlines() if len(line) > int(WIDTH)]
    if wide:  # each help is written to fit at its source (tests/cli/test_help.py); say where it does not
        raise ValueError(f"help lines over {WIDTH} columns (wrap them where they are written): {wide}")
    return ["```text", text.rstrip(), "```", ""]
