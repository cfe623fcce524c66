"""Filler text: the KJV Bible from the Debian packages, its repository fallback, and the noise sentences."""

from __future__ import annotations

import logging
import shutil

import pytest

from memorag.evaluation.datasets import filler as filler_module
from memorag.evaluation.datasets.filler import (
    KJV_FALLBACK_FILE,
    FillerUnavailableError,
    cycle_units,
    filler_text,
    get_filler,
    kjv_filler,
    noise_filler,
    parse_bible_output,
    parse_fallback_file,
)

needs_bible = pytest.mark.skipif(
    shutil.which("bible") is None, reason="needs `apt-get install -y bible-kjv bible-kjv-text`"
)


@pytest.fixture
def no_bible_command(monkeypatch):
    """Pretend the `bible` command is not installed (and clear the cached filler around the test)."""
    kjv_filler.cache_clear()
    monkeypatch.setattr(filler_module.shutil, "which", lambda name: None)
    yield
    kjv_filler.cache_clear()


def test_parse_bible_output_strips_references():
    output = (
        "Ge1:1 In the beginning God created the heaven and the earth.\n1Cor13:4 Charity suffereth long.\n\n"
    )
    assert parse_bible_output(output) == [
        "In the beginning God created the heaven and the earth.",
        "Charity suffereth long.",
    ]


def test_parse_fallback_file_drops_headings():
    text = "The Books of Ruth, Esther and Jonah\n\nTHE BOOK OF RUTH\n\nChapter 1\n\nNow it came to pass.\nAnd a man went.\n"
    assert parse_fallback_file(text) == ["Now it came to pass.", "And a man went."]


@needs_bible
def test_whole_kjv_from_the_debian_package():
    kjv = kjv_filler()
    assert len(kjv.units) == 31102  # every verse of the KJV, Genesis 1:1 to Revelation 22:21
    assert kjv.units[0] == "In the beginning God created the heaven and the earth."
    assert kjv.units[-1] == "The grace of our Lord Jesus Christ be with you all. Amen."
    assert 780_000 < sum(len(unit.split()) for unit in kjv.units) < 800_000  # 789,634 words
    assert "bible -f" in kjv.source and all("\n" not in unit for unit in kjv.units[:1000])


def test_fallback_to_the_repository_excerpt_with_a_warning(no_bible_command, caplog):
    with caplog.at_level(logging.WARNING, logger="memorag.evaluation.datasets.filler"):
        kjv = kjv_filler()
    assert kjv.source == str(KJV_FALLBACK_FILE)
    assert kjv.units[0].startswith("Now it came to pass in the days when the judges ruled")
    assert "apt-get install -y bible-kjv bible-kjv-text" in caplog.text


def test_no_filler_at_all_names_the_install_command(no_bible_command, tmp_path):
    with pytest.raises(FillerUnavailableError, match="apt-get install -y bible-kjv bible-kjv-text"):
        kjv_filler(fallback_file=tmp_path / "absent.txt")


def test_noise_filler_and_helpers():
    noise = noise_filler()
    assert noise.units[0] == "The grass is green." and noise.separator == " "
    assert filler_text(12, kind="noise") == "The grass is green. The sky is blue. The sun is yellow."
    assert cycle_units(["a", "b", "c"], 2, 5) == ["c", "a", "b", "c", "a"]
    with pytest.raises(ValueError, match="unknown filler kind"):
        get_filler("essays")
