"""The command-line reference's help blocks fit 80 columns, and breaking a line keeps it usable.

The scripts print their descriptions as written; the docs hook (docs/hooks/cli_reference.py) breaks
every line over 80 columns: prose at its indent, a command with a backslash so it still runs when
pasted (a trailing comment moves above it, since a backslash inside a comment continues nothing).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "_docs_cli_reference_width", Path(__file__).resolve().parents[1] / "docs" / "hooks" / "cli_reference.py")
cli_reference = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(cli_reference)
CODE_BLOCK = re.compile(r"^```text\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_a_long_command_goes_on_with_a_backslash_and_its_comment_above():
    line = ("    python eval/run.py --config configs/eval/paper-7b.yaml shard=0/4 out_dir=runs/eval/paper"
            "    # one part, anywhere")
    fitted = cli_reference.fit(line).splitlines()
    assert fitted[0] == "    # one part, anywhere"
    assert all(len(piece) <= 80 for piece in fitted)
    assert [piece.endswith(" \\") for piece in fitted[1:]] == [True] * (len(fitted) - 2) + [False]
    joined = " ".join(piece.removesuffix(" \\").strip() for piece in fitted[1:])
    assert joined == line.split("    #")[0].strip()


def test_a_continued_command_keeps_its_own_backslash():
    text = ("    python train/publish.py --weights runs/pretrain-smollm2-mix-cpu/final --to-folder memorag/weights \\\n"
            "        --run runs/pretrain-smollm2-mix-cpu --eval step-300.json --card-only card.md --private")
    fitted = cli_reference.fit(text).splitlines()
    assert all(len(piece) <= 80 for piece in fitted)
    assert all(piece.endswith(" \\") for piece in fitted[:-1]) and not fitted[-1].endswith("\\")


def test_prose_wraps_at_its_indent_and_short_lines_are_left_alone():
    prose = "  " + "word " * 30
    fitted = cli_reference.fit(prose + "\nshort line").splitlines()
    assert all(len(piece) <= 80 and piece.startswith("  word") for piece in fitted[:-1])
    assert fitted[-1] == "short line"
    usage = cli_reference.fit("usage: memorag clues (DIR | DOCUMENT | --context FILE [FILE ...]) QUERY [options]")
    assert usage.splitlines()[1].startswith(" " * 7) and max(map(len, usage.splitlines())) <= 80


@pytest.mark.slow
def test_every_help_block_of_the_reference_fits_80_columns():
    page = cli_reference.cli_reference()
    wide = [line for block in CODE_BLOCK.findall(page) for line in block.splitlines() if len(line) > 80]
    unbreakable = [line for line in wide if " " in line.strip()]
    assert not unbreakable, f"help lines over 80 columns in the CLI reference: {unbreakable}"
