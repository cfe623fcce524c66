"""`MemoRAG.memorize` on files and folders (fake models): documents read before any model work,
bad files reported and the good ones kept, and evidence that cites the page or section."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorag.documents import DocumentReadError
from memorag.pipeline import MemoRAG
from tests.documents.builders import pdf_bytes, scanned_pdf_bytes, write

from .conftest import ASK_SETTINGS, FakeEchoGenerator, FakeHashEmbedder, make_rag, tiny_model, topic


def _folder(root: Path) -> Path:
    write(root, "book.pdf", pdf_bytes([topic(0), topic(1), topic(2)]))
    write(root, "notes/guide.md", f"# Guide\n\n{topic(0, 20)}\n\n## Second part\n\n{topic(1, 30)}\n")
    write(root, "notes/scan.pdf", scanned_pdf_bytes())
    return root


def test_a_folder_is_memorized_the_bad_file_reported_and_evidence_cites_pages(tmp_path):
    rag = make_rag()
    report = rag.memorize(_folder(tmp_path / "docs"))
    assert report.added == ["book.pdf", "guide.md"]
    assert len(report.problems) == 1 and "scan.pdf" in report.problems[0] and "ocrmypdf" in report.problems[0]
    answer = rag.ask(topic(2, 6))
    pdf_evidence = [item for item in answer.evidence if item.doc_id == "book.pdf"]
    best = next(item for item in answer.evidence if any(f.query_index == 0 and f.rank == 1 for f in item.found_by))
    assert best.doc_id == "book.pdf" and best.page == best.last_page == 3  # the query's best hit: page 3's text
    assert pdf_evidence and all(item.page is not None for item in pdf_evidence)
    assert "book.pdf, p. 3" in answer.sources
    assert answer.to_dict()["evidence"][0]["citation"] == answer.evidence[0].citation
    sections = {tuple(chunk.section) for chunk in rag.chunks if chunk.doc_id == "guide.md"}
    assert ("Guide", "Second part") in sections

    rag.save(tmp_path / "save")
    loaded = MemoRAG.load(tmp_path / "save", memory_model=tiny_model(), embedder=FakeHashEmbedder(),
                          embedder_name="fake-hash", generator=FakeEchoGenerator(), **ASK_SETTINGS)
    assert loaded.chunks == rag.chunks and loaded.documents == rag.documents
    assert loaded.ask(topic(2, 6)).sources == answer.sources


def test_paths_and_texts_mix_and_a_lone_bad_file_costs_no_model_work(tmp_path):
    rag = make_rag()
    guide = write(tmp_path, "guide.md", f"# Guide\n\n{topic(0)}\n")
    report = rag.memorize([guide, topic(1)])
    assert report.added[0] == "guide.md" and report.added[1].startswith("doc-") and not report.problems

    fresh = MemoRAG(memory_model=None, embedder=None, generator=None)  # would load models on first use
    with pytest.raises(DocumentReadError, match="scan.pdf: has no text layer"):
        fresh.memorize(write(tmp_path, "scan.pdf", scanned_pdf_bytes()))
    assert fresh._memory_model is None and not fresh.chunks


def test_a_fact_on_page_2_of_a_3_page_pdf_is_cited_p_2(tmp_path):
    """Chunks big enough to hold the whole file still stop at page breaks, so the passage that holds
    page 2's words is cited "p. 2", not "pp. 1-3"."""
    pdf = write(tmp_path, "survey.pdf", pdf_bytes([topic(0, 20), topic(1, 20), topic(2, 20)]))
    rag = make_rag(chunk_tokens=400, overlap_tokens=8, mode="rag")
    rag.memorize(pdf, with_memory=False)
    assert [(chunk.page, chunk.last_page) for chunk in rag.chunks] == [(1, 1), (2, 2), (3, 3)]
    answer = rag.ask(topic(1, 6))
    holding = next(item for item in answer.evidence if topic(1, 6) in item.text)
    assert holding.citation == "survey.pdf, p. 2" and "survey.pdf, p. 2" in answer.sources
