"""The command-line reference's help blocks fit 80 columns as the code prints them (the docs hook,
docs/hooks/cli_reference.py, refuses a wider line), and the settings' listing wraps its own lines."""

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


@pytest.mark.slow
def test_every_help_block_of_the_reference_fits_80_columns():
    page = cli_reference.cli_reference()
    wide = [line for block in CODE_BLOCK.findall(page) for line in block.splitlines() if len(line) > 80]
    unbreakable = [line for line in wide if " " in line.strip()]
    assert not unbreakable, f"help lines over 80 columns in the CLI reference: {unbreakable}"


def test_a_setting_whose_type_is_long_wraps_under_its_key():
    from memorag.config import format_config_help
    from memorag.evaluation.config import EvalConfig

    lines = format_config_help(EvalConfig).splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    first = next(i for i, line in enumerate(lines) if line.startswith("  pipeline.compile_decoding:"))
    assert lines[first + 1].startswith(" " * 8) and "'max-autotune'" in " ".join(lines[first : first + 3])
