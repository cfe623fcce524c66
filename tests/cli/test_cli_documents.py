"""The command line on documents, in-process over the fake models of tests/pipeline: a folder
with a bad file memorized (the good files kept, exit 2), answers citing pages, and
`memorag ask FILE QUESTION` memorizing once and answering from the cache after."""

from __future__ import annotations

import json

import pytest

import memorag.pipeline
from memorag.commands.main import main
from memorag.pipeline import MemoRAG
from tests.conftest import isolated_cache
from tests.documents.builders import pdf_bytes, scanned_pdf_bytes, write
from tests.pipeline.conftest import (
    ASK_SETTINGS,
    TEST_SETTINGS,
    FakeEchoGenerator,
    FakeHashEmbedder,
    tiny_model,
    topic,
)


class FakeModelsRAG(MemoRAG):
    """`MemoRAG` over the fake models (tiny random memory model, hashed embedder, echoing generator)."""

    def __init__(self, config=None, **settings):
        super().__init__(config, memory_model=tiny_model(), embedder=FakeHashEmbedder(), embedder_name="fake-hash",
                         generator=FakeEchoGenerator(), **{**TEST_SETTINGS, **settings})

    @classmethod
    def load(cls, directory, **settings):
        return MemoRAG.load(directory, memory_model=tiny_model(), embedder=FakeHashEmbedder(),
                            embedder_name="fake-hash", generator=FakeEchoGenerator(), **{**ASK_SETTINGS, **settings})

    def check_models(self) -> None:
        """The fakes are in memory: nothing to find."""


@pytest.fixture(autouse=True)
def fake_models(monkeypatch, tmp_path):
    monkeypatch.setattr(memorag.pipeline, "MemoRAG", FakeModelsRAG)
    monkeypatch.setenv("MEMORAG_CACHE", str(isolated_cache(tmp_path / "cache")))


def test_a_folder_with_a_bad_file_is_memorized_and_answers_cite_pages(tmp_path, capsys):
    folder = tmp_path / "docs"
    write(folder, "book.pdf", pdf_bytes([topic(0), topic(1), topic(2)]))
    write(folder, "scan.pdf", scanned_pdf_bytes())
    out = tmp_path / "save"
    assert main(["memorize", str(folder), "--out", str(out), "--json", "-q"]) == 2
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["added"] == ["book.pdf"] and summary["unread"] == 1
    problem_lines = [line for line in captured.err.splitlines() if "scan.pdf" in line]
    assert len(problem_lines) == 1 and "no text layer" in problem_lines[0] and "ocrmypdf" in problem_lines[0]

    assert main(["ask", str(out), topic(2, 6), "--mode", "rag", "--json", "-q"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert "book.pdf, p. 3" in answer["sources"] and answer["evidence"][0]["citation"].startswith("book.pdf, p.")
    assert main(["ask", str(out), topic(2, 6), "--mode", "rag"]) == 0
    err = capsys.readouterr().err
    assert "[book.pdf, p. 3]" in err and "sources: " in err and "book.pdf, p. 3" in err


def test_ask_on_a_file_memorizes_once_then_answers_from_the_cache(tmp_path, capsys):
    guide = write(tmp_path, "guide.md", f"# Guide\n\n{topic(0)}\n\n## Second part\n\n{topic(1)}\n")
    assert main(["ask", str(guide), topic(1, 6), "--mode", "rag", "--json"]) == 0
    first = capsys.readouterr()
    assert "memorizing 1 file(s)" in first.err and "cached in" in first.err
    assert "guide.md, § Guide > Second part" in json.loads(first.out)["sources"]
    assert main(["ask", str(guide), topic(1, 6), "--mode", "rag", "--json"]) == 0
    second = capsys.readouterr()
    assert "from the cache" in second.err and "memorizing" not in second.err
    assert json.loads(second.out)["sources"] == json.loads(first.out)["sources"]
    guide.write_text(f"# Guide\n\n{topic(2)}\n")  # new content: a new key, memorized again
    assert main(["ask", str(guide), topic(2, 6), "--mode", "rag", "-q"]) == 0
    assert len([path for path in (tmp_path / "cache" / "asked").iterdir() if not path.name.startswith(".")]) == 2


def test_a_bad_document_in_dirs_place_is_one_line_and_exit_2(tmp_path, capsys):
    scan = write(tmp_path, "scan.pdf", scanned_pdf_bytes())
    assert main(["ask", str(scan), "what is on it?"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("memorag: error: ") and "ocrmypdf" in err
    assert not (tmp_path / "cache" / "asked").exists()
