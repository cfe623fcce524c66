"""Each format read from its bytes: the text, where pages begin, the heading paths, and chunks
and citations placed in the file."""

from __future__ import annotations

import pytest

from memorag.documents import DocumentReadError, ReadOptions, detect_format, extract, read_file, read_paths
from memorag.locations import citation
from memorag.retrieval.chunking import Document, chunk_documents_for_mixpr

from .builders import HTML, MARKDOWN, docx_bytes, pdf_bytes, write

PAGES = [f"Page {n} tells of the {animal}, who keeps the key number {n * 7}." for n, animal in
         enumerate(["otter", "heron", "badger", "lynx", "wren"], start=1)]


def test_pdf_pages_and_outline_map_to_offsets():
    kind, extracted = extract(pdf_bytes(PAGES, sections=[f"Part {n}" for n in range(1, 6)]), "story.pdf")
    assert kind == "pdf" and len(extracted.page_starts) == 5
    for number, start in enumerate(extracted.page_starts, start=1):
        assert extracted.text[start:].startswith(f"Page {number} tells"), number
    assert [heading.path for heading in extracted.headings] == [(f"Part {n}",) for n in range(1, 6)]
    document = Document(id="story.pdf", text=extracted.text, page_starts=extracted.page_starts)
    heron = extracted.text.index("heron")
    assert document.locate(heron, heron + 5).page == 2
    spanning = document.locate(extracted.page_starts[1], extracted.page_starts[3] + 3)
    assert (spanning.page, spanning.last_page) == (2, 4)


def test_pdf_running_heads_are_dropped():
    pages = [f"Field Manual\n{text}" for text in PAGES]
    _, extracted = extract(pdf_bytes(pages), "manual.pdf")
    assert "Field Manual" not in extracted.text and "lynx" in extracted.text


def test_html_blocks_headings_tables_and_no_scripts():
    kind, extracted = extract(HTML.encode(), "guide.html")
    text = extracted.text
    assert kind == "html"
    assert "var x" not in text and "color: red" not in text and "Home" not in text
    assert "Name | Years" in text and "Ada | 1901-1920" in text
    assert "wick trimmer\noil can" in text and "Visitors climb 214 steps." in text
    paths = {heading.path for heading in extracted.headings}
    assert ("Lighthouse guide", "Keepers", "Tools") in paths and ("Lighthouse guide", "Visits") in paths
    document = Document(id="guide.html", text=text, headings=extracted.headings)
    steps = text.index("214")
    assert document.locate(steps, steps + 3).section == ["Lighthouse guide", "Visits"]
    assert document.locate(text.index("oil can"), text.index("oil can") + 3).section == [
        "Lighthouse guide", "Keepers", "Tools"]


def test_markdown_keeps_its_text_and_finds_atx_and_setext_headings_not_code():
    kind, extracted = extract(MARKDOWN.encode(), "notes.md")
    assert kind == "markdown" and extracted.text == MARKDOWN
    assert [heading.path for heading in extracted.headings] == [
        ("Harbour notes",), ("Harbour notes", "Boats"), ("Harbour notes", "Boats", "Nets"),
        ("Harbour notes", "Moorings")]
    for heading in extracted.headings:
        assert MARKDOWN[heading.start_char:].lstrip("#").strip().startswith(heading.path[-1])


def test_docx_paragraphs_headings_and_tables_in_order():
    data = docx_bytes([("h1", "Annual report"), ("p", "Revenue grew."), ("h2", "Costs"), ("p", "Rent rose."),
                       ("h2", "Staff"), ("p", "Nine people joined.")], table=[["Quarter", "Sales"], ["Q1", "12"]])
    kind, extracted = extract(data, "report.docx")
    assert kind == "docx"
    text = extracted.text
    assert text.index("Revenue grew.") < text.index("Rent rose.") < text.index("Nine people joined.")
    assert "Quarter | Sales\nQ1 | 12" in text
    document = Document(id="report.docx", text=text, headings=extracted.headings)
    rent = text.index("Rent")
    assert document.locate(rent, rent + 4).section == ["Annual report", "Costs"]


def test_format_comes_from_the_bytes_not_the_name(tmp_path):
    assert detect_format(pdf_bytes(PAGES[:1]), "misnamed.txt") == "pdf"
    assert detect_format(HTML.encode(), "page.txt") == "html"
    assert detect_format(docx_bytes([("p", "x")]), "letter.pdf") == "docx"
    assert detect_format(b"# Title\n\ntext", "notes.md") == "markdown"
    assert detect_format(b"plain words", "notes") == "text"
    document = read_file(write(tmp_path, "misnamed.txt", pdf_bytes(PAGES)))
    assert document.page_starts and document.source.endswith("misnamed.txt")


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16", "cp1252", "utf-8-sig"])
def test_text_in_other_encodings_is_detected(tmp_path, encoding):
    text = "Ester était reine de Perse; la fête dura sept jours, à Suse, près du palais royal. " * 4
    document = read_file(write(tmp_path, "esther.txt", text.encode(encoding)))
    assert document.text == text


def test_a_named_encoding_is_used_and_a_wrong_one_refused(tmp_path):
    path = write(tmp_path, "esther.txt", "Ester était reine.".encode("latin-1"))
    assert read_file(path, ReadOptions(encoding="latin-1")).text == "Ester était reine."
    with pytest.raises(DocumentReadError, match="not valid utf-8 text"):
        read_file(path, ReadOptions(encoding="utf-8"))


def test_folders_are_walked_with_include_and_exclude(tmp_path):
    write(tmp_path, "a/report.pdf", pdf_bytes(PAGES[:2]))
    write(tmp_path, "a/notes.md", MARKDOWN)
    write(tmp_path, "b/guide.html", HTML)
    write(tmp_path, "b/draft/old.md", "# Old\n\nold text")
    write(tmp_path, ".git/config", "[core]")
    everything = read_paths([tmp_path])
    assert [d.id for d in everything.documents] == ["notes.md", "report.pdf", "guide.html", "old.md"]
    assert not everything.problems
    only_md = read_paths([tmp_path], ReadOptions(include=("*.md",), exclude=("draft",)))
    assert [d.id for d in only_md.documents] == ["notes.md"]


def test_same_names_in_two_folders_are_told_apart(tmp_path):
    write(tmp_path, "x/notes.md", "# X\n\nfirst")
    write(tmp_path, "y/notes.md", "# Y\n\nsecond")
    ids = [d.id for d in read_paths([tmp_path]).documents]
    assert len(set(ids)) == 2 and all(i.endswith("notes.md") for i in ids)


def test_chunks_and_citations_carry_the_page_or_section():
    _, extracted = extract(pdf_bytes(PAGES), "story.pdf")
    document = Document(id="story.pdf", text=extracted.text, page_starts=extracted.page_starts)
    chunks = chunk_documents_for_mixpr([document], max_words=6)
    badger = next(chunk for chunk in chunks if "badger" in chunk.text)
    assert badger.page == badger.last_page == 3
    assert citation("story.pdf", badger.page, badger.last_page, badger.section) == "story.pdf, p. 3"
    assert citation("story.pdf", 2, 3, []) == "story.pdf, pp. 2-3"
    assert citation("guide.md", None, None, ["Install", "Linux"]) == "guide.md, § Install > Linux"
    assert citation("notes.txt", None, None, [], 10, 50) == "notes.txt, chars 10-50"
