"""The README's and the docs' runnable examples run as written, so a renamed flag fails CI, not a user.

A block fenced as `bash` or `python` is runnable; one fenced as `sh` or `py` (a GPU, a cluster, the
hub, an hour) is shown, not run (CONTRIBUTING.md, "Examples in the docs are tests"). mktestdocs finds
the blocks and runs them, each page's blocks of a language in order, in a scratch folder that links
to the checkout's examples/, configs/ and scripts, with the environment's scripts (`memorag`) first
on the PATH, as after `source .venv/bin/activate`. Slow: the examples load the real embedded models.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mktestdocs import check_md_file, grab_code_blocks

from tests.conftest import isolated_cache

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED = ("examples", "configs", "train", "eval", "benchmarks")
RUNNABLE = [(page, language) for page in PAGES for language in ("bash", "python")
            if grab_code_blocks(page.read_text(encoding="utf-8"), lang=language)]


def test_the_readme_fits_on_a_few_screens():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_the_readme_has_runnable_examples_of_the_command_line_python_and_training():
    languages = {language for page, language in RUNNABLE if page.name == "README.md"}
    assert languages == {"bash", "python"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = "\n".join(grab_code_blocks(readme, lang="bash"))
    assert "memorag ask" in blocks and "python train/pretrain.py" in blocks


@pytest.mark.slow
@pytest.mark.parametrize("page, language", RUNNABLE,
                         ids=[f"{page.relative_to(ROOT)}:{language}" for page, language in RUNNABLE])
def test_a_runnable_example_runs_as_written(page, language, tmp_path, monkeypatch):
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the scripts import this checkout's memorag
    monkeypatch.setenv("MEMORAG_CACHE", str(isolated_cache(tmp_path / "cache")))  # `memorag ask FILE` memorizes afresh
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "2"))
    check_md_file(page, lang=language, memory=language == "python")
