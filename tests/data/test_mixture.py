"""The pretraining mixture: shares, held-out text kept out, generated long-range documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memorag.training.data import mixture
from memorag.training.data.mixture import build_mixture, essay_pieces, kjv_documents, repeated_passage

ROOT = Path(__file__).resolve().parents[2]


def kjv_file(tmp_path: Path, books=("GENESIS", "EXODUS")) -> Path:
    text = "The King James Version\n" + "".join(
        f"\n\nTHE BOOK OF {book}\n\nChapter 1\n\n" + " ".join(f"{book.lower()} verse {i}." for i in range(400))
        for book in books)
    path = tmp_path / "kjv_train.txt"
    path.write_text(text)
    return path


def test_kjv_documents_are_books_and_the_held_out_books_are_refused(tmp_path):
    assert len(kjv_documents(kjv_file(tmp_path))) == 2
    with pytest.raises(ValueError, match="held-out books"):
        kjv_documents(kjv_file(tmp_path, ("GENESIS", "RUTH")))


def test_essays_are_cut_at_their_dated_openings():
    text = "Intro text.April 2012A first essay.January 2015Corporate things.May 1999(A note) more."
    assert essay_pieces(text) == ["Intro text.", "April 2012A first essay.", "January 2015Corporate things.",
                                  "May 1999(A note) more."]
    assert essay_pieces("One. Two. Three. Four.", max_chars=10) == ["One. Two.", "Three.", "Four."]


def test_a_repeated_passage_repeats_its_opening():
    text = repeated_passage(3, 0, 600)
    first, _, again = text.partition("\n\n")[0], None, text.rpartition("The first passage again:\n")[2]
    assert first == again and len(text.split()) >= 550


def test_the_mixture_follows_the_shares_and_writes_no_held_out_text(tmp_path, monkeypatch):
    monkeypatch.setattr(mixture, "wiki_documents", lambda: ([f"wiki doc {i} " * 200 for i in range(50)],
                                                            [{"title": "Held", "text": "HELD-OUT LEAD"}]))
    monkeypatch.setattr(mixture, "essay_documents", lambda: ([f"essay {i} " * 300 for i in range(30)],
                                                             ["HELD-OUT ESSAY"]))
    shares = {"kjv": 0.4, "wiki": 0.2, "essays": 0.2, "synthetic": 0.2}
    manifest = build_mixture(tmp_path / "mix", shares, 60_000, kjv_file(tmp_path), synthetic_tokens=600,
                             progress=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "mix" / "mix_train.jsonl").read_text().splitlines()]
    assert {row["source"] for row in rows} == set(shares)
    text = "".join(row["text"] for row in rows)
    assert "HELD-OUT" not in text
    assert json.loads((tmp_path / "mix" / "wiki_heldout.jsonl").read_text())["text"] == "HELD-OUT LEAD"
    for source in ("wiki", "essays", "synthetic"):  # whole documents: a share overshoots by less than one
        assert manifest["shares_actual"][source] == pytest.approx(shares[source], abs=0.1)
    held_verses = mixture.held_out_verses()
    assert not any(verse in text for verse in held_verses)
    assert any("Question:" in row["text"] for row in rows if row["source"] == "synthetic")
    again = build_mixture(tmp_path / "mix2", shares, 60_000, kjv_file(tmp_path), synthetic_tokens=600,
                          progress=lambda _: None)
    assert again["characters"] == manifest["characters"]  # seeded
    with pytest.raises(ValueError, match="shares"):
        build_mixture(tmp_path / "bad", {"books": 1.0}, 1000, kjv_file(tmp_path))


@pytest.mark.slow
def test_the_script_builds_a_small_mixture_from_the_installed_packages(tmp_path):
    import os
    import subprocess
    import sys

    from memorag.evaluation.datasets.packaged import (
        MissingDataPackageError,
        hotpotqa_dev_path,
        wiki_leads_path,
    )

    try:
        wiki_leads_path(), hotpotqa_dev_path()
    except MissingDataPackageError as error:
        pytest.skip(str(error))
    out = tmp_path / "mix" / "mix_train.jsonl"
    result = subprocess.run(
        [sys.executable, str(ROOT / "train" / "prepare_mix.py"), "--config",
         str(ROOT / "configs" / "pretrain" / "smollm2-mix-cpu.yaml"), "--chars", "60000", "--synthetic-tokens", "800",
         "--kjv", str(kjv_file(tmp_path)), f"data.files=[{out}]"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's package, installed or not
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = json.loads((out.parent / "mix_manifest.json").read_text())
    assert set(manifest["documents"]) == {"kjv", "wiki", "essays", "synthetic"}
    assert all(count > 0 for count in manifest["documents"].values())
    assert manifest["held_out"]["wiki"] > 500 and manifest["held_out"]["essays"] > 0
    held = {json.loads(line)["text"] for line in (out.parent / "essays_heldout.jsonl").read_text().splitlines()}
    training = [json.loads(line)["text"] for line in out.read_text().splitlines()]
    assert not held & set(training)
