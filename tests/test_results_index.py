"""results/benchmarks/ and results/eval/ each have an index (README.md) with one row per record, and no
row for a record that is gone: which folder or file backs which figure stays findable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("folder", ["results/benchmarks", "results/eval"])
def test_every_record_has_a_row_in_its_folders_index(folder):
    index = (ROOT / folder / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| \[`([^`]+?)/?`\]", index, re.M))
    entries = {path.name for path in (ROOT / folder).iterdir() if path.name != "README.md"}
    assert entries - rows == set(), f"records with no row in {folder}/README.md"
    assert rows - entries == set(), f"rows in {folder}/README.md for records that are not there"
    for target in re.findall(r"\]\((\.\./\.\./[^)#]+)", index):
        assert (ROOT / folder / target).resolve().is_file(), target
