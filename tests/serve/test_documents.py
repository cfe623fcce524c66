"""`memorag serve` takes files ({name, base64}): read before any model work, a bad one refused with
a 400 naming it and its fix, and answers that cite the page or section."""

from __future__ import annotations

import base64

import httpx

from tests.documents.builders import pdf_bytes, scanned_pdf_bytes
from tests.serve.conftest import topic


def upload(name: str, data: bytes) -> dict:
    return {"name": name, "base64": base64.b64encode(data).decode()}


def test_files_are_memorized_and_answers_cite_their_pages(server):
    url, _ = server
    files = [upload("book.pdf", pdf_bytes([topic(0), topic(1), topic(2)])),
             upload("guide.md", f"# Guide\n\n{topic(0, 20)}\n\n## Part two\n\n{topic(1, 30)}\n".encode())]
    response = httpx.post(f"{url}/corpora/docs/memorize", json={"files": files}, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["added"] == ["book.pdf", "guide.md"]
    answer = httpx.post(f"{url}/corpora/docs/ask", json={"query": topic(2, 6), "mode": "rag", "stream": False},
                        timeout=60).json()
    assert "book.pdf, p. 3" in answer["sources"]
    assert all("citation" in item for item in answer["evidence"])


def test_a_bad_file_is_a_400_naming_it_and_nothing_is_memorized(server):
    url, _ = server
    files = [upload("book.pdf", pdf_bytes([topic(0)])), upload("scan.pdf", scanned_pdf_bytes()),
             upload("photo.png", b"\x89PNG\r\n\x1a\n" + bytes(40))]
    response = httpx.post(f"{url}/corpora/docs/memorize", json={"files": files}, timeout=60)
    assert response.status_code == 400
    error = response.json()["error"]
    assert "scan.pdf: has no text layer" in error and "ocrmypdf" in error and "photo.png: is a PNG image" in error
    assert httpx.get(f"{url}/corpora/docs").status_code == 404
    for body in ({"files": [{"name": "a.txt", "base64": "not base64!"}]},
                 {"files": [{"name": "../a.txt", "base64": "eA=="}]}, {"files": []},
                 {"text": "x", "files": [upload("a.txt", b"x")]}):
        assert httpx.post(f"{url}/corpora/docs/memorize", json=body, timeout=60).status_code == 400, body
