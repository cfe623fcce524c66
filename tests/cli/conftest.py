"""Fixtures shared by the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kjv_ruth_esther_jonah.txt"


@pytest.fixture
def short_text(tmp_path) -> Path:
    """The first chapter of Ruth (about 800 tokens)."""
    text = EXAMPLE.read_text(encoding="utf-8")
    path = tmp_path / "ruth1.txt"
    path.write_text(text[: text.index("Chapter 2")], encoding="utf-8")
    return path
