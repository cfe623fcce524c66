"""The evidence inspector's page and the routes it reads (memorag/serve/inspector.py, sources.py, pages.py,
originals.py), over real HTTP on 127.0.0.1 and tiny fake models. The page in a browser: test_inspector_browser.py."""

from __future__ import annotations

import base64
import re
import struct
import zlib

import httpx
import numpy as np
import pytest

from memorag.documents import extract
from memorag.retrieval.chunking import Document
from memorag.serve.guard import AccessPolicy
from memorag.serve.inspector import FILES, page_file
from memorag.serve.limits import ServeLimits
from memorag.serve.pages import encode_png, render_page
from memorag.serve.sources import MAX_CONTEXT_CHARS, passage_context
from tests.documents.builders import pdf_bytes, scanned_pdf_bytes
from tests.serve.conftest import JSON, fake_store, read_events, serving, topic

PAGES = [topic(0), topic(1, 80), topic(2)]


def upload(name: str, data: bytes) -> dict:
    return {"name": name, "base64": base64.b64encode(data).decode()}


def png_pixels(data: bytes) -> np.ndarray:
    """The [H, W, 3] pixels of a PNG written by `encode_png` (8-bit RGB, filter 0 on every row)."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", data[16:24])
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4: idat])[0]
    rows = np.frombuffer(zlib.decompress(data[idat + 4: idat + 4 + length]), dtype=np.uint8)
    rows = rows.reshape(height, 1 + 3 * width)
    assert not rows[:, 0].any()
    return rows[:, 1:].reshape(height, width, 3)


def test_the_page_is_served_with_a_strict_policy_and_without_the_key(tmp_path):
    store = fake_store(tmp_path / "store")
    policy = AccessPolicy.for_address("127.0.0.1", ServeLimits().max_body_bytes, api_key="sesame")
    with serving(store, policy=policy) as url:
        page = httpx.get(f"{url}/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
        assert "'unsafe-inline'" not in csp and page.headers["x-content-type-options"] == "nosniff"
        for path, (_, media_type) in FILES.items():
            assert httpx.get(f"{url}{path}").headers["content-type"] == media_type
        assert httpx.get(f"{url}/corpora").status_code == 401  # the data still needs the key
        health = httpx.get(f"{url}/health").json()
        assert {"memorag", "rag"} <= set(health["modes"]) and health["limits"]["max_body_bytes"] > 0
    html = page_file("index.html").decode()
    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="/inspector.js" defer>']  # no inline script
    assert "http://" not in html and "https://" not in html  # nothing fetched from elsewhere
    script = page_file("inspector.js").decode()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink  # document and model text goes into the page as text only


def test_an_uploaded_pdf_streams_progress_and_its_cited_page_is_rendered_marked(server):
    url, store = server
    book = pdf_bytes(PAGES)
    files = [upload("book.pdf", book), upload("guide.md", f"# Guide\n\n{topic(3, 30)}\n".encode())]
    with httpx.stream("POST", f"{url}/corpora/docs/memorize", json={"files": files, "stream": True},
                      timeout=60) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
    progress = [data for event, data in events if event == "progress"]
    assert progress and events[-1][0] == "report" and events[-1][1]["added"] == ["book.pdf", "guide.md"]
    assert [step["done"] for step in progress] == sorted(step["done"] for step in progress)
    assert progress[-1]["done"] == progress[-1]["total"] > 0
    assert store.originals.read("docs", "book.pdf") == book
    assert store.originals.read("docs", "guide.md") is None  # only PDFs are kept: their pages are shown

    answer = httpx.post(f"{url}/corpora/docs/ask", json={"query": topic(1, 6), "mode": "rag", "stream": False},
                        timeout=60).json()
    cited = next(item for item in answer["evidence"] if item["page"] == 2)
    where = {"doc": "book.pdf", "start": cited["start_char"], "end": cited["end_char"]}
    context = httpx.get(f"{url}/corpora/docs/passage", params=where, timeout=60).json()
    assert context["page"] == 2 and context["pages"] == 3 and context["page_images"] is True
    assert context["text"][context["mark_start"]:context["mark_end"]] == cited["text"][:context["mark_end"]
                                                                                          - context["mark_start"]]
    image = httpx.get(f"{url}/corpora/docs/page", params={**where, "page": 2, "width": 600}, timeout=60)
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert image.headers["x-content-type-options"] == "nosniff"
    assert int(image.headers["x-marked-boxes"]) >= 1 and image.headers["x-pages"] == "3"
    pixels = png_pixels(image.content)
    assert pixels.shape[1] == 600
    amber = (pixels[..., 0] > 200) & (pixels[..., 1] > 150) & (pixels[..., 2] < 170)
    assert amber.sum() > 500  # the passage's boxes are drawn
    plain = httpx.get(f"{url}/corpora/docs/page", params={"doc": "book.pdf", "page": 2, "width": 600}, timeout=60)
    assert plain.headers["x-marked-boxes"] == "0" and png_pixels(plain.content).shape == pixels.shape

    section = httpx.get(f"{url}/corpora/docs/passage", params={"doc": "guide.md", "start": 10, "end": 30},
                        timeout=60).json()
    assert section["section"] == ["Guide"] and section["page_images"] is False
    for params, status in [({**where, "page": 9}, 400), ({**where, "page": 2, "width": 50_000}, 400),
                           ({**where, "page": "two"}, 400), ({"doc": "guide.md", "page": 1}, 404),
                           ({"doc": "nothing.pdf", "page": 1}, 404), ({**where, "end": 10**9, "page": 2}, 400)]:
        response = httpx.get(f"{url}/corpora/docs/page", params=params, timeout=60)
        assert response.status_code == status, (params, response.text)
    assert httpx.get(f"{url}/corpora/docs/passage", params={"doc": "book.pdf", "start": 5},
                     timeout=60).status_code == 400

    files = [upload("other.pdf", pdf_bytes([topic(4)]))]
    assert httpx.post(f"{url}/corpora/docs/memorize", json={"files": files, "overwrite": True},
                      timeout=60).status_code == 200
    assert store.originals.read("docs", "book.pdf") is None and store.originals.read("docs", "other.pdf")
    assert httpx.delete(f"{url}/corpora/docs", timeout=60).status_code == 200
    assert not store.originals.folder("docs").exists()


def test_refused_files_are_named_one_by_one_and_limits_refuse_a_stream_before_it_starts(tmp_path):
    store = fake_store(tmp_path / "store")
    with serving(store, limits=ServeLimits(max_memorize_tokens=50)) as url:
        files = [upload("scan.pdf", scanned_pdf_bytes()), upload("photo.png", b"\x89PNG\r\n\x1a\n" + bytes(40)),
                 upload("fine.txt", b"short text")]
        refused = httpx.post(f"{url}/corpora/docs/memorize", json={"files": files, "stream": True}, timeout=60)
        assert refused.status_code == 400
        named = {item["name"]: item["error"] for item in refused.json()["files"]}
        assert set(named) == {"scan.pdf", "photo.png"} and "ocrmypdf" in named["scan.pdf"]
        big = httpx.post(f"{url}/corpora/docs/memorize", json={"text": topic(0, 400), "stream": True}, timeout=60)
        assert big.status_code == 413 and "--max-memorize-tokens" in big.json()["error"]
        assert not store.originals.root.exists() or not any(store.originals.root.iterdir())


def test_the_servers_own_page_under_an_allowed_name_may_write_and_others_may_not(tmp_path):
    store = fake_store(tmp_path / "store")
    limits = ServeLimits()
    named = AccessPolicy.for_address("127.0.0.1", limits.max_body_bytes, allow_hosts=["memorag.lan"])
    body = {"documents": [{"id": "a", "text": topic(0, 30)}]}
    with serving(store, policy=named) as url:
        port = url.rsplit(":", 1)[1]
        own = {**JSON, "host": f"memorag.lan:{port}", "origin": f"http://memorag.lan:{port}"}
        assert httpx.post(f"{url}/corpora/a/memorize", json=body, headers=own, timeout=60).status_code == 200
        for origin in ("http://evil.example", f"http://memorag.lan:{int(port) + 1}", f"http://evil.example:{port}"):
            headers = {**own, "origin": origin}
            assert httpx.post(f"{url}/corpora/a/memorize", json=body, headers=headers).status_code == 403, origin
    anyone = AccessPolicy.for_address("127.0.0.1", limits.max_body_bytes, allow_hosts=["*"])
    with serving(fake_store(tmp_path / "other"), policy=anyone) as url:
        port = url.rsplit(":", 1)[1]
        rebound = {**JSON, "host": f"evil.example:{port}", "origin": f"http://evil.example:{port}"}
        assert httpx.post(f"{url}/corpora/a/memorize", json=body, headers=rebound).status_code == 403


def test_the_context_of_a_passage_is_its_page_section_or_surroundings_within_the_limit():
    text = "# One\n\nalpha beta\n\n## Two\n\ngamma delta epsilon\n\n# Three\n\nzeta"
    _, markdown = extract(text.encode(), "notes.md")
    document = Document(id="notes.md", text=markdown.text, headings=markdown.headings)
    start = document.text.index("delta")
    context = passage_context(document, start, start + len("delta"))
    assert context["section"] == ["One", "Two"] and context["text"].startswith("## Two")
    assert "zeta" not in context["text"] and context["text"][context["mark_start"]:context["mark_end"]] == "delta"
    long_text = "word " * 10_000
    middle = Document(id="long.txt", text=long_text)
    context = passage_context(middle, 25_000, 25_020)
    assert len(context["text"]) <= 2 * 1_500 + 20 and context["offset"] == 25_000 - 1_500
    whole = passage_context(Document(id="whole", text=long_text, headings=[(0, ("All",))]), 0, len(long_text))
    assert len(whole["text"]) == MAX_CONTEXT_CHARS and whole["mark_start"] == 0
    with pytest.raises(Exception, match="not a span"):
        passage_context(middle, 10, 5)
    with pytest.raises(Exception, match="has no pages"):
        passage_context(middle, 10, 20, page=1)


def test_a_passage_over_two_pages_is_shown_on_each_page_that_is_asked_for():
    _, extracted = extract(pdf_bytes(PAGES), "book.pdf")
    document = Document(id="book.pdf", text=extracted.text, page_starts=extracted.page_starts)
    second = extracted.page_starts[1]
    start, end = second - 25, second + 25
    first_page = passage_context(document, start, end)
    assert first_page["shown_page"] == 1 and first_page["page"] == 1 and first_page["last_page"] == 2
    assert first_page["text"][first_page["mark_start"]:first_page["mark_end"]] == document.text[start:second]
    page_two = passage_context(document, start, end, page=2)
    assert page_two["shown_page"] == 2 and page_two["offset"] == second
    assert page_two["text"] == document.text[second:extracted.page_starts[2]]
    assert page_two["text"][page_two["mark_start"]:page_two["mark_end"]] == document.text[second:end]
    page_three = passage_context(document, start, end, page=3)  # none of the passage is on it
    assert page_three["shown_page"] == 3 and page_three["mark_start"] == page_three["mark_end"]
    with pytest.raises(Exception, match="has 3 page"):
        passage_context(document, start, end, page=4)


def test_the_passage_is_found_on_its_page_by_its_letters_and_the_png_is_exact():
    data = pdf_bytes(PAGES)
    _, extracted = extract(data, "book.pdf")
    starts = extracted.page_starts
    on_page_two = extracted.text[starts[1] + 30: starts[2] - 20]
    assert render_page(data, 2, on_page_two, width=300).marked >= 1
    assert render_page(data, 1, on_page_two, width=300).marked == 0  # not on page 1
    pixels = np.random.default_rng(0).integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    assert np.array_equal(png_pixels(encode_png(pixels)), pixels)


def test_the_modes_say_what_their_scores_mean_and_the_scores_are_that(server):
    url, store = server
    health = httpx.get(f"{url}/health").json()
    notes = {note["name"]: note for note in health["mode_notes"]}
    assert sorted(notes) == health["modes"]
    for note in notes.values():
        assert note["description"] and "\n" not in note["description"] and len(note["description"]) <= 100, note
        assert note["score"] and "\n" not in note["score"], note
    assert "1 / (60 + rank)" in notes["rag"]["score"] and notes["rag"]["order"].startswith("best first")
    assert "1 / (1 + place)" in notes["memorag"]["score"] and notes["memorag"]["order"].startswith("in the order of")
    assert notes["full"]["order"] is None and "always 0" in notes["full"]["score"]
    assert health["models"]["generator"] == "fake-echo" and health["models"]["generator_is_memory_base"] is False

    memorized = httpx.post(f"{url}/corpora/docs/memorize", json={"text": topic(0, 120)}, timeout=60).json()
    corpus = httpx.get(f"{url}/corpora/docs").json()
    assert corpus["memory_entries"] == store.pipeline("docs").memory.num_entries > 0
    assert corpus["memory_tokens"] == memorized["memory_tokens"] > corpus["memory_entries"]
    # what the notes say is what the numbers are: rag's 1 / (60 + rank) in the question's list, memorag's
    # 1 / (1 + place) in the round-robin union, listed in the order each note names
    rag = httpx.post(f"{url}/corpora/docs/ask", json={"query": topic(0, 6), "mode": "rag", "stream": False},
                     timeout=60).json()["evidence"]
    assert rag and all(item["score"] == round(1 / (60 + item["found_by"][0]["rank"]), 6) for item in rag)
    assert [item["score"] for item in rag] == sorted((item["score"] for item in rag), reverse=True)
    memorag = httpx.post(f"{url}/corpora/docs/ask", json={"query": topic(0, 6), "mode": "memorag",
                                                          "stream": False}, timeout=60).json()["evidence"]
    places = sorted(round(1 / item["score"]) - 1 for item in memorag)
    assert places[0] == 0 and len(set(places)) == len(places)  # the first taken scores 1.000, each place once
    assert memorag and all(item["score"] == round(1 / (1 + place), 6) for item, place in
                           zip(sorted(memorag, key=lambda item: -item["score"]), places, strict=True))
    assert [item["start_char"] for item in memorag] == sorted(item["start_char"] for item in memorag)
