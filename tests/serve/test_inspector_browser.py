"""The evidence inspector in a real browser: Debian's chromium, headless, driven over the DevTools
protocol (tests/serve/browser.py), against `memorag serve` on 127.0.0.1 over tiny fake models.
Upload files that cannot be read and see each refused by name; upload a PDF and a text that holds
markup, ask in two modes, watch the answer stream, open a citation and see its page with the
passage marked. Skipped when no chromium is installed."""

from __future__ import annotations

import json

import pytest

from tests.documents.builders import pdf_bytes, scanned_pdf_bytes
from tests.serve.browser import Chromium, find_chromium
from tests.serve.conftest import FakeSlowGenerator, fake_store, serving, topic

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(find_chromium() is None,
                                 reason="no chromium on this machine (Debian: apt-get install -y chromium)")]

# a document that holds a script and HTML, which the page must show as text and never run
PLANTED = (f"{topic(1, 6)} <script>document.body.dataset.pwned = 'script'</script> "
           f"<img src=x onerror=\"document.body.dataset.pwned = 'img'\"> <b>bold</b> {topic(1, 6)}")

RECORD_ANSWER = """
window.answerLengths = [];
new MutationObserver(() => {
  const answer = document.querySelector('.run .answer');
  if (answer) window.answerLengths.push(answer.textContent.length);
}).observe(document.getElementById('runs'), {subtree: true, childList: true, characterData: true});
"""


def click(page, selector: str) -> None:
    page.evaluate(f"document.querySelector({json.dumps(selector)}).click()")


def test_upload_ask_stream_and_open_a_cited_page(tmp_path):
    book, planted = tmp_path / "book.pdf", tmp_path / "planted.txt"
    book.write_bytes(pdf_bytes([topic(0), topic(1, 80), topic(2)]))
    planted.write_text(PLANTED)
    scan, photo = tmp_path / "scan.pdf", tmp_path / "photo.png"
    scan.write_bytes(scanned_pdf_bytes())
    photo.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(40))
    store = fake_store(tmp_path / "store", generator=FakeSlowGenerator(pieces=8, delay=0.1))
    with serving(store) as url, Chromium.start() as browser, browser.open(f"{url}/") as page:
        page.resize(1400, 1000)
        page.wait_for("document.body?.dataset.ready === 'true'")
        page.evaluate("document.getElementById('corpus-name').value = 'books'")
        page.set_files("#files", [scan, photo])
        click(page, "#memorize")
        page.wait_for("document.getElementById('memorize-status').textContent.startsWith('Refused')")
        refusals = page.evaluate("[...document.querySelectorAll('#refusals li')].map(li => li.textContent)")
        assert [line.split(":")[0] for line in refusals] == ["scan.pdf", "photo.png"], refusals
        assert "ocrmypdf" in refusals[0]

        page.set_files("#files", [book, planted])
        click(page, "#memorize")
        status = page.wait_for("(s => s.startsWith('Memorized') || s.startsWith('Refused') ? s : '')"
                               "(document.getElementById('memorize-status').textContent)")
        assert status.startswith("Memorized into books: added book.pdf, planted.txt"), status
        assert page.evaluate("document.getElementById('memorize-progress').value") == 1

        page.evaluate(RECORD_ANSWER)
        page.evaluate(f"document.getElementById('query').value = {json.dumps(topic(1, 6))}")
        page.evaluate("document.getElementById('mode-a').value = 'memorag'; "
                      "document.getElementById('mode-b').value = 'rag'")
        click(page, "#ask")
        page.wait_for("document.querySelectorAll('.run[data-done=true]').length === 2", timeout=120)
        runs = page.evaluate("[...document.querySelectorAll('.run')].map(run => ({"
                             "mode: run.dataset.mode, answer: run.querySelector('.answer').textContent, "
                             "timings: run.querySelector('.timings').textContent, "
                             "chips: [...run.querySelectorAll('.evidence .chip')].map(chip => chip.textContent), "
                             "cites: [...run.querySelectorAll('.cite')].map(cite => cite.textContent)}))")
        assert [run["mode"] for run in runs] == ["memorag", "rag"]
        for run in runs:
            assert run["answer"] == " ".join(f"w{i}" for i in range(8)) and "total" in run["timings"]
            assert any(chip.startswith("query") for chip in run["chips"])
            assert any(cite.startswith("book.pdf, p.") for cite in run["cites"])
        # evidence that names its lists with their ranks (`found_by`) shows them; evidence without either field, nothing
        found = page.evaluate("fetchedBy({found_by: [{query_index: 2, query: '<b>why</b>', rank: 3, score: 0.5}], "
                              "queries: [2]}, []).map(node => [node.textContent, node.title])")
        assert found == [["clue 2 #3", "<b>why</b> (rank 3, score 0.500 in this list)"]]
        assert page.evaluate("fetchedBy({doc_id: 'a'}, []).length") == 0
        lengths = page.evaluate("window.answerLengths")
        assert len({length for length in lengths if 0 < length < len(runs[0]["answer"])}) >= 3  # it streamed

        # the planted markup is text: shown literally, nothing of it ran or became an element
        passages = page.evaluate("[...document.querySelectorAll('.passage')].map(p => p.textContent).join(' ')")
        assert "<b>bold</b>" in passages  # its passage that the query fetched (the whole text: in the source, below)
        assert page.evaluate("document.body.dataset.pwned") is None
        assert page.evaluate("document.querySelectorAll('#runs script, #runs img, #runs b').length") == 0

        cite = "[...document.querySelectorAll('{}')].find(c => c.textContent.startsWith('{}'))"
        page.evaluate(cite.format(".run:last-child .cite", "book.pdf, p. 2") + ".click()")  # rag's, on page 2
        page.wait_for("(i => !i.hidden && i.complete && i.naturalWidth > 0)(document.getElementById('page-image'))")
        shown = page.evaluate("({status: document.getElementById('viewer-page-status').textContent, "
                              "citation: document.getElementById('viewer-citation').textContent, "
                              "mark: document.querySelector('#viewer-text mark').textContent, "
                              "page: document.getElementById('page-image').dataset.page})")
        assert shown["citation"].startswith("book.pdf, p. 2") and shown["page"] == "2"
        assert "the passage is marked" in shown["status"] and shown["mark"].strip()

        page.evaluate(cite.format(".cite", "planted.txt") + ".click()")
        page.wait_for("document.getElementById('viewer-citation').textContent.startsWith('planted.txt') && "
                      "document.querySelector('#viewer-text mark') !== null")
        text = page.evaluate("document.getElementById('viewer-text').textContent")
        assert "<script>document.body.dataset.pwned" in text and "onerror=" in text
        assert page.evaluate("document.querySelectorAll('#viewer-text *').length") == 1  # the <mark> only
        assert page.evaluate("document.getElementById('page-image').hidden") is True
        assert page.evaluate("document.body.dataset.pwned") is None
        assert not [line for line in page.console if line.startswith("exception")], page.console
