"""The evidence inspector keeps the corpus the user names, in a real browser (headless chromium over the
DevTools protocol, tests/serve/browser.py) against `memorag serve` over tiny fake models: type a new name
while another corpus exists, choose a file, memorize, ask; every request goes to the new corpus. And a
cited passage over two PDF pages: choosing page 2 shows page 2's image and text and marks it as open.
Skipped when no chromium is installed."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.documents.builders import pdf_bytes
from tests.serve.browser import Chromium, find_chromium
from tests.serve.conftest import fake_store, serving, topic

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(find_chromium() is None,
                                 reason="no chromium on this machine (Debian: apt-get install -y chromium)")]

# every fetch the page makes, as [method, path], in order
RECORD_REQUESTS = """
window.requests = [];
const realFetch = window.fetch;
window.fetch = (url, options) => {
  window.requests.push([(options && options.method) || 'GET', new URL(String(url), location.href).pathname]);
  return realFetch(url, options);
};
"""
VIEWER = ("({heading: document.getElementById('viewer-text-heading').textContent, "
          "text: document.getElementById('viewer-text').textContent, "
          "textPage: document.getElementById('viewer-text').dataset.page, "
          "mark: (document.querySelector('#viewer-text mark') || {}).textContent || '', "
          "imagePage: document.getElementById('page-image').dataset.page, "
          "current: [...document.querySelectorAll('#viewer-pages button')].map(b => "
          "[b.textContent, b.getAttribute('aria-current'), b.classList.contains('current')])})")


def test_a_new_corpus_name_is_kept_through_choosing_files_memorizing_and_asking(tmp_path):
    survey = tmp_path / "survey.pdf"
    pages = [topic(0, 60), topic(1, 60)]
    survey.write_bytes(pdf_bytes(pages))
    store = fake_store(tmp_path / "store")
    with serving(store) as url:
        bible = httpx.post(f"{url}/corpora/bible/memorize", json={"text": topic(2, 60)}, timeout=60)
        assert bible.status_code == 200
        with Chromium.start() as browser, browser.open(f"{url}/") as page:
            page.resize(1400, 1000)
            page.wait_for("document.body?.dataset.ready === 'true'")
            assert page.evaluate("document.getElementById('corpus-name').value") == "bible"  # offered on opening
            header = page.evaluate("document.getElementById('server-status').textContent")
            assert "answers written by fake-echo" in header and "generator the memory" not in header, header
            options = page.evaluate("[...document.querySelectorAll('#mode-a option')].map(o => o.textContent)")
            assert "rag: standard RAG: the question alone retrieves; the generator reads the best chunks" in options
            assert all(": " in option and len(option) > 20 for option in options), options
            page.evaluate(RECORD_REQUESTS)
            page.type_text("#corpus-name", "survey")
            page.focus("#files")  # the user goes to choose files: the name field fires `change`
            page.wait_for("window.requests.some(([method, path]) => path === '/corpora')")
            page.set_files("#files", [survey])
            page.evaluate("document.getElementById('memorize').click()")
            status = page.wait_for("(s => s.startsWith('Memorized') || s.startsWith('Refused') ? s : '')"
                                   "(document.getElementById('memorize-status').textContent)")
            assert status.startswith("Memorized into survey: added survey.pdf"), status
            assert page.evaluate("document.getElementById('corpus-name').value") == "survey"
            assert page.evaluate("document.getElementById('corpus-shown').textContent") == "survey"
            corpus = httpx.get(f"{url}/corpora/survey", timeout=60).json()
            size = page.evaluate("document.getElementById('documents').textContent")
            assert (f"memory: {corpus['memory_tokens']:,} tokens read into {corpus['memory_entries']:,} entries "
                    "per layer") in size, size

            page.type_text("#query", topic(1, 6))
            page.evaluate("document.getElementById('compare').checked = false; "
                          "document.getElementById('mode-a').value = 'rag'; "
                          "document.getElementById('ask').click()")
            page.wait_for("document.querySelectorAll('.run[data-done=true]').length === 1", timeout=120)
            cites = page.evaluate("[...document.querySelectorAll('.cite')].map(c => c.textContent)")
            legend = page.evaluate("document.querySelector('.run .legend').textContent")
            assert legend.startswith("Listed best first") and "Score: 1 / (60 + rank)" in legend, legend
            assert cites and all(cite.startswith("survey.pdf") for cite in cites), cites
            requests = page.evaluate("window.requests")
            writes = [path for method, path in requests if method == "POST"]
            assert writes == ["/corpora/survey/memorize", "/corpora/survey/ask"], requests
            assert not [path for _, path in requests if "bible" in path], requests
            assert page.evaluate("document.getElementById('corpus-name').value") == "survey"

            # a passage over the end of page 1 and the start of page 2: each page shows its own text
            first = httpx.get(f"{url}/corpora/survey/passage", params={"doc": "survey.pdf", "start": 0, "end": 1},
                              timeout=60).json()
            assert first["shown_page"] == 1 and first["offset"] == 0
            end_of_one = len(first["text"])
            item = {"doc_id": "survey.pdf", "start_char": end_of_one - 30, "end_char": end_of_one + 30,
                    "citation": "survey.pdf, pp. 1-2"}
            page.evaluate(f"openSource('survey', {json.dumps(item)})")
            page.wait_for("document.getElementById('page-image').dataset.page === '1' && "
                          "document.getElementById('viewer-text').dataset.page === '1'")
            one = page.evaluate(VIEWER)
            assert one["heading"] == "Text of page 1" and one["imagePage"] == "1"
            assert one["current"] == [["page 1", "page", True], ["page 2", None, False]]
            assert one["text"] == first["text"] and one["mark"] and one["text"].endswith(one["mark"])

            page.evaluate("[...document.querySelectorAll('#viewer-pages button')][1].click()")
            page.wait_for("(i => i.dataset.page === '2' && i.complete && i.naturalWidth > 0)"
                          "(document.getElementById('page-image')) && "
                          "document.getElementById('viewer-text').dataset.page === '2'")
            two = page.evaluate(VIEWER)
            assert two["heading"] == "Text of page 2" and two["imagePage"] == "2"
            assert two["current"] == [["page 1", None, False], ["page 2", "page", True]]
            assert two["text"] != one["text"] and two["mark"] and two["text"].startswith(two["mark"])
            status = page.evaluate("document.getElementById('viewer-page-status').textContent")
            assert status.startswith("page 2"), status
            assert not [line for line in page.console if line.startswith("exception")], page.console


def test_a_long_passage_preview_is_scrolled_to_the_words_that_matched(tmp_path):
    store = fake_store(tmp_path / "store")
    filler = " ".join(["lorem ipsum dolor sit amet"] * 60)
    item = {"doc_id": "notes.txt", "citation": "notes.txt", "score": 0.5, "queries": [0, 1],
            "text": f"{filler} the northern channel silts near the river mouth. {filler} dredging"}
    with serving(store) as url, Chromium.start() as browser, browser.open(f"{url}/") as page:
        page.resize(1400, 1000)
        page.wait_for("document.body?.dataset.ready === 'true'")
        page.evaluate("(() => { const run = document.getElementById('run-template').content.firstElementChild"
                      ".cloneNode(true); run.dataset.mode = 'rag'; run.dataset.query = 'Why does the northern "
                      "channel silt?'; document.getElementById('runs').replaceChildren(run); "
                      f"renderEvidence(run, [{json.dumps(item)}], ['dredging plans']); }})()")
        page.wait_for("document.querySelector('.passage').scrollTop > 0")
        shown = page.evaluate("(p => ({marks: [...p.querySelectorAll('mark')].map(m => m.textContent), "
                              "top: p.scrollTop, height: p.clientHeight, full: p.scrollHeight, "
                              "channel: [...p.querySelectorAll('mark')].find(m => m.textContent === 'channel')"
                              ".offsetTop, text: p.textContent}))(document.querySelector('.passage'))")
        assert shown["marks"] == ["northern", "channel", "dredging"], shown["marks"]  # whole words: "silt" is not "silts"
        assert shown["text"] == item["text"]  # marked, not changed
        assert shown["full"] > 3 * shown["height"]  # the preview shows a part of the passage only
        assert shown["top"] <= shown["channel"] <= shown["top"] + shown["height"], shown  # the match in sight
