"""The site's figures (docs/hooks/figures.py): each is drawn from committed records, the same bytes
on every build, and every page's figure marker names one that exists (and every figure is shown)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("_docs_figures", ROOT / "docs" / "hooks" / "figures.py")
figures = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = figures  # dataclasses look their module up there
SPEC.loader.exec_module(figures)


def test_every_marker_names_a_figure_and_every_figure_is_shown():
    names = {spec.name for spec in figures.FIGURES}
    asked = {match for page in (ROOT / "docs").rglob("*.md")
             for match in figures.MARKER.findall(page.read_text(encoding="utf-8"))}
    assert asked - names == set(), "pages ask for figures that do not exist"
    assert names - asked == set(), "figures no page shows"
    assert len(names) >= 4


def test_every_caption_names_a_record_a_machine_and_a_date():
    for spec in figures.FIGURES:
        assert re.search(r"`(results|memorag/weights|runs)/[^`]+`", spec.caption), spec.name
        assert re.search(r"H100|H200|Intel Xeon|AMD EPYC", spec.caption), spec.name
        assert re.search(r"20\d\d-\d\d-\d\d", spec.caption), spec.name


def test_a_page_marker_becomes_the_image_and_its_caption():
    class Page:
        class file:
            src_uri = "tutorials/page.md"

    spec = figures.FIGURES[0]
    markdown = figures.on_page_markdown(f"Before.\n\n<!-- figure: {spec.name} -->\n\nAfter.\n", Page, {}, [])
    assert f"![{spec.alt}](../figures/{spec.name}.svg)" in markdown and spec.caption in markdown
    with pytest.raises(ValueError, match="known: "):
        figures.on_page_markdown("<!-- figure: no-such-figure -->\n", Page, {}, [])


@pytest.mark.slow
@pytest.mark.parametrize("spec", figures.FIGURES, ids=lambda spec: spec.name)
def test_each_figure_draws_the_same_svg_twice(spec):
    first = figures.render(spec)
    assert first.lstrip().startswith(b"<?xml") and b"<svg" in first
    assert figures.render(spec) == first, "the SVG differs between two builds of the same records"
