"""`memorag memorize --set mode=memorag-lite` and `memorag ask ... --mode memorag-lite` with the embedded model:
the gists are written, saved with the corpus, and the answer comes with its evidence and citations."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import SHORT, run_cli
from tests.conftest import isolated_cache

# Small gists of small windows, so that the embedded model writes them in seconds.
LITE = ["--set", "lite.window_tokens=256", "--set", "lite.max_new_tokens=24", "--set", "lite.min_gist_tokens=8"]


@pytest.mark.slow
def test_memorize_and_ask_in_the_lite_mode(short_text, tmp_path):
    save = tmp_path / "ruth.mrag"
    env = {"MEMORAG_CACHE": str(isolated_cache(tmp_path / "cache"))}
    made = run_cli("memorize", str(short_text), "--out", str(save), "--set", "mode=memorag-lite", *LITE, "--json",
                   env=env, timeout=900)
    assert made.returncode == 0, made.stderr
    summary = json.loads(made.stdout)
    assert summary["num_gists"] >= 3 and summary["memory_entries"] == 0 and summary["reach"] is None
    assert (save / "gists.jsonl").is_file() and "writing gists" in made.stderr
    asked = run_cli("ask", str(save), "Who went with Naomi to Bethlehem?", "--mode", "memorag-lite", *SHORT, "--json",
                    env=env, timeout=900)
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["mode"] == "memorag-lite" and answer["evidence"] and answer["sources"]
    assert "writing gists" not in asked.stderr  # read from the save, not written again
